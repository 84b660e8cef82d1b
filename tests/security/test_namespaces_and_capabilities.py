"""Namespaces and capabilities: what an environment is (its own pid, uts, user and mount
namespaces, a private id range) and the exact confinement of PID 1 and of every exec in both
kinds (capabilities, no_new_privs, seccomp; no user, mount or network namespaces of its own)."""
import os
import subprocess

import pytest

from conftest import proc_status, wait_for

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


def test_sandbox_confinement(daemon):
    daemon.create("sb")
    st = status_lines(daemon.sh("sb", "cat /proc/self/status"))
    assert st["CapEff"] == st["CapPrm"] == st["CapBnd"] == st["CapAmb"] == st["CapInh"] == "0" * 16, st
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    # no core dumps, from PID 1 or any exec (a slot's command), and no
    # raising the limit again: a dump would go to the host's core handler
    for pid in ("1", "self"):
        core = [l for l in daemon.sh("sb", "cat /proc/%s/limits" % pid).splitlines()
                if l.startswith("Max core file size")]
        assert core and core[0].split()[4:6] == ["0", "0"], (pid, core)
    r = daemon.exec("sb", ["sh", "-c", "ulimit -c unlimited"])
    assert r["exit_code"] != 0, r

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


def test_the_daemon_refuses_a_host_where_a_change_of_user_stays_traceable(daemon, tmp_path):
    """With fs.suid_dumpable=1 a process stays dumpable after it changes its credentials, so
    another process of the same user may ptrace it. An exec's command changes to its user
    inside the environment before it drops its capabilities (and shares its exec slot's memory
    until its execve): an agent's process of that user could take it over. paddockd refuses to
    start on such a host, and says what to do; one already running refuses execs (503) while
    the host is set so."""
    daemon.create("t")
    from conftest import PADDOCKD
    knob = "/proc/sys/fs/suid_dumpable"
    with open(knob) as f:
        before = f.read().strip()
    args = [PADDOCKD, "--root", str(tmp_path / "root"), "--socket", str(tmp_path / "s.sock"),
            "--uid-registry", str(tmp_path / "uids"), "--no-network", "--storage", "dir"]
    try:
        with open(knob, "w") as f:
            f.write("1")
        r = daemon.api("POST", "/v1/envs/t/exec", {"cmd": ["true"]})
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:  # it started: stop it as a user would
            p.terminate()
            p.communicate(timeout=60)
            pytest.fail("paddockd started with fs.suid_dumpable=1")
    finally:
        with open(knob, "w") as f:
            f.write(before)
    assert p.returncode == 1 and b"fs.suid_dumpable is 1" in err and b"sysctl" in err, err
    assert r.status == 503 and "fs.suid_dumpable=1" in r.json["error"]["message"], r
    assert daemon.sh("t", "echo fine") == "fine\n"
