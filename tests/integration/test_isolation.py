"""What an environment can see and do: namespaces, identity, confinement of both kinds."""
import os
import subprocess
import uuid

import pytest

from conftest import pid_alive, proc_status, wait_for

KINDS = ["computer", "sandbox"]
DOCKER_CAPS = "00000000a80425fb"
CONFINEMENT_KEYS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
CMDLINES = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"  # every command line an env can see


def create(daemon, name, kind, *opts):
    return daemon.create(name, "--" + kind, *opts)


def status_lines(text):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k in CONFINEMENT_KEYS:
            out[k] = v.strip()
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_hostname_and_init(daemon, kind):
    create(daemon, "box-" + kind, kind)
    assert daemon.sh("box-" + kind, "hostname") == "box-%s\n" % kind
    assert daemon.sh("box-" + kind, "cat /proc/1/comm") == "paddock-init\n"
    assert daemon.sh("box-" + kind, "echo $HOSTNAME") == "box-%s\n" % kind


@pytest.mark.parametrize("kind", KINDS)
def test_only_own_processes_are_visible(daemon, kind):
    create(daemon, "p1", kind)
    # a process on the host and one in a neighbouring environment
    canary = subprocess.Popen(["sleep", "313.25"], stdin=subprocess.DEVNULL)
    try:
        daemon.create("neighbour", "--computer")
        daemon.sh("neighbour", "sleep 424.5 >/dev/null 2>&1 &")
        # both do run (so their absence below means "hidden", not "never started")
        assert "424.5" in daemon.sh("neighbour", CMDLINES), "the neighbour's sleep runs"
        with open("/proc/%d/cmdline" % canary.pid) as f:
            assert "313.25" in f.read(), "the host's sleep runs"
        out = daemon.sh("p1", "for p in /proc/[0-9]*; do echo ${p#/proc/} $(cat $p/comm) "
                              "$(tr '\\0' ' ' < $p/cmdline); done")
        procs = [l.split(None, 2) for l in out.splitlines() if l.strip()]
        comms = {p[1] for p in procs}
        assert comms <= {"paddock-init", "sh", "cat", "tr"}, out
        assert len(procs) <= 6, out
        assert any(p[:2] == ["1", "paddock-init"] for p in procs), out
        assert "313.25" not in out and "424.5" not in out and "paddockd" not in out
        # the daemon's host pid means nothing inside
        assert daemon.exec("p1", ["test", "-e", "/proc/%d" % daemon.pid])["exit_code"] == 1
        assert daemon.exec("p1", ["kill", "-0", str(canary.pid)])["exit_code"] != 0
    finally:
        canary.kill()
        canary.wait()


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


def test_environments_do_not_see_each_other(daemon):
    daemon.create("a1", "--computer")
    daemon.create("a2", "--computer")
    daemon.sh("a1", "echo mine > /root/private; sleep 515.5 >/dev/null 2>&1 &")
    # a1 has both (or a2 not seeing them would prove nothing)
    assert daemon.sh("a1", "cat /root/private") == "mine\n"
    assert "515.5" in daemon.sh("a1", CMDLINES)
    assert daemon.exec("a2", ["cat", "/root/private"])["exit_code"] != 0
    assert "515.5" not in daemon.sh("a2", CMDLINES)


def test_uid_map_and_host_identity(daemon):
    c = daemon.create("u1", "--computer")
    s = daemon.create("u2")
    bases = []
    for e in (c, s):
        base = e["uid_base"]
        bases.append(base)
        for f in ("uid_map", "gid_map"):
            line = daemon.sh(e["name"], "cat /proc/self/" + f).split()
            assert line == ["0", str(base), "65536"], (f, line)
        # from the host, PID 1 runs as the range's first id, never as host root
        st = proc_status(e["pid"])
        assert st["Uid"].split() == [str(base)] * 4, st["Uid"]
        assert st["Gid"].split() == [str(base)] * 4, st["Gid"]
    assert abs(bases[0] - bases[1]) >= 65536, bases

    # an exec'd process as root and as uid 1000, seen from the host
    daemon.sh("u1", "sleep 616.5 >/dev/null 2>&1 &")
    daemon.exec("u1", ["sh", "-c", "sleep 717.5 >/dev/null 2>&1 &"], user="1000")

    def host_uid_of(arg):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if f.read().split(b"\0")[:2] == [b"sleep", arg.encode()]:
                        return proc_status(int(d))["Uid"].split()
            except OSError:
                pass
        return None

    assert wait_for(lambda: host_uid_of("616.5"), 5, what="sleep 616.5") == [str(bases[0])] * 4
    assert wait_for(lambda: host_uid_of("717.5"), 5, what="sleep 717.5") == [str(bases[0] + 1000)] * 4


def test_two_daemons_get_disjoint_id_ranges(make_daemon, shared_registry):
    d1 = make_daemon(uid_registry=shared_registry)
    d2 = make_daemon(uid_registry=shared_registry)
    ranges = []
    for d, names in ((d1, ("x1", "x2")), (d2, ("y1", "y2"))):
        for n in names:
            e = d.create(n, "--computer" if n.endswith("1") else "--sandbox")
            line = d.sh(n, "cat /proc/self/uid_map").split()
            assert line == ["0", str(e["uid_base"]), "65536"]
            ranges.append((e["uid_base"], e["uid_base"] + e["uid_count"]))
    ranges.sort()
    for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):
        assert a1 <= b0, ranges


@pytest.mark.parametrize("kind", KINDS)
def test_network_is_loopback_only_and_up(daemon, kind):
    """Mode none (the sandbox default; computers default to open) is loopback only."""
    create(daemon, "n1", kind, "--net", "none")
    dev = daemon.sh("n1", "cat /proc/net/dev")
    ifaces = [l.split(":")[0].strip() for l in dev.splitlines()[2:] if ":" in l]
    assert ifaces == ["lo"], dev
    link = daemon.sh("n1", "ip link")
    assert "lo:" in link and "UP" in link, link
    # loopback works: a TCP round trip on 127.0.0.1 inside the environment
    # The listener's input stays open a while (sleep 3) so it cannot finish before it has read the
    # connection; the client starts once /proc/net/tcp{,6} shows the port (0x3039) listening. On
    # failure the output shows the sockets and processes.
    out = daemon.sh("n1", "cd /tmp && (sleep 3 2>/dev/null | nc -l -p 12345 > got 2>/dev/null &) ; i=0; "
                          "while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -qE ':3039 0+:0000 0A' && "
                          "[ $i -lt 150 ]; do "
                          "sleep 0.1; i=$((i+1)); done; "
                          "i=0; while [ $i -lt 50 ]; do echo ping | nc 127.0.0.1 12345 && break; "
                          "i=$((i+1)); sleep 0.1; done; "
                          "i=0; while [ ! -s got ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; "
                          "cat got; [ -s got ] || { echo NO-DATA; cat /proc/net/tcp /proc/net/tcp6; ps; }")
    assert out == "ping\n", out


def test_sandbox_confinement(daemon):
    daemon.create("sb")
    st = status_lines(daemon.sh("sb", "cat /proc/self/status"))
    assert st["CapEff"] == st["CapPrm"] == st["CapBnd"] == st["CapAmb"] == st["CapInh"] == "0" * 16, st
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st

    for cmd in (["unshare", "-U", "true"], ["unshare", "-m", "true"], ["unshare", "-n", "true"],
                ["mount", "-t", "tmpfs", "none", "/mnt"], ["mount", "-o", "remount,rw", "/"]):
        r = daemon.exec("sb", cmd)
        assert r["exit_code"] != 0, (cmd, r)

    # read-only root, writable /tmp, /workspace and /dev/shm
    for path in ("/x", "/etc/passwd", "/bin/newfile", "/root/x"):
        r = daemon.exec("sb", ["sh", "-c", "echo x >> %s" % path])
        assert r["exit_code"] != 0, (path, r)
    assert "root:x:0:0" in daemon.sh("sb", "cat /etc/passwd")
    assert daemon.sh("sb", "for d in /tmp /workspace /dev/shm; do echo ok > $d/f && cat $d/f; done") == "ok\n" * 3


def test_computer_confinement(daemon):
    daemon.create("pc", "--computer")
    st = status_lines(daemon.sh("pc", "cat /proc/self/status"))
    assert st["CapBnd"] == DOCKER_CAPS and st["CapEff"] == DOCKER_CAPS, st
    assert st["Seccomp"] == "2", st
    # writable everywhere in its own root
    assert daemon.sh("pc", "for p in /x /etc/newconf /usr/bin/newtool /root/y; do "
                           "echo ok > $p && cat $p; done") == "ok\n" * 4
    daemon.sh("pc", "echo 'extra:x:2000:2000::/:/bin/sh' >> /etc/passwd")
    assert daemon.exec("pc", ["id", "-u"], user="extra")["stdout"] == "2000\n"
    # but it cannot mount or make namespaces (they belong to the host)
    for cmd in (["mount", "-t", "tmpfs", "none", "/mnt"], ["unshare", "-U", "true"],
                ["ip", "link", "add", "dummy0", "type", "dummy"]):
        r = daemon.exec("pc", cmd)
        assert r["exit_code"] != 0, (cmd, r)
    # nothing it wrote reached the image shared with other environments
    daemon.create("pc2", "--computer")
    assert daemon.exec("pc2", ["test", "-e", "/etc/newconf"])["exit_code"] == 1
    assert "extra:" not in daemon.sh("pc2", "cat /etc/passwd")


@pytest.mark.parametrize("kind", KINDS)
def test_exec_has_exactly_pid1_confinement(daemon, kind):
    create(daemon, "cf", kind)
    out = daemon.sh("cf", "cat /proc/1/status; echo ====; cat /proc/self/status")
    pid1, self_ = out.split("====\n")
    a, b = status_lines(pid1), status_lines(self_)
    assert set(a) == set(CONFINEMENT_KEYS), a
    assert a == b


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


def stat_tty_session(stat_line):
    """(session, tty_nr) from a /proc/PID/stat line."""
    fields = stat_line[stat_line.rindex(")") + 2:].split()
    return int(fields[3]), int(fields[4])


def test_environments_never_get_the_daemons_terminal(daemon):
    """paddockd started by hand in a terminal: nothing inside an environment (PID 1, an exec, a
    background process) may have that terminal, or it could take its foreground (tcsetpgrp)
    and read the admin's keystrokes."""
    master, slave = os.openpty()
    try:
        daemon.ctty = slave
        daemon.restart()
        with open("/proc/%d/stat" % daemon.pid) as f:
            assert stat_tty_session(f.read())[1] != 0  # the daemon has it: the test can fail
        for kind in ("computer", "sandbox"):
            env = "tty-" + kind
            create(daemon, env, kind)
            out = daemon.sh(env, "cat /proc/1/stat; cat /proc/self/stat; "
                                 "if (exec 3</dev/tty) 2>/dev/null; then echo OPENED; "
                                 "else echo REFUSED; fi")
            lines = out.splitlines()
            for line in lines[:2]:
                assert stat_tty_session(line)[1] == 0, line  # no controlling terminal
            assert lines[2] == "REFUSED", out
            pid = daemon.cli("exec", "-d", env, "--", "cat", "/proc/self/stat").out.strip()
            daemon.cli("wait", env, pid)
            logs = daemon.cli("logs", env, pid).out
            assert stat_tty_session(logs.strip())[1] == 0, logs  # background processes too
    finally:
        daemon.ctty = None
        daemon.restart()  # without the terminal: closing it hangs up its session
        os.close(slave)
        os.close(master)
