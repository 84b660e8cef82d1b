"""Devices and kernel interfaces. Terminal injection (TIOCSTI, TIOCLINUX) from inside a
session is tested with the shells in tests/integration/test_shell.py.

Kernel interfaces that leak host activity are masked in both kinds, and the masks hold
against the environment's root: reads give nothing, writes fail, umount fails, and a fresh
procfs is refused. Masks are mounts made by host root in a mount namespace owned by the host's
user namespace; see rootfs.c (mask_one, readonly_one) and docs/security.md."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

KINDS = ["computer", "sandbox"]
CAP_SYS_ADMIN = 21

# Masked: a file reads as /dev/null, a directory is an empty read-only tmpfs. Some do not exist
# on every kernel (timer_stats is gone since 4.11, powercap needs a driver); then nothing may
# exist there inside either.
MASKED = ["/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/timer_list",
          "/proc/sched_debug", "/proc/latency_stats", "/proc/timer_stats", "/proc/acpi",
          "/proc/scsi", "/proc/asound", "/sys/firmware", "/sys/devices/virtual/powercap"]
READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
# Writes that would act on the host if they went through; a shell redirection opens with
# O_TRUNC, which checks the mount's read-only flag before the file's permissions. (A write to a
# masked file goes to /dev/null: a device node stays writable on a read-only mount, harmlessly.)
WRITES = ["/proc/sysrq-trigger", "/proc/sys/kernel/domainname", "/proc/sys/vm/drop_caches",
          "/proc/sys/kernel/core_pattern", "/proc/irq/default_smp_affinity",
          "/proc/bus/pci/devices"]

# One line per path: PATH TYPE(d/f/-) ENTRIES_OR_BYTES READ_RC MOUNTED(m/-) RO(ro/rw/-)
PROBE = r"""
for p in %s; do
  if [ -d "$p" ]; then t=d; n=$(ls -A "$p" | wc -l); rc=0
  elif [ -e "$p" ]; then t=f; n=$(cat "$p" 2>/dev/null | wc -c); cat "$p" >/dev/null 2>&1; rc=$?
  else t=-; n=0; rc=0; fi
  mi=$(awk -v p="$p" '$5 == p { split($6, o, ","); m = o[1] } END { print (m == "" ? "- -" : "m " m) }' /proc/self/mountinfo)
  echo "$p $t $n $rc $mi"
done
"""


def create(daemon, name, kind, *opts):
    return daemon.create(name, "--" + kind, *opts)


def host_exists(path):
    return os.path.lexists(path)


def probe(daemon, env, paths):
    out = daemon.sh(env, PROBE % " ".join(paths))
    rows = {}
    for line in out.splitlines():
        p, t, n, rc, m, ro = line.split()
        rows[p] = {"type": t, "size": int(n), "rc": int(rc), "mounted": m == "m", "opts": ro}
    assert set(rows) == set(paths), out
    return rows


def check_masked(daemon, env):
    rows = probe(daemon, env, MASKED)
    for p in MASKED:
        r = rows[p]
        if not host_exists(p):
            # Nothing can appear there: procfs and the read-only sysfs gain no entries.
            assert r["type"] == "-", (p, r)
            continue
        assert r["mounted"], "%s is not masked: %r" % (p, r)
        assert r["opts"] == "ro", (p, r)
        assert r["size"] == 0 and r["rc"] == 0, "%s is readable: %r" % (p, r)
        assert r["type"] == ("d" if os.path.isdir(p) else "f"), (p, r)


def check_readonly(daemon, env):
    rows = probe(daemon, env, READONLY)
    for p in READONLY:
        r = rows[p]
        if not host_exists(p):
            assert r["type"] == "-", (p, r)
            continue
        assert r["mounted"] and r["opts"] == "ro", "%s is not read-only: %r" % (p, r)


@pytest.mark.parametrize("kind", KINDS)
def test_interfaces_are_masked_and_read_only(daemon, kind):
    create(daemon, "mk", kind)
    check_masked(daemon, "mk")
    check_readonly(daemon, "mk")
    assert daemon.sh("mk", "id -u") == "0\n"
    for p in WRITES:
        if not host_exists(p):
            continue
        res = daemon.exec("mk", ["sh", "-c", "echo 1 > " + p])
        assert res["exit_code"] != 0, (p, res)
        assert "Read-only file system" in res["stderr"], (p, res)
    # No new files below the masked directories (read-only tmpfs).
    for p in MASKED:
        if os.path.isdir(p):
            res = daemon.exec("mk", ["sh", "-c", "echo x > %s/planted" % p])
            assert res["exit_code"] != 0, (p, res)
    check_masked(daemon, "mk")


@pytest.mark.parametrize("kind", KINDS)
def test_masks_cannot_be_undone_from_inside(daemon, kind):
    create(daemon, "mu", kind)
    check_masked(daemon, "mu")
    for p in MASKED + READONLY:
        if not host_exists(p):
            continue
        for cmd in ("umount %s" % p, "umount -l %s" % p, "mount -o remount,rw %s" % p):
            res = daemon.exec("mu", ["sh", "-c", cmd])
            assert res["exit_code"] != 0, (cmd, res)
    # A fresh procfs or sysfs, which would show everything again.
    for fs in ("proc", "sysfs"):
        res = daemon.exec("mu", ["sh", "-c", "mkdir -p /tmp/fresh && mount -t %s %s /tmp/fresh"
                                 % (fs, fs)])
        assert res["exit_code"] != 0, (fs, res)
        assert daemon.sh("mu", "ls -A /tmp/fresh | wc -l") == "0\n"
    # Nothing changed: every mask is still in place.
    check_masked(daemon, "mu")
    check_readonly(daemon, "mu")


# Below seccomp: a process holding every capability of the environment's user namespace (more
# than a computer's root ever has) in the environment's mount namespace. The kernel alone must
# refuse to unmount the masks (the mount namespace belongs to the host's user namespace) and,
# in a mount + pid namespace of its own (which seccomp normally forbids), must copy the masks
# locked (MNT_LOCKED: not unmountable one by one) and refuse a fresh procfs that would show
# what they cover (mount_too_revealing).
KERNEL_PROBE = textwrap.dedent(r"""
    import ctypes, errno, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, CLONE_NEWPID, MNT_DETACH = 0x00020000, 0x20000000, 2
    MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
    pid1, paths = int(sys.argv[1]), json.loads(sys.argv[2])
    out = {}
    def call(name, *args):
        r = getattr(libc, name)(*args)
        return 0 if r >= 0 else errno.errorcode[ctypes.get_errno()]
    def b(s):
        return s.encode()
    def content(p):
        if os.path.isdir(p):
            return len(os.listdir(p))
        try:
            with open(p, "rb") as f:
                return len(f.read(65536))
        except OSError as e:
            return errno.errorcode[e.errno]
    fds = [os.open("/proc/%d/ns/%s" % (pid1, ns), os.O_RDONLY) for ns in ("mnt", "pid", "user")]
    for fd in fds:  # the user namespace last: joining the others needs host root
        assert libc.setns(fd, 0) == 0, os.strerror(ctypes.get_errno())
    os.setgroups([]); os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    os.chdir("/")
    sys.stdout.flush()
    top = os.fork()  # in the environment's pid namespace
    if top:
        os._exit(os.waitstatus_to_exitcode(os.waitpid(top, 0)[1]))
    with open("/proc/self/status") as f:
        out["capeff"] = [l.split()[1] for l in f if l.startswith("CapEff")][0]
    out["umount_in_env_ns"] = {p: call("umount2", b(p), MNT_DETACH) for p in paths}
    out["proc_in_env_ns"] = call("mount", b"proc", b"/tmp", b"proc",
                                 MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    out["unshare"] = call("unshare", CLONE_NEWNS | CLONE_NEWPID)
    if out["unshare"] == 0:
        out["umount_locked"] = {p: call("umount2", b(p), MNT_DETACH) for p in paths}
        out["after"] = {p: content(p) for p in paths}
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # pid 1 of a pid namespace owned by the environment's user namespace
            os.close(r)
            res = {"tmpfs": call("mount", b"tmpfs", b"/tmp", b"tmpfs", 0, None)}
            os.mkdir("/tmp/p")
            res["proc"] = call("mount", b"proc", b"/tmp/p", b"proc",
                               MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            res["interrupts"] = content("/tmp/p/interrupts") if res["proc"] == 0 else None
            os.write(w, json.dumps(res).encode())
            os._exit(0)
        os.close(w)
        out["fresh"] = json.loads(os.read(r, 65536))
        os.waitpid(child, 0)
    print(json.dumps(out))
""")


@pytest.mark.parametrize("kind", KINDS)
def test_kernel_refuses_unmasking_without_seccomp(daemon, kind):
    pid1 = create(daemon, "mk2", kind)["pid"]
    paths = [p for p in MASKED + READONLY if host_exists(p)]
    p = subprocess.run([sys.executable, "-c", KERNEL_PROBE, str(pid1), json.dumps(paths)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)
    # every capability (CAP_SYS_ADMIN included), valid in the environment's user namespace
    assert int(out["capeff"], 16) & (1 << CAP_SYS_ADMIN), out
    for path in paths:
        assert out["umount_in_env_ns"][path] == "EPERM", (path, out)
        assert out["umount_locked"][path] == "EINVAL", (path, out)  # locked, or not a mount
        if path in MASKED:
            assert out["after"][path] == 0, (path, out)
    assert out["proc_in_env_ns"] == "EPERM", out
    assert out["unshare"] == 0, out
    assert out["fresh"]["tmpfs"] == 0, out
    assert out["fresh"]["proc"] == "EPERM", out  # mount_too_revealing


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


# CVE-2022-0492: a process that could write a cgroup v1 hierarchy's release_agent had the
# kernel run a program of its choice as host root. The environment's root can mount nothing
# (seccomp, and no CAP_SYS_ADMIN over its mount namespace). The probe goes further than it can:
# it joins the environment's namespaces with every capability of its user namespace and
# unshares a mount and cgroup namespace of its own, where the kernel lets it mount an existing
# v1 hierarchy (rooted at its own cgroup); release_agent and the limits there must still refuse
# it (release_agent wants CAP_SYS_ADMIN in the host's user namespace; the cgroup files belong to
# host root, which its namespace does not map).
RELEASE_AGENT_PROBE = textwrap.dedent(r"""
    import ctypes, errno, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, CLONE_NEWCGROUP, MNT_DETACH = 0x00020000, 0x02000000, 2
    pid1 = int(sys.argv[1])
    fds = [os.open("/proc/%d/ns/%s" % (pid1, ns), os.O_RDONLY) for ns in ("mnt", "pid", "user")]
    for fd in fds:
        assert libc.setns(fd, 0) == 0, os.strerror(ctypes.get_errno())
    os.setgroups([]); os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    def call(name, *args):
        r = getattr(libc, name)(*args)
        return 0 if r >= 0 else errno.errorcode[ctypes.get_errno()]
    def write(path, data):
        try:
            with open(path, "w") as f:
                f.write(data)
            return "WROTE"
        except OSError as e:
            return errno.errorcode[e.errno]
    out = {"unshare": call("unshare", CLONE_NEWNS | CLONE_NEWCGROUP), "mounts": {}, "writes": {}}
    os.makedirs("/tmp/cg", exist_ok=True)
    for opts in ("memory", "pids", "none,name=paddock-probe"):
        r = call("mount", b"cgroup", b"/tmp/cg", b"cgroup", 0, opts.encode())
        out["mounts"][opts] = r
        if r != 0:
            continue
        for f in ("release_agent", "notify_on_release", "memory.limit_in_bytes", "pids.max",
                  "cgroup.procs"):
            if os.path.exists("/tmp/cg/" + f):
                out["writes"]["%s:%s" % (opts, f)] = write("/tmp/cg/" + f, "/x" if f == "release_agent" else "1")
        call("umount2", b"/tmp/cg", MNT_DETACH)
    print(json.dumps(out))
""")


@pytest.mark.parametrize("kind", KINDS)
def test_no_cgroup_v1_release_agent(daemon, kind):
    """CVE-2022-0492 (cgroup v1 release_agent escape)."""
    pid1 = create(daemon, "ra-" + kind, kind)["pid"]
    for opts in ("memory", "rdma", "none,name=x"):
        r = daemon.exec("ra-" + kind, ["sh", "-c", "mkdir -p /tmp/cg && mount -t cgroup -o %s "
                                                   "cgroup /tmp/cg" % opts])
        assert r["exit_code"] != 0, (opts, r)
    # a release_agent in whatever cgroup view is mounted inside cannot be written
    out = daemon.sh("ra-" + kind, "for f in $(find /sys/fs/cgroup -maxdepth 2 -name release_agent "
                                  "2>/dev/null); do (echo /x > $f) 2>/dev/null && echo WROTE $f; "
                                  "done; echo checked")
    assert out == "checked\n", out
    p = subprocess.run([sys.executable, "-c", RELEASE_AGENT_PROBE, str(pid1)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    res = json.loads(p.stdout)
    assert res["unshare"] == 0, res  # the probe really has the namespace's capabilities
    assert "WROTE" not in res["writes"].values(), res
    if res["mounts"].get("memory") == 0:  # cgroup v1 here: the files were there to try
        # rooted at its own cgroup, the mount has no release_agent at all (only a hierarchy's
        # root has one), and its own limit is not its to raise
        assert res["writes"].get("memory:release_agent", "EACCES") in ("EPERM", "EACCES"), res
        assert res["writes"]["memory:memory.limit_in_bytes"] == "EACCES", res
