"""Test harness for Paddock's integration (tests/integration) and security (tests/security) tests: private paddockd instances driven through the real
CLI and the raw HTTP API.

Every daemon gets its own state directory under /var/tmp/paddock-it-*, its own socket, its own
uid registry and its own network namespace (so nothing here touches the host's network or
another paddockd). Teardown always removes every environment, stops the daemon, deletes the
namespace and the directories, and then fails the test if anything leaked: mounts below the
state directory, cgroups of the daemon's subtree, or processes that belong to the daemon.

Run as root with Debian's python:
    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration tests/security
PADDOCK_BUILD selects the directory holding paddockd, paddock and paddock-init
(default: <repo>/build).
"""
import ctypes
import fcntl
import hashlib
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import termios
import threading
import time

import sys

import pytest

# A run started in the background by a non-interactive shell (nohup, `cmd &`, some CI runners)
# inherits SIGINT ignored, and so would every CLI a test starts: tests that stop a CLI with
# SIGINT (watch, events, a pull the client abandons) would then wait for nothing. Children of
# a process with a handler get the default action back at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# Helper modules both suites import (wsclient, oci_layout, registry_proxy).
sys.path.insert(0, os.path.join(HERE, "integration"))
BUILD = os.path.abspath(os.environ.get("PADDOCK_BUILD", os.path.join(REPO, "build")))
PADDOCKD = os.path.join(BUILD, "paddockd")
PADDOCK = os.path.join(BUILD, "paddock")
CGROUP_ROOT = "/sys/fs/cgroup"

_counter = itertools.count()


# --------------------------------------------------------------------------- HTTP over unix


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return json.loads(self.body)

    def error(self):
        """(code, message) of a JSON error reply; asserts the documented shape."""
        j = self.json
        assert isinstance(j, dict) and set(j) == {"error"}, self.body
        e = j["error"]
        assert isinstance(e.get("code"), str) and isinstance(e.get("message"), str), self.body
        return e["code"], e["message"]

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:500])


# --------------------------------------------------------------------------- small helpers


def fnv1a(s):
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def starved(daemon, name, *create_args):
    """A computer with a 1% CPU limit whose 64 busy loops have all of it: whatever else runs
    there (an exec slot, a command) gets almost no CPU, and takes seconds (with 16, a slot's
    clone was once done in 1.4 s). The loops start before the limit: under it, the shell that
    forks them got ever less of the 1% as they started and once took over a minute."""
    daemon.create(name, "--computer", *create_args)
    daemon.sh(name, "for i in $(seq 64); do (while :; do :; done) & done")
    r = daemon.api("PATCH", "/v1/envs/" + name, {"cpus": 0.01})
    assert r.status == 200 and r.json["limits"]["cpus"] == 0.01, r
    time.sleep(1)  # the spinners have its CPU


def longest_wait(daemon, seconds=3.0):
    """Another client's longest wait for GET /v1/system over seconds of asking in a loop."""
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        assert daemon.api("GET", "/v1/system", timeout=30).status == 200
        worst = max(worst, time.monotonic() - t0)
    return worst


def wait_for(pred, timeout=10.0, interval=0.05, what="condition"):
    """Poll pred() until it returns something truthy; return that value or fail."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return st[st.rindex(")") + 2] != "Z"


def children_of(ppid):
    """(pid, comm, state) of every process whose parent is ppid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) == ppid:
            out.append((int(d), st[st.index("(") + 1:st.rindex(")")], fields[0]))
    return out


def proc_cgroup(pid):
    """/proc/PID/cgroup's text, or "" once the process is gone."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            return f.read()
    except OSError:
        return ""


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def find_cgroup_dirs(name, maxdepth=4):
    """Every directory called `name` below /sys/fs/cgroup/<hierarchy>/, at most maxdepth deep."""
    found = []
    try:
        hiers = os.listdir(CGROUP_ROOT)
    except OSError:
        return found
    for h in hiers:
        top = os.path.join(CGROUP_ROOT, h)
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for dirpath, dirnames, _ in os.walk(top):
            depth = dirpath[len(top):].count("/")
            if name in dirnames:
                found.append(os.path.join(dirpath, name))
            if depth >= maxdepth:
                dirnames[:] = []
            else:
                # never descend into paddock subtrees of other daemons (could be large)
                dirnames[:] = [d for d in dirnames if not d.startswith("paddock-")]
    return found


def env_cgroup_dirs(subtree_dirs, env):
    """The daemon names an environment's cgroup "env-<name>" (so no name can clash with a
    cgroup interface file)."""
    name = "env-" + env
    return [os.path.join(d, name) for d in subtree_dirs if os.path.isdir(os.path.join(d, name))]


def _rmdir_tree(path):
    """rmdir a cgroup directory, children first (cgroupfs: only directories, never files)."""
    for dirpath, dirnames, _ in os.walk(path, topdown=False):
        for d in dirnames:
            try:
                os.rmdir(os.path.join(dirpath, d))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        pass


# --------------------------------------------------------------------------- the daemon


class Daemon:
    """One private paddockd. Use through the `daemon` / `make_daemon` fixtures."""

    def __init__(self, image_dir, uid_registry=None, import_image=True, extra_args=(),
                 loopback=False):
        self.extra_args = [str(a) for a in extra_args]  # more paddockd flags, on every start
        self.extra_env = {}  # more environment variables for the next starts
        self.ctty = None  # a terminal fd: the next starts get it as controlling terminal
        self.tmp = tempfile.mkdtemp(prefix="paddock-it-", dir="/var/tmp")
        os.chmod(self.tmp, 0o711)
        self.root = os.path.join(self.tmp, "root")
        self.sock = os.path.join(self.tmp, "paddock.sock")
        self.own_registry = uid_registry is None
        self.uids = uid_registry or os.path.join(self.tmp, "uids")
        self.logpath = os.path.join(self.tmp, "paddockd.log")
        self.netns = "pdk-it-%d-%d" % (os.getpid(), next(_counter))
        self.proc = None
        self.pids_started = set()  # every daemon pid we started (only these are ever signalled)
        self.image_dir = image_dir
        self.subtree = None
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        if loopback:  # 127.0.0.1 and ::1 usable in the namespace (the gateway's listeners)
            subprocess.run(["ip", "-n", self.netns, "link", "set", "lo", "up"], check=True)
        self.netns_path = "/run/netns/" + self.netns
        self.start()
        # realpath: the daemon names its cgroup subtree after the resolved root
        self.subtree = "paddock-%08x" % fnv1a(os.path.realpath(self.root))
        if import_image:
            self.cli("image", "import", "base", image_dir)

    # ---- process control

    def _take_ctty(self):
        """In the child before exec: a new session whose controlling terminal is self.ctty
        (like a daemon started by hand in a terminal)."""
        os.setsid()
        fcntl.ioctl(self.ctty, termios.TIOCSCTTY, 0)

    def start(self, timeout=15):
        assert self.proc is None or self.proc.poll() is not None, "daemon already running"
        log = open(self.logpath, "ab")
        try:
            self.proc = subprocess.Popen(
                ["nsenter", "--net=" + self.netns_path, PADDOCKD, "--root", self.root,
                 "--socket", self.sock, "--uid-registry", self.uids,
                 "--default-image", "base"] + self.extra_args,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                env=dict(os.environ, **self.extra_env),
                preexec_fn=self._take_ctty if self.ctty is not None else None)
        finally:
            log.close()
        self.pids_started.add(self.proc.pid)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("paddockd exited with %s during startup:\n%s"
                                     % (self.proc.returncode, self.log()))
            try:
                if self.api("GET", "/v1/system", timeout=2).status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError("paddockd did not answer within %ss:\n%s" % (timeout, self.log()))
            time.sleep(0.02)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        assert self.running()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL; only ever the pid we started."""
        if not self.running():
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def restart(self, kill=False):
        if kill:
            self.kill9()
        else:
            self.stop()
        self.start()

    def log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # ---- clients

    def cli(self, *args, input=None, check=True, timeout=120, env=None):
        e = dict(os.environ)
        e.pop("PADDOCK_SOCKET", None)
        if env:
            e.update(env)
        if isinstance(input, str):
            input = input.encode()
        p = subprocess.run([PADDOCK, "--socket", self.sock] + [str(a) for a in args],
                           input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, env=e, stdin=None if input is not None else subprocess.DEVNULL)
        p.out = p.stdout.decode(errors="replace")
        p.err = p.stderr.decode(errors="replace")
        if check and p.returncode != 0:
            raise AssertionError("paddock %s exited %d\nstdout: %s\nstderr: %s"
                                 % (" ".join(map(str, args)), p.returncode, p.out, p.err))
        return p

    def conn(self, timeout=60):
        return UnixHTTPConnection(self.sock, timeout=timeout)

    def api(self, method, path, body=None, raw=None, headers=None, timeout=120):
        """Raw HTTP request; body is JSON-encoded, raw is sent as is. Returns a Response."""
        c = self.conn(timeout)
        try:
            h = dict(headers or {})
            data = raw
            if body is not None:
                data = json.dumps(body).encode()
                h.setdefault("Content-Type", "application/json")
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Response(r.status, dict(r.getheaders()), r.read())
        finally:
            c.close()

    def raw_request(self, data, timeout=30):
        """Send raw bytes (a whole HTTP request) and return (status, headers_text, body). Keeps
        reading after the server stops reading early (e.g. an early 413)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.sock)
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
            chunks = []
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    break
                if not b:
                    break
                chunks.append(b)
        finally:
            s.close()
        resp = b"".join(chunks)
        head, _, body = resp.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else None
        return status, head.decode(errors="replace"), body

    # ---- conveniences

    def create(self, name, *opts):
        p = self.cli("create", name, *opts)
        assert p.out.strip() == name, p.out
        return self.inspect(name)

    def inspect(self, name):
        r = self.api("GET", "/v1/envs/" + name)
        assert r.status == 200, r
        return r.json

    def envs(self):
        r = self.api("GET", "/v1/envs")
        assert r.status == 200, r
        return {e["name"]: e for e in r.json["envs"]}

    def exec(self, name, cmd, expect_status=200, **kw):
        """Buffered exec through the API; returns the result object."""
        if isinstance(cmd, str):
            cmd = ["sh", "-c", cmd]
        body = {"cmd": cmd}
        body.update(kw)
        r = self.api("POST", "/v1/envs/%s/exec" % name, body)
        assert r.status == expect_status, r
        return r.json

    def sh(self, name, script, **kw):
        """Run a shell script in an environment; it must succeed; returns stdout."""
        res = self.exec(name, ["sh", "-c", script], **kw)
        assert res["exit_code"] == 0, res
        return res["stdout"]

    def uid_claims(self, image_helpers=False):
        """The id ranges claimed in the daemon's registry: environments' ones, and with
        image_helpers the range the daemon holds for image work from its first image job on."""
        try:
            names = sorted(os.listdir(self.uids))
        except FileNotFoundError:
            return []
        if image_helpers:
            return names
        out = []
        for n in names:
            try:
                with open(os.path.join(self.uids, n)) as f:
                    if f.read().endswith(" image helpers"):
                        continue
            except OSError:
                pass
            out.append(n)
        return out

    def env_dir(self, name):
        return os.path.join(self.root, "envs", name)

    def subtree_dirs(self):
        return find_cgroup_dirs(self.subtree) if self.subtree else []

    def cgroup_dirs(self, env):
        return env_cgroup_dirs(self.subtree_dirs(), env)

    def freeze_from_outside(self, env):
        """Freeze env's group with the v1 freezer, as another tool would behind the daemon's
        back (its tasks then ignore SIGKILL until thawed); returns the freezer.state path for
        thaw_from_outside. Skips the test where there is no v1 freezer (a cgroup v2 freeze
        lets SIGKILL through)."""
        state = self.cgroup_file(env, "freezer.state")
        if state is None:
            pytest.skip("needs the cgroup v1 freezer: a cgroup v2 freeze lets SIGKILL through")
        with open(state, "w") as f:
            f.write("FROZEN")
        return state

    @staticmethod
    def thaw_from_outside(state):
        if os.path.exists(state):
            with open(state, "w") as f:
                f.write("THAWED")

    def cgroup_file(self, env, filename):
        """The env's cgroup file with this name in whichever hierarchy has it (host side)."""
        for d in self.cgroup_dirs(env):
            p = os.path.join(d, filename)
            if os.path.exists(p):
                return p
        return None

    # ---- teardown and leak checks

    def _our_processes(self):
        """Pids (other than ourselves) in this daemon's cgroup subtree, in its network namespace,
        or holding a file below its temp directory open."""
        me = os.getpid()
        try:
            ns_ino = os.stat(self.netns_path).st_ino
        except OSError:
            ns_ino = None
        marker = "/" + self.subtree + "/" if self.subtree else None
        found = {}
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            pid = int(d)
            why = None
            try:
                if marker:
                    with open("/proc/%d/cgroup" % pid) as f:
                        cg = f.read()
                    if marker in cg or cg.rstrip().endswith("/" + self.subtree):
                        why = "in cgroup subtree " + self.subtree
                if not why and ns_ino is not None and os.stat("/proc/%d/ns/net" % pid).st_ino == ns_ino:
                    why = "in netns " + self.netns
                if not why:
                    fddir = "/proc/%d/fd" % pid
                    for fd in os.listdir(fddir):
                        try:
                            t = os.readlink(os.path.join(fddir, fd))
                        except OSError:
                            continue
                        if t.startswith(self.tmp + "/"):
                            why = "holds %s open" % t
                            break
            except OSError:
                continue
            if why and pid_alive(pid):
                found[pid] = why
        return found

    def teardown(self):
        problems = []
        # 1. remove every environment through the API (start a daemon again if a test left it dead)
        try:
            if not self.running():
                self.start()
            for name in list(self.envs()):
                r = self.api("DELETE", "/v1/envs/%s?force=1" % name)
                if r.status not in (200, 404):
                    problems.append("rm -f %s: %r" % (name, r))
            left = self.envs()
            if left:
                problems.append("environments still listed after rm -f: %s" % sorted(left))
        except Exception as ex:  # keep cleaning up
            problems.append("removing environments: %r" % (ex,))
        # 2. stop the daemon (SIGTERM, then SIGKILL, only our own pid)
        try:
            self.stop()
            if self.proc.returncode not in (0, -signal.SIGKILL):
                problems.append("paddockd exited with %s on SIGTERM" % self.proc.returncode)
        except Exception as ex:
            problems.append("stopping paddockd: %r" % (ex,))
        for pid in self.pids_started:
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        # 3. leaked processes (started by our daemon): report and kill
        procs = self._our_processes()
        if procs:
            problems.append("leaked processes: %s" % procs)
            for pid in procs:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.2)
        # 4. leaked cgroups: env groups left in the subtree. The subtree itself (empty) is the
        #    daemon's to keep across restarts; remove it here so test runs do not pile them up.
        for d in self.subtree_dirs():
            kids = [k for k in os.listdir(d) if os.path.isdir(os.path.join(d, k))]
            if kids:
                problems.append("leaked cgroups in %s: %s" % (d, kids))
            _rmdir_tree(d)
        # 5. leaked mounts below the temp dir (in our mount namespace); the btrfs pool stays
        #    mounted when the daemon stops (running computers use it) and is checked below
        pool = os.path.join(self.root, "pool")
        mounts = [m for m in self._mounts() if m != pool]
        if mounts:
            problems.append("leaked mounts: %s" % mounts)
            for m in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", m], stderr=subprocess.DEVNULL)
        # 6. state left on disk by removed environments
        envs_dir = os.path.join(self.root, "envs")
        if os.path.isdir(envs_dir) and os.listdir(envs_dir):
            problems.append("leftover environment directories: %s" % os.listdir(envs_dir))
        if self.own_registry and self.uid_claims(image_helpers=True):
            problems.append("leftover uid range claims: %s" % self.uid_claims(image_helpers=True))
        # 7. the storage pool: unmounting it must free its loop device (autoclear)
        if pool in self._mounts() and subprocess.run(["umount", pool]).returncode != 0:
            problems.append("the pool %s could not be unmounted (busy)" % pool)
            subprocess.run(["umount", "-l", pool], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30  # the kernel detaches autoclear devices in a worker
        while self._loop_devices() and time.monotonic() < deadline:
            time.sleep(0.05)
        loops = self._loop_devices()
        holders = self._loop_holders() if loops else []
        if loops and holders:
            # Another process on this host made a mount namespace (a private copy of ours)
            # while the pool was mounted: the kernel frees the device when that one ends.
            print("note: %s stays attached while %s hold a copy of the pool mount"
                  % (loops, holders))
        elif loops:
            problems.append("loop devices still attached to files below %s: %s"
                            % (self.tmp, loops))
            for dev in loops:
                subprocess.run(["losetup", "-d", dev], stderr=subprocess.DEVNULL)
        # 8. network namespace and directories
        subprocess.run(["ip", "netns", "delete", self.netns], stderr=subprocess.DEVNULL)
        if os.path.exists(self.netns_path):
            problems.append("netns %s still exists" % self.netns)
        if not self._mounts():
            subprocess.run(["rm", "-rf", "--one-file-system", self.tmp])
        else:
            problems.append("not removing %s: mounts remain" % self.tmp)
        return problems

    def _loop_holders(self):
        """Processes whose mount namespace still has our pool mounted at its host path: copies
        made by mount namespaces created elsewhere (environments see only their own root)."""
        out = []
        for d in os.listdir("/proc"):
            try:
                with open("/proc/%s/mountinfo" % d) as f:
                    if any(" btrfs /dev/loop" in l and self.tmp in l for l in f):
                        with open("/proc/%s/comm" % d) as c:
                            out.append("%s:%s" % (d, c.read().strip()))
            except OSError:
                continue
        return out

    def _loop_devices(self):
        """Loop devices whose backing file lies below our temp directory."""
        found = []
        for dev in os.listdir("/sys/block"):
            try:
                with open("/sys/block/%s/loop/backing_file" % dev) as f:
                    backing = f.read().strip()
            except OSError:
                continue
            if backing.startswith(self.tmp + "/"):
                found.append("/dev/" + dev)
        return found

    def _mounts(self):
        out = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4]
                if mp == self.tmp or mp.startswith(self.tmp + "/"):
                    out.append(mp)
        return out


# --------------------------------------------------------------------------- fixtures


def pytest_configure(config):
    if os.geteuid() != 0:
        raise pytest.UsageError("the integration tests run as root")
    for b in (PADDOCKD, PADDOCK, os.path.join(BUILD, "paddock-init")):
        if not os.access(b, os.X_OK):
            raise pytest.UsageError("%s is missing: run make (or set PADDOCK_BUILD)" % b)


@pytest.fixture(scope="session")
def image_dir():
    d = tempfile.mkdtemp(prefix="paddock-it-img-", dir="/var/tmp")
    rootfs = os.path.join(d, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    yield rootfs
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def make_daemon(image_dir):
    """Factory: make_daemon(uid_registry=None, extra_args=()) -> a started Daemon with image
    "base"; extra_args are more paddockd flags (kept across restarts).
    Everything it made is removed at the end of the test, and leaks fail the test."""
    made = []

    def make(**kw):
        d = Daemon(image_dir, **kw)
        made.append(d)
        return d

    yield make
    problems = []
    for d in reversed(made):
        try:
            problems += ["[%s] %s" % (d.tmp, p) for p in d.teardown()]
        except Exception as ex:
            problems.append("[%s] teardown crashed: %r" % (d.tmp, ex))
    if problems:
        pytest.fail("cleanup found leaks:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()


@pytest.fixture
def shared_registry():
    d = tempfile.mkdtemp(prefix="paddock-it-uids-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------- TLS through the gateway

CLONE_NEWNET = 0x40000000


def netns_socket(netns_path, family=socket.AF_INET):
    """A TCP socket made inside the network namespace at netns_path (a socket stays in the
    namespace it was made in, so connecting from this thread reaches that namespace's
    addresses). A short-lived thread enters the namespace; this thread does not move."""
    out = {}

    def run():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                out["err"] = OSError(e, "setns %s: %s" % (netns_path, os.strerror(e)))
            else:
                out["sock"] = socket.socket(family, socket.SOCK_STREAM)
        finally:
            os.close(fd)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "err" in out:
        raise out["err"]
    return out["sock"]


def cert_fingerprint(der):
    """The daemon's notation of a certificate's SHA-256: sha256:AB:CD:..."""
    return "sha256:" + ":".join("%02X" % b for b in hashlib.sha256(der).digest())


class TLSConnection(http.client.HTTPConnection):
    """HTTPS to the gateway inside a daemon's network namespace, the server certificate pinned
    to a fingerprint (never skipped: a mismatch raises ssl.SSLError). tls=False: plain HTTP
    (--listen-plain). self.peer_fingerprint is what the server presented."""

    def __init__(self, netns_path, host, port, fingerprint, timeout=60, tls=True):
        super().__init__(host, port, timeout=timeout)
        self.netns_path = netns_path
        self.fingerprint = fingerprint
        self.tls = tls
        self.peer_fingerprint = None

    def connect(self):
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        s = netns_socket(self.netns_path, family)
        try:
            s.settimeout(self.timeout)
            s.connect((self.host, self.port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE  # verified below, against the pinned fingerprint
                s = ctx.wrap_socket(s)
                self.peer_fingerprint = cert_fingerprint(s.getpeercert(binary_form=True))
                if self.peer_fingerprint != self.fingerprint:
                    raise ssl.SSLError("server certificate %s is not the pinned %s"
                                       % (self.peer_fingerprint, self.fingerprint))
        except BaseException:
            s.close()
            raise
        self.sock = s


def gateway_info(daemon):
    """The "gateway" object of GET /v1/system over the unix socket."""
    r = daemon.api("GET", "/v1/system")
    assert r.status == 200, r
    return r.json.get("gateway")


def tls_request(daemon, host, port, method, path, body=None, token=None, headers=None,
                fingerprint=None, tls=True, timeout=60):
    """One request through the gateway on a new connection; the certificate pinned to the
    fingerprint GET /v1/system reports (or the one given). Returns a Response."""
    if fingerprint is None and tls:
        fingerprint = gateway_info(daemon)["tls_fingerprint"]
    c = TLSConnection(daemon.netns_path, host, port, fingerprint, timeout=timeout, tls=tls)
    try:
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        if token:
            h["Authorization"] = "Bearer " + token
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        return Response(r.status, dict(r.getheaders()), r.read())
    finally:
        c.close()


GATEWAY_PORT = 8443  # every daemon has a network namespace of its own: the port is always free


@pytest.fixture
def gateway_daemon(make_daemon):
    """A daemon with the network gateway on 127.0.0.1 and [::1] (TLS) and 127.0.0.1 plain
    (port + 1), in its own network namespace with loopback up."""
    p = GATEWAY_PORT
    return make_daemon(loopback=True,
                       extra_args=["--listen", "127.0.0.1:%d" % p, "--listen", "[::1]:%d" % p,
                                   "--listen-plain", "127.0.0.1:%d" % (p + 1)])
