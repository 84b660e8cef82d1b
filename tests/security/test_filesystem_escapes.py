"""Filesystem escapes: host files, the state directory and descriptors of the host stay out of
reach from inside (the leaked-fd class of CVE-2024-21626, the /proc/self/exe overwrite of
CVE-2019-5736), and nothing given to the files API (path strings, symlinks, /proc magic links,
races, tar entries) reads, writes or reveals a canary file on the host: every path is resolved
inside the environment (openat2 RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS in a helper whose root is
the environment's)."""
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
import uuid

import pytest

from conftest import PADDOCK, PADDOCKD, pid_alive
from files_api import Canary, Files, error_code, make_env, tar_bytes, tinfo, untar

KINDS = ["computer", "sandbox"]


def create(daemon, name, kind, *opts):
    return daemon.create(name, "--" + kind, *opts)


@pytest.mark.parametrize("kind", KINDS)
def test_host_files_are_not_visible(daemon, kind):
    create(daemon, "f1", kind)
    tag = "paddock-it-canary-" + uuid.uuid4().hex[:12]
    host_files = ["/root/" + tag, os.path.join(daemon.tmp, tag), "/var/tmp/" + tag]
    try:
        for f in host_files:
            with open(f, "w") as fh:
                fh.write("secret\n")
        for f in host_files:
            r = daemon.exec("f1", ["cat", f])
            assert r["exit_code"] != 0 and "secret" not in r["stdout"], (f, r)
        assert tag not in daemon.sh("f1", "ls -a /root /var/tmp")
        r = daemon.exec("f1", ["sh", "-c", "find / -xdev -name '%s*' 2>/dev/null; true" % tag[:20]])
        assert tag not in r["stdout"], r
        # neither the daemon's state directory nor its socket are reachable
        for p in (daemon.root, daemon.sock, daemon.env_dir("f1")):
            assert daemon.exec("f1", ["test", "-e", p])["exit_code"] == 1, p
    finally:
        for f in host_files:
            if os.path.exists(f):
                os.unlink(f)


@pytest.mark.parametrize("kind", KINDS)
def test_exec_has_no_leaked_fds(daemon, kind):
    create(daemon, "fd", kind)
    for user in (None, "1000"):
        kw = {"user": user} if user else {}
        out = daemon.exec("fd", ["ls", "/proc/self/fd"], **kw)
        fds = sorted(int(x) for x in out["stdout"].split())
        # 0, 1, 2 and the directory ls itself has open
        assert fds[:3] == [0, 1, 2] and len(fds) <= 4, (user, out)
    out = daemon.cli("exec", "fd", "--", "ls", "/proc/self/fd").out
    assert len(out.split()) <= 4 and out.split()[:3] == ["0", "1", "2"], out


@pytest.mark.parametrize("kind", KINDS)
def test_pid1_holds_no_host_files(daemon, kind):
    """PID 1 of an environment must not keep files of the host open (e.g. the daemon's log):
    root inside a computer may ptrace its own PID 1 and write through them."""
    e = create(daemon, "h1", kind)
    pid = e["pid"]
    fddir = "/proc/%d/fd" % pid
    bad = {}
    for fd in os.listdir(fddir):
        try:
            t = os.readlink(os.path.join(fddir, fd))
        except OSError:
            continue
        if t.startswith("/") and t != "/dev/null":
            bad[int(fd)] = t
    assert bad == {}, "PID 1 (host pid %d) holds host files open: %s" % (pid, bad)
    assert pid_alive(pid)


@pytest.fixture
def canary(tmp_path):
    c = Canary(tmp_path)
    try:
        yield c
        c.check()
    finally:
        c.remove()


@pytest.mark.parametrize("kind", KINDS)
def test_path_strings_stay_inside(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    env_passwd = daemon.sh(env, "cat /etc/passwd").encode()
    with open("/etc/passwd", "rb") as f:
        assert f.read() != env_passwd
    # relative paths are refused, ".." stops at the environment's root
    error_code(fs.read("../../etc/shadow"), 400)
    error_code(fs.read("/../../etc/shadow"), 404)  # the image has none; the host's stays unread
    r = fs.read("/../../../etc/passwd")
    assert r.status == 200 and r.body == env_passwd
    assert fs.read("/tmp/../../../../etc/./passwd").body == env_passwd
    # absolute host paths mean paths inside the environment
    for p in (canary.file, canary.root_file, canary.dir):
        assert fs.read(p).status == 404
        assert fs.stat(p).status == 404
        assert fs.list(p).status == 404
        assert fs.archive_get(p).status == 404
    # /proc magic links are never followed
    for prefix in ("/proc/self/root", "/proc/1/cwd", "/proc/1/root", "/proc/thread-self/root"):
        for p in (canary.file, canary.root_file, "/etc/passwd"):
            r = fs.read(prefix + p)
            assert r.status in (400, 404), (prefix + p, r)
            assert fs.stat(prefix + p).status in (400, 404)
            assert fs.archive_get(prefix + p).status in (400, 404)
        assert fs.list(prefix + "/root").status in (400, 404)
        assert fs.write(prefix + "/tmp/" + canary.marker, b"x").status in (400, 403, 404)
        assert fs.archive_put(prefix + "/tmp",
                              tar_bytes([(tinfo(canary.marker), b"x")])).status in (400, 403, 404)
    r = fs.read("/proc/1/root/etc/passwd")
    assert r.status == 400 and "symbolic links" in r.error()[1].lower() or r.status == 404, r
    # writes to host-looking paths land inside the environment
    writable = kind == "computer" or canary.file.startswith("/tmp/")
    r = fs.write("/../../.." + canary.file, b"inside")
    assert r.status == (200 if writable else 403), r
    if writable:
        assert daemon.sh(env, "cat " + canary.file) == "inside"
    r = fs.write(canary.root_file, b"inside")
    assert r.status == (200 if kind == "computer" else 403), r
    r = fs.write("/../" + canary.marker, b"x")
    assert r.status == (200 if kind == "computer" else 403), r
    r = fs.archive_put("/../..", tar_bytes([(tinfo(canary.marker + ".t"), b"x")]))
    assert r.status == (200 if kind == "computer" else 403), r
    assert fs.remove(canary.root_file).status in (200, 403, 404)
    assert os.path.exists(canary.root_file)
    assert fs.move(canary.file, "/tmp/moved").status in (200, 403, 404)
    assert fs.move("/tmp/none", canary.file).status == 404


@pytest.mark.parametrize("kind", KINDS)
def test_symlinks_stay_inside(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    env_passwd = daemon.sh(env, "cat /etc/passwd").encode()
    daemon.sh(env, "cd /tmp && ln -s / l_root && ln -s ../../.. l_up && ln -s %s l_canary && "
                   "ln -s %s l_cdir && ln -s %s l_rcanary && ln -s /proc/1/root l_proc && "
                   "ln -s /proc/self/root l_self && mkdir -p real && echo inside > real/f"
              % (canary.file, canary.dir, canary.root_file))
    # reads follow symlinks, but only inside
    for link in ("/tmp/l_root", "/tmp/l_up", "/tmp/l_up/tmp/l_root"):
        assert fs.read(link + "/etc/passwd").body == env_passwd
        assert fs.read(link + canary.file).status == 404
        assert fs.read(link + canary.root_file).status == 404
        names = [e["name"] for e in fs.list(link + "/root").json["entries"]]
        assert os.path.basename(canary.root_file) not in names
        t = untar(fs.archive_get(link + "/root").body)
        assert not [m for m in t.getnames() if "paddock-canary" in m]
    for link in ("/tmp/l_canary", "/tmp/l_rcanary", "/tmp/l_cdir/canary.txt"):
        assert fs.read(link).status == 404
    for link in ("/tmp/l_proc/etc/passwd", "/tmp/l_self" + canary.file,
                 "/tmp/l_proc" + canary.root_file):
        assert fs.read(link).status in (400, 404)
    assert fs.list("/tmp/l_cdir").status == 404
    assert fs.list("/tmp/l_proc/").status in (400, 404)
    # stat describes the symlink itself (its text is the environment's own)
    st = fs.stat("/tmp/l_canary").json
    assert st["type"] == "symlink" and st["target"] == canary.file
    assert fs.stat("/tmp/l_proc").json["type"] == "symlink"
    # archives hold symlinks as symlinks and never follow them
    r = fs.archive_get("/tmp")
    assert r.status == 200
    t = untar(r.body)
    links = {m.name: m.linkname for m in t.getmembers() if m.issym()}
    assert links["tmp/l_root"] == "/" and links["tmp/l_canary"] == canary.file
    assert links["tmp/l_proc"] == "/proc/1/root"
    assert not [n for n in t.getnames() if n.startswith("tmp/l_root/")]
    t = untar(fs.archive_get("/tmp/l_root").body)
    assert [(m.name, m.issym()) for m in t.getmembers()] == [("l_root", True)]
    # writing a symlink's name replaces the symlink; writing through a symlinked directory
    # stays inside
    assert fs.write("/tmp/l_canary", b"replaced").status == 200
    assert fs.stat("/tmp/l_canary").json["type"] == "file"
    assert fs.write("/tmp/l_root/tmp/through", b"t").status == 200
    assert daemon.sh(env, "cat /tmp/through") == "t"
    assert fs.write("/tmp/l_cdir/" + canary.marker, b"m").status in (200, 403, 404)
    r = fs.write("/tmp/l_up/root/" + os.path.basename(canary.root_file), b"env's own")
    assert r.status == (200 if kind == "computer" else 403), r
    assert fs.write("/tmp/l_proc/tmp/" + canary.marker, b"x").status in (400, 404)
    assert fs.mkdir("/tmp/l_cdir/sub", parents="1").status in (200, 403, 404)
    assert fs.mkdir("/tmp/l_proc/sub", parents="1").status in (400, 404)
    # archive uploads into symlinked targets stay inside
    tb = tar_bytes([(tinfo(canary.marker), b"m")])
    assert fs.archive_put("/tmp/l_cdir", tb).status in (200, 403, 404)
    assert fs.archive_put("/tmp/l_proc", tb).status in (400, 404)
    r = fs.archive_put("/tmp/l_up", tb)
    assert r.status == (200 if kind == "computer" else 403), r
    # removal and moves act on the link, not on its target
    assert fs.remove("/tmp/l_rcanary").status == 200
    assert fs.move("/tmp/l_cdir", "/tmp/l_cdir2").status == 200
    assert fs.remove("/tmp/l_root", recursive="1").status == 200
    assert daemon.sh(env, "cat /tmp/real/f") == "inside\n"


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_tar_uploads(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    m = canary.marker
    fs.mkdir("/tmp/up")
    cases = {
        "dotdot": [(tinfo("ok1"), b"1"), (tinfo("../" + m), b"x")],
        "dotdot-deep": [(tinfo("a/../../" + m), b"x")],
        "absolute": [(tinfo("/" + m), b"x")],
        "absolute-host": [(tinfo(canary.file), b"x")],
        "symlink-then-through": [(tinfo("s", tarfile.SYMTYPE, "/"), None),
                                 (tinfo("s/tmp/" + m), b"x")],
        "relsymlink-then-through": [(tinfo("r", tarfile.SYMTYPE, "../../.."), None),
                                    (tinfo("r/tmp/" + m), b"x")],
        "hostsymlink-then-through": [(tinfo("h", tarfile.SYMTYPE, canary.dir), None),
                                     (tinfo("h/" + m), b"x")],
        "hardlink-out": [(tinfo("hl", tarfile.LNKTYPE, "../../etc/passwd"), None)],
        "hardlink-abs": [(tinfo("ha", tarfile.LNKTYPE, canary.file), None)],
    }
    for name, members in cases.items():
        r = fs.archive_put("/tmp/up/" + name, tar_bytes(members))
        assert r.status in (200, 400, 403, 404), (name, r)
    out = daemon.sh(env, "find / -xdev -name '%s*' 2>/dev/null; find /tmp -name '%s*'" % (m, m))
    for line in out.split():
        assert line.startswith("/tmp/up/"), out
    # devices are skipped, the rest is extracted
    dev = tinfo("null2", tarfile.CHRTYPE)
    dev.devmajor, dev.devminor = 1, 3
    r = fs.archive_put("/tmp/up/dev", tar_bytes([(dev, None), (tinfo("plain"), b"p")]))
    assert r.status == 200 and r.json["entries"] == 1, r
    assert fs.stat("/tmp/up/dev/null2").status == 404
    assert fs.read("/tmp/up/dev/plain").body == b"p"


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_swapped_during_archives(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    daemon.sh(env, "mkdir -p /tmp/real/d && echo inside > /tmp/real/f && ln -s %s /tmp/real/c"
              % canary.file)
    stop = "/tmp/stop-" + uuid.uuid4().hex[:6]
    script = ("while [ ! -e %s ]; do ln -sfn / /tmp/x; ln -sfn /tmp/real /tmp/x; "
              "rm -rf /tmp/real/d2; ln -s %s /tmp/real/d2; rm -f /tmp/real/d2; "
              "mkdir /tmp/real/d2; :; done" % (stop, canary.dir))
    res = {}
    th = threading.Thread(target=lambda: res.update(
        daemon.exec(env, ["sh", "-c", script], timeout="60s")))
    th.start()
    try:
        time.sleep(0.3)
        tb = tar_bytes([(tinfo(canary.marker + "-up/f"), b"x"),
                        (tinfo("d2/" + canary.marker), b"y"),
                        (tinfo("x/" + canary.marker), b"z")])
        deadline = time.monotonic() + 8
        rounds = 0
        seen = set()
        while time.monotonic() < deadline:
            r = fs.archive_get("/tmp")
            assert r.status == 200
            members = untar(r.body).getmembers()
            x = [m for m in members if m.name == "tmp/x"]
            # /tmp/x may briefly be a real directory: archive_put/write with parents=1 create it
            # while `ln -sfn` has it unlinked. As a symlink it is never followed.
            if not x or x[0].issym():
                for m in members:
                    assert not m.name.startswith("tmp/x/"), m.name  # never followed
            # ln -sfn unlinks before it links: /tmp/x may be missing for a moment (404)
            r = fs.archive_get("/tmp/x")
            assert r.status in (200, 404), r
            if r.status == 200:
                # (empty when it vanished between the check and the walk)
                got = untar(r.body).getmembers()
                if got and got[0].isdir():
                    # a real directory made by archive_put/write below: only what they wrote,
                    # never what lies behind either symlink target (/ or /tmp/real)
                    names = {m.name for m in got}
                    assert not names & {"x/etc", "x/usr", "x/tmp", "x/f", "x/c", "x/d"}, names
                else:
                    assert [m.name for m in got] in ([], ["x"])
            seen.add(fs.read("/tmp/x/f").status)  # 200 through /tmp/real, 404 through /
            for p in ("/tmp/x" + canary.file, "/tmp/x/tmp/real/c", "/tmp/x/c"):
                assert fs.read(p).status in (200, 404)
            fs.stat("/tmp/x/c")
            fs.list("/tmp/x")
            assert fs.archive_put("/tmp/x", tb).status in (200, 400, 403, 404)
            assert fs.archive_put("/tmp/real", tb).status in (200, 400, 403, 404)
            assert fs.write("/tmp/x/d2/" + canary.marker, b"w").status in (200, 403, 404)
            rounds += 1
        assert rounds >= 3
        assert seen == {200, 404}, seen  # the race was live
    finally:
        daemon.api("PUT", "/v1/envs/%s/files?path=%s" % (env, stop), raw=b"")
        th.join(90)
    assert "exit_code" in res and not res.get("timed_out"), res
    canary.check()


# CVE-2019-5736: runc's own binary, reached through /proc/PID/exe of a process that joined the
# container, was reopened for writing from inside and replaced. Here the binaries an
# environment can reach that way are the host's paddock-init (PID 1 runs it) and paddockd (an
# exec slot, and its command before its execve). The probe is stronger than root inside: it joins PID 1's
# mount, pid and user namespaces from the host and holds every capability of the
# environment's user namespace, then keeps reopening every /proc/PID/exe it sees for writing
# while execs come and go. Only the permission check may stop it (EACCES, before the running
# binary's ETXTBSY), so the binaries stay safe after the process exits too. (It may open the
# environment's own binaries once their process has exited: they are its files.)
EXE_PROBE = textwrap.dedent(r"""
    import ctypes, errno, json, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    pid1, secs = int(sys.argv[1]), float(sys.argv[2])
    fds = [os.open("/proc/%d/ns/%s" % (pid1, ns), os.O_RDONLY) for ns in ("mnt", "pid", "user")]
    for fd in fds:
        assert libc.setns(fd, 0) == 0, os.strerror(ctypes.get_errno())
    os.setgroups([]); os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    if os.fork():
        os._exit(os.waitstatus_to_exitcode(os.wait()[1]))
    out = {"pid1": None, "opened": [], "seen": 0}
    def attempt(pid):
        try:
            path = os.open("/proc/%s/exe" % pid, os.O_PATH)
        except OSError:
            return None  # gone, or not ours to look at
        try:
            fd = os.open("/proc/self/fd/%d" % path, os.O_WRONLY)
            st = os.fstat(fd)
            os.close(fd)
            return [st.st_dev, st.st_ino]  # whose file it was: the test compares
        except OSError as e:
            return errno.errorcode[e.errno]
        finally:
            os.close(path)
    out["pid1"] = attempt(1)
    end = time.time() + secs
    while time.time() < end:
        for pid in os.listdir("/proc"):
            if pid.isdigit() and pid != str(os.getpid()):
                r = attempt(pid)
                out["seen"] += r is not None
                if isinstance(r, list) and r not in out["opened"]:
                    out["opened"].append(r)
    print(json.dumps(out))
""")


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("kind", KINDS)
def test_host_binaries_cannot_be_reopened_for_writing(daemon, kind):
    """CVE-2019-5736 (runc /proc/self/exe overwrite)."""
    pid1 = daemon.create("exe-" + kind, "--" + kind)["pid"]
    init = os.path.join(os.path.dirname(PADDOCKD), "paddock-init")
    binaries = [PADDOCKD, PADDOCK, init]
    before = {p: sha256_of(p) for p in binaries}
    probe = subprocess.Popen([sys.executable, "-c", EXE_PROBE, str(pid1), "4"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop = time.time() + 4
    execs = 0
    while time.time() < stop:  # exec slots and commands join the environment meanwhile
        daemon.exec("exe-" + kind, ["true"])
        execs += 1
    out, err = probe.communicate(timeout=30)
    assert probe.returncode == 0, err.decode()
    res = json.loads(out)
    assert execs > 5 and res["seen"] > 0, res
    assert res["pid1"] == "EACCES", res  # paddock-init: the permission check, not ETXTBSY
    host = [[os.stat(p).st_dev, os.stat(p).st_ino] for p in binaries]
    assert not [f for f in res["opened"] if f in host], res
    assert {p: sha256_of(p) for p in binaries} == before
