"""diffcases.py - the command sequences of the differential test (test_diff.py).

Each case is a list of steps run on a fresh keyspace (FLUSHALL) against both servers:
  a plain tuple        a command whose replies must be equal (type and value)
  Cmd(mode, *args)     a command compared by mode: 'set' (array as a multiset: Redis
                       leaves the order unspecified), 'pairs' (field/value array as a
                       dict), 'len' (same type, same array length: random picks),
                       'shape' (same types only), 'time' (TIME: two integers),
                       ('near', tol) (integers within tol: TTLs seen at different instants)
  Scan(*opts)          a full SCAN iteration with opts; the sets of keys must be equal
  Raw(bytes, close)    bytes on a new connection (inline commands, bad frames): the
                       replies and whether the server closed the connection must be equal
  Poll(cmd, reply)     repeat cmd until it gives reply, on each server (expiry), deadline 3 s
Groups let a run choose a subset (tips-hash and listdb run fewer).
"""
import random
import time


class Cmd:
    def __init__(self, mode, *args):
        self.mode = mode
        self.args = args


class Scan:
    def __init__(self, *opts):
        self.opts = opts


class Raw:
    def __init__(self, data, close=False):
        self.data = data
        self.close = close


class Poll:
    def __init__(self, args, reply):
        self.args = args
        self.reply = reply


def S(*a):
    return Cmd("set", *a)


def near(tol, *a):
    return Cmd(("near", tol), *a)


CASES = []   # (group, name, steps)


def case(group, name, steps):
    CASES.append((group, name, steps if callable(steps) else list(steps)))


def now_s():
    return int(time.time())


# -- connection and server commands ------------------------------------------------------
case("connection", "ping-echo-select", [
    ("PING",), ("PING", "hello"), ("PING", "a", "b"), ("ECHO", "hi"), ("ECHO", ""),
    ("ECHO",), ("SELECT", "0"), ("SELECT", "abc"), ("ping",), ("pInG",)])
case("connection", "client-name", [
    ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", "tester"), ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME", "a b"), ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", ""),
    ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME"), ("CLIENT", "GETNAME", "x")])
case("connection", "time-dbsize-flush", [
    Cmd("time", "TIME"), ("DBSIZE",), ("SET", "a", "1"), ("HSET", "h", "f", "v"), ("DBSIZE",),
    ("FLUSHDB",), ("DBSIZE",), ("GET", "a"), ("SET", "b", "1"), ("RPUSH", "l", "x"),
    ("FLUSHALL",), ("DBSIZE",), ("EXISTS", "b", "l"), ("DBSIZE", "x")])

# -- keys --------------------------------------------------------------------------------
case("keys", "del-unlink-exists-type", [
    ("MSET", "a", "1", "b", "2", "c", "3"), ("DEL", "a"), ("DEL", "a"), ("DEL", "b", "c", "d"),
    ("SET", "x", "1"), ("UNLINK", "x", "y"), ("UNLINK", "x"), ("SET", "a", "1"),
    ("EXISTS", "a", "a", "b"), ("EXISTS", "none"), ("TYPE", "a"), ("TYPE", "none"),
    ("HSET", "h", "f", "v"), ("TYPE", "h"), ("RPUSH", "l", "a"), ("TYPE", "l"),
    ("SADD", "s", "a"), ("TYPE", "s"), ("ZADD", "z", "1", "a"), ("TYPE", "z"),
    ("DEL", "h", "l", "s", "z", "a"), ("DBSIZE",), ("DEL",), ("EXISTS",), ("TYPE",)])
case("keys", "keys-patterns", [
    ("MSET", "hello", "1", "hallo", "2", "hxllo", "3", "hllo", "4", "heeeello", "5", "a*b", "6",
     "x?y", "7", "[ab]", "8"),
    S("KEYS", "*"), S("KEYS", "h?llo"), S("KEYS", "h*llo"), S("KEYS", "h[ae]llo"),
    S("KEYS", "h[^e]llo"), S("KEYS", "h[a-b]llo"), S("KEYS", "a\\*b"), S("KEYS", "*\\?*"),
    S("KEYS", "\\[ab\\]"), S("KEYS", "nomatch*"), S("KEYS", "[ab"), S("KEYS", "")])
case("keys", "rename", [
    ("SET", "a", "1"), ("RENAME", "a", "b"), ("GET", "a"), ("GET", "b"), ("RENAME", "nokey", "c"),
    ("SET", "c", "2"), ("RENAME", "b", "c"), ("GET", "c"), ("DBSIZE",), ("RENAME", "c", "c"),
    ("GET", "c"), ("HSET", "h", "f", "v", "g", "w"), ("RENAME", "h", "h2"), Cmd("pairs", "HGETALL", "h2"),
    ("EXISTS", "h"), ("EXPIRE", "h2", "100"), ("RENAME", "h2", "h3"), near(1, "TTL", "h3"),
    ("ZADD", "z", "1", "a", "2", "b"), ("RENAME", "z", "c"), ("TYPE", "c"),
    ("ZRANGE", "c", "0", "-1", "WITHSCORES"), ("RPUSH", "l", "1", "2"), ("SET", "s", "x"),
    ("RENAME", "s", "l"), ("TYPE", "l"), ("GET", "l"), ("RENAME", "a"), ("RENAME", "a", "b", "c")])


def scan_keys():
    steps = [("SET", "str:%d" % i, str(i)) for i in range(25)]
    steps += [("HSET", "hash:%d" % i, "f", "v") for i in range(15)]
    steps += [("SADD", "set:%d" % i, "m") for i in range(10)]
    steps += [("RPUSH", "list:%d" % i, "e") for i in range(5)]
    steps += [("ZADD", "zset:%d" % i, "1", "m") for i in range(5)]
    steps += [Scan(), Scan("COUNT", "5"), Scan("COUNT", "1000"), Scan("MATCH", "str:*"),
              Scan("MATCH", "*1*", "COUNT", "2"), Scan("TYPE", "hash"), Scan("TYPE", "string"),
              Scan("TYPE", "list"), Scan("TYPE", "set"), Scan("TYPE", "zset"),
              Scan("TYPE", "string", "MATCH", "str:1*", "COUNT", "3"), Scan("MATCH", "none*"),
              ("SCAN", "abc"), ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "x"),
              ("SCAN", "0", "MATCH"), ("SCAN", "0", "FOO", "1"), ("SCAN",)]
    return steps


case("keys", "scan", scan_keys())

# -- expiry ------------------------------------------------------------------------------
case("expire", "ttl-persist", lambda: [
    ("SET", "a", "1"), ("TTL", "a"), ("PTTL", "a"), ("EXPIRE", "a", "100"), near(1, "TTL", "a"),
    near(1500, "PTTL", "a"), ("PERSIST", "a"), ("TTL", "a"), ("PERSIST", "a"), ("PERSIST", "none"),
    ("TTL", "none"), ("PTTL", "none"), ("EXPIRE", "none", "10"), ("PEXPIRE", "a", "100000"),
    near(1500, "PTTL", "a"), ("EXPIREAT", "a", str(now_s() + 1000)), near(2, "TTL", "a"),
    ("EXPIREAT", "a", "1"), ("EXISTS", "a"), ("SET", "b", "1"), ("PEXPIRE", "b", "-1"),
    ("GET", "b"), ("SET", "c", "1"), ("EXPIRE", "c", "0"), ("EXISTS", "c"),
    ("SET", "d", "1"), ("EXPIRE", "d", "abc"), ("EXPIRE", "d", "1.5"),
    ("EXPIRE", "d", "9999999999999999"), ("PEXPIRE", "d", "9223372036854775807"),
    ("EXPIREAT", "d", "x"), ("TTL", "d"), ("EXPIRE", "d"), ("TTL",), ("PERSIST",)])
case("expire", "ttl-kept-or-cleared", lambda: [
    ("SET", "a", "1", "EX", "100"), ("SET", "a", "2"), ("TTL", "a"),
    ("SET", "a", "1", "EX", "100"), ("SET", "a", "2", "KEEPTTL"), near(1, "TTL", "a"),
    ("GETSET", "a", "3"), ("TTL", "a"), ("SET", "n", "1", "EX", "100"), ("INCR", "n"),
    near(1, "TTL", "n"), ("APPEND", "n", "0"), near(1, "TTL", "n"), ("SETRANGE", "n", "0", "9"),
    near(1, "TTL", "n"), ("HSET", "h", "f", "v"), ("EXPIRE", "h", "100"), ("HSET", "h", "g", "w"),
    near(1, "TTL", "h"), ("HDEL", "h", "f", "g"), ("TTL", "h"), ("SETEX", "e", "50", "v"),
    near(1, "TTL", "e"), ("GETDEL", "e"), ("TTL", "e")])
case("expire", "expiry-happens", [
    ("SET", "e", "1", "PX", "30"), Poll(("GET", "e"), ("$", None)), ("EXISTS", "e"),
    ("HSET", "h", "f", "v"), ("PEXPIRE", "h", "30"), Poll(("EXISTS", "h"), (":", 0)),
    ("HGET", "h", "f"), ("RPUSH", "l", "a"), ("PEXPIRE", "l", "30"), Poll(("LLEN", "l"), (":", 0)),
    ("DBSIZE",)])

# -- strings -----------------------------------------------------------------------------
case("strings", "set-options", lambda: [
    ("GET", "none"), ("SET", "a", "hello"), ("GET", "a"), ("SET", "a", "x", "NX"), ("SET", "b", "x", "NX"),
    ("SET", "c", "x", "XX"), ("SET", "a", "y", "XX"), ("GET", "a"), ("SET", "a", "z", "GET"),
    ("SET", "newk", "v", "GET"), ("SET", "a", "v", "EX", "100"), near(1, "TTL", "a"),
    ("SET", "a", "v", "PX", "100000"), near(1500, "PTTL", "a"),
    ("SET", "a", "v", "EXAT", str(now_s() + 100)), near(2, "TTL", "a"),
    ("SET", "a", "v", "PXAT", str(now_s() * 1000 + 100000)), near(2000, "PTTL", "a"),
    ("SET", "a", "w", "KEEPTTL"), near(2, "TTL", "a"), ("GET", "a"), ("SET", "a", "v", "NX", "XX"),
    ("SET", "a", "v", "EX", "10", "PX", "10"), ("SET", "a", "v", "EX", "0"), ("SET", "a", "v", "EX", "-1"),
    ("SET", "a", "v", "EX", "abc"), ("SET", "a", "v", "PX", "0"), ("SET", "a", "v", "FOO"),
    ("SET", "a", "v", "EX"), ("SET", "a", "v", "KEEPTTL", "EX", "10"), ("SET", "a", "v", "nx", "get"),
    ("SET", "q", "v", "NX", "GET"), ("SET", "q", "w", "XX", "GET"), ("GET", "q"),
    ("SET", "a", "v", "EXAT", "1"), ("EXISTS", "a"), ("HSET", "h", "f", "v"), ("SET", "h", "v", "GET"),
    ("GET", "h"), ("SET", "h", "v", "NX", "GET"), ("SET", "h", "v"), ("GET", "h"), ("SET", "a"),
    ("SET",)])
case("strings", "setnx-setex-getset-getdel", [
    ("SET", "a", "1"), ("SETNX", "a", "2"), ("SETNX", "n", "1"), ("GET", "n"), ("SETEX", "a", "100", "v"),
    near(1, "TTL", "a"), ("GET", "a"), ("SETEX", "a", "0", "v"), ("SETEX", "a", "abc", "v"),
    ("SETEX", "a", "-5", "v"), ("GETSET", "a", "w"), ("GETSET", "none", "w"), ("GET", "none"),
    ("GETDEL", "a"), ("GETDEL", "a"), ("HSET", "h", "f", "v"), ("GETSET", "h", "x"), ("GETDEL", "h"),
    ("SETNX", "h", "x"), ("SETEX", "h", "10", "x"), ("TYPE", "h"), ("SETNX", "a"), ("SETEX", "a", "1"),
    ("GETSET", "a"), ("GETDEL",), ("GETDEL", "a", "b")])
case("strings", "mset-mget-msetnx", [
    ("MSET", "a", "1", "b", "2"), ("MGET", "a", "b", "none"), ("MSET", "a"), ("MSET", "a", "1", "b"),
    ("MSET", "a", "x", "a", "y"), ("GET", "a"), ("MSETNX", "a", "1", "z", "2"), ("MGET", "z"),
    ("MSETNX", "y", "1", "z", "2"), ("MGET", "y", "z"), ("MSETNX", "w", "1", "w", "2"), ("GET", "w"),
    ("HSET", "h", "f", "v"), ("MGET", "h", "a"), ("MSETNX", "h", "1", "v", "2"), ("EXISTS", "v"),
    ("MSET", "h", "s"), ("GET", "h"), ("MGET",), ("MSETNX", "a")])
case("strings", "counters", [
    ("INCR", "n"), ("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", "10"), ("DECRBY", "n", "3"),
    ("INCRBY", "n", "-5"), ("DECR", "newd"), ("DECRBY", "newd2", "7"), ("SET", "f", "1.5"),
    ("INCR", "f"), ("INCRBY", "n", "abc"), ("INCRBY", "n", "1.0"), ("INCRBY", "n", ""),
    ("SET", "m", "9223372036854775807"), ("INCR", "m"), ("INCRBY", "m", "0"), ("GET", "m"),
    ("SET", "m", "-9223372036854775808"), ("DECR", "m"), ("INCRBY", "n", "9223372036854775808"),
    ("DECRBY", "n", "-9223372036854775808"), ("SET", "s", " 1"), ("INCR", "s"), ("SET", "s", "01"),
    ("INCR", "s"), ("SET", "s", "1 "), ("INCR", "s"), ("SET", "s", ""), ("INCR", "s"),
    ("SET", "s", "+1"), ("INCR", "s"), ("SET", "s", b"1\x00"), ("INCR", "s"), ("INCRBY", "n", b"5\x00"), ("SET", "s", "-0"), ("INCR", "s"), ("SET", "i", "10"),
    ("APPEND", "i", "5"), ("INCR", "i"), ("GET", "i"), ("INCR",), ("INCR", "a", "b"), ("INCRBY", "n"),
    ("DECRBY", "n"), ("DECR",)])
case("strings", "incrbyfloat", [
    ("SET", "f", "1.5"), ("INCRBYFLOAT", "f", "0.1"), ("INCRBYFLOAT", "f", "-5"),
    ("INCRBYFLOAT", "f", "1e3"), ("INCRBYFLOAT", "new", "3"), ("INCRBYFLOAT", "f", "abc"),
    ("INCRBYFLOAT", "f", "inf"), ("INCRBYFLOAT", "f", "nan"), ("INCRBYFLOAT", "f", ""),
    ("SET", "e", "10.0"), ("INCRBYFLOAT", "e", "0"), ("SET", "e", "5.0e3"), ("INCRBYFLOAT", "e", "1"),
    ("INCRBYFLOAT", "e", "0.1"), ("INCRBYFLOAT", "x", "1.23456789012345678"),
    ("INCRBYFLOAT", "y", "0.1"), ("INCRBYFLOAT", "y", "0.2"), ("INCRBYFLOAT", "z", "-0.0"),
    ("INCRBYFLOAT", "big", "1e300"), ("INCRBYFLOAT", "big", "1e300"), ("SET", "s", "abc"),
    ("INCRBYFLOAT", "s", "1"), ("SET", "i", "7"), ("INCRBYFLOAT", "i", "3"), ("INCR", "i"),
    ("INCRBYFLOAT", "t", "  1"), ("INCRBYFLOAT", "u", "0x10"), ("INCRBYFLOAT", "v", "3.0e-5"),
    ("INCRBYFLOAT", "w", "12345678901234567890"), ("SET", "nul", b"1\x00x"), ("INCRBYFLOAT", "nul", "0.5"),
    ("INCRBYFLOAT", "w", b"0.5\x00zz"), ("SET", "nul", b"2.5\x00"), ("INCRBYFLOAT", "nul", "1"),
    ("SETRANGE", "pad", "3", "1"), ("INCRBYFLOAT", "pad", "1"), ("GET", "w"), ("INCRBYFLOAT", "f")])
case("strings", "append-strlen-ranges", [
    ("APPEND", "a", "foo"), ("APPEND", "a", "bar"), ("GET", "a"), ("STRLEN", "a"), ("STRLEN", "none"),
    ("GETRANGE", "a", "0", "2"), ("GETRANGE", "a", "-3", "-1"), ("GETRANGE", "a", "5", "1"),
    ("GETRANGE", "a", "0", "100"), ("GETRANGE", "a", "-100", "-50"), ("GETRANGE", "a", "-100", "2"),
    ("GETRANGE", "none", "0", "1"), ("GETRANGE", "a", "0", "abc"), ("GETRANGE", "a", "6", "6"),
    ("SETRANGE", "a", "2", "XY"), ("GET", "a"), ("SETRANGE", "b", "5", "hi"), ("GET", "b"),
    ("SETRANGE", "c", "0", ""), ("EXISTS", "c"), ("SETRANGE", "a", "-1", "x"),
    ("SETRANGE", "a", "536870912", "x"), ("SETRANGE", "a", "10", ""), ("GET", "a"),
    ("SETRANGE", "a", "abc", "x"), ("APPEND", "a"), ("STRLEN",), ("GETRANGE", "a", "0"),
    ("SETRANGE", "a", "0")])

# -- hashes ------------------------------------------------------------------------------
case("hashes", "hash-basics", [
    ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "3", "c", "4"), ("HGET", "h", "a"),
    ("HGET", "h", "none"), ("HGET", "none", "a"), ("HMGET", "h", "a", "b", "none"), ("HMGET", "none", "a"),
    ("HSETNX", "h", "a", "9"), ("HSETNX", "h", "d", "9"), ("HMSET", "h", "e", "5", "f", "6"),
    Cmd("pairs", "HGETALL", "h"), ("HLEN", "h"), ("HEXISTS", "h", "a"), ("HEXISTS", "h", "z"),
    S("HKEYS", "h"), S("HVALS", "h"), ("HDEL", "h", "a", "z"), ("HDEL", "h", "b", "c"),
    ("HDEL", "h", "d", "e", "f", "f"), ("EXISTS", "h"), ("HGETALL", "none"), ("HKEYS", "none"),
    ("HVALS", "none"), ("HLEN", "none"), ("HDEL", "none", "a"), ("HEXISTS", "none", "a"),
    ("HSET", "h", "a", ""), ("HGET", "h", "a"), ("HSET", "h", "", "empty"), ("HGET", "h", ""),
    Cmd("pairs", "HGETALL", "h"), ("HSETNX", "n", "f", "v"), ("HGET", "n", "f")])
case("hashes", "hincrby-and-arity", [
    ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "-10"), ("HSET", "h", "s", "abc"),
    ("HINCRBY", "h", "s", "1"), ("HINCRBY", "h", "n", "abc"), ("HINCRBY", "h", "n", "1.5"),
    ("HSET", "h", "m", "9223372036854775807"), ("HINCRBY", "h", "m", "1"), ("HGET", "h", "m"),
    ("HSET", "h", "z", " 5"), ("HINCRBY", "h", "z", "1"), ("HSET",), ("HSET", "h"), ("HSET", "h", "a"),
    ("HSET", "h", "a", "1", "b"), ("HMSET", "h", "a"), ("HGET", "h"), ("HMGET", "h"), ("HGETALL",),
    ("HDEL", "h"), ("HLEN",), ("HEXISTS", "h"), ("HKEYS",), ("HVALS", "h", "x"), ("HINCRBY", "h", "n"),
    ("HSETNX", "h", "a")])
case("hashes", "hash-many-fields", [
    ("HSET", "h") + tuple(x for i in range(300) for x in ("field%03d" % i, "value%d" % (i * 7))),
    ("HLEN", "h"), Cmd("pairs", "HGETALL", "h"), S("HKEYS", "h"), S("HVALS", "h"),
    ("HMGET", "h", "field000", "field150", "field299", "field300"),
    ("HDEL", "h") + tuple("field%03d" % i for i in range(0, 300, 2)), ("HLEN", "h"),
    Cmd("pairs", "HGETALL", "h")])

# -- lists -------------------------------------------------------------------------------
case("lists", "list-basics", [
    ("RPUSH", "l", "a", "b", "c"), ("LPUSH", "l", "x", "y"), ("LRANGE", "l", "0", "-1"), ("LLEN", "l"),
    ("LINDEX", "l", "0"), ("LINDEX", "l", "-1"), ("LINDEX", "l", "100"), ("LINDEX", "l", "-100"),
    ("LINDEX", "l", "abc"), ("LRANGE", "l", "1", "2"), ("LRANGE", "l", "-2", "-1"),
    ("LRANGE", "l", "5", "1"), ("LRANGE", "l", "-100", "100"), ("LRANGE", "l", "0", "x"),
    ("LPOP", "l"), ("RPOP", "l"), ("LPOP", "l", "2"), ("RPOP", "l", "10"), ("LPOP", "l"), ("EXISTS", "l"),
    ("LPOP", "none", "2"), ("RPOP", "none", "2"), ("RPOP", "none"), ("RPUSH", "l", "a"), ("LPOP", "l", "0"),
    ("RPOP", "l", "0"), ("LPOP", "l", "-1"), ("LPOP", "l", "x"), ("LPOP", "l", "1"), ("LLEN", "none"),
    ("LRANGE", "none", "0", "-1"), ("LINDEX", "none", "0"), ("RPUSH", "l"), ("LPUSH", "l"),
    ("LPOP",), ("LPOP", "l", "1", "2"), ("LRANGE", "l", "0"), ("LINDEX", "l"), ("LLEN",)])
case("lists", "list-long", [
    ("RPUSH", "l") + tuple("e%d" % i for i in range(200)), ("LPUSH", "l") + tuple("p%d" % i for i in range(50)),
    ("LLEN", "l"), ("LRANGE", "l", "0", "-1"), ("LRANGE", "l", "45", "60"), ("LINDEX", "l", "150"),
    ("LINDEX", "l", "-201"), ("LPOP", "l", "30"), ("RPOP", "l", "30"), ("LRANGE", "l", "0", "-1"),
    ("RPUSH", "l", ""), ("LINDEX", "l", "-1"), ("LLEN", "l")])

# -- sets --------------------------------------------------------------------------------
case("sets", "set-basics", [
    ("SADD", "s", "a", "b", "c", "a"), ("SADD", "s", "a", "d"), ("SCARD", "s"), ("SISMEMBER", "s", "a"),
    ("SISMEMBER", "s", "z"), ("SISMEMBER", "none", "a"), S("SMEMBERS", "s"), ("SREM", "s", "a", "z"),
    ("SREM", "s", "none"), ("SREM", "none", "a"), S("SMEMBERS", "s"), ("SREM", "s", "b", "c", "d"),
    ("EXISTS", "s"), ("SMEMBERS", "none"), ("SCARD", "none"), ("SADD", "s"), ("SREM", "s"), ("SCARD",),
    ("SISMEMBER", "s"), ("SMEMBERS",), ("SADD", "s", ""), ("SISMEMBER", "s", ""), ("SCARD", "s")])
case("sets", "set-large", [
    ("SADD", "s") + tuple("m%d" % i for i in range(300)), ("SADD", "n") + tuple(str(i) for i in range(300)),
    ("SCARD", "s"), ("SCARD", "n"), S("SMEMBERS", "s"), S("SMEMBERS", "n"), ("SISMEMBER", "n", "299"),
    ("SREM", "n") + tuple(str(i) for i in range(0, 300, 3)), ("SCARD", "n"), S("SMEMBERS", "n"),
    ("SADD", "n", "x"), S("SMEMBERS", "n")])
# SPOP and SRANDMEMBER scan a set's members: on an unordered index they answer the
# documented error and the set stays, so they have a group of their own.
case("setpop", "spop-srandmember", [
    ("SADD", "s", "a", "b", "c", "d"), S("SPOP", "s", "100"), ("EXISTS", "s"), ("SADD", "s", "x"), ("SPOP", "s"),
    ("SPOP", "none"), ("SPOP", "none", "5"), ("SADD", "s", "1", "2", "3", "4", "5", "01"),
    Cmd("shape", "SRANDMEMBER", "s"), Cmd("len", "SRANDMEMBER", "s", "3"), S("SRANDMEMBER", "s", "10"),
    Cmd("len", "SRANDMEMBER", "s", "-8"), ("SRANDMEMBER", "s", "0"), ("SRANDMEMBER", "none"),
    ("SRANDMEMBER", "none", "3"), ("SRANDMEMBER", "s", "x"), Cmd("len", "SPOP", "s", "2"), ("SCARD", "s"),
    ("SPOP", "s", "-1"), ("SPOP", "s", "0"), ("SPOP", "s", "x"), ("SPOP",), ("SRANDMEMBER",),
    ("SADD", "n") + tuple(str(i) for i in range(300)), S("SPOP", "n", "1000"), ("EXISTS", "n")])

# -- sorted sets -------------------------------------------------------------------------
case("zsets", "zadd-options", [
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1.5", "a"), ("ZSCORE", "z", "a"),
    ("ZADD", "z", "CH", "5", "a", "9", "d"), ("ZADD", "z", "NX", "100", "a", "4", "e"), ("ZSCORE", "z", "a"),
    ("ZADD", "z", "XX", "7", "a", "8", "f"), ("ZSCORE", "z", "f"), ("ZADD", "z", "XX", "CH", "7", "a", "8", "f"),
    ("ZADD", "z", "XX", "CH", "8", "a"), ("ZADD", "z", "NX", "XX", "1", "a"), ("ZADD", "z", "abc", "a"),
    ("ZADD", "z", "1"), ("ZADD", "z", "1", "a", "2"), ("ZADD", "z", "nan", "a"), ("ZADD", "z", "CH"),
    ("ZADD", "z", "nx", "ch", "2", "b", "3", "new"), ("ZADD", "z", "INCR", "1", "a"),
    ("ZADD", "z", "INCR", "1", "a", "2", "b"), ("ZCARD", "z"), ("ZCARD", "none"), ("ZSCORE", "none", "a"),
    ("ZSCORE", "z", "none"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZADD", "z"), ("ZCARD",),
    ("ZSCORE", "z"), ("ZREM", "z"), ("ZADD", "z", "1e400", "x"), ("ZADD", "z", "-0", "zero"),
    ("ZSCORE", "z", "zero")])
case("zsets", "zscore-format-zincrby", [
    ("ZADD", "z", "0.1", "x", "1e100", "y", "3.0", "w", "-2.5", "v", "1e-7", "u", "123456789012", "t",
     "+inf", "p", "-inf", "n"),
    ("ZSCORE", "z", "x"), ("ZSCORE", "z", "y"), ("ZSCORE", "z", "w"), ("ZSCORE", "z", "u"),
    ("ZSCORE", "z", "t"), ("ZSCORE", "z", "p"), ("ZSCORE", "z", "n"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ("ZINCRBY", "z", "2.5", "x"), ("ZINCRBY", "z", "1", "new"), ("ZINCRBY", "z", "abc", "x"),
    ("ZINCRBY", "z", "1", "p"), ("ZINCRBY", "z", "-inf", "p"), ("ZINCRBY", "none", "3", "m"),
    ("ZRANGE", "none", "0", "-1", "WITHSCORES"), ("ZINCRBY", "z", "0.2", "x"), ("ZINCRBY", "z", "1"),
    ("ZINCRBY", "z", "1", "a", "b")])
case("zsets", "zrange-forms", [
    ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "5", "ee", "7", "g", "-1", "m"),
    ("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "1", "2"), ("ZRANGE", "z", "-2", "-1", "WITHSCORES"),
    ("ZRANGE", "z", "0", "-1", "REV"), ("ZRANGE", "z", "0", "2", "REV", "WITHSCORES"),
    ("ZRANGE", "z", "(1", "5", "BYSCORE"), ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"),
    ("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "0", "2", "WITHSCORES"),
    ("ZRANGE", "z", "5", "1", "BYSCORE"), ("ZRANGE", "z", "5", "(5", "BYSCORE"),
    ("ZRANGE", "z", "a", "b", "BYSCORE"), ("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"),
    ("ZRANGE", "z", "1", "5", "BYSCORE", "LIMIT", "2"), ("ZRANGE", "z", "1", "5", "BYSCORE", "LIMIT", "0", "-1"),
    ("ZRANGE", "z", "1", "5", "BYSCORE", "LIMIT", "-1", "3"), ("ZRANGE", "z", "5", "1", "BYSCORE", "REV"),
    ("ZRANGE", "z", "10", "20"), ("ZRANGE", "z", "x", "1"), ("ZRANGE", "z", "0", "-1", "FOO"),
    ("ZRANGE", "none", "0", "-1"), ("ZRANGE", "z", "0"), ("ZRANGEBYSCORE", "z", "2", "5"),
    ("ZRANGEBYSCORE", "z", "(2", "(5", "WITHSCORES"), ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "1"),
    ("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "2", "3"), ("ZRANGEBYSCORE", "z", "5", "2"),
    ("ZRANGEBYSCORE", "z", "x", "2"), ("ZRANGEBYSCORE", "z", "1"), ("ZREVRANGE", "z", "0", "1"),
    ("ZREVRANGE", "z", "0", "-1", "WITHSCORES"), ("ZREVRANGE", "z", "-3", "-2"), ("ZREVRANGE", "z", "0"),
    ("ZREVRANGE", "none", "0", "-1"), ("ZRANK", "z", "a"), ("ZRANK", "z", "ee"), ("ZRANK", "z", "m"),
    ("ZRANK", "z", "none"), ("ZRANK", "none", "a"), ("ZRANK", "z")])
case("zsets", "zrem-zpop-ties", [
    ("ZADD", "z", "1", "c", "1", "a", "1", "b", "0", "zz", "2", "aa"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ("ZREM", "z", "a", "none"), ("ZREM", "z", "none"), ("ZREM", "none", "a"), ("ZPOPMIN", "z"),
    ("ZPOPMAX", "z"), ("ZADD", "z", "5", "x", "6", "y", "7", "w"), ("ZPOPMIN", "z", "2"),
    ("ZPOPMAX", "z", "10"), ("EXISTS", "z"), ("ZPOPMIN", "none"), ("ZPOPMAX", "none", "3"),
    ("ZADD", "z", "1", "a"), ("ZPOPMIN", "z", "0"), ("ZPOPMIN", "z", "-1"), ("ZPOPMAX", "z", "x"),
    ("ZPOPMIN",), ("ZPOPMAX", "z", "1", "2"), ("ZREM", "z", "a"), ("EXISTS", "z")])
case("zsets", "zset-large", [
    ("ZADD", "z") + tuple(x for i in range(300) for x in (str((i * 37) % 101), "m%03d" % i)),
    ("ZCARD", "z"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZRANGE", "z", "10", "20", "REV"),
    ("ZRANGEBYSCORE", "z", "50", "(60", "WITHSCORES"), ("ZRANK", "z", "m150"),
    ("ZREM", "z") + tuple("m%03d" % i for i in range(0, 300, 4)), ("ZCARD", "z"),
    ("ZRANGE", "z", "100", "+inf", "BYSCORE", "REV", "LIMIT", "3", "10", "WITHSCORES"),
    ("ZPOPMIN", "z", "5"), ("ZPOPMAX", "z", "5"), ("ZRANK", "z", "m151")])

# -- transactions ------------------------------------------------------------------------
case("multi", "multi-exec-discard", [
    ("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("GET", "a"), ("EXEC",), ("MULTI",), ("SET", "b", "1"),
    ("DISCARD",), ("GET", "b"), ("EXEC",), ("DISCARD",), ("MULTI",), ("MULTI",), ("DISCARD",),
    ("MULTI",), ("SET", "a"), ("SET", "c", "1"), ("EXEC",), ("GET", "c"), ("MULTI",), ("SET", "a", "x"),
    ("INCR", "a"), ("SET", "d", "1"), ("EXEC",), ("GET", "d"), ("MULTI",), ("MSET", "x", "1", "y", "2"),
    ("HSET", "h", "f", "v"), ("RPUSH", "l", "1", "2"), ("ZADD", "z", "1", "m"), ("EXEC",),
    ("MULTI",), ("EXEC",), ("MULTI",), ("PING",), ("ECHO", "a"), ("DBSIZE",), ("EXEC",),
    ("MULTI",), ("SET", "new", "1"), ("DBSIZE",), ("KEYS", "ne?"), ("EXISTS", "new"), ("DEL", "new"), ("DBSIZE",),
    ("EXEC",), ("MULTI",), ("NOSUCHCMD", "x"), ("SET", "e", "1"), ("EXEC",), ("EXISTS", "e"), ("MULTI", "x"),
    ("EXEC", "x"), ("MULTI",), ("GET", "h"), ("LPOP", "l"), ("EXEC",), ("MULTI",), ("DEL", "x", "y"),
    ("RENAME", "z", "z2"), ("EXPIRE", "z2", "100"), ("EXEC",), near(1, "TTL", "z2")])

# -- error replies -----------------------------------------------------------------------
FAMILY = {
    "string": [("GET", "K"), ("INCR", "K"), ("INCRBYFLOAT", "K", "1"), ("APPEND", "K", "x"), ("STRLEN", "K"),
               ("GETRANGE", "K", "0", "1"), ("SETRANGE", "K", "0", "x"), ("GETSET", "K", "v"),
               ("GETDEL", "K"), ("DECRBY", "K", "1"), ("SET", "K", "v", "GET")],
    "hash": [("HSET", "K", "f", "v"), ("HGET", "K", "f"), ("HGETALL", "K"), ("HDEL", "K", "f"),
             ("HLEN", "K"), ("HINCRBY", "K", "f", "1"), ("HKEYS", "K"), ("HMGET", "K", "f"), ("HEXISTS", "K", "f")],
    "list": [("LPUSH", "K", "x"), ("RPUSH", "K", "x"), ("LPOP", "K"), ("RPOP", "K", "2"), ("LLEN", "K"),
             ("LRANGE", "K", "0", "-1"), ("LINDEX", "K", "0")],
    "set": [("SADD", "K", "m"), ("SREM", "K", "m"), ("SMEMBERS", "K"), ("SISMEMBER", "K", "m"),
            ("SCARD", "K"), ("SPOP", "K"), ("SRANDMEMBER", "K")],
    "zset": [("ZADD", "K", "1", "m"), ("ZREM", "K", "m"), ("ZSCORE", "K", "m"), ("ZCARD", "K"),
             ("ZINCRBY", "K", "1", "m"), ("ZRANGE", "K", "0", "-1"), ("ZRANGEBYSCORE", "K", "0", "1"),
             ("ZREVRANGE", "K", "0", "1"), ("ZRANK", "K", "m"), ("ZPOPMIN", "K"), ("ZPOPMAX", "K")],
}
MAKE = {"string": ("SET", "K", "1"), "hash": ("HSET", "K", "f", "1"), "list": ("RPUSH", "K", "1"),
        "set": ("SADD", "K", "1"), "zset": ("ZADD", "K", "1", "1")}


def wrongtype_steps():
    steps = []
    for kind, make in MAKE.items():
        key = "key-" + kind
        steps.append(tuple(key if a == "K" else a for a in make))
        for other, cmds in FAMILY.items():
            if other != kind:
                steps += [tuple(key if a == "K" else a for a in c) for c in cmds]
        steps.append(("TYPE", key))
    return steps


# name: (minimum argument count after the name, maximum or None)
ARITY = {"PING": (0, 1), "ECHO": (1, 1), "SELECT": (1, 1), "DBSIZE": (0, 0), "TIME": (0, 0),
         "DEL": (1, None), "UNLINK": (1, None), "EXISTS": (1, None), "TYPE": (1, 1), "KEYS": (1, 1),
         "SCAN": (1, None), "RENAME": (2, 2), "EXPIRE": (2, None), "PEXPIRE": (2, None),
         "EXPIREAT": (2, None), "TTL": (1, 1), "PTTL": (1, 1), "PERSIST": (1, 1), "GET": (1, 1),
         "SET": (2, None), "SETNX": (2, 2), "SETEX": (3, 3), "GETSET": (2, 2), "GETDEL": (1, 1),
         "MGET": (1, None), "MSET": (2, None), "MSETNX": (2, None), "INCR": (1, 1), "DECR": (1, 1),
         "INCRBY": (2, 2), "DECRBY": (2, 2), "INCRBYFLOAT": (2, 2), "APPEND": (2, 2), "STRLEN": (1, 1),
         "GETRANGE": (3, 3), "SETRANGE": (3, 3), "HSET": (3, None), "HSETNX": (3, 3), "HMSET": (3, None),
         "HGET": (2, 2), "HMGET": (2, None), "HGETALL": (1, 1), "HDEL": (2, None), "HLEN": (1, 1),
         "HEXISTS": (2, 2), "HKEYS": (1, 1), "HVALS": (1, 1), "HINCRBY": (3, 3), "LPUSH": (2, None),
         "RPUSH": (2, None), "LPOP": (1, 2), "RPOP": (1, 2), "LLEN": (1, 1), "LRANGE": (3, 3),
         "LINDEX": (2, 2), "SADD": (2, None), "SREM": (2, None), "SMEMBERS": (1, 1), "SISMEMBER": (2, 2),
         "SCARD": (1, 1), "SPOP": (1, 2), "SRANDMEMBER": (1, 2), "ZADD": (3, None), "ZREM": (2, None),
         "ZSCORE": (2, 2), "ZCARD": (1, 1), "ZINCRBY": (3, 3), "ZRANGE": (3, None),
         "ZRANGEBYSCORE": (3, None), "ZREVRANGE": (3, 4), "ZRANK": (2, 3), "ZPOPMIN": (1, 2),
         "ZPOPMAX": (1, 2), "FLUSHDB": (0, 1), "FLUSHALL": (0, 1), "MULTI": (0, 0), "EXEC": (0, 0),
         "DISCARD": (0, 0)}


def arity_steps():
    steps = []
    for name, (lo, hi) in ARITY.items():
        if lo > 0:
            steps.append((name,) + tuple("a%d" % i for i in range(lo - 1)))
        if hi is not None and name not in ("FLUSHDB", "FLUSHALL", "ZRANK"):
            steps.append((name,) + tuple("1" for i in range(hi + 1)))
    return steps


case("errors", "wrongtype", wrongtype_steps())
case("errors", "arity", arity_steps())
case("errors", "unknown-and-case", [
    ("FOO",), ("FOO", "a", "b"), ("",), ("SET", "a", "1"), ("get", "a"), ("gEt", "a"), ("GETT", "a"),
    ("CLIENT", "FOO"), ("CLIENT",), ("SCRIPT_NOT_HERE", "x" * 200), ("FLUSHDB", "FOO"),
    ("FLUSHALL", "FOO"), ("SELECT", "100"), ("SELECT", "-1"), ("DBSIZE",)])
case("errors", "bad-numbers", [
    ("SET", "s", "x"), ("RPUSH", "l", "a"), ("SADD", "st", "a"), ("ZADD", "z", "1", "a"),
    ("EXPIRE", "s", "1.5"), ("PEXPIRE", "s", "x"), ("EXPIREAT", "s", ""), ("LRANGE", "l", "a", "b"),
    ("LINDEX", "l", "1.0"), ("SETEX", "k", "1.0", "v"), ("SETRANGE", "s", "x", "v"),
    ("GETRANGE", "s", "1", "y"), ("INCRBY", "s", "1"), ("DECRBY", "n", "1e3"), ("HINCRBY", "h", "f", "x"),
    ("ZADD", "z", "1.0.0", "a"), ("ZINCRBY", "z", "x", "a"), ("ZRANGEBYSCORE", "z", "(x", "1"),
    ("ZRANGEBYSCORE", "z", "((1", "2"), ("ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "a", "1"),
    ("SPOP", "st", "1.5"), ("SRANDMEMBER", "st", "a"), ("LPOP", "l", "-3"), ("RPOP", "l", "1x"),
    ("ZPOPMIN", "z", "1.5"), ("SET", "k", "v", "PX", "1.5"), ("SET", "k", "v", "EXAT", "-1"),
    ("SCAN", "18446744073709551616"), ("SCAN", "0", "COUNT", "-1"),
    ("INCRBY", "n", "99999999999999999999"), ("EXISTS", "n", "k")])

# -- byte strings ------------------------------------------------------------------------
ALL_BYTES = bytes(range(256))


def binary_steps():
    singles = [bytes([i]) for i in range(256)]
    steps = [("SET", b"", b""), ("GET", b""), ("EXISTS", b""), ("STRLEN", b""), ("APPEND", b"", b"x"),
             ("GET", b""), ("TYPE", b""), ("DEL", b""), ("HSET", b"", b"", b""), ("HGET", b"", b""),
             ("DEL", b"")]
    steps.append(("MSET",) + tuple(x for k in singles for x in (k, k * 3)))
    steps += [("MGET",) + tuple(singles), ("DBSIZE",), S("KEYS", "*"), Scan(), Scan("MATCH", b"\x00*")]
    steps += [("SET", ALL_BYTES, ALL_BYTES * 4), ("GET", ALL_BYTES), ("GETRANGE", ALL_BYTES, "10", "300"),
              ("SETRANGE", ALL_BYTES, "1", b"\r\n\x00"), ("GET", ALL_BYTES), ("APPEND", ALL_BYTES, ALL_BYTES),
              ("STRLEN", ALL_BYTES), ("SET", b"a\r\nb c\x00d", b"\r\n"), ("GET", b"a\r\nb c\x00d"),
              ("HSET", "hb") + tuple(x for k in singles for x in (k, k + b"\r\n")),
              Cmd("pairs", "HGETALL", "hb"), ("HGET", "hb", b"\x00"), ("HGET", "hb", b"\xff"),
              ("SADD", "sb") + tuple(singles), S("SMEMBERS", "sb"), ("SISMEMBER", "sb", b"\r"),
              ("ZADD", "zb") + tuple(x for k in singles for x in ("0", k)), ("ZRANGE", "zb", "0", "-1"),
              ("ZADD", "zb", "1", ALL_BYTES, "1", ALL_BYTES[:5], "1", ALL_BYTES[:5] + b"\xff"),
              ("ZRANGE", "zb", "250", "-1", "WITHSCORES"), ("ZRANK", "zb", b"\xff"),
              ("RPUSH", "lb") + tuple(singles), ("LRANGE", "lb", "0", "-1"), ("LINDEX", "lb", "13"),
              ("SET", "n", b"\x001"), ("INCR", "n"), ("RENAME", ALL_BYTES, b"\x00"), ("GET", b"\x00")]
    return steps


case("binary", "empty-and-all-bytes", binary_steps())


def large_steps():
    """1 MiB strings and collection members within tips-server's member limits."""
    rng = random.Random(7)
    mib = bytes(rng.getrandbits(8) for _ in range(1 << 20))
    v60k, m1000, k1000, half = mib[:60 << 10], mib[:1000], b"K" * 1000, mib[:600 << 10]
    return [("SET", "big", mib), ("GET", "big"), ("STRLEN", "big"), ("APPEND", "big", m1000), ("STRLEN", "big"),
            ("GETRANGE", "big", "1048570", "1048580"), ("SETRANGE", "big", str((1 << 20) + 5000), "x"),
            ("STRLEN", "big"), ("GETRANGE", "big", "-3", "-1"), ("SETRANGE", "big", "65530", "abcdefghijklmnop"),
            ("GETRANGE", "big", "65520", "65560"), ("GET", "big"), ("MSET", "x", half, "y", half),
            ("MGET", "x", "y"), ("GETSET", "x", v60k), ("STRLEN", "x"), ("SET", "x", mib, "GET"), ("GETDEL", "x"),
            ("SET", "z", mib, "EX", "100"), ("APPEND", "z", "tail"), near(1, "TTL", "z"), ("GETRANGE", "z", "-6", "-1"),
            ("APPEND", "z", mib), ("STRLEN", "z"), ("GETRANGE", "z", "1048570", "1048590"),
            ("SETRANGE", "z", str(3 << 20), "end"), ("STRLEN", "z"), ("GETRANGE", "z", "-5", "-1"), ("GET", "z"),
            ("DEL", "x", "y", "z"),
            ("HSET", "bh", "f", v60k, m1000, "v"), ("HGET", "bh", "f"), ("HGET", "bh", m1000),
            ("RPUSH", "bl", v60k, "small"), ("LINDEX", "bl", "0"), ("LRANGE", "bl", "0", "-1"),
            ("SADD", "bs", m1000), ("SISMEMBER", "bs", m1000), ("ZADD", "bz", "1", m1000[:990]),
            ("ZSCORE", "bz", m1000[:990]), ("ZRANGE", "bz", "0", "-1"), ("SET", k1000, "1"), ("GET", k1000),
            ("DEL", "big", "bh", "bl", "bs", "bz", k1000), ("DBSIZE",)]


def boundary_steps():
    """Strings around tips-server's inline limit (65480 bytes) and piece size (64 KiB), a
    key of 1019 bytes (its longest)."""
    steps = []
    for n in (65479, 65480, 65481, 65536, 131072, 131073):
        k = "b%d" % n
        steps += [("SET", k, b"a" * n), ("STRLEN", k), ("APPEND", k, "xyz"), ("STRLEN", k),
                  ("GETRANGE", k, str(n - 5), str(n + 5)), ("SETRANGE", k, str(n - 2), "0123456789"),
                  ("GETRANGE", k, "65530", "65545"), ("GETRANGE", k, "-12", "-1"), ("SETRANGE", k, "65535", "Q"),
                  ("GETRANGE", k, "65534", "65537"), ("INCR", k), ("GETDEL", k)]
    steps += [("SETRANGE", "sparse", "200000", "z"), ("STRLEN", "sparse"), ("GETRANGE", "sparse", "199998", "-1"),
              ("GETRANGE", "sparse", "70000", "70003"), ("APPEND", "sparse", b"b" * 70000), ("STRLEN", "sparse"),
              ("SET", "sparse", "short"), ("GET", "sparse"), ("SET", b"k" * 1019, "v"), ("GET", b"k" * 1019),
              ("DBSIZE",)]
    return steps


def over_limit_steps():
    """Sizes Redis takes and tips-server refuses by design (docs/server.md: keys over 1019
    bytes, members over 1015, member values over 64 KiB, several keys writing more than
    one batch holds, ~1.5 MiB on a 256 MiB pool): only the refused writes, never read back."""
    mib = b"v" * (1 << 20)
    return [("MSET", "x", mib, "y", mib), ("SET", b"k" * 1020, "v"), ("SET", b"K" * 65536, "1"), ("HSET", "h1", "f", mib),
            ("HSET", "h2", b"f" * 2000, "v"), ("RPUSH", "l1", mib), ("SADD", "s1", b"m" * 2000),
            ("ZADD", "z1", "1", b"m" * 2000)]


case("large", "one-mebibyte", large_steps)
case("large", "boundaries", boundary_steps)
case("large", "over-tips-limits", over_limit_steps)


def pipeline_steps():
    rng = random.Random(11)
    steps = []
    for i in range(1000):
        k = "p%d" % rng.randrange(50)
        steps.append(rng.choice([("SET", k, str(i)), ("INCR", k), ("GET", k), ("LPUSH", "L" + k, str(i)),
                                 ("HSET", "H" + k, str(i % 7), str(i)), ("DEL", k), ("APPEND", k, "z")]))
    return steps


case("pipeline", "thousand-in-one-write", pipeline_steps())

# -- inline commands and frames on a raw socket ------------------------------------------
case("inline", "inline-commands", [
    Raw(b"PING\r\nPING\r\n"), Raw(b"SET ia hello\r\nGET ia\r\n"), Raw(b"set   ib   'x y'  \r\nGET ib\r\n"),
    Raw(b'SET ic "a\\x41\\n\\t\\"q"\r\nGET ic\r\n'), Raw(b"GET ia\n"), Raw(b"\r\n\r\nPING\r\n"),
    Raw(b"\n\nECHO x\n"), Raw(b"PING\r\n*1\r\n$4\r\nPING\r\nPING\r\n"), Raw(b"ECHO ''\r\n"),
    Raw(b'ECHO ""\r\nECHO "a b" c\r\n'), Raw(b"MGET ia ib ic\r\n"), Raw(b"NOSUCH a b\r\n"),
    Raw(b"   \r\nPING\r\n"), Raw(b'ECHO "unbalanced\r\n', close=True), Raw(b"ECHO 'x'y\r\n", close=True),
    Raw(b'ECHO "x"y\r\n', close=True)])
case("inline", "bad-frames", [
    Raw(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n"), Raw(b"*x\r\n", close=True),
    Raw(b"*1\r\n$x\r\n", close=True), Raw(b"*1\r\n:1\r\n", close=True), Raw(b"*1\r\n$-1\r\n", close=True),
    Raw(b"*1\r\n$1024\r\n" + b"x" * 1024 + b"\r\n"), Raw(b"*0\r\nPING\r\n"), Raw(b"*-1\r\nPING\r\n"), Raw(b"*1\r\n$4\r\nPING\r\n*1\r\n$999999999999\r\n", close=True),
    Raw(b"*3000000000\r\n", close=True), Raw(b"GET " + b"x" * 70000, close=True),
    Raw(b"*1\r\n$70000\r\n" + b"x" * 70000 + b"\r\n"), Raw(b"*1\r\n$600000000\r\n", close=True),
    Raw(b"*3\r\n*1\r\n$1\r\na\r\n", close=True), Raw(b"PING\r\n*x\r\n", close=True),
    Raw(b"KEYS z\r\n*x\r\n", close=True), Raw(b"*2\r\n$4\r\nKEYS\r\n$1\r\nz\r\n*1\r\n$x\r\n", close=True),
    Raw(b"SET a 1\r\nKEYS *\r\nECHO 'x\r\n", close=True), Raw(b"KEYS *\r\nPING\r\n"),
    Raw(b"KEYS z\r\nECHO " + b"x" * 100 + b"\r\n"), Raw(b"SCAN 0\r\nMULTI\r\nPING\r\nEXEC\r\n")])


# -- the seeded random command generator -------------------------------------------------
class RandomOps:
    """Steps of every command on a small key space (types collide, so WRONGTYPE replies are
    part of it). Nondeterministic commands are compared by count or as sets."""

    COLLECTION = ("H", "L", "R", "SADD", "SREM", "SMEMBERS", "SISMEMBER", "SCARD", "SPOP", "SRANDMEMBER", "Z")

    SCANNING_WRITES = ("SPOP", "ZPOPMIN", "ZPOPMAX")   # refused on unordered indexes: states would part

    def __init__(self, seed, n, strings_only=False, unordered=False):
        self.rng = random.Random(seed)
        self.n = n
        self.strings_only = strings_only
        self.unordered = unordered

    def allowed(self, step):
        name = (step.args if isinstance(step, Cmd) else step)[0]
        if self.unordered and name in self.SCANNING_WRITES:
            return False
        return not (self.strings_only and name.startswith(self.COLLECTION))

    def key(self):
        return "k%d" % self.rng.randrange(8)

    def val(self):
        return self.rng.choice(["0", "1", "7", "-3", "42", "a", "bb", "3.5", "", "9223372036854775806"])

    def field(self):
        return "f%d" % self.rng.randrange(4)

    def member(self):
        return "m%d" % self.rng.randrange(6)

    def score(self):
        return self.rng.choice(["0", "1", "2", "-1", "1.5", "+inf", "-inf", "3"])

    def one(self):
        r, k, v = self.rng, self.key, self.val
        table = [
            lambda: ("SET", k(), v()), lambda: ("SET", k(), v(), r.choice(["NX", "XX"])),
            lambda: ("SET", k(), v(), "GET"), lambda: ("SET", k(), v(), "EX", str(r.randrange(100, 1000))),
            lambda: ("SET", k(), v(), "KEEPTTL"), lambda: ("GET", k()), lambda: ("SETNX", k(), v()),
            lambda: ("SETEX", k(), "500", v()), lambda: ("GETSET", k(), v()), lambda: ("GETDEL", k()),
            lambda: ("MGET", k(), k(), k()), lambda: ("MSET", k(), v(), k(), v()),
            lambda: ("MSETNX", k(), v(), k(), v()), lambda: ("INCR", k()), lambda: ("DECR", k()),
            lambda: ("INCRBY", k(), str(r.randrange(-50, 50))), lambda: ("DECRBY", k(), str(r.randrange(50))),
            lambda: ("INCRBYFLOAT", k(), r.choice(["0.5", "-1.25", "3", "1e2"])), lambda: ("APPEND", k(), v()),
            lambda: ("STRLEN", k()), lambda: ("GETRANGE", k(), str(r.randrange(-5, 5)), str(r.randrange(-5, 5))),
            lambda: ("SETRANGE", k(), str(r.randrange(6)), v()), lambda: ("DEL", k(), k()), lambda: ("UNLINK", k()),
            lambda: ("EXISTS", k(), k()), lambda: ("TYPE", k()), lambda: S("KEYS", r.choice(["*", "k[1-3]", "k?"])),
            lambda: ("RENAME", k(), k()), lambda: ("EXPIRE", k(), str(r.randrange(100, 1000))),
            lambda: ("PEXPIRE", k(), str(r.randrange(100000, 900000))), lambda: near(1, "TTL", k()),
            lambda: near(1500, "PTTL", k()), lambda: ("PERSIST", k()), lambda: ("DBSIZE",),
            lambda: ("HSET", k(), self.field(), v()), lambda: ("HSETNX", k(), self.field(), v()),
            lambda: ("HMSET", k(), self.field(), v(), self.field(), v()), lambda: ("HGET", k(), self.field()),
            lambda: ("HMGET", k(), self.field(), self.field()), lambda: Cmd("pairs", "HGETALL", k()),
            lambda: ("HDEL", k(), self.field()), lambda: ("HLEN", k()), lambda: ("HEXISTS", k(), self.field()),
            lambda: S("HKEYS", k()), lambda: S("HVALS", k()), lambda: ("HINCRBY", k(), self.field(), "3"),
            lambda: ("LPUSH", k(), v(), v()), lambda: ("RPUSH", k(), v()), lambda: ("LPOP", k()),
            lambda: ("RPOP", k(), str(r.randrange(3))), lambda: ("LLEN", k()),
            lambda: ("LRANGE", k(), str(r.randrange(-3, 3)), str(r.randrange(-3, 3))),
            lambda: ("LINDEX", k(), str(r.randrange(-3, 3))), lambda: ("SADD", k(), self.member(), self.member()),
            lambda: ("SREM", k(), self.member()), lambda: S("SMEMBERS", k()), lambda: ("SISMEMBER", k(), self.member()),
            lambda: ("SCARD", k()), lambda: S("SPOP", k(), "100"), lambda: Cmd("len", "SRANDMEMBER", k(), "2"),
            lambda: ("ZADD", k(), self.score(), self.member()),
            lambda: ("ZADD", k(), r.choice(["NX", "XX", "CH"]), self.score(), self.member()),
            lambda: ("ZREM", k(), self.member()), lambda: ("ZSCORE", k(), self.member()), lambda: ("ZCARD", k()),
            lambda: ("ZINCRBY", k(), r.choice(["1", "-2", "0.5"]), self.member()),
            lambda: ("ZRANGE", k(), "0", "-1", "WITHSCORES"), lambda: ("ZRANGE", k(), "0", "1", "REV"),
            lambda: ("ZRANGE", k(), "-inf", "2", "BYSCORE", "LIMIT", "0", "2"),
            lambda: ("ZRANGEBYSCORE", k(), "(0", "+inf", "WITHSCORES"), lambda: ("ZREVRANGE", k(), "0", "-1"),
            lambda: ("ZRANK", k(), self.member()), lambda: ("ZPOPMIN", k()), lambda: ("ZPOPMAX", k(), "2"),
        ]
        while True:
            step = r.choice(table)()
            if self.allowed(step):
                return step

    def multi(self):
        body = []
        while len(body) < self.rng.randrange(1, 5):
            s = self.one()
            if isinstance(s, tuple):
                body.append(s)
        return [("MULTI",)] + body + [self.rng.choice([("EXEC",), ("EXEC",), ("DISCARD",)])]

    def steps(self):
        out = []
        while len(out) < self.n:
            x = self.rng.random()
            if x < 0.03:
                out += self.multi()
            elif x < 0.035:
                out.append(Scan("COUNT", "3"))
            elif x < 0.037:
                out.append(("FLUSHDB",))
            else:
                out.append(self.one())
        return out


def random_case(seed, n, strings_only=False, unordered=False):
    return ("random", "random-seed%d-%dops%s" % (seed, n, "-strings" if strings_only else ""),
            lambda: RandomOps(seed, n, strings_only, unordered).steps())
