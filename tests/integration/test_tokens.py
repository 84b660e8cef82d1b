"""API tokens: Bearer authentication on the local socket, ownership (another token's environment
is a 404), admin-only routes, quotas (also under parallel creates), revocation and expiry ending
open sessions, and the secret stored only as a hash."""
import hashlib
import http.client
import json
import os
import re
import sqlite3
import threading
import time
import urllib.parse

import wsclient

SECRET = re.compile(r"^pdk_[A-Za-z0-9_-]{43}$")


def make_token(daemon, name, **fields):
    r = daemon.api("POST", "/v1/tokens", dict(name=name, **fields))
    assert r.status == 201, r
    assert SECRET.match(r.json["secret"]), r.json
    return r.json["secret"]


def bearer(secret):
    return {"Authorization": "Bearer " + secret}


def as_token(daemon, secret, method, path, body=None):
    return daemon.api(method, path, body, headers=bearer(secret))


def create_as(daemon, secret, name, **fields):
    return as_token(daemon, secret, "POST", "/v1/envs", dict(name=name, **fields))


def ws_as(daemon, secret, env, spec):
    """A WebSocket exec session sent with the token (wsclient takes no extra headers)."""
    orig = wsclient.handshake_request
    wsclient.handshake_request = lambda path, key=None, extra_headers=None: orig(
        path, key, ["Authorization: Bearer " + secret])
    try:
        return wsclient.WS(daemon.sock, env, spec)
    finally:
        wsclient.handshake_request = orig


def test_secret_is_shown_once_and_stored_only_as_a_hash(daemon):
    p = daemon.cli("token", "create", "agent1", "--max-envs", "3", "--max-cpus", "2",
                   "--max-memory", "1G", "--rate", "10/s", "--expires", "30d")
    secret = p.out.strip()
    assert SECRET.match(secret), p.out
    assert "cannot be shown again" in p.err
    ls = daemon.cli("token", "ls")
    assert secret not in ls.out
    lines = ls.out.splitlines()
    assert lines[0].split() == ["NAME", "ADMIN", "LIMITS", "RATE", "EXPIRES", "CREATED"], ls.out
    assert lines[1].startswith("agent1"), ls.out
    assert "envs=3" in lines[1] and "cpus=2" in lines[1] and "10/s" in lines[1], ls.out
    listed = daemon.api("GET", "/v1/tokens").json["tokens"]
    assert [t["name"] for t in listed] == ["agent1"]
    t = listed[0]
    assert "secret" not in t and "hash" not in t, t
    assert t["max_envs"] == 3 and t["max_cpus"] == 2 and t["max_memory"] == 1 << 30, t
    assert t["rate"] == 10 and t["admin"] is False and t["expires_at"], t
    # The database holds the SHA-256 of the secret, and the secret nowhere.
    db = sqlite3.connect(os.path.join(daemon.root, "paddock.db"))
    try:
        rows = db.execute("SELECT * FROM tokens").fetchall()
    finally:
        db.close()
    assert len(rows) == 1
    assert hashlib.sha256(secret.encode()).hexdigest() in rows[0]
    assert not any(secret in str(col) for col in rows[0])
    with open(os.path.join(daemon.root, "paddock.db"), "rb") as f:
        assert secret.encode() not in f.read()
    # the token works; a second one of the same name is a conflict
    assert as_token(daemon, secret, "GET", "/v1/envs").status == 200
    r = daemon.api("POST", "/v1/tokens", {"name": "agent1"})
    assert r.status == 409 and r.error()[0] == "conflict", r
    r = daemon.api("POST", "/v1/tokens", {"name": "bad/name"})
    assert r.status == 400, r
    r = daemon.api("POST", "/v1/tokens", {"name": "x", "rate": "fast"})
    assert r.status == 400 and "rate" in r.json["error"]["message"], r
    assert daemon.cli("token", "rm", "agent1").out.strip() == "agent1"
    assert daemon.api("GET", "/v1/tokens").json["tokens"] == []
    assert daemon.cli("token", "rm", "agent1", check=False).returncode == 1


def test_wrong_malformed_expired_and_revoked_tokens_are_401(daemon):
    good = make_token(daemon, "good")
    wrong = "pdk_" + "A" * 43
    for headers in ({"Authorization": "Bearer " + wrong},
                    {"Authorization": "Bearer nonsense"},
                    {"Authorization": "Basic Zm9vOmJhcg=="},
                    {"Authorization": "Bearer"},
                    {"Authorization": "Bearer " + good[:-1]}):
        r = daemon.api("GET", "/v1/envs", headers=headers)
        assert r.status == 401 and r.error()[0] == "unauthorized", (headers, r)
    assert as_token(daemon, good, "GET", "/v1/envs").status == 200
    # expired: made to last one second
    short = make_token(daemon, "short", expires="1s")
    time.sleep(2.2)
    r = as_token(daemon, short, "GET", "/v1/envs")
    assert r.status == 401 and "invalid or expired token" in r.json["error"]["message"], r
    listed = {t["name"]: t for t in daemon.api("GET", "/v1/tokens").json["tokens"]}
    assert listed["short"]["expired"] is True and listed["good"]["expired"] is False
    # revoked
    assert daemon.api("DELETE", "/v1/tokens/good").status == 200
    r = as_token(daemon, good, "GET", "/v1/envs")
    assert r.status == 401, r
    # the CLI sends $PADDOCK_TOKEN
    p = daemon.cli("ls", check=False, env={"PADDOCK_TOKEN": good})
    assert p.returncode == 1 and "invalid or expired token" in p.err, (p.out, p.err)


def test_an_agent_sees_and_acts_only_on_its_own_environments(daemon):
    a = make_token(daemon, "ta")
    b = make_token(daemon, "tb")
    r = create_as(daemon, a, "a1")
    assert r.status == 201 and r.json["owner"] == "ta", r
    assert create_as(daemon, b, "b1").status == 201
    # B on A's environment: everything is a 404, as for a name that does not exist
    for method, path, body in [
            ("GET", "/v1/envs/a1", None),
            ("POST", "/v1/envs/a1/exec", {"cmd": ["true"]}),
            ("GET", "/v1/envs/a1/files?path=/etc/hostname", None),
            ("GET", "/v1/envs/a1/files/list?path=/", None),
            ("PATCH", "/v1/envs/a1", {"cpus": 0.5}),
            ("POST", "/v1/envs/a1/stop", None),
            ("POST", "/v1/envs/a1/fork", {"name": "stolen"}),
            ("POST", "/v1/envs/a1/commit", {"image": "stolen"}),
            ("GET", "/v1/envs/a1/ports", None),
            ("DELETE", "/v1/envs/a1?force=1", None)]:
        r = as_token(daemon, b, method, path, body)
        assert r.status == 404 and r.error()[0] == "not_found", (method, path, r)
        assert "a1" in r.json["error"]["message"]
    # listings: each its own; the administrator all, with owners
    assert [e["name"] for e in as_token(daemon, a, "GET", "/v1/envs").json["envs"]] == ["a1"]
    assert [e["name"] for e in as_token(daemon, b, "GET", "/v1/envs").json["envs"]] == ["b1"]
    owners = {e["name"]: e["owner"] for e in daemon.api("GET", "/v1/envs").json["envs"]}
    assert owners == {"a1": "ta", "b1": "tb"}, owners
    assert as_token(daemon, b, "GET", "/v1/system").json["envs"] == 1
    assert daemon.api("GET", "/v1/system").json["envs"] == 2
    p = daemon.cli("ls", env={"PADDOCK_TOKEN": b})
    assert "b1" in p.out and "a1" not in p.out, p.out
    # A still has its environment, and acts on it
    res = as_token(daemon, a, "POST", "/v1/envs/a1/exec", {"cmd": ["echo", "mine"]})
    assert res.status == 200 and res.json["stdout"] == "mine\n", res
    # tokens survive a restart of the daemon; revoked and made again (a new secret), the name
    # owns its environments again
    daemon.restart()
    assert [e["name"] for e in as_token(daemon, a, "GET", "/v1/envs").json["envs"]] == ["a1"]
    assert daemon.api("DELETE", "/v1/tokens/ta").status == 200
    assert as_token(daemon, a, "GET", "/v1/envs").status == 401
    a2 = make_token(daemon, "ta")
    assert a2 != a
    assert [e["name"] for e in as_token(daemon, a2, "GET", "/v1/envs").json["envs"]] == ["a1"]
    assert as_token(daemon, a2, "DELETE", "/v1/envs/a1?force=1").status == 200
    assert as_token(daemon, b, "DELETE", "/v1/envs/b1?force=1").status == 200


def test_agents_use_images_but_do_not_change_them_nor_tokens(daemon):
    a = make_token(daemon, "agent")
    admin = make_token(daemon, "boss", admin=True)
    r = as_token(daemon, a, "GET", "/v1/images")
    assert r.status == 200 and any(i["name"] == "base" for i in r.json["images"]), r
    assert create_as(daemon, a, "mine", image="base").status == 201
    for method, path, body in [
            ("POST", "/v1/images", {"pull": "debian:bookworm"}),
            ("DELETE", "/v1/images/base", None),
            ("POST", "/v1/envs/mine/commit", {"image": "img2"}),
            ("GET", "/v1/tokens", None),
            ("POST", "/v1/tokens", {"name": "more"}),
            ("DELETE", "/v1/tokens/boss", None)]:
        r = as_token(daemon, a, method, path, body)
        assert r.status == 403 and r.error()[0] == "forbidden", (method, path, r)
        assert "token agent may not" in r.json["error"]["message"], r
    p = daemon.cli("token", "ls", check=False, env={"PADDOCK_TOKEN": a})
    assert p.returncode == 1 and "may not manage tokens" in p.err, p.err
    # an admin token may, and sees everyone's environments
    r = as_token(daemon, admin, "GET", "/v1/tokens")
    assert r.status == 200 and {t["name"] for t in r.json["tokens"]} == {"agent", "boss"}
    assert [e["name"] for e in as_token(daemon, admin, "GET", "/v1/envs").json["envs"]] == ["mine"]
    assert daemon.api("DELETE", "/v1/envs/mine?force=1").status == 200


def test_twenty_parallel_creates_never_pass_max_envs(daemon):
    secret = make_token(daemon, "burst", max_envs=5)
    results = [None] * 20

    def one(i):
        results[i] = create_as(daemon, secret, "p%02d" % i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ok = [r for r in results if r.status == 201]
    refused = [r for r in results if r.status != 201]
    assert len(ok) == 5, [r.status for r in results]
    for r in refused:
        assert r.status == 403 and r.error()[0] == "quota_exceeded", r
        assert "token burst: max-envs 5 reached" in r.json["error"]["message"], r
    assert len(as_token(daemon, secret, "GET", "/v1/envs").json["envs"]) == 5
    # one freed, one more fits
    gone = ok[0].json["name"]
    assert as_token(daemon, secret, "DELETE", "/v1/envs/%s?force=1" % gone).status == 200
    assert create_as(daemon, secret, "again").status == 201


def test_cpu_and_memory_quotas_sum_over_running_environments(daemon):
    s = make_token(daemon, "capped", max_cpus="1", max_memory="1G")
    # a computer has no cpu limit by default: the token asks for one
    r = create_as(daemon, s, "nolimit", kind="computer")
    assert r.status == 403 and r.error()[0] == "quota_exceeded", r
    assert "max-cpus 1: set a cpus limit" in r.json["error"]["message"], r
    assert create_as(daemon, s, "c1", kind="computer", cpus=0.5, memory="256M").status == 201
    assert create_as(daemon, s, "c2", kind="computer", cpus=0.5, memory="256M").status == 201
    r = create_as(daemon, s, "c3", kind="computer", cpus=0.25, memory="256M")
    assert r.status == 403 and "token capped: max-cpus 1 exceeded" in r.json["error"]["message"]
    assert "(1 in use by running environments + 0.25 asked)" in r.json["error"]["message"], r
    # update: more cpus for c1 would pass the sum
    r = as_token(daemon, s, "PATCH", "/v1/envs/c1", {"cpus": 0.75})
    assert r.status == 403 and "max-cpus" in r.json["error"]["message"], r
    assert daemon.inspect("c1")["limits"]["cpus"] == 0.5
    # a stopped environment does not count; starting it again does
    assert as_token(daemon, s, "POST", "/v1/envs/c2/stop").status == 200
    r = as_token(daemon, s, "PATCH", "/v1/envs/c1", {"cpus": 0.75})
    assert r.status == 200 and r.json["limits"]["cpus"] == 0.75, r
    r = as_token(daemon, s, "POST", "/v1/envs/c2/start")
    assert r.status == 403 and "max-cpus" in r.json["error"]["message"], r
    r = as_token(daemon, s, "POST", "/v1/envs/c2/restart")
    assert r.status == 403 and "max-cpus" in r.json["error"]["message"], r
    assert daemon.inspect("c2")["state"] == "stopped"
    # memory
    r = create_as(daemon, s, "m1", kind="computer", cpus=0.25, memory="900M")
    assert r.status == 403 and "token capped: max-memory 1G exceeded" in \
        r.json["error"]["message"], r
    r = as_token(daemon, s, "PATCH", "/v1/envs/c1", {"memory": None})
    assert r.status == 403 and "set a memory limit" in r.json["error"]["message"], r
    # the local administrator has no quotas
    assert daemon.api("POST", "/v1/envs/c2/start").status == 200


def test_revoking_a_token_closes_its_open_sessions_at_once(daemon):
    s = make_token(daemon, "shell")
    assert create_as(daemon, s, "sh1").status == 201
    ws = ws_as(daemon, s, "sh1", {"cmd": ["sh"]})
    try:
        ws.send_bytes(b"echo rea''dy\n")
        ws.collect(until=lambda out: b"ready" in out)
        # a streaming response of the same token: the NDJSON watch of a directory
        watch = daemon.conn(timeout=30)
        watch.request("GET", "/v1/envs/sh1/files/watch?" +
                      urllib.parse.urlencode({"path": "/tmp"}), headers=bearer(s))
        wr = watch.getresponse()
        assert wr.status == 200
        # and a request still waiting for its answer: wait for a background process
        r = as_token(daemon, s, "POST", "/v1/envs/sh1/exec", {"cmd": ["sleep", "60"],
                                                              "detach": True})
        assert r.status in (200, 201, 202), r
        waited = []
        waiter = threading.Thread(target=lambda: waited.append(as_token(
            daemon, s, "POST", "/v1/envs/sh1/processes/%d/wait" % r.json["id"])))
        waiter.start()
        time.sleep(0.3)
        assert not waited, waited
        t0 = time.monotonic()
        assert daemon.api("DELETE", "/v1/tokens/shell").status == 200
        waiter.join(5)
        assert waited and waited[0].status == 401, waited
        out, ctl, code = ws.collect()
        assert time.monotonic() - t0 < 2, "the session outlived its token"
        assert code == 1008, (code, ctl)
        assert any(m.get("error", {}).get("code") == "unauthorized" for m in ctl), ctl
        ended = []

        def drain():
            try:
                while wr.read(1):
                    pass
            except (http.client.IncompleteRead, OSError):
                pass
            ended.append(time.monotonic())

        th = threading.Thread(target=drain)
        th.start()
        th.join(5)
        assert ended and ended[0] - t0 < 3, "the stream outlived its token"
        watch.close()
    finally:
        ws.close()
    assert daemon.api("DELETE", "/v1/envs/sh1?force=1").status == 200


def test_an_expiring_token_ends_its_sessions(daemon):
    s = make_token(daemon, "brief", expires="3s")
    assert create_as(daemon, s, "ex1").status == 201
    ws = ws_as(daemon, s, "ex1", {"cmd": ["sleep", "60"]})
    try:
        t0 = time.monotonic()
        out, ctl, code = ws.collect()
        assert code == 1008, (code, ctl)
        assert time.monotonic() - t0 < 6
    finally:
        ws.close()
    assert daemon.api("DELETE", "/v1/envs/ex1?force=1").status == 200


def test_a_fork_belongs_to_the_forking_token_and_counts_against_its_quotas(daemon):
    s = make_token(daemon, "forker", max_envs=2, max_disk="300M")
    r = create_as(daemon, s, "f1", kind="computer")
    assert r.status == 403 and "max-disk 300M: set a disk limit" in r.json["error"]["message"]
    assert create_as(daemon, s, "f1", kind="computer", disk="200M").status == 201
    # the disks of its computers: 200M given, 200M more would pass 300M
    r = as_token(daemon, s, "POST", "/v1/envs/f1/fork", {"name": "f2"})
    assert r.status == 403 and r.error()[0] == "quota_exceeded", r
    assert "token forker: max-disk 300M exceeded (200M given to its computers + 200M asked)" \
        in r.json["error"]["message"], r
    assert as_token(daemon, s, "PATCH", "/v1/envs/f1", {"disk": "100M"}).status == 200
    r = as_token(daemon, s, "POST", "/v1/envs/f1/fork", {"name": "f2"})
    assert r.status == 201 and r.json["owner"] == "forker", r
    r = as_token(daemon, s, "POST", "/v1/envs/f1/fork", {"name": "f3"})
    assert r.status == 403 and "max-envs 2 reached" in r.json["error"]["message"], r
    # the administrator's fork of the agent's computer is the administrator's
    r = daemon.api("POST", "/v1/envs/f1/fork", {"name": "f4"})
    assert r.status == 201 and r.json["owner"] is None, r
    names = [e["name"] for e in as_token(daemon, s, "GET", "/v1/envs").json["envs"]]
    assert sorted(names) == ["f1", "f2"], names


def test_links_do_not_reach_another_tokens_environment(daemon):
    """links are symmetric, so naming another token's environment would open both ways: a link
    holds only between environments of the same owner."""
    if daemon.api("GET", "/v1/system").json["network"] != "routed":
        import pytest
        pytest.skip("no networking in this daemon")
    a = make_token(daemon, "la-owner")
    b = make_token(daemon, "lb-owner")
    ips = {}
    for secret, name, links in ((a, "la", []), (a, "la2", ["la"]), (b, "lb", ["la"])):
        r = create_as(daemon, secret, name, kind="computer", network={"links": links})
        assert r.status == 201, r
        ips[name] = r.json["network"]["ip"]
    for name in ips:
        daemon.sh(name, "mkdir -p /tmp/www && echo 'hello from %s' > /tmp/www/index.html && "
                        "httpd -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1" % name)
    get = lambda ip: ["sh", "-c", "timeout 2 wget -q -O - http://%s:8000/" % ip]
    # same owner: the link works (both ways)
    assert daemon.exec("la2", get(ips["la"]))["stdout"] == "hello from la\n"
    assert daemon.exec("la", get(ips["la2"]))["stdout"] == "hello from la2\n"
    # B's link to A's environment reaches nothing, in either direction
    for src, dst in (("lb", "la"), ("la", "lb")):
        res = daemon.exec(src, get(ips[dst]))
        assert res["exit_code"] != 0 and "hello" not in res["stdout"], (src, dst, res)
