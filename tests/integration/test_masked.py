"""Kernel interfaces that leak host activity are masked in both kinds, and the masks hold
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


def create(daemon, name, kind):
    return daemon.create(name, "--" + kind)


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

