"""test_tools.py - real Redis tools against the server under test.

  - redis-benchmark with its default test set (no -t), -n 2000 -q: it must finish, print
    no error line, and print a rate for every test of the set;
  - redis-cli: INFO, a generated file of SETs through --pipe (0 errors, every reply),
    KEYS and --scan seeing exactly those keys, values read back, a command round trip;
  - the `redis` Python client (redis-py): commands, a pipeline and a MULTI/EXEC transaction;
  - redis-cli SHUTDOWN: exit status 0, and the keys are there after a restart.
Prints `N passed, N failed`, exits 1 on any failure.

    .venv/bin/python tests/server/test_tools.py --server build/tips-server [--index tips-art]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp      # noqa: E402
import servers   # noqa: E402

# The default test set of redis-benchmark 7.0 (the names it prints with -q).
BENCH_TESTS = ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP", "RPOP",
               "SADD", "HSET", "SPOP", "ZADD", "ZPOPMIN", "LPUSH (needed to benchmark LRANGE)",
               "LRANGE_100 (first 100 elements)", "LRANGE_300 (first 300 elements)",
               "LRANGE_500 (first 500 elements)", "LRANGE_600 (first 600 elements)", "MSET (10 keys)"]
RATE = re.compile(r"^(.+): ([0-9.]+) requests per second")


def run(argv, tally, what, timeout=120, stdin=None):
    """Run a tool; a time-out or a non-zero exit is a failure. Returns its output or None."""
    try:
        p = subprocess.run(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        tally.fail("%s: no end within %d s" % (what, timeout),
                   "    output so far: %r" % ((e.output or b"")[-500:],))
        return None
    out = p.stdout.decode("utf-8", "replace")
    if not tally.ok(p.returncode == 0, "%s: exit status %d" % (what, p.returncode), out[-2000:]):
        return None
    return out


def final_lines(out):
    """The lines as a terminal would leave them: the last part after each carriage return."""
    return [l.split("\r")[-1].strip() for l in out.splitlines() if l.split("\r")[-1].strip()]


def check_benchmark(bench, port, tally):
    out = run([bench, "-h", "127.0.0.1", "-p", str(port), "-n", "2000", "-q"], tally,
              "redis-benchmark default tests")
    if out is None:
        return
    lines = final_lines(out)
    errors = [l for l in lines if "rror" in l or "ERR" in l]
    tally.ok(not errors, "redis-benchmark printed error lines", "\n".join("    " + l for l in errors[:20]))
    for l in lines:
        if "WARN" in l:
            print("note: redis-benchmark: %s" % l)
    rates = {}
    for l in lines:
        m = RATE.match(l)
        if m:
            rates[m.group(1)] = float(m.group(2))
    for name in BENCH_TESTS:
        tally.ok(rates.get(name, 0) > 0, "redis-benchmark printed no rate for %s" % name,
                 "    output:\n" + "\n".join("    " + l for l in lines[-25:]))
    print("redis-benchmark: %d tests, rates %s" % (len(rates), ", ".join(
        "%s %.0f" % (k.split(" ")[0], v) for k, v in rates.items())))


def pipe_file(path, n):
    with open(path, "wb") as f:
        for i in range(n):
            f.write(resp.encode(["SET", "pipe:%05d" % i, "value-%d-%s" % (i, "x" * (i % 50))]))


def check_cli(cli, port, tally, workdir, n=3000):
    base = [cli, "-h", "127.0.0.1", "-p", str(port)]
    out = run(base + ["INFO"], tally, "redis-cli INFO")
    if out is not None:
        tally.ok(re.search(r"^# \w+", out, re.M) and re.search(r"^\w+:\S", out, re.M),
                 "redis-cli INFO: no '# Section' and 'field:value' lines", out[:500])
    path = os.path.join(workdir, "sets.resp")
    pipe_file(path, n)
    with open(path, "rb") as f:
        out = run(base + ["--pipe"], tally, "redis-cli --pipe of %d SETs" % n, stdin=f)
    if out is not None:
        m = re.search(r"errors: (\d+), replies: (\d+)", out)
        tally.ok(m and m.group(1) == "0" and m.group(2) == str(n),
                 "redis-cli --pipe: expected 'errors: 0, replies: %d'" % n, out[-500:])
    want = sorted("pipe:%05d" % i for i in range(n))
    out = run(base + ["KEYS", "pipe:*"], tally, "redis-cli KEYS")
    if out is not None:
        got = sorted(out.split())
        tally.ok(got == want, "redis-cli KEYS pipe:* gave %d keys, expected %d" % (len(got), n))
    out = run(base + ["--scan", "--pattern", "pipe:*"], tally, "redis-cli --scan")
    if out is not None:
        got = sorted(out.split())
        tally.ok(got == want, "redis-cli --scan gave %d keys (%d distinct), expected %d"
                 % (len(got), len(set(got)), n))
    with resp.Conn(port) as c:
        r = c.command("MGET", *want)
    expect = [("$", ("value-%d-%s" % (i, "x" * (i % 50))).encode()) for i in range(n)]
    bad = [i for i in range(n) if r[0] != "*" or r[1][i] != expect[i]] if r[0] == "*" else list(range(n))
    tally.ok(not bad, "values written by --pipe read back wrong for %d keys (first: pipe:%05d)"
             % (len(bad), bad[0] if bad else 0))
    out = run(base + ["SET", "cli key", "a b c"], tally, "redis-cli SET")
    out2 = run(base + ["--raw", "GET", "cli key"], tally, "redis-cli GET")
    tally.ok(out and out.strip() == "OK" and out2 == "a b c\n", "redis-cli SET/GET round trip",
             "    SET printed %r, GET printed %r" % (out, out2))


def check_redis_py(port, tally):
    try:
        import redis
    except ImportError:
        tally.fail("the redis Python client is missing; create .venv with scripts/install-deps.sh")
        return
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    try:
        tally.ok(r.ping() is True, "redis-py: PING")
        r.set("py:a", "1")
        tally.ok(r.incr("py:a") == 2, "redis-py: INCR")
        r.hset("py:h", mapping={"f": "1", "g": "2"})
        tally.ok(r.hgetall("py:h") == {b"f": b"1", b"g": b"2"}, "redis-py: HSET mapping / HGETALL")
        p = r.pipeline(transaction=True)
        p.set("py:t1", "x").set("py:t2", "y").mget("py:t1", "py:t2")
        tally.ok(p.execute() == [True, True, [b"x", b"y"]], "redis-py: MULTI/EXEC pipeline")
        p = r.pipeline(transaction=False)
        for i in range(500):
            p.rpush("py:l", i)
        p.execute()
        tally.ok(r.lrange("py:l", 0, 2) == [b"0", b"1", b"2"] and r.llen("py:l") == 500,
                 "redis-py: pipelined RPUSH")
        tally.ok(sorted(r.scan_iter(match="py:t*", count=10)) == [b"py:t1", b"py:t2"], "redis-py: scan_iter")
    except redis.RedisError as e:
        tally.fail("redis-py: %s: %s" % (type(e).__name__, e))
    finally:
        r.close()


def check_shutdown(cli, srv, tally):
    """redis-cli SHUTDOWN: the server exits with status 0 and comes back with its keys."""
    with srv.conn() as c:
        before = c.command("DBSIZE")
    subprocess.run([cli, "-h", "127.0.0.1", "-p", str(srv.port), "SHUTDOWN"], capture_output=True, timeout=60)
    try:
        code = srv.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        tally.fail("SHUTDOWN: the server still runs after 30 s")
        return
    srv.proc = None
    tally.ok(code == 0, "SHUTDOWN: exit status %s" % code, srv.log_tail())
    srv.start()
    with srv.conn() as c:
        after = c.command("DBSIZE")
    tally.ok(before == after and before[1] > 0, "DBSIZE %s before SHUTDOWN, %s after the restart"
             % (resp.show(before), resp.show(after)))


def main():
    p = servers.add_server_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = p.parse_args()
    tally = servers.Tally()
    bench = servers.need_tool("redis-benchmark")
    cli = servers.need_tool("redis-cli")
    print("real tools against %s" % servers.under_test_name(args), flush=True)
    with servers.server_under_test(args, redis_kind="redis-aof") as sut, tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        sut.start()
        check_benchmark(bench, sut.port, tally)
        with sut.conn() as c:
            c.command("FLUSHALL")
        check_cli(cli, sut.port, tally, tmp)
        check_redis_py(sut.port, tally)
        check_shutdown(cli, sut, tally)
        tally.ok(sut.alive(), "the server under test died", sut.crash_report())
    return tally.finish()


if __name__ == "__main__":
    servers.run_main(main)
