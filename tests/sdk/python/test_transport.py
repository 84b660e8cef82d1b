"""How the SDK reaches the daemon: configuration from the environment, typed errors for every
documented error answer, keep-alive and its retry, HTTPS with a pinned fingerprint or a CA
file (through the daemon's own gateway, paddockd --listen), bearer tokens, events, audit, hostile
archives, Python 3.9 to 3.13 (where installed), and installation with pip."""
import builtins
import http.server
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading

import pytest

import paddock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SDK = os.path.join(REPO, "sdk", "python")


# --------------------------------------------------------------------------- configuration


def test_configuration_from_the_environment(monkeypatch, sdk_daemon):
    for v in ("PADDOCK_HOST", "PADDOCK_TOKEN", "PADDOCK_SOCKET", "PADDOCK_FINGERPRINT"):
        monkeypatch.delenv(v, raising=False)
    assert paddock.Paddock().where == "unix:/run/paddock/paddock.sock"
    monkeypatch.setenv("PADDOCK_SOCKET", sdk_daemon.sock)
    c = paddock.Paddock()
    assert c.where == "unix:" + sdk_daemon.sock and c.system()["version"]
    monkeypatch.setenv("PADDOCK_HOST", "https://example.invalid:8443")
    assert paddock.Paddock().where == "https://example.invalid:8443"
    assert paddock.Paddock(socket=sdk_daemon.sock).where == "unix:" + sdk_daemon.sock
    with pytest.raises(ValueError):
        paddock.Paddock(host="https://a:1", socket="/x")
    with pytest.raises(ValueError):
        paddock.Paddock(host="https://a:1", fingerprint="sha256:12:34")  # too short
    with pytest.raises(ValueError):
        paddock.Paddock(host="ftp://a")


def test_no_daemon_is_a_connection_error(tmp_path):
    c = paddock.Paddock(socket=str(tmp_path / "none.sock"))
    with pytest.raises(paddock.ConnectionError) as ei:
        c.envs.list()
    assert isinstance(ei.value, builtins.ConnectionError)
    assert isinstance(ei.value, paddock.PaddockError)
    assert "none.sock" in str(ei.value)


def test_real_errors_are_typed(client, sandbox):
    with pytest.raises(paddock.Conflict) as ei:
        client.envs.create(sandbox.name)
    e = ei.value
    assert (e.status, e.code) == (409, "conflict") and sandbox.name in e.message
    assert e.method == "POST" and e.path == "/v1/envs"
    with pytest.raises(paddock.InvalidArgument) as ei:
        client.envs.create("x", kind="vm")
    assert ei.value.code == "invalid_argument" and "kind" in ei.value.message
    with pytest.raises(paddock.InvalidArgument) as ei:
        client.envs.create("bad name!")
    with pytest.raises(paddock.NotFound):
        client.envs.get("nobody")
    assert str(ei.value).startswith("400 invalid_argument: ")
    with pytest.raises(paddock.Unprocessable) as ei:
        client.envs.create("img", image="no-such-image-here")
    assert "no-such-image-here" in ei.value.message
    with pytest.raises(paddock.Conflict):
        sandbox.destroy(force=False)  # running


# --------------------------------------------------------------------------- canned answers


class _Canned(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers = {}
    seen = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        status, body, headers, close = self.answers.get(self.path.split("?")[0],
                                                        (200, b'{"envs":[]}', {}, False))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if close:  # go away without saying so (as a server's idle timeout does)
            self.close_connection = True

    do_POST = do_GET


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def canned(tmp_path):
    path = str(tmp_path / "canned.sock")
    srv = _UnixServer(path, _Canned)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Canned.seen = []
    yield path, _Canned
    srv.shutdown()
    srv.server_close()


def _err(code, message):
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def test_every_documented_error_code_has_its_exception(canned):
    path, h = canned
    h.answers = {
        "/v1/envs/q": (403, _err("quota_exceeded", "max_envs 2 reached"), {}, False),
        "/v1/envs/r": (429, _err("rate_limited", "10 requests/s"), {"Retry-After": "7"}, False),
        "/v1/envs/u": (401, _err("unauthorized", "bad token"), {}, False),
        "/v1/envs/f": (403, _err("forbidden", "agent tokens cannot"), {}, False),
        "/v1/envs/t": (413, _err("too_large", "big"), {}, False),
        "/v1/envs/s": (507, _err("insufficient_storage", "full"), {}, False),
        "/v1/envs/b": (503, _err("unavailable", "busy"), {}, False),
        "/v1/envs/i": (500, b"not json at all", {}, False),
        "/v1/envs/m": (405, _err("method_not_allowed", "no"), {}, False),
    }
    c = paddock.Paddock(socket=path, token="pdk_test")
    cases = {"q": paddock.QuotaExceeded, "r": paddock.RateLimited, "u": paddock.Unauthorized,
             "f": paddock.Forbidden, "t": paddock.TooLarge, "s": paddock.InsufficientStorage,
             "b": paddock.Unavailable, "i": paddock.ServerError, "m": paddock.MethodNotAllowed}
    for n, cls in cases.items():
        with pytest.raises(cls) as ei:
            c.envs.get(n)
        assert type(ei.value) is cls
    with pytest.raises(paddock.QuotaExceeded) as ei:
        c.envs.get("q")
    assert isinstance(ei.value, paddock.Forbidden) and ei.value.message == "max_envs 2 reached"
    with pytest.raises(paddock.RateLimited) as ei:
        c.envs.get("r")
    assert ei.value.retry_after == 7 and ei.value.status == 429
    with pytest.raises(paddock.ServerError) as ei:
        c.envs.get("i")
    assert ei.value.message == "not json at all"
    # every request carried the token
    assert {a for _, _, a in h.seen} == {"Bearer pdk_test"}


def test_keepalive_retries_once_when_the_server_closed_an_idle_connection(canned):
    path, h = canned
    h.answers = {"/v1/envs": (200, b'{"envs":[]}', {}, True)}
    c = paddock.Paddock(socket=path)
    for _ in range(5):
        assert c.envs.list() == []
    assert len(h.seen) == 5


# --------------------------------------------------------------------------- HTTPS


def counting_connections(monkeypatch):
    """How many TCP connections the SDK opens from now on (socket.create_connection, which
    its transport uses; the call itself is passed on unchanged)."""
    made = []
    real = socket.create_connection

    def counted(*args, **kw):
        made.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(socket, "create_connection", counted)
    return made


def test_https_with_a_pinned_fingerprint(client, gateway, name, monkeypatch):
    made = counting_connections(monkeypatch)
    c = paddock.Paddock(host=gateway.url, fingerprint=gateway.fingerprint, token=gateway.token)
    env = c.envs.create(name)
    assert env.exec("echo over-tls").text == "over-tls\n"
    for _ in range(10):
        c.envs.get(name)
    assert made == [("127.0.0.1", gateway.port)], "one kept-alive connection for 12 requests"
    # the gateway saw the client: the audit log names its address for the exec
    recs = client.audit(env=name, since="10m")
    execs = [r for r in recs if r["action"] == "POST /v1/envs/{name}/exec"]
    assert execs and execs[-1]["token"] == "sdk-gateway-admin", recs
    assert execs[-1]["peer"].startswith("127.0.0.1:"), execs[-1]
    # streams, files, terminal sessions, watch over TLS
    with env.exec_stream("echo a; echo b >&2") as s:
        assert sorted(w for w, _ in s) == ["stderr", "stdout"]
    env.files.write("/tmp/f", b"\x00\x01")
    assert env.files.read("/tmp/f") == b"\x00\x01"
    with env.pty(["sh", "-c", "echo pty-over-tls; exit 2"]) as t:
        assert t.wait(timeout=20) == 2 and b"pty-over-tls" in t.output
    with env.files.watch("/tmp") as w:
        env.files.write("/tmp/g", "x")
        assert next(iter(w)).path.startswith("/tmp/")
    # the fingerprint in lower case, without colons or prefix
    fp = gateway.fingerprint.split(":", 1)[1].replace(":", "").lower()
    assert paddock.Paddock(host=gateway.url, fingerprint=fp,
                           token=gateway.token).envs.get(name).name == name
    # and from the environment
    monkeypatch.setenv("PADDOCK_HOST", gateway.url)
    monkeypatch.setenv("PADDOCK_FINGERPRINT", gateway.fingerprint)
    monkeypatch.setenv("PADDOCK_TOKEN", gateway.token)
    assert paddock.Paddock().envs.get(name).name == name
    # the gateway wants a token; a wrong one is refused there too
    with pytest.raises(paddock.Unauthorized):
        paddock.Paddock(host=gateway.url, fingerprint=gateway.fingerprint, token="").envs.list()
    with pytest.raises(paddock.Unauthorized):
        paddock.Paddock(host=gateway.url, fingerprint=gateway.fingerprint,
                        token="pdk_" + "A" * 43).envs.list()
    c.close()


def test_https_with_a_ca_file(client, gateway, sandbox):
    c = paddock.Paddock(host=gateway.url, ca=gateway.ca, token=gateway.token)
    assert c.envs.get(sandbox.name).name == sandbox.name
    # the certificate names 127.0.0.1 and localhost, and the name is checked
    c2 = paddock.Paddock(host="https://localhost:%d" % gateway.port, ca=gateway.ca,
                         token=gateway.token)
    assert c2.system()["version"]


def test_https_never_skips_verification(client, gateway, sandbox):
    wrong = "sha256:" + ":".join(["AB"] * 32)
    with pytest.raises(paddock.ConnectionError) as ei:
        paddock.Paddock(host=gateway.url, fingerprint=wrong, token=gateway.token).envs.list()
    assert "fingerprint" in str(ei.value) and gateway.fingerprint in str(ei.value)
    with pytest.raises(paddock.ConnectionError) as ei:
        paddock.Paddock(host=gateway.url, fingerprint=wrong,
                        token=gateway.token).envs.get(sandbox.name).pty()
    # neither a pin nor a CA: the system CAs do not know this certificate
    with pytest.raises(paddock.ConnectionError) as ei:
        paddock.Paddock(host=gateway.url, token=gateway.token).envs.list()
    assert "certificate" in str(ei.value).lower()
    # a CA file that did not sign it
    other = tempfile.mkdtemp(prefix="paddock-sdk-ca-", dir="/var/tmp")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=other", "-keyout", other + "/k", "-out", other + "/c"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with pytest.raises(paddock.ConnectionError):
            paddock.Paddock(host=gateway.url, ca=other + "/c", token=gateway.token).envs.list()
    finally:
        shutil.rmtree(other)


# --------------------------------------------------------------------------- tokens


def test_agent_tokens_on_the_socket_and_over_tls(client, sdk_daemon, gateway, name):
    a = client.tokens.create(name + "-a")
    b = client.tokens.create(name + "-b", max_envs=1)
    assert a["secret"].startswith("pdk_") and len(a["secret"]) == 47
    listed = {t["name"]: t for t in client.tokens.list()}
    assert listed[name + "-b"]["max_envs"] == 1 and "secret" not in listed[name + "-a"]
    try:
        ca = paddock.Paddock(socket=sdk_daemon.sock, token=a["secret"])
        env = ca.envs.create(name)
        assert env.owner == name + "-a"
        assert env.exec("echo mine").text == "mine\n"
        assert [e.name for e in ca.envs.list()] == [name]
        assert name in [e.name for e in client.envs.list()]  # the administrator sees it
        cb = paddock.Paddock(host=gateway.url, fingerprint=gateway.fingerprint,
                             token=b["secret"])
        with pytest.raises(paddock.NotFound):
            cb.envs.get(name)  # another token's environment does not exist for it
        assert cb.envs.list() == []
        cb.envs.create(name + "-b1")
        with pytest.raises(paddock.QuotaExceeded) as ei:
            cb.envs.create(name + "-b2")
        assert ei.value.status == 403 and "max-envs" in ei.value.message
        with pytest.raises(paddock.Forbidden):
            cb.tokens.list()  # agent tokens do not manage tokens
        over_tls = paddock.Paddock(host=gateway.url, fingerprint=gateway.fingerprint,
                                   token=a["secret"])
        assert over_tls.envs.get(name).exec("echo tls").text == "tls\n"
        with over_tls.envs.get(name).pty(["sh", "-c", "echo pty-token; exit 4"]) as t:
            assert t.wait(timeout=20) == 4
        with pytest.raises(paddock.Unauthorized):
            paddock.Paddock(socket=sdk_daemon.sock, token="pdk_" + "A" * 43).envs.list()
        client.tokens.remove(name + "-a")
        with pytest.raises(paddock.Unauthorized):
            ca.envs.list()  # revoked at once
        assert name + "-a" not in [t["name"] for t in client.tokens.list()]
    finally:
        for t in (name + "-a", name + "-b"):
            sdk_daemon.api("DELETE", "/v1/tokens/" + t)


def test_events_audit_and_metrics(client, sandbox):
    with client.events(env=sandbox.name) as events:
        sandbox.exec(["sh", "-c", "exit 3"])
        sandbox.pause()
        sandbox.resume()
        seen = []
        for ev in events:
            seen.append(ev)
            if ev.type == "resumed":
                break
    types = [e.type for e in seen]
    assert types == ["exec_started", "exec_exited", "paused", "resumed"], types
    assert seen[1]["exit_code"] == 3 and all(e.env == sandbox.name for e in seen)
    with client.events(types=["deleted"]) as events:
        sandbox.destroy()
        ev = next(iter(events))
    assert (ev.type, ev.env) == ("deleted", sandbox.name)
    recs = client.audit(env=sandbox.name, since="10m")
    execs = [r for r in recs if r["action"] == "POST /v1/envs/{name}/exec"]
    assert execs and execs[-1]["argv"] == ["sh", "-c", "exit 3"]
    assert execs[-1]["exit_code"] == 3 and execs[-1]["token"] == ""
    with pytest.raises(paddock.InvalidArgument):
        client.audit(since="yesterday-ish")
    text = client.metrics()
    assert "# TYPE" in text and "paddock" in text


# --------------------------------------------------------------------------- packaging


def _pythons():
    """Other interpreters on this machine (pyenv's 3.9 to 3.13), to run the SDK under."""
    base = "/root/.pyenv/versions"
    found = {}
    try:
        for v in sorted(os.listdir(base)):
            parts = v.split(".")
            if len(parts) >= 2 and parts[0] == "3" and parts[1].isdigit() and \
                    int(parts[1]) >= 9 and os.access(os.path.join(base, v, "bin", "python3"),
                                                     os.X_OK):
                found["3." + parts[1]] = os.path.join(base, v, "bin", "python3")
    except OSError:
        pass
    return found


PYTHONS = _pythons()


@pytest.mark.parametrize("version", ["3.9", "3.10", "3.11", "3.12", "3.13"])
def test_works_on_other_pythons(client, sdk_daemon, name, version, tmp_path):
    if version not in PYTHONS:
        pytest.skip("no Python %s on this machine" % version)
    script = r"""
import os, sys
sys.path.insert(0, %r)
import paddock, paddock.tools
c = paddock.Paddock(socket=%r)
with c.envs.create(%r) as env:
    assert env.exec("echo hi").text == "hi\n"
    with env.exec_stream("echo s") as s:
        assert [d for _, d in s] == [b"s\n"]
    with env.pty(["sh", "-c", "echo t; exit 3"]) as t:
        assert t.wait(timeout=20) == 3
    env.files.write("/tmp/x", "y")
    assert env.files.read("/tmp/x") == b"y"
    src, dst = %r, %r
    os.makedirs(os.path.join(src, "a"))
    open(os.path.join(src, "a", "f"), "w").write("data")
    os.symlink("/etc/hostname", os.path.join(src, "abs-link"))
    env.files.upload(src, "/tmp/up")
    assert env.files.download("/tmp/up", dst) == 3
    assert open(os.path.join(dst, "a", "f")).read() == "data"
    assert os.readlink(os.path.join(dst, "abs-link")) == "/etc/hostname"
    assert len(paddock.tools.make_tools(c)) == 12
print("ok")
""" % (SDK, sdk_daemon.sock, name, str(tmp_path / "src"), str(tmp_path / "dst"))
    p = subprocess.run([PYTHONS[version], "-W", "error::DeprecationWarning", "-c", script],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0 and p.stdout == b"ok\n", p.stderr.decode()


def test_pip_installs_it_offline(sdk_daemon):
    tgt = tempfile.mkdtemp(prefix="paddock-sdk-pip-", dir="/var/tmp")
    work = tempfile.mkdtemp(prefix="paddock-sdk-src-", dir="/var/tmp")
    try:
        src = os.path.join(work, "python")  # a copy: building leaves egg-info behind
        shutil.copytree(SDK, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                                "build"))
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
                            "--no-build-isolation", "--no-deps", "--target", tgt, src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        assert p.returncode == 0, p.stdout.decode()
        check = ("import paddock, paddock.tools; print(paddock.__file__); "
                 "print(paddock.Paddock(socket=%r).system()['version'])" % sdk_daemon.sock)
        p = subprocess.run([sys.executable, "-c", check], cwd="/", env=dict(
            os.environ, PYTHONPATH=tgt), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.returncode == 0, p.stderr.decode()
        where, version = p.stdout.decode().split()
        assert where.startswith(tgt) and version
        # the virtualenv way of docs/sdk-python.md
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       check=True, timeout=120)
        p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet",
                            "--no-index", "--no-build-isolation", src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        assert p.returncode == 0, p.stdout.decode()
        p = subprocess.run([os.path.join(venv, "bin", "python"), "-c", check], cwd="/",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.returncode == 0, p.stderr.decode()
        assert p.stdout.decode().split()[0].startswith(venv)
    finally:
        shutil.rmtree(tgt, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def _tar(members):
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, data in members:
            ti = tarfile.TarInfo(name)
            if kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            elif kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            else:
                ti.size, ti.mode = len(data), 0o4755
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def test_download_never_writes_outside_the_directory(canned, tmp_path):
    path, h = canned
    outside = tmp_path / "outside"
    outside.mkdir()
    c = paddock.Paddock(socket=path)
    env = paddock.Env(c, {"name": "x"})
    cases = {
        "through-symlink": [("d", "dir", None), ("d/evil", "sym", str(outside)),
                            ("d/evil/pwned", "file", b"x")],
        "dotdot": [("d", "dir", None), ("d/../../pwned", "file", b"x")],
    }
    for case, members in cases.items():
        h.answers = {"/v1/envs/x/archive": (200, _tar(members), {}, False)}
        dst = tmp_path / ("dst-" + case)
        with pytest.raises(paddock.ProtocolError):
            env.files.download("/d", str(dst))
        assert list(outside.iterdir()) == [], case
        assert not (tmp_path / "pwned").exists()
    # an ordinary archive: set-id bits are dropped
    h.answers = {"/v1/envs/x/archive": (200, _tar([("d", "dir", None),
                                                   ("d/run", "file", b"#!/bin/sh\n")]),
                                        {}, False)}
    assert env.files.download("/d", str(tmp_path / "ok")) == 1
    assert (tmp_path / "ok" / "run").stat().st_mode & 0o7777 == 0o755
