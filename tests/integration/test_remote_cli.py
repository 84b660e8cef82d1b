"""The CLI against a remote daemon: `paddock --host https://HOST:PORT` for every kind of verb
(plain calls, exec with its streams and exit codes, a terminal session over the WebSocket, cp
both ways, watch's stream, image ls), and the checks of the server's certificate: a pinned
fingerprint, trust on first use with the known_hosts file, a CA file with its host name check,
and plain http:// only to a loopback address.

The TLS side is tls_front.TLSFront, a TLS-terminating proxy to the test daemon's unix socket;
paddockd's own gateway (`--listen`) can take its place (it needs `url`, `fingerprint`, `heads`
and `set_cert`)."""
import hashlib
import os
import pty
import re
import shutil
import stat
import subprocess
import tempfile
import threading

import pytest

from conftest import PADDOCK, wait_for
from test_shell import Tmux, pane_cmd
from tls_front import TLSFront, make_ca, make_self_signed, make_signed


@pytest.fixture
def certs():
    d = tempfile.mkdtemp(prefix="paddock-it-tls-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fronts(daemon, certs):
    """Factory of TLS fronts to the test daemon; all closed at the end."""
    made = []

    def make(cert=None, **kw):
        if cert is None and not kw.get("plain"):
            cert = make_self_signed(certs, "server%d" % len(made))
        f = TLSFront(daemon.sock, cert, **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


@pytest.fixture
def front(fronts):
    return fronts()


def run(*args, home, input=None, env=None, stdin=None, timeout=120):
    """The paddock CLI with a clean environment: no PADDOCK_* variables but env's, and
    XDG_CONFIG_HOME=home (where known_hosts is)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
    e["XDG_CONFIG_HOME"] = home
    e.update(env or {})
    if isinstance(input, str):
        input = input.encode()
    if stdin is None and input is None:
        stdin = subprocess.DEVNULL
    p = subprocess.run([PADDOCK] + [str(a) for a in args], input=input, stdin=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=e)
    p.out = p.stdout.decode(errors="replace")
    p.err = p.stderr.decode(errors="replace")
    return p


def remote(front, *args, home, pin=True, check=True, **kw):
    pinned = ["--fingerprint", front.fingerprint] if pin else []
    p = run("--host", front.url, *pinned, *args, home=home, **kw)
    if check and p.returncode != 0:
        raise AssertionError("paddock %s exited %d\nstdout: %s\nstderr: %s"
                             % (" ".join(map(str, args)), p.returncode, p.out, p.err))
    return p


@pytest.fixture
def home(certs):
    d = os.path.join(certs, "config")
    os.mkdir(d, 0o700)
    return d


def known_hosts(home):
    return os.path.join(home, "paddock", "known_hosts")


# ------------------------------------------------------------------------- verbs over TLS


def test_verbs_over_tls(daemon, front, home, image_dir):
    assert remote(front, "create", "r1", home=home).out.strip() == "r1"
    assert re.search(r"^r1\s+sandbox\s+running", remote(front, "ls", home=home).out, re.M)
    p = remote(front, "exec", "r1", "--", "sh", "-c", "echo out; echo err >&2; exit 3",
               home=home, check=False)
    assert (p.returncode, p.out, p.err) == (3, "out\n", "err\n")
    assert remote(front, "exec", "r1", "--", "echo", "hi", home=home).out == "hi\n"
    # exec -i streams standard input up, the output down
    data = "".join("line %d\n" % i for i in range(20000))
    p = remote(front, "exec", "-i", "r1", "--", "wc", "-l", home=home, input=data)
    assert p.out.strip() == "20000"
    assert re.search(r"^base\b", remote(front, "image", "ls", home=home).out, re.M)
    # an image import streams a tar of the directory up
    assert remote(front, "image", "import", "rimg", image_dir, home=home).out.strip() == "rimg"
    assert re.search(r"^rimg\b", remote(front, "image", "ls", home=home).out, re.M)
    remote(front, "image", "rm", "rimg", home=home)
    # every request named the daemon by the URL's authority and went through the front
    assert front.heads and all("\r\nHost: %s\r\n" % front.authority in h for h in front.heads)
    assert not any("authorization:" in h.lower() for h in front.heads)  # no token given
    # errors come through as they do locally
    p = remote(front, "inspect", "nosuch", home=home, check=False)
    assert p.returncode == 1 and "nosuch" in p.err
    assert remote(front, "rm", "-f", "r1", home=home).out.strip() == "r1"


def test_cp_both_ways_and_watch(daemon, front, home, certs):
    remote(front, "create", "r2", home=home)
    big = os.path.join(certs, "big")
    with open(big, "wb") as f:
        f.write(os.urandom(6 << 20))
    remote(front, "cp", big, "r2:/tmp/big", home=home)
    assert daemon.sh("r2", "sha256sum /tmp/big").split()[0] == \
        hashlib.sha256(open(big, "rb").read()).hexdigest()
    back = os.path.join(certs, "back")
    remote(front, "cp", "r2:/tmp/big", back, home=home)
    assert open(back, "rb").read() == open(big, "rb").read()
    # a directory travels as tar, both ways
    daemon.sh("r2", "mkdir -p /tmp/d/sub && echo a > /tmp/d/a && echo b > /tmp/d/sub/b")
    out_dir = os.path.join(certs, "out")
    remote(front, "cp", "r2:/tmp/d", out_dir, home=home)
    assert open(os.path.join(out_dir, "sub", "b")).read() == "b\n"
    remote(front, "cp", out_dir, "r2:/tmp/d2", home=home)
    assert daemon.sh("r2", "cat /tmp/d2/a /tmp/d2/sub/b") == "a\nb\n"

    # watch: its NDJSON stream arrives through TLS as it happens
    e = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
    e["XDG_CONFIG_HOME"] = home
    w = subprocess.Popen([PADDOCK, "--host", front.url, "--fingerprint", front.fingerprint,
                          "watch", "r2", "/tmp"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(w.stdout.readline, b"")),
                              daemon=True)
    reader.start()
    try:
        n = [0]

        def touched():
            n[0] += 1
            daemon.sh("r2", "echo x > /tmp/w%d" % n[0])
            return any(re.match(rb"create /tmp/w\d+$", l.strip()) for l in lines)

        wait_for(touched, timeout=20, interval=0.3, what="a create event from watch")
    finally:
        w.kill()  # only the process started here
        w.wait(10)
        reader.join(10)


def test_shell_over_tls_from_the_environment_variables(daemon, front, home):
    remote(front, "create", "--computer", "r3", home=home)
    t = Tmux(daemon)
    t.env.pop("PADDOCK_SOCKET", None)
    t.env.update(PADDOCK_HOST=front.url, PADDOCK_FINGERPRINT=front.fingerprint,
                 XDG_CONFIG_HOME=home)
    try:
        t.start(pane_cmd('"$PADDOCK" shell r3'))
        t.wait_for(r"# $|# \s*$")
        t.line("echo hi $((40+2)) size=$(stty size)")
        t.wait_for(r"\nhi 42 size=30 100")
        t.tmux("resize-window", "-t", "main", "-x", "90", "-y", "25")
        t.line("echo size2=$(stty size)")
        t.wait_for(r"size2=25 90")
        # a burst of output larger than one TLS record, all of it arrives
        t.line("seq 1 30000 | tail -n 1; echo done-$((6*7))")
        t.wait_for(r"\n30000\s+done-42")
        t.line("exit 5")
        t.wait_for(r"EXIT=5")
    finally:
        t.kill()


def test_environment_variables_token_and_socket_precedence(daemon, front, home):
    env = {"PADDOCK_HOST": front.url, "PADDOCK_FINGERPRINT": front.fingerprint,
           "PADDOCK_TOKEN": "pdk_fromtheenvironment"}
    p = run("ls", home=home, env=env)
    assert p.returncode == 0, p.err
    assert "\r\nAuthorization: Bearer pdk_fromtheenvironment\r\n" in front.heads[-1]
    # options win over the variables
    p = run("--token", "pdk_fromtheoption", "ls", home=home, env=env)
    assert p.returncode == 0, p.err
    assert "\r\nAuthorization: Bearer pdk_fromtheoption\r\n" in front.heads[-1]
    p = run("--fingerprint", "sha256:" + ":".join(["00"] * 32), "ls", home=home, env=env)
    assert p.returncode == 2 and "REFUSING" in p.err
    # --socket on the command line picks the local daemon over PADDOCK_HOST
    n = len(front.heads)
    p = run("--socket", daemon.sock, "ls", home=home,
            env={"PADDOCK_HOST": "https://127.0.0.1:1"})
    assert p.returncode == 0, p.err
    assert len(front.heads) == n
    # and --host unix:///PATH is the unix socket
    assert run("--host", "unix://" + daemon.sock, "ls", home=home).returncode == 0
    p = run("--host", front.url, "--socket", daemon.sock, "ls", home=home)
    assert p.returncode != 0 and "not both" in p.err


# ------------------------------------------------------------------ the server's identity


def test_wrong_fingerprint_is_refused_before_anything_is_sent(daemon, front, home):
    wrong = "sha256:" + ":".join(["AB"] * 32)
    p = run("--host", front.url, "--fingerprint", wrong, "ls", home=home)
    assert p.returncode == 2
    assert "REFUSING %s" % front.authority in p.err
    assert wrong in p.err and front.fingerprint in p.err
    assert front.heads == []  # not even the request line went out
    assert not os.path.exists(known_hosts(home))
    # also for a terminal session's WebSocket and an upload
    daemon.create("r4")
    assert run("--host", front.url, "--fingerprint", wrong, "exec", "-i", "r4", "--", "cat",
               home=home, input="x").returncode == 2
    assert front.heads == []
    # the fingerprint may be given without colons and in lower case
    fp = front.fingerprint[len("sha256:"):].replace(":", "").lower()
    assert run("--host", front.url, "--fingerprint", fp, "ls", home=home).returncode == 0
    p = run("--host", front.url, "--fingerprint", "sha256:12:34", "ls", home=home)
    assert p.returncode == 2 and "--fingerprint" in p.err


def test_trust_on_first_use(daemon, fronts, certs, home):
    front = fronts()
    kh = known_hosts(home)
    # first contact, no terminal, no --trust-new: refused, the fingerprint shown, nothing kept
    p = remote(front, "ls", home=home, pin=False, check=False)
    assert p.returncode == 2, p.err
    assert front.fingerprint in p.err and "--trust-new" in p.err
    assert not os.path.exists(kh) and front.heads == []
    # --trust-new stores it (and says what it stored), then it is simply known
    p = remote(front, "--trust-new", "ls", home=home, pin=False)
    assert "stored %s %s" % (front.authority, front.fingerprint) in p.err
    assert open(kh).read() == "%s %s\n" % (front.authority, front.fingerprint)
    assert stat.S_IMODE(os.stat(kh).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(kh)).st_mode) == 0o700
    p = remote(front, "ls", home=home, pin=False)
    assert p.err == ""
    # a changed certificate on the same HOST:PORT is refused loudly, naming the file
    front.set_cert(make_self_signed(certs, "other"))
    sent = len(front.heads)
    p = remote(front, "ls", home=home, pin=False, check=False)
    assert p.returncode == 2
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in p.err
    assert kh in p.err and front.fingerprint in p.err
    assert len(front.heads) == sent
    p = remote(front, "--trust-new", "ls", home=home, pin=False, check=False)
    assert p.returncode == 2  # --trust-new is for new hosts, never for changed ones
    # PADDOCK_TRUST_NEW=1 does what --trust-new does
    other = fronts()
    p = run("--host", other.url, "ls", home=home, env={"PADDOCK_TRUST_NEW": "1"})
    assert p.returncode == 0 and "stored %s" % other.authority in p.err
    # a known_hosts file others may write is not believed
    os.chmod(kh, 0o666)
    p = run("--host", other.url, "ls", home=home)
    assert p.returncode == 2 and "chmod 600" in p.err
    os.chmod(kh, 0o600)


def test_trust_on_first_use_asks_on_a_terminal(daemon, fronts, home):
    for answer, code in (("no", 2), ("yes", 0)):
        front = fronts()
        master, slave = pty.openpty()
        try:
            os.write(master, answer.encode() + b"\n")
            p = run("--host", front.url, "ls", home=home, stdin=slave)
        finally:
            os.close(slave)
            os.close(master)
        assert p.returncode == code, p.err
        assert "(yes/no)" in p.err and front.fingerprint in p.err
        stored = os.path.exists(known_hosts(home)) and \
            front.authority in open(known_hosts(home)).read()
        assert stored == (answer == "yes")


def test_ca_file_and_host_name(daemon, fronts, certs, home):
    ca = make_ca(certs)
    front = fronts(make_signed(certs, "signed", ca, san="IP:127.0.0.1"))
    p = remote(front, "--ca-cert", ca[0], "ls", home=home, pin=False)
    assert p.err == ""
    assert not os.path.exists(known_hosts(home))  # a CA needs no trust on first use
    # the same certificate under another name: its host name does not match
    p = run("--host", "https://localhost:%d" % front.port, "--ca-cert", ca[0], "ls", home=home)
    assert p.returncode == 2 and "does not verify" in p.err, p.err
    # a certificate of another CA
    other = make_ca(certs, "otherca")
    p = run("--host", front.url, "--ca-cert", other[0], "ls", home=home)
    assert p.returncode == 2 and "does not verify" in p.err
    # with PADDOCK_CA_CERT too
    assert run("--host", front.url, "ls", home=home,
               env={"PADDOCK_CA_CERT": ca[0]}).returncode == 0
    assert front.heads and len(front.heads) == 2


def test_host_urls_and_plain_http(daemon, fronts, home):
    for url in ("http://10.1.2.3:8080", "http://localhost:8080", "http://[2001:db8::1]:80"):
        p = run("--host", url, "ls", home=home)
        assert p.returncode == 2 and "only allowed to a loopback address" in p.err, (url, p.err)
    for url, why in (("ftp://x:1", "https://HOST:PORT"), ("https://h:0", "port"),
                     ("https://h:1/path", "path"), ("https://a:b:1", "brackets"),
                     ("https://[::1:1", "unclosed")):
        p = run("--host", url, "ls", home=home)
        assert p.returncode == 2 and why in p.err, (url, p.err)
    # plain http to a loopback address works (and carries the token, as it must to reach a
    # local proxy)
    plain = fronts(plain=True)
    p = run("--host", plain.url, "--token", "pdk_x", "ls", home=home)
    assert p.returncode == 0, p.err
    assert "\r\nAuthorization: Bearer pdk_x\r\n" in plain.heads[-1]
    # IPv6 in brackets, when this machine has ::1
    try:
        v6 = fronts(host="::1")
    except OSError:
        return
    p = run("--host", v6.url, "--fingerprint", v6.fingerprint, "ls", home=home)
    assert p.returncode == 0, p.err
    assert "\r\nHost: [::1]:%d\r\n" % v6.port in v6.heads[-1]


def test_system_shows_the_fingerprint_and_a_token_goes_over_the_unix_socket(certs, home):
    """Against a stand-in daemon on a unix socket that answers GET /v1/system as a daemon with
    a TLS listener does, and records the requests' headers."""
    import http.server
    import json
    import socketserver

    fp = "sha256:" + ":".join(["5A"] * 32)
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(dict(self.headers))
            body = json.dumps({"version": "test", "gateway": {"tls_fingerprint": fp}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def address_string(self):
            return "unix"

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    sock = os.path.join(certs, "fake.sock")
    srv = Server(sock, Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        p = run("--socket", sock, "--token", "pdk_local", "system", home=home)
        assert p.returncode == 0, p.err
        assert "TLS fingerprint: %s\n" % fp in p.out
        assert seen[-1].get("Authorization") == "Bearer pdk_local"
        p = run("--socket", sock, "system", "--json", home=home)
        assert "TLS fingerprint:" not in p.out and json.loads(p.out)["gateway"]
        assert "Authorization" not in seen[-1]
    finally:
        srv.shutdown()
        srv.server_close()
