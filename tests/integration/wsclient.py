"""A minimal WebSocket client (RFC 6455) over paddockd's unix socket, for tests and benchmarks:
the handshake, masked frames out, whole messages in."""
import base64
import hashlib
import json
import os
import socket
import struct
import urllib.parse

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class HandshakeRefused(Exception):
    def __init__(self, status, head, body):
        super().__init__("HTTP %s: %r" % (status, body[:300]))
        self.status = status
        self.head = head
        self.body = body


def handshake_request(path, key=None, extra_headers=None):
    key = key or base64.b64encode(os.urandom(16)).decode()
    lines = ["GET %s HTTP/1.1" % path, "Host: localhost", "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    lines += extra_headers or []
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), key


class WS:
    def __init__(self, sock_path, env, spec=None, timeout=30, path=None):
        if path is None:
            path = "/v1/envs/%s/exec/ws" % env
            if spec is not None:
                path += "?spec=" + urllib.parse.quote(json.dumps(spec))
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(sock_path)
        req, key = handshake_request(path)
        self.s.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = self.s.recv(65536)
            if not b:
                break
            buf += b
        head, _, rest = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else None
        if status != 101:
            # read the rest of the error body
            try:
                while True:
                    b = self.s.recv(65536)
                    if not b:
                        break
                    rest += b
                    if rest.endswith(b"\n"):
                        break
            except socket.timeout:
                pass
            self.s.close()
            raise HandshakeRefused(status, head.decode(errors="replace"), rest)
        want = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        assert ("sec-websocket-accept: " + want).lower() in head.decode().lower(), head
        self.buf = rest
        self.closed = False

    # ---- frames
    def send_frame(self, opcode, payload, fin=True):
        mask = os.urandom(4)
        n = len(payload)
        hdr = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack("!Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.s.sendall(hdr + mask + masked)

    def send_bytes(self, data):
        self.send_frame(2, data)

    def send_json(self, obj):
        self.send_frame(1, json.dumps(obj).encode())

    def _need(self, n):
        while len(self.buf) < n:
            b = self.s.recv(65536)
            if not b:
                raise EOFError("connection closed")
            self.buf += b
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self):
        """(opcode, payload) of the next whole message (server frames are unmasked)."""
        h = self._need(2)
        opcode = h[0] & 0x0F
        n = h[1] & 0x7F
        assert not (h[1] & 0x80), "server frames must not be masked"
        if n == 126:
            n = struct.unpack("!H", self._need(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._need(8))[0]
        payload = self._need(n)
        if opcode == 0x9:  # ping
            self.send_frame(0xA, payload)
            return self.recv_frame()
        return opcode, payload

    def collect(self, until=None, limit=1 << 20):
        """Read messages until the connection closes or until(output_bytes) is true.
        Returns (output_bytes, control_messages, close_code). With until, the session ending
        first is a failure (a caller waiting for some output must not go on without it)."""
        out = b""
        ctl = []
        while True:
            try:
                op, p = self.recv_frame()
            except EOFError:
                assert until is None, "connection closed before the awaited output: %r %r" \
                    % (out[-500:], ctl)
                return out, ctl, None
            if op == 2:
                out += p
                if until and until(out):
                    return out, ctl, None
            elif op == 1:
                ctl.append(json.loads(p))
            elif op == 8:
                code = struct.unpack("!H", p[:2])[0] if len(p) >= 2 else None
                if not self.closed:
                    try:
                        self.send_frame(8, p[:2])
                    except OSError:
                        pass
                self.closed = True
                assert until is None, "session closed (%s) before the awaited output: %r %r" \
                    % (code, out[-500:], ctl)
                return out, ctl, code
            if len(out) > limit:
                raise AssertionError("too much output: %r" % out[-500:])

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass
