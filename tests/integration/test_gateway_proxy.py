"""paddock-gateway on its own: the real binary, unprivileged (setpriv to nobody, as paddockd
runs it), in front of a fake engine written here that speaks the control protocol
(docs/security.md "Gateway request parsing"): it receives one socketpair end per client
connection with SCM_RIGHTS, serves simple HTTP on it, and answers an Upgrade with 101 and an
echo. TLS uses a throwaway self-signed certificate.
"""
import hashlib
import json
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD, wait_for

GATEWAY = os.path.join(BUILD, "paddock-gateway")

SECRET_A = "pdk_" + "A" * 43
SECRET_B = "pdk_" + "B" * 43
SECRET_SLOW = "pdk_" + "S" * 43
SECRET_OLD = "pdk_" + "E" * 43


BIG = 8 << 20


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def table(**extra):
    toks = [
        {"name": "a", "hash": sha(SECRET_A), "admin": False, "rate": 0, "expires_at": 0},
        {"name": "b", "hash": sha(SECRET_B), "admin": False, "rate": 0, "expires_at": 0},
        {"name": "slow", "hash": sha(SECRET_SLOW), "admin": False, "rate": 1.0, "expires_at": 0},
        {"name": "old", "hash": sha(SECRET_OLD), "admin": False, "rate": 0, "expires_at": 1000},
    ]
    return toks


def read_head(f):
    """Reads one request head from a buffered socket file; None at EOF."""
    line = f.readline()
    if not line:
        return None
    method, target, version = line.decode().rstrip("\r\n").split(" ")
    headers = []
    while True:
        h = f.readline().decode()
        if h in ("\r\n", ""):
            break
        name, value = h.rstrip("\r\n").split(":", 1)
        headers.append((name, value.strip()))
    return method, target, version, headers


def hget(headers, name):
    vals = [v for n, v in headers if n.lower() == name.lower()]
    return vals[0] if vals else None


class FakeEngine:
    """The engine side of the control socket."""

    def __init__(self, sock):
        self.sock = sock
        self.connects = []  # peer strings, in order
        self.requests = []  # (method, target, headers, body)
        self.lock = threading.Lock()
        self.threads = []
        t = threading.Thread(target=self._control, daemon=True)
        t.start()

    def send_tokens(self, toks):
        self.sock.send(json.dumps({"op": "tokens", "tokens": toks}).encode())

    def _control(self):
        while True:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(self.sock, 65536, 4)
            except OSError:
                return
            if not msg:
                return
            m = json.loads(msg)
            assert m["op"] == "connect" and len(fds) == 1
            with self.lock:
                self.connects.append(m["peer"])
            conn = socket.socket(fileno=fds[0])
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()

    def _serve(self, conn):
        f = conn.makefile("rb")
        try:
            while True:
                req = read_head(f)
                if req is None:
                    return
                method, target, version, headers = req
                body = b""
                if hget(headers, "Content-Length"):
                    body = f.read(int(hget(headers, "Content-Length")))
                elif hget(headers, "Transfer-Encoding") == "chunked":
                    raw = b""
                    while True:
                        size_line = f.readline()
                        raw += size_line
                        n = int(size_line, 16)
                        if n == 0:
                            raw += f.readline()
                            break
                        chunk = f.read(n + 2)
                        raw += chunk
                        body += chunk[:-2]
                    headers.append(("x-raw-chunked", raw.decode()))
                with self.lock:
                    self.requests.append((method, target, headers, body))
                if hget(headers, "Upgrade"):
                    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                                 b"Upgrade: " + hget(headers, "Upgrade").encode() + b"\r\n\r\n")
                    while True:  # echo until EOF
                        data = conn.recv(4096)
                        if not data:
                            return
                        conn.sendall(data)
                if target == "/big":  # 8 MiB at once (a big socket buffer), then close
                    conn.setsockopt(socket.SOL_SOCKET, 32, 4 * BIG)  # SO_SNDBUFFORCE
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                                 % BIG + b"x" * BIG)
                    return
                out = json.dumps({"method": method, "target": target, "headers": headers,
                                  "body": body.decode(errors="replace")}).encode()
                close = hget(headers, "Connection") == "close"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n%s\r\n" % (len(out), b"Connection: close\r\n" if close else b"") + out)
                if close:
                    return
        except (OSError, ValueError):
            return
        finally:
            f.close()
            conn.close()


class Gateway:
    def __init__(self, tmp, prefix=()):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost", "-days", "1",
                        "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem"],
                       check=True, capture_output=True)
        self.cert = f"{tmp}/cert.pem"
        ctl_gw, ctl_engine = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.tls_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tls_sock.bind(("127.0.0.1", 0))
        self.tls_sock.listen(128)
        self.plain_sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        self.plain_sock.bind(("::1", 0))
        self.plain_sock.listen(128)
        self.tls_port = self.tls_sock.getsockname()[1]
        self.plain_port = self.plain_sock.getsockname()[1]
        cert_fd = os.open(self.cert, os.O_RDONLY)
        key_fd = os.open(f"{tmp}/key.pem", os.O_RDONLY)
        fds = [ctl_gw.fileno(), self.tls_sock.fileno(), self.plain_sock.fileno(), cert_fd, key_fd]
        # Unprivileged, as paddockd starts it: nobody, no capabilities, no_new_privs.
        cmd = list(prefix) + ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", GATEWAY,
               "--control", str(fds[0]), "--listen", f"{fds[1]}:tls",
               "--listen", f"{fds[2]}:plain", "--cert-fd", str(cert_fd), "--key-fd", str(key_fd)]
        self.log = open(f"{tmp}/gateway.log", "w+")
        self.proc = subprocess.Popen(cmd, pass_fds=fds, stderr=self.log)
        os.close(cert_fd)
        os.close(key_fd)
        ctl_gw.close()
        self.engine = FakeEngine(ctl_engine)
        self.engine.send_tokens(table())
        self.ctx = ssl.create_default_context(cafile=self.cert)
        wait_for(lambda: "token table" in self.logtext(), what="the gateway to load tokens")

    def logtext(self):
        self.log.seek(0)
        return self.log.read()

    def tls(self, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.tls_port), timeout=timeout)
        return self.ctx.wrap_socket(s, server_hostname="localhost")

    def plain(self, timeout=10):
        return socket.create_connection(("::1", self.plain_port), timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.engine.sock.close()
        self.tls_sock.close()
        self.plain_sock.close()
        self.log.close()


@pytest.fixture
def gw():
    with tempfile.TemporaryDirectory(prefix="paddock-gw-", dir="/var/tmp") as tmp:
        os.chmod(tmp, 0o755)
        g = Gateway(tmp)
        try:
            yield g
            if not getattr(g, "expect_exit", False):
                assert g.proc.poll() is None, "the gateway died:\n" + g.logtext()
        finally:
            g.stop()


def request(s, method="GET", path="/v1/envs", token=SECRET_A, headers=(), body=None):
    lines = [f"{method} {path} HTTP/1.1", "Host: gw"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines += list(headers)
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))


def response(f):
    """(status, headers dict lowercased, body) of one Content-Length response."""
    status_line = f.readline().decode()
    assert status_line, "connection closed before a response"
    status = int(status_line.split(" ")[1])
    headers = {}
    while True:
        h = f.readline().decode()
        if h in ("\r\n", ""):
            break
        n, v = h.rstrip("\r\n").split(":", 1)
        headers[n.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return status, headers, body


def is_closed(s, timeout):
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def test_tls_round_trip_with_keep_alive(gw):
    s = gw.tls()
    f = s.makefile("rb")
    for i in range(3):
        request(s, path=f"/v1/envs/{i}", headers=["Paddock-Peer: 6.6.6.6:1"])
        status, _h, body = response(f)
        assert status == 200
        seen = json.loads(body)
        assert seen["target"] == f"/v1/envs/{i}"
        peers = [v for n, v in seen["headers"] if n.lower() == "paddock-peer"]
        # The client's own Paddock-Peer is gone; the gateway's names the real peer.
        assert peers == ["127.0.0.1:%d" % s.getsockname()[1]]
        assert hget(seen["headers"], "Authorization") == f"Bearer {SECRET_A}"
    assert len(gw.engine.connects) == 1  # one client connection, one engine connection
    s.close()


def test_post_body_and_chunked_reemitted_canonically(gw):
    s = gw.tls()
    f = s.makefile("rb")
    request(s, method="POST", path="/v1/x", body=b'{"a":1}')
    status, _h, body = response(f)
    assert status == 200 and json.loads(body)["body"] == '{"a":1}'
    s.sendall(b"POST /v1/y HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + SECRET_A.encode() +
              b"\r\nTransfer-Encoding: chunked\r\n\r\n0003\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n")
    status, _h, body = response(f)
    seen = json.loads(body)
    assert status == 200 and seen["body"] == "abc0123456789"
    assert hget(seen["headers"], "x-raw-chunked") == "3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n"


def test_tls_versions(gw):
    ctx = ssl.create_default_context(cafile=gw.cert)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gw.tls_port), timeout=10),
                        server_hostname="localhost")
    assert s.version() == "TLSv1.2"
    request(s)
    assert response(s.makefile("rb"))[0] == 200
    assert gw.tls().version() == "TLSv1.3"
    # TLS 1.1 is refused (the client may not even offer it: then it fails on its own side).
    old = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{gw.tls_port}",
                          "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"],
                         input=b"", capture_output=True, timeout=10)
    assert old.returncode != 0
    assert b"no peer certificate available" in old.stdout  # no handshake happened


def test_pipelined_requests_and_an_error_after_them(gw):
    s = gw.tls()
    f = s.makefile("rb")
    reqs = b""
    for i in range(3):
        reqs += (f"GET /p/{i} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {SECRET_A}\r\n\r\n").encode()
    reqs += b"GET /p/x HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer nope\r\n\r\n"
    s.sendall(reqs)
    for i in range(3):  # answered in order by the engine...
        status, _h, body = response(f)
        assert status == 200 and json.loads(body)["target"] == f"/p/{i}"
    status, h, _body = response(f)  # ...then the gateway's own error, last
    assert status == 401 and h["connection"] == "close"
    assert is_closed(s, 5)


def test_large_uploads_arrive_whole(gw):
    body = bytes(range(97, 123)) * ((5 << 20) // 26)
    s = gw.tls(timeout=30)
    f = s.makefile("rb")
    request(s, method="PUT", path="/up", body=body)
    status, _h, out = response(f)
    assert status == 200 and json.loads(out)["body"].encode() == body
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 70000]), body[i:i + 70000])
                       for i in range(0, len(body), 70000)) + b"0\r\n\r\n"
    s.sendall(b"PUT /up HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + SECRET_A.encode() +
              b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
    status, _h, out = response(f)
    assert status == 200 and json.loads(out)["body"].encode() == body


def test_missing_wrong_and_expired_tokens_are_401(gw):
    for token, message in [(None, "a bearer token is required"),
                           ("pdk_" + "x" * 43, "invalid or expired token"),
                           (SECRET_OLD, "invalid or expired token")]:
        s = gw.tls()
        f = s.makefile("rb")
        request(s, token=token)
        status, h, body = response(f)
        assert status == 401
        assert h["www-authenticate"].startswith("Bearer")
        assert h["connection"] == "close"
        assert json.loads(body) == {"error": {"code": "unauthorized", "message": message}}
        s.close()
    assert gw.engine.connects == []  # nothing unauthenticated reached the engine


def test_401_survives_an_unread_request_body(gw):
    # The gateway refuses at the head and never reads the 4 MiB body; its answer must still
    # reach the client (no reset from closing with unread data).
    for conn in (gw.tls, gw.plain):
        s = conn(timeout=20)
        s.sendall(b"PUT /v1/envs/x/files/f HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer bad\r\n"
                  b"Content-Length: %d\r\n\r\n" % (4 << 20) + b"z" * (4 << 20))
        status, _h, body = response(s.makefile("rb"))
        assert status == 401 and json.loads(body)["error"]["code"] == "unauthorized"
        s.close()


def test_rate_limit_429_with_retry_after(gw):
    s = gw.tls()
    f = s.makefile("rb")
    request(s, token=SECRET_SLOW)
    assert response(f)[0] == 200
    request(s, token=SECRET_SLOW)
    status, h, body = response(f)
    assert status == 429
    assert int(h["retry-after"]) >= 1
    assert json.loads(body)["error"]["code"] == "rate_limited"
    assert is_closed(s, 5)


@pytest.mark.parametrize("raw,status", [
    (b"GET /v1/envs HTTP/1.1\r\nHost: gw\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: gw\r\n\r\n", 414),
    (b"GET /v1/envs HTTP/1.1\nHost: gw\n\n", 400),
    (b"POST /v1/envs HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"GET /v1/envs HTTP/1.1\r\nHost: gw\r\nX: a\r\n b\r\n\r\n", 400),
])
def test_malformed_heads_are_refused(gw, raw, status):
    s = gw.tls()
    f = s.makefile("rb")
    s.sendall(raw)
    got, _h, body = response(f)
    assert got == status
    assert "error" in json.loads(body)
    assert gw.engine.connects == []


def test_slowloris_does_not_block_others_and_is_closed(gw):
    slow = gw.tls(timeout=30)
    slow.sendall(b"GET /v1/envs HTTP/1.1\r\nHost: gw\r\n")
    mute = socket.create_connection(("127.0.0.1", gw.tls_port), timeout=30)  # never says hello
    start = time.monotonic()
    for _ in range(3):  # a header line now and then, never the end of the head
        slow.sendall(b"X-Slow: 1\r\n")
        s = gw.tls()
        f = s.makefile("rb")
        request(s)
        assert response(f)[0] == 200  # others are served meanwhile
        s.close()
        time.sleep(1)
    assert is_closed(slow, 15)
    assert 9 <= time.monotonic() - start <= 14  # the 10 s head deadline
    assert is_closed(mute, 5)  # and the 10 s handshake deadline


def test_garbage_tls_closes_only_that_connection(gw):
    good = gw.tls()
    gf = good.makefile("rb")
    bad = socket.create_connection(("127.0.0.1", gw.tls_port), timeout=10)
    # Plain HTTP on the TLS port: 'G' is no TLS record type. (Random bytes are not used: with
    # the high bit set they can start an SSLv2-style hello that waits for its length.)
    bad.sendall(b"GET / HTTP/1.1\r\nHost: gw\r\n\r\n" + bytes(range(256)))
    assert is_closed(bad, 5)
    request(good)
    assert response(gf)[0] == 200
    # Garbage after a good handshake: a corrupt record closes that session only.
    mid = gw.tls()
    mid_sock = socket.socket(fileno=os.dup(mid.fileno()))
    mid_sock.sendall(b"\x17\x03\x03\x00\x20" + os.urandom(32))
    assert is_closed(mid_sock, 5)
    request(good)
    assert response(gf)[0] == 200


def test_revoked_token_closes_open_websocket_at_once(gw):
    s = gw.tls()
    request(s, path="/v1/envs/x/exec/ws", token=SECRET_B,
            headers=["Connection: Upgrade", "Upgrade: websocket"])
    f = s.makefile("rb")
    assert f.readline().startswith(b"HTTP/1.1 101")
    while f.readline() != b"\r\n":
        pass
    s.sendall(b"ping")  # blind relay: the fake engine echoes
    assert f.read(4) == b"ping"
    other = gw.tls()
    of = other.makefile("rb")
    request(other, token=SECRET_A)
    assert response(of)[0] == 200
    t0 = time.monotonic()
    gw.engine.send_tokens([t for t in table() if t["name"] != "b"])
    assert is_closed(s, 5)
    assert time.monotonic() - t0 < 1.5
    request(other, token=SECRET_A)  # token a's connection lives on
    assert response(of)[0] == 200


def test_unreadable_token_table_fails_closed(gw):
    s = gw.tls()
    request(s, path="/ws", token=SECRET_A, headers=["Connection: Upgrade", "Upgrade: websocket"])
    f = s.makefile("rb")
    assert f.readline().startswith(b"HTTP/1.1 101")
    gw.engine.sock.send(b'{"op":"tokens","tokens":[{"name":"a"}]}')
    assert is_closed(s, 3)
    other = gw.tls()
    request(other, token=SECRET_A)
    assert response(other.makefile("rb"))[0] == 401
    gw.engine.send_tokens(table())
    wait_for(lambda: gw.logtext().count("token table: 4") >= 2)
    other = gw.tls()
    request(other, token=SECRET_A)
    assert response(other.makefile("rb"))[0] == 200


def test_expiry_closes_open_websocket(gw):
    soon = "pdk_" + "Z" * 43
    gw.engine.send_tokens(table() + [{"name": "soon", "hash": sha(soon), "admin": False,
                                      "rate": 0, "expires_at": int(time.time()) + 2}])
    s = gw.tls()
    request(s, path="/v1/envs/x/exec/ws", token=soon,
            headers=["Connection: Upgrade", "Upgrade: websocket"])
    f = s.makefile("rb")
    assert f.readline().startswith(b"HTTP/1.1 101")
    assert not is_closed(s, 0.5)
    assert is_closed(s, 4)


def test_per_peer_connection_cap(gw):
    conns = [gw.plain() for _ in range(64)]
    extra = gw.plain()
    assert is_closed(extra, 5)  # the 65th from one address is refused
    conns.pop().close()
    time.sleep(0.3)
    s = gw.plain()
    f = s.makefile("rb")
    request(s)
    assert response(f)[0] == 200
    for c in conns:
        c.close()


def test_slow_reader_backpressure_without_spinning(gw):
    s = gw.tls(timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    request(s, path="/big")
    time.sleep(0.5)
    cpu0 = cpu_seconds(gw.proc.pid)
    time.sleep(2)  # the client reads nothing; the engine has written all and closed
    assert cpu_seconds(gw.proc.pid) - cpu0 < 0.2
    other = gw.plain()
    of = other.makefile("rb")
    request(other)
    assert response(of)[0] == 200  # the loop serves others meanwhile
    status, _h, body = response(s.makefile("rb"))
    assert status == 200 and len(body) == BIG and body == b"x" * BIG


def test_total_connection_cap_follows_the_fd_limit():
    # 100 fds leave room for (100 - 64) / 2 = 18 connections (two fds each).
    with tempfile.TemporaryDirectory(prefix="paddock-gw-", dir="/var/tmp") as tmp:
        os.chmod(tmp, 0o755)
        g = Gateway(tmp, prefix=["prlimit", "--nofile=100:100"])
        try:
            assert "at most 18 connections" in g.logtext()
            conns = []
            for _ in range(18):  # each with an engine connection too
                s = g.plain()
                f = s.makefile("rb")
                request(s)
                assert response(f)[0] == 200
                f.close()
                conns.append(s)
            extra = g.plain()
            assert is_closed(extra, 5)
            conns.pop().close()
            wait_for(lambda: len(g.engine.connects) == 18)
            time.sleep(0.3)
            s = g.plain()
            request(s)
            assert response(s.makefile("rb"))[0] == 200
            assert g.proc.poll() is None
            for c in conns:
                c.close()
        finally:
            g.stop()


def test_plain_mode_on_loopback(gw):
    s = gw.plain()
    f = s.makefile("rb")
    request(s)
    status, _h, body = response(f)
    assert status == 200
    assert hget(json.loads(body)["headers"], "Paddock-Peer") == "[::1]:%d" % s.getsockname()[1]


def test_confined_and_exits_when_engine_goes(gw):
    status = open(f"/proc/{gw.proc.pid}/status").read()
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Seccomp"].strip() == "2"
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["CapEff"].strip(), 16) == 0
    assert fields["Uid"].split()[0] == "65534"
    assert "confined: Landlock ABI" in gw.logtext()
    # Not dumpable: its /proc files belong to root, not to its own uid.
    assert os.stat(f"/proc/{gw.proc.pid}/mem").st_uid == 0
    gw.expect_exit = True
    gw.engine.sock.shutdown(socket.SHUT_RDWR)
    assert gw.proc.wait(timeout=5) == 0
