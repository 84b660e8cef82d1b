"""A create answers once its PID 1 runs, and the daemon serves everyone else meanwhile (issue 12:
the loop never waits for an environment's setup). The setup is held up on purpose here: the
daemon's lxcfs is stopped, so PID 1's child waits in its one lxcfs access while it builds the
root. Until the child finishes, the name is taken, the create counts toward its token's quota,
and the environment is not listed; once lxcfs goes on, the create answers 201."""
import os
import signal
import threading

import pytest

from conftest import children_of, proc_cgroup, wait_for


def held_lxcfs(daemon):
    pids = [p for p, comm, _ in children_of(daemon.pid) if comm == "lxcfs"]
    if not pids:
        pytest.skip("this daemon runs without lxcfs")
    return pids[0]


def setting_up(daemon, name):
    """PID 1's child of a create in progress (still in the daemon's code: not exec'd)."""
    return any(comm == "paddockd" and ("/env-%s\n" % name) in proc_cgroup(pid)
               for pid, comm, _ in children_of(daemon.pid))


def create_in_thread(daemon, body, headers=None):
    box = {}
    t = threading.Thread(target=lambda: box.update(
        r=daemon.api("POST", "/v1/envs", body, headers=headers, timeout=60)))
    t.start()
    return t, box


def test_a_create_that_is_setting_up_holds_up_no_one(daemon):
    daemon.create("other")
    daemon.sh("other", "true")
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = create_in_thread(daemon, {"name": "slow"})
        wait_for(lambda: setting_up(daemon, "slow"), 10, 0.02, "the create's setup child")
        # Everyone else is served while it waits (the old daemon waited here with them).
        assert daemon.api("GET", "/v1/system", timeout=10).status == 200
        res = daemon.api("POST", "/v1/envs/other/exec", {"cmd": ["echo", "served"]}, timeout=10)
        assert res.status == 200 and res.json["stdout"] == "served\n", res
        # Its name is taken, but it is not there yet.
        again = daemon.api("POST", "/v1/envs", {"name": "slow"}, timeout=10)
        assert again.status == 409 and "already exists" in again.json["error"]["message"], again
        assert daemon.api("GET", "/v1/envs/slow", timeout=10).status == 404
        assert "slow" not in daemon.envs()
        assert t.is_alive() and "r" not in box
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t.join(60)
    assert box["r"].status == 201, box
    assert box["r"].json["name"] == "slow" and box["r"].json["state"] == "running"
    assert daemon.sh("slow", "echo up") == "up\n"
    assert "slow" in daemon.envs()


def test_a_create_in_progress_counts_toward_its_tokens_quota(daemon):
    r = daemon.api("POST", "/v1/tokens", {"name": "one", "max_envs": 1})
    assert r.status == 201, r
    auth = {"Authorization": "Bearer " + r.json["secret"]}
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = create_in_thread(daemon, {"name": "q1"}, auth)
        wait_for(lambda: setting_up(daemon, "q1"), 10, 0.02, "the create's setup child")
        second = daemon.api("POST", "/v1/envs", {"name": "q2"}, headers=auth, timeout=10)
        assert second.status == 403 and second.json["error"]["code"] == "quota_exceeded", second
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t.join(60)
    assert box["r"].status == 201, box
    assert sorted(n for n, e in daemon.envs().items()) == ["q1"]
