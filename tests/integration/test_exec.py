"""exec: argv, environment, cwd, user, stdin, exit codes, output, limits, timeouts, streaming."""
import base64
import hashlib
import json
import os
import subprocess
import time
import urllib.parse

import pytest

from conftest import PADDOCK


def decoded(res, field):
    """stdout/stderr of a buffered exec result as bytes."""
    v = res[field]
    if res.get("encoding") == "base64":
        return base64.b64decode(v)
    return v.encode()


@pytest.fixture
def box(daemon):
    daemon.create("box", "--computer")
    return daemon


@pytest.fixture
def sbox(daemon):
    daemon.create("sbox")
    return daemon


ARGS = ["a b", "'single'", '"double"', "", "x\ny", "$HOME", "*", "--", "-e", "tab\there", "ünï€"]


def test_argv_is_passed_exactly(box):
    res = box.exec("box", ["printf", "[%s]\n"] + ARGS)
    assert res["exit_code"] == 0, res
    assert res["stdout"] == "".join("[%s]\n" % a for a in ARGS)
    # through the CLI: after NAME and --, everything is the command, even option-like words
    p = box.cli("exec", "box", "--", "printf", "[%s]\n", *ARGS)
    assert p.out == "".join("[%s]\n" % a for a in ARGS)
    # without --, the first word that is not an option starts the command
    assert box.cli("exec", "box", "echo", "-n", "x y").out == "x y"


def test_environment_variables(daemon):
    daemon.create("ev", "--computer", "--env", "FROM_CREATE=one", "--env", "BOTH=create")
    out = daemon.cli("exec", "ev", "-e", "FROM_EXEC=two words", "-e", "BOTH=exec", "--",
                     "sh", "-c", 'printf "%s|%s|%s" "$FROM_CREATE" "$FROM_EXEC" "$BOTH"').out
    assert out == "one|two words|exec"
    res = daemon.exec("ev", ["sh", "-c", 'printf "%s|%s" "$FROM_CREATE" "$K"'], env={"K": "v=1"})
    assert res["stdout"] == "one|v=1"
    # -e K passes the caller's value on
    out = daemon.cli("exec", "ev", "-e", "PASSME", "--", "sh", "-c", 'printf %s "$PASSME"',
                     env={"PASSME": "from-host"}).out
    assert out == "from-host"
    # PATH is usable, and the host's environment does not leak in
    env = daemon.cli("exec", "ev", "--", "env", env={"HOST_SECRET": "s3cret"}).out
    assert "HOST_SECRET" not in env and "s3cret" not in env
    assert "PATH=" in env


def test_working_directory(box, sbox):
    assert box.cli("exec", "box", "-w", "/tmp", "--", "pwd").out == "/tmp\n"
    assert box.exec("box", ["pwd"], cwd="/etc")["stdout"] == "/etc\n"
    # a sandbox works in /workspace unless told otherwise
    assert sbox.exec("sbox", ["pwd"])["stdout"] == "/workspace\n"
    p = box.cli("exec", "box", "-w", "/does/not/exist", "--", "pwd", check=False)
    assert p.returncode != 0 and p.out == ""
    assert p.err.strip(), "a missing working directory is reported"


def test_user(box):
    assert box.cli("exec", "box", "-u", "1000", "--", "id", "-u").out == "1000\n"
    res = box.exec("box", ["id"], user="user")
    assert res["stdout"].startswith("uid=1000(user) gid=1000(user)"), res
    assert box.exec("box", ["id", "-g"], user="1000:1000")["stdout"] == "1000\n"
    assert box.exec("box", ["id", "-u"], user="nobody")["stdout"] == "65534\n"
    # a non-root user cannot write root's files
    assert box.exec("box", ["sh", "-c", "echo x > /etc/passwd"], user="user")["exit_code"] != 0
    p = box.cli("exec", "box", "-u", "no-such-user", "--", "id", check=False)
    assert p.returncode != 0 and p.out == ""
    assert "no-such-user" in p.err, p.err
    res = box.exec("box", ["id"], user="no-such-user")
    assert res["exit_code"] != 0 and res["stdout"] == ""


def test_stdin_is_binary_safe(box):
    data = bytes(range(256)) * 4 + b"\0\0\r\n\xff"
    p = box.cli("exec", "box", "-i", "--", "cat", input=data)
    assert p.stdout == data
    big = os.urandom(1 << 20)
    p = box.cli("exec", "box", "-i", "--", "sha256sum", input=big)
    assert p.out.split()[0] == hashlib.sha256(big).hexdigest()
    p = box.cli("exec", "box", "-i", "--", "cat", input=big)
    assert len(p.stdout) == len(big) and hashlib.sha256(p.stdout).digest() == hashlib.sha256(big).digest()
    # the API: text stdin and base64 stdin
    assert box.exec("box", ["cat"], stdin="hello\n")["stdout"] == "hello\n"
    res = box.exec("box", ["od", "-An", "-tx1"], stdin=base64.b64encode(b"\x00\xff\x10").decode(),
                   stdin_encoding="base64")
    assert res["stdout"].split() == ["00", "ff", "10"]
    # without -i the command reads EOF at once instead of hanging, and gets none of the
    # caller's input: stdin here is a pipe that holds data and stays open (cli() would give
    # /dev/null, which reads EOF whether or not it is passed on)
    cli = subprocess.Popen([PADDOCK, "--socket", box.sock, "exec", "box", "--", "cat"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        cli.stdin.write(b"not for cat\n")
        cli.stdin.flush()
        rc = cli.wait(timeout=30)
        out = cli.stdout.read()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        for f in (cli.stdin, cli.stdout, cli.stderr):
            f.close()
    assert rc == 0 and out == b"", (rc, out)


def test_large_stdin_streams_intact_with_eof(box):
    """-i streams stdin as the request body (no JSON/base64 size cap): 24 MiB of binary arrive
    intact and the command sees EOF."""
    big = os.urandom(24 << 20)
    p = box.cli("exec", "box", "-i", "--", "sh", "-c", "sha256sum; echo done", input=big, timeout=120)
    lines = p.out.split("\n")
    assert lines[0].split()[0] == hashlib.sha256(big).hexdigest() and lines[1] == "done", p.out
    # the same through the API: raw octet-stream body, the request in ?spec=
    spec = urllib.parse.quote(json.dumps({"cmd": ["wc", "-c"]}))
    r = box.api("POST", "/v1/envs/box/exec?spec=" + spec, raw=b"x" * 100000,
                headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200 and r.json["stdout"].strip() == "100000", r
    r = box.api("POST", "/v1/envs/box/exec", raw=b"abc",
                headers={"Content-Type": "application/octet-stream"})
    assert r.status == 400 and "spec" in r.json["error"]["message"], r


def test_exit_codes(box):
    assert box.cli("exec", "box", "--", "sh", "-c", "exit 42", check=False).returncode == 42
    assert box.exec("box", ["sh", "-c", "exit 42"])["exit_code"] == 42
    assert box.exec("box", ["sh", "-c", "exit 0"])["exit_code"] == 0
    # killed by a signal: 128 + N
    assert box.exec("box", ["sh", "-c", "kill -9 $$"])["exit_code"] == 137
    assert box.cli("exec", "box", "--", "sh", "-c", "kill -TERM $$", check=False).returncode == 143


def test_missing_and_non_executable_commands(box):
    res = box.exec("box", ["no-such-command", "arg"])
    assert res["exit_code"] == 127 and "no-such-command" in res["stderr"], res
    p = box.cli("exec", "box", "--", "no-such-command", check=False)
    assert p.returncode == 127 and "no-such-command" in p.err and p.out == ""
    res = box.exec("box", ["/etc/passwd"])
    assert res["exit_code"] == 126 and res["stderr"], res


def test_stdout_and_stderr_are_separate(box):
    script = "echo out1; echo err1 >&2; echo out2; echo err2 >&2"
    res = box.exec("box", ["sh", "-c", script])
    assert res["stdout"] == "out1\nout2\n" and res["stderr"] == "err1\nerr2\n", res
    p = box.cli("exec", "box", "--", "sh", "-c", script)
    assert p.out == "out1\nout2\n" and p.err == "err1\nerr2\n"


def test_non_utf8_output(box):
    script = r"printf '\377\376bin\300\n'; printf 'ok\n' >&2"
    res = box.exec("box", ["sh", "-c", script])
    assert res.get("encoding") == "base64", res
    assert decoded(res, "stdout") == b"\xff\xfebin\xc0\n"
    assert decoded(res, "stderr") == b"ok\n"
    p = box.cli("exec", "box", "--", "sh", "-c", script)
    assert p.stdout == b"\xff\xfebin\xc0\n" and p.stderr == b"ok\n"
    # a UTF-8 character split across writes stays intact in the stream
    p = box.cli("exec", "box", "--", "sh", "-c", r"printf '\342\202'; sleep 0.2; printf '\254\n'")
    assert p.stdout == "€\n".encode()
    # 1 MiB of random bytes through the streamed CLI, byte for byte
    p = box.cli("exec", "box", "--", "sh", "-c",
                "head -c 1048576 /dev/urandom > /tmp/r; sha256sum /tmp/r >&2; cat /tmp/r")
    assert len(p.stdout) == 1 << 20
    assert hashlib.sha256(p.stdout).hexdigest() == p.err.split()[0]


def test_output_limit(box):
    res = box.exec("box", ["head", "-c", "5000", "/dev/zero"], max_output=1000)
    assert len(decoded(res, "stdout")) == 1000 and res["truncated"] is True, res
    assert res["exit_code"] == 0
    res = box.exec("box", ["head", "-c", "5000", "/dev/zero"], max_output="1K")
    assert len(decoded(res, "stdout")) == 1024 and res["truncated"] is True
    res = box.exec("box", ["head", "-c", "999", "/dev/zero"], max_output=1000)
    assert len(decoded(res, "stdout")) == 999 and res["truncated"] is False
    p = box.cli("exec", "box", "--max-output", "1000", "--", "sh", "-c", "yes | head -c 5000")
    assert len(p.stdout) == 1000 and "truncated" in p.err


def test_timeout_kills_the_whole_tree(box):
    t0 = time.monotonic()
    res = box.exec("box", ["sh", "-c", "sleep 100 & sleep 100"], timeout=1)
    elapsed = time.monotonic() - t0
    assert res["timed_out"] is True and res["exit_code"] == 137, res
    assert elapsed < 10, "a 1 s timeout returned after %.1f s" % elapsed
    ps = box.sh("box", "ps -o pid,args")
    assert "sleep 100" not in ps, ps
    # the CLI says so on stderr and exits 137
    p = box.cli("exec", "box", "--timeout", "1s", "--", "sh", "-c", "sleep 100 & sleep 100; echo no",
                check=False)
    assert p.returncode == 137 and "timed out" in p.err and "no" not in p.out
    assert "sleep 100" not in box.sh("box", "ps -o pid,args")
    # commands that finish in time are untouched
    res = box.exec("box", ["sh", "-c", "echo fine"], timeout="30s")
    assert res["timed_out"] is False and res["stdout"] == "fine\n"


def test_streaming_delivers_output_as_it_comes(box):
    c = box.conn()
    try:
        c.request("POST", "/v1/envs/box/exec",
                  body=json.dumps({"cmd": ["sh", "-c", "echo a; sleep 1; echo b >&2; echo c"],
                                   "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200
        assert r.getheader("Content-Type").startswith("application/x-ndjson")
        lines = []
        while True:
            line = r.readline()
            if not line:
                break
            lines.append((time.monotonic(), json.loads(line)))
    finally:
        c.close()
    objs = [o for _, o in lines]
    assert objs[0] == {"stdout": "a\n"}, objs
    final = objs[-1]
    assert final["exit_code"] == 0 and final["timed_out"] is False and "duration_ms" in final
    out = "".join(o.get("stdout", "") for o in objs[:-1])
    err = "".join(o.get("stderr", "") for o in objs[:-1])
    assert out == "a\nc\n" and err == "b\n", objs
    # "a" arrived while the command was still running
    assert lines[-1][0] - lines[0][0] >= 0.5, [(round(t - lines[0][0], 3), o) for t, o in lines]


def test_streaming_non_utf8_chunks_are_base64(box):
    c = box.conn()
    try:
        c.request("POST", "/v1/envs/box/exec",
                  body=json.dumps({"cmd": ["sh", "-c", r"printf '\377\001'"], "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        objs = [json.loads(l) for l in r.read().splitlines()]
    finally:
        c.close()
    data = b""
    for o in objs[:-1]:
        assert "stdout" in o
        data += base64.b64decode(o["stdout"]) if o.get("encoding") == "base64" else o["stdout"].encode()
    assert data == b"\xff\x01" and objs[-1]["exit_code"] == 0, objs


def test_exec_needs_a_running_environment(box):
    box.cli("stop", "box")
    r = box.api("POST", "/v1/envs/box/exec", {"cmd": ["true"]})
    assert r.status == 409 and r.error()[0] == "conflict", r
    p = box.cli("exec", "box", "--", "true", check=False)
    assert p.returncode == 1 and p.err.startswith("paddock: ") and p.out == ""
    r = box.api("POST", "/v1/envs/nope/exec", {"cmd": ["true"]})
    assert r.status == 404 and r.error()[0] == "not_found"
