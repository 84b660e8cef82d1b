"""Network escapes. An environment with network mode none has loopback only. The egress
policies (none / allowlist / open-but-never-the-host, DNS-enforced allowlists, the host and
other environments unreachable) are tested in tests/integration/test_network.py, next to the
network set-up they need.

Registry destinations (docs/security.md): a pull connects only to public addresses unless
paddockd --allow-registry / --insecure-registry names the host -- the registry itself, its token
realm and every redirect target alike -- so an API client that may pull cannot use the daemon
to reach the host's private network.

Everything happens inside the test daemon's own network namespace: its loopback interface
holds private, link-local, CGNAT and ULA addresses and two from 203.0.113.0/24, a documentation
range the daemon counts as public (netaddr.h); fake_registry.py answers on all of them. A
"catch" port (5443) logs every TCP connection, so a refused destination is seen to get none.
No traffic leaves the namespace."""
import json
import os
import subprocess
import tempfile
import shutil
import signal

import pytest

from conftest import PADDOCKD, wait_for

KINDS = ["computer", "sandbox"]

HERE = os.path.dirname(os.path.abspath(__file__))
CATCH = 5443
ADDRS = ["10.99.0.1/32", "172.16.99.1/32", "169.254.169.254/32", "100.64.99.1/32",
         "203.0.113.7/32", "203.0.113.8/32", "fd99::1/128"]
SERVERS = [
    {"port": CATCH, "mode": "catch"},
    {"port": 5000, "mode": "registry"},
    {"port": 5001, "mode": "registry", "redirect": "https://10.99.0.1:%d" % CATCH},
    {"port": 5002, "mode": "registry", "redirect": "https://203.0.113.8:%d" % CATCH},
    {"port": 5003, "mode": "registry", "realm": "https://10.99.0.1:%d/token" % CATCH},
    {"port": 5004, "mode": "registry", "realm": "http://10.99.0.1:5000/token"},
    {"port": 5005, "mode": "registry", "realm": "http://203.0.113.7:5005/token",
     "redirect": "http://203.0.113.7:5005"},
    {"port": 5006, "mode": "registry", "realm": "http://203.0.113.7:5006/token",
     "redirect": "http://203.0.113.8:5006"},
    {"port": 5007, "mode": "registry", "redirect": "http://10.99.0.1:5000"},
]
# Plain http to the "public" fake registries; nothing private is allowed.
PUBLIC_ARGS = ["--insecure-registry", "203.0.113.7", "--insecure-registry", "203.0.113.8:5006"]


class Fakes:
    def __init__(self, daemon):
        self.daemon = daemon
        self.dir = tempfile.mkdtemp(prefix="paddock-it-ssrf-", dir="/var/tmp")
        self.log = os.path.join(self.dir, "log")
        ns = daemon.netns
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        for a in ADDRS:
            subprocess.run(["ip", "-n", ns, "addr", "add", a, "dev", "lo"]
                           + (["nodad"] if ":" in a else []), check=True)
        cfg = os.path.join(self.dir, "config.json")
        with open(cfg, "w") as f:
            json.dump(SERVERS, f)
        out = open(os.path.join(self.dir, "out"), "wb")
        self.proc = subprocess.Popen(["nsenter", "--net=" + daemon.netns_path, "/usr/bin/python3",
                                      os.path.join(HERE, "fake_registry.py"), self.log, cfg],
                                     stdout=out, stderr=out)
        out.close()
        wait_for(lambda: "ready" in self.lines(), timeout=20, what="the fake registries")

    def lines(self):
        try:
            with open(self.log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def caught(self):
        return [l for l in self.lines() if l.startswith("%d connect" % CATCH)]

    def requests(self, port):
        return [l for l in self.lines() if l.startswith("%d GET" % port)]

    def close(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def fakes_for(make_daemon):
    made = []

    def make(*args):
        d = make_daemon(extra_args=list(args))
        made.append(Fakes(d))
        return d, made[-1]

    yield make
    for f in made:
        f.close()


def pull(daemon, ref, insecure=False):
    return daemon.api("POST", "/v1/images", {"pull": ref, "insecure": insecure})


def refused(r, role, hostport, cls, addr):
    want = ("%s %s resolves to a %s address (%s); paddockd --allow-registry %s allows it"
            % (role, hostport, cls, addr, hostport))
    return r.status == 403 and r.error() == ("forbidden", want)


def test_private_destinations_are_refused_by_default(fakes_for):
    daemon, fakes = fakes_for(*PUBLIC_ARGS)
    for host, cls, addr in [
        ("10.99.0.1", "private", "10.99.0.1"),
        ("172.16.99.1", "private", "172.16.99.1"),
        ("127.0.0.1", "loopback", "127.0.0.1"),
        ("169.254.169.254", "link-local", "169.254.169.254"),
        ("100.64.99.1", "shared (carrier-grade NAT)", "100.64.99.1"),
        ("0.0.0.0", 'unspecified ("this network")', "0.0.0.0"),
        ("[fd99::1]", "private", "fd99::1"),
        ("[::1]", "loopback", "::1"),
        ("[::ffff:10.99.0.1]", "private", "::ffff:10.99.0.1"),
        ("[::ffff:127.0.0.1]", "loopback", "::ffff:127.0.0.1"),
    ]:
        hostport = "%s:%d" % (host, CATCH)
        r = pull(daemon, hostport + "/t/img:1")
        assert refused(r, "registry", hostport, cls, addr), (host, r)
    # a name is judged by the address it resolves to (localhost: 127.0.0.1 and/or ::1)
    r = pull(daemon, "localhost:%d/t/img:1" % CATCH)
    assert r.status == 403 and "registry localhost:%d resolves to a loopback address" % CATCH \
        in r.error()[1], r
    assert fakes.caught() == []
    # plain http needs --insecure-registry, before anything is connected to
    r = pull(daemon, "10.99.0.1:5000/t/img:1", insecure=True)
    assert r.status == 400 and r.error() == (
        "invalid_argument",
        "insecure: plain http only to a registry named by paddockd --insecure-registry, "
        "not 10.99.0.1:5000"), r
    assert fakes.requests(5000) == []
    # the CLI shows the refusal
    p = daemon.cli("image", "pull", "10.99.0.1:%d/t/img:1" % CATCH, check=False)
    assert p.returncode == 1 and "paddockd --allow-registry 10.99.0.1:%d allows it" % CATCH \
        in p.err, p.err
    assert fakes.caught() == []
    assert daemon.api("GET", "/v1/images").json["images"][0]["name"] == "base"


def test_public_registry_redirects_and_tokens(fakes_for):
    """203.0.113.0/24 counts as public: pulls work; redirects are followed hop by hop and the
    token goes to the registry's own origin only."""
    daemon, fakes = fakes_for(*PUBLIC_ARGS)
    r = pull(daemon, "203.0.113.7:5000/t/img:1", insecure=True)
    assert r.status == 201, r
    with open(os.path.join(daemon.root, "images", "img-1", "rootfs", "etc", "ssrf-test")) as f:
        assert f.read() == "pulled\n"
    # token realm and a redirect on the same origin: the token goes along
    r = pull(daemon, "203.0.113.7:5005/t/auth:1", insecure=True)
    assert r.status == 201, r
    log = fakes.requests(5005)
    assert any(l.startswith("5005 GET /token?") for l in log), log
    assert any("/storage/" in l and "auth=Bearer tok" in l for l in log), log
    # a redirect to another host (allowed, plain http): the token stays behind
    r = pull(daemon, "203.0.113.7:5006/t/other:1", insecure=True)
    assert r.status == 201, r
    storage = [l for l in fakes.requests(5006) if "/storage/" in l]
    assert storage and all("auth=- host=203.0.113.8:5006" in l for l in storage), storage
    # a redirect to a public https host is followed (TLS then fails: nothing speaks it)
    r = pull(daemon, "203.0.113.7:5002/t/tls:1", insecure=True)
    assert r.status != 201 and r.status != 403, r
    assert any("203.0.113.8" in l for l in fakes.caught()), fakes.lines()


def test_redirect_to_a_private_address_is_refused(fakes_for):
    daemon, fakes = fakes_for(*PUBLIC_ARGS)
    r = pull(daemon, "203.0.113.7:5001/t/img:1", insecure=True)
    assert refused(r, "redirect target", "10.99.0.1:%d" % CATCH, "private", "10.99.0.1"), r
    assert any("/blobs/sha256:" in l for l in fakes.requests(5001)), fakes.lines()
    # a plain-http redirect to a host that is not an insecure registry
    r = pull(daemon, "203.0.113.7:5007/t/img:1", insecure=True)
    assert r.status == 403 and r.error()[1] == (
        "redirect target 10.99.0.1:5000: plain http only to a registry named by paddockd "
        "--insecure-registry 10.99.0.1:5000"), r
    assert fakes.requests(5000) == [] and fakes.caught() == []
    assert daemon.api("GET", "/v1/images").json["images"][0]["name"] == "base"


def test_token_realm_on_a_private_address_is_refused(fakes_for):
    daemon, fakes = fakes_for(*PUBLIC_ARGS)
    r = pull(daemon, "203.0.113.7:5003/t/img:1", insecure=True)
    assert refused(r, "token realm", "10.99.0.1:%d" % CATCH, "private", "10.99.0.1"), r
    r = pull(daemon, "203.0.113.7:5004/t/img:1", insecure=True)
    assert r.status == 403 and "token realm 10.99.0.1:5000: plain http only" in r.error()[1], r
    assert fakes.requests(5000) == [] and fakes.caught() == []


def test_allowed_registries_may_use_any_address(fakes_for):
    daemon, fakes = fakes_for("--allow-registry", "10.99.0.1", "--allow-registry", "localhost",
                              "--insecure-registry", "172.16.99.1:5000")
    # allowed, over https (which nothing here speaks: the connection is what counts)
    r = pull(daemon, "10.99.0.1:%d/t/img:1" % CATCH)
    assert r.status != 403 and r.status != 201, r
    wait_for(lambda: any("10.99.0.1" in l for l in fakes.caught()), what="the connection")
    n = len(fakes.caught())
    r = pull(daemon, "localhost:%d/t/img:1" % CATCH)
    assert r.status != 403 and r.status != 201, r
    wait_for(lambda: len(fakes.caught()) > n, what="the connection to localhost")
    # --allow-registry is not --insecure-registry
    r = pull(daemon, "10.99.0.1:5000/t/img:1", insecure=True)
    assert r.status == 400 and "--insecure-registry" in r.error()[1], r
    # an insecure registry on a private address: a whole pull over plain http
    r = pull(daemon, "172.16.99.1:5000/t/img:1", insecure=True)
    assert r.status == 201, r
    # only the hosts named: 127.0.0.1 is not "localhost", 172.16.99.1 only on port 5000
    n = len(fakes.caught())
    r = pull(daemon, "127.0.0.1:%d/t/lo:1" % CATCH)
    assert refused(r, "registry", "127.0.0.1:%d" % CATCH, "loopback", "127.0.0.1"), r
    r = pull(daemon, "172.16.99.1:%d/t/priv:1" % CATCH)
    assert refused(r, "registry", "172.16.99.1:%d" % CATCH, "private", "172.16.99.1"), r
    assert len(fakes.caught()) == n


def test_bad_registry_flags_are_refused_at_start():
    for flag, value in [("--allow-registry", "a/b"), ("--insecure-registry", ":5000"),
                        ("--allow-registry", "host:99999"), ("--allow-registry", "user@host")]:
        p = subprocess.run([PADDOCKD, flag, value, "--version"], capture_output=True, text=True)
        assert p.returncode != 0 and "use HOST[:PORT]" in p.stderr, (flag, value, p.stderr)


def create(daemon, name, kind, *opts):
    return daemon.create(name, "--" + kind, *opts)


@pytest.mark.parametrize("kind", KINDS)
def test_network_is_loopback_only_and_up(daemon, kind):
    """Mode none (the sandbox default; computers default to open) is loopback only."""
    create(daemon, "n1", kind, "--net", "none")
    dev = daemon.sh("n1", "cat /proc/net/dev")
    ifaces = [l.split(":")[0].strip() for l in dev.splitlines()[2:] if ":" in l]
    assert ifaces == ["lo"], dev
    link = daemon.sh("n1", "ip link")
    assert "lo:" in link and "UP" in link, link
    # loopback works: a TCP round trip on 127.0.0.1 inside the environment
    # The listener's input stays open a while (sleep 3) so it cannot finish before it has read the
    # connection; the client starts once /proc/net/tcp{,6} shows the port (0x3039) listening. On
    # failure the output shows the sockets and processes.
    out = daemon.sh("n1", "cd /tmp && (sleep 3 2>/dev/null | nc -l -p 12345 > got 2>/dev/null &) ; i=0; "
                          "while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -qE ':3039 0+:0000 0A' && "
                          "[ $i -lt 150 ]; do "
                          "sleep 0.1; i=$((i+1)); done; "
                          "i=0; while [ $i -lt 50 ]; do echo ping | nc 127.0.0.1 12345 && break; "
                          "i=$((i+1)); sleep 0.1; done; "
                          "i=0; while [ ! -s got ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; "
                          "cat got; [ -s got ] || { echo NO-DATA; cat /proc/net/tcp /proc/net/tcp6; ps; }")
    assert out == "ping\n", out
