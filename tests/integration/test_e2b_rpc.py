"""E2B envd Connect-RPC services (process.Process, filesystem.Filesystem) driven through the
local socket with E2b-Sandbox-Id (the local administrator may address any running
environment): a small Connect client (unary JSON, server-stream envelopes) as the e2b SDK
speaks it."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import children_of, longest_wait, starved, wait_for


@pytest.fixture(scope="session")
def bash_rootfs(image_dir):
    """The busybox test image plus the host's /bin/bash and its libraries (every E2B command
    runs through /bin/bash -l -c)."""
    d = tempfile.mkdtemp(prefix="paddock-it-bash-", dir="/var/tmp")
    root = os.path.join(d, "rootfs")
    shutil.copytree(image_dir, root, symlinks=True)
    out = subprocess.run(["ldd", "/bin/bash"], stdout=subprocess.PIPE, check=True).stdout.decode()
    libs = ["/bin/bash"] + [w for line in out.splitlines() for w in line.split() if w.startswith("/")]
    for lib in libs:
        dst = os.path.join(root, lib.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.lexists(dst):
            os.unlink(dst)
        shutil.copy2(os.path.realpath(lib), dst)
    yield root
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sb(daemon, bash_rootfs):
    daemon.cli("image", "import", "bash", bash_rootfs)
    daemon.create("sb", "--computer", "--image", "bash")
    return daemon


# --------------------------------------------------------------------------- the client


def unary(d, env, method, body, user=None):
    h = {"E2b-Sandbox-Id": env, "Content-Type": "application/json",
         "Connect-Protocol-Version": "1"}
    if user:
        h["Authorization"] = "Basic " + base64.b64encode((user + ":").encode()).decode()
    r = d.api("POST", "/" + method, raw=json.dumps(body).encode(), headers=h, timeout=60)
    assert r.headers.get("Content-Type", "").startswith("application/json"), r
    return r.status, json.loads(r.body)


class Stream:
    """A server-streaming call read as the SDK reads it: raw HTTP/1.1 over the unix socket,
    chunked encoding decoded as it arrives, envelopes parsed one by one."""

    def __init__(self, d, env, method, body, timeout_ms=None, keepalive=None, user=None,
                 timeout=30):
        msg = json.dumps(body).encode()
        payload = struct.pack(">BI", 0, len(msg)) + msg
        h = ["POST /%s HTTP/1.1" % method, "Host: sandbox", "E2b-Sandbox-Id: " + env,
             "Content-Type: application/connect+json", "Connect-Protocol-Version: 1",
             "Content-Length: %d" % len(payload)]
        if timeout_ms is not None:
            h.append("Connect-Timeout-Ms: %d" % timeout_ms)
        if keepalive is not None:
            h.append("Keepalive-Ping-Interval: %d" % keepalive)
        if user:
            h.append("Authorization: Basic " + base64.b64encode((user + ":").encode()).decode())
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(d.sock)
        self.sock.sendall(("\r\n".join(h) + "\r\n\r\n").encode() + payload)
        head = b""
        while b"\r\n\r\n" not in head:
            b = self.sock.recv(65536)
            assert b, "closed before the headers: %r" % head
            head += b
        head, _, self.raw = head.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        self.data = b""
        self.chunked_end = False
        self.closed = False
        self.messages = []
        self.end = None  # the end-stream JSON

    def _decode(self):
        while not self.chunked_end:
            size_line, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                return
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            if size == 0:
                self.chunked_end = True
                return
            self.data += rest[:size]
            self.raw = rest[size + 2:]

    def _envelopes(self):
        while len(self.data) >= 5 and self.end is None:
            flags, n = struct.unpack(">BI", self.data[:5])
            if len(self.data) < 5 + n:
                return
            msg = json.loads(self.data[5:5 + n])
            self.data = self.data[5 + n:]
            assert flags in (0, 2), flags
            if flags == 2:
                self.end = msg
            else:
                self.messages.append(msg)

    def pump(self, timeout):
        deadline = time.monotonic() + timeout
        self._decode()
        self._envelopes()
        while self.end is None and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                return
            if not b:
                self.closed = True
                return
            self.raw += b
            self._decode()
            self._envelopes()

    def wait(self, pred, timeout=15, what="message"):
        deadline = time.monotonic() + timeout
        while True:
            if pred(self):
                return
            left = deadline - time.monotonic()
            assert left > 0 and self.end is None and not self.closed, \
                "no %s: %r end=%r" % (what, self.messages, self.end)
            self.pump(min(left, 0.5))

    def finish(self, timeout=15):
        deadline = time.monotonic() + timeout
        while self.end is None and not self.closed and time.monotonic() < deadline:
            self.pump(deadline - time.monotonic())
        assert self.end is not None, "no end-stream: %r" % self.messages
        return self.end

    def events(self, kind):
        return [m["event"][kind] for m in self.messages if kind in m.get("event", {})]

    def output(self, key):
        return b"".join(base64.b64decode(e[key]) for e in self.events("data") if key in e)

    def close(self):
        self.sock.close()


def start(d, env, cmd, args=(), envs=None, cwd=None, stdin=None, pty=None, **kw):
    proc = {"cmd": cmd, "args": list(args)}
    if envs:
        proc["envs"] = envs
    if cwd:
        proc["cwd"] = cwd
    body = {"process": proc}
    if stdin is not None:
        body["stdin"] = stdin
    if pty:
        body["pty"] = {"size": {"cols": pty[0], "rows": pty[1]}}
    s = Stream(d, env, "process.Process/Start", body, **kw)
    assert s.status == 200 and s.headers["content-type"] == "application/connect+json"
    return s


def bash(d, env, script, **kw):
    return start(d, env, "/bin/bash", ["-l", "-c", script], **kw)


def started_pid(s):
    s.wait(lambda s: s.messages, what="start event")
    first = s.messages[0]
    assert "start" in first["event"], first  # the start event comes first
    return first["event"]["start"]["pid"]


def listed(d, env="sb"):
    st, body = unary(d, env, "process.Process/List", {})
    assert st == 200, body
    return {p["pid"]: p for p in body.get("processes", [])}


# --------------------------------------------------------------------------- process.Process


def test_run_output_exit_code_and_environment(sb):
    s = bash(sb, "sb", 'echo "out $CONF_A"; echo err >&2; echo "$USER $LOGNAME $HOME $(pwd)"; '
                       'exit 3', envs={"CONF_A": "x y"}, stdin=False, user="user")
    pid = started_pid(s)
    assert pid > 1
    end = s.finish()
    assert end == {}
    out = s.output("stdout").decode()
    assert out.splitlines() == ["out x y", "user user /home/user /home/user"]
    assert s.output("stderr") == b"err\n"
    ends = s.events("end")
    assert ends == [{"exitCode": 3, "exited": True, "status": "exit status 3",
                     "error": "exit status 3"}]
    assert "end" in s.messages[-1]["event"]  # exactly one end event, last
    # The pid is the process's pid inside the environment
    s = bash(sb, "sb", "echo $$", cwd="/tmp", stdin=False)
    pid = started_pid(s)
    s.finish()
    assert s.output("stdout").decode().strip() == str(pid)
    assert s.events("end")[0]["exitCode"] == 0 and "error" not in s.events("end")[0]
    # Basic auth names the user; cwd is honoured; without one, a plain Paddock environment
    # (not made through the E2B API) is used as root
    s = bash(sb, "sb", "id -un; pwd", cwd="/tmp", user="root", stdin=False)
    s.finish()
    assert s.output("stdout").decode().split() == ["root", "/tmp"]
    s = bash(sb, "sb", "id -un; pwd", stdin=False)
    s.finish()
    assert s.output("stdout").decode().split() == ["root", "/root"]
    # A command that does not exist: bash says so, exit 127
    s = bash(sb, "sb", "no-such-command-here", stdin=False)
    s.finish()
    assert s.events("end")[0]["exitCode"] == 127


def test_stdin_round_trip_and_close(sb):
    s = start(sb, "sb", "/bin/cat")  # stdin absent: kept open
    pid = started_pid(s)
    st, body = unary(sb, "sb", "process.Process/SendInput",
                     {"process": {"pid": pid}, "input": {"stdin": base64.b64encode(b"ping\n").decode()}})
    assert (st, body) == (200, {})
    s.wait(lambda s: s.output("stdout") == b"ping\n", what="echoed stdin")
    assert pid in listed(sb)
    st, body = unary(sb, "sb", "process.Process/CloseStdin", {"process": {"pid": pid}})
    assert (st, body) == (200, {})
    assert s.finish() == {}
    assert s.events("end")[0]["exitCode"] == 0
    assert pid not in listed(sb)
    # stdin:false is EOF at once; SendInput then fails
    s = bash(sb, "sb", "cat; echo done", stdin=False)
    s.finish()
    assert s.output("stdout") == b"done\n"


def test_disconnect_keeps_running_reconnect_list_and_kill(sb):
    s = bash(sb, "sb", "for i in $(seq 1 300); do echo tick $i; sleep 0.1; done",
             envs={"CONF_LIST": "1"}, stdin=False)
    pid = started_pid(s)
    s.wait(lambda s: b"tick 2" in s.output("stdout"), what="output")
    s.close()  # the client goes away: the process must not die
    time.sleep(1)
    procs = listed(sb)
    assert pid in procs
    assert procs[pid]["config"] == {"cmd": "/bin/bash",
                                    "args": ["-l", "-c", "for i in $(seq 1 300); do echo tick $i; sleep 0.1; done"],
                                    "envs": {"CONF_LIST": "1"}}
    c = Stream(sb, "sb", "process.Process/Connect", {"process": {"pid": pid}}, timeout_ms=60000)
    assert c.status == 200
    assert c.messages == [] and started_pid(c) == pid
    c.wait(lambda c: b"tick" in c.output("stdout"), what="live output after reconnecting")
    first = int(c.output("stdout").split()[1])
    assert first > 10  # only output produced after attaching
    st, body = unary(sb, "sb", "process.Process/SendSignal",
                     {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    assert (st, body) == (200, {})
    assert c.finish() == {}
    assert c.events("end") == [{"exitCode": -1, "exited": False, "status": "signal: killed",
                                "error": "signal: killed"}]
    wait_for(lambda: pid not in listed(sb), what="the killed process leaves the list")
    # Unknown pids
    st, body = unary(sb, "sb", "process.Process/SendSignal",
                     {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    assert st == 404 and body["code"] == "not_found", body
    st, body = unary(sb, "sb", "process.Process/SendInput",
                     {"process": {"pid": 99999}, "input": {"stdin": "eA=="}})
    assert st == 404 and body["code"] == "not_found"
    c = Stream(sb, "sb", "process.Process/Connect", {"process": {"pid": 99999}})
    assert c.finish()["error"]["code"] == "not_found"
    assert c.messages == []


def test_sigterm_reaches_the_process_group(sb):
    s = bash(sb, "sb", "sleep 100 & sleep 100; echo never", stdin=False)
    pid = started_pid(s)
    time.sleep(0.5)
    st, _ = unary(sb, "sb", "process.Process/SendSignal",
                  {"process": {"pid": pid}, "signal": "SIGNAL_SIGTERM"})
    assert st == 200
    s.finish()
    assert s.events("end")[0]["status"] == "signal: terminated"
    assert s.output("stdout") == b""
    # the background sleep got it too
    r = sb.exec("sb", ["sh", "-c", "ps -o comm | grep -c '^sleep' || true"])
    assert r["stdout"].strip() == "0", r


def test_timeout_kills_the_process(sb):
    t0 = time.monotonic()
    s = bash(sb, "sb", "echo begin; sleep 30", timeout_ms=1500, stdin=False)
    pid = started_pid(s)
    s.finish(timeout=20)
    assert time.monotonic() - t0 < 15
    assert s.output("stdout") == b"begin\n"
    assert s.events("end")[0]["status"] == "signal: killed"
    assert pid not in listed(sb)


def test_stopping_the_environment_empties_the_table(sb):
    s = bash(sb, "sb", "sleep 100", stdin=False)
    pid = started_pid(s)
    assert pid in listed(sb)
    sb.cli("stop", "sb")
    assert s.finish() == {}  # the process died with its environment: its end event came
    assert s.events("end")[0]["exited"] is False
    sb.cli("start", "sb")
    assert listed(sb) == {}


def test_a_start_in_a_starved_environment_holds_up_only_its_caller(daemon, bash_rootfs):
    """Start's first event carries the command's pid, which the environment's exec slot names
    once it has cloned the command: in an environment with a 1% CPU limit and every thread
    busy that takes seconds. The daemon does not wait for it (it did, up to 10 s, holding every
    other client): others are answered meanwhile, and the stream still begins with its start
    event, whenever that comes."""
    daemon.cli("image", "import", "bash", bash_rootfs)
    starved(daemon, "starved", "--image", "bash")
    box = {}
    starter = threading.Thread(target=lambda: box.update(
        s=bash(daemon, "starved", "echo hi", stdin=False, timeout=60)))
    starter.start()
    try:
        time.sleep(0.2)
        worst = longest_wait(daemon)
        assert worst < 2, worst
    finally:
        daemon.cli("rm", "-f", "starved")
    starter.join(60)
    s = box["s"]
    s.finish(timeout=60)
    if s.messages:  # the slot may have named it before the end: start comes first then
        assert "start" in s.messages[0]["event"], s.messages
    wait_for(lambda: not [p for p, _, st in children_of(daemon.pid) if st == "Z"], 10, 0.1,
             "no zombie left")


def test_keepalive(sb):
    s = bash(sb, "sb", "sleep 2.5", keepalive=1, stdin=False)
    started_pid(s)
    s.finish()
    assert len([m for m in s.messages if "keepalive" in m["event"]]) >= 1


def test_pty_resize_input_and_kill(sb):
    s = start(sb, "sb", "/bin/bash", ["-c", "stty size; read x; stty size; echo got=$x; sleep 30"],
              envs={"TERM": "xterm"}, pty=(80, 24))
    pid = started_pid(s)
    s.wait(lambda s: b"24 80" in s.output("pty"), what="first size")
    st, body = unary(sb, "sb", "process.Process/Update",
                     {"process": {"pid": pid}, "pty": {"size": {"cols": 100, "rows": 30}}})
    assert (st, body) == (200, {})
    st, body = unary(sb, "sb", "process.Process/SendInput",
                     {"process": {"pid": pid}, "input": {"pty": base64.b64encode(b"hi\n").decode()}})
    assert (st, body) == (200, {})
    s.wait(lambda s: b"got=hi" in s.output("pty"), what="the input echoed back")
    assert b"30 100" in s.output("pty")
    assert not s.output("stdout") and not s.output("stderr")
    # stdin input to a terminal process is refused
    st, body = unary(sb, "sb", "process.Process/SendInput",
                     {"process": {"pid": pid}, "input": {"stdin": "eA=="}})
    assert st == 500 and body["code"] == "internal"
    st, _ = unary(sb, "sb", "process.Process/SendSignal",
                  {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    assert st == 200
    s.finish()
    assert s.events("end")[0]["exited"] is False


def test_errors_before_start(sb):
    s = Stream(sb, "sb", "process.Process/Start", {"process": {"args": []}})
    assert s.finish()["error"]["code"] == "invalid_argument"
    assert s.messages == []
    st, body = unary(sb, "sb", "process.Process/Nope", {})
    assert st == 501 and body["code"] == "unimplemented"
    r = sb.api("POST", "/process.Process/List", raw=b"{}",
               headers={"E2b-Sandbox-Id": "nosuch", "Content-Type": "application/json"})
    assert r.status == 502


def test_plain_environment_without_user_falls_back_to_root(daemon, bash_rootfs, tmp_path):
    root = str(tmp_path / "rootfs")
    shutil.copytree(bash_rootfs, root, symlinks=True)
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    daemon.cli("image", "import", "nouser", root)
    daemon.create("nu", "--computer", "--image", "nouser")
    s = bash(daemon, "nu", 'echo "$(id -u) $USER $HOME $(pwd)"', stdin=False, user="user")
    s.finish()
    assert s.output("stdout").decode().split() == ["0", "root", "/root", "/root"]
    # another unknown user fails as it would in paddock exec
    s = bash(daemon, "nu", "true", user="ghost", stdin=False)
    s.finish()
    assert s.events("end")[0]["exitCode"] == 126
    assert b"unknown user" in s.output("stderr")


def vmrss_kib(pid):
    return int([l for l in open("/proc/%d/status" % pid).read().splitlines()
                if l.startswith("VmRSS")][0].split()[1])


def test_slow_reader_loses_nothing(sb):
    # 32 MiB of output while the client does not read: the process blocks on its pipe, the
    # daemon holds about a megabyte for the client, and every byte arrives in order once the
    # client reads.
    before = vmrss_kib(sb.pid)
    s = bash(sb, "sb", "head -c 33554432 /dev/zero | tr '\\0' 'a'; echo; echo end", stdin=False)
    started_pid(s)
    time.sleep(4)
    grown = vmrss_kib(sb.pid) - before
    s.finish(timeout=120)
    out = s.output("stdout")
    assert len(out) == 33554432 + 5 and out == b"a" * 33554432 + b"\nend\n"
    assert grown < 16 * 1024, grown  # KiB: not the whole output (43 MiB as base64) queued


# --------------------------------------------------------------------------- filesystem


def fs(d, method, body, user=None):
    return unary(d, "sb", "filesystem.Filesystem/" + method, body, user=user)


def test_filesystem_calls(sb):
    sb.exec("sb", ["sh", "-c", "mkdir -p /tmp/w/sub/deeper && printf hello > /tmp/w/a.txt && "
                   "chmod 644 /tmp/w/a.txt && ln -s a.txt /tmp/w/link && "
                   "chown 1000:1000 /tmp/w/a.txt && touch /tmp/w/sub/deeper/f"])
    st, body = fs(sb, "Stat", {"path": "/tmp/w/a.txt"})
    assert st == 200, body
    e = body["entry"]
    assert e["name"] == "a.txt" and e["type"] == "FILE_TYPE_FILE" and e["path"] == "/tmp/w/a.txt"
    assert e["size"] == "5" and e["mode"] == 0o644 and e["permissions"] == "-rw-r--r--"
    assert e["owner"] == "user" and e["group"] == "user"
    assert e["modifiedTime"].endswith("Z") and e["modifiedTime"][:2] == "20"
    st, body = fs(sb, "Stat", {"path": "/tmp/w/link"})
    assert body["entry"]["type"] == "FILE_TYPE_SYMLINK" and body["entry"]["symlinkTarget"] == "a.txt"
    st, body = fs(sb, "Stat", {"path": "/tmp/w"})
    assert body["entry"]["type"] == "FILE_TYPE_DIRECTORY"
    assert body["entry"]["permissions"].startswith("d") and body["entry"]["owner"] == "root"
    st, body = fs(sb, "Stat", {"path": "/tmp/w/missing"})
    assert st == 404 and body["code"] == "not_found"

    st, body = fs(sb, "ListDir", {"path": "/tmp/w", "depth": 1})
    assert st == 200
    assert sorted(x["path"] for x in body["entries"]) == ["/tmp/w/a.txt", "/tmp/w/link", "/tmp/w/sub"]
    st, body = fs(sb, "ListDir", {"path": "/tmp/w", "depth": 3})
    assert sorted(x["path"] for x in body["entries"]) == [
        "/tmp/w/a.txt", "/tmp/w/link", "/tmp/w/sub", "/tmp/w/sub/deeper", "/tmp/w/sub/deeper/f"]
    st, body = fs(sb, "ListDir", {"path": "/tmp/nope", "depth": 1})
    assert st == 404 and body["code"] == "not_found"
    st, body = fs(sb, "ListDir", {"path": "/tmp/w/a.txt", "depth": 1})
    assert st == 400 and body["code"] == "invalid_argument"

    st, body = fs(sb, "MakeDir", {"path": "/tmp/w/x/y/z"}, user="user")
    assert st == 200, body
    assert body["entry"]["type"] == "FILE_TYPE_DIRECTORY" and body["entry"]["path"] == "/tmp/w/x/y/z"
    assert body["entry"]["owner"] == "user"  # the default user made it
    st, body = fs(sb, "MakeDir", {"path": "/tmp/w/x/y/z"})
    assert st == 409 and body["code"] == "already_exists"
    st, body = fs(sb, "MakeDir", {"path": "/tmp/w/a.txt"})
    assert st == 400 and body["code"] == "invalid_argument"
    st, body = fs(sb, "MakeDir", {"path": "/tmp/w/byroot"}, user="root")
    assert body["entry"]["owner"] == "root"

    st, body = fs(sb, "Move", {"source": "/tmp/w/a.txt", "destination": "/tmp/w/renamed/r2.txt"})
    assert st == 200, body
    assert body["entry"]["path"] == "/tmp/w/renamed/r2.txt" and body["entry"]["size"] == "5"
    st, body = fs(sb, "Move", {"source": "/tmp/w/a.txt", "destination": "/tmp/w/q.txt"})
    assert st == 404 and body["code"] == "not_found"

    st, body = fs(sb, "Remove", {"path": "/tmp/w/sub"})
    assert (st, body) == (200, {})
    st, body = fs(sb, "Remove", {"path": "/tmp/w/sub"})
    assert (st, body) == (200, {})  # missing is fine
    st, body = fs(sb, "Stat", {"path": "/tmp/w/sub"})
    assert st == 404
    st, body = fs(sb, "Stat", {"path": ""})
    assert st == 400 and body["code"] == "invalid_argument"
    # relative paths start in the user's home
    st, body = fs(sb, "MakeDir", {"path": "rel/dir"}, user="user")
    assert body["entry"]["path"] == "/home/user/rel/dir", body
    st, body = fs(sb, "Stat", {"path": "~/rel"}, user="user")
    assert body["entry"]["path"] == "/home/user/rel", body
    st, body = fs(sb, "ListDir", {"path": "rel", "depth": 1}, user="user")
    assert [e["path"] for e in body["entries"]] == ["/home/user/rel/dir"]


def test_watch_dir(sb):
    sb.exec("sb", ["mkdir", "-p", "/tmp/wd/inner"])
    w = Stream(sb, "sb", "filesystem.Filesystem/WatchDir", {"path": "/tmp/wd", "recursive": True},
               timeout_ms=60000, keepalive=1)
    w.wait(lambda w: w.messages, what="start")
    assert w.messages[0] == {"start": {}}
    sb.exec("sb", ["sh", "-c", "echo a > /tmp/wd/w.txt; echo b >> /tmp/wd/inner/deep.txt; "
                   "mv /tmp/wd/w.txt /tmp/wd/moved.txt; rm /tmp/wd/moved.txt"])

    def seen(w):
        return [(m["filesystem"]["name"], m["filesystem"]["type"]) for m in w.messages
                if "filesystem" in m]
    want = [("w.txt", "EVENT_TYPE_CREATE"), ("w.txt", "EVENT_TYPE_WRITE"),
            ("inner/deep.txt", "EVENT_TYPE_CREATE"), ("w.txt", "EVENT_TYPE_RENAME"),
            ("moved.txt", "EVENT_TYPE_CREATE"), ("moved.txt", "EVENT_TYPE_REMOVE")]
    w.wait(lambda w: all(x in seen(w) for x in want), what="the events %r" % want)
    w.wait(lambda w: any("keepalive" in m for m in w.messages), timeout=5, what="keepalive")
    w.close()
    # errors before the stream
    w = Stream(sb, "sb", "filesystem.Filesystem/WatchDir", {"path": "/tmp/nowhere"})
    assert w.finish()["error"]["code"] == "not_found" and w.messages == []
    # the deadline ends the stream
    w = Stream(sb, "sb", "filesystem.Filesystem/WatchDir", {"path": "/tmp/wd"}, timeout_ms=1000)
    assert w.finish()["error"]["code"] == "deadline_exceeded"
