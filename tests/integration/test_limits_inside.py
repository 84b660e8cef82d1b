"""Limits visible inside: lxcfs' /proc files (bound read-only by the daemon) and the
environment's own cgroup at /sys/fs/cgroup (read-only). The test image is busybox: its `free`
and `nproc` ask the kernel directly (sysinfo(2), sched_getaffinity(2)) and still show the host;
see docs/security.md. glibc's sysconf(_SC_NPROCESSORS_ONLN), behind os.cpu_count(), reads
/sys/devices/system/cpu/online, which is checked here."""
import os
import re
import signal

import pytest

KINDS = ["--computer", "--sandbox"]


def lxcfs_running(daemon):
    return daemon.api("GET", "/v1/system").json["lxcfs"].startswith("running")


def meminfo_total_kb(daemon, env):
    out = daemon.sh(env, "cat /proc/meminfo")
    return int(re.search(r"^MemTotal:\s+(\d+) kB", out, re.M).group(1))


@pytest.mark.parametrize("kind", KINDS)
def test_proc_shows_own_limits(daemon, kind):
    assert lxcfs_running(daemon), daemon.api("GET", "/v1/system").json
    daemon.create("l", kind, "--image", "base", "--cpus", "1", "--memory", "512M")
    assert meminfo_total_kb(daemon, "l") == 512 * 1024
    # what glibc's get_nprocs (os.cpu_count, sysconf) and /proc/cpuinfo readers count
    assert daemon.sh("l", "cat /sys/devices/system/cpu/online").strip() == "0"
    assert daemon.exec("l", "echo 0-1 > /sys/devices/system/cpu/online")["exit_code"] != 0
    assert daemon.sh("l", "grep -c ^processor /proc/cpuinfo").strip() == "1"
    cpus = [l for l in daemon.sh("l", "cat /proc/stat").splitlines() if re.match(r"cpu\d", l)]
    assert len(cpus) == 1, cpus
    up = float(daemon.sh("l", "cat /proc/uptime").split()[0])
    assert 0 <= up < 60, up
    assert len(daemon.sh("l", "cat /proc/loadavg").split()) == 5
    swaps = daemon.sh("l", "cat /proc/swaps").splitlines()
    assert swaps[0].startswith("Filename")
    # the files are read-only, and not the host's
    res = daemon.exec("l", "echo x > /proc/meminfo")
    assert res["exit_code"] != 0
    host_kb = int(re.search(r"^MemTotal:\s+(\d+)", open("/proc/meminfo").read(), re.M).group(1))
    assert host_kb != 512 * 1024


@pytest.mark.parametrize("kind", KINDS)
def test_own_cgroup_readable_read_only(daemon, kind):
    daemon.create("g", kind, "--image", "base", "--cpus", "0.5", "--memory", "256M")
    v1 = daemon.cgroup_file("g", "memory.limit_in_bytes") is not None
    if v1:
        mem = daemon.sh("g", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes").strip()
        quota = daemon.sh("g", "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us").strip()
        target = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
        assert quota == "50000"
        # each hierarchy shows the environment's group as its root, and nothing of the
        # host's: not its path (mountinfo's root field), not a way up out of the group
        views = [l.split() for l in daemon.sh("g", "cat /proc/self/mountinfo").splitlines()
                 if " /sys/fs/cgroup/" in l]
        assert {v[4] for v in views} >= {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}, views
        assert all(v[3] == "/" for v in views), views
        assert set(daemon.sh("g", "ls /sys/fs/cgroup/memory/..").split()) <= {
            "blkio", "cpu", "cpuacct", "cpu,cpuacct", "cpuacct,cpu", "memory", "pids"}
        assert daemon.sh("g", "cat /sys/fs/cgroup/memory/../memory/memory.limit_in_bytes").strip() == str(256 << 20)
    else:
        mem = daemon.sh("g", "cat /sys/fs/cgroup/memory.max").strip()
        assert daemon.sh("g", "cat /sys/fs/cgroup/cpu.max").split()[0] == "50000"
        target = "/sys/fs/cgroup/memory.max"
    assert mem == str(256 << 20)
    # nothing inside can raise its own limits: the view is read-only (and not remountable)
    res = daemon.exec("g", "echo 1073741824 > %s" % target)
    assert res["exit_code"] != 0 and "Read-only" in res["stderr"], res
    res = daemon.exec("g", "mount -o remount,rw /sys/fs/cgroup")
    assert res["exit_code"] != 0
    res = daemon.exec("g", "mkdir /sys/fs/cgroup/memory/x || mkdir /sys/fs/cgroup/x")
    assert res["exit_code"] != 0
    assert daemon.sh("g", "cat %s" % target).strip() == str(256 << 20)
    # the host's group kept the limit
    assert open(daemon.cgroup_file("g", "memory.limit_in_bytes" if v1 else "memory.max")).read().strip() == str(256 << 20)


def test_update_is_seen_inside(daemon):
    daemon.create("u", "--computer", "--image", "base", "--memory", "512M", "--cpus", "1")
    daemon.cli("update", "u", "--memory", "768M", "--cpus", "2")
    assert meminfo_total_kb(daemon, "u") == 768 * 1024
    assert daemon.sh("u", "grep -c ^processor /proc/cpuinfo").strip() == "2"
    assert daemon.sh("u", "cat /sys/devices/system/cpu/online").strip() == "0-1"


@pytest.mark.parametrize("kill", [False, True])
def test_lxcfs_survives_daemon_restart(daemon, kill):
    daemon.create("r", "--computer", "--image", "base", "--memory", "512M")
    daemon.restart(kill=kill)
    # the running computer keeps its view, the restarted daemon adopted the same lxcfs
    assert meminfo_total_kb(daemon, "r") == 512 * 1024
    assert "adopted" in daemon.api("GET", "/v1/system").json["lxcfs"]
    daemon.create("n", "--computer", "--image", "base", "--memory", "256M")
    assert meminfo_total_kb(daemon, "n") == 256 * 1024


def test_daemon_starts_beside_a_stopped_lxcfs(daemon):
    """An lxcfs left stopped (SIGSTOP, a debugger) answers no request to its mount: the daemon's
    start adopts it without asking the mount anything, and says it is stopped."""
    from test_create_async import held_lxcfs
    daemon.create("r", "--computer", "--image", "base", "--memory", "512M")
    lxcfs = held_lxcfs(daemon)
    daemon.stop()
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        daemon.start(timeout=10)
        status = daemon.api("GET", "/v1/system").json["lxcfs"]
        assert status.startswith("stopped (pid %d)" % lxcfs), status
        assert daemon.inspect("r")["state"] == "running"
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    status = daemon.api("GET", "/v1/system").json["lxcfs"]
    assert status == "running (pid %d, adopted)" % lxcfs, status
    assert meminfo_total_kb(daemon, "r") == 512 * 1024


def test_unlimited_environment_sees_the_host(daemon):
    daemon.create("h", "--computer", "--image", "base")
    host_kb = int(re.search(r"^MemTotal:\s+(\d+)", open("/proc/meminfo").read(), re.M).group(1))
    assert meminfo_total_kb(daemon, "h") == host_kb
    assert daemon.sh("h", "grep -c ^processor /proc/cpuinfo").strip() == str(os.cpu_count())
