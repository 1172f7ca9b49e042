"""resp.py - a small RESP2 client for the tips-server tests, written for exact comparison.

Replies keep their wire type, so that a test can tell a status reply from a bulk
string and an error from a value:
    ('+', b'OK')           simple string        ('-', b'ERR ...')    error
    (':', 42)              integer              ('$', b'..' | None)  bulk string (None: nil)
    ('*', [reply, ...] | None)  array (None: nil array)
A Conn speaks RESP arrays of bulk strings (like every Redis client), and can also send
raw bytes (inline commands, malformed frames) and tell whether the server closed it.
No dependency beyond the standard library.
"""
import socket


class ProtocolError(Exception):
    """The bytes the server sent are not RESP2."""


class Closed(Exception):
    """The server closed the connection before a whole reply arrived."""


def encode(args):
    """One command as a RESP array of bulk strings; str and int arguments are encoded."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, str):
            a = a.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class Conn:
    """One TCP connection with a read buffer. Timeouts raise socket.timeout."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def command(self, *args):
        """Send one command and return its reply."""
        self.send_raw(encode(args))
        return self.read_reply()

    def pipeline(self, commands):
        """Send every command in one write, then read as many replies."""
        self.send_raw(b"".join(encode(c) for c in commands))
        return [self.read_reply() for _ in commands]

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise Closed("connection closed by the server")
        if self.pos > (1 << 20):
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = bytes(self.buf[self.pos:end])
                self.pos = end + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = bytes(self.buf[self.pos:self.pos + n])
        if self.buf[self.pos + n:self.pos + n + 2] != b"\r\n":
            raise ProtocolError("bulk string of %d bytes not followed by CRLF" % n)
        self.pos += n + 2
        return data

    def read_reply(self):
        line = self._line()
        if not line:
            raise ProtocolError("empty reply line")
        kind, rest = chr(line[0]), line[1:]
        if kind in "+-":
            return (kind, rest)
        try:
            n = int(rest)
        except ValueError:
            raise ProtocolError("bad reply line %r" % line[:80])
        if kind == ":":
            return (":", n)
        if kind == "$":
            return ("$", None if n < 0 else self._exact(n))
        if kind == "*":
            return ("*", None if n < 0 else [self.read_reply() for _ in range(n)])
        raise ProtocolError("unknown reply type %r" % line[:80])

    def closed_by_peer(self, timeout=2.0):
        """True when the server has closed the connection (EOF) within timeout, with no
        further reply bytes; False when it is still open after timeout."""
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
            if data:
                self.buf += data
                return False
            return True
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(old)


def show(reply, limit=120):
    """A short readable form of a reply for messages (long bulks cut, with their length)."""
    kind, val = reply
    if kind == "+":
        return "+" + val.decode("latin-1")
    if kind == "-":
        return "(error) " + val.decode("latin-1")
    if kind == "$":
        if val is None:
            return "(nil)"
        return repr(val) if len(val) <= limit else "%r...(%d bytes)" % (val[:limit], len(val))
    if kind == ":":
        return "(integer) %d" % val
    if val is None:
        return "(nil array)"
    out = "[" + ", ".join(show(r, 40) for r in val[:20])
    return out + (", ...%d more]" % (len(val) - 20) if len(val) > 20 else "]")


def show_cmd(args, limit=60):
    """A command as a readable line, long arguments cut."""
    parts = []
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(repr(b[:limit])[2:-1] + ("...(%d bytes)" % len(b) if len(b) > limit else ""))
    return " ".join(parts)
