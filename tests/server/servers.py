"""servers.py - start, stop, crash and clean up a server under test for the tips-server tests.

A Server is tips-server (on a pool) or redis-server (the reference, with or without an
append-only file), always on a free port of 127.0.0.1 chosen at start (never a fixed
port) and with all its data in a fresh directory under /dev/shm that cleanup() removes.
start() returns only once the server answers PING, or raises with the tail of the
server's log when the deadline passes or the process exits; there is no blind sleep.
A restart keeps the port and the data, as a crashed server coming back would.

The tests take the binaries as arguments (CTest passes $<TARGET_FILE:tips-server>); the
helpers here add those arguments and the pass/fail tally every test prints last.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import resp

INSTALL_HINT = "install it with scripts/install-deps.sh"
ORDERED_INDEXES = ("tips-art", "tips-bptree", "tips-bst", "tips-lfbst", "listdb")


def repo_root():
    """The repository holding this file (tests/server/ is two levels below it)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def need_tool(name, path=None):
    """The path of a tool, or SystemExit naming the install script (a missing tool is a
    failure, never a skip)."""
    found = path or shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        sys.exit("FAIL: %s not found (%s); %s" % (name, path or "not on PATH", INSTALL_HINT))
    return found


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StartError(Exception):
    """The server did not come up: the message holds the reason and its log tail."""


class Server:
    """One server under test.

    kind: 'tips' (tips-server, `index` on a pool), 'redis' (no persistence),
    'redis-aof' (appendfsync always), 'redis-everysec' (appendfsync everysec).
    """

    def __init__(self, kind, binary, index="tips-art", pool_size=None, extra=(),
                 name=None, start_timeout=30.0):
        self.kind = kind
        self.binary = binary
        self.index = index
        self.pool_size = pool_size or os.environ.get("TIPS_SERVER_POOL_SIZE", "256mb")
        self.extra = list(extra)
        self.name = name or (index if kind == "tips" else kind)
        self.start_timeout = start_timeout
        self.dir = tempfile.mkdtemp(prefix="tips-servertest-%s-" % self.name, dir="/dev/shm")
        self.pool = os.path.join(self.dir, "tips.pool")
        self.log_path = os.path.join(self.dir, "server.log")
        self.port = None
        self.proc = None
        self.starts = 0

    # -- life cycle -------------------------------------------------------------------
    def argv(self):
        p = str(self.port)
        if self.kind == "tips":
            return [self.binary, "--port", p, "--bind", "127.0.0.1", "--pool", self.pool,
                    "--pool-size", self.pool_size, "--index", self.index] + self.extra
        base = [self.binary, "--port", p, "--bind", "127.0.0.1", "--save", "",
                "--dir", self.dir, "--daemonize", "no", "--logfile", ""]
        persist = {"redis": ["--appendonly", "no"],
                   "redis-aof": ["--appendonly", "yes", "--appendfsync", "always"],
                   "redis-everysec": ["--appendonly", "yes", "--appendfsync", "everysec"]}
        return base + persist[self.kind] + self.extra

    def start(self):
        """Start (or restart, same port and data) and wait for PONG. A first start whose
        port was taken meanwhile retries on another free port."""
        tries = 3 if self.port is None else 1
        for attempt in range(tries):
            if self.port is None or (attempt > 0):
                self.port = free_port()
            try:
                self._spawn_and_wait()
                return self
            except StartError as e:
                if attempt + 1 == tries or "in use" not in str(e):
                    raise
        return self

    def _spawn_and_wait(self):
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(b"\n=== start %d: %s\n" % (self.starts, " ".join(self.argv()).encode()))
        log.flush()
        self.launched_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        self.wait_ready()

    def wait_ready(self, timeout=None):
        """Poll with PING until PONG; StartError at the deadline or if the process exits."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last = "no answer yet"
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                raise StartError("%s exited with %s before answering PING\n%s"
                                 % (self.name, code, self.log_tail()))
            try:
                with resp.Conn(self.port, timeout=2.0) as c:
                    r = c.command("PING")
                if r == ("+", b"PONG"):
                    self.ready_at = time.monotonic()
                    return
                last = "PING answered %s" % resp.show(r)
            except (OSError, resp.Closed, resp.ProtocolError) as e:
                last = str(e)
            time.sleep(0.01)   # polling interval of the readiness check, not a wait for state
        self.kill()
        raise StartError("%s did not answer PING within %.0f s (%s)\n%s"
                         % (self.name, timeout or self.start_timeout, last, self.log_tail()))

    def kill(self, sig=signal.SIGKILL, timeout=30.0):
        """Send sig and reap the process; returns its exit status (None if not running)."""
        if self.proc is None:
            return None
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            raise StartError("%s ignored signal %d for %.0f s; killed" % (self.name, sig, timeout))
        self.proc = None
        return code

    def stop(self, timeout=30.0):
        """SIGTERM: a clean shutdown; returns the exit status."""
        return self.kill(signal.SIGTERM, timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def survives(self, seconds=1.0):
        """False if the process exits within seconds (a server dying after it dropped a
        connection); True if it is still running then."""
        if self.proc is None:
            return False
        try:
            self.proc.wait(timeout=seconds)
            return False
        except subprocess.TimeoutExpired:
            return True

    def pid(self):
        return self.proc.pid

    def rss_kib(self):
        """Resident set size of the server process in KiB (VmRSS of /proc/PID/status);
        0 for a process that has exited (a zombie has no VmRSS): the caller's liveness
        check reports the death."""
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except (OSError, AttributeError):
            pass
        return 0

    def log_tail(self, n=30):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join("    | " + l for l in lines[-n:])
        except OSError:
            return "    | (no log)"

    def crash_report(self, n=40):
        """The part of the log that explains a death: a sanitizer report from its first
        line (stack traces included), else the log tail."""
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "    | (no log)"
        for i, l in enumerate(lines):
            if "ERROR: AddressSanitizer" in l or "runtime error:" in l or "ERROR: ThreadSanitizer" in l:
                return "\n".join("    | " + x for x in lines[i:i + n])
        return self.log_tail(n)

    def conn(self, timeout=10.0):
        return resp.Conn(self.port, timeout=timeout)

    def cleanup(self):
        """Kill the process if it still runs and remove the data directory."""
        if self.proc is not None:
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


# -- command-line helpers shared by the tests ----------------------------------------------
def add_server_args(p):
    """--server (tips-server binary; env TIPS_SERVER), --redis-server, --index, --tips-tool.
    Without --server the tests run against redis-server as the server under test (a
    self-check of the test itself; CTest always passes tips-server)."""
    p.add_argument("--server", default=os.environ.get("TIPS_SERVER"),
                   help="tips-server binary (default: env TIPS_SERVER; none: redis-server "
                        "stands in, to check the test itself)")
    p.add_argument("--redis-server", default=None, help="redis-server binary (default: PATH)")
    p.add_argument("--index", default="tips-art", help="index of tips-server (default tips-art)")
    p.add_argument("--tips-tool", default=None, help="the `tips` tool, for pool check")
    return p


def server_under_test(args, redis_kind="redis", name=None, **kw):
    """The Server the arguments name: tips-server on --index, or redis-server of redis_kind
    when no tips-server was given."""
    if args.server:
        return Server("tips", need_tool("tips-server", args.server), index=args.index, name=name, **kw)
    return Server(redis_kind, need_tool("redis-server", args.redis_server),
                  name=name or "%s-as-sut" % redis_kind, **kw)


def under_test_name(args):
    return ("tips-server %s" % args.index) if args.server else "redis-server (standing in)"


class Tally:
    """Counts checks; prints each failure as it happens and `N passed, N failed` at the end."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failures = []

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.fail(what, detail)
        return cond

    def fail(self, what, detail=""):
        self.failed += 1
        self.failures.append(what)
        print("FAIL: %s%s" % (what, ("\n" + detail) if detail else ""), flush=True)

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        return 1 if self.failed or not self.passed else 0


def run_main(main):
    """Run a test's main(); a server that does not start is a failure with its log, and
    the last line is still `N passed, N failed`."""
    try:
        code = main()
    except StartError as e:
        print("FAIL: %s" % e, flush=True)
        print("0 passed, 1 failed")
        code = 1
    sys.exit(code)
