"""test_twemproxy.py - scale-out: two servers under test behind nutcracker (twemproxy).

nutcracker (ketama distribution, fnv1a_64 hash, redis: true) fronts two instances on free
ports of 127.0.0.1, with its config written to a temp dir. N keys are written through the
proxy; both instances must hold some (read directly), and together exactly N. Then, each
round, one instance is killed with -9, more keys are written through the proxy while it
is down (only the acknowledged ones count), it is restarted on the same pool and port,
and every acknowledged key must read back through the proxy with its value.
Prints `N passed, N failed`, exits 1 on any failure.

    .venv/bin/python tests/server/test_twemproxy.py --server build/tips-server [--keys 4000] [--rounds 2]
Without --server, redis-server with appendfsync always stands in.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp      # noqa: E402
import servers   # noqa: E402

CONFIG = """\
tips:
  listen: 127.0.0.1:{listen}
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: 5000
  preconnect: false
  servers:
   - 127.0.0.1:{p1}:1 tips1
   - 127.0.0.1:{p2}:1 tips2
"""


class Proxy:
    """nutcracker on a free port with a written config; ready when PING answers."""

    def __init__(self, binary, ports, workdir):
        self.binary, self.workdir = binary, workdir
        self.port = servers.free_port()
        self.stats = servers.free_port()
        self.conf = os.path.join(workdir, "nutcracker.yml")
        self.log = os.path.join(workdir, "nutcracker.log")
        with open(self.conf, "w") as f:
            f.write(CONFIG.format(listen=self.port, p1=ports[0], p2=ports[1]))
        self.proc = None

    def start(self, timeout=10.0):
        check = subprocess.run([self.binary, "-t", "-c", self.conf], capture_output=True, text=True)
        if check.returncode != 0:
            raise servers.StartError("nutcracker -t rejected the config: %s%s" % (check.stdout, check.stderr))
        self.proc = subprocess.Popen([self.binary, "-c", self.conf, "-s", str(self.stats), "-a", "127.0.0.1",
                                      "-o", self.log], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise servers.StartError("nutcracker exited with %s: %s" % (self.proc.returncode, self.log_tail()))
            try:
                with resp.Conn(self.port, timeout=2) as c:
                    if c.command("PING") == ("+", b"PONG"):
                        return
            except (OSError, resp.Closed):
                pass
            time.sleep(0.01)   # readiness polling interval
        raise servers.StartError("nutcracker did not answer PING within %.0f s: %s" % (timeout, self.log_tail()))

    def log_tail(self):
        try:
            with open(self.log) as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return "(no log)"

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def write_keys(port, prefix, n, chunk=100):
    """SET prefix:i through the proxy, pipelined; returns {key: value} of the acknowledged."""
    acked = {}
    with resp.Conn(port, timeout=15) as c:
        for start in range(0, n, chunk):
            cmds = [("SET", "%s:%06d" % (prefix, i), "%s-value-%d" % (prefix, i))
                    for i in range(start, min(n, start + chunk))]
            for cmd, r in zip(cmds, c.pipeline(cmds)):
                if r == ("+", b"OK"):
                    acked[cmd[1].encode()] = cmd[2].encode()
    return acked


def read_back(port, acked, tally, deadline_s=15.0):
    """Every acknowledged key through the proxy; error replies (a reconnecting proxy) are
    retried until the deadline, wrong or missing values are failures."""
    pending = sorted(acked)
    deadline = time.monotonic() + deadline_s
    wrong = []
    while pending and time.monotonic() < deadline:
        retry = []
        with resp.Conn(port, timeout=15) as c:
            for start in range(0, len(pending), 100):
                keys = pending[start:start + 100]
                for k, r in zip(keys, c.pipeline([("GET", k) for k in keys])):
                    if r[0] == "-":
                        retry.append(k)
                    elif r != ("$", acked[k]):
                        wrong.append((k, r))
        pending = retry
    tally.ok(not wrong, "%d acknowledged keys read back wrong through the proxy" % len(wrong),
             "\n".join("    %r: %s (expected %r)" % (k, resp.show(r), acked[k]) for k, r in wrong[:10]))
    tally.ok(not pending, "%d acknowledged keys still answered errors after %.0f s"
             % (len(pending), deadline_s), "    first: %r" % pending[:5])


def dbsize(srv):
    with srv.conn() as c:
        r = c.command("DBSIZE")
    return r[1] if r[0] == ":" else -1


def main():
    p = servers.add_server_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--keys", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=2, help="kill -9 and restart rounds")
    args = p.parse_args()
    tally = servers.Tally()
    nutcracker = servers.need_tool("nutcracker")
    print("twemproxy scale-out with two of %s" % servers.under_test_name(args), flush=True)
    started = time.monotonic()
    insts = [servers.server_under_test(args, redis_kind="redis-aof", name="shard%d" % i) for i in range(2)]
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        proxy = None
        try:
            for s in insts:
                s.start()
            proxy = Proxy(nutcracker, [s.port for s in insts], tmp)
            proxy.start()
            acked = write_keys(proxy.port, "base", args.keys)
            tally.ok(len(acked) == args.keys, "only %d of %d SETs through the proxy acknowledged"
                     % (len(acked), args.keys))
            sizes = [dbsize(s) for s in insts]
            print("keys per instance: %s" % sizes)
            tally.ok(all(n > args.keys // 10 for n in sizes), "an instance holds too few keys: %s" % sizes)
            tally.ok(sum(sizes) == args.keys, "the instances hold %d keys in all, expected %d"
                     % (sum(sizes), args.keys))
            for rnd in range(args.rounds):
                victim = insts[rnd % 2]
                victim.kill()
                during = write_keys(proxy.port, "round%d" % rnd, args.keys // 4)
                print("round %d: killed %s; %d of %d writes acknowledged while it was down"
                      % (rnd, victim.name, len(during), args.keys // 4))
                tally.ok(0 < len(during) < args.keys // 4,
                         "round %d: writes with one instance down: %d acknowledged of %d (expected some, "
                         "not all)" % (rnd, len(during), args.keys // 4))
                acked.update(during)
                victim.start()
                read_back(proxy.port, acked, tally)
            tally.ok(all(s.alive() for s in insts), "an instance died", "\n".join(s.log_tail() for s in insts))
        finally:
            if proxy:
                proxy.stop()
            for s in insts:
                s.cleanup()
    print("time: %.1f s" % (time.monotonic() - started))
    return tally.finish()


if __name__ == "__main__":
    servers.run_main(main)
