"""Starting PID 1 (src/lib/spawn.c): a setup that fails must come back as a clear error with
nothing left behind, and many creates must not make the daemon's memory grow."""
import os
import subprocess

import pytest

from conftest import children_of, proc_status, wait_for


def env_children(pid):
    """The daemon's children that are zombies or in a pid namespace other than its own (a
    setup child, a PID 1): the daemon's helpers (gateway, image workers) are neither."""
    own = os.readlink("/proc/%d/ns/pid" % pid)
    out = []
    for child, _, state in children_of(pid):
        try:
            if state == "Z" or os.readlink("/proc/%d/ns/pid" % child) != own:
                out.append(child)
        except OSError:
            continue
    return out


def test_failing_setup_in_pid1s_child_is_reported_and_leaves_nothing(daemon):
    """A stopped computer whose root mount point went missing from its state directory: only
    the child that builds the root notices. Each start fails with the step and the reason, the
    child is reaped, no cgroup stays, and the daemon goes on starting and creating."""
    daemon.create("broken", "--computer")
    daemon.cli("stop", "broken")
    mnt = os.path.join(daemon.env_dir("broken"), "rootfs")
    os.rmdir(mnt)
    for _ in range(3):
        r = daemon.api("POST", "/v1/envs/broken/start")
        assert r.status >= 400, r
        _, msg = r.error()
        assert "root mount point" in msg and "No such file or directory" in msg, msg
        assert daemon.inspect("broken")["state"] == "stopped"
        assert daemon.cgroup_dirs("broken") == []
        # the setup child was reaped (no zombie) and none is left running
        assert env_children(daemon.pid) == []
    daemon.create("fine")
    assert daemon.sh("fine", "echo fine") == "fine\n"
    os.mkdir(mnt, 0o755)
    assert daemon.cli("start", "broken").out.strip() == "broken"
    assert daemon.sh("broken", "echo back") == "back\n"


def test_daemon_memory_does_not_grow_per_create(daemon):
    """300 sandboxes created and destroyed: the daemon's resident memory and its mappings
    stay about where they were after the first 50 (a leak of one stack, a page or a heap
    allocation per start would show as several MB). Loose bounds, no timing."""
    c = daemon.conn()

    def cycles(start, n):
        for i in range(start, start + n):
            name = "m%d" % i
            c.request("POST", "/v1/envs", body=('{"name":"%s","kind":"sandbox"}' % name).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            body = r.read()
            assert r.status == 201, body
            c.request("DELETE", "/v1/envs/%s?force=1" % name)
            r = c.getresponse()
            body = r.read()
            assert r.status == 200, body

    def vm():
        st = proc_status(daemon.pid)
        with open("/proc/%d/maps" % daemon.pid) as f:
            maps = sum(1 for _ in f)
        return int(st["VmRSS"].split()[0]), maps, int(st["Threads"])

    cycles(0, 50)  # caches, the sqlite page cache and the heap reach their working size
    rss0, maps0, threads = vm()
    assert threads == 1  # one thread: a CLONE_VM child (the user namespace holder) is a process
    cycles(50, 250)
    rss1, maps1, threads = vm()
    c.close()
    assert threads == 1
    assert rss1 - rss0 < 4096, (rss0, rss1)  # kB: well under 300 leaked pages
    assert maps1 - maps0 < 20, (maps0, maps1)
    wait_for(lambda: env_children(daemon.pid) == [], what="no environment process left")


def test_environment_root_may_bind_low_ports_and_ping_in_its_own_namespace(daemon):
    """Its network namespace belongs to the host's user namespace, so PID 1's setup sets two
    knobs there (through the environment's own /proc): low ports and ping for its root. The
    host's own values stay as they were."""
    host = [open("/proc/sys/net/ipv4/" + k).read() for k in
            ("ip_unprivileged_port_start", "ping_group_range")]
    for kind in ("--computer", "--sandbox"):
        name = "knobs" + kind.strip("-")[0]
        daemon.create(name, kind)
        assert daemon.sh(name, "cat /proc/sys/net/ipv4/ip_unprivileged_port_start").strip() == "0"
        # (read from the host: inside, host gid 0 shows as the overflow gid)
        pid1 = daemon.inspect(name)["pid"]
        knob = subprocess.run(["nsenter", "--net=/proc/%d/ns/net" % pid1, "cat",
                               "/proc/sys/net/ipv4/ping_group_range"],
                              capture_output=True, text=True, check=True).stdout
        assert knob.split() == ["0", "2147483647"], knob
        # a low port, as the environment's root (no CAP_NET_BIND_SERVICE in that namespace)
        out = daemon.sh(name, "nc -l -p 80 -w 1 & sleep 0.3; netstat -ltn; kill $! 2>/dev/null; true")
        assert ":80 " in out, out
        # and nothing inside can change them back for the host
        res = daemon.exec(name, "echo 1024 > /proc/sys/net/ipv4/ip_unprivileged_port_start")
        assert res["exit_code"] != 0, res
    assert [open("/proc/sys/net/ipv4/" + k).read() for k in
            ("ip_unprivileged_port_start", "ping_group_range")] == host


SYSFS_PROBE = ("stat -c %d /sys; ls /sys/class/net | tr '\\n' ' '; echo; "
               "awk '$5 == \"/sys\" { print $6 }' /proc/self/mountinfo; "
               "touch /sys/x 2>/dev/null && echo writable || echo refused")


@pytest.mark.parametrize("how", ["cloned", "mounted in its network namespace"])
def test_sandboxes_without_a_network_share_one_sysfs(make_daemon, how):
    """Every sysfs superblock is compared with every other one at each new sysfs mount (one per
    network namespace), so sandboxes without a network share one: a clone of a read-only
    mount where the kernel clones detached mounts (6.15 on), else a mount made in the shared
    namespace (forced here for the kernels before). Networked environments and computers keep
    their own."""
    d = make_daemon()
    if how != "cloned":
        d.extra_env["PADDOCK_TEST_NO_DETACHED_CLONE"] = "1"
        d.restart()
    elif "share one sysfs (mounted in its network namespace)" in d.log():
        pytest.skip("this kernel does not clone detached mounts (before 6.15)")
    assert "share one sysfs (%s)" % how in d.log(), d.log()
    d.create("s1", "--sandbox")
    d.create("s2", "--sandbox")
    d.create("net", "--sandbox", "--net", "open")
    d.create("pc", "--computer", "--net", "none")
    rows = {}
    for name in ("s1", "s2", "net", "pc"):
        dev, nets, opts, write = d.sh(name, SYSFS_PROBE).splitlines()
        rows[name] = (int(dev), nets.split(), opts.split(","), write)
    assert rows["s1"][0] == rows["s2"][0], rows
    assert rows["net"][0] != rows["s1"][0] and rows["pc"][0] != rows["s1"][0], rows
    assert rows["pc"][0] != rows["net"][0], rows
    for name, (_, nets, opts, write) in rows.items():
        assert {"ro", "nosuid", "nodev", "noexec"} <= set(opts), (name, opts)
        assert write == "refused", (name, rows[name])
        assert "lo" in nets, (name, nets)
    assert rows["s1"][1] == ["lo"] and "eth0" in rows["net"][1], rows
    # one sandbox's end leaves the other's /sys as it was
    d.cli("rm", "-f", "s1")
    assert d.sh("s2", "cat /sys/class/net/lo/operstate; ls /sys/kernel | head -1").split()[0] \
        in ("unknown", "up"), d.sh("s2", "ls /sys/class/net")
    d.create("s3", "--sandbox")
    assert int(d.sh("s3", "stat -c %d /sys")) == rows["s2"][0]
    # the shared namespace lives as long as the daemon: a sandbox from before a restart keeps
    # its /sys (docs/architecture.md), a new one shares the new daemon's
    d.restart()
    dev, nets, opts, write = d.sh("s2", SYSFS_PROBE).splitlines()
    assert int(dev) == rows["s2"][0] and write == "refused", (dev, nets, opts, write)
    d.create("s4", "--sandbox")
    d.create("s5", "--sandbox")
    dev4, nets4 = d.sh("s4", SYSFS_PROBE).splitlines()[:2]
    assert int(dev4) != rows["s2"][0] and nets4.split() == ["lo"], (dev4, nets4)
    assert int(d.sh("s5", "stat -c %d /sys")) == int(dev4)
