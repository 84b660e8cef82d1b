"""The network gateway: `paddockd --listen` serves the API over TLS through an unprivileged
process (paddock-gateway) that hands each connection to the engine.

What a user would notice: the certificate the TLS server presents is the one GET /v1/system
and the log name (and it stays the same across restarts); requests without a token are refused;
IPv6 works; plain HTTP is refused on anything but loopback; the process that faces the network
is not root, has no capabilities, no_new_privs and a seccomp filter, and cannot read the state
database or the TLS key; when it dies the daemon starts it again; and the local unix socket
works as before. Every daemon runs in its own network namespace (loopback up), so the port is
always free."""
import array
import ctypes
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile

import pytest

from conftest import (GATEWAY_PORT, PADDOCKD, TLSConnection, cert_fingerprint, gateway_info,
                      netns_socket, proc_status, tls_request, wait_for)

PORT = GATEWAY_PORT
GATEWAY_FALLBACK_ID = 2147483632  # gateway.h: above every environment's id range


def gateway_pids(daemon):
    """Children of the daemon that run paddock-gateway."""
    pids = []
    for t in os.listdir("/proc/%d/task" % daemon.pid):
        try:
            with open("/proc/%d/task/%s/children" % (daemon.pid, t)) as f:
                kids = [int(p) for p in f.read().split()]
        except OSError:
            continue
        for k in kids:
            try:
                with open("/proc/%d/comm" % k) as f:
                    if f.read().strip() == "paddock-gateway":
                        pids.append(k)
            except OSError:
                pass
    return pids


def gateway_pid(daemon, other_than=None):
    def one():
        p = [x for x in gateway_pids(daemon) if x != other_than]
        return p[0] if len(p) == 1 else None
    return wait_for(one, timeout=15, what="the gateway process")


def make_token(daemon, name, admin=True, **fields):
    """A token's secret, once the token store exists (POST /v1/tokens); None before."""
    r = daemon.api("POST", "/v1/tokens", body=dict(fields, name=name, admin=admin))
    if r.status == 404:
        return None
    assert r.status in (200, 201), r
    j = r.json
    return j.get("secret") or j.get("token")


def assert_refused_without_token(r):
    assert r.status == 401, r
    code, msg = r.error()
    assert code == "unauthorized", r
    assert "token" in msg.lower(), r


def test_tls_round_trip_pinned_to_the_reported_fingerprint(gateway_daemon):
    d = gateway_daemon
    gw = gateway_info(d)
    assert gw["listen"] == ["127.0.0.1:%d" % PORT, "[::1]:%d" % PORT]
    assert gw["listen_plain"] == ["127.0.0.1:%d" % (PORT + 1)]
    fp = gw["tls_fingerprint"]
    assert re.fullmatch(r"sha256(:[0-9A-F]{2}){32}", fp), fp
    # the log names it, and it is the certificate kept in the state directory
    assert "TLS fingerprint " + fp in d.log()
    with open(os.path.join(d.root, "tls", "cert.pem")) as f:
        assert cert_fingerprint(ssl.PEM_cert_to_DER_cert(f.read())) == fp
    # the TLS server presents exactly that certificate
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, fp)
    c.connect()
    assert c.peer_fingerprint == fp
    c.close()
    # a client pinned to another fingerprint refuses the server
    other = "sha256:" + ":".join(["00"] * 32)
    with pytest.raises(ssl.SSLError):
        tls_request(d, "127.0.0.1", PORT, "GET", "/v1/envs", fingerprint=other)
    # no token, a wrong token: refused; the unix socket still answers as before
    assert_refused_without_token(tls_request(d, "127.0.0.1", PORT, "GET", "/v1/envs"))
    assert_refused_without_token(tls_request(d, "127.0.0.1", PORT, "GET", "/v1/envs",
                                             token="pdk_" + "A" * 43))
    assert d.api("GET", "/v1/envs").status == 200
    d.create("local1", "--sandbox")
    assert d.exec("local1", ["echo", "hi"])["stdout"] == "hi\n"
    # with a token (once the token store exists): a real round trip, keep-alive
    secret = make_token(d, "gw-admin")
    if secret is None:
        return
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, fp)
    try:
        for _ in range(3):
            c.request("POST", "/v1/envs/local1/exec", body=json.dumps({"cmd": ["echo", "tls"]}),
                      headers={"Authorization": "Bearer " + secret,
                               "Content-Type": "application/json"})
            r = c.getresponse()
            body = r.read()
            assert r.status == 200, body
            assert json.loads(body)["stdout"] == "tls\n"
    finally:
        c.close()


def test_tokens_over_tls(gateway_daemon):
    """Agents through the network: each sees only its own environments, a rate limit answers
    429 with Retry-After, a revoked token's keep-alive connection gets no further answer, and
    the engine itself refuses a token the gateway does not know either."""
    d = gateway_daemon
    a = make_token(d, "agent-a", admin=False)
    if a is None:
        pytest.skip("no token store in this build")
    b = make_token(d, "agent-b", admin=False)
    slow = make_token(d, "agent-slow", admin=False, rate="2/s")

    def req(method, path, token, body=None):
        return tls_request(d, "127.0.0.1", PORT, method, path, body=body, token=token)
    r = req("POST", "/v1/envs", a, {"name": "of-a", "kind": "sandbox"})
    assert r.status in (200, 201), r
    assert req("POST", "/v1/envs/of-a/exec", a, {"cmd": ["echo", "a"]}).json["stdout"] == "a\n"
    assert [e["name"] for e in req("GET", "/v1/envs", b).json["envs"]] == []
    r = req("GET", "/v1/envs/of-a", b)
    assert r.status == 404 and r.error()[0] == "not_found", r
    assert req("POST", "/v1/envs/of-a/exec", b, {"cmd": ["true"]}).status == 404
    # the administrator (local socket) sees it, owned by agent-a
    assert "of-a" in d.envs()
    # rate limit: 2/s, burst 2
    statuses = []
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, gateway_info(d)["tls_fingerprint"])
    try:
        for _ in range(8):
            c.request("GET", "/v1/envs", headers={"Authorization": "Bearer " + slow})
            resp = c.getresponse()
            resp.read()
            statuses.append((resp.status, resp.getheader("Retry-After")))
            if resp.will_close:
                c.close()
    finally:
        c.close()
    limited = [ra for st, ra in statuses if st == 429]
    assert limited and all(ra and int(ra) >= 1 for ra in limited), statuses
    assert statuses[0][0] == 200, statuses
    # revocation: a keep-alive connection of b gets no further success
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, gateway_info(d)["tls_fingerprint"])
    try:
        c.request("GET", "/v1/envs", headers={"Authorization": "Bearer " + b})
        resp = c.getresponse()
        resp.read()
        assert resp.status == 200
        assert d.api("DELETE", "/v1/tokens/agent-b").status in (200, 204)
        try:
            c.request("GET", "/v1/envs", headers={"Authorization": "Bearer " + b})
            resp = c.getresponse()
            resp.read()
            assert resp.status == 401, resp.status
        except (ConnectionError, http.client.HTTPException, ssl.SSLError, OSError):
            pass  # closed at once: just as good
    finally:
        c.close()
    assert_refused_without_token(req("GET", "/v1/envs", b))
    assert req("DELETE", "/v1/envs/of-a?force=1", a).status in (200, 204)


def test_plain_listener_and_ipv6(gateway_daemon):
    d = gateway_daemon
    r = tls_request(d, "::1", PORT, "GET", "/v1/envs")
    assert_refused_without_token(r)
    c = TLSConnection(d.netns_path, "::1", PORT, gateway_info(d)["tls_fingerprint"])
    c.connect()
    c.close()
    # plain HTTP on loopback when asked for explicitly: the same answers
    assert_refused_without_token(tls_request(d, "127.0.0.1", PORT + 1, "GET", "/v1/envs",
                                             tls=False))


def test_certificate_persists_across_restarts(gateway_daemon):
    d = gateway_daemon
    fp = gateway_info(d)["tls_fingerprint"]
    tls = os.path.join(d.root, "tls")
    assert os.stat(tls).st_mode & 0o777 == 0o700
    assert os.stat(os.path.join(tls, "key.pem")).st_mode & 0o777 == 0o600
    d.restart()
    assert gateway_info(d)["tls_fingerprint"] == fp
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, fp)
    c.connect()
    c.close()
    # after a kill -9 too
    d.restart(kill=True)
    assert gateway_info(d)["tls_fingerprint"] == fp
    assert_refused_without_token(tls_request(d, "127.0.0.1", PORT, "GET", "/v1/system"))


def openssl_cert(d, name):
    """A self-signed P-256 certificate and its key, made by openssl (not by paddockd)."""
    cert, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "2", "-subj", "/CN=" + name], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return cert, key


def test_given_certificate_is_served_and_a_wrong_key_refused(make_daemon):
    tmp = tempfile.mkdtemp(prefix="paddock-it-gwcert-", dir="/var/tmp")
    try:
        cert, key = openssl_cert(tmp, "given")
        _, other_key = openssl_cert(tmp, "other")
        with open(cert) as f:
            fp = cert_fingerprint(ssl.PEM_cert_to_DER_cert(f.read()))
        # a key that does not belong to the certificate: refused at start, with both names
        p = subprocess.run([PADDOCKD, "--root", os.path.join(tmp, "root"), "--socket",
                            os.path.join(tmp, "s.sock"), "--listen", "127.0.0.1:%d" % PORT,
                            "--tls-cert", cert, "--tls-key", other_key],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 1, p
        err = p.stderr.decode()
        assert "TLS certificate" in err and cert in err and other_key in err, err
        d = make_daemon(loopback=True, extra_args=["--listen", "127.0.0.1:%d" % PORT,
                                                   "--tls-cert", cert, "--tls-key", key])
        assert gateway_info(d)["tls_fingerprint"] == fp
        c = TLSConnection(d.netns_path, "127.0.0.1", PORT, fp)
        c.connect()
        c.close()
        assert not os.path.exists(os.path.join(d.root, "tls"))  # none made
    finally:
        subprocess.run(["rm", "-rf", tmp])


def test_no_listen_no_gateway(daemon):
    assert gateway_info(daemon) is None
    assert gateway_pids(daemon) == []
    assert not os.path.exists(os.path.join(daemon.root, "tls"))


@pytest.mark.parametrize("args,message", [
    (["--listen-plain", "0.0.0.0:8080"], "plain HTTP only on a loopback address"),
    (["--listen-plain", "[::]:8080"], "plain HTTP only on a loopback address"),
    (["--listen-plain", "10.1.2.3:8080"], "plain HTTP only on a loopback address"),
    (["--listen", "localhost:8443"], "is not an IPv4 address"),
    (["--listen", "::1:8443"], "use ADDR:PORT"),
    (["--listen", "[::1]8443"], "[ADDR]:PORT"),
    (["--listen", "127.0.0.1:0"], "the port must be a number from 1 to 65535"),
    (["--listen", "127.0.0.1:65536"], "the port must be a number from 1 to 65535"),
    (["--listen", "127.0.0.1:+80"], "the port must be a number from 1 to 65535"),
    (["--listen", "[fe80::1%eth0]:8443"], "is not an IPv6 address"),
    (["--listen", "127.0.0.1:8443", "--tls-cert", "/nonexistent"], "go together"),
    (["--gateway-user", "nobody"], "need --listen"),
])
def test_bad_listen_options_are_refused(args, message):
    tmp = tempfile.mkdtemp(prefix="paddock-it-gw-", dir="/var/tmp")
    try:
        p = subprocess.run([PADDOCKD, "--root", os.path.join(tmp, "root"), "--socket",
                            os.path.join(tmp, "s.sock")] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert p.returncode == 2, (p.returncode, p.stderr)
        assert message in p.stderr.decode(), p.stderr
        assert not os.path.exists(os.path.join(tmp, "root"))  # refused before touching state
    finally:
        subprocess.run(["rm", "-rf", tmp])


def test_gateway_runs_unprivileged_and_confined(gateway_daemon):
    d = gateway_daemon
    pid = gateway_pid(d)
    st = wait_for(lambda: (lambda s: s if s["Seccomp"] == "2" else None)(proc_status(pid)),
                  what="the gateway's seccomp filter")
    uid = int(st["Uid"].split()[0])
    gid = int(st["Gid"].split()[0])
    assert uid != 0 and gid != 0
    assert st["Uid"].split() == [str(uid)] * 4 and st["Gid"].split() == [str(gid)] * 4
    assert st["Groups"] == ""
    try:
        import pwd
        expected = pwd.getpwnam("paddock-gateway").pw_uid
    except KeyError:
        expected = GATEWAY_FALLBACK_ID
    assert uid == expected
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["NoNewPrivs"] == "1"
    # its own session, no terminal, stdin /dev/null
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    assert int(fields[3]) == pid  # session id
    assert os.readlink("/proc/%d/fd/0" % pid) == "/dev/null"
    # the fds it holds: sockets, stdio; nothing of the state directory
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        assert not target.startswith(d.root), (fd, target)
    # as its uid: neither the database, nor the key, nor the state directory's listing
    def as_gateway(*argv):
        return subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(gid),
                               "--clear-groups", "--"] + list(argv),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for path in ("paddock.db", "tls/key.pem", "tls/cert.pem"):
        p = as_gateway("cat", os.path.join(d.root, path))
        assert p.returncode != 0 and b"Permission denied" in p.stderr, (path, p)
    p = as_gateway("ls", d.root)
    assert p.returncode != 0 and b"Permission denied" in p.stderr, p
    # control: the same command as root reads the database
    assert subprocess.run(["cat", os.path.join(d.root, "paddock.db")],
                          stdout=subprocess.DEVNULL).returncode == 0


def test_killed_gateway_is_restarted(gateway_daemon):
    d = gateway_daemon
    fp = gateway_info(d)["tls_fingerprint"]
    old = gateway_pid(d)
    os.kill(old, signal.SIGKILL)
    new = gateway_pid(d, other_than=old)
    assert new != old
    assert "gateway: killed by signal 9" in d.log()
    # TLS works again (the listening sockets stayed open: no client sees a refusal window)
    assert_refused_without_token(tls_request(d, "127.0.0.1", PORT, "GET", "/v1/envs"))
    assert_refused_without_token(tls_request(d, "::1", PORT, "GET", "/v1/envs"))
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, fp)
    c.connect()
    c.close()
    # and the daemon's own socket never stopped
    assert d.api("GET", "/v1/system").status == 200
    # the new gateway got the token table again (once the token store exists)
    secret = make_token(d, "after-restart")
    if secret is not None:
        old = gateway_pid(d)
        os.kill(old, signal.SIGKILL)
        gateway_pid(d, other_than=old)
        r = tls_request(d, "127.0.0.1", PORT, "GET", "/v1/envs", token=secret)
        assert r.status == 200, r


# --------------------------------------------------------------------------- the control socket

SYS_pidfd_open = 434
SYS_pidfd_getfd = 438


def steal_fd(pid, fd):
    """A copy of another process's fd (pidfd_getfd; we are root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_pidfd_open, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    try:
        n = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        return n
    finally:
        os.close(pidfd)


def control_fd(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        argv = f.read().split(b"\0")
    return int(argv[argv.index(b"--control") + 1])


def test_engine_rejects_bad_control_messages(gateway_daemon):
    """What a compromised gateway could send on its control socket: garbage, an unknown op, a
    pipe or a TCP socket instead of its socketpair, two fds at once. The engine closes them,
    logs, and goes on serving."""
    d = gateway_daemon
    pid = gateway_pid(d)
    ctl = socket.socket(fileno=steal_fd(pid, control_fd(pid)))
    rp, wp = os.pipe()
    a, b = socket.socketpair()
    tcp = netns_socket(d.netns_path)
    lsn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsn.bind("\0paddock-it-gw-%d" % os.getpid())
    lsn.listen(1)
    try:
        def send(msg, fds=()):
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
            ctl.sendmsg([msg], anc)
        send(b"not json", [a.fileno()])
        send(b'{"op":"tokens","tokens":[]}')
        send(b'{"op":"connect","peer":"1.2.3.4:5"}', [rp])
        send(b'{"op":"connect","peer":"1.2.3.4:5"}', [tcp.fileno()])
        send(b'{"op":"connect","peer":"1.2.3.4:5"}', [a.fileno(), a.fileno()])
        send(b'{"op":"connect","peer":"<script>"}', [a.fileno()])
        send(b'{"op":"connect","peer":"1.2.3.4:5"}')
        send(b'{"op":"connect","peer":"1.2.3.4:5"}', [lsn.fileno()])
        wait_for(lambda: d.log().count("gateway: dropping a control message") >= 8,
                 what="eight dropped control messages")
        for why in ("not a JSON object", "unknown op", "not a socket", "not a unix socket",
                    "more than one fd", "bad peer", "no fd", "a listening socket"):
            assert "(%s," % why in d.log(), why
        # the engine closed every copy it got: our end of the socketpair sees no server
        a.close()
        b.settimeout(5)
        assert b.recv(1) == b""
        # a good message on the same socket is served (it speaks HTTP on the pair)
        e, g = socket.socketpair()
        send(b'{"op":"connect","peer":"127.0.0.1:1"}', [e.fileno()])
        e.close()
        g.settimeout(10)
        g.sendall(b"GET /v1/envs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        resp = b""
        while True:
            chunk = g.recv(65536)
            if not chunk:
                break
            resp += chunk
        g.close()
        assert resp.startswith(b"HTTP/1.1 401"), resp  # a gateway connection needs a token
        # the real gateway goes on working
        assert_refused_without_token(tls_request(d, "127.0.0.1", PORT, "GET", "/v1/envs"))
        assert d.api("GET", "/v1/system").status == 200
    finally:
        ctl.close()
        for fd in (rp, wp):
            os.close(fd)
        b.close()
        tcp.close()
        lsn.close()
