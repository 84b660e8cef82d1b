"""The E2B-compatible API (docs/e2b.md) where the node suite (tests/e2b) cannot look cheaply:
what is stored (the envd access token only as a hash), who sees what through the network
gateway (another token's sandbox is a 404 with a numeric code; envd requests need the sandbox's
access token, and other environments look missing), paging that stays correct while sandboxes
come and go, the E2B row that vanishes whichever way its environment is destroyed, the bounds
(files per upload, metadata size, a paused sandbox's deadline), a revoked owner token, and a
create that waits for its PID 1 without holding up anyone else."""
import hashlib
import json
import os
import signal
import sqlite3
import threading
import time

import pytest

from conftest import (GATEWAY_PORT, TLSConnection, children_of, proc_cgroup, tls_request,
                      wait_for)

PLAIN = GATEWAY_PORT + 1


def token(daemon, name, admin=False):
    r = daemon.api("POST", "/v1/tokens", {"name": name, "admin": admin})
    assert r.status == 201, r
    return r.json["secret"]


def e2b(daemon, method, path, key=None, body=None, headers=None):
    h = dict(headers or {})
    if key:
        h["X-API-Key"] = key
    return tls_request(daemon, "127.0.0.1", PLAIN, method, path, body=body, headers=h, tls=False)


def create(daemon, key, **body):
    r = e2b(daemon, "POST", "/v2/sandboxes", key, dict({"templateID": "base", "timeout": 300},
                                                       **body))
    assert r.status == 201, r
    return r.json


def rows(daemon):
    db = sqlite3.connect("file:%s/paddock.db?mode=ro" % daemon.root, uri=True)
    try:
        return db.execute("SELECT id, token_hash, metadata FROM e2b_sandboxes ORDER BY id").fetchall()
    finally:
        db.close()


def test_access_token_is_stored_hashed_and_checked(gateway_daemon):
    d = gateway_daemon
    key = token(d, "agent")
    s = create(d, key, metadata={"k": "v"})
    tok = s["envdAccessToken"]
    assert len(tok) == 43 and s["envdVersion"] == "0.5.7"
    (sid, hashes, meta), = rows(d)
    assert sid == s["sandboxID"]
    assert hashes == hashlib.sha256(tok.encode()).hexdigest()
    assert json.loads(meta) == {"k": "v"}
    with open("%s/paddock.db" % d.root, "rb") as f:
        assert tok.encode() not in f.read()

    envd = {"E2b-Sandbox-Id": sid}
    assert e2b(d, "GET", "/health", headers=envd).status == 401
    r = e2b(d, "GET", "/health", headers=dict(envd, **{"X-Access-Token": tok[:-1] + "x"}))
    assert r.status == 401 and r.json["code"] == 401
    assert e2b(d, "GET", "/health", headers=dict(envd, **{"X-Access-Token": tok})).status == 204
    # an API key is no access token
    assert e2b(d, "GET", "/health", key, headers=envd).status == 401
    r = e2b(d, "GET", "/health", headers={"E2b-Sandbox-Id": "inosuchsandbox00000",
                                          "X-Access-Token": tok})
    assert r.status == 502

    # connect issues another token; both work, and still only hashes are stored
    c = e2b(d, "POST", "/v2/sandboxes/%s/connect" % sid, key, {"timeout": 60})
    assert c.status == 200, c
    tok2 = c.json["envdAccessToken"]
    assert tok2 != tok
    for t in (tok, tok2):
        assert e2b(d, "GET", "/health", headers=dict(envd, **{"X-Access-Token": t})).status == 204
    (_, hashes, _), = rows(d)
    assert sorted(hashes.split(",")) == sorted(hashlib.sha256(t.encode()).hexdigest()
                                               for t in (tok, tok2))


def test_other_tokens_sandbox_is_404_and_bad_key_401(gateway_daemon):
    d = gateway_daemon
    mine, theirs = token(d, "mine"), token(d, "theirs")
    sid = create(d, mine)["sandboxID"]
    for method, path, body in (("GET", "/sandboxes/%s" % sid, None),
                               ("DELETE", "/sandboxes/%s" % sid, None),
                               ("POST", "/sandboxes/%s/timeout" % sid, {"timeout": 5}),
                               ("POST", "/sandboxes/%s/pause" % sid, {}),
                               ("POST", "/v2/sandboxes/%s/connect" % sid, {})):
        r = e2b(d, method, path, theirs, body)
        assert r.status == 404 and r.json["code"] == 404, (method, path, r)
    assert e2b(d, "GET", "/v2/sandboxes", theirs).json == []
    assert [s["sandboxID"] for s in e2b(d, "GET", "/v2/sandboxes", mine).json] == [sid]
    assert e2b(d, "GET", "/sandboxes/%s" % sid, "pdk_" + "A" * 43).status == 401
    assert e2b(d, "GET", "/sandboxes/%s" % sid).status == 401
    # the local administrator sees it
    assert d.api("GET", "/sandboxes/%s" % sid).status == 200
    assert e2b(d, "GET", "/sandboxes/%s" % sid, mine).status == 200


def test_list_paging_and_store_cleanup(gateway_daemon):
    d = gateway_daemon
    key = token(d, "pager")
    ids = sorted(create(d, key, metadata={"set": "a"})["sandboxID"] for _ in range(7))
    create(d, key, metadata={"set": "b"})

    def pages(limit):
        seen, nxt, n = [], None, 0
        while True:
            q = "/v2/sandboxes?metadata=set%3Da&limit=" + str(limit)
            if nxt:
                q += "&nextToken=" + nxt
            r = e2b(d, "GET", q, key)
            assert r.status == 200, r
            seen += [s["sandboxID"] for s in r.json]
            n += 1
            nxt = r.headers.get("X-Next-Token")
            if not nxt:
                return seen, n
            if n == 1:  # one goes away between pages: nothing is repeated or skipped
                assert e2b(d, "DELETE", "/sandboxes/%s" % seen[0], key).status == 204

    seen, n = pages(3)
    assert n == 3 and seen == ids and len(set(seen)) == 7
    left = ids[1:]
    seen, n = pages(6)
    assert (seen, n) == (left, 1)  # exactly one page: no X-Next-Token on the last
    # every way of destroying the environment removes the E2B row
    assert d.api("DELETE", "/v1/envs/%s?force=1" % left[0]).status == 200
    assert left[0] not in [r[0] for r in rows(d)]
    r = e2b(d, "GET", "/sandboxes/%s" % left[0], key)
    assert r.status == 404 and r.json == {"code": 404, "message": "sandbox %s not found" % left[0]}
    assert len(rows(d)) == 6


def test_network_mapping(gateway_daemon):
    d = gateway_daemon
    key = token(d, "net")
    cases = [({"allow_internet_access": False}, "none", []),
             ({"network": {"denyOut": ["0.0.0.0/0"], "allowOut": ["1.1.1.1", "example.com"]}},
              "allow", ["1.1.1.1", "example.com"])]
    for body, mode, allow in cases:
        sid = create(d, key, **body)["sandboxID"]
        net = d.api("GET", "/v1/envs/%s" % sid).json["network"]
        assert net["mode"] == mode, net
        assert [str(a) for a in net.get("allow") or []] == allow
    r = e2b(d, "POST", "/v2/sandboxes", key, {"templateID": "base",
                                             "network": {"denyOut": ["10.0.0.0/8"]}})
    assert r.status == 400 and r.json["code"] == 400


def multipart(parts, boundary="b0undary"):
    body = b""
    for name, data in parts:
        body += (b"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                 b"Content-Type: application/octet-stream\r\n\r\n%s\r\n"
                 % (boundary.encode(), name.encode(), data))
    body += b"--%s--\r\n" % boundary.encode()
    return body, "multipart/form-data; boundary=" + boundary


def test_envd_refusals(gateway_daemon):
    d = gateway_daemon
    owner, other = token(d, "owner"), token(d, "other")
    s = create(d, owner)
    sid, tok = s["sandboxID"], s["envdAccessToken"]
    envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": tok}
    # a Paddock environment that is not an E2B sandbox looks missing through the gateway
    assert d.api("POST", "/v1/envs", {"name": "plain"}).status == 201
    r = e2b(d, "GET", "/health", headers={"E2b-Sandbox-Id": "plain", "X-Access-Token": "x"})
    assert r.status == 502
    # the local socket with another agent's token: as if missing; with the owner's: fine
    r = d.api("GET", "/health", headers={"E2b-Sandbox-Id": sid, "X-API-Key": other})
    assert r.status == 502
    assert d.api("GET", "/health", headers={"E2b-Sandbox-Id": sid,
                                             "Authorization": "Bearer " + owner}).status == 204
    # at most 100 files in one request, refused before anything is written
    body, ctype = multipart([("/tmp/f%d" % i, b"x") for i in range(101)])
    conn = TLSConnection(d.netns_path, "127.0.0.1", PLAIN, None, tls=False)
    try:
        conn.request("POST", "/files", body=body, headers=dict(envd, **{"Content-Type": ctype}))
        r = conn.getresponse()
        assert r.status == 413, r.read()
        r.read()
        body, ctype = multipart([("/tmp/a", b"A" * 1000), ("/tmp/empty", b""), ("b", b"\r\n--x")])
        conn.request("POST", "/files", body=body, headers=dict(envd, **{"Content-Type": ctype}))
        r = conn.getresponse()
        got = json.loads(r.read())
        assert r.status == 200, got
        assert [g["path"] for g in got] == ["/tmp/a", "/tmp/empty", "/home/user/b"]
    finally:
        conn.close()
    for path, want in (("/tmp/a", b"A" * 1000), ("/tmp/empty", b""), ("/home/user/b", b"\r\n--x")):
        r = e2b(d, "GET", "/files?path=" + path, headers=envd)
        assert (r.status, r.body) == (200, want)
    # a revoked owner token ends its sandboxes' access tokens
    assert d.api("DELETE", "/v1/tokens/owner").status == 200
    assert e2b(d, "GET", "/health", headers=envd).status == 401


def test_pause_keeps_a_deadline_and_metadata_is_bounded(gateway_daemon):
    d = gateway_daemon
    key = token(d, "pk")
    sid = create(d, key)["sandboxID"]
    assert e2b(d, "POST", "/sandboxes/%s/pause" % sid, key, {}).status == 204
    assert e2b(d, "POST", "/sandboxes/%s/pause" % sid, key, {}).json["code"] == 409
    ttl = d.api("GET", "/v1/envs/%s" % sid).json["ttl"]
    assert ttl == 7 * 86400
    r = e2b(d, "POST", "/v2/sandboxes/%s/connect" % sid, key, {"timeout": 30})
    assert r.status == 201
    assert d.api("GET", "/v1/envs/%s" % sid).json["ttl"] == 30
    big = {"k%d" % i: "v" * 4000 for i in range(5)}
    r = e2b(d, "POST", "/v2/sandboxes", key, {"templateID": "base", "metadata": big})
    assert r.status == 400 and r.json["code"] == 400


def test_kill_answers_once_gone_and_the_sandbox_is_404_meanwhile(gateway_daemon):
    """E2B's kill answers once the sandbox is gone; while it dies (held here by the v1
    freezer) E2B calls see a killed sandbox, the listing leaves it out, and other calls are
    answered."""
    d = gateway_daemon
    key = token(d, "killer")
    sid = create(d, key)["sandboxID"]
    other = create(d, key)["sandboxID"]
    state = d.freeze_from_outside(sid)
    answer = {}
    killer = threading.Thread(
        target=lambda: answer.update(r=e2b(d, "DELETE", "/sandboxes/%s" % sid, key)))
    try:
        killer.start()
        wait_for(lambda: d.inspect(sid)["state"] == "deleting", 10, what="the kill to start")
        r = e2b(d, "GET", "/sandboxes/%s" % sid, key)
        assert r.status == 404 and r.json["code"] == 404, r
        assert [s["sandboxID"] for s in e2b(d, "GET", "/v2/sandboxes", key).json] == [other]
        assert e2b(d, "GET", "/sandboxes/%s" % other, key).status == 200
        assert killer.is_alive()
    finally:
        d.thaw_from_outside(state)
    killer.join(30)
    assert answer["r"].status == 204, answer
    assert d.api("GET", "/v1/envs/%s" % sid).status == 404
    assert sid not in [r[0] for r in rows(d)]


def test_a_create_waiting_for_its_pid1_holds_up_no_one(gateway_daemon):
    # POST /v2/sandboxes starts its environment the way POST /v1/envs does (over several turns
    # of the daemon's loop): while one waits for its PID 1's setup, everyone else is served,
    # and the create is answered with its access token once the sandbox runs. lxcfs, stopped,
    # holds the setup (PID 1 waits for its FUSE mount).
    d = gateway_daemon
    key = token(d, "agent")
    lxcfs = [p for p, comm, _ in children_of(d.pid) if comm == "lxcfs"]
    if not lxcfs:
        pytest.skip("this daemon runs without lxcfs")
    box = {}

    def make():
        box["r"] = e2b(d, "POST", "/v2/sandboxes", key, {"templateID": "base", "timeout": 300,
                                                         "metadata": {"k": "slow"}})

    def setting_up():
        return [p for p, comm, _ in children_of(d.pid)
                if comm == "paddockd" and "/env-i" in proc_cgroup(p)
                and "/exec-" not in proc_cgroup(p)]

    other = create(d, key)
    os.kill(lxcfs[0], signal.SIGSTOP)
    try:
        t = threading.Thread(target=make)
        t.start()
        wait_for(setting_up, 10, 0.02, "the create's setup child")
        # Served meanwhile: a listing (without the sandbox being made), the other sandbox's
        # envd, the native API.
        listed = e2b(d, "GET", "/v2/sandboxes", key)
        assert listed.status == 200, listed
        assert [x["sandboxID"] for x in listed.json] == [other["sandboxID"]]
        envd = {"E2b-Sandbox-Id": other["sandboxID"], "X-Access-Token": other["envdAccessToken"]}
        assert e2b(d, "GET", "/health", headers=envd).status == 204
        assert d.api("GET", "/v1/system", timeout=10).status == 200
        assert t.is_alive() and "r" not in box
    finally:
        os.kill(lxcfs[0], signal.SIGCONT)
    t.join(60)
    r = box["r"]
    assert r.status == 201, r
    sid, tok = r.json["sandboxID"], r.json["envdAccessToken"]
    assert r.json["metadata"] == {"k": "slow"}
    envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": tok}
    assert e2b(d, "GET", "/health", headers=envd).status == 204
    assert sorted(x["sandboxID"] for x in e2b(d, "GET", "/v2/sandboxes", key).json) == \
        sorted([other["sandboxID"], sid])
    assert {row[0] for row in rows(d)} == {other["sandboxID"], sid}


def test_connecting_a_stopped_sandbox_starts_it_without_holding_up_anyone(gateway_daemon):
    # A sandbox stopped by hand (the native API) is started by E2B's connect the way
    # POST /v1/envs/NAME/start starts it (over turns of the loop): while its PID 1 sets up
    # (held by a stopped lxcfs) others are served and another connect waits for the same start;
    # then 201 for both, each with a new access token that envd accepts.
    d = gateway_daemon
    key = token(d, "waker")
    lxcfs = [p for p, comm, _ in children_of(d.pid) if comm == "lxcfs"]
    if not lxcfs:
        pytest.skip("this daemon runs without lxcfs")
    sid = create(d, key)["sandboxID"]
    other = create(d, key)
    assert d.api("POST", "/v1/envs/%s/stop?timeout=0" % sid).json["state"] == "stopped"
    box, box2 = {}, {}

    def connect(into):
        into["r"] = e2b(d, "POST", "/v2/sandboxes/%s/connect" % sid, key, {"timeout": 60})

    os.kill(lxcfs[0], signal.SIGSTOP)
    try:
        t = threading.Thread(target=connect, args=(box,))
        t.start()
        wait_for(lambda: d.inspect(sid)["state"] == "starting", 10, 0.02, "the start")
        envd = {"E2b-Sandbox-Id": other["sandboxID"], "X-Access-Token": other["envdAccessToken"]}
        assert e2b(d, "GET", "/health", headers=envd).status == 204
        t2 = threading.Thread(target=connect, args=(box2,))
        t2.start()
        time.sleep(0.5)  # the second connect reaches the daemon; the start cannot end: held
        assert d.inspect(sid)["state"] == "starting", d.inspect(sid)
        assert t.is_alive() and t2.is_alive() and "r" not in box and "r" not in box2
    finally:
        os.kill(lxcfs[0], signal.SIGCONT)
    t.join(60)
    t2.join(60)
    for r in (box["r"], box2["r"]):
        assert r.status == 201 and r.json["sandboxID"] == sid, (box["r"].status, box2["r"].status)
        envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": r.json["envdAccessToken"]}
        assert e2b(d, "GET", "/health", headers=envd).status == 204
    assert d.api("GET", "/v1/envs/%s" % sid).json["ttl"] == 60


def test_pausing_a_sandbox_that_is_starting_keeps_it_stopped(gateway_daemon):
    # E2B's pause while a connect starts the sandbox: the start is given up (the connect hears
    # so), the sandbox stays stopped, which E2B shows as paused, with the paused deadline.
    d = gateway_daemon
    key = token(d, "pauser")
    lxcfs = [p for p, comm, _ in children_of(d.pid) if comm == "lxcfs"]
    if not lxcfs:
        pytest.skip("this daemon runs without lxcfs")
    sid = create(d, key)["sandboxID"]
    assert d.api("POST", "/v1/envs/%s/stop?timeout=0" % sid).json["state"] == "stopped"
    box = {}
    os.kill(lxcfs[0], signal.SIGSTOP)
    try:
        t = threading.Thread(target=lambda: box.update(
            r=e2b(d, "POST", "/v2/sandboxes/%s/connect" % sid, key, {"timeout": 60})))
        t.start()
        wait_for(lambda: d.inspect(sid)["state"] == "starting", 10, 0.02, "the start")
        assert e2b(d, "POST", "/sandboxes/%s/pause" % sid, key, {}).status == 204
        t.join(60)
    finally:
        os.kill(lxcfs[0], signal.SIGCONT)
    assert box["r"].status == 409 and "stopped while it started" in box["r"].json["message"], box
    e = d.inspect(sid)
    assert e["state"] == "stopped" and e["ttl"] == 7 * 86400, e
    assert e2b(d, "GET", "/sandboxes/%s" % sid, key).json["state"] == "paused"
