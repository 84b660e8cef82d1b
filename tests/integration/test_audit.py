"""The audit log (docs/security.md, "Audit log"): every mutating call and every exec, durable
across kill -9, size-capped with rotation, readable through GET /v1/audit and `paddock audit`."""
import json
import os
import stat
import time

from conftest import wait_for
from wsclient import WS


def audit(d, **query):
    q = "&".join("%s=%s" % kv for kv in query.items())
    r = d.api("GET", "/v1/audit" + ("?" + q if q else ""))
    assert r.status == 200, r
    return r.json["records"]


def find(records, action, **fields):
    hits = [r for r in records if r["action"] == action and
            all(r.get(k) == v for k, v in fields.items())]
    assert hits, "no %s %s in %s" % (action, fields, json.dumps(records, indent=1))
    return hits[-1]


def log_lines(d):
    lines = []
    adir = os.path.join(d.root, "audit")
    for name in sorted(os.listdir(adir)):
        with open(os.path.join(adir, name)) as f:
            lines += [json.loads(line) for line in f]
    return lines


def test_mutations_and_execs_are_recorded(daemon):
    d = daemon
    d.create("a1", "--computer")
    res = d.exec("a1", ["sh", "-c", "sleep 0.3; exit 3"])
    assert res["exit_code"] == 3
    # a file write, a directory, a move, a delete
    r = d.api("PUT", "/v1/envs/a1/files?path=/root/secret.txt", raw=b"x" * 1234,
              headers={"Content-Type": "application/octet-stream"})
    assert r.status in (200, 201), r
    assert d.api("POST", "/v1/envs/a1/files/mkdir?path=/root/dir").status in (200, 201)
    assert d.api("POST", "/v1/envs/a1/files/move",
                 {"from": "/root/secret.txt", "to": "/root/dir/s.txt"}).status == 200
    assert d.api("DELETE", "/v1/envs/a1/files?path=/root/dir/s.txt").status in (200, 204)
    # a network policy change
    assert d.api("PATCH", "/v1/envs/a1", {"network": {"mode": "none"}}).status == 200
    # a refused call is recorded with its status
    assert d.api("POST", "/v1/envs/a1/exec", {"cmd": []}).status == 400
    # reads are not
    d.api("GET", "/v1/envs/a1")
    d.cli("rm", "-f", "a1")

    recs = audit(d)
    for rec in recs:
        assert set(rec) >= {"time", "token", "action", "env", "status", "duration_ms"}, rec
        assert rec["time"].endswith("Z") and len(rec["time"]) == 24, rec
        assert not rec["action"].startswith(("GET /v1/envs/{name} ", "GET /v1/audit")), rec
    create = find(recs, "POST /v1/envs", status=201)
    assert create["token"] == "" and create["name"] == "a1" and create["kind"] == "computer"
    assert create["env"] == "a1", create  # filed under the environment it made
    ex = find(recs, "POST /v1/envs/{name}/exec", env="a1", status=200)
    assert ex["argv"] == ["sh", "-c", "sleep 0.3; exit 3"], ex
    assert ex["exit_code"] == 3 and ex["duration_ms"] >= 300, ex
    put = find(recs, "PUT /v1/envs/{name}/files", env="a1")
    assert put["path"] == "/root/secret.txt" and put["size"] == 1234, put
    assert "x" * 100 not in json.dumps(recs)  # never file contents
    find(recs, "POST /v1/envs/{name}/files/mkdir", path="/root/dir")
    find(recs, "POST /v1/envs/{name}/files/move", **{"from": "/root/secret.txt"})
    find(recs, "DELETE /v1/envs/{name}/files", path="/root/dir/s.txt")
    patch = find(recs, "PATCH /v1/envs/{name}", env="a1")
    assert patch["network"] == {"mode": "none"} and patch["status"] == 200, patch
    bad = find(recs, "POST /v1/envs/{name}/exec", status=400)
    assert bad["env"] == "a1"
    find(recs, "DELETE /v1/envs/{name}", env="a1")
    assert not [r for r in recs if r["action"].startswith("GET ")], recs
    # newest last
    assert [r["time"] for r in recs] == sorted(r["time"] for r in recs)

    # the same records in the file, which is private
    adir = os.path.join(d.root, "audit")
    assert stat.S_IMODE(os.stat(adir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(adir, "audit.log")).st_mode) == 0o600
    assert log_lines(d) == recs

    # the CLI
    p = d.cli("audit", "--env", "a1")
    head = p.out.splitlines()[0].split()
    assert head == ["TIME", "TOKEN", "ENV", "ACTION", "STATUS", "DETAIL"], p.out
    assert "exit 3" in p.out and "/root/secret.txt" in p.out, p.out
    j = json.loads(d.cli("audit", "--env", "a1", "--json").out)
    assert j["records"] == [r for r in recs if r["env"] == "a1"]


def test_background_process_and_terminal_exec_are_recorded(daemon):
    d = daemon
    d.create("bg", "--computer")
    r = d.api("POST", "/v1/envs/bg/exec", {"cmd": ["sh", "-c", "exit 7"], "detach": True})
    assert r.status == 201, r
    pid = r.json["id"]
    wait_for(lambda: d.api("GET", "/v1/envs/bg/processes/%s" % pid).json.get("exit_code") == 7,
             10, 0.05, "the background process to exit")
    recs = audit(d, env="bg")
    started = find(recs, "POST /v1/envs/{name}/exec", status=201)
    assert started["detach"] is True and started["argv"] == ["sh", "-c", "exit 7"]
    ended = [x for x in recs if x.get("exit_code") == 7]
    assert ended and ended[-1]["argv"] == ["sh", "-c", "exit 7"], recs
    # a terminal session, recorded when it ends (a GET, but a command ran)
    ws = WS(d.sock, "bg", {"cmd": ["sh", "-c", "sleep 0.2; exit 5"]})
    _, ctl, _ = ws.collect()
    assert ctl[-1]["exit_code"] == 5
    rec = wait_for(lambda: [x for x in audit(d, env="bg") if x.get("exit_code") == 5],
                   5, 0.05, "the terminal session's record")[-1]
    assert rec["action"] == "GET /v1/envs/{name}/exec/ws" and rec["status"] == 101, rec
    assert rec["argv"] == ["sh", "-c", "sleep 0.2; exit 5"] and rec["exec_ms"] >= 200, rec
    # a streamed exec, and the CLI's exec
    p = d.cli("exec", "bg", "--", "sh", "-c", "exit 4", check=False)
    assert p.returncode == 4
    rec = find(audit(d, env="bg"), "POST /v1/envs/{name}/exec", exit_code=4)
    assert rec["status"] == 200 and rec["argv"] == ["sh", "-c", "exit 4"], rec


def test_long_argv_is_capped(daemon):
    d = daemon
    d.create("big", "--computer")
    argv = ["echo"] + ["a" * 1000] * 10
    assert d.exec("big", argv)["exit_code"] == 0
    rec = find(audit(d, env="big"), "POST /v1/envs/{name}/exec", status=200)
    assert rec["argv_truncated"] is True
    assert sum(len(a) for a in rec["argv"]) <= 4096, rec


def test_exec_record_survives_kill_9(daemon):
    d = daemon
    d.create("k9", "--computer")
    for i in range(5):
        assert d.exec("k9", ["sh", "-c", "exit %d" % i])["exit_code"] == i
        d.kill9()  # right after the answer came
        d.start()
    recs = audit(d, env="k9")
    codes = [r["exit_code"] for r in recs if r["action"] == "POST /v1/envs/{name}/exec"]
    assert codes == [0, 1, 2, 3, 4], recs


def test_torn_last_line_does_not_swallow_the_next_record(daemon):
    d = daemon
    d.create("torn", "--computer")
    d.stop()
    with open(os.path.join(d.root, "audit", "audit.log"), "a") as f:
        f.write('{"time":"2026-12-02T0')  # what a short write (a full disk) leaves
    d.start()
    d.exec("torn", ["sh", "-c", "exit 6"])
    assert [r.get("exit_code") for r in audit(d, env="torn")][-1] == 6


def test_rotation_keeps_the_size_cap(make_daemon):
    d = make_daemon(extra_args=["--audit-max-size", "4K", "--audit-keep", "3"])
    d.create("rot", "--computer")
    for i in range(120):
        r = d.api("POST", "/v1/envs/rot/files/mkdir?path=/tmp/dir-%03d" % i)
        assert r.status in (200, 201), r
    adir = os.path.join(d.root, "audit")
    names = sorted(os.listdir(adir))
    assert names == ["audit.log", "audit.log.1", "audit.log.2"], names
    for n in names:
        assert os.path.getsize(os.path.join(adir, n)) <= 4096, n
        assert stat.S_IMODE(os.stat(os.path.join(adir, n)).st_mode) == 0o600
    # the query reads across the files, newest last; the oldest records are gone
    recs = audit(d, env="rot")
    paths = [r["path"] for r in recs if r.get("path", "").startswith("/tmp/dir-")]
    assert paths[-1] == "/tmp/dir-119" and paths == sorted(paths), paths
    assert "/tmp/dir-000" not in paths and len(paths) > 10, paths
    assert len(log_lines(d)) == len(audit(d))


def test_filters(daemon):
    d = daemon
    d.create("f1", "--computer")
    d.create("f2", "--computer")
    d.exec("f1", ["true"])
    d.exec("f2", ["true"])
    recs = audit(d, env="f1")
    assert recs and {r["env"] for r in recs} == {"f1"}, recs
    assert len(audit(d, env="f1", limit=1)) == 1
    assert audit(d, env="f1", limit=1)[0] == recs[-1]  # the newest
    assert {r["token"] for r in audit(d, token="")} == {""}
    assert audit(d, token="nobody") == []
    time.sleep(1.2)
    mark = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    time.sleep(1.1)
    d.exec("f2", ["sh", "-c", "exit 9"])
    since = audit(d, since=mark)
    assert [r.get("exit_code") for r in since] == [9], since
    assert [r.get("exit_code") for r in audit(d, since="2s")] == [9]
    assert len(audit(d, since="1h")) == len(audit(d))
    p = d.cli("audit", "--env", "f2", "--since", "2s", "--json")
    assert [r.get("exit_code") for r in json.loads(p.out)["records"]] == [9]
    for bad in ("since=yesterday", "limit=0", "limit=10001", "env=..bad"):
        assert d.api("GET", "/v1/audit?" + bad).status == 400, bad
