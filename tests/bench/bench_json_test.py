#!/usr/bin/env python3
"""bench_json_test.py - tips-bench's JSON documents and the counters in them.

Checks, on tiny workloads:
  - the single-run schema: every documented field, with its type;
  - the figures agree with each other: op counts add up to the operations, the mix
    follows the ratios, the timeline adds up to the operations, percentiles are ordered,
    the latency CDF rises to 1;
  - the counters: a tips-* write costs exactly 1 fence and 1 flushed line (its sealed
    OLog record), a read 0,
    a dram-* index none at all; PM bytes per operation only for tips-*; framework
    counters present and in range for tips-* only; pmdk-hash (if listed) persists
    through libpmemobj, which the counters do not see: its persist fields are null
    ("counted": false), never 0, and compare shows them null and gives it dram-hash as
    its twin;
  - listdb: its "listdb" object carries every field of struct tips_listdb_stats, the knobs
    and per-phase flush/compaction counters; with small MemTables the run flushes and
    compacts; a write costs one fence (its log entry; a sampled write that also opened
    a log chunk pays the heap's few more, hence the small tolerance), a read none;
    --listdb-settle is the only way it waits between the phases;
  - --upsert: recorded in the config, and tips-hash's blind puts cost what its
    checked writes do (1 fence, 1 line);
  - null (the harness alone): runs every workload, persists nothing;
  - --batch N: recorded in the config; a tips-* load in batches of 16 puts costs 2
    fences per commit, 1/8 per write, and a dram-* twin runs it too;
  - --max-seconds stops the run phase and says so; --seconds S runs it for S seconds
    and, when its inserts reach the bound --ops sets (what pools are sized for), stops
    there with insert_capped;
  - background CPU by role (persist, replay, gc, the rest) adds up to the background;
    a tips-* load shows its replay workers' CPU, a dram-* run none;
  - write stalls: the intervals below half the median and the longest run of them are
    what the document's own timeline says; write latency percentiles are ordered;
  - harness_ns_per_op: the null run's worker CPU, null for other indexes;
  - compare --threads 1,2: every cell at each count, ratios against the twin at the
    same count; workload E listed as not applicable (not run) for hash indexes;
  - the same seed gives the same operations, another seed others;
  - the compare schema: medians are the medians of the runs, ratios the ratios of the
    medians, one embedded document per completed run;
  - compare --one-load: one load per index shared by its workloads' runs, in order, each
    run phase with its own insert bound (a capped phase leaves no id uninserted).

usage: bench_json_test.py TIPS_BENCH_EXE
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args, path, env=None):
    """Runs tips-bench with @args (and @env added to the environment); its JSON."""
    cmd = [BENCH] + args + ["--json", path]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, **env) if env else None)
    if proc.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd), proc.returncode, proc.stderr))
    with open(path) as f:
        return json.load(f)


NUMBER = (int, float)
PHASE_SCHEMA = {
    "ops": int, "seconds": NUMBER, "ops_per_sec": NUMBER, "capped": bool,
    "cpu_ns_per_op": dict,
    "op_counts": dict, "removed_key_misses": int, "latency_ns": dict,
    "latency_cdf": list, "timeline_ms": int, "timeline": list,
    "timeline_stddev": NUMBER, "persist": dict, "insert_capped": bool, "stalls": dict,
    "write_latency_ns": dict, "timeline_sched_us": list,
}
ROLES = ["persist", "replay", "gc", "other_background"]


def expected_stalls(timeline):
    """The stall figures of a timeline, as documented: its full intervals (the last one
    is partial) below half their median, and the longest run of them."""
    full = timeline[:-1] if len(timeline) > 1 else timeline
    if not full:
        return 0, 0
    med = statistics.median(full)
    count = longest = run_ = 0
    for x in full:
        if x < med / 2:
            count += 1
            run_ += 1
            longest = max(longest, run_)
        else:
            run_ = 0
    return count, longest
SCHED_CHECKED = 0


def check_sched(where, ph, st, threads):
    """timeline_sched_us: per interval [us on a CPU, us waiting for one, us of host
    steal] of the clients, or null; the stall shares are those of the stalled ones."""
    sched, timeline = ph["timeline_sched_us"], ph["timeline"]
    check(len(sched) == len(timeline), where + ": one sched entry per interval")
    ms = ph["seconds"] * 1000
    global SCHED_CHECKED
    for iv in sched:
        check(iv is None or (len(iv) == 3 and all(isinstance(x, int) and x >= 0 for x in iv)),
              "%s: sched entry %s" % (where, iv))
    known = [iv for iv in sched[:-1] if iv is not None]
    # a phase of 10 intervals or more has full ones, sampled while the workers lived
    if len(timeline) >= 10:
        check(known, where + ": the full intervals' sched is known")
        # on a CPU and waiting for one cannot add up to more than the clients' time
        # (5% and 10 ms of allowance for where the sampler's readings fall)
        used = sum(iv[0] + iv[1] for iv in known)
        check(used <= threads * (ms * 1000 * 1.05 + 10000),
              "%s: the intervals hold %d us, more than %d clients had" % (where, used, threads))
        check(sum(iv[0] for iv in known) > 0, where + ": the clients ran")
        SCHED_CHECKED += 1
    med = st["median_interval_ops"]
    stalled = [iv for x, iv in zip(timeline[:-1], sched[:-1])
               if x < med / 2 and iv is not None]
    if stalled:
        span = len(stalled) * threads * st["interval_ms"] * 1000.0
        cpu = sum(iv[0] for iv in stalled) / span
        check(abs(st["clients_on_cpu_share"] - cpu) < 1e-3,
              "%s: clients_on_cpu_share %s, the intervals say %s" % (where, st, cpu))
    else:
        check(st["clients_on_cpu_share"] is None and st["host_steal_ms"] is None,
              where + ": no stalled interval, no shares")


PERSIST_FIELDS = ["flushes_per_write", "fences_per_write", "flushes_per_read",
                  "fences_per_read", "fences_per_write_all_threads", "pm_bytes_per_op"]
FRAMEWORK_FIELDS = ["cache_hit_ratio", "cache_lookups", "workers_avg", "workers_final",
                    "reclamations", "reclaim_graces", "ulog_logged", "ulog_skipped_fresh",
                    "ulog_skipped_logged", "ulog_values", "replayed", "writer_waits",
                    "gc_unlinked", "epochs"]
OPS = ["read", "insert", "update", "remove", "scan"]


def check_phase(doc, name, tips, counted=True):
    ph = doc[name]
    where = "%s %s" % (doc["index"], name)
    for field, kind in PHASE_SCHEMA.items():
        check(isinstance(ph.get(field), kind), "%s.%s is a %s" % (where, field, kind))
    check(sorted(ph["op_counts"]) == sorted(OPS), where + ": op_counts names every op")
    check(sum(ph["op_counts"].values()) == ph["ops"], where + ": op counts add up")
    check(sum(ph["timeline"]) == ph["ops"], where + ": the timeline adds up to the ops")
    check(abs(ph["ops_per_sec"] - ph["ops"] / ph["seconds"]) <= 1e-3 * ph["ops_per_sec"] + 1,
          where + ": ops_per_sec is ops / seconds")
    lat = ph["latency_ns"]
    for q in ["samples", "p50", "p90", "p99", "p999", "p9999", "max"]:
        check(isinstance(lat.get(q), int), "%s.latency_ns.%s" % (where, q))
    check(lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["p9999"] <= lat["max"],
          where + ": percentiles are ordered")
    cdf = ph["latency_cdf"]
    if lat["samples"]:
        check(all(a[0] < b[0] and a[1] < b[1] for a, b in zip(cdf, cdf[1:])),
              where + ": the CDF rises")
        check(cdf and cdf[-1] == [lat["max"], 1.0], where + ": the CDF ends at (max, 1)")
    else:
        check(cdf == [], where + ": no samples, no CDF")
    cpu = ph["cpu_ns_per_op"]
    for role in ROLES:
        check(isinstance(cpu.get(role), NUMBER) and cpu[role] >= 0,
              "%s.cpu_ns_per_op.%s" % (where, role))
    named = sum(cpu[r] for r in ROLES)
    # other_background is the background less the named roles (never below 0): the
    # roles add up to it, or exceed it by the clocks' skew alone.
    check(named >= cpu["background"] - 1.0 and
          (cpu["other_background"] == 0 or abs(named - cpu["background"]) < 1.0),
          "%s: the roles add up to the background: %s" % (where, cpu))
    if not tips:
        check(cpu["persist"] == 0 and cpu["replay"] == 0 and cpu["gc"] == 0,
              where + ": no TIPS background outside tips-*")
    st = ph["stalls"]
    want = expected_stalls(ph["timeline"])
    check((st.get("intervals_below_half_median"), st.get("longest_run")) == want,
          "%s: stalls %s, the timeline says %s" % (where, st, want))
    check_sched(where, ph, st, doc["config"]["threads"])
    wl = ph["write_latency_ns"]
    for q in ["samples", "p50", "p99", "p999", "max"]:
        check(isinstance(wl.get(q), int), "%s.write_latency_ns.%s" % (where, q))
    check(wl["p50"] <= wl["p99"] <= wl["p999"] <= wl["max"],
          where + ": write percentiles are ordered")
    check(wl["samples"] <= lat["samples"], where + ": write samples are some of the samples")
    for field in PERSIST_FIELDS:
        if counted:
            check(isinstance(ph["persist"].get(field), NUMBER), "%s.persist.%s" % (where, field))
        else:
            check(field in ph["persist"] and ph["persist"][field] is None,
                  "%s.persist.%s is null (not counted)" % (where, field))
    check(ph["persist"].get("counted") is counted, where + ": persist.counted")
    check(("framework" in ph) == tips, where + ": framework counters only for tips-*")
    if tips:
        fw = ph["framework"]
        for field in FRAMEWORK_FIELDS:
            check(isinstance(fw.get(field), NUMBER), "%s.framework.%s" % (where, field))
        check(0 <= fw["cache_hit_ratio"] <= 1, where + ": hit ratio in [0, 1]")


TIPS_LISTDB_STATS = ["puts", "deletes", "gets", "memtables_flushed", "entries_flushed",
                "compactions", "entries_merged", "obsolete_marked", "chunks_reclaimed",
                "chunks_live", "write_stall_ns", "immutable_now", "l0_now", "cache_hits",
                "cache_lookups", "second_chance_hits", "traversals",
                "cross_domain_traversals", "recovery_ms", "recovered_entries", "recovered"]
TIPS_LISTDB_PHASE = ["memtables_flushed", "entries_flushed", "compactions", "entries_merged",
                "obsolete_marked", "chunks_reclaimed", "write_stall_ns", "cache_hits",
                "cache_lookups", "second_chance_hits"]


def check_listdb(doc, memtable, settle=False):
    ldb = doc.get("listdb")
    check(isinstance(ldb, dict), "listdb: the JSON has a listdb object")
    if not isinstance(ldb, dict):
        return
    for field in TIPS_LISTDB_STATS:
        check(isinstance(ldb.get(field), NUMBER), "listdb.%s is a number" % field)
    for phase in ["load", "run"]:
        for field in TIPS_LISTDB_PHASE:
            check(isinstance(ldb.get(phase, {}).get(field), int),
                  "listdb.%s.%s is an integer" % (phase, field))
    cfg = ldb.get("config", {})
    check(cfg.get("memtable_entries") == memtable, "listdb: config echoes the MemTable size")
    check(cfg.get("settle") is settle, "listdb: config.settle")
    check(ldb["recovered"] == 0, "listdb: a fresh store did not recover")
    records, ops = doc["config"]["records"], doc["config"]["ops"]
    check(ldb["puts"] + ldb["deletes"] >= records, "listdb: every load insert is a put")
    # With MemTables far smaller than the writes, the background work shows.
    if records + ops >= 4 * memtable:
        check(ldb["load"]["memtables_flushed"] + ldb["run"]["memtables_flushed"] +
              (1 if settle else 0) > 0, "listdb: MemTables were flushed")
        check(ldb["memtables_flushed"] >= 1, "listdb: flushes counted")
    if settle:
        check(doc["settle_ms"] >= 0, "listdb: settle_ms with --listdb-settle")
    else:
        check(doc["settle_ms"] == 0, "listdb: no settle wait unless --listdb-settle")
    p = doc["run"]["persist"]
    check(p["counted"] is True, "listdb: its persistence is counted")
    check(p["fences_per_read"] == 0 and p["flushes_per_read"] == 0, "listdb: reads are free")
    if doc["run"]["op_counts"]["update"] + doc["run"]["op_counts"]["insert"]:
        check(1.0 <= p["fences_per_write"] <= 1.05,
              "listdb: one fence per write, got %s" % p["fences_per_write"])


def check_single(doc, tips, records, ops, ratios, counted=True):
    check(isinstance(doc.get("index"), str), "index is a string")
    cfg = doc["config"]
    check(cfg["records"] == records and cfg["ops"] == ops, "config echoes the sizes")
    check(isinstance(doc.get("peak_rss_kib"), int) and doc["peak_rss_kib"] > 0, "peak RSS")
    # The wait for the load's replay: only a tips-* index has one.
    check(isinstance(doc.get("settle_ms"), NUMBER) and doc["settle_ms"] >= 0, "settle_ms")
    listdb_settled = doc.get("listdb", {}).get("config", {}).get("settle") is True
    check(tips or listdb_settled or doc["settle_ms"] == 0,
          "no replay to wait for outside tips-* (listdb: unless --listdb-settle)")
    # counted None: listdb, counted (check_listdb() judges its figures)
    check_phase(doc, "load", tips, counted is not False)
    check_phase(doc, "run", tips, counted is not False)
    load, run_ = doc["load"], doc["run"]
    check(load["ops"] == records and load["op_counts"]["insert"] == records,
          "the load inserts every record")
    check(run_["ops"] == ops, "the run does every operation")
    for op, share in ratios.items():
        got = run_["op_counts"][op] / ops
        check(abs(got - share) < 0.03, "%s: %s share %.3f, want %.2f" % (doc["index"], op, got, share))
    p = run_["persist"]
    if tips:
        # Every sampled write is one sealed OLog record: 1 line, 1 fence (8-byte keys
        # and values: the record is one line).
        check(p["fences_per_write"] == 1.0 and p["flushes_per_write"] == 1.0,
              "tips: 1 fence and 1 line per write, got %s" % p)
        check(p["fences_per_read"] == 0 and p["flushes_per_read"] == 0, "tips: reads are free")
        check(p["pm_bytes_per_op"] > 0, "tips: PM bytes are written")
        check(load["persist"]["fences_per_write"] == 1.0, "tips: 1 fence per load insert")
        fw = run_["framework"]
        check(fw["replayed"] > 0 and fw["reclamations"] >= 0, "tips: replay ran")
        # + 1: a reclamation under way at the phase's first snapshot may count its
        # wait in the phase and itself before it.
        check(0 <= fw["reclaim_graces"] <= fw["reclamations"] + 1,
              "tips: only reclamations wait for a grace period, got %s" % fw)
        check(load["cpu_ns_per_op"]["replay"] > 0, "tips: the replay workers' CPU is seen")
    elif counted is None:
        pass  # listdb: check_listdb()
    elif counted:
        for field in PERSIST_FIELDS:
            check(p[field] == 0, "dram: no persistence cost (%s = %s)" % (field, p[field]))
    if run_["op_counts"]["update"] + run_["op_counts"]["insert"] and \
            doc["config"].get("batch", 0) == 0:
        check(run_["write_latency_ns"]["samples"] > 0, "sampled writes have latencies")
    wl = load["write_latency_ns"]
    check(wl["samples"] > 0 and wl["p50"] <= wl["p999"],
          "the load's sampled inserts have latencies, got %s" % wl)
    check(doc.get("harness_ns_per_op", 0) is None, "harness_ns_per_op: null unless null")


def main():
    tmp = tempfile.mkdtemp(prefix="tips-bench-json.")
    path = lambda name: os.path.join(tmp, name)  # noqa: E731
    records, ops = 20000, 12000  # different, so a phase cannot pass with the other's figures
    common = ["--records", str(records), "--ops", str(ops), "--latency-sample", "1",
              "--sample-ms", "5"]
    for index in ["dram-hash", "tips-hash"]:
        tips = index.startswith("tips-")
        doc = run(["--index", index, "--workload", "a"] + common, path(index + ".json"))
        check_single(doc, tips, records, ops, {"read": 0.5, "update": 0.5})
        doc = run(["--index", index, "--read", "0.4", "--insert", "0.3", "--remove", "0.2",
                   "--update", "0.1"] + common, path(index + "-mix.json"))
        check_single(doc, tips, records, ops,
                     {"read": 0.4, "insert": 0.3, "remove": 0.2, "update": 0.1})

    # listdb: its counters, with MemTables small enough to flush and compact in the run.
    listed = subprocess.run([BENCH, "--list"], stdout=subprocess.PIPE, text=True).stdout
    if any(line.split()[:1] == ["listdb"] for line in listed.splitlines()):
        doc = run(["--index", "listdb", "--workload", "a", "--listdb-memtable", "1000"] +
                  common, path("listdb.json"))
        check_single(doc, False, records, ops, {"read": 0.5, "update": 0.5}, counted=None)
        check_listdb(doc, 1000)
        check(doc["listdb"]["run"]["memtables_flushed"] > 0, "listdb: the run flushed")
        doc = run(["--index", "listdb", "--read", "0.4", "--insert", "0.3", "--remove", "0.2",
                   "--update", "0.1", "--listdb-memtable", "2000", "--listdb-settle"] + common,
                  path("listdb-mix.json"))
        check_single(doc, False, records, ops,
                     {"read": 0.4, "insert": 0.3, "remove": 0.2, "update": 0.1}, counted=None)
        check_listdb(doc, 2000, settle=True)
        # After the settle, the load is wholly in L1: nothing left in L0 when the run began.
        check(doc["listdb"]["compactions"] >= 1, "listdb: the settle merged into L1")

    # --upsert: blind puts, same cost on tips-hash.
    doc = run(["--index", "tips-hash", "--workload", "a", "--upsert"] + common,
              path("upsert.json"))
    check(doc["config"].get("upsert") is True, "upsert: in the config")
    check_single(doc, True, records, ops, {"read": 0.5, "update": 0.5})
    doc = run(["--index", "dram-hash", "--workload", "a"] + common, path("noupsert.json"))
    check(doc["config"].get("upsert") is False, "upsert: false by default")
    # Where the pools were, and the pages their file system gives (docs/bench.md).
    check(doc["config"].get("pool_dir") == (os.environ.get("TIPS_BENCH_POOL_DIR") or "/dev/shm"),
          "pool_dir: TIPS_BENCH_POOL_DIR or /dev/shm")
    check(doc["config"].get("pool_pages") in ("4K", "2M", "unknown"), "pool_pages: 4K, 2M or unknown")
    # A pool directory whose name needs escaping in JSON (a quote, a backslash, a space):
    # the pool is made there and the JSON still parses, with the name intact.
    odd = os.path.join(tmp, 'pool "dir" \\ x')
    os.makedirs(odd)
    doc = run(["--index", "tips-hash", "--workload", "c"] + common, path("odd-dir.json"),
              env={"TIPS_BENCH_POOL_DIR": odd})
    check(doc["config"].get("pool_dir") == odd, "pool_dir: a name with quotes and a backslash")
    check(not os.listdir(odd), "the pool in TIPS_BENCH_POOL_DIR is removed at exit")

    # CPU per operation: the workers' own clocks, and the rest of the process.
    for phase in ("load", "run"):
        cpu = doc["run" if phase == "run" else "load"]["cpu_ns_per_op"]
        check(cpu["app"] > 0 and cpu["background"] >= 0 and
              abs(cpu["total"] - cpu["app"] - cpu["background"]) < 0.5,
              "cpu_ns_per_op of the %s phase: %s" % (phase, cpu))

    # null: the harness alone; every operation succeeds, nothing is persisted.
    doc = run(["--index", "null", "--workload", "a"] + common, path("null.json"))
    check(doc["run"]["ops"] == ops and doc["run"]["removed_key_misses"] == 0, "null: ran")
    check(doc["run"]["persist"]["fences_per_write"] == 0, "null: no fence")
    check(doc["run"]["cpu_ns_per_op"]["app"] < 2000, "null: the harness costs little")
    check(doc.get("harness_ns_per_op") == doc["run"]["cpu_ns_per_op"]["app"],
          "null: harness_ns_per_op is its worker CPU per operation")

    # --batch: two fences per commit, shared by its writes.
    doc = run(["--index", "tips-hash", "--workload", "load", "--upsert", "--batch", "16"] +
              common, path("batch.json"))
    check(doc["config"].get("batch") == 16, "batch: in the config")
    fw = doc["run"]["persist"]["fences_per_write"]
    check(abs(fw - 2 / 16) < 0.02, "batch: fences per write %.4f, want 0.125" % fw)
    doc = run(["--index", "dram-hash", "--workload", "a", "--batch", "4"] + common,
              path("batch-dram.json"))
    check(doc["config"].get("batch") == 4 and doc["run"]["ops"] == ops, "batch: dram twin")
    doc = run(["--index", "dram-hash", "--workload", "a"] + common, path("nobatch.json"))
    check(doc["config"].get("batch") == 0, "batch: 0 by default")

    # The time limit stops the run phase.
    doc = run(["--index", "dram-hash", "--records", "1000", "--ops", "1000000000",
               "--workload", "c", "--max-seconds", "0.5", "--sample-ms", "10"], path("cap.json"))
    check(doc["run"]["capped"] is True and doc["config"]["max_seconds"] == 0.5, "capped")
    check(0.4 <= doc["run"]["seconds"] <= 5 and doc["run"]["ops"] < 1000000000,
          "the capped run stopped after about 0.5 s (%.3f s)" % doc["run"]["seconds"])
    check(sum(doc["run"]["timeline"]) == doc["run"]["ops"], "capped timeline adds up")

    # Duration mode: the run phase lasts --seconds, whatever --ops says.
    doc = run(["--index", "dram-hash", "--records", "1000", "--ops", "10", "--workload", "c",
               "--seconds", "0.5", "--sample-ms", "10"], path("seconds.json"))
    check(doc["config"]["seconds"] == 0.5, "seconds: in the config")
    check(0.45 <= doc["run"]["seconds"] <= 5 and doc["run"]["ops"] > 10,
          "seconds: ran about 0.5 s past --ops (%.3f s, %d ops)" %
          (doc["run"]["seconds"], doc["run"]["ops"]))
    check(doc["run"]["insert_capped"] is False, "seconds: reads never hit the insert bound")
    check_phase(doc, "run", False)  # about 50 intervals: their sched is checked
    # ... and its inserts stop at the bound the pool is sized for, saying so.
    doc = run(["--index", "tips-hash", "--records", "1000", "--ops", "3000", "--workload",
               "load", "--seconds", "30", "--sample-ms", "10"], path("seconds-cap.json"))
    check(doc["run"]["insert_capped"] is True and doc["run"]["capped"] is True,
          "seconds: the insert bound stops the run")
    check(doc["run"]["op_counts"]["insert"] == 3000 and doc["run"]["seconds"] < 30,
          "seconds: exactly --ops inserts (%d in %.2f s)" %
          (doc["run"]["op_counts"]["insert"], doc["run"]["seconds"]))

    # Determinism: the operation mix is a function of the seed.
    mix = ["--index", "dram-hash", "--records", "5000", "--ops", "5000", "--read", "0.5",
           "--update", "0.3", "--scan", "0.2", "--scan-len", "5"]
    a = run(mix + ["--seed", "7"], path("s7a.json"))["run"]["op_counts"]
    b = run(mix + ["--seed", "7"], path("s7b.json"))["run"]["op_counts"]
    c = run(mix + ["--seed", "8"], path("s8.json"))["run"]["op_counts"]
    check(a == b, "the same seed gives the same operations")
    check(a != c, "another seed gives other operations")

    # Compare: medians and ratios are what the runs say.
    doc = run(["compare", "--records", "3000", "--ops", "3000", "--repeat", "3",
               "--workloads", "a,c", "--indexes", "tips-hash", "--sample-ms", "5"],
              path("compare.json"))
    check(doc.get("kind") == "tips-bench-compare", "compare: kind")
    check(doc["config"]["repeat"] == 3 and doc["config"]["baseline"] == "twin", "compare: config")
    cells = {(r["index"], r["workload"]): r for r in doc["results"]}
    check(sorted(cells) == [("dram-hash", "a"), ("dram-hash", "c"), ("tips-hash", "a"),
                            ("tips-hash", "c")], "compare: the twin was added: %s" % sorted(cells))
    for (index, wl), r in cells.items():
        check(r["completed"] == 3 and r["failed"] == 0 and len(r["runs"]) == 3,
              "compare %s/%s: three runs" % (index, wl))
        for field in ["load_ops_per_sec", "run_ops_per_sec"]:
            runs = r[field]["runs"]
            check(abs(r[field]["median"] - statistics.median(runs)) < 0.2,
                  "compare %s/%s: %s median" % (index, wl, field))
        docs = [d["run"]["ops_per_sec"] for d in r["runs"]]
        check(all(abs(x - y) < 0.2 for x, y in zip(docs, r["run_ops_per_sec"]["runs"])),
              "compare %s/%s: the run documents are the runs" % (index, wl))
        check(all(d["index"] == index and d["config"]["workload"] == wl for d in r["runs"]),
              "compare %s/%s: embedded documents match" % (index, wl))
        if index == "tips-hash":
            base = cells[("dram-hash", wl)]
            want = r["run_ops_per_sec"]["median"] / base["run_ops_per_sec"]["median"]
            check(r["baseline"] == "dram-hash" and abs(r["ratio"] - want) < 1e-3,
                  "compare %s: ratio %s, want %.4f" % (wl, r["ratio"], want))
        else:
            check(r["baseline"] is None and r["ratio"] is None, "compare: a twin has no baseline")

    # Compare over thread counts; E only where there is a key order.
    doc = run(["compare", "--records", "2000", "--seconds", "0.2", "--ops", "2000",
               "--repeat", "1", "--threads", "1,2", "--workloads", "c,e", "--indexes",
               "tips-hash,dram-bst", "--sample-ms", "5"], path("compare-threads.json"))
    check(doc["config"].get("thread_counts") == [1, 2], "compare: thread_counts in config")
    cells = {(r["index"], r["workload"], r["threads"]): r for r in doc["results"]}
    want = {(i, w, t) for i in ["tips-hash", "dram-hash", "dram-bst"] for w in "ce"
            for t in [1, 2]}
    check(set(cells) == want, "compare --threads: every cell at both counts: %s" % sorted(cells))
    for (index, wl, t), r in cells.items():
        hashed = index.endswith("hash")
        if wl == "e" and hashed:
            check(r["applicable"] is False and r["runs"] == [] and r["ratio"] is None,
                  "compare: %s on E is not applicable, not run" % index)
            continue
        check(r["applicable"] is True and r["completed"] == 1, "compare %s/%s/%d ran" %
              (index, wl, t))
        check(all(d["config"]["threads"] == t for d in r["runs"]),
              "compare %s/%s: the runs used %d threads" % (index, wl, t))
        for f in ["persist", "replay", "gc", "other_background"]:
            check(isinstance(r["cpu_ns_per_op"].get(f, {}).get("median"), NUMBER),
                  "compare: cpu_ns_per_op.%s" % f)
        check(isinstance(r["stalls"]["intervals_below_half_median"]["median"], NUMBER) and
              isinstance(r["write_latency_ns"]["p999"]["median"], NUMBER), "compare: stalls")
        if index == "tips-hash":
            base = cells[("dram-hash", wl, t)]
            want_ratio = r["run_ops_per_sec"]["median"] / base["run_ops_per_sec"]["median"]
            check(abs(r["ratio"] - want_ratio) < 1e-3,
                  "compare --threads: ratio against the twin at %d threads" % t)

    # Compare --one-load: one load per index and thread count, then the workloads in
    # order on it. "load" is capped at its insert bound (--ops x 1.0) and "d" reads the
    # latest keys right after, so an id drawn past the bound and never inserted would be
    # read as lost; "e" then still inserts (each phase has its own insert bound).
    doc = run(["compare", "--one-load", "--records", "2000", "--seconds", "0.2", "--ops",
               "400", "--repeat", "1", "--threads", "2", "--workloads", "load,d,e,c",
               "--indexes", "tips-art", "--sample-ms", "5"], path("compare-one-load.json"))
    check(doc["config"].get("one_load") is True, "compare --one-load: in the config")
    cells = {(r["index"], r["workload"]): r for r in doc["results"]}
    for index in ["tips-art", "dram-art"]:
        rows = [cells.get((index, w), {}) for w in ["load", "d", "e", "c"]]
        check(all(r.get("completed") == 1 and r.get("failed") == 0 for r in rows),
              "compare --one-load %s: every workload ran" % index)
        if not all(r.get("runs") for r in rows):
            continue
        loads = {r["runs"][0]["load"]["ops_per_sec"] for r in rows}
        check(len(loads) == 1, "compare --one-load %s: one load shared: %s" % (index, loads))
        check([r["runs"][0]["config"]["workload"] for r in rows] == ["load", "d", "e", "c"],
              "compare --one-load %s: the documents are the workloads in order" % index)
        first = rows[0]["runs"][0]["run"]
        check(first["insert_capped"] and first["op_counts"]["insert"] == 400,
              "compare --one-load %s: load capped at its bound: %s" % (index, first["op_counts"]))
        check(rows[2]["runs"][0]["run"]["op_counts"]["insert"] > 0,
              "compare --one-load %s: e inserts after the capped phases" % index)
    plain = run(["compare", "--records", "2000", "--seconds", "0.1", "--ops", "400",
                 "--repeat", "1", "--threads", "1", "--workloads", "c,d", "--indexes",
                 "dram-art", "--sample-ms", "5"], path("compare-fresh.json"))
    loads = {r["runs"][0]["load"]["ops_per_sec"] for r in plain["results"] if r["runs"]}
    check(plain["config"].get("one_load") is False and len(loads) == 2,
          "compare without --one-load: a load per workload: %s" % loads)

    # pmdk-hash, if built: counters unavailable, not 0; its twin in compare is dram-hash.
    listed = subprocess.run([BENCH, "--list"], stdout=subprocess.PIPE, text=True).stdout
    if any(line.split()[:1] == ["pmdk-hash"] for line in listed.splitlines()):
        doc = run(["--index", "pmdk-hash", "--workload", "a"] + common, path("pmdk.json"))
        check_single(doc, False, records, ops, {"read": 0.5, "update": 0.5}, counted=False)
        doc = run(["compare", "--records", "2000", "--ops", "2000", "--repeat", "1",
                   "--workloads", "c", "--indexes", "pmdk-hash", "--sample-ms", "5"],
                  path("compare-pmdk.json"))
        cells = {(r["index"], r["workload"]): r for r in doc["results"]}
        check(sorted(cells) == [("dram-hash", "c"), ("pmdk-hash", "c")],
              "compare pmdk: dram-hash is the twin: %s" % sorted(cells))
        r = cells.get(("pmdk-hash", "c"), {})
        check(r.get("baseline") == "dram-hash" and isinstance(r.get("ratio"), NUMBER),
              "compare pmdk: ratio against dram-hash")
        check(r.get("fences_per_write", {}).get("median", 0) is None and
              r.get("fences_per_read", {}).get("median", 0) is None,
              "compare pmdk: fences null (not counted)")
        d = cells.get(("dram-hash", "c"), {})
        check(d.get("fences_per_read", {}).get("median") == 0, "compare: dram fences 0")

    shutil.rmtree(tmp, ignore_errors=True)
    check(SCHED_CHECKED > 0, "some phase's timeline_sched_us was checked")
    if failures:
        sys.exit("bench_json_test: %d failure(s)" % len(failures))
    print("bench_json_test: all passed")


main()
