"""test_diff.py - differential conformance test of tips-server against redis-server.

Runs the command sequences of diffcases.py (every supported command, wrong types and
arities, bad numbers, unknown commands, byte strings, 1 MiB values, pipelines, inline
commands and bad frames on raw sockets, and a seeded random mix) against redis-server
(the reference, no persistence) and the server under test, and compares every reply:
type and value, errors by their text. A difference passes only if ALLOWED below lists
it with its reason. Prints each difference with the command and both replies, then
`N passed, N failed`; exits 1 on any failure.

    .venv/bin/python tests/server/test_diff.py --server build/tips-server [--index tips-art]
        [--groups strings,keys] [--random-ops 3000] [--seed 1]
Without --server a second redis-server stands in (to check the test itself).
"""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffcases                     # noqa: E402
import resp                          # noqa: E402
import servers                       # noqa: E402
from diffcases import Cmd, Poll, Raw, Scan   # noqa: E402

UNORDERED_INDEXES = ("tips-hash", "tips-lfhash", "tips-clht", "dram-hash", "dram-lfhash", "dram-clht")


def ordered_error_on_unordered(index, cmd, ref, got):
    return (index in UNORDERED_INDEXES and got[0] == "-" and ref[0] != "-"
            and any(name.encode() in got[1] for name in servers.ORDERED_INDEXES))


def refused_as_too_large(index, cmd, ref, got):
    return (index != "redis" and got[0] == "-" and ref[0] != "-"
            and (b"too large for one atomic write" in got[1] or b"key too long for tips-server" in got[1]))


# The documented differences: (predicate(index, cmd, ref_reply, got_reply), reason).
ALLOWED = [
    (ordered_error_on_unordered,
     "an unordered index (tips-hash, lfhash, clht) cannot serve commands that need key order; "
     "tips-server answers an error naming the ordered indexes (docs/server.md)"),
    (refused_as_too_large,
     "tips-server refuses a command whose writes exceed one atomic batch (keys over 1019 bytes, "
     "members over 1015, member values over 64 KiB, about 1.7 MB per command) with an error "
     "and writes nothing (docs/server.md, Transactions and durability); Redis takes them"),
]


def allowed(index, cmd, ref, got):
    for pred, reason in ALLOWED:
        if pred(index, cmd, ref, got):
            return reason
    return None


# -- reply comparison --------------------------------------------------------------------
def shape(r):
    if r[0] == "*" and r[1] is not None:
        return ("*", [shape(x) for x in r[1]])
    return (r[0], r[1] is None)


def as_multiset(r):
    return sorted(repr(x) for x in r[1])


def same(mode, ref, got):
    if mode == "exact" or ref[0] != "*" or got[0] != "*" or ref[1] is None or got[1] is None:
        if isinstance(mode, tuple) and ref[0] == got[0] == ":":
            return abs(ref[1] - got[1]) <= mode[1]
        if mode == "shape":
            return shape(ref) == shape(got)
        return ref == got
    if mode == "set":
        return as_multiset(ref) == as_multiset(got)
    if mode == "pairs":
        def pairs(r):
            it = iter(r[1])
            return sorted(zip(map(repr, it), map(repr, it)))
        return len(ref[1]) == len(got[1]) and len(ref[1]) % 2 == 0 and pairs(ref) == pairs(got)
    if mode == "len":
        return len(ref[1]) == len(got[1]) and all(x[0] == "$" for x in got[1])
    if mode == "shape":
        return shape(ref) == shape(got)
    if mode == "time":
        return (len(got[1]) == 2 and all(x[0] == "$" and x[1] and x[1].isdigit() for x in got[1])
                and abs(int(got[1][0][1]) - int(ref[1][0][1])) < 60)
    raise ValueError("unknown mode %r" % (mode,))


# -- running steps on both servers -------------------------------------------------------
class Pair:
    """The reference and the server under test, a connection to each, and the tally."""

    def __init__(self, ref, sut, index, tally, verbose):
        self.ref, self.sut, self.index, self.tally = ref, sut, index, tally
        self.verbose = verbose
        self.documented = {}
        self.last = "none"
        self.rc = self.sc = None
        self.reconnect()

    def reconnect(self):
        for c in (self.rc, self.sc):
            if c:
                c.close()
        self.rc, self.sc = self.ref.conn(), self.sut.conn()

    def check(self, where, args, mode, ref, got):
        if same(mode, ref, got):
            self.tally.passed += 1
            return
        reason = allowed(self.index, args, ref, got)
        if reason:
            self.documented[reason] = self.documented.get(reason, 0) + 1
            self.tally.passed += 1
            if self.verbose:
                print("documented: %s: %s -> redis %s, tips %s" % (where, resp.show_cmd(args),
                      resp.show(ref), resp.show(got)))
            return
        self.tally.fail("%s: %s" % (where, resp.show_cmd(args)),
                        "    redis-server: %s\n    under test:   %s" % (resp.show(ref), resp.show(got)))

    def commands(self, where, steps):
        """Plain and Cmd steps, pipelined on both connections."""
        cmds = [s.args if isinstance(s, Cmd) else s for s in steps]
        modes = [s.mode if isinstance(s, Cmd) else "exact" for s in steps]
        refs = self.rc.pipeline(cmds)
        try:
            gots = self.sc.pipeline(cmds)
        except (OSError, resp.Closed, resp.ProtocolError) as e:
            self.tally.fail("%s: connection to the server under test failed in a pipeline of %d "
                            "commands starting with %s: %s" % (where, len(cmds), resp.show_cmd(cmds[0]), e))
            self.reconnect()
            return False
        for args, mode, r, g in zip(cmds, modes, refs, gots):
            self.check(where, args, mode, r, g)
        return True

    def scan(self, where, step):
        keys = []
        for srv, conn in ((self.ref, self.rc), (self.sut, self.sc)):
            keys.append(full_scan(conn, step.opts))
        if isinstance(keys[1], str) or keys[0] != keys[1]:
            self.tally.fail("%s: full SCAN %s" % (where, resp.show_cmd(step.opts)),
                            "    redis-server: %s\n    under test:   %s" % (summary(keys[0]), summary(keys[1])))
        else:
            self.tally.passed += 1

    def raw(self, where, step):
        ref = raw_exchange(self.ref.port, step.data, step.close)
        got = raw_exchange(self.sut.port, step.data, step.close)
        if ref == got:
            self.tally.passed += 1
            return
        self.tally.fail("%s: raw bytes %r" % (where, step.data[:80]),
                        "    redis-server: %s\n    under test:   %s" % (raw_show(ref), raw_show(got)))

    def poll(self, where, step):
        for name, conn in (("redis-server", self.rc), ("under test", self.sc)):
            deadline = time.monotonic() + 3.0
            r = conn.command(*step.args)
            while r != step.reply and time.monotonic() < deadline:
                time.sleep(0.005)     # polling interval while waiting for the expiry to show
                r = conn.command(*step.args)
            if not self.tally.ok(r == step.reply, "%s: %s: %s never answered %s within 3 s (last %s)"
                                 % (where, name, resp.show_cmd(step.args), resp.show(step.reply), resp.show(r))):
                return

    def run_case(self, where, steps, chunk=64):
        self.commands(where, [("FLUSHALL",)])
        batch = []
        for step in steps + [None]:
            self.last = describe(step) if step is not None else self.last
            if isinstance(step, (tuple, Cmd)) and len(batch) < chunk:
                batch.append(step)
                continue
            if batch and not self.commands(where, batch):
                return
            batch = [step] if isinstance(step, (tuple, Cmd)) else []
            if isinstance(step, Scan):
                self.scan(where, step)
            elif isinstance(step, Raw):
                self.raw(where, step)
            elif isinstance(step, Poll):
                self.poll(where, step)
        if batch:
            self.commands(where, batch)


def describe(step):
    if isinstance(step, Raw):
        return "raw bytes %r" % step.data[:100]
    if isinstance(step, Scan):
        return "full SCAN %s" % resp.show_cmd(step.opts)
    if isinstance(step, Poll):
        return "polling %s" % resp.show_cmd(step.args)
    return "a pipeline ending before or at %s" % resp.show_cmd(step.args if isinstance(step, Cmd) else step)


def full_scan(conn, opts, limit=100000):
    """The sorted keys of a whole SCAN iteration, or a string saying what went wrong."""
    cursor, keys = b"0", []
    for _ in range(limit):
        r = conn.command("SCAN", cursor, *opts)
        if r[0] != "*" or len(r[1]) != 2 or r[1][0][0] != "$" or r[1][1][0] != "*":
            return "bad SCAN reply %s" % resp.show(r)
        cursor = r[1][0][1]
        keys += [x[1] for x in r[1][1][1]]
        if cursor == b"0":
            return sorted(set(keys))
    return "SCAN did not end within %d calls" % limit


def summary(keys):
    if isinstance(keys, str):
        return keys
    return "%d keys: %s" % (len(keys), ", ".join(repr(k) for k in keys[:12]) + (" ..." if len(keys) > 12 else ""))


SENTINEL = b"__end_of_raw_exchange__"


def raw_exchange(port, data, expect_close, timeout=5.0):
    """Send data on a new connection; return (replies, closed). Unless the server is
    expected to close, an ECHO sentinel marks the end of the replies."""
    replies = []
    with resp.Conn(port, timeout=timeout) as c:
        c.send_raw(data + (b"" if expect_close else resp.encode(["ECHO", SENTINEL])))
        try:
            while True:
                r = c.read_reply()
                if r == ("$", SENTINEL):
                    return (tuple(replies), False)
                replies.append(r)
        except resp.Closed:
            return (tuple(replies), True)
        except ConnectionResetError:
            return (tuple(replies), True)
        except socket.timeout:
            return (tuple(replies), "timeout: neither the sentinel nor a close within %.0f s" % timeout)
        except resp.ProtocolError as e:
            return (tuple(replies), "protocol error: %s" % e)


def raw_show(x):
    replies, closed = x
    state = {True: "closed", False: "open"}.get(closed, closed)
    return "[%s], connection %s" % (", ".join(resp.show(r) for r in replies), state)


# -- main --------------------------------------------------------------------------------
def selected_cases(args):
    groups = set(args.groups.split(",")) if args.groups else None
    cases = [c for c in diffcases.CASES if groups is None or c[0] in groups]
    if args.random_ops and (groups is None or "random" in groups):
        cases.append(diffcases.random_case(args.seed, args.random_ops, args.random_strings_only,
                                           args.server is not None and args.index in UNORDERED_INDEXES))
    return cases


def main():
    p = servers.add_server_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--groups", help="comma-separated groups (default: all): " +
                   ",".join(sorted({c[0] for c in diffcases.CASES} | {"random"})))
    p.add_argument("--random-ops", type=int, default=3000, help="random steps (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--random-strings-only", action="store_true",
                   help="random steps without collection commands (strings and keys)")
    p.add_argument("--depth", type=int, default=64, help="commands per pipelined write (default 64)")
    p.add_argument("--verbose", action="store_true", help="also print documented differences")
    args = p.parse_args()
    tally = servers.Tally()
    redis_bin = servers.need_tool("redis-server", args.redis_server)
    print("differential test: redis-server against %s" % servers.under_test_name(args), flush=True)
    started = time.monotonic()
    with servers.Server("redis", redis_bin, name="reference") as ref, \
            servers.server_under_test(args) as sut:
        ref.start()
        sut.start()
        pair = Pair(ref, sut, args.index if args.server else "redis", tally, args.verbose)
        for group, name, steps in selected_cases(args):
            steps = steps() if callable(steps) else steps
            before = tally.failed
            broken = False
            try:
                pair.run_case("%s/%s" % (group, name), steps, 1000 if group == "pipeline" else args.depth)
            except (OSError, resp.Closed, resp.ProtocolError) as e:
                broken = True
                if sut.survives(1.0):
                    tally.fail("%s/%s: aborted: %s (last step: %s)" % (group, name, e, pair.last))
            if not sut.alive():
                tally.fail("%s/%s: the server under test died; last step: %s\n%s"
                           % (group, name, pair.last, sut.crash_report()))
                sut.start()
                broken = True
            if broken:
                pair.reconnect()
            print("  %-40s %s" % ("%s/%s" % (group, name),
                                 "ok" if tally.failed == before else "%d differences" % (tally.failed - before)),
                  flush=True)
        for reason, n in pair.documented.items():
            print("documented differences (%d): %s" % (n, reason))
    print("time: %.1f s" % (time.monotonic() - started))
    return tally.finish()


if __name__ == "__main__":
    servers.run_main(main)
