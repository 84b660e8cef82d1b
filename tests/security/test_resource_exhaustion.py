"""Quotas a user relies on: memory (OOM inside the env only), pids (fork bombs), CPU, and
changing limits of a running environment."""
import threading
import time

from conftest import pid_alive, wait_for

HOG = 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo done ${#x}'


def read(path):
    with open(path) as f:
        return f.read().strip()


def test_memory_hog_is_oom_killed_inside_its_env(daemon):
    daemon.create("hog", "--memory", "64M")
    daemon.create("bystander", "--computer")
    pid1 = daemon.inspect("hog")["pid"]

    res = daemon.exec("hog", ["sh", "-c", HOG], timeout=60)
    assert res["exit_code"] == 137, res
    assert "done" not in res["stdout"]
    e = daemon.inspect("hog")
    assert e["oom_kills"] >= 1 and e["usage"]["oom_kills"] >= 1, e
    assert e["usage"]["memory"] <= 64 << 20
    # the environment, its neighbour and the daemon carry on
    assert e["state"] == "running" and e["pid"] == pid1 and pid_alive(pid1)
    assert daemon.sh("hog", "echo alive") == "alive\n"
    assert daemon.sh("bystander", "echo fine") == "fine\n"
    assert daemon.inspect("bystander")["oom_kills"] == 0
    assert daemon.running()
    # the CLI shows the kill as the exit code
    p = daemon.cli("exec", "hog", "--", "sh", "-c", HOG, check=False)
    assert p.returncode == 137, (p.returncode, p.err)
    assert daemon.inspect("hog")["oom_kills"] >= 2


def test_dev_shm_counts_against_memory(daemon):
    """tmpfs pages are charged to the env: filling /dev/shm past the limit cannot succeed."""
    daemon.create("shm", "--memory", "32M")
    res = daemon.exec("shm", ["sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=60 2>&1; "
                                          "ls -l /dev/shm/fill"], timeout=60)
    e = daemon.inspect("shm")
    assert res["exit_code"] != 0 or e["oom_kills"] >= 1, (res, e)
    assert e["usage"]["memory"] <= 32 << 20
    assert daemon.exec("shm", ["echo", "ok"])["stdout"] == "ok\n"


def test_fork_bomb_stops_at_pids_max(daemon):
    daemon.create("bomb", "--pids", "64")
    daemon.create("calm", "--computer")
    # The inner shell forks sleeps until fork fails and then dies; the outer one then becomes
    # a long sleep without forking, so the whole tree stays until the exec's timeout kills it.
    script = ("sh -c 'i=0; while [ $i -lt 500 ]; do sleep 1000 & i=$((i+1)); done' 2>/dev/null; "
              "exec sleep 1000")
    result = {}
    t = threading.Thread(target=lambda: result.update(daemon.exec("bomb", ["sh", "-c", script], timeout=6)))
    t.start()
    try:
        def settled():
            n = daemon.inspect("bomb")["usage"]["pids"]
            return n if n >= 60 else None
        wait_for(settled, 5, 0.1, "the fork bomb to fill its pids quota")
        time.sleep(0.5)
        n = daemon.inspect("bomb")["usage"]["pids"]
        assert 60 <= n <= 64, n
        # the daemon and the other environment are unaffected
        assert daemon.api("GET", "/v1/system").status == 200
        assert daemon.sh("calm", "echo ok") == "ok\n"
        # a new exec into the full environment fails cleanly instead of hanging
        r = daemon.api("POST", "/v1/envs/bomb/exec", {"cmd": ["true"], "timeout": 5}, timeout=30)
        assert r.status != 200 or r.json["exit_code"] != 0, r
    finally:
        t.join(60)
    assert result.get("timed_out") is True, result
    # once the tree is gone the environment works again
    assert daemon.sh("bomb", "echo back") == "back\n"
    # the kill does not wait for the group to empty (the loop never waits for an environment):
    # the killed processes go within moments of the answer
    wait_for(lambda: daemon.inspect("bomb")["usage"]["pids"] <= 4, 10, 0.05,
             "the killed tree to be gone")
    assert "sleep 1000" not in daemon.sh("bomb", "ps -o args")


def test_cpu_limit_caps_a_busy_loop(daemon):
    daemon.create("half", "--cpus", "0.5")
    u0 = daemon.inspect("half")["usage"]["cpu_usage_us"]
    t0 = time.monotonic()
    res = daemon.exec("half", ["sh", "-c", "while :; do :; done"], timeout=2)
    wall = time.monotonic() - t0
    u1 = daemon.inspect("half")["usage"]["cpu_usage_us"]
    assert res["timed_out"] is True
    used = (u1 - u0) / 1e6
    assert 0.5 * wall * 0.5 <= used <= 0.5 * wall * 1.3, "used %.2f CPU-s in %.2f s" % (used, wall)


def test_update_limits_of_a_running_env(daemon):
    daemon.create("up", "--computer", "--memory", "256M", "--pids", "100")
    daemon.cli("update", "up", "--memory", "128M", "--pids", "32", "--cpus", "0.5")
    e = daemon.inspect("up")
    assert e["limits"]["memory"] == 128 << 20 and e["limits"]["pids"] == 32, e
    assert e["limits"]["cpus"] == 0.5
    assert e["state"] == "running"

    # applied to the live cgroup, seen from the host
    mem = daemon.cgroup_file("up", "memory.limit_in_bytes") or daemon.cgroup_file("up", "memory.max")
    assert mem and int(read(mem)) == 128 << 20, mem
    pids = daemon.cgroup_file("up", "pids.max")
    assert pids and read(pids) == "32"
    quota = daemon.cgroup_file("up", "cpu.cfs_quota_us")
    if quota:
        period = int(read(daemon.cgroup_file("up", "cpu.cfs_period_us")))
        assert int(read(quota)) * 1000 // period == 500
    else:
        q, per = read(daemon.cgroup_file("up", "cpu.max")).split()
        assert int(q) * 1000 // int(per) == 500

    # and behaviourally: with pids lowered to 16, 40 background sleeps cannot all start
    r = daemon.api("PATCH", "/v1/envs/up", {"pids": 16})
    assert r.status == 200 and r.json["limits"]["pids"] == 16, r
    res = daemon.exec("up", ["sh", "-c", "i=0; while [ $i -lt 40 ]; do sleep 1000 & i=$((i+1)); done; "
                                         "echo all-started"], timeout=4)
    assert "all-started" not in res["stdout"], res
    assert res["exit_code"] != 0
    assert daemon.inspect("up")["usage"]["pids"] <= 16

    # limits survive a stop/start (they are stored, not only applied)
    daemon.cli("restart", "up")
    e = daemon.inspect("up")
    assert e["limits"]["pids"] == 16 and e["limits"]["memory"] == 128 << 20
    assert read(daemon.cgroup_file("up", "pids.max")) == "16"
