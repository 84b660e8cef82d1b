"""Starting PID 1 (src/lib/spawn.c): a setup that fails must come back as a clear error with
nothing left behind, and many creates must not make the daemon's memory grow."""
import os
import subprocess

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
    assert threads == 1  # the exec helper and the user namespace holder share its memory
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
