"""A start (and a restart, and E2B's connect of a stopped sandbox) answers once PID 1 runs, and
the daemon serves everyone else meanwhile (issue 12: the loop never waits for an environment's
setup). The setup is held up on purpose, as in test_create_async.py: the daemon's lxcfs is
stopped, so PID 1's child waits in its one lxcfs access while it builds the root. Meanwhile the
environment is listed as "starting": it can be looked at, stopped and deleted (either overtakes
the start, and nothing of it is left); exec and files wait for it to run; the rest is refused.
Requests that wake an environment the idle timer stopped start it the same way."""
import os
import signal
import threading

from conftest import children_of, proc_cgroup, wait_for
from test_create_async import held_lxcfs, setting_up


def stopped_env(daemon, name, *opts):
    daemon.create(name, *opts)
    r = daemon.api("POST", "/v1/envs/%s/stop?timeout=0" % name)
    assert r.status == 200 and r.json["state"] == "stopped", r


def call_in_thread(daemon, method, path, body=None, headers=None):
    box = {}

    def call():
        try:
            box["r"] = daemon.api(method, path, body, headers=headers, timeout=60)
        except OSError as e:  # the daemon went away before answering
            box["error"] = e

    t = threading.Thread(target=call)
    t.start()
    return t, box


def pid1_running(daemon, name):
    return any(comm == "paddock-init" and ("/env-%s\n" % name) in proc_cgroup(pid)
               for pid, comm, _ in children_of(daemon.pid))


def test_a_start_that_is_setting_up_holds_up_no_one(daemon):
    daemon.create("other")
    stopped_env(daemon, "slow")
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = call_in_thread(daemon, "POST", "/v1/envs/slow/start")
        wait_for(lambda: setting_up(daemon, "slow"), 10, 0.02, "the start's setup child")
        # Everyone else is served while it sets up (the old daemon waited here with them).
        res = daemon.api("POST", "/v1/envs/other/exec", {"cmd": ["echo", "served"]}, timeout=10)
        assert res.status == 200 and res.json["stdout"] == "served\n", res
        # It is listed as starting, and only looking at it is allowed meanwhile.
        assert daemon.inspect("slow")["state"] == "starting"
        assert daemon.envs()["slow"]["state"] == "starting"
        kind = daemon.inspect("slow")["kind"]
        scrape = daemon.api("GET", "/metrics", timeout=10).body.decode()
        assert 'paddock_envs{state="starting",kind="%s"} 1\n' % kind in scrape, scrape
        # exec waits for it; a change is refused.
        t2, ex = call_in_thread(daemon, "POST", "/v1/envs/slow/exec", {"cmd": ["echo", "waited"]})
        patch = daemon.api("PATCH", "/v1/envs/slow", {"ttl": "1h"}, timeout=10)
        assert patch.status == 409 and "is starting" in patch.json["error"]["message"], patch
        again = daemon.api("POST", "/v1/envs/slow/start", timeout=10)
        assert again.status == 409 and "is starting" in again.json["error"]["message"], again
        keep = daemon.api("DELETE", "/v1/envs/slow", timeout=10)  # not forced
        assert keep.status == 409 and "is starting" in keep.json["error"]["message"], keep
        assert t.is_alive() and "r" not in box
        assert t2.is_alive() and "r" not in ex
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t.join(60)
    t2.join(60)
    assert box["r"].status == 200 and box["r"].json["state"] == "running", box
    assert ex["r"].status == 200 and ex["r"].json["stdout"] == "waited\n", ex
    assert daemon.sh("slow", "echo up") == "up\n"
    scrape = daemon.api("GET", "/metrics").body.decode()
    assert 'paddock_envs{state="starting",kind="%s"} 0\n' % kind in scrape, scrape


def test_a_restart_answers_once_pid1_runs_again(daemon):
    daemon.create("again", "--computer")
    daemon.sh("again", "echo before > /root/mark")
    first = daemon.inspect("again")["pid"]
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = call_in_thread(daemon, "POST", "/v1/envs/again/restart?timeout=0")
        wait_for(lambda: daemon.inspect("again")["state"] == "starting", 10, 0.02,
                 "the restart's start")
        assert daemon.api("GET", "/v1/system", timeout=10).status == 200
        assert t.is_alive() and "r" not in box
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t.join(60)
    r = box["r"]
    assert r.status == 200 and r.json["state"] == "running" and r.json["pid"] != first, r
    assert daemon.sh("again", "cat /root/mark") == "before\n"


def overtake(daemon, name, method, path, why):
    """Starts stopped `name`, holds its setup, sends the overtaking call while it is held;
    returns that call's answer once the start's is in (which must say `why`)."""
    stopped_env(daemon, name)
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = call_in_thread(daemon, "POST", "/v1/envs/%s/start" % name)
        wait_for(lambda: setting_up(daemon, name), 10, 0.02, "the start's setup child")
        answer = daemon.api(method, path, timeout=10)
        t.join(60)
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    r = box["r"]
    assert r.status == 409 and "was %s while it started" % why in r.json["error"]["message"], r
    assert not setting_up(daemon, name)
    assert daemon.cgroup_dirs(name) == []
    return answer


def test_a_delete_overtakes_a_start_and_leaves_nothing(daemon):
    d = overtake(daemon, "gone", "DELETE", "/v1/envs/gone?force=1", "deleted")
    assert d.status == 200 and d.json == {"deleted": "gone"}, d
    assert "gone" not in daemon.envs()
    daemon.create("gone")  # the name is free again
    assert daemon.sh("gone", "echo ok") == "ok\n"


def test_a_stop_overtakes_a_start_and_it_can_start_again(daemon):
    s = overtake(daemon, "halt", "POST", "/v1/envs/halt/stop", "stopped")
    assert s.status == 200 and s.json["state"] == "stopped", s
    assert daemon.inspect("halt")["state"] == "stopped"
    r = daemon.api("POST", "/v1/envs/halt/start")
    assert r.status == 200 and r.json["state"] == "running", r
    assert daemon.sh("halt", "echo ok") == "ok\n"


def test_a_start_in_progress_at_shutdown_leaves_it_stopped_and_clean(daemon):
    stopped_env(daemon, "cut")
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = call_in_thread(daemon, "POST", "/v1/envs/cut/start")
        wait_for(lambda: setting_up(daemon, "cut"), 10, 0.02, "the start's setup child")
        daemon.stop()
    finally:
        try:
            os.kill(lxcfs, signal.SIGCONT)
        except ProcessLookupError:
            pass
    t.join(60)
    assert "error" in box or box["r"].status >= 500, box
    # A clean exit: libmicrohttpd aborts a daemon stopped with a deferred answer pending.
    assert daemon.proc.returncode == 0, open(daemon.logpath).read()[-2000:]
    daemon.start()
    assert daemon.inspect("cut")["state"] == "stopped"
    assert daemon.cgroup_dirs("cut") == [], open(daemon.logpath).read()[-3000:]
    r = daemon.api("POST", "/v1/envs/cut/start")
    assert r.status == 200 and r.json["state"] == "running", r
    assert daemon.sh("cut", "echo ok") == "ok\n"


def test_a_start_in_progress_counts_toward_its_tokens_quota(daemon):
    r = daemon.api("POST", "/v1/tokens", {"name": "one", "max_cpus": 1})
    assert r.status == 201, r
    auth = {"Authorization": "Bearer " + r.json["secret"]}
    for name in ("qa", "qb"):
        r = daemon.api("POST", "/v1/envs", {"name": name, "cpus": 1}, headers=auth)
        assert r.status == 201, r
        r = daemon.api("POST", "/v1/envs/%s/stop?timeout=0" % name, headers=auth)
        assert r.status == 200, r
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = call_in_thread(daemon, "POST", "/v1/envs/qa/start", headers=auth)
        wait_for(lambda: setting_up(daemon, "qa"), 10, 0.02, "the start's setup child")
        second = daemon.api("POST", "/v1/envs/qb/start", headers=auth, timeout=10)
        assert second.status == 403 and second.json["error"]["code"] == "quota_exceeded", second
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t.join(60)
    assert box["r"].status == 200, box
    assert daemon.inspect("qb")["state"] == "stopped"


def test_requests_that_wake_an_idle_stopped_computer_wait_for_one_start(daemon):
    # Stopped by its idle timer, a computer is started by the first exec or file request; the
    # ones that come while it starts wait for the same start, and everyone else is served.
    daemon.create("other")
    daemon.create("nap", "--computer", "--idle-timeout", "2s")
    daemon.sh("nap", "echo kept > /root/file")
    wait_for(lambda: daemon.inspect("nap")["state"] == "stopped", 20, 0.2, "the idle stop")
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t1, one = call_in_thread(daemon, "POST", "/v1/envs/nap/exec", {"cmd": ["echo", "one"]})
        wait_for(lambda: setting_up(daemon, "nap"), 10, 0.02, "the wake-up's setup child")
        t2, two = call_in_thread(daemon, "GET", "/v1/envs/nap/files?path=/root/file")
        res = daemon.api("POST", "/v1/envs/other/exec", {"cmd": ["echo", "served"]}, timeout=10)
        assert res.status == 200 and res.json["stdout"] == "served\n", res
        assert daemon.inspect("nap")["state"] == "starting"
        assert t1.is_alive() and t2.is_alive() and not one and not two
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    t1.join(60)
    t2.join(60)
    assert one["r"].status == 200 and one["r"].json["stdout"] == "one\n", one
    assert two["r"].status == 200 and two["r"].body == b"kept\n", two
    log = open(daemon.logpath).read()
    assert log.count("nap: woken (was stopped when idle)") == 1, log[-3000:]


def test_autostart_begins_once_the_daemon_serves(daemon):
    # After a reboot (here: stopped computers marked autostart, and a daemon restart) the
    # daemon is ready first and then starts its autostart environments over turns of its
    # loop, a few at a time (before, it started each in turn before it would answer anyone).
    for i in range(6):
        daemon.create("boot%d" % i, "--computer", "--autostart")
        r = daemon.api("POST", "/v1/envs/boot%d/stop?timeout=0" % i)
        assert r.status == 200 and r.json["state"] == "stopped", r
    daemon.create("manual", "--computer")
    r = daemon.api("POST", "/v1/envs/manual/stop?timeout=0")
    assert r.status == 200, r
    daemon.restart()
    for i in range(6):
        wait_for(lambda: daemon.inspect("boot%d" % i)["state"] == "running", 30, 0.05,
                 "autostart of boot%d" % i)
        assert daemon.sh("boot%d" % i, "echo up") == "up\n"
    assert daemon.inspect("manual")["state"] == "stopped"
    log = open(daemon.logpath).read()
    this_run = log[log.rindex("autostart: starting 6 environments"):]
    assert "ready: root" in log[log.rindex("received signal 15"):log.rindex("boot0: started")]
    assert all("boot%d: started (pid" % i in this_run for i in range(6)), this_run


def test_a_stop_during_a_wake_up_keeps_it_stopped_for_good(daemon):
    # A computer the idle timer stopped is being woken by an exec when its owner stops it: the
    # wake-up is given up, and the stop is the owner's (no later request starts it again).
    daemon.create("dozy", "--computer", "--idle-timeout", "2s")
    wait_for(lambda: daemon.inspect("dozy")["state"] == "stopped", 20, 0.2, "the idle stop")
    assert daemon.inspect("dozy")["idled_at"] is not None
    lxcfs = held_lxcfs(daemon)
    os.kill(lxcfs, signal.SIGSTOP)
    try:
        t, box = call_in_thread(daemon, "POST", "/v1/envs/dozy/exec", {"cmd": ["true"]})
        wait_for(lambda: setting_up(daemon, "dozy"), 10, 0.02, "the wake-up's setup child")
        s = daemon.api("POST", "/v1/envs/dozy/stop", timeout=10)
        assert s.status == 200 and s.json["state"] == "stopped", s
        t.join(60)
    finally:
        os.kill(lxcfs, signal.SIGCONT)
    r = box["r"]
    assert r.status == 409 and "was stopped while it started" in r.json["error"]["message"], r
    e = daemon.inspect("dozy")
    assert e["state"] == "stopped" and e["idled_at"] is None, e
    r = daemon.api("POST", "/v1/envs/dozy/exec", {"cmd": ["true"]})
    assert r.status == 409 and "not running" in r.json["error"]["message"], r
    assert daemon.inspect("dozy")["state"] == "stopped"
