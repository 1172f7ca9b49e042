"""test_fuzz_net.py - network robustness: random and mutated request bytes against a server.

For --seconds (default 10; env TIPS_FUZZ_SECONDS), new connections send random bytes,
mutated and truncated RESP frames, negative and huge lengths, deeply nested arrays,
unbalanced quotes and bad escapes in inline commands, very long lines, and valid
commands with hostile arguments; a group of connections also park partial frames that
announce huge bulks. Each fuzz connection half-closes after sending and is drained until
the server closes it or 2 s pass. Meanwhile and afterwards: the server must answer PING
on a control connection, SET/GET must still work, the process must be alive, and its
RSS (VmRSS) must stay within --rss-limit-mib of its start. Seeded (--seed); the seed of a
failure is printed. `N passed, N failed` at the end; exit 1 on any failure.

    .venv/bin/python tests/server/test_fuzz_net.py --server build/tips-server [--seconds 10]
"""
import argparse
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp      # noqa: E402
import servers   # noqa: E402

COMMANDS = ["PING", "ECHO", "SELECT", "CLIENT", "DBSIZE", "TIME", "DEL", "UNLINK", "EXISTS", "TYPE",
            "KEYS", "SCAN", "RENAME", "EXPIRE", "PEXPIRE", "EXPIREAT", "TTL", "PTTL", "PERSIST", "GET",
            "SET", "SETNX", "SETEX", "GETSET", "GETDEL", "MGET", "MSET", "MSETNX", "INCR", "DECR", "INCRBY",
            "DECRBY", "INCRBYFLOAT", "APPEND", "STRLEN", "GETRANGE", "SETRANGE", "HSET", "HSETNX", "HMSET",
            "HGET", "HMGET", "HGETALL", "HDEL", "HLEN", "HEXISTS", "HKEYS", "HVALS", "HINCRBY", "LPUSH",
            "RPUSH", "LPOP", "RPOP", "LLEN", "LRANGE", "LINDEX", "SADD", "SREM", "SMEMBERS", "SISMEMBER",
            "SCARD", "SPOP", "SRANDMEMBER", "ZADD", "ZREM", "ZSCORE", "ZCARD", "ZINCRBY", "ZRANGE",
            "ZRANGEBYSCORE", "ZREVRANGE", "ZRANK", "ZPOPMIN", "ZPOPMAX", "MULTI", "EXEC", "DISCARD",
            "FLUSHDB", "INFO", "COMMAND"]
WORDS = [b"", b"0", b"1", b"-1", b"k", b"k1", b"h", b"9223372036854775807", b"-9223372036854775808",
         b"18446744073709551616", b"1e308", b"-inf", b"+inf", b"nan", b"(1", b"0x10", b"\x00", b"\xff\xfe",
         b"\r\n", b"*", b"$", b"NX", b"XX", b"GET", b"EX", b"PX", b"KEEPTTL", b"WITHSCORES", b"LIMIT",
         b"BYSCORE", b"REV", b"MATCH", b"COUNT", b"TYPE", b"CH", b"x" * 3000]


class Fuzzer:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def word(self):
        r = self.rng
        return r.choice(WORDS) if r.random() < 0.8 else bytes(r.getrandbits(8) for _ in range(r.randrange(20)))

    def command(self):
        args = [self.rng.choice(COMMANDS).encode()] + [self.word() for _ in range(self.rng.randrange(6))]
        return resp.encode(args)

    def random_bytes(self):
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randrange(1, 4096)))

    def mutated(self):
        data = bytearray(b"".join(self.command() for _ in range(self.rng.randrange(1, 8))))
        for _ in range(self.rng.randrange(1, 6)):
            if not data:
                break
            i = self.rng.randrange(len(data))
            op = self.rng.randrange(4)
            if op == 0:
                data[i] = self.rng.getrandbits(8)
            elif op == 1:
                data[i:i] = self.rng.choice([b"*", b"$", b"\r\n", b"-1", b"99999999999", b"\r", b"\n", b"0"])
            elif op == 2:
                del data[i:i + self.rng.randrange(1, 10)]
            else:
                data[i:i] = data[:self.rng.randrange(1, 50)]
        return bytes(data)

    def truncated(self):
        data = b"".join(self.command() for _ in range(self.rng.randrange(1, 5)))
        return data[:self.rng.randrange(1, len(data))]

    def lengths(self):
        n = self.rng.choice([b"-1", b"-2", b"-2147483649", b"2147483648", b"9223372036854775807",
                             b"99999999999999999999999", b"1048577", b"536870913", b"0", b"", b"+5", b" 3",
                             b"3 ", b"0x10", b"-0"])
        return self.rng.choice([b"*" + n + b"\r\n", b"*1\r\n$" + n + b"\r\n", b"*2\r\n$3\r\nGET\r\n$" + n + b"\r\nk\r\n",
                                b"*" + n + b"\r\n$4\r\nPING\r\n"])

    def nested(self):
        depth = self.rng.randrange(1, 5000)
        return b"*2\r\n" * depth + b"$1\r\na\r\n"

    def inline(self):
        body = self.rng.choice([b'SET "a b', b"SET 'a", b'ECHO "\\x', b'ECHO "\\xZZ"', b'ECHO "a"b', b"ECHO 'a'b",
                                b'"', b"'", b'ECHO "\\', b"ECHO \x00 \xff", b'SET k "v\\"', b"   ", b"\t\tPING",
                                b'ECHO "' + b"\\n" * 1000 + b'"'])
        return body + self.rng.choice([b"\r\n", b"\n", b"", b"\r"])

    def long_line(self):
        n = self.rng.choice([70000, 1 << 20, 3 << 20])
        return self.rng.choice([b"GET " + b"a" * n, b"*" + b"1" * n + b"\r\n", b"*1\r\n$" + b"9" * n,
                                b"SET k " + b"v" * n + b"\r\n"])

    def many_args(self):
        n = self.rng.choice([1000, 100000, 2000000])
        return b"*%d\r\n" % n + b"$1\r\na\r\n" * min(n, 200000)

    def payload(self):
        gen = self.rng.choice([self.random_bytes, self.mutated, self.mutated, self.truncated, self.lengths,
                               self.nested, self.inline, self.long_line, self.many_args, self.command])
        return gen.__name__, gen()


def send_and_drain(port, data, timeout=2.0):
    """Send data, half-close, read until the server closes or timeout. True if it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:          # the server closed it while we sent: EPIPE, ECONNRESET, ENOTCONN
            return True
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not s.recv(65536):
                    return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


def park_partial_frames(port, rng, n=20):
    """Connections that announce huge bulks and send a little: the server must not reserve
    their announced size in memory."""
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        size = rng.choice([100 << 20, 400 << 20, 536870000])
        s.sendall(b"*3\r\n$3\r\nSET\r\n$2\r\npk\r\n$%d\r\n" % size + b"z" * 70000)
        socks.append(s)
    return socks


def healthy(srv, tally, what):
    try:
        with srv.conn(timeout=10) as c:
            ok = (c.command("PING") == ("+", b"PONG") and c.command("SET", "fuzz:probe", what) == ("+", b"OK")
                  and c.command("GET", "fuzz:probe") == ("$", what.encode()))
    except (OSError, resp.Closed, resp.ProtocolError) as e:
        ok = False
        what += " (%s)" % e
    return tally.ok(ok and srv.alive(), "server unhealthy %s" % what, srv.crash_report())


def main():
    p = servers.add_server_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--seconds", type=float, default=float(os.environ.get("TIPS_FUZZ_SECONDS", 10)))
    p.add_argument("--seed", type=int, default=int(os.environ.get("TIPS_FUZZ_SEED", time.time_ns() % 100000)))
    p.add_argument("--rss-limit-mib", type=int, default=256, help="allowed RSS growth (default 256)")
    args = p.parse_args()
    tally = servers.Tally()
    print("network fuzz of %s for %.0f s, seed %d" % (servers.under_test_name(args), args.seconds, args.seed),
          flush=True)
    fz = Fuzzer(args.seed)
    with servers.server_under_test(args) as srv:
        srv.start()
        healthy(srv, tally, "at start")
        base = srv.rss_kib()
        peak, sent, kinds, closed, recent = base, 0, {}, 0, []
        parked = park_partial_frames(srv.port, fz.rng)
        peak = max(peak, srv.rss_kib())
        end = time.monotonic() + args.seconds
        while time.monotonic() < end and srv.alive():
            kind, data = fz.payload()
            kinds[kind] = kinds.get(kind, 0) + 1
            recent = (recent + [(kind, data)])[-6:]
            try:
                closed += send_and_drain(srv.port, data)
            except OSError as e:
                if srv.alive():
                    tally.fail("cannot connect or send (%s) after %d payloads, seed %d" % (e, sent, args.seed))
                    break
            sent += 1
            if sent % 50 == 0:
                peak = max(peak, srv.rss_kib())
                if not healthy(srv, tally, "after %d payloads (last: %s), seed %d" % (sent, kind, args.seed)):
                    break
        for s in parked:
            s.close()
        alive = tally.ok(srv.alive(), "the server died after %d payloads, seed %d; the last ones:\n%s"
                         % (sent, args.seed, "\n".join("    %s %r" % (k, d[:300]) for k, d in recent)),
                         srv.crash_report())
        if alive:
            peak = max(peak, srv.rss_kib())
            healthy(srv, tally, "at the end, seed %d" % args.seed)
        print("payloads %d (%s), closed by server %d, RSS start %d KiB, peak %d KiB"
              % (sent, ", ".join("%s %d" % kv for kv in sorted(kinds.items())), closed, base, peak))
        tally.ok(peak - base <= args.rss_limit_mib * 1024, "RSS grew by %d KiB (limit %d MiB), seed %d"
                 % (peak - base, args.rss_limit_mib, args.seed))
        tally.ok(sent > 0, "no payload sent")
    return tally.finish()


if __name__ == "__main__":
    servers.run_main(main)
