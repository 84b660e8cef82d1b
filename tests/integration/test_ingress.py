"""Preview URLs and published ports on the host's loopback (issue 10 item 3).

What a user would notice: a request to the gateway's listener whose Host is PORT-NAME.DOMAIN
reaches TCP port PORT of environment NAME (WebSocket-style upgrades relayed byte for byte),
with a token that may see the environment; an unknown, stopped or closed target answers 502 at
once; any other Host is the API as before; `paddock port url` prints the URL; and a published
port answers on 127.0.0.1 of the host too. Every daemon runs in its own network namespace
(loopback up); "the host" is that namespace."""
import http.client
import json
import socket
import time

import pytest

from conftest import GATEWAY_PORT, netns_socket, tls_request, wait_for

PLAIN = GATEWAY_PORT + 1
DOMAIN = "preview.test"


@pytest.fixture
def idaemon(make_daemon):
    """A daemon with a plain listener on 127.0.0.1 and --domain, in its own netns."""
    return make_daemon(loopback=True,
                       extra_args=["--listen-plain", "127.0.0.1:%d" % PLAIN, "--domain", DOMAIN])


def create(d, name, kind="computer", **extra):
    r = d.api("POST", "/v1/envs", dict({"name": name, "kind": kind}, **extra))
    assert r.status == 201, r
    return r.json


def start_httpd(d, env, port, text):
    """busybox httpd inside env on port, serving "hello from TEXT"."""
    d.sh(env, "mkdir -p /tmp/www%d && echo 'hello from %s' > /tmp/www%d/index.html && "
              "httpd -p %d -h /tmp/www%d </dev/null >/dev/null 2>&1" % (port, text, port, port, port))


def raw(d, data, port=PLAIN, timeout=10, until=None):
    """Send data to 127.0.0.1:port in the daemon's netns; read until EOF (or until the bytes
    `until` arrived). Returns the bytes read."""
    s = netns_socket(d.netns_path)
    try:
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        got = b""
        while until is None or until not in got:
            b = s.recv(65536)
            if not b:
                break
            got += b
        return got
    finally:
        s.close()


def test_published_port_answers_on_host_loopback(idaemon):
    d = idaemon
    create(d, "web")
    start_httpd(d, "web", 8000, "web")
    req = b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"
    with pytest.raises(OSError):
        raw(d, req, port=8085, timeout=3)  # nothing published yet: refused
    r = d.api("POST", "/v1/envs/web/ports", {"host_port": 8085, "port": 8000})
    assert r.status == 201, r
    out = raw(d, req, port=8085)
    assert out.startswith(b"HTTP/1.") and b"hello from web" in out, out
    r = d.api("DELETE", "/v1/envs/web/ports/8085?proto=tcp")
    assert r.status == 200, r
    with pytest.raises(OSError):
        raw(d, req, port=8085, timeout=3)


# --------------------------------------------------------------------------- preview URLs

UPGRADE_SERVER = r"""#!/bin/sh
# One connection: record the request head, answer 101, then echo every byte.
: > /tmp/head
while IFS= read -r line; do
  [ "${#line}" -le 1 ] && break
  echo "$line" >> /tmp/head
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n'
exec cat
"""


def token(d, name, admin):
    r = d.api("POST", "/v1/tokens", {"name": name, "admin": admin})
    assert r.status == 201, r
    return r.json.get("secret") or r.json["token"]


def host(port, env):
    return "%d-%s.%s:%d" % (port, env, DOMAIN, PLAIN)


def get(d, host_header, path="/", headers=None, secret=None, timeout=10):
    """One request through the plain listener with this Host. Returns (status, headers, body)."""
    s = netns_socket(d.netns_path)
    c = http.client.HTTPConnection("127.0.0.1", PLAIN, timeout=timeout)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", PLAIN))
    c.sock = s
    try:
        h = dict(headers or {})
        h["Host"] = host_header
        if secret:
            h["Authorization"] = "Bearer " + secret
        c.request("GET", path, headers=h)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def error_code(body):
    return json.loads(body)["error"]["code"]


@pytest.fixture
def preview(idaemon):
    """idaemon with an administrator token, an agent token, httpd on port 8000 of "web" (the
    administrator's) and of "mine" (the agent's)."""
    d = idaemon
    adm = token(d, "adm", True)
    agent = token(d, "agent", False)
    create(d, "web")
    start_httpd(d, "web", 8000, "web")
    r = d.api("POST", "/v1/envs", {"name": "mine", "kind": "computer"},
              headers={"Authorization": "Bearer " + agent})
    assert r.status == 201 and r.json["owner"] == "agent", r
    start_httpd(d, "mine", 8000, "mine")
    return d, adm, agent


def test_preview_url_reaches_the_environment_port(preview):
    d, adm, agent = preview
    st, _, body = get(d, host(8000, "web"), secret=adm)
    assert (st, body) == (200, b"hello from web\n")
    # case-insensitive, with or without the listener's port
    st, _, body = get(d, "8000-WEB.Preview.TEST", secret=adm)
    assert (st, body) == (200, b"hello from web\n")
    # the cookie works as well as the header
    st, _, body = get(d, host(8000, "web"), headers={"Cookie": "a=b; paddock_token=" + adm})
    assert (st, body) == (200, b"hello from web\n")
    # a browser: ?paddock_token= becomes a cookie of that host, and leaves the URL
    st, hdrs, _ = get(d, host(8000, "web"), path="/index.html?paddock_token=%s&x=1" % adm)
    assert st == 303 and hdrs["Location"] == "/index.html?x=1", hdrs
    cookie = hdrs["Set-Cookie"]
    assert cookie.startswith("paddock_token=%s;" % adm) and "HttpOnly" in cookie, cookie
    assert "Domain" not in cookie, cookie  # this preview host only
    # an agent token reaches its own environment
    st, _, body = get(d, host(8000, "mine"), secret=agent)
    assert (st, body) == (200, b"hello from mine\n")


def test_preview_url_refuses_missing_wrong_and_foreign_tokens(preview):
    d, adm, agent = preview
    st, hdrs, body = get(d, host(8000, "web"))
    assert st == 401 and error_code(body) == "unauthorized", body
    st, _, body = get(d, host(8000, "web"), secret="pdk_" + "A" * 43)
    assert st == 401 and error_code(body) == "unauthorized", body
    st, _, body = get(d, host(8000, "web"), headers={"Cookie": "paddock_token=pdk_" + "B" * 43})
    assert st == 401, body
    # another token's environment: as if it did not exist, and the app is never reached
    st, _, body = get(d, host(8000, "web"), secret=agent)
    assert st == 502 and b"hello" not in body, body
    assert b"no such environment" in body, body
    # a revoked token stops working
    assert d.api("DELETE", "/v1/tokens/agent").status == 200
    st, _, body = get(d, host(8000, "mine"), secret=agent)
    assert st == 401, body


def test_preview_url_unknown_stopped_closed_answer_502_at_once(preview):
    d, adm, agent = preview
    for h, what in [(host(8000, "nosuch"), b"no such environment"),
                    (host(8001, "web"), b"nothing listens there")]:
        t0 = time.monotonic()
        st, _, body = get(d, h, secret=adm)
        assert st == 502 and error_code(body) == "bad_gateway" and what in body, (h, body)
        assert time.monotonic() - t0 < 3
    d.cli("stop", "web")
    t0 = time.monotonic()
    st, _, body = get(d, host(8000, "web"), secret=adm)
    assert st == 502 and b"not running" in body, body
    assert time.monotonic() - t0 < 3


def test_preview_url_finds_a_name_in_another_case_unless_ambiguous(preview):
    """A Host is lowercase: "Cased" is reached as 8000-cased; with both "Twin" and "TWIN"
    there, 8000-twin names neither (the engine looks in one hash bucket, not at everyone)."""
    d, adm, agent = preview
    create(d, "Cased")
    start_httpd(d, "Cased", 8000, "Cased")
    st, _, body = get(d, host(8000, "cased"), secret=adm)
    assert (st, body) == (200, b"hello from Cased\n"), body
    create(d, "Twin", kind="sandbox")
    create(d, "TWIN", kind="sandbox")
    st, _, body = get(d, host(8000, "twin"), secret=adm)
    assert st == 502 and b"no such environment" in body, body


def test_api_with_ordinary_host_is_unaffected(preview):
    d, adm, agent = preview
    for h in ["127.0.0.1:%d" % PLAIN, DOMAIN, "web." + DOMAIN, "x8000-web." + DOMAIN]:
        st, _, body = get(d, h, path="/v1/envs", secret=adm)
        assert st == 200, (h, body)
        assert "web" in [e["name"] for e in json.loads(body)["envs"]], body
    st, _, body = get(d, "127.0.0.1:%d" % PLAIN, path="/v1/envs")
    assert st == 401, body


def test_e2b_envd_port_with_sandbox_id_is_the_api(preview):
    """E2B's SDK without E2B_SANDBOX_URL calls envd at 49983-ID.DOMAIN with E2b-Sandbox-Id:
    that is the engine's envd, not port 49983 of the environment."""
    d, adm, agent = preview
    st, hdrs, body = get(d, host(49983, "web"), path="/health",
                         headers={"E2b-Sandbox-Id": "web"})
    assert b"nothing listens" not in body and b"a token is required" not in body, (st, body)
    assert json.loads(body).get("code") == st, body  # envd's error shape, from the engine
    st, _, body = get(d, host(49983, "web"), path="/health", secret=adm)
    assert st == 502 and b"nothing listens there" in body, body  # without it: a preview


def test_upgrade_is_relayed_byte_for_byte_and_credentials_stay_out(preview):
    d, adm, agent = preview
    d.sh("web", "cat > /tmp/up.sh <<'EOF'\n%sEOF\nchmod +x /tmp/up.sh; "
                "setsid nc -l -p 9000 -e /tmp/up.sh </dev/null >/dev/null 2>&1 &" % UPGRADE_SERVER)
    wait_for(lambda: ":2328 " in d.sh("web", "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"),
             what="nc listening on port 9000")
    s = netns_socket(d.netns_path)
    try:
        s.settimeout(10)
        s.connect(("127.0.0.1", PLAIN))
        s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n"
                   "Authorization: Bearer %s\r\nCookie: keep=1; paddock_token=%s\r\n"
                   "Paddock-Peer: 6.6.6.6:1\r\n\r\n" % (host(9000, "web"), adm, adm)).encode())
        got = b""
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            assert b, got
            got += b
        head, rest = got.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), got
        payload = bytes(range(256)) * 64  # every byte value, 16 KiB, both ways
        s.sendall(payload)
        while len(rest) < len(payload):
            b = s.recv(65536)
            assert b, len(rest)
            rest += b
        assert rest == payload
    finally:
        s.close()
    seen = d.sh("web", "cat /tmp/head")
    assert "GET /ws HTTP/1.1" in seen and ("Host: " + host(9000, "web")) in seen, seen
    assert adm not in seen and "Authorization" not in seen, seen  # never shown to the app
    assert "Cookie: keep=1" in seen and "6.6.6.6" not in seen, seen
    assert "X-Forwarded-For: 127.0.0.1" in seen and "X-Forwarded-Proto: http" in seen, seen


KEEPALIVE_SERVER = r"""#!/bin/sh
# One connection, requests answered until the client ends it (HTTP/1.1 keep-alive).
for i in 1 2 3; do
  ok=
  while IFS= read -r line; do
    [ "${#line}" -le 1 ] && { ok=1; break; }
  done
  [ -n "$ok" ] || exit 0
  printf 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreply%d' $i
done
"""


def test_keep_alive_stays_with_one_environment_port(preview):
    """Later requests on a preview connection go to the same backend connection; one for
    another port or environment (or the API) is refused with 421, never sent elsewhere."""
    d, adm, agent = preview
    d.sh("web", "cat > /tmp/ka.sh <<'EOF'\n%sEOF\nchmod +x /tmp/ka.sh; "
                "setsid nc -l -p 9001 -e /tmp/ka.sh </dev/null >/dev/null 2>&1 &" % KEEPALIVE_SERVER)
    wait_for(lambda: ":2329 " in d.sh("web", "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"),
             what="nc listening on port 9001")
    s = netns_socket(d.netns_path)
    try:
        s.settimeout(10)
        s.connect(("127.0.0.1", PLAIN))

        def ask(h, want):
            s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n"
                       % (h, adm)).encode())
            got = b""
            while want not in got:
                b = s.recv(4096)
                assert b, got
                got += b
            return got
        assert ask(host(9001, "web"), b"reply1").startswith(b"HTTP/1.1 200")
        assert ask(host(9001, "web"), b"reply2").startswith(b"HTTP/1.1 200")
        out = ask(host(8000, "web"), b"}")
        assert out.startswith(b"HTTP/1.1 421") and b"hello" not in out, out
        assert b"reply3" not in out, out  # the environment never saw the third request
    finally:
        s.close()


def test_e2b_policy_public_and_traffic_token(preview):
    """The E2B control plane's hook (ingress_set_policy) writes the environment's ingress.json;
    here the test writes what it writes."""
    import hashlib
    import os
    d, adm, agent = preview
    path = os.path.join(d.root, "envs", "web", "ingress.json")
    with open(path, "w") as f:
        json.dump({"public": False, "token_hash": hashlib.sha256(b"tat-1").hexdigest()}, f)
    st, _, body = get(d, host(8000, "web"), headers={"e2b-traffic-access-token": "tat-1"})
    assert (st, body) == (200, b"hello from web\n")
    st, _, body = get(d, host(8000, "web"), headers={"e2b-traffic-access-token": "tat-2"})
    assert st == 401 and b"traffic access token" in body, body
    st, _, body = get(d, host(8000, "web"))
    assert st == 401, body
    with open(path, "w") as f:
        json.dump({"public": True, "token_hash": ""}, f)
    st, _, body = get(d, host(8000, "web"))
    assert (st, body) == (200, b"hello from web\n")
    os.unlink(path)
    st, _, body = get(d, host(8000, "web"))
    assert st == 401, body


def test_e2b_sandbox_allow_public_traffic(idaemon):
    """An E2B sandbox is public by default (getHost works without credentials); created with
    network.allowPublicTraffic false, its preview needs the trafficAccessToken of the create
    answer in e2b-traffic-access-token."""
    d = idaemon
    r = d.api("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 300})
    assert r.status == 201 and r.json["trafficAccessToken"] is None, r
    assert r.json["domain"] == DOMAIN, r.json
    pub = r.json["sandboxID"]
    r = d.api("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 300,
                                        "network": {"allowPublicTraffic": False}})
    assert r.status == 201, r
    priv, tat = r.json["sandboxID"], r.json["trafficAccessToken"]
    assert tat and len(tat) >= 32, r.json
    for sid in (pub, priv):
        start_httpd(d, sid, 8000, sid)
    st, _, body = get(d, host(8000, pub))
    assert (st, body) == (200, ("hello from %s\n" % pub).encode())
    st, _, body = get(d, host(8000, priv))
    assert st == 401, body
    st, _, body = get(d, host(8000, priv), headers={"e2b-traffic-access-token": tat + "x"})
    assert st == 401, body
    st, _, body = get(d, host(8000, priv), headers={"e2b-traffic-access-token": tat})
    assert (st, body) == (200, ("hello from %s\n" % priv).encode())
    # the token is shown once: connect does not repeat it
    r = d.api("POST", "/v2/sandboxes/%s/connect" % priv, {"timeout": 60})
    assert r.status in (200, 201) and r.json.get("trafficAccessToken") is None, r


def test_port_url(idaemon, make_daemon):
    d = idaemon
    assert d.cli("port", "url", "web", "8000").out.strip() == \
        "http://8000-web.%s:%d/" % (DOMAIN, PLAIN)
    j = json.loads(d.cli("port", "url", "Web", "3000", "--json").out)
    assert j == {"url": "http://3000-web.%s:%d/" % (DOMAIN, PLAIN)}
    assert d.api("GET", "/v1/system").json["gateway"]["domain"] == DOMAIN
    p = d.cli("port", "url", "a.b", "80", check=False)
    assert p.returncode != 0 and "host name" in p.err, p.err
    plain = make_daemon(loopback=True, extra_args=["--listen-plain", "127.0.0.1:%d" % PLAIN])
    p = plain.cli("port", "url", "web", "8000", check=False)
    assert p.returncode != 0 and "--domain" in p.err, p.err
    assert plain.api("GET", "/v1/system").json["gateway"]["domain"] is None


def test_preview_over_tls(make_daemon):
    """The TLS listener: https:// URLs, X-Forwarded-Proto https, a Secure cookie."""
    d = make_daemon(loopback=True, extra_args=["--listen", "127.0.0.1:%d" % GATEWAY_PORT,
                                               "--domain", DOMAIN])
    assert d.cli("port", "url", "web", "8000").out.strip() == \
        "https://8000-web.%s:%d/" % (DOMAIN, GATEWAY_PORT)
    adm = token(d, "adm", True)
    create(d, "web")
    start_httpd(d, "web", 8000, "tls")
    h = {"Host": "8000-web.%s" % DOMAIN}
    r = tls_request(d, "127.0.0.1", GATEWAY_PORT, "GET", "/", token=adm, headers=h)
    assert (r.status, r.body) == (200, b"hello from tls\n"), r
    r = tls_request(d, "127.0.0.1", GATEWAY_PORT, "GET", "/?paddock_token=" + adm, headers=h)
    assert r.status == 303 and "; Secure" in r.headers["Set-Cookie"], r.headers
    r = tls_request(d, "127.0.0.1", GATEWAY_PORT, "GET", "/v1/envs", token=adm)
    assert r.status == 200 and r.json["envs"][0]["name"] == "web", r
