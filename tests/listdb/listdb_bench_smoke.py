#!/usr/bin/env python3
"""listdb_bench_smoke.py - tips-listdb-bench end to end at tiny sizes (docs/listdb.md).

Runs each mode once and checks that every stdout line is a JSON object and that the
invariants the measurements rest on hold:
  flush-timeline  every put is flushed; the per-interval series add up to the puts; IUL's
                  background thread flushes (almost) no cache line while WAL's flushes at
                  least one per entry (the point of Index-Unified Logging);
  numa            every get found its value, every key is in L1, an oblivious layout has
                  about (D-1)/D of its visits in another domain, a braided one fewer;
  recovery        every acknowledged key is found after SIGKILL (recovered = 1) and after a
                  clean close (recovered = 0); a paced writer keeps to its rate;
  puts            every put done, something merged, Zipper's fences per merged element
                  near 1 (1.08 expected), CPU per put counted for writers and background;
  gets            every get found its value; from L1, the second-chance cache gave most
                  gets their start and they visited few elements (about 7; 11.7 with the
                  smaller cache of before); with --memtable above --keys, the MemTable
                  answered every get (no PMTable visited);
and that a pool path that exists is refused (exit 2).
Usage: listdb_bench_smoke.py PATH-TO-tips-listdb-bench
"""
import json
import os
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(tool, args, pool):
    cmd = [tool] + args + ["--pool", pool]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    sys.stderr.write(p.stderr)
    objs = []
    for line in p.stdout.splitlines():
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            check(False, "%s: not JSON (%s): %r" % (args[0], e, line[:200]))
    return p.returncode, objs


def main():
    tool = sys.argv[1]
    pool = "/dev/shm/tips-test-listdb-bench-%d" % os.getpid()

    # flush-timeline, both flush modes in one invocation.
    keys = 60000
    rc, objs = run(tool, ["flush-timeline", "--both", "--keys", str(keys), "--memtable",
                          "6000", "--sample-ms", "10", "--pool-size", "64M"], pool)
    check(rc == 0, "flush-timeline exit %d" % rc)
    check([o.get("flush") for o in objs] == ["iul", "wal"], "flush-timeline: iul then wal")
    for o in objs:
        f = o["flush"]
        check(o["keys"] == keys and o["entries_flushed"] == keys,
              "%s: %d of %d entries flushed" % (f, o["entries_flushed"], keys))
        check(0 <= o["lag_at_put_end"] <= keys, "%s: lag %d" % (f, o["lag_at_put_end"]))
        check(o["memtables_flushed"] == keys // 6000, "%s: %d MemTables flushed"
              % (f, o["memtables_flushed"]))
        n = o["samples"]
        series = ["t_s", "put_mops_series", "flush_mops_series", "immutable_series",
                  "stall_ms_series"]
        check(n > 0 and all(len(o[s]) == n for s in series), "%s: series lengths" % f)
        # Each interval's count is rate x (t - t_prev), rebuilt from printed numbers: the
        # rates have 4 significant digits (relative error <= 5e-4) and the times 4
        # decimals (each end +-0.00005 s, so an interval +-0.0001 s). A sampler that wakes
        # late makes the next interval short, and a whole MemTable's flush (a spike of
        # 6000 entries) in an interval of 0.3 ms is then known only to +-33%: so the bound
        # is summed interval by interval instead of a fixed 1% (which a loaded machine
        # broke: "series add up to 62038 flushed" of 60000, one spike's share).
        t_prev, puts, flushed, puts_err, flushed_err = 0.0, 0.0, 0.0, 0.0, 0.0
        for t, p, fl in zip(o["t_s"], o["put_mops_series"], o["flush_mops_series"]):
            dt = t - t_prev
            puts += p * 1e6 * dt
            flushed += fl * 1e6 * dt
            puts_err += p * 1e6 * (1e-4 + 5e-4 * abs(dt))
            flushed_err += fl * 1e6 * (1e-4 + 5e-4 * abs(dt))
            t_prev = t
        check(abs(puts - keys) <= puts_err + 10,
              "%s: series add up to %.0f puts (+-%.0f)" % (f, puts, puts_err))
        check(abs(flushed - keys) <= flushed_err + 10,
              "%s: series add up to %.0f flushed (+-%.0f)" % (f, flushed, flushed_err))
        check(max(o["immutable_series"]) <= o["max_immutable"] + 1, "%s: immutable bound" % f)
        check(o["put_mops"] > 0 and o["write_stall_s"] >= 0, "%s: totals" % f)
        # Sampled: a flush shorter than a sampling interval may never be seen busy.
        check(0 <= o["flush_busy_s"] <= o["total_s"] + 0.001, "%s: flush busy %.3f s of %.3f"
              % (f, o["flush_busy_s"], o["total_s"]))
    if len(objs) == 2:
        iul, wal = objs
        check(wal["background_lines_flushed"] >= keys,
              "WAL background flushed %d lines for %d entries"
              % (wal["background_lines_flushed"], keys))
        check(iul["background_lines_flushed"] * 10 < wal["background_lines_flushed"],
              "IUL background flushed %d lines (WAL %d)"
              % (iul["background_lines_flushed"], wal["background_lines_flushed"]))

    # numa, braided then oblivious.
    keys = 40000
    rc, objs = run(tool, ["numa", "--keys", str(keys), "--memtable", "4096", "--domains", "4",
                          "--threads", "4", "--pool-size", "32M"], pool)
    check(rc == 0, "numa exit %d" % rc)
    check([o.get("layout") for o in objs] == ["braided", "oblivious"], "numa: both layouts")
    for o in objs:
        lay = o["layout"]
        check(o["ok"] and o["get_errors"] == 0 and o["put_errors"] == 0, "%s: errors" % lay)
        check(o["l1_elements"] == keys, "%s: %d in L1" % (lay, o["l1_elements"]))
        check(o["traversals"] > o["gets"] and
              o["cross_domain_traversals"] < o["traversals"], "%s: traversals" % lay)
        check(0 < o["compaction_cross"] < o["compaction_traversals"],
              "%s: compaction traversals" % lay)
    if len(objs) == 2:
        br, ob = objs
        check(0.65 < ob["cross_share"] < 0.85,
              "oblivious cross share %.3f, expected about 0.75" % ob["cross_share"])
        check(br["cross_share"] < ob["cross_share"] * 0.8,
              "braided cross share %.3f not below oblivious %.3f"
              % (br["cross_share"], ob["cross_share"]))

    # gets: from L1 and the caches, then from one MemTable (the DRAM reference).
    keys = 40000
    rc, objs = run(tool, ["gets", "--keys", str(keys), "--memtable", "4096",
                          "--pool-size", "32M"], pool)
    check(rc == 0 and len(objs) == 1, "gets exit %d, %d objects" % (rc, len(objs)))
    for o in objs:
        check(o["ok"] and o["get_errors"] == 0 and o["gets"] == keys, "gets: errors")
        check(o["answered_by"] == "L1 and the caches", "gets: answered by %s" % o["answered_by"])
        check(o["second_chance_start_share"] > 0.5 and 0 < o["cache_hit_ratio"] < 0.5,
              "gets: second-chance start %.3f, hash hits %.3f"
              % (o["second_chance_start_share"], o["cache_hit_ratio"]))
        check(1 < o["visits_per_get"] < 10, "gets: %.1f visits per get" % o["visits_per_get"])
        check(o["cpu_ns_per_get"] > 0, "gets: CPU per get")
    rc, objs = run(tool, ["gets", "--keys", str(keys), "--memtable", "65536",
                          "--pool-size", "32M"], pool)
    check(rc == 0 and len(objs) == 1, "gets (MemTable) exit %d, %d objects" % (rc, len(objs)))
    for o in objs:
        check(o["ok"] and o["get_errors"] == 0, "gets (MemTable): errors")
        check(o["answered_by"].startswith("MemTable") and o["visits_per_get"] == 0,
              "gets (MemTable): answered by %s, %.1f visits" % (o["answered_by"],
                                                                 o["visits_per_get"]))

    # recovery: a paced and an unpaced crash, then the clean close.
    rc, objs = run(tool, ["recovery", "--rates", "20k,unlimited", "--seconds", "0.4",
                          "--memtable", "4096", "--pool-size", "128M"], pool)
    check(rc == 0, "recovery exit %d" % rc)
    check([o.get("shutdown") for o in objs] == ["sigkill", "sigkill", "clean"],
          "recovery: two crashes and a clean close")
    for o in objs:
        what = "recovery %s %s" % (o["shutdown"], o["rate_target"])
        check(o["ok"] and o["missing"] == 0 and o["wrong"] == 0 and o["check_rc"] == 0,
              "%s: missing %d wrong %d" % (what, o["missing"], o["wrong"]))
        check(o["acked"] > 0 and o["l1_elements"] >= o["acked"], "%s: acked" % what)
        check(o["recovered"] == (1 if o["shutdown"] == "sigkill" else 0), "%s: recovered" % what)
        check(o["open_ms"] > 0, "%s: open time" % what)
        if o["shutdown"] == "sigkill":
            check(o["recovery_ms"] > 0, "%s: recovery time" % what)
    if objs:
        paced = objs[0]
        check(paced["rate_achieved"] <= 20000 * 1.05,
              "paced writer ran at %.0f ops/s (target 20000)" % paced["rate_achieved"])

    # puts: two writers on the default configuration (small MemTables so that flushes
    # and compactions run); Zipper fences once per merged element plus once per upper
    # layer beyond the first (1 + 1/12 on average): a return to 2 + 1 per upper layer
    # (2.33) fails here.
    keys = 200000
    rc, objs = run(tool, ["puts", "--keys", str(keys), "--threads", "2", "--memtable", "4096",
                          "--pool-size", "128M"], pool)
    check(rc == 0 and len(objs) == 1, "puts exit %d, %d objects" % (rc, len(objs)))
    for o in objs:
        check(o["puts"] == keys, "puts: %d of %d" % (o["puts"], keys))
        check(o["entries_merged"] > 0 and o["compactions"] > 0, "puts: nothing merged")
        check(1.0 <= o["fences_per_merged_element"] <= 1.3,
              "puts: %.3f fences per merged element" % o["fences_per_merged_element"])
        check(o["writer_cpu_ns_per_put"] > 0 and o["background_cpu_ns_per_put"] > 0,
              "puts: CPU per put")
        check(o["compaction_cpu_ns_per_put"] > 0 and o["flush_cpu_ns_per_put"] > 0,
              "puts: flush and compaction CPU")
        check(0 <= o["stall_share"] <= 1, "puts: stall share %.3f" % o["stall_share"])
        check(o["max_l0"] == 8, "puts: the default L0 bound, got %s" % o["max_l0"])
    # --max-l0 sets the bound the writers stall at (1..60, as tips_listdb_open takes).
    rc, objs = run(tool, ["puts", "--keys", "20000", "--threads", "1", "--memtable", "4096",
                          "--pool-size", "64M", "--max-l0", "2"], pool)
    check(rc == 0 and len(objs) == 1 and objs[0]["max_l0"] == 2,
          "puts --max-l0 2: exit %d, %s" % (rc, objs and objs[0].get("max_l0")))
    p = subprocess.run([tool, "puts", "--keys", "1000", "--max-l0", "61", "--pool", pool],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and not os.path.exists(pool), "puts --max-l0 61 is refused")

    # An existing pool is refused, not overwritten.
    with open(pool, "w") as f:
        f.write("not a pool")
    try:
        p = subprocess.run([tool, "numa", "--keys", "1000", "--pool", pool],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2, "existing pool: exit %d" % p.returncode)
        with open(pool) as f:
            check(f.read() == "not a pool", "existing pool was touched")
    finally:
        os.unlink(pool)

    for d in range(8):
        path = pool if d == 0 else "%s.d%d" % (pool, d)
        check(not os.path.exists(path), "%s left behind" % path)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("listdb_bench_smoke: ok", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
