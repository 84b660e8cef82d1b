"""Idle stop and wake-up (docs/operations.md, "Idle environments"): an environment with an idle
timeout and no activity for that long is paused (sandbox) or stopped (computer); the next exec
or file request wakes it transparently; activity (a running exec, API work in it, background
output, network traffic) postpones it; the setting survives a daemon restart. E2B's envd
requests and connect wake it too; a preview URL request or a TCP connection to a published
port wakes a paused one; a pause or stop asked for is never undone, also when asked for while
the environment was already idle."""
import json
import os
import time

from conftest import wait_for

from test_events import Subscriber


def state(d, name):
    e = d.inspect(name)
    return e["state"], e["idled_at"]


def ls_state(d, name):
    for line in d.cli("ls").out.splitlines()[1:]:
        cells = line.split()
        if cells and cells[0] == name:
            return cells[2]
    return None


def test_idle_sandbox_is_paused_and_exec_wakes_it(daemon):
    d = daemon
    sub = Subscriber(d, "?env=idler")
    e = d.create("idler", "--sandbox", "--idle-timeout", "2s")
    assert (e["idle_timeout"], e["idle_action"], e["idled_at"]) == (2, "pause", None)
    t0 = time.monotonic()
    wait_for(lambda: state(d, "idler")[0] == "paused", timeout=10, what="idle pause")
    assert time.monotonic() - t0 >= 1.5
    st, idled_at = state(d, "idler")
    assert idled_at is not None
    assert ls_state(d, "idler") == "paused(idle)"
    seen = sub.until(lambda ev: ev["type"] == "idle")
    assert seen[-1].get("action") == "pause", seen[-1]

    # the next exec wakes it; the caller sees only the answer
    assert d.sh("idler", "echo awake") == "awake\n"
    assert state(d, "idler") == ("running", None)
    assert ls_state(d, "idler") == "running"
    types = [ev["type"] for ev in sub.until(lambda ev: ev["type"] == "woke")]
    assert "resumed" in types
    # and it idles again later
    wait_for(lambda: state(d, "idler")[0] == "paused", timeout=10, what="second idle pause")
    # an explicit pause is not undone by a request: only what the idle timer did
    assert d.api("POST", "/v1/envs/idler/resume").status == 200
    assert d.api("POST", "/v1/envs/idler/pause").status == 200
    r = d.api("POST", "/v1/envs/idler/exec", {"cmd": ["true"]})
    assert r.status == 409, r
    sub.close()


def test_activity_postpones_idle(daemon):
    d = daemon
    d.create("busy", "--sandbox", "--idle-timeout", "3s")
    # a running exec holds it awake past the timeout
    res = d.exec("busy", "sleep 5; echo done")
    assert res["stdout"] == "done\n"
    assert state(d, "busy")[0] == "running"
    # API work inside it (files) every half second keeps it awake
    for _ in range(10):
        assert d.api("GET", "/v1/envs/busy/files/stat?path=/tmp").status == 200
        time.sleep(0.5)
    assert state(d, "busy")[0] == "running"
    # a background process that writes output is activity; inspect and ls are not
    r = d.api("POST", "/v1/envs/busy/exec",
              {"cmd": ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo tick; sleep 0.5; done"],
               "detach": True})
    assert r.status == 201, r
    for _ in range(4):
        d.inspect("busy")
        d.cli("ls")
        time.sleep(1)
    assert state(d, "busy")[0] == "running"
    # once everything is quiet it pauses (a silent process does not keep it awake)
    assert d.api("POST", "/v1/envs/busy/exec",
                 {"cmd": ["sleep", "1000"], "detach": True}).status == 201
    wait_for(lambda: state(d, "busy")[0] == "paused", timeout=12, what="idle pause")


def test_network_traffic_is_activity(daemon):
    d = daemon
    e = d.create("chatty", "--computer", "--idle-timeout", "3s", "--idle-action", "pause")
    if e["network"]["mode"] == "none":
        return  # a daemon without networking
    gw = e["network"]["gateway"]
    # packets to the gateway's resolver every half second for ~8 s, nothing written anywhere
    script = ("i=0; while [ $i -lt 16 ]; do nslookup example.com %s >/dev/null 2>&1; "
              "sleep 0.5; i=$((i+1)); done" % gw)
    t0 = time.monotonic()
    assert d.api("POST", "/v1/envs/chatty/exec", {"cmd": ["sh", "-c", script],
                                                  "detach": True}).status == 201
    time.sleep(6)
    assert state(d, "chatty")[0] == "running"
    # quiet once the loop ends: paused within the timeout and a sampling step of it
    wait_for(lambda: state(d, "chatty")[0] == "paused", timeout=20, what="idle pause")
    assert time.monotonic() - t0 >= 8


def test_idle_computer_stops_and_the_setting_survives_a_restart(daemon):
    d = daemon
    e = d.create("comp", "--computer", "--idle-timeout", "2s")
    assert e["idle_action"] == "stop"
    d.sh("comp", "echo kept > /root/file")
    wait_for(lambda: state(d, "comp")[0] == "stopped", timeout=20, what="idle stop")
    assert ls_state(d, "comp") == "stopped(idle)"
    d.restart()
    e = d.inspect("comp")
    assert (e["state"], e["idle_timeout"], e["idle_action"]) == ("stopped", 2, "stop")
    assert e["idled_at"] is not None
    # a file request starts it again, with its disk
    r = d.api("GET", "/v1/envs/comp/files?path=/root/file")
    assert r.status == 200 and r.body == b"kept\n", r
    assert state(d, "comp") == ("running", None)
    # the restarted daemon keeps watching a running one
    d.restart()
    wait_for(lambda: state(d, "comp")[0] == "stopped", timeout=20, what="idle stop after restart")
    # an explicit start clears the reason too
    d.cli("start", "comp")
    assert state(d, "comp") == ("running", None)
    d.cli("stop", "comp")


def test_idle_settings_through_the_api(daemon):
    d = daemon
    r = d.api("POST", "/v1/envs", {"name": "s1", "idle_timeout": "1h", "idle_action": "nap"})
    assert r.status == 400 and "idle_action" in r.json["error"]["message"], r
    r = d.api("POST", "/v1/envs", {"name": "s1", "idle_timeout": "soon"})
    assert r.status == 400 and "idle_timeout" in r.json["error"]["message"], r
    r = d.api("POST", "/v1/envs", {"name": "s1", "idle_timeout": 3600, "idle_action": "stop"})
    assert r.status == 201, r
    assert (r.json["idle_timeout"], r.json["idle_action"]) == (3600, "stop")
    r = d.api("PATCH", "/v1/envs/s1", {"idle_timeout": "1s", "idle_action": "pause"})
    assert r.status == 200 and (r.json["idle_timeout"], r.json["idle_action"]) == (1, "pause")
    wait_for(lambda: state(d, "s1")[0] == "paused", timeout=10, what="idle pause after PATCH")
    r = d.api("PATCH", "/v1/envs/s1", {"idle_timeout": None})
    assert r.status == 200 and r.json["idle_timeout"] is None, r
    # still paused by the idle timer: the next exec wakes it, and it stays awake now
    assert d.sh("s1", "echo hi") == "hi\n"
    time.sleep(2.5)
    assert state(d, "s1")[0] == "running"
    p = d.cli("update", "s1", "--idle-timeout", "30m", "--json")
    assert json.loads(p.out)["idle_timeout"] == 1800
    # idle counters in paddock system
    s = d.api("GET", "/v1/system").json
    assert s["idle"]["paused"] >= 1 and s["idle"]["woken"] >= 1, s.get("idle")


def test_operations_md_examples(daemon):
    """The commands docs/operations.md shows, as written."""
    d = daemon
    d.cli("create", "job7", "--sandbox", "--idle-timeout", "10m")
    d.cli("create", "dev1", "--computer", "--idle-timeout", "2h")
    d.cli("update", "dev1", "--idle-timeout", "30m", "--idle-action", "pause")
    assert (d.inspect("job7")["idle_timeout"], d.inspect("job7")["idle_action"]) == (600, "pause")
    e = d.inspect("dev1")
    assert (e["idle_timeout"], e["idle_action"]) == (1800, "pause")


# --------------------------------------------------------------------------- E2B and connections

def e2b_files(d, sid, path):
    """E2B envd's GET /files on the local socket (the administrator may address any sandbox)."""
    return d.api("GET", "/files?path=" + path, headers={"E2b-Sandbox-Id": sid})


def e2b_state(d, sid):
    r = d.api("GET", "/sandboxes/" + sid)
    assert r.status == 200, r
    return r.json["state"]


def test_e2b_requests_wake_an_idle_sandbox(daemon):
    d = daemon
    r = d.api("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 300})
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    d.sh(sid, "echo kept > /tmp/note")
    r = d.api("PATCH", "/v1/envs/" + sid, {"idle_timeout": "2s", "idle_action": "pause"})
    assert r.status == 200, r
    wait_for(lambda: state(d, sid)[0] == "paused", timeout=10, what="idle pause")
    # For E2B it is running: its deadline runs and envd answers. /health does not wake it.
    assert e2b_state(d, sid) == "running"
    assert d.api("GET", "/health", headers={"E2b-Sandbox-Id": sid}).status == 204
    assert state(d, sid)[0] == "paused"
    # setTimeout applies at once, as for a running sandbox (a paused one: from its resume)
    end = d.api("GET", "/sandboxes/" + sid).json["endAt"]
    assert d.api("POST", "/sandboxes/%s/timeout" % sid, {"timeout": 120}).status == 204
    assert d.api("GET", "/sandboxes/" + sid).json["endAt"] < end
    assert state(d, sid)[0] == "paused"
    # an envd request wakes it; the caller sees only the answer
    r = e2b_files(d, sid, "/tmp/note")
    assert r.status == 200 and r.body == b"kept\n", r
    assert state(d, sid) == ("running", None)

    # connect wakes it too, and answers as for a running sandbox
    wait_for(lambda: state(d, sid)[0] == "paused", timeout=10, what="second idle pause")
    r = d.api("POST", "/v2/sandboxes/%s/connect" % sid, {"timeout": 300})
    assert r.status == 200 and r.json["state"] == "running", r
    assert state(d, sid) == ("running", None)
    # and the older SDKs' resume
    wait_for(lambda: state(d, sid)[0] == "paused", timeout=10, what="idle pause")
    assert d.api("POST", "/sandboxes/%s/resume" % sid, {"timeout": 300}).status == 201
    assert state(d, sid) == ("running", None)

    # E2B's own pause of an idle-paused sandbox is a pause on purpose: nothing wakes it
    wait_for(lambda: state(d, sid)[0] == "paused", timeout=10, what="third idle pause")
    assert d.api("POST", "/sandboxes/%s/pause" % sid, {}).status == 204
    assert state(d, sid) == ("paused", None)
    assert e2b_state(d, sid) == "paused"
    assert e2b_files(d, sid, "/tmp/note").status == 502
    assert state(d, sid)[0] == "paused"
    r = d.api("POST", "/v2/sandboxes/%s/connect" % sid, {"timeout": 300})
    assert r.status == 201, r  # resumed, as any paused sandbox


def test_e2b_request_starts_an_idle_stopped_computer(daemon):
    d = daemon
    d.create("dev", "--computer", "--idle-timeout", "2s")
    d.sh("dev", "echo disk > /root/f")
    wait_for(lambda: state(d, "dev")[0] == "stopped", timeout=20, what="idle stop")
    r = d.api("POST", "/filesystem.Filesystem/Stat", raw=b'{"path":"/root/f"}',
              headers={"E2b-Sandbox-Id": "dev", "Content-Type": "application/json",
                       "Connect-Protocol-Version": "1"})
    assert r.status == 200 and r.json["entry"]["size"] == "5", r
    assert state(d, "dev") == ("running", None)
    # stopped on purpose (also after the idle timer did): no request starts it
    wait_for(lambda: state(d, "dev")[0] == "stopped", timeout=20, what="second idle stop")
    d.cli("stop", "dev")
    assert state(d, "dev") == ("stopped", None)
    assert e2b_files(d, "dev", "/root/f").status == 502
    assert d.api("POST", "/v1/envs/dev/exec", {"cmd": ["true"]}).status == 409
    assert state(d, "dev")[0] == "stopped"


def test_inbound_connection_and_preview_wake_an_idle_paused_environment(make_daemon):
    from test_ingress import PLAIN, get, host, raw, start_httpd, token
    d = make_daemon(loopback=True, extra_args=["--listen-plain", "127.0.0.1:%d" % PLAIN,
                                               "--domain", "preview.test"])
    e = d.create("web", "--computer", "--idle-timeout", "2s", "--idle-action", "pause")
    if e["network"]["mode"] == "none":
        return  # a daemon without networking
    start_httpd(d, "web", 8000, "web")
    req = b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"
    wait_for(lambda: state(d, "web")[0] == "paused", timeout=15, what="idle pause")
    # a port published while it is idle-paused: a connection to it wakes it
    assert d.api("POST", "/v1/envs/web/ports", {"host_port": 8085, "port": 8000}).status == 201
    assert state(d, "web")[0] == "paused"
    out = raw(d, req, port=8085, timeout=10)
    assert b"hello from web" in out, out
    assert state(d, "web") == ("running", None)

    wait_for(lambda: state(d, "web")[0] == "paused", timeout=15, what="idle pause")
    # its own quiet (and ours) does not wake it: nothing moves while nobody connects
    time.sleep(3.5)
    assert state(d, "web")[0] == "paused"
    # a connection to the published port is accepted by its frozen kernel, and answered once
    # the idle watch (every second) saw it and resumed it
    t0 = time.monotonic()
    out = raw(d, req, port=8085, timeout=10)
    assert out.startswith(b"HTTP/1.") and b"hello from web" in out, out
    assert time.monotonic() - t0 < 5
    assert state(d, "web") == ("running", None)
    assert d.api("GET", "/v1/system").json["idle"]["woken"] >= 1

    # a daemon restarted meanwhile watches it again
    wait_for(lambda: state(d, "web")[0] == "paused", timeout=15, what="idle pause")
    d.restart()
    out = raw(d, req, port=8085, timeout=10)
    assert b"hello from web" in out, out
    assert state(d, "web") == ("running", None)

    # a preview URL request wakes it at once
    adm = token(d, "adm", True)
    wait_for(lambda: state(d, "web")[0] == "paused", timeout=15, what="second idle pause")
    st, _, body = get(d, host(8000, "web"), secret=adm)
    assert st == 200 and b"hello from web" in body, (st, body)
    assert state(d, "web") == ("running", None)

    # paused on purpose (also after the idle timer did): a connection does not wake it
    wait_for(lambda: state(d, "web")[0] == "paused", timeout=15, what="third idle pause")
    assert d.api("POST", "/v1/envs/web/pause").status == 200
    assert state(d, "web") == ("paused", None)
    try:
        out = raw(d, req, port=8085, timeout=3)
    except OSError:
        out = b""
    assert out == b"", out
    assert state(d, "web")[0] == "paused"
    st, _, body = get(d, host(8000, "web"), secret=adm)
    assert st == 502 and b"paused" in body, (st, body)
    assert d.api("POST", "/v1/envs/web/exec", {"cmd": ["true"]}).status == 409

    # stopped by the timer: its servers are gone, a preview request says so and starts nothing
    d.create("comp", "--computer", "--idle-timeout", "2s")
    wait_for(lambda: state(d, "comp")[0] == "stopped", timeout=20, what="idle stop")
    st, _, body = get(d, host(8000, "comp"), secret=adm)
    assert st == 502 and b"stopped when idle" in body, (st, body)
    assert state(d, "comp")[0] == "stopped"


def test_a_terminal_wakes_an_idle_stopped_computer_without_holding_others(daemon):
    """A terminal (exec/ws) into a computer the idle timer stopped waits for its start like an
    exec does (deferred, then dispatched again once PID 1 runs): the daemon answers others
    meanwhile, and the terminal works once the protocol switch comes."""
    import signal
    import threading
    from test_create_async import held_lxcfs, setting_up
    from wsclient import WS
    d = daemon
    d.create("term", "--computer", "--idle-timeout", "2s")
    wait_for(lambda: state(d, "term")[0] == "stopped", timeout=20, what="idle stop")
    lxcfs = held_lxcfs(d)
    os.kill(lxcfs, signal.SIGSTOP)  # its start's setup waits in its one lxcfs access
    box = {}

    def open_terminal():
        try:
            box["ws"] = WS(d.sock, "term", {"cmd": ["sh"]}, timeout=60)
        except Exception as ex:  # reported below
            box["error"] = ex

    t = threading.Thread(target=open_terminal)
    try:
        t.start()
        wait_for(lambda: setting_up(d, "term"), 10, 0.02, "the wake-up's setup child")
        assert d.inspect("term")["state"] == "starting"
        assert d.api("GET", "/v1/system", timeout=5).status == 200  # others are answered
        assert t.is_alive() and not box, box  # the terminal waits for its start
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t.join(60)
    assert "ws" in box, box
    ws = box["ws"]
    ws.send_bytes(b"echo woke=$((6*7))\n")
    ws.collect(until=lambda o: b"woke=42" in o)
    ws.send_bytes(b"exit 3\n")
    out, ctl, code = ws.collect()
    assert ctl and ctl[-1]["exit_code"] == 3 and code == 1000, (out, ctl, code)
    assert state(d, "term")[0] == "running"
