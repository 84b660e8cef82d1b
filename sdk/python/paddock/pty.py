"""An interactive terminal session over the exec WebSocket (RFC 6455, client side, stdlib only).

The server sends terminal output as binary messages and, at the end, a text message
``{"exit_code":N,...}`` followed by a close frame. The client sends keystrokes as binary
messages and control messages (``resize``, ``signal``) as text."""
import base64
import hashlib
import json
import os
import socket
import struct
import threading
import time

from . import errors

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_MAX_MESSAGE = 64 << 20


def _mask(payload, key):
    """XOR payload with the 4-byte key (fast path through int arithmetic)."""
    n = len(payload)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def encode_frame(opcode, payload, fin=True, mask_key=None):
    """One client frame (always masked, as RFC 6455 requires of clients)."""
    key = mask_key if mask_key is not None else os.urandom(4)
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + key + _mask(bytes(payload), key)


class PtySession:
    """A command on a terminal inside the environment.

    ``send(data)`` types bytes (or str); ``recv(timeout=None)`` returns the next piece of
    terminal output, or ``b""`` once the session has ended (then ``exit_code`` is set);
    ``resize(cols, rows)``; ``signal("INT")``; ``close()`` hangs the terminal up.
    ``read_until(pattern)`` and ``wait()`` are conveniences built on ``recv``.
    ``output`` accumulates everything received. Use it as a context manager to close it."""

    def __init__(self, transport, path, timeout=30.0):
        self._sock = transport.connect_socket(timeout)
        self._send_lock = threading.Lock()
        self._buf = b""
        self._frag = None  # (opcode, [payloads]) of a fragmented message
        self.exit_code = None
        self.duration_ms = None
        self.timed_out = None
        self.errors = []  # {"code","message"} the server sent for bad control messages
        self.close_code = None
        self.output = b""
        self.closed = False  # the session is over (close frame seen or sent)
        try:
            self._handshake(transport, path)
            self._sock.settimeout(None)
        except BaseException:
            self._sock.close()
            raise

    def _handshake(self, transport, path):
        key = base64.b64encode(os.urandom(16)).decode()
        host = "localhost" if transport.scheme == "unix" else "%s:%d" % (transport.host,
                                                                         transport.port)
        lines = ["GET %s HTTP/1.1" % path, "Host: " + host, "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: " + key,
                 "Sec-WebSocket-Version: 13"]
        lines += ["%s: %s" % kv for kv in transport.headers().items()]
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                b = self._sock.recv(65536)
            except OSError as e:
                raise errors.ConnectionError("WebSocket handshake: %s" % e) from None
            if not b:
                raise errors.ConnectionError("WebSocket handshake: the server closed the "
                                             "connection")
            buf += b
            if len(buf) > 1 << 20:
                raise errors.ProtocolError("WebSocket handshake: headers too long")
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise errors.ProtocolError("WebSocket handshake: bad status line %r"
                                       % lines[0]) from None
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if status != 101:
            body = rest
            n = int(hdrs.get("content-length", "0") or 0)
            self._sock.settimeout(5)
            try:
                while len(body) < n:
                    b = self._sock.recv(65536)
                    if not b:
                        break
                    body += b
            except OSError:
                pass
            code, message = None, body.decode("utf-8", "replace").strip()
            try:
                e = json.loads(body)["error"]
                code, message = e.get("code"), e.get("message")
            except (ValueError, KeyError, TypeError):
                pass
            ra = hdrs.get("retry-after")
            raise errors.error_for(status, code, message, method="GET", path=path,
                                   retry_after=float(ra) if ra and ra.isdigit() else None)
        want = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            raise errors.ProtocolError("WebSocket handshake: wrong Sec-WebSocket-Accept")
        self._buf = rest

    # ---- frames

    def _send_frame(self, opcode, payload):
        data = encode_frame(opcode, payload)
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise errors.ConnectionError("the terminal session is gone: %s" % e) from None

    def _parse(self):
        """(fin, opcode, payload) of one whole frame at the start of the buffer, or None."""
        b = self._buf
        if len(b) < 2:
            return None
        fin, opcode = bool(b[0] & 0x80), b[0] & 0x0F
        masked, n = bool(b[1] & 0x80), b[1] & 0x7F
        off = 2
        if n == 126:
            if len(b) < 4:
                return None
            n = struct.unpack("!H", b[2:4])[0]
            off = 4
        elif n == 127:
            if len(b) < 10:
                return None
            n = struct.unpack("!Q", b[2:10])[0]
            off = 10
        if n > _MAX_MESSAGE:
            raise errors.ProtocolError("WebSocket frame of %d bytes" % n)
        key = None
        if masked:
            if len(b) < off + 4:
                return None
            key = b[off:off + 4]
            off += 4
        if len(b) < off + n:
            return None
        payload = b[off:off + n]
        self._buf = b[off + n:]
        if key:
            payload = _mask(payload, key)
        return fin, opcode, payload

    def _next_frame(self, deadline):
        while True:
            f = self._parse()
            if f is not None:
                return f
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no terminal output in time")
                self._sock.settimeout(left)
            else:
                self._sock.settimeout(None)
            try:
                b = self._sock.recv(65536)
            except socket.timeout:
                raise TimeoutError("no terminal output in time") from None
            except OSError as e:
                raise errors.ConnectionError("the terminal session broke: %s" % e) from None
            if not b:
                return None
            self._buf += b

    # ---- the session

    def recv(self, timeout=None):
        """The next terminal output (bytes); ``b""`` when the session is over. Raises
        ``TimeoutError`` when ``timeout`` seconds pass without output."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.closed:
            f = self._next_frame(deadline)
            if f is None:  # connection closed without a close frame
                self.closed = True
                break
            fin, op, payload = f
            if op == OP_PING:
                self._send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 \
                    else None
                try:
                    self._send_frame(OP_CLOSE, payload[:2])
                except errors.ConnectionError:
                    pass
                self.closed = True
                break
            if op == OP_CONT:
                if self._frag is None:
                    raise errors.ProtocolError("WebSocket continuation without a start")
                self._frag[1].append(payload)
                if not fin:
                    continue
                op, payload = self._frag[0], b"".join(self._frag[1])
                self._frag = None
            elif not fin:
                self._frag = (op, [payload])
                continue
            if op == OP_BINARY:
                if payload:
                    self.output += payload
                    return payload
            elif op == OP_TEXT:
                self._control(payload)
        try:
            self._sock.close()
        except OSError:
            pass
        return b""

    def _control(self, payload):
        try:
            j = json.loads(payload)
        except ValueError:
            raise errors.ProtocolError("bad control message: %r" % payload[:200]) from None
        if "exit_code" in j:
            self.exit_code = j.get("exit_code")
            self.duration_ms = j.get("duration_ms")
            self.timed_out = j.get("timed_out")
        elif "error" in j:
            self.errors.append(j["error"])

    def send(self, data):
        """Type ``data`` (bytes, or str as UTF-8) into the terminal."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._send_frame(OP_BINARY, data)

    def resize(self, cols, rows):
        """Change the window size."""
        self._send_frame(OP_TEXT, json.dumps({"resize": {"cols": int(cols),
                                                         "rows": int(rows)}}).encode())

    def signal(self, name):
        """Send a signal (``INT``, ``TERM``, ...) to the terminal's foreground process group."""
        self._send_frame(OP_TEXT, json.dumps({"signal": str(name)}).encode())

    def read_until(self, pattern, timeout=10.0):
        """Read until ``pattern`` (bytes or str) appears in the output received since this call;
        returns that output. Raises ``TimeoutError``, or ``EOFError`` if the session ends."""
        if isinstance(pattern, str):
            pattern = pattern.encode()
        deadline = time.monotonic() + timeout
        got = b""
        while pattern not in got:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("%r did not appear; got %r" % (pattern, got[-300:]))
            b = self.recv(timeout=left)
            if not b:
                how = ("the command exited with code %s" % self.exit_code
                       if self.exit_code is not None else "the connection closed")
                raise EOFError("the session ended (%s) before %r appeared; got %r"
                               % (how, pattern, got[-300:]))
            got += b
        return got

    def wait(self, timeout=None):
        """Read until the session ends; returns ``exit_code``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self.recv(timeout=left):
                return self.exit_code

    def close(self):
        """End the session (the terminal is hung up inside)."""
        if not self.closed:
            try:
                self._send_frame(OP_CLOSE, struct.pack("!H", 1000))
            except errors.ConnectionError:
                pass
            self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
