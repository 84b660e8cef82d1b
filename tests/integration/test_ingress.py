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

from conftest import GATEWAY_PORT, netns_socket, wait_for

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
