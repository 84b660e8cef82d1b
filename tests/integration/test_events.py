"""Events (GET /v1/events, `paddock events`): what happens to environments, live, in order,
filtered; a subscriber that does not keep up is cut off without slowing anyone else."""
import json
import os
import signal
import socket
import subprocess
import time

from conftest import PADDOCK, UnixHTTPConnection

HOG = 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo done ${#x}'


class Subscriber:
    """One GET /v1/events, read line by line."""

    def __init__(self, d, query="", timeout=30):
        self.c = UnixHTTPConnection(d.sock, timeout=timeout)
        self.c.request("GET", "/v1/events" + query)
        self.r = self.c.getresponse()
        assert self.r.status == 200, self.r.read()
        assert self.r.getheader("Content-Type") == "application/x-ndjson"

    def next(self):
        line = self.r.readline()
        if not line:
            return None
        return json.loads(line)

    def until(self, pred, limit=200):
        seen = []
        for _ in range(limit):
            ev = self.next()
            assert ev is not None, "stream ended; saw %s" % seen
            seen.append(ev)
            if pred(ev):
                return seen
        raise AssertionError("not found in %s" % seen)

    def close(self):
        self.c.close()


def test_lifecycle_events_in_order(daemon):
    d = daemon
    sub = Subscriber(d, "?env=ev1")
    other = Subscriber(d, "?type=exec_exited")
    d.create("ev1", "--computer")
    d.create("ev2", "--computer")  # not for sub
    assert d.exec("ev1", ["sh", "-c", "exit 3"])["exit_code"] == 3
    d.cli("stop", "ev1")
    d.cli("rm", "ev1")
    seen = sub.until(lambda e: e["type"] == "deleted")
    assert [e["type"] for e in seen] == ["created", "started", "exec_started", "exec_exited",
                                         "stopped", "deleted"], seen
    assert {e["env"] for e in seen} == {"ev1"}
    for e in seen:
        assert e["time"].endswith("Z") and len(e["time"]) == 24, e
    assert seen[0]["kind"] == "computer" and seen[0]["image"] == "base"
    assert seen[2]["argv"] == ["sh", "-c", "exit 3"] and seen[2]["exec"] == seen[3]["exec"]
    assert seen[3]["exit_code"] == 3 and seen[3]["duration_ms"] >= 0
    # the type filter: only exec_exited, of any environment
    d.exec("ev2", ["true"])
    ex = other.next()
    assert ex["type"] == "exec_exited" and ex["env"] == "ev1" and ex["exit_code"] == 3, ex
    ex = other.next()
    assert ex["type"] == "exec_exited" and ex["env"] == "ev2" and ex["exit_code"] == 0, ex
    sub.close()
    other.close()
    # pause, resume, snapshot events where the storage allows
    sub = Subscriber(d, "?env=ev2&type=paused,resumed")
    d.cli("pause", "ev2")
    d.cli("resume", "ev2")
    assert [sub.next()["type"], sub.next()["type"]] == ["paused", "resumed"]
    sub.close()
    # bad filters
    assert d.api("GET", "/v1/events?type=created,nonsense").status == 400
    assert d.api("GET", "/v1/events?env=..x").status == 400


def test_oom_event(daemon):
    d = daemon
    d.create("hog", "--memory", "64M")
    sub = Subscriber(d, "?env=hog&type=oom,exec_exited", timeout=90)
    res = d.exec("hog", ["sh", "-c", HOG], timeout=60)
    assert res["exit_code"] == 137, res
    seen = [sub.next(), sub.next()]
    assert [e["type"] for e in seen] == ["oom", "exec_exited"], seen
    assert seen[0]["oom_kills"] >= 1 and seen[1]["exit_code"] == 137
    sub.close()


def test_ttl_expiry_event(daemon):
    d = daemon
    sub = Subscriber(d, "?env=short")
    d.create("short", "--sandbox", "--ttl", "2s")
    seen = sub.until(lambda e: e["type"] == "deleted")
    assert [e["type"] for e in seen] == ["created", "started", "expired", "stopped",
                                         "deleted"], seen
    sub.close()


def test_slow_subscriber_is_cut_off_and_stalls_nobody(daemon):
    d = daemon
    d.create("busy", "--computer")
    # A subscriber that does not read: its socket buffer, then its queue (256 events) fill up.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(d.sock)
    s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
    fast = Subscriber(d, "?type=exec_exited")
    arg = "y" * 1000  # fat exec_started lines (~1.1 KiB) fill the buffers sooner
    worst = 0.0
    # Each exec makes ~1.2 KiB of events. Send half again as many as the socket's buffer (the
    # kernel's default send buffer), libmicrohttpd's 64 KiB and the queue of 256 events hold.
    with open("/proc/sys/net/core/wmem_default") as f:
        wmem = int(f.read())
    n = max(400, int((wmem + 65536 + 256 * 1200) / 1200 * 1.5))
    for _ in range(n):
        t = time.monotonic()
        assert d.exec("busy", ["true", arg])["exit_code"] == 0
        worst = max(worst, time.monotonic() - t)
        assert fast.next()["type"] == "exec_exited"  # a reader that keeps up keeps up
    assert worst < 2.0, worst
    assert d.api("GET", "/v1/system", timeout=5).status == 200
    # Now read: the queued events, then the overflow line, then the end of the stream.
    s.settimeout(30)
    data = b""
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        data += b
        if data.endswith(b"\r\n0\r\n\r\n"):
            break  # the last chunk: the stream ended (the connection may stay open)
    s.close()
    body = data.partition(b"\r\n\r\n")[2]
    assert b'{"type":"overflow"}' in body, body[-300:]
    assert body.endswith(b"\r\n0\r\n\r\n"), body[-300:]
    lines = [l for l in body.split(b"\n") if l.startswith(b"{")]
    assert json.loads(lines[-1]) == {"type": "overflow"}
    assert 100 < len(lines) < 2 * n, len(lines)  # cut off well before everything
    # the fast one is still going
    d.exec("busy", ["true"])
    assert fast.next()["type"] == "exec_exited"
    fast.close()


def test_cli_events(daemon):
    d = daemon
    p = subprocess.Popen([PADDOCK, "--socket", d.sock, "events", "--env", "cl", "--type",
                          "created", "--type", "deleted"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().split() == [b"TIME", b"TYPE", b"ENV", b"DETAIL"]
        time.sleep(0.3)  # subscribed
        d.create("cl", "--computer")
        d.cli("rm", "-f", "cl")
        first = p.stdout.readline().decode().split()
        second = p.stdout.readline().decode().split()
        assert first[1:3] == ["created", "cl"] and "kind=computer" in first, first
        assert second[1:3] == ["deleted", "cl"], second
    finally:
        os.kill(p.pid, signal.SIGINT)
        p.wait(10)
    p = subprocess.Popen([PADDOCK, "--socket", d.sock, "events", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.3)
        d.create("cl2", "--computer")
        ev = json.loads(p.stdout.readline())
        assert ev["type"] == "created" and ev["env"] == "cl2", ev
    finally:
        os.kill(p.pid, signal.SIGINT)
        p.wait(10)
    assert d.cli("events", "--type", "bogus", check=False).returncode == 1
