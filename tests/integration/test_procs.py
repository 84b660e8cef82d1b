"""Background processes (exec -d): start, list, output (buffered and followed), bounded
buffer, signals, wait, forget, client disconnects, isolation and the environment's lifecycle."""
import base64
import json
import select
import subprocess
import time

import pytest

from conftest import PADDOCK, wait_for

# Blocks until /tmp/go exists inside the environment (so tests control when output appears).
WAIT_GO = "while [ ! -e /tmp/go ]; do sleep 0.1; done"


@pytest.fixture
def box(daemon):
    daemon.create("box", "--computer")
    return daemon


def start(d, env, cmd, expect=201, **kw):
    """exec detach through the API; returns the process object."""
    if isinstance(cmd, str):
        cmd = ["sh", "-c", cmd]
    body = {"cmd": cmd, "detach": True}
    body.update(kw)
    r = d.api("POST", "/v1/envs/%s/exec" % env, body, timeout=30)
    assert r.status == expect, r
    return r.json


def proc(d, env, pid):
    r = d.api("GET", "/v1/envs/%s/processes/%s" % (env, pid))
    assert r.status == 200, r
    return r.json


def exited(d, env, pid):
    p = proc(d, env, pid)
    return p if p["state"] == "exited" else None


def output_lines(d, env, pid, follow=False):
    r = d.api("GET", "/v1/envs/%s/processes/%s/output%s" % (env, pid, "?follow=1" if follow else ""))
    assert r.status == 200, r
    assert r.headers.get("Content-Type", "").startswith("application/x-ndjson"), r.headers
    return [json.loads(l) for l in r.body.splitlines()]


def collect(lines, field):
    out = b""
    for l in lines:
        if field in l:
            v = l[field]
            out += base64.b64decode(v) if l.get("encoding") == "base64" else v.encode()
    return out


def read_line(f, timeout=30):
    """One line from a pipe, failing (instead of hanging) when nothing comes."""
    r, _, _ = select.select([f], [], [], timeout)
    assert r, "no output within %ss" % timeout
    return f.readline()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_detach_returns_at_once_and_ps_shows_states(box):
    # a 30 s sleep does not hold the request: 201 with a running record
    p = start(box, "box", ["sleep", "30"])
    assert p["state"] == "running" and p["exit_code"] is None, p
    assert p["cmd"] == "sleep 30" and p["finished_at"] is None and p["started_at"], p
    sleeper = p["id"]
    # the CLI prints just the id
    out = box.cli("exec", "-d", "box", "--", "sh", "-c", "exit 7").out.strip()
    assert out.isdigit() and int(out) != sleeper, out
    seven = int(out)
    killed = start(box, "box", ["sleep", "31"])["id"]
    assert box.api("POST", "/v1/envs/box/processes/%d/signal" % killed,
                   {"signal": "KILL"}).status == 200
    wait_for(lambda: exited(box, "box", seven), what="exit 7")
    wait_for(lambda: exited(box, "box", killed), what="killed")

    r = box.api("GET", "/v1/envs/box/processes")
    assert r.status == 200, r
    ps = {x["id"]: x for x in r.json["processes"]}
    assert [x["id"] for x in r.json["processes"]] == [sleeper, seven, killed], "oldest first"
    assert ps[sleeper]["state"] == "running" and ps[sleeper]["exit_code"] is None
    assert ps[seven]["state"] == "exited" and ps[seven]["exit_code"] == 7
    assert ps[seven]["finished_at"]
    assert ps[killed]["state"] == "exited" and ps[killed]["exit_code"] == 128 + 9

    table = box.cli("ps", "box").out.splitlines()
    assert table[0].split()[:5] == ["ID", "STATE", "EXIT", "STARTED", "CMD"], table
    rows = {int(l.split()[0]): l for l in table[1:]}
    assert set(rows) == {sleeper, seven, killed}, table
    assert "running" in rows[sleeper] and "sleep 30" in rows[sleeper]
    assert rows[seven].split()[1:3] == ["exited", "7"], rows[seven]
    assert rows[killed].split()[1:3] == ["exited", "137"], rows[killed]
    js = json.loads(box.cli("ps", "box", "--json").out)
    assert sorted(x["id"] for x in js["processes"]) == sorted(rows)


def test_output_is_kept_and_read_later(box):
    pid = start(box, "box", "echo out1; echo err1 >&2; printf 'out2\\n'; exit 3")["id"]
    wait_for(lambda: exited(box, "box", pid), what="exit")
    lines = output_lines(box, "box", pid)
    assert collect(lines, "stdout") == b"out1\nout2\n"
    assert collect(lines, "stderr") == b"err1\n"
    assert lines[-1]["exit_code"] == 3 and lines[-1]["timed_out"] is False, lines
    # read again: still there; the CLI splits it to stdout/stderr and exits 0
    assert collect(output_lines(box, "box", pid), "stdout") == b"out1\nout2\n"
    p = box.cli("logs", "box", pid)
    assert p.returncode == 0 and p.out == "out1\nout2\n" and p.err == "err1\n", (p.out, p.err)
    # binary output comes base64-encoded
    b = start(box, "box", "printf '\\377\\000\\001'")["id"]
    wait_for(lambda: exited(box, "box", b), what="exit")
    assert collect(output_lines(box, "box", b), "stdout") == b"\xff\x00\x01"


def test_follow_delivers_live_and_ends_at_exit(box):
    pid = start(box, "box", "echo one; %s; echo two >&2; exit 4" % WAIT_GO)["id"]
    c = box.conn(timeout=30)
    try:
        c.request("GET", "/v1/envs/box/processes/%d/output?follow=1" % pid)
        r = c.getresponse()
        assert r.status == 200
        assert json.loads(r.readline()) == {"stdout": "one\n"}
        # "two" cannot have been written yet: the process is still waiting
        assert proc(box, "box", pid)["state"] == "running"
        box.sh("box", "touch /tmp/go")
        assert json.loads(r.readline()) == {"stderr": "two\n"}
        end = json.loads(r.readline())
        assert end["exit_code"] == 4, end
        assert r.read() == b"", "the stream ends after the exit line"
    finally:
        c.close()

    # the CLI: logs -f prints live output and exits 0 when the process exits
    box.sh("box", "rm /tmp/go")
    pid = start(box, "box", "echo first; %s; echo second" % WAIT_GO)["id"]
    cli = subprocess.Popen([PADDOCK, "--socket", box.sock, "logs", "box", str(pid), "-f"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert read_line(cli.stdout) == b"first\n"
        assert cli.poll() is None, "logs -f keeps following a running process"
        box.sh("box", "touch /tmp/go")
        assert read_line(cli.stdout) == b"second\n"
        assert cli.wait(30) == 0
        assert cli.stdout.read() == b""
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        cli.stdout.close()
        cli.stderr.close()


def test_output_buffer_is_bounded(box):
    total = 48 << 20  # 48 MiB, far beyond the documented 1 MiB per process
    before = rss_kib(box.pid)
    pid = start(box, "box", "yes abcdefghijklmnopqrstuvwxyz | head -c %d; echo END" % total)["id"]
    p = wait_for(lambda: exited(box, "box", pid), timeout=120, what="the writer")
    assert p["exit_code"] == 0, p
    lines = output_lines(box, "box", pid)
    kept = collect(lines, "stdout")
    assert len(kept) <= 1 << 20, len(kept)
    assert len(kept) > 512 << 10, "the newest output is kept, not thrown away: %d" % len(kept)
    assert kept.endswith(b"abcEND\n"), kept[-40:]
    # the record says how much was lost: everything written is either kept or counted
    assert p["dropped_bytes"] == total + 4 - len(kept), (p["dropped_bytes"], len(kept))
    grown = rss_kib(box.pid) - before
    assert grown < 24 << 10, "paddockd grew by %d KiB for one process's output" % grown


def test_kill_wait_forget(box):
    # default TERM
    a = start(box, "box", ["sleep", "60"])["id"]
    assert box.cli("kill", "box", a).out.strip() == str(a)
    p = wait_for(lambda: exited(box, "box", a), what="TERM")
    assert p["exit_code"] == 128 + 15, p
    # -s KILL on a process that ignores TERM
    b = start(box, "box", "trap '' TERM; echo ready; while :; do sleep 1; done")["id"]
    wait_for(lambda: collect(output_lines(box, "box", b), "stdout") == b"ready\n", what="trap set")
    box.cli("kill", "box", b)
    assert proc(box, "box", b)["state"] == "running", "TERM is ignored"
    box.cli("kill", "box", b, "-s", "KILL")
    w = box.api("POST", "/v1/envs/box/processes/%d/wait" % b, timeout=60)
    assert w.status == 200 and w.json["exit_code"] == 137, w
    # signalling an exited process: 409 (API) and a failing CLI
    r = box.api("POST", "/v1/envs/box/processes/%d/signal" % b, {"signal": "TERM"})
    assert r.status == 409, r
    assert box.cli("kill", "box", b, check=False).returncode != 0
    # names with SIG prefix, any case, and numbers are accepted
    c = start(box, "box", ["sleep", "60"])["id"]
    r = box.api("POST", "/v1/envs/box/processes/%d/signal" % c, {"signal": "sigint"})
    assert r.status == 200, r
    assert box.api("GET", "/v1/envs/box/processes/%d/wait" % c).json["exit_code"] == 128 + 2

    # wait blocks until exit; the CLI exits with the exit code
    d = start(box, "box", "%s; exit 42" % WAIT_GO)["id"]
    waiter = subprocess.Popen([PADDOCK, "--socket", box.sock, "wait", "box", str(d)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    try:
        assert proc(box, "box", d)["state"] == "running"
        # still waiting a second later (poll() right after Popen held before it even connected)
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(1)
        # a running process cannot be forgotten
        r = box.api("DELETE", "/v1/envs/box/processes/%d" % d)
        assert r.status == 409, r
        assert box.cli("forget", "box", d, check=False).returncode != 0
        box.sh("box", "touch /tmp/go")
        assert waiter.wait(60) == 42
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
        waiter.stderr.close()
    assert box.cli("wait", "box", d, check=False).returncode == 42, "at once once exited"

    # forget removes finished records
    assert box.cli("forget", "box", d).out.strip() == str(d)
    assert box.api("GET", "/v1/envs/box/processes/%d" % d).status == 404
    r = box.api("DELETE", "/v1/envs/box/processes/%d" % a)
    assert r.status == 200 and r.json == {"deleted": str(a)}, r
    left = [x["id"] for x in box.api("GET", "/v1/envs/box/processes").json["processes"]]
    assert left == [b, c], left


def test_process_outlives_the_client(box):
    c = box.conn(timeout=30)
    c.request("POST", "/v1/envs/box/exec",
              body=json.dumps({"cmd": ["sh", "-c", "echo started; %s; echo finished" % WAIT_GO],
                               "detach": True}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 201
    pid = json.loads(r.read())["id"]
    c.close()
    # the same with a client that goes away while following the output
    c = box.conn(timeout=30)
    c.request("GET", "/v1/envs/box/processes/%d/output?follow=1" % pid)
    r = c.getresponse()
    assert json.loads(r.readline()) == {"stdout": "started\n"}
    c.close()
    assert proc(box, "box", pid)["state"] == "running"
    assert "running" in box.cli("ps", "box").out
    box.sh("box", "touch /tmp/go")
    w = box.api("POST", "/v1/envs/box/processes/%d/wait" % pid, timeout=60)
    assert w.status == 200 and w.json["exit_code"] == 0, w
    assert collect(output_lines(box, "box", pid), "stdout") == b"started\nfinished\n"


def test_isolation_and_bad_input(daemon):
    daemon.create("a")
    daemon.create("b")
    pid = start(daemon, "a", ["sleep", "60"])["id"]
    # env b knows nothing of a's process
    assert daemon.api("GET", "/v1/envs/b/processes").json == {"processes": []}
    for method, suffix, body in [("GET", "", None), ("GET", "/output", None),
                                 ("POST", "/wait", None), ("DELETE", "", None),
                                 ("POST", "/signal", {"signal": "KILL"})]:
        r = daemon.api(method, "/v1/envs/b/processes/%d%s" % (pid, suffix), body)
        assert r.status == 404, (method, suffix, r)
        assert r.error()[0] == "not_found"
    assert daemon.cli("kill", "b", pid, "-s", "KILL", check=False).returncode != 0
    assert proc(daemon, "a", pid)["state"] == "running", "b's routes did not touch it"
    # unknown ids, garbage ids, unknown environments
    for bad in ("9999", "0", "abc", "-1", "1x", "99999999999999999999"):
        r = daemon.api("GET", "/v1/envs/a/processes/" + bad)
        assert r.status == 404, (bad, r)
    assert daemon.api("GET", "/v1/envs/nope/processes").status == 404
    assert daemon.cli("logs", "a", "9999", check=False).returncode != 0
    # bad signals: 400, and the process is untouched
    for sig in ("NOPE", "", 0, 65, -9, "TERM9", ["KILL"], True):
        r = daemon.api("POST", "/v1/envs/a/processes/%d/signal" % pid, {"signal": sig})
        assert r.status == 400, (sig, r)
        assert r.error()[0] == "invalid_argument"
    p = daemon.cli("kill", "a", pid, "-s", "NOPE", check=False)
    assert p.returncode != 0 and p.err.strip()
    assert proc(daemon, "a", pid)["state"] == "running"
    r = daemon.api("POST", "/v1/envs/a/exec", {"cmd": ["true"], "detach": "yes"})
    assert r.status == 400, r


def test_processes_die_with_their_environment(daemon):
    daemon.create("c", "--computer")
    daemon.create("s")
    cp = start(daemon, "c", "echo kept; sleep 60")["id"]
    sp = start(daemon, "s", ["sleep", "60"])["id"]
    wait_for(lambda: collect(output_lines(daemon, "c", cp), "stdout") == b"kept\n", what="output")
    # stop: the process dies, its record and output stay until rm
    daemon.cli("stop", "c")
    p = wait_for(lambda: exited(daemon, "c", cp), timeout=30, what="death on stop")
    assert p["exit_code"] != 0, p
    assert collect(output_lines(daemon, "c", cp), "stdout") == b"kept\n"
    # a stopped environment takes no new background processes
    r = daemon.api("POST", "/v1/envs/c/exec", {"cmd": ["true"], "detach": True})
    assert r.status == 409, r
    assert daemon.cli("exec", "-d", "c", "--", "true", check=False).returncode != 0
    # rm: records go away; a new environment of the same name starts empty
    daemon.cli("rm", "c")
    assert daemon.api("GET", "/v1/envs/c/processes/%d" % cp).status == 404
    daemon.create("c", "--computer")
    assert daemon.api("GET", "/v1/envs/c/processes").json == {"processes": []}
    assert daemon.api("GET", "/v1/envs/c/processes/%d" % cp).status == 404
    # rm -f of a running environment kills the process and ends a waiter with 404
    c = daemon.conn(timeout=60)
    c.request("POST", "/v1/envs/s/processes/%d/wait" % sp)
    daemon.cli("rm", "-f", "s")
    r = c.getresponse()
    assert r.status in (200, 404), r.status
    c.close()
    assert daemon.api("GET", "/v1/envs/s/processes").status == 404


def test_many_tiny_writes_stay_readable(box):
    # one byte per write: the buffer holds many small pieces; reading them back must neither
    # stall the daemon nor lose the newest bytes
    pid = start(box, "box", "yes | dd bs=1 count=1500000 2>/dev/null; echo END")["id"]
    p = wait_for(lambda: exited(box, "box", pid), timeout=120, what="the writer")
    # a deadline on the whole answer (a per-read timeout would not end a trickle)
    c = box.conn(timeout=10)
    try:
        c.request("GET", "/v1/envs/box/processes/%d/output" % pid)
        r = c.getresponse()
        assert r.status == 200
        pieces, deadline = [], time.monotonic() + 120
        while True:
            piece = r.read1(1 << 16)
            if not piece:
                break
            pieces.append(piece)
            assert time.monotonic() < deadline, "output of one process took minutes to read"
    finally:
        c.close()
    kept = collect([json.loads(l) for l in b"".join(pieces).splitlines()], "stdout")
    assert kept.endswith(b"y\ny\nEND\n") and len(kept) <= 1 << 20, kept[-20:]
    assert p["dropped_bytes"] == 1500004 - len(kept), p
    assert box.api("GET", "/v1/system", timeout=10).status == 200
