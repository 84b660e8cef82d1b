"""GET /v1/envs/{name}/files/watch: an NDJSON stream of the changes below a directory.

Each watch is one helper that enters the environment like the files helper (mount and user
namespaces, not the pid namespace), resolves DIR inside it and watches with inotify, adding
subdirectories without ever following a symlink. These tests read the stream incrementally,
as a client would, and check that the helper is gone (killed and reaped, its cgroup removed)
when the client disconnects or the environment stops."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import uuid

import pytest

from conftest import PADDOCK, pid_alive, wait_for

BASE = {"sandbox": "/workspace", "computer": "/root"}


class WatchStream:
    """A watch read the way a client reads it: raw HTTP/1.1 over the unix socket, chunked
    encoding decoded as bytes arrive, one JSON object per line, empty keep-alive lines
    skipped."""

    def __init__(self, daemon, env, path, recursive=None, timeout=20):
        q = {"path": path}
        if recursive is not None:
            q["recursive"] = recursive
        url = "/v1/envs/%s/files/watch?%s" % (env, urllib.parse.urlencode(q))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(daemon.sock)
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: paddock\r\n\r\n" % url).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = self.sock.recv(65536)
            assert b, "connection closed before the headers: %r" % head
            head += b
        head, _, self.raw = head.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        self.data = b""
        self.ended = False   # the terminating chunk arrived
        self.closed = False  # the connection was closed
        self.events = []     # every event so far
        self.keepalives = 0

    def _decode(self):
        while not self.ended:
            size_line, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                return
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            if size == 0:
                self.ended = True
                return
            self.data += rest[:size]
            self.raw = rest[size + 2:]
        return

    def _lines(self):
        while b"\n" in self.data:
            line, _, self.data = self.data.partition(b"\n")
            if not line:
                self.keepalives += 1
                continue
            self.events.append(json.loads(line))

    def pump(self, timeout):
        """Read what arrives within timeout seconds (less if the stream ends)."""
        deadline = time.monotonic() + timeout
        while not self.ended and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                b = b""
            if not b:
                self.closed = True
                break
            self.raw += b
            self._decode()
            self._lines()

    def wait_for(self, pred, timeout=15, what="events"):
        deadline = time.monotonic() + timeout
        while not pred(self.events):
            left = deadline - time.monotonic()
            if left <= 0 or self.ended or self.closed:
                raise AssertionError("%s did not arrive; got %s" % (what, self.events))
            self.pump(min(left, 0.5))
        return self.events

    def wait_end(self, timeout=15):
        deadline = time.monotonic() + timeout
        while not (self.ended or self.closed) and time.monotonic() < deadline:
            self.pump(deadline - time.monotonic())
        assert self.ended or self.closed, "the stream did not end; got %s" % self.events

    def close(self):
        self.sock.close()


def make_env(daemon, kind):
    name = kind[:3] + "-" + uuid.uuid4().hex[:6]
    daemon.create(name, "--" + kind)
    return name


def helper_pids(daemon, env):
    """Pids in the environment's per-watch cgroups ("watch-N"), in every hierarchy."""
    pids = set()
    for d in daemon.cgroup_dirs(env):
        for k in os.listdir(d):
            if not k.startswith("watch-"):
                continue
            for f in ("cgroup.procs", "tasks"):
                try:
                    with open(os.path.join(d, k, f)) as fh:
                        pids |= {int(x) for x in fh.read().split()}
                except OSError:
                    pass
    return pids


def watch_cgroups(daemon, env):
    return [k for d in daemon.cgroup_dirs(env) for k in os.listdir(d) if k.startswith("watch-")]


def gone(pid):
    """Exited and reaped: no /proc entry at all (a zombie would still have one)."""
    return not os.path.exists("/proc/%d" % pid)


def inotify_fds(pid):
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:inotify":
                    n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n


def events_of(events, path):
    return [e["event"] for e in events if e.get("path") == path]


def in_order(seq, expected):
    """expected is a subsequence of seq."""
    it = iter(seq)
    return all(x in it for x in expected)


def has(events, path, event, type_=None):
    return any(e.get("path") == path and e.get("event") == event and
               (type_ is None or e.get("type") == type_) for e in events)


# --------------------------------------------------------------------------- events


@pytest.mark.parametrize("kind", ["sandbox", "computer"])
def test_events_arrive_with_their_paths(daemon, kind):
    env = make_env(daemon, kind)
    base = BASE[kind]
    w = WatchStream(daemon, env, base)
    try:
        assert w.status == 200 and w.headers["content-type"] == "application/x-ndjson"
        # the watch is in place once the headers are there
        daemon.sh(env, "cd %s && echo one > a && echo two >> a && chmod 600 a && mv a b && "
                       "rm b" % base)
        a, b = base + "/a", base + "/b"
        w.wait_for(lambda ev: has(ev, b, "delete"), what="delete of b")
        assert in_order(events_of(w.events, a), ["create", "modify", "attrib", "move_from"]), \
            w.events
        assert events_of(w.events, b) == ["move_to", "delete"], w.events
        assert all(e["type"] == "file" for e in w.events if e["path"] in (a, b))
        # a subdirectory and a file inside it, made by one command: the directory is watched
        # as soon as it appears, and what was already in it is reported as created
        daemon.sh(env, "mkdir %s/sub && echo x > %s/sub/f" % (base, base))
        sub, f = base + "/sub", base + "/sub/f"
        w.wait_for(lambda ev: has(ev, f, "create", "file"), what="create of sub/f")
        assert has(w.events, sub, "create", "dir")
        first = [i for i, e in enumerate(w.events) if e.get("path") in (sub, f)]
        assert w.events[first[0]]["path"] == sub, w.events  # the directory first
        daemon.sh(env, "echo more >> %s && mkdir -p %s/deeper/still && touch %s/deeper/still/g"
                  % (f, sub, sub))
        g = sub + "/deeper/still/g"
        w.wait_for(lambda ev: has(ev, f, "modify") and has(ev, g, "create"), what="nested")
        # moving the subdirectory: events follow it under its new name
        daemon.sh(env, "mv %s %s/moved && echo later >> %s/moved/f" % (sub, base, base))
        mf = base + "/moved/f"
        w.wait_for(lambda ev: has(ev, mf, "modify"), what="modify of moved/f")
        assert has(w.events, sub, "move_from", "dir") and has(w.events, base + "/moved", "move_to")
        # and removing it reports its contents and itself
        daemon.sh(env, "rm -r %s/moved" % base)
        w.wait_for(lambda ev: has(ev, base + "/moved", "delete", "dir"), what="delete of moved")
        assert in_order(events_of(w.events, mf), ["modify", "delete"])
        assert not w.ended and not w.closed
    finally:
        w.close()


def test_not_recursive(daemon):
    env = make_env(daemon, "computer")
    daemon.sh(env, "mkdir -p /srv/w/sub")
    w = WatchStream(daemon, env, "/srv/w", recursive="0")
    try:
        assert w.status == 200
        daemon.sh(env, "touch /srv/w/sub/inner && touch /srv/w/top")
        w.wait_for(lambda ev: has(ev, "/srv/w/top", "create"))
        w.pump(0.5)
        assert not [e for e in w.events if e["path"].startswith("/srv/w/sub/")], w.events
    finally:
        w.close()


def test_watched_directory_removed_ends_the_stream(daemon):
    env = make_env(daemon, "sandbox")
    daemon.sh(env, "mkdir -p /workspace/d/e")
    w = WatchStream(daemon, env, "/workspace/d")
    try:
        daemon.sh(env, "rm -r /workspace/d")
        w.wait_end()
        assert has(w.events, "/workspace/d/e", "delete", "dir")
        assert w.events[-1] == {"path": "/workspace/d", "event": "delete", "type": "dir"}
        assert w.ended, "the stream ends properly (last chunk)"
    finally:
        w.close()
    wait_for(lambda: not watch_cgroups(daemon, env), what="the watch cgroup to go")


def test_names_that_need_escaping(daemon):
    env = make_env(daemon, "computer")
    daemon.sh(env, "mkdir -p /srv/n")
    w = WatchStream(daemon, env, "/srv/n")
    try:
        daemon.sh(env, "cd /srv/n && touch 'quote\"back\\slash' \"$(printf 'tab\\tnl\\nend')\" "
                       "\"$(printf 'bad\\377')\"")
        w.wait_for(lambda ev: len([e for e in ev if e["event"] == "create"]) >= 3)
        paths = {e["path"] for e in w.events if "encoding" not in e}
        assert "/srv/n/quote\"back\\slash" in paths and "/srv/n/tab\tnl\nend" in paths
        b64 = [e for e in w.events if e.get("encoding") == "base64"]
        import base64
        assert b64 and base64.b64decode(b64[0]["path"]) == b"/srv/n/bad\xff"
    finally:
        w.close()


# --------------------------------------------------------------------------- errors


def test_errors_before_the_stream(daemon):
    env = make_env(daemon, "computer")
    daemon.sh(env, "mkdir -p /srv/d && touch /srv/f")
    url = "/v1/envs/%s/files/watch" % env

    def err(path, status, method="GET"):
        r = daemon.api(method, path)
        assert r.status == status, r
        return r.error()[1]

    assert "no such file" in err(url + "?path=/srv/none", 404).lower()
    assert "not a directory" in err(url + "?path=/srv/f", 400).lower()
    err(url, 400)                         # no path
    err(url + "?path=relative", 400)
    err(url + "?path=/srv/d&recursive=maybe", 400)
    err(url + "?path=/srv/d", 405, "POST")
    err("/v1/envs/nope/files/watch?path=/", 404)
    daemon.cli("pause", env)
    assert "paused" in err(url + "?path=/srv/d", 409)
    daemon.cli("resume", env)
    daemon.cli("stop", env)
    assert "not running" in err(url + "?path=/srv/d", 409)
    assert not watch_cgroups(daemon, env)


# --------------------------------------------------------------------------- escapes


@pytest.mark.parametrize("kind", ["sandbox", "computer"])
def test_symlinks_are_not_followed(daemon, kind, tmp_path):
    env = make_env(daemon, kind)
    base = BASE[kind]
    host_dir = str(tmp_path / "hostdir")
    os.mkdir(host_dir)
    daemon.sh(env, "mkdir -p %s/w %s/elsewhere && ln -s / %s/w/to_root && ln -s %s %s/w/to_host "
                   "&& ln -s %s/elsewhere %s/w/to_elsewhere"
              % (base, base, base, host_dir, base, base, base))
    # a recursive watch never descends through the symlinks inside
    w = WatchStream(daemon, env, base + "/w")
    try:
        assert w.status == 200
        daemon.sh(env, "touch %s/elsewhere/x /tmp/in_tmp && touch %s/w/marker" % (base, base))
        with open(os.path.join(host_dir, "host_file"), "w") as f:
            f.write("host")
        w.wait_for(lambda ev: has(ev, base + "/w/marker", "create"))
        w.pump(1.0)
        assert [e["path"] for e in w.events] == [base + "/w/marker"] * len(w.events), w.events
    finally:
        w.close()
    # watching the symlink itself resolves it inside the environment: "/" is the
    # environment's root, a host path does not exist there
    r = daemon.api("GET", "/v1/envs/%s/files/watch?path=%s/w/to_host" % (env, base))
    assert r.status == 404, r
    # A file made in the host's own / while the watch runs: had "/" been resolved on the host,
    # this non-recursive watch would report it (host_dir is far below /, so its files could
    # never show up here, and a sandbox makes no event of its own: the loop below would
    # check nothing).
    host_root_file = "/paddock-it-host_file-%s" % uuid.uuid4().hex[:8]
    w = WatchStream(daemon, env, base + "/w/to_root", recursive="0")
    try:
        assert w.status == 200
        with open(os.path.join(host_dir, "host_file2"), "w") as f:
            f.write("host")
        with open(host_root_file, "w") as f:
            f.write("host")
        daemon.sh(env, "touch /tmp/not_recursive")
        if kind == "computer":  # a sandbox's root is read-only
            daemon.sh(env, "touch /envroot_marker")
        w.pump(1.0)
        # only the environment's root is watched; events carry the path that was asked for
        for e in w.events:
            assert e["path"].startswith(base + "/w/to_root/"), e
            assert "host_file" not in e["path"], e
        if kind == "computer":
            assert has(w.events, base + "/w/to_root/envroot_marker", "create"), w.events
    finally:
        w.close()
        if os.path.exists(host_root_file):
            os.unlink(host_root_file)
    # /proc magic links are refused
    for p in ("/proc/self/root", "/proc/1/root", "/proc/1/cwd"):
        r = daemon.api("GET", "/v1/envs/%s/files/watch?path=%s" % (env, p))
        assert r.status in (400, 404), (p, r)
    # the host directory was never watched: nothing of it reached any stream, and it is intact
    assert sorted(os.listdir(host_dir)) == ["host_file", "host_file2"]


# --------------------------------------------------------------------------- ends


def test_disconnect_ends_the_helper(daemon):
    env = make_env(daemon, "sandbox")
    daemon.sh(env, "mkdir -p /workspace/a/b/c")
    w = WatchStream(daemon, env, "/workspace")
    pids = wait_for(lambda: helper_pids(daemon, env), what="the watch helper")
    assert len(pids) == 1
    pid = pids.pop()
    assert inotify_fds(pid) == 1
    assert inotify_fds(daemon.pid) == 0
    # the helper is not in the environment's pid namespace: nothing inside can see it
    cmdlines = daemon.sh(env, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "paddockd" not in cmdlines, cmdlines
    with open("/proc/%d/status" % pid) as f:
        nspid = [l for l in f if l.startswith("NSpid:")][0].split()[1:]
    assert len(nspid) == 1, nspid  # one pid namespace level: the daemon's
    # an idle stream: the client goes away without any event happening
    w.close()
    t0 = time.monotonic()
    wait_for(lambda: gone(pid), timeout=20, what="the helper to be killed and reaped")
    assert time.monotonic() - t0 < 15
    wait_for(lambda: not watch_cgroups(daemon, env), what="the watch cgroup to go")
    assert inotify_fds(daemon.pid) == 0
    # a busy stream: disconnect while events are flowing
    w = WatchStream(daemon, env, "/workspace")
    pid = wait_for(lambda: helper_pids(daemon, env), what="the second helper").pop()
    daemon.sh(env, "touch /workspace/x")
    w.wait_for(lambda ev: has(ev, "/workspace/x", "create"))
    w.close()
    daemon.sh(env, "for i in 1 2 3 4 5; do touch /workspace/y$i; done")
    wait_for(lambda: gone(pid), timeout=20, what="the second helper to go")
    wait_for(lambda: not watch_cgroups(daemon, env), what="the watch cgroup to go")
    # the daemon still serves
    assert daemon.sh(env, "echo ok") == "ok\n"


def test_keepalive_lines_while_idle(daemon):
    env = make_env(daemon, "sandbox")
    w = WatchStream(daemon, env, "/workspace")
    try:
        w.pump(6.5)
        assert w.keepalives >= 1 and w.events == [] and not w.ended
    finally:
        w.close()


def test_env_stop_ends_the_stream(daemon):
    env = make_env(daemon, "computer")
    w = WatchStream(daemon, env, "/root")
    try:
        pid = wait_for(lambda: helper_pids(daemon, env), what="the helper").pop()
        daemon.sh(env, "touch /root/before_stop")
        w.wait_for(lambda ev: has(ev, "/root/before_stop", "create"))
        daemon.cli("stop", env)
        w.wait_end(timeout=20)
        assert w.ended, "a stop ends the stream properly (last chunk)"
        assert gone(pid) or not pid_alive(pid)
        wait_for(lambda: gone(pid), what="the helper to be reaped")
    finally:
        w.close()
    # and it starts again with the environment
    daemon.cli("start", env)
    w = WatchStream(daemon, env, "/root")
    try:
        daemon.sh(env, "touch /root/after_start")
        w.wait_for(lambda ev: has(ev, "/root/after_start", "create"))
    finally:
        w.close()
    # removing a running environment ends its watches too
    w = WatchStream(daemon, env, "/root")
    try:
        pid = wait_for(lambda: helper_pids(daemon, env), what="the helper").pop()
        assert daemon.api("DELETE", "/v1/envs/%s?force=1" % env).status == 200
        w.wait_end(timeout=20)
        assert w.ended
        wait_for(lambda: gone(pid), what="the helper to be reaped")
    finally:
        w.close()


# --------------------------------------------------------------------------- limits


def test_slow_reader_gets_one_overflow(daemon):
    env = make_env(daemon, "sandbox")
    w = WatchStream(daemon, env, "/workspace")
    try:
        # one line of about 60 bytes per file: 3.6 MB, far more than the pipe (1 MiB) and the
        # buffers after it hold while nobody reads
        n = 60000
        daemon.sh(env, "cd /workspace && i=0; while [ $i -lt %d ]; do : > f$i; i=$((i+1)); "
                       "done" % n, timeout=300)
        seen = -1
        while seen != len(w.events):  # read everything there is
            seen = len(w.events)
            w.pump(1.5)
        overflows = [i for i, e in enumerate(w.events) if e == {"event": "overflow"}]
        assert len(overflows) == 1, (len(w.events), overflows)
        # dropped, not queued without bound: fewer lines than changes, the first ones in order
        assert 1000 < len(w.events) < n
        assert w.events[0] == {"path": "/workspace/f0", "event": "create", "type": "file"}
        # the stream goes on normally afterwards
        daemon.sh(env, "touch /workspace/after")
        w.wait_for(lambda ev: has(ev, "/workspace/after", "create"))
        assert w.events[-1]["path"] == "/workspace/after"
    finally:
        w.close()


def test_watch_limits(daemon):
    env = make_env(daemon, "computer")
    # more than 32 levels below the watched directory is refused at the start ...
    daemon.sh(env, "mkdir -p /srv/deep/" + "/".join(["d"] * 34))
    r = daemon.api("GET", "/v1/envs/%s/files/watch?path=/srv/deep" % env)
    assert r.status == 413, r
    # ... but not without recursion, nor from lower down
    w = WatchStream(daemon, env, "/srv/deep", recursive="0")
    assert w.status == 200
    w.close()
    w = WatchStream(daemon, env, "/srv/deep/d/d/d")
    assert w.status == 200
    w.close()
    # (a closed idle watch counts until its next keep-alive line finds the client gone)
    wait_for(lambda: not watch_cgroups(daemon, env), timeout=15, what="the watch cgroups to go")
    # at most 16 watches per environment at a time
    streams = [WatchStream(daemon, env, "/srv", recursive="0") for _ in range(16)]
    try:
        assert all(s.status == 200 for s in streams)
        r = daemon.api("GET", "/v1/envs/%s/files/watch?path=/srv&recursive=0" % env)
        assert r.status == 503, r
    finally:
        for s in streams:
            s.close()
    wait_for(lambda: not watch_cgroups(daemon, env), timeout=30, what="the watch cgroups to go")


# --------------------------------------------------------------------------- CLI


def test_cli_watch(daemon):
    env = make_env(daemon, "sandbox")

    def run(*args):
        return subprocess.Popen([PADDOCK, "--socket", daemon.sock, "watch", env, "/workspace"]
                                + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait_helpers(n):
        wait_for(lambda: len(helper_pids(daemon, env)) == n, what="%d helpers" % n)

    p, pj = run(), run("--json")
    try:
        wait_helpers(2)
        daemon.sh(env, "mkdir /workspace/d && echo x > /workspace/d/f")
        time.sleep(1)  # (removed at once, d could be gone before its watch is set up)
        daemon.sh(env, "rm -r /workspace/d")
        time.sleep(1.5)
    finally:
        for proc in (p, pj):
            proc.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    lines = out.decode().splitlines()
    assert lines[:2] == ["create /workspace/d", "create /workspace/d/f"], (lines, err)
    assert "delete /workspace/d" in lines and "delete /workspace/d/f" in lines
    jout, _ = pj.communicate(timeout=10)
    events = [json.loads(l) for l in jout.decode().splitlines()]
    assert events[0] == {"path": "/workspace/d", "event": "create", "type": "dir"}, events
    wait_helpers(0)
    # errors are one line and exit 1
    r = daemon.cli("watch", env, "/nonexistent", check=False)
    assert r.returncode == 1 and r.err.startswith("paddock: ") and r.out == "", r.err
    r = daemon.cli("watch", env, check=False)
    assert r.returncode == 2
    # the stream ends when the environment stops: watch exits 0
    p = run()
    wait_helpers(1)
    daemon.cli("stop", env)
    assert p.wait(timeout=20) == 0
