"""test_collections.py - the collection commands of tips-server (hashes, lists, sets,
sorted sets) against redis-server, reply for reply, plus a crash check.

Usage: test_collections.py [--server PATH | PATH] [--index tips-art] [--redis redis-server]
(the server binary may also come from $TIPS_SERVER). It starts tips-server on a pool
under /dev/shm and redis-server (no persistence), each on a free port of 127.0.0.1,
waits for PONG with a deadline, sends every case to both and compares the replies:
exactly (types, error texts, nil against empty array), as multisets for replies whose
order Redis leaves open (SMEMBERS, HGETALL, ...), or by shape and membership for random
replies (SPOP, SRANDMEMBER, HRANDFIELD: the popped members are then removed from the
reference too, so both stay equal). Collections of 5000+ members take several scan
chunks and batches. Then the crash check: collections written and acknowledged, the
server killed with SIGKILL during a pipelined burst of multi-member writes, restarted
on the same pool: every acknowledged write is back and no multi-member write is half
applied. Also: MULTI/EXEC, expiry, the layout's size limits, four clients updating the
same collections at once (read-modify-writes stay atomic), and on tips-hash the
need_ordered error where a scan is needed, Redis's replies elsewhere.
Prints one line per failure and ends with "N passed, N failed"; exit 1 on failure.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ORDERED_ERROR = (b"ERR this command needs an ordered index (tips-art, tips-bptree, tips-bst, "
                 b"tips-lfbst, listdb); this server runs tips-hash")

# ---- a RESP2 client that keeps reply types ------------------------------------------------


class Conn:
    """Replies as tuples: ('+', b), ('-', b), (':', int), ('$', b or None),
    ('*', [replies] or None)."""

    def __init__(self, port, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("connection closed")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return (t.decode(), rest)
        if t == b":":
            return (":", int(rest))
        if t == b"$":
            n = int(rest)
            return ("$", None if n < 0 else self._exact(n))
        if t == b"*":
            n = int(rest)
            return ("*", None if n < 0 else [self.reply() for _ in range(n)])
        raise ValueError("bad reply line %r" % line)

    def send(self, *args):
        self.sock.sendall(self.encode(args))

    def call(self, *args):
        self.send(*args)
        return self.reply()


# ---- servers -------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, argv_fn, workdir):
        self.name = name
        self.argv_fn = argv_fn
        self.dir = workdir
        self.port = free_port()
        self.proc = None
        self.log = os.path.join(workdir, name + ".log")

    def start(self, timeout=30.0):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv_fn(self.port), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited (%s) before answering PING:\n%s"
                                   % (self.name, self.proc.returncode, self.log_tail()))
            try:
                c = Conn(self.port, timeout=2.0)
                try:
                    if c.call("PING") == ("+", b"PONG"):
                        return self
                finally:
                    c.close()
            except OSError:
                pass
            time.sleep(0.01)  # the polling interval of the readiness check
        self.kill()
        raise RuntimeError("%s did not answer PING within %.0f s:\n%s"
                           % (self.name, timeout, self.log_tail()))

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def log_tail(self, n=20):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()[-n:]
        except OSError:
            return ["(no log)"]


def tips_argv(binary, pool, index):
    return lambda port: [binary, "--port", str(port), "--bind", "127.0.0.1", "--pool", pool,
                         "--pool-size", "256mb", "--index", index]


def redis_argv(binary, workdir):
    return lambda port: [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no", "--dir", workdir, "--daemonize", "no"]


# ---- comparing -----------------------------------------------------------------------------


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL: %s %s" % (what, detail[:600]))
        return cond


def show(args):
    parts = []
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(repr(a[:40])[2:-1] + ("...(%d)" % len(a) if len(a) > 40 else ""))
    return " ".join(parts)


def short(r):
    s = repr(r)
    return s if len(s) < 300 else s[:300] + "..."


def unordered(r):
    """An array reply with its elements sorted (order left open by Redis)."""
    if r[0] == "*" and r[1] is not None:
        return ("*", sorted(r[1], key=repr))
    return r


def pairs(r):
    """A flat field/value array as a sorted list of pairs."""
    if r[0] == "*" and r[1] is not None:
        v = r[1]
        return ("*", sorted(((v[i], v[i + 1]) for i in range(0, len(v), 2)), key=repr))
    return r


class Diff:
    """Runs each command on tips-server (t) and redis-server (r) and compares."""

    def __init__(self, t, r, tally):
        self.t, self.r, self.tally = t, r, tally

    def both(self, *args):
        return self.t.call(*args), self.r.call(*args)

    def eq(self, *args, norm=None):
        a, b = self.both(*args)
        if norm:
            a, b = norm(a), norm(b)
        self.tally.ok(a == b, show(args), "tips=%s redis=%s" % (short(a), short(b)))
        return a

    def same(self, *args):
        """Run on both without comparing (setup whose replies are checked elsewhere)."""
        return self.both(*args)


# ---- the cases -----------------------------------------------------------------------------

BIN = [b"\x00", b"a\x00b", b"\r\n", b"\xff\xfe", b"", b" ", b"\x00" * 5, b"\xc3\xa9t\xc3\xa9"]


def wrongtype_and_arity(d):
    d.same("SET", "str", "v")
    for cmd in (["HSET", "str", "f", "v"], ["HGET", "str", "f"], ["HGETALL", "str"],
                ["HMGET", "str", "a"], ["HDEL", "str", "f"], ["HLEN", "str"],
                ["HINCRBY", "str", "f", "1"], ["HEXISTS", "str", "f"], ["HKEYS", "str"],
                ["HVALS", "str"], ["HSETNX", "str", "f", "v"], ["HMSET", "str", "f", "v"],
                ["HSTRLEN", "str", "f"], ["HINCRBYFLOAT", "str", "f", "1"],
                ["HRANDFIELD", "str"], ["HRANDFIELD", "str", "0"],
                ["LPUSH", "str", "a"], ["RPUSH", "str", "a"], ["LPOP", "str"],
                ["RPOP", "str", "2"], ["LLEN", "str"], ["LRANGE", "str", "0", "-1"],
                ["LINDEX", "str", "0"], ["LSET", "str", "0", "x"], ["LPUSHX", "str", "a"],
                ["SADD", "str", "a"], ["SREM", "str", "a"], ["SMEMBERS", "str"],
                ["SISMEMBER", "str", "a"], ["SCARD", "str"], ["SPOP", "str"],
                ["SPOP", "str", "0"], ["SRANDMEMBER", "str", "-3"], ["SMISMEMBER", "str", "a"],
                ["ZADD", "str", "1", "a"], ["ZREM", "str", "a"], ["ZSCORE", "str", "a"],
                ["ZCARD", "str"], ["ZINCRBY", "str", "1", "a"], ["ZRANGE", "str", "0", "-1"],
                ["ZRANGEBYSCORE", "str", "-inf", "+inf"], ["ZREVRANGE", "str", "0", "1"],
                ["ZRANK", "str", "a"], ["ZPOPMIN", "str"], ["ZPOPMAX", "str", "2"],
                ["ZREVRANK", "str", "a"], ["ZCOUNT", "str", "0", "1"],
                ["ZREVRANGEBYSCORE", "str", "+inf", "-inf"], ["ZLEXCOUNT", "str", "-", "+"],
                ["ZRANGEBYLEX", "str", "-", "+"], ["ZREVRANGEBYLEX", "str", "+", "-"]):
        d.eq(*cmd)
    for cmd in (["HSET", "h"], ["HSET", "h", "f"], ["HSET", "h", "f", "v", "g"], ["HGET", "h"],
                ["HMSET", "h", "f"], ["HSETNX", "h", "f"], ["HDEL", "h"], ["HLEN"],
                ["HINCRBY", "h", "f"], ["HMGET", "h"], ["HGETALL"], ["HRANDFIELD"],
                ["LPUSH", "l"], ["LPOP", "l", "1", "2"], ["LRANGE", "l", "0"], ["LINDEX", "l"],
                ["LSET", "l", "0"], ["SADD", "s"], ["SPOP", "s", "1", "2"], ["SISMEMBER", "s"],
                ["SRANDMEMBER", "s", "1", "2"], ["ZADD", "z", "1"], ["ZADD", "z"],
                ["ZSCORE", "z"], ["ZRANGE", "z", "0"], ["ZRANGEBYSCORE", "z", "0"],
                ["ZINCRBY", "z", "1"], ["ZPOPMIN", "z", "1", "2"], ["ZRANK", "z"],
                ["ZCARD"], ["ZREM", "z"]):
        d.eq(*cmd)


def hashes(d):
    d.eq("HSET", "h", "f1", "v1", "f2", "v2")
    d.eq("HSET", "h", "f1", "new", "f3", "v3")
    d.eq("HSET", "h", "dup", "1", "dup", "2")
    d.eq("HGET", "h", "dup")
    d.eq("HMSET", "h", "m1", "x", "m2", "y")
    d.eq("HSETNX", "h", "f1", "no")
    d.eq("HSETNX", "h", "nx", "yes")
    d.eq("HSETNX", "hnew", "f", "v")
    for f in ("f1", "f2", "nx", "missing", ""):
        d.eq("HGET", "h", f)
        d.eq("HEXISTS", "h", f)
        d.eq("HSTRLEN", "h", f)
    d.eq("HGET", "nokey", "f")
    d.eq("HEXISTS", "nokey", "f")
    d.eq("HSTRLEN", "nokey", "f")
    d.eq("HMGET", "h", "f1", "missing", "f2", "f1")
    d.eq("HMGET", "nokey", "a", "b")
    d.eq("HLEN", "h")
    d.eq("HLEN", "nokey")
    d.eq("HGETALL", "h", norm=pairs)
    d.eq("HKEYS", "h", norm=unordered)
    d.eq("HVALS", "h", norm=unordered)
    d.eq("HGETALL", "nokey")
    d.eq("HKEYS", "nokey")
    d.eq("HVALS", "nokey")
    d.eq("HDEL", "h", "f1", "f1", "missing", "f2")
    d.eq("HDEL", "nokey", "f")
    d.eq("HLEN", "h")
    # increments
    for args in (["c", "5"], ["c", "-7"], ["c", "x"], ["c", "1.5"], ["c", " 1"], ["c", "+1"],
                 ["c", "9223372036854775807"], ["c", "1"], ["c", "-9223372036854775808"],
                 ["big", "9223372036854775807"], ["big", "1"], ["small", "-9223372036854775808"],
                 ["small", "-1"], ["f3", "1"], ["c", "99999999999999999999"]):
        d.eq("HINCRBY", "h", *args)
    d.eq("HSET", "h", "str", "abc", "sp", " 1", "fl", "1.5", "num", "10")
    for f in ("str", "sp", "fl"):
        d.eq("HINCRBY", "h", f, "1")
    d.eq("HINCRBY", "hinc", "new", "42")
    for args in (["fl", "0.1"], ["fl", "-1.6"], ["num", "2.5e3"], ["fl", "abc"], ["str", "1"],
                 ["x", "5"], ["x", "inf"], ["x", "1e308"], ["x", "1e308"], ["x", "nan"],
                 ["num", "-10"], ["y", "3.0"], ["y", "0.30000000000000004"], ["sp", "1"]):
        d.eq("HINCRBYFLOAT", "h", *args)
    d.eq("HGETALL", "h", norm=pairs)
    # binary fields and values, big values
    for i, b in enumerate(BIN):
        d.eq("HSET", "hb", b, b * 3 + bytes([i]))
    d.eq("HGETALL", "hb", norm=pairs)
    for b in BIN:
        d.eq("HGET", "hb", b)
    big = bytes((i * 7 + 3) % 256 for i in range(60 * 1024))
    d.eq("HSET", "hbig", "f", big, "g", b"small")
    d.eq("HGET", "hbig", "f")
    d.eq("HSTRLEN", "hbig", "f")
    d.eq("HGETALL", "hbig", norm=pairs)
    d.eq("HVALS", "hbig", norm=unordered)
    # the last field deleted deletes the key
    d.eq("HSET", "hgone", "a", "1", "b", "2")
    d.eq("HDEL", "hgone", "a", "b")
    d.eq("EXISTS", "hgone")
    d.eq("HSET", "hgone", "c", "3")
    d.eq("HLEN", "hgone")
    d.eq("HGETALL", "hgone", norm=pairs)


def hrandfield(d, tally):
    d.same("DEL", "hr")
    d.same("HSET", "hr", *sum(([b"f%d" % i, b"v%d" % i] for i in range(20)), []))
    fields = {b"f%d" % i: b"v%d" % i for i in range(20)}
    r = d.t.call("HRANDFIELD", "hr")
    tally.ok(r[0] == "$" and r[1] in fields, "HRANDFIELD hr", short(r))
    for count, withvalues in ((5, 0), (20, 0), (50, 0), (-30, 0), (7, 1), (-9, 1), (100, 1)):
        args = ["HRANDFIELD", "hr", str(count)] + (["WITHVALUES"] if withvalues else [])
        r = d.t.call(*args)
        want = min(count, 20) if count > 0 else -count
        ok = r[0] == "*" and len(r[1]) == want * (2 if withvalues else 1)
        if ok:
            got = r[1][::2] if withvalues else r[1]
            ok = all(x[0] == "$" and x[1] in fields for x in got)
            if withvalues:
                ok = ok and all(fields[r[1][i][1]] == r[1][i + 1][1]
                                for i in range(0, len(r[1]), 2))
            if count > 0:
                ok = ok and len(set(x[1] for x in got)) == len(got)
        tally.ok(ok, show(args), short(r))
    for args in (["HRANDFIELD", "hr", "0"], ["HRANDFIELD", "nokey"],
                 ["HRANDFIELD", "nokey", "5"], ["HRANDFIELD", "nokey", "-5", "WITHVALUES"],
                 ["HRANDFIELD", "hr", "x"], ["HRANDFIELD", "hr", "1", "withvals"],
                 ["HRANDFIELD", "hr", "1", "WITHVALUES", "x"],
                 ["HRANDFIELD", "hr", "-9223372036854775808"],
                 ["HRANDFIELD", "hr", "-9223372036854775807", "WITHVALUES"],
                 ["HRANDFIELD", "hr", "0", "WITHVALUES"]):
        d.eq(*args)


def lists(d):
    d.eq("RPUSH", "l", "a", "b", "c")
    d.eq("LPUSH", "l", "z", "y")
    d.eq("LRANGE", "l", "0", "-1")
    for s, e in (("0", "0"), ("-1", "-1"), ("-100", "100"), ("2", "1"), ("5", "10"),
                 ("-2", "-1"), ("1", "-2"), ("0", "-6"), ("-6", "0"), ("3", "3"),
                 ("0", "9223372036854775807"), ("-9223372036854775808", "-1"), ("x", "1"),
                 ("0", "y")):
        d.eq("LRANGE", "l", s, e)
    for i in ("0", "4", "5", "-1", "-5", "-6", "100", "x", "9223372036854775807"):
        d.eq("LINDEX", "l", i)
    d.eq("LINDEX", "nokey", "0")
    d.eq("LINDEX", "nokey", "x")
    d.eq("LRANGE", "nokey", "0", "-1")
    d.eq("LLEN", "l")
    d.eq("LLEN", "nokey")
    d.eq("LPOP", "l")
    d.eq("RPOP", "l")
    d.eq("LPOP", "l", "0")
    d.eq("LPOP", "l", "2")
    d.eq("RPOP", "l", "1")
    d.eq("LPOP", "l", "-1")
    d.eq("LPOP", "l", "x")
    d.eq("LRANGE", "l", "0", "-1")
    d.eq("RPOP", "l", "10")
    d.eq("EXISTS", "l")
    d.eq("LPOP", "l")
    d.eq("LPOP", "l", "2")
    d.eq("LPOP", "l", "0")
    d.eq("RPOP", "nokey")
    d.eq("RPOP", "nokey", "3")
    d.eq("LPUSHX", "nokey", "a")
    d.eq("RPUSHX", "nokey", "a")
    d.eq("EXISTS", "nokey")
    d.eq("RPUSH", "l2", "m")
    d.eq("LPUSHX", "l2", "a", "b")
    d.eq("RPUSHX", "l2", "c", "d")
    d.eq("LRANGE", "l2", "0", "-1")
    for args in (["0", "A"], ["-1", "D"], ["5", "x"], ["-6", "x"], ["x", "x"], ["2", b"\x00"]):
        d.eq("LSET", "l2", *args)
    d.eq("LSET", "nokey", "0", "x")
    d.eq("LRANGE", "l2", "0", "-1")
    d.eq("RPUSH", "lb", *BIN)
    d.eq("LRANGE", "lb", "0", "-1")
    d.eq("LPUSH", "lb", *BIN)
    d.eq("LRANGE", "lb", "3", "12")
    d.eq("RPOP", "lb", "4")
    d.eq("LPOP", "lb", "4")
    d.eq("LRANGE", "lb", "0", "-1")
    # alternating ends keep the indexes contiguous
    for i in range(30):
        d.same("LPUSH" if i % 3 else "RPUSH", "lmix", "e%d" % i)
    d.eq("LRANGE", "lmix", "0", "-1")
    for i in range(-31, 31, 5):
        d.eq("LINDEX", "lmix", str(i))
    big = b"L" * (60 * 1024)
    d.eq("RPUSH", "lbig", big, "x")
    d.eq("LINDEX", "lbig", "0")
    d.eq("LPOP", "lbig")


def sets(d, tally):
    d.eq("SADD", "s", "a", "b", "c", "a")
    d.eq("SADD", "s", "c", "d")
    d.eq("SADD", "s", *BIN)
    d.eq("SMEMBERS", "s", norm=unordered)
    d.eq("SCARD", "s")
    d.eq("SCARD", "nokey")
    d.eq("SMEMBERS", "nokey")
    for m in [b"a", b"zz", b""] + BIN:
        d.eq("SISMEMBER", "s", m)
    d.eq("SISMEMBER", "nokey", "a")
    d.eq("SMISMEMBER", "s", "a", "zz", "b", "a")
    d.eq("SMISMEMBER", "nokey", "a", "b")
    d.eq("SREM", "s", "a", "zz", "a", "b")
    d.eq("SREM", "nokey", "a")
    d.eq("SMEMBERS", "s", norm=unordered)
    d.eq("SREM", "s", *BIN)
    d.eq("SREM", "s", "c", "d")
    d.eq("EXISTS", "s")
    d.eq("SADD", "s", "again")
    d.eq("SCARD", "s")
    # SPOP / SRANDMEMBER: shapes, then the reference follows the pops
    d.same("DEL", "sr")
    members = [b"m%d" % i for i in range(40)]
    d.same("SADD", "sr", *members)
    live = set(members)
    for count in (None, 1, 5, 0):
        args = ["SRANDMEMBER", "sr"] + ([] if count is None else [str(count)])
        r = d.t.call(*args)
        if count is None:
            ok = r[0] == "$" and r[1] in live
        else:
            got = [x[1] for x in r[1]] if r[0] == "*" else None
            ok = got is not None and len(got) == count and set(got) <= live and \
                len(set(got)) == len(got)
        tally.ok(ok, show(args), short(r))
    for count in (-1, -100, 100):
        r = d.t.call("SRANDMEMBER", "sr", str(count))
        got = [x[1] for x in r[1]] if r[0] == "*" else None
        want = abs(count) if count < 0 else len(live)
        ok = got is not None and len(got) == want and set(got) <= live
        if count > 0:
            ok = ok and set(got) == live
        tally.ok(ok, "SRANDMEMBER sr %d" % count, short(r))
    for count in (None, 1, 3, 0, 10):
        args = ["SPOP", "sr"] + ([] if count is None else [str(count)])
        r = d.t.call(*args)
        got = [r[1]] if r[0] == "$" else [x[1] for x in (r[1] or [])]
        want = 1 if count is None else count
        ok = len(got) == want and set(got) <= live and len(set(got)) == len(got)
        tally.ok(ok, show(args), short(r))
        live -= set(got)
        if got:
            d.r.call("SREM", "sr", *got)
    d.eq("SCARD", "sr")
    d.eq("SMEMBERS", "sr", norm=unordered)
    r = d.t.call("SPOP", "sr", "1000")
    got = set(x[1] for x in r[1]) if r[0] == "*" else None
    tally.ok(got == live, "SPOP sr 1000 (all)", short(r))
    d.r.call("DEL", "sr")
    d.eq("EXISTS", "sr")
    for args in (["SPOP", "nokey"], ["SPOP", "nokey", "3"], ["SPOP", "nokey", "0"],
                 ["SPOP", "sr", "-1"], ["SPOP", "sr", "x"], ["SRANDMEMBER", "nokey"],
                 ["SRANDMEMBER", "nokey", "3"], ["SRANDMEMBER", "nokey", "-3"],
                 ["SRANDMEMBER", "nokey", "x"],
                 ["SRANDMEMBER", "nokey", "-9223372036854775808"]):
        d.eq(*args)


def zsets(d):
    d.eq("ZADD", "z", "1", "a", "2", "b", "1.5", "c", "-3", "d")
    d.eq("ZADD", "z", "10", "a", "2", "b")
    d.eq("ZADD", "z", "CH", "11", "a", "2", "b", "7", "e")
    d.eq("ZADD", "z", "NX", "0", "a", "0", "f")
    d.eq("ZADD", "z", "XX", "12", "a", "0", "g")
    d.eq("ZADD", "z", "XX", "CH", "13", "a", "0", "g")
    d.eq("ZADD", "z", "GT", "CH", "1", "a", "20", "b", "5", "h")
    d.eq("ZADD", "z", "LT", "CH", "1", "a", "30", "b")
    d.eq("ZADD", "z", "INCR", "5", "a")
    d.eq("ZADD", "z", "INCR", "5", "newinc")
    d.eq("ZADD", "z", "NX", "INCR", "5", "a")
    d.eq("ZADD", "z", "XX", "INCR", "5", "nothere")
    d.eq("ZADD", "z", "GT", "INCR", "-1", "a")
    d.eq("ZADD", "z", "LT", "INCR", "-1", "a")
    d.eq("ZADD", "z", "dup1", "x", "1", "y")
    d.eq("ZADD", "z", "1", "dupm", "2", "dupm")
    d.eq("ZADD", "z", "nan", "a")
    d.eq("ZADD", "z", "1", "a", "x", "b")
    d.eq("ZADD", "z", "1")
    d.eq("ZADD", "z", "NX", "XX", "1", "a")
    d.eq("ZADD", "z", "GT", "LT", "1", "a")
    d.eq("ZADD", "z", "NX", "GT", "1", "a")
    d.eq("ZADD", "z", "INCR", "1", "a", "2", "b")
    d.eq("ZADD", "z", "CH")
    d.eq("ZADD", "z", "1", "a", "2")
    d.eq("ZADD", "zxx", "XX", "1", "a")
    d.eq("ZADD", "zxx", "XX", "INCR", "1", "a")
    d.eq("EXISTS", "zxx")
    d.eq("ZADD", "z", "inf", "pinf", "-inf", "ninf", "+inf", "pinf2", "1e400", "x")
    d.eq("ZADD", "z", "1.5e2", "sci", "0x10", "hex", "-0", "negzero", "0.1", "tenth")
    d.eq("ZADD", "zinf", "inf", "a")
    d.eq("ZADD", "zinf", "INCR", "-inf", "a")
    d.eq("ZINCRBY", "zinf", "-inf", "a")
    d.eq("ZSCORE", "zinf", "a")
    for m in ("a", "b", "c", "d", "pinf", "ninf", "sci", "hex", "negzero", "tenth", "missing"):
        d.eq("ZSCORE", "z", m)
        d.eq("ZRANK", "z", m)
        d.eq("ZREVRANK", "z", m)
    d.eq("ZSCORE", "nokey", "a")
    d.eq("ZRANK", "nokey", "a")
    d.eq("ZCARD", "z")
    d.eq("ZCARD", "nokey")
    d.eq("ZINCRBY", "z", "2.5", "c")
    d.eq("ZINCRBY", "z", "1", "brandnew")
    d.eq("ZINCRBY", "z", "x", "c")
    d.eq("ZINCRBY", "z", "inf", "ninf")
    d.eq("ZINCRBY", "znew", "-2", "m")
    d.eq("ZRANGE", "z", "0", "-1", "WITHSCORES")
    for args in (["0", "-1"], ["0", "0"], ["-1", "-1"], ["-100", "100"], ["3", "1"],
                 ["2", "5", "WITHSCORES"], ["-3", "-1", "REV"], ["0", "2", "REV", "WITHSCORES"],
                 ["100", "200"], ["0", "9223372036854775807"], ["x", "1"],
                 ["-inf", "+inf", "BYSCORE"], ["-inf", "+inf", "BYSCORE", "WITHSCORES"],
                 ["(1", "(10", "BYSCORE", "WITHSCORES"], ["1", "2", "BYSCORE"],
                 ["+inf", "-inf", "BYSCORE", "REV", "WITHSCORES"],
                 ["10", "(1", "BYSCORE", "REV"],
                 ["-inf", "+inf", "BYSCORE", "LIMIT", "2", "3"],
                 ["-inf", "+inf", "BYSCORE", "LIMIT", "2", "-1"],
                 ["-inf", "+inf", "BYSCORE", "LIMIT", "-1", "3"],
                 ["-inf", "+inf", "BYSCORE", "LIMIT", "0", "0"],
                 ["+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "4", "WITHSCORES"],
                 ["+inf", "-inf", "BYSCORE", "REV", "LIMIT", "100", "4"],
                 ["0", "-1", "LIMIT", "0", "5"], ["0", "-1", "LIMIT", "0", "-1"],
                 ["0", "-1", "LIMIT", "0"], ["0", "-1", "LIMIT", "x", "1", "BYSCORE"],
                 ["0", "-1", "WITHSCORE"], ["0", "-1", "REV", "REV"],
                 ["a", "b", "BYSCORE"], ["(a", "1", "BYSCORE"], ["nan", "1", "BYSCORE"],
                 ["2", "1", "BYSCORE"], ["(1", "1", "BYSCORE"], ["1", "(1", "BYSCORE"],
                 ["1", "1", "BYSCORE"], ["", "1", "BYSCORE"], ["( 1", "inf", "BYSCORE"],
                 ["0", "-1", "BYSCORE", "BYSCORE"]):
        d.eq("ZRANGE", "z", *args)
    for args in (["-inf", "+inf"], ["-inf", "+inf", "WITHSCORES"], ["(1", "+inf"],
                 ["1", "(2"], ["(-inf", "(inf"], ["2", "1"], ["-inf", "+inf", "LIMIT", "1", "2"],
                 ["-inf", "+inf", "LIMIT", "1", "2", "WITHSCORES"],
                 ["-inf", "+inf", "WITHSCORES", "LIMIT", "0", "-5"],
                 ["-inf", "+inf", "LIMIT", "1"], ["-inf", "+inf", "REV"], ["x", "1"],
                 ["1", "x"], ["0", "1", "BYSCORE"]):
        d.eq("ZRANGEBYSCORE", "z", *args)
        d.eq("ZREVRANGEBYSCORE", "z", *reversed(args[:2]), *args[2:])
    for args in (["0", "-1"], ["0", "2", "WITHSCORES"], ["-2", "-1"], ["5", "1"],
                 ["0", "-1", "LIMIT", "0", "1"], ["0", "-1", "REV"]):
        d.eq("ZREVRANGE", "z", *args)
    for args in (["-inf", "+inf"], ["(1", "2"], ["2", "1"], ["x", "1"], ["1", "1"]):
        d.eq("ZCOUNT", "z", *args)
    d.eq("ZRANGE", "nokey", "0", "-1")
    d.eq("ZRANGEBYSCORE", "nokey", "-inf", "+inf")
    d.eq("ZRANGEBYSCORE", "nokey", "x", "+inf")
    d.eq("ZCOUNT", "nokey", "0", "1")
    d.eq("ZREM", "z", "a", "a", "missing", "b")
    d.eq("ZREM", "nokey", "a")
    d.eq("ZRANGE", "z", "0", "-1", "WITHSCORES")
    for args in ([], ["2"], ["0"], ["-1"], ["x"], ["1", "2"]):
        d.eq("ZPOPMIN", "z", *args)
        d.eq("ZPOPMAX", "z", *args)
    d.eq("ZPOPMIN", "nokey")
    d.eq("ZPOPMAX", "nokey", "3")
    d.eq("ZPOPMAX", "z", "1000")
    d.eq("EXISTS", "z")
    # lexicographic ranges (equal scores, as BYLEX expects)
    d.eq("ZADD", "zl", *sum((["0", m] for m in ("a", "b", "c", "d", "e", "ab", "", "b\x00",
                                                  "\xff", "bb")), []))
    for lo, hi in (("-", "+"), ("[a", "[c"), ("(a", "(c"), ("[b", "(b"), ("[b", "[b"), ("(", "+"),
                   ("[", "+"), ("-", "(b"), ("+", "-"), ("[e", "[a"), ("[\xff", "+"),
                   ("(ab", "[bb"), ("[b\x00", "[b\x00")):
        d.eq("ZRANGEBYLEX", "zl", lo, hi)
        d.eq("ZREVRANGEBYLEX", "zl", hi, lo)
        d.eq("ZLEXCOUNT", "zl", lo, hi)
        d.eq("ZRANGE", "zl", lo, hi, "BYLEX")
        d.eq("ZRANGE", "zl", hi, lo, "BYLEX", "REV", "LIMIT", "1", "3")
    for args in (["-", "+", "LIMIT", "2", "3"], ["-", "+", "LIMIT", "2", "-1"],
                 ["-", "+", "LIMIT", "-1", "2"], ["-", "+", "LIMIT", "20", "2"],
                 ["a", "+"], ["[a", "c"], ["-", "+", "WITHSCORES"], ["-", "+", "LIMIT", "x", "1"],
                 ["-", "+", "BYLEX"], ["-", "+", "REV"]):
        d.eq("ZRANGEBYLEX", "zl", *args)
        d.eq("ZREVRANGEBYLEX", "zl", *reversed(args[:2]), *args[2:])
    d.eq("ZRANGE", "zl", "-", "+", "BYLEX", "WITHSCORES")
    d.eq("ZLEXCOUNT", "zl", "a", "+")
    d.eq("ZLEXCOUNT", "nokey", "-", "+")
    d.eq("ZRANGEBYLEX", "nokey", "-", "+")
    d.eq("ZADD", "zb", *sum(([str(i % 3), b] for i, b in enumerate(BIN)), []))
    d.eq("ZRANGE", "zb", "0", "-1", "WITHSCORES")
    for b in BIN:
        d.eq("ZSCORE", "zb", b)
        d.eq("ZRANK", "zb", b)
    d.eq("ZREM", "zb", *BIN)
    d.eq("EXISTS", "zb")


def expiry(d):
    for cmd in (["HSET", "eh", "f", "v", "g", "w"], ["RPUSH", "el", "a", "b"],
                ["SADD", "es", "a", "b"], ["ZADD", "ez", "1", "a", "2", "b"]):
        d.same(*cmd)
        d.same("PEXPIRE", cmd[1], "30")
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:  # the keys' expiry time passing, not a state wait
        time.sleep(0.005)
    for cmd in (["HGET", "eh", "f"], ["HLEN", "eh"], ["LLEN", "el"], ["LINDEX", "el", "0"],
                ["SISMEMBER", "es", "a"], ["SCARD", "es"], ["ZSCORE", "ez", "a"],
                ["ZCARD", "ez"], ["HSET", "eh", "f2", "v"], ["HLEN", "eh"],
                ["RPUSH", "el", "c"], ["LRANGE", "el", "0", "-1"], ["SADD", "es", "c"],
                ["SCARD", "es"], ["ZADD", "ez", "3", "c"], ["ZCARD", "ez"], ["TTL", "ez"]):
        d.eq(*cmd)


def large(d, tally):
    """5000+ members: several scan chunks of 256 and several commands' batches."""
    n = 6000
    for start in range(0, n, 500):
        d.same("HSET", "H", *sum(([b"field:%05d" % i, b"value-%d" % (i * 31)]
                                  for i in range(start, start + 500)), []))
        d.same("SADD", "S", *[b"member:%d" % (i * 7919 % 100003) for i in range(start, start + 500)])
        d.same("ZADD", "Z", *sum(([str((i * 37) % 1001 - 500) if i % 5 else "%d.25" % (i % 13),
                                   b"zm:%d" % i] for i in range(start, start + 500)), []))
        d.same("RPUSH" if start % 1000 else "LPUSH", "L",
               *[b"el:%d" % i for i in range(start, start + 500)])
    for cmd in (["HLEN", "H"], ["SCARD", "S"], ["ZCARD", "Z"], ["LLEN", "L"]):
        d.eq(*cmd)
    d.eq("HGETALL", "H", norm=pairs)
    d.eq("HKEYS", "H", norm=unordered)
    d.eq("SMEMBERS", "S", norm=unordered)
    d.eq("LRANGE", "L", "0", "-1")
    d.eq("ZRANGE", "Z", "0", "-1", "WITHSCORES")
    for args in (["250", "780"], ["-1000", "-700"], ["5990", "6100"], ["0", "5999", "REV"]):
        d.eq("ZRANGE", "Z", *args)
        d.eq("LRANGE", "L", *args[:2])
    for args in (["-100", "100"], ["(0", "(1"], ["-inf", "+inf", "LIMIT", "300", "700"],
                 ["-inf", "+inf", "LIMIT", "5900", "1000", "WITHSCORES"], ["499", "+inf"]):
        d.eq("ZRANGEBYSCORE", "Z", *args)
        d.eq("ZREVRANGEBYSCORE", "Z", *reversed(args[:2]), *args[2:])
    d.eq("ZCOUNT", "Z", "-250", "(250")
    for i in (0, 1, 257, 2999, 5999):
        d.eq("ZRANK", "Z", b"zm:%d" % i)
        d.eq("ZREVRANK", "Z", b"zm:%d" % i)
        d.eq("LINDEX", "L", str(i))
        d.eq("LINDEX", "L", str(-i - 1))
    d.eq("ZPOPMIN", "Z", "300")
    d.eq("ZPOPMAX", "Z", "300")
    d.eq("LPOP", "L", "300")
    d.eq("RPOP", "L", "300")
    d.eq("HDEL", "H", *[b"field:%05d" % i for i in range(0, 6000, 3)])
    d.eq("SREM", "S", *[b"member:%d" % (i * 7919 % 100003) for i in range(0, 6000, 2)])
    for cmd in (["HLEN", "H"], ["SCARD", "S"], ["ZCARD", "Z"], ["LLEN", "L"]):
        d.eq(*cmd)
    d.eq("HGETALL", "H", norm=pairs)
    d.eq("SMEMBERS", "S", norm=unordered)
    d.eq("ZRANGE", "Z", "0", "-1", "WITHSCORES")
    d.eq("LRANGE", "L", "0", "-1")
    r = d.t.call("SRANDMEMBER", "S", "1000")
    tally.ok(r[0] == "*" and len(set(x[1] for x in r[1])) == 1000, "SRANDMEMBER S 1000",
             short(r)[:100])
    r = d.t.call("HRANDFIELD", "H", "-2000", "WITHVALUES")
    tally.ok(r[0] == "*" and len(r[1]) == 4000, "HRANDFIELD H -2000 WITHVALUES", short(r)[:100])
    d.eq("ZPOPMAX", "Z", "100000")
    d.eq("EXISTS", "Z")
    # a deleted big collection's members never show through a new one of the same name
    d.eq("DEL", "H", "S")
    d.eq("HSET", "H", "field:00001", "new")
    d.eq("HGETALL", "H", norm=pairs)
    d.eq("SADD", "S", "only")
    d.eq("SMEMBERS", "S", norm=unordered)
    d.eq("RENAME", "L", "L2")
    d.eq("LRANGE", "L2", "100", "110")
    d.eq("LLEN", "L2")
    # one command beyond the store's batch limits fails whole (tips-server only)
    r = d.t.call("RPUSH", "toolong", *[b"e%d" % i for i in range(70000)])
    tally.ok(r[0] == "-" and b"too large" in r[1], "RPUSH of 70000 elements refused", short(r))
    tally.ok(d.t.call("EXISTS", "toolong") == (":", 0), "a refused RPUSH wrote nothing")
    d.eq("HSET", "hv", *sum(([b"f%d" % i, b"v" * 60000] for i in range(20)), []))
    d.eq("HSTRLEN", "hv", "f19")
    d.eq("HLEN", "hv")


def limits(d, tally):
    """The layout's size limits (tips-server only): the longest member fits, one byte
    more is refused with nothing written."""
    t = d.t
    for cmd, key, longest in ((["HSET", "lim:h", None, "v"], "lim:h", 1015),
                              (["SADD", "lim:s", None], "lim:s", 1015),
                              (["ZADD", "lim:z", "1", None], "lim:z", 1006),
                              (["RPUSH", "lim:l", None], "lim:l", 65536),
                              (["HSET", "lim:v", "f", None], "lim:v", 65536)):
        at = cmd.index(None)
        for size, fits in ((longest, True), (longest + 1, False)):
            args = list(cmd)
            args[at] = b"m" * size
            rep = t.call(*args)
            if fits:
                tally.ok(rep == (":", 1), "%s of %d bytes stored" % (cmd[0], size), short(rep))
            else:
                tally.ok(rep[0] == "-" and b"too large for one atomic write" in rep[1],
                         "%s of %d bytes refused" % (cmd[0], size), short(rep))
        rep = t.call("TYPE", key)
        tally.ok(rep[0] == "+" and rep[1] != b"none", "%s: the fitting member kept" % key)
    tally.ok(t.call("ZSCORE", "lim:z", b"m" * 1007) == ("$", None), "ZSCORE of a too long member")
    tally.ok(t.call("SISMEMBER", "lim:s", b"m" * 1016) == (":", 0), "SISMEMBER of a too long member")
    tally.ok(t.call("HGET", "lim:h", b"m" * 2000) == ("$", None), "HGET of a too long field")


def concurrency(port, tally):
    """Clients on both event-loop threads updating the same collections: every
    read-modify-write is atomic (tips-server only)."""
    clients, rounds = 4, 150

    def work(n):
        c = Conn(port)
        for i in range(rounds):
            c.call("ZINCRBY", "cc:z", "1", "m")
            c.call("HINCRBY", "cc:h", "f", "2")
            c.call("RPUSH", "cc:l", "c%d-%d" % (n, i))
            c.call("SADD", "cc:s", "c%d-%d" % (n, i), "shared")
            c.call("ZADD", "cc:z2", str(i), "c%d-%d" % (n, i))
            if i % 3 == 0:
                c.call("ZPOPMIN", "cc:z2")
                c.call("LPOP", "cc:l")
        c.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    c = Conn(port)
    total = clients * rounds
    pops = clients * len(range(0, rounds, 3))
    for cmd, want in ((["ZSCORE", "cc:z", "m"], ("$", b"%d" % total)),
                      (["HGET", "cc:h", "f"], ("$", b"%d" % (2 * total))),
                      (["LLEN", "cc:l"], (":", total - pops)),
                      (["SCARD", "cc:s"], (":", total + 1)),
                      (["ZCARD", "cc:z2"], (":", total - pops))):
        rep = c.call(*cmd)
        tally.ok(rep == want, "concurrent: " + show(cmd), "%s, want %s" % (short(rep), want))
    rep = c.call("LRANGE", "cc:l", "0", "-1")
    tally.ok(rep[0] == "*" and len(rep[1]) == total - pops, "concurrent: LRANGE length")
    rep = c.call("ZRANGE", "cc:z2", "0", "-1")
    tally.ok(rep[0] == "*" and len(rep[1]) == total - pops, "concurrent: ZRANGE length")
    c.close()


def multi(d):
    """MULTI/EXEC: the queued collection commands see each other's writes."""
    queued = (["HSET", "mh", "a", "1", "b", "2"], ["HDEL", "mh", "a", "b"], ["HSET", "mh", "c", "3"],
              ["HGETALL", "mh"], ["SADD", "ms", "x", "y"], ["SPOP", "ms", "5"], ["SADD", "ms", "z"],
              ["SMEMBERS", "ms"], ["RPUSH", "ml", "1", "2", "3"], ["LPOP", "ml", "3"],
              ["LPUSH", "ml", "4"], ["LRANGE", "ml", "0", "-1"], ["ZADD", "mz", "1", "a", "2", "b"],
              ["ZINCRBY", "mz", "5", "a"], ["ZPOPMIN", "mz"], ["ZRANGE", "mz", "0", "-1", "WITHSCORES"],
              ["ZADD", "mz", "x", "bad"], ["HLEN", "mh"])
    d.eq("MULTI")
    for cmd in queued:
        d.eq(*cmd)
    a = d.eq("EXEC", norm=lambda r: ("*", [unordered(x) for x in r[1]]) if r[0] == "*" else r)
    for cmd in (["HGETALL", "mh"], ["SMEMBERS", "ms"], ["LRANGE", "ml", "0", "-1"],
                ["ZRANGE", "mz", "0", "-1", "WITHSCORES"]):
        d.eq(*cmd, norm=unordered)
    return a


# ---- the crash check -----------------------------------------------------------------------


def snapshot(conn, keys):
    """Every collection's full content, by type."""
    out = {}
    for k in keys:
        t = conn.call("TYPE", k)[1]
        if t == b"hash":
            out[k] = ("hash", pairs(conn.call("HGETALL", k)), conn.call("HLEN", k))
        elif t == b"list":
            out[k] = ("list", conn.call("LRANGE", k, "0", "-1"), conn.call("LLEN", k))
        elif t == b"set":
            out[k] = ("set", unordered(conn.call("SMEMBERS", k)), conn.call("SCARD", k))
        elif t == b"zset":
            out[k] = ("zset", conn.call("ZRANGE", k, "0", "-1", "WITHSCORES"),
                      conn.call("ZCARD", k))
        else:
            out[k] = (t,)
    return out


def burst_write(i):
    """The i-th write of the crash burst: 20 members into a new key, by type."""
    kind = ("SADD", "ZADD", "HSET", "RPUSH")[i % 4]
    key = "burst:%d" % i
    if kind == "ZADD":
        args = sum(([str(j * 1.5 - i), "m%d" % j] for j in range(20)), [])
    elif kind == "HSET":
        args = sum((["f%d" % j, "v%d-%d" % (i, j)] for j in range(20)), [])
    else:
        args = ["m%d" % j for j in range(20)]
    return [kind, key] + args, key


def snapshot_of(cmd):
    """What snapshot() shows for a key that only the write @cmd made."""
    kind, args = cmd[0], [a.encode() for a in cmd[2:]]
    if kind == "SADD":
        return ("set", ("*", sorted((("$", a) for a in args), key=repr)), (":", 20))
    if kind == "RPUSH":
        return ("list", ("*", [("$", a) for a in args]), (":", 20))
    if kind == "HSET":
        return ("hash", pairs(("*", [("$", a) for a in args])), (":", 20))
    pairs_ = sorted(((float(args[j]), args[j + 1]) for j in range(0, len(args), 2)))
    flat = sum(([("$", m), ("$", b"%.17g" % sc)] for sc, m in pairs_), [])
    return ("zset", ("*", flat), (":", 20))


def crash_check(tips, ref, tally):
    t, r = Conn(tips.port), Conn(ref.port)
    d = Diff(t, r, tally)
    keys = ["ch", "cl", "cs", "cz"]
    for k in keys:
        d.same("DEL", k)
    for i in range(300):
        d.same("HSET", "ch", "f%d" % i, "v%d" % i, "g%d" % (i % 7), "w%d" % i)
        d.same("RPUSH" if i % 2 else "LPUSH", "cl", "e%d" % i, "x%d" % i)
        d.same("SADD", "cs", "m%d" % i, "n%d" % (i % 50))
        d.same("ZADD", "cz", str(i % 17), "z%d" % i, str(i), "y%d" % (i % 40))
        if i % 10 == 9:
            d.same("HDEL", "ch", "f%d" % (i - 5))
            d.same("LPOP", "cl", "2")
            d.same("SREM", "cs", "m%d" % (i - 3))
            d.same("ZPOPMIN", "cz")
    before = snapshot(t, keys)
    tally.ok(before == snapshot(r, keys), "crash: state before the kill equals redis")
    # A pipelined burst of 20-member writes of every type, killed while in flight.
    burst = 400
    cmds = [burst_write(i) for i in range(burst)]
    payload = b"".join(Conn.encode(cmd) for cmd, _ in cmds)
    t.sock.sendall(payload[: len(payload) // 2])
    acked = 0
    while acked < 60:
        rep = t.reply()
        tally.ok(rep == (":", 20), "crash: burst reply %d" % acked, short(rep))
        acked += 1
    tips.proc.send_signal(signal.SIGKILL)
    tips.proc.wait()
    tips.proc = None
    t.close()
    tips.start()
    t = Conn(tips.port)
    after = snapshot(t, keys)
    tally.ok(after == before, "crash: every acknowledged collection write is back",
             "lost or changed keys: %s" % [k for k in keys if after.get(k) != before.get(k)])
    whole = True
    for i, (cmd, key) in enumerate(cmds):
        got = snapshot(t, [key])[key]
        want = snapshot_of(cmd)
        if i < acked and got != want:
            whole = tally.ok(False, "crash: acknowledged %s is not whole" % show(cmd[:2]),
                             short(got))
        elif got != want and got != (b"none",):
            whole = tally.ok(False, "crash: %s half applied" % show(cmd[:2]), short(got))
    tally.ok(whole, "crash: burst writes whole or absent")
    # The restarted server goes on writing the same collections.
    d = Diff(t, r, tally)
    d.eq("HSET", "ch", "after", "1")
    d.eq("RPUSH", "cl", "after")
    d.eq("LRANGE", "cl", "-3", "-1")
    d.eq("ZADD", "cz", "1000", "after")
    d.eq("ZRANGE", "cz", "-2", "-1", "WITHSCORES")
    t.close()
    r.close()


def unordered_index(binary, workdir, tally):
    srv = Server("tips-hash", tips_argv(binary, os.path.join(workdir, "hash.pool"), "tips-hash"),
                 workdir).start()
    try:
        c = Conn(srv.port)
        for cmd, want in ((["HSET", "h", "a", "1", "b", "2"], (":", 2)),
                          (["HGET", "h", "b"], ("$", b"2")), (["HLEN", "h"], (":", 2)),
                          (["SADD", "s", "x"], (":", 1)), (["SISMEMBER", "s", "x"], (":", 1)),
                          (["ZADD", "z", "1.5", "m"], (":", 1)), (["ZSCORE", "z", "m"], ("$", b"1.5")),
                          (["RPUSH", "l", "p", "q"], (":", 2)), (["LINDEX", "l", "-1"], ("$", b"q")),
                          (["LPOP", "l"], ("$", b"p")), (["HDEL", "h", "a", "b"], (":", 2)),
                          (["EXISTS", "h"], (":", 0)), (["HSET", "h", "a", "1"], (":", 1)),
                          (["SET", "str", "v"], ("+", b"OK")),
                          # what needs no scan gets Redis's reply, not the refusal
                          (["HGETALL", "nokey"], ("*", [])), (["SPOP", "nokey"], ("$", None)),
                          (["SPOP", "s", "0"], ("*", [])), (["LRANGE", "l", "5", "10"], ("*", [])),
                          (["ZRANK", "z", "nomember"], ("$", None)),
                          (["ZPOPMIN", "nokey"], ("*", [])), (["ZCOUNT", "nokey", "0", "1"], (":", 0)),
                          (["SMEMBERS", "str"], ("-", b"WRONGTYPE Operation against a key "
                                                      b"holding the wrong kind of value"))):
            rep = c.call(*cmd)
            tally.ok(rep == want, "tips-hash: " + show(cmd), short(rep))
        for cmd in (["HGETALL", "h"], ["HKEYS", "h"], ["HVALS", "h"], ["HRANDFIELD", "h"],
                    ["SMEMBERS", "s"], ["SPOP", "s"], ["SRANDMEMBER", "s", "-2"],
                    ["LRANGE", "l", "0", "-1"], ["ZRANGE", "z", "0", "-1"],
                    ["ZRANGEBYSCORE", "z", "-inf", "+inf"], ["ZREVRANGE", "z", "0", "0"],
                    ["ZCOUNT", "z", "0", "5"], ["ZPOPMIN", "z"], ["ZRANK", "z", "m"]):
            rep = c.call(*cmd)
            tally.ok(rep == ("-", ORDERED_ERROR), "tips-hash: " + show(cmd), short(rep))
        c.close()
    finally:
        srv.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary", nargs="?", help="the tips-server binary")
    ap.add_argument("--server", help="the tips-server binary (or $TIPS_SERVER)")
    ap.add_argument("--index", default="tips-art")
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    a = ap.parse_args()
    binary = a.server or a.binary or os.environ.get("TIPS_SERVER")
    if not binary or not os.access(binary, os.X_OK):
        sys.exit("FAIL: no tips-server binary (argument, --server or $TIPS_SERVER)")
    if not os.access(a.redis, os.X_OK):
        sys.exit("FAIL: redis-server not found; install it with scripts/install-deps.sh")
    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="tips-coll-", dir="/dev/shm")
    tally = Tally()
    servers = []
    try:
        tips = Server("tips-server", tips_argv(binary, os.path.join(workdir, "tips.pool"),
                                               a.index), workdir)
        ref = Server("redis-server", redis_argv(a.redis, workdir), workdir)
        servers = [tips, ref]
        tips.start()
        ref.start()
        t, r = Conn(tips.port), Conn(ref.port)
        d = Diff(t, r, tally)
        for name, fn in (("wrongtype/arity", lambda: wrongtype_and_arity(d)),
                         ("hashes", lambda: hashes(d)), ("hrandfield", lambda: hrandfield(d, tally)),
                         ("lists", lambda: lists(d)), ("sets", lambda: sets(d, tally)),
                         ("zsets", lambda: zsets(d)), ("expiry", lambda: expiry(d)),
                         ("multi", lambda: multi(d)), ("limits", lambda: limits(d, tally)),
                         ("concurrency", lambda: concurrency(tips.port, tally)),
                         ("large", lambda: large(d, tally))):
            t0 = time.monotonic()
            fn()
            print("%-16s done in %.2f s" % (name, time.monotonic() - t0))
        t.close()
        r.close()
        t0 = time.monotonic()
        crash_check(tips, ref, tally)
        print("%-16s done in %.2f s" % ("crash", time.monotonic() - t0))
        unordered_index(binary, workdir, tally)
    except Exception as e:  # a server that died or hung is one failure, with its log
        tally.ok(False, "aborted: %r" % e)
        for s in servers:
            print("--- %s log tail:\n%s" % (s.name, "\n".join(s.log_tail())))
    finally:
        for s in servers:
            s.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    print("run time %.1f s" % (time.monotonic() - started))
    print("%d passed, %d failed" % (tally.passed, tally.failed))
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
