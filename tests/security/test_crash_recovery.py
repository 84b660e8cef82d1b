"""Daemon crashes and restarts, interrupted operations, TTL expiry, autostart."""
import calendar
import json
import os
import signal
import sqlite3
import time

from conftest import pid_alive, wait_for


def reaped(pid):
    """Gone from /proc entirely: not even a zombie waiting for the host's init to reap it."""
    return not os.path.exists("/proc/%d" % pid)


def sleeper_running(daemon, env, arg):
    out = daemon.sh(env, "ps -o args")
    return any(l.strip() == "sleep " + arg for l in out.splitlines())


def test_kill9_leaves_computers_running_and_restart_readopts_them(daemon):
    daemon.create("pc", "--computer")
    daemon.create("sb")
    daemon.sh("pc", "echo persisted > /root/note; sleep 1000 >/dev/null 2>&1 &")
    pid_pc = daemon.inspect("pc")["pid"]
    pid_sb = daemon.inspect("sb")["pid"]
    assert sleeper_running(daemon, "pc", "1000")

    daemon.kill9()
    time.sleep(0.3)
    assert pid_alive(pid_pc) and pid_alive(pid_sb), "environments outlive the daemon"

    daemon.start()
    envs = daemon.envs()
    assert envs["pc"]["state"] == "running" and envs["pc"]["pid"] == pid_pc, envs["pc"]
    assert envs["sb"]["state"] == "running" and envs["sb"]["pid"] == pid_sb
    assert daemon.sh("pc", "cat /root/note") == "persisted\n"
    assert sleeper_running(daemon, "pc", "1000"), "a background process survives the daemon"
    assert daemon.cli("exec", "sb", "--", "echo", "hi").out == "hi\n"
    row = [l.split() for l in daemon.cli("ls").out.splitlines() if l.startswith("pc ")]
    assert row[0][2] == "running"

    # the re-adopted environment is fully managed: usage, stop and start work
    assert daemon.inspect("pc")["usage"]["pids"] >= 2
    r = daemon.api("POST", "/v1/envs/pc/stop")
    assert r.status == 200 and r.json["state"] == "stopped", r
    assert not pid_alive(pid_pc)
    daemon.cli("start", "pc")
    assert daemon.sh("pc", "cat /root/note") == "persisted\n"


def test_graceful_daemon_stop_also_leaves_envs_running(daemon):
    daemon.create("pc", "--computer")
    pid = daemon.inspect("pc")["pid"]
    daemon.stop()
    assert daemon.proc.returncode == 0, daemon.log()
    assert pid_alive(pid)
    assert not os.path.exists(daemon.sock), "a cleanly stopped daemon removes its socket"
    daemon.start()
    assert daemon.inspect("pc")["pid"] == pid
    assert daemon.sh("pc", "echo ok") == "ok\n"


def test_env_whose_pid1_died_while_daemon_was_down_is_stopped(daemon):
    daemon.create("pc", "--computer")
    daemon.create("keep", "--computer")
    daemon.sh("pc", "echo kept > /root/f")
    pid = daemon.inspect("pc")["pid"]
    daemon.kill9()
    os.kill(pid, signal.SIGKILL)  # started by our daemon, so ours to kill
    # orphaned by the dead daemon, it is reaped by the host's init (which may take a moment)
    wait_for(lambda: reaped(pid), 15, what="PID 1 to die and be reaped")
    daemon.start()
    e = daemon.inspect("pc")
    assert e["state"] == "stopped" and e["pid"] is None, e
    assert daemon.cgroup_dirs("pc") == [], "its cgroups are cleaned up"
    assert daemon.inspect("keep")["state"] == "running"
    r = daemon.api("POST", "/v1/envs/pc/exec", {"cmd": ["true"]})
    assert r.status == 409, r
    daemon.cli("start", "pc")
    assert daemon.sh("pc", "cat /root/f") == "kept\n"


def test_half_done_operations_are_rolled_back_at_start(daemon):
    daemon.create("real", "--computer")
    daemon.stop()
    db = sqlite3.connect(os.path.join(daemon.root, "paddock.db"))
    base_c = 0x100000 + 65536 * 1000
    base_d = 0x100000 + 65536 * 1001
    spec = json.dumps({"limits": {}, "env": {}, "labels": {}, "ttl": 0})
    with db:
        for name, status, base in (("halfmade", "creating", base_c), ("halfgone", "deleting", base_d)):
            db.execute("INSERT INTO envs (name, kind, image, status, uid_base, pid, pid_start, "
                       "created_at, expires_at, autostart, spec) VALUES (?,?,?,?,?,0,0,?,0,0,?)",
                       (name, "computer", "base", status, base, int(time.time()), spec))
    db.close()
    for name, base in (("halfmade", base_c), ("halfgone", base_d)):
        os.makedirs(os.path.join(daemon.env_dir(name), "upper", "root"))
        with open(os.path.join(daemon.uids, str(base)), "w") as f:
            f.write("%s\t%s" % (os.path.realpath(daemon.root), name))
    # an orphaned directory without any record
    os.makedirs(os.path.join(daemon.env_dir("stray"), "upper"))

    daemon.start()
    assert set(daemon.envs()) == {"real"}
    for name in ("halfmade", "halfgone", "stray"):
        assert not os.path.exists(daemon.env_dir(name)), name
        assert daemon.api("GET", "/v1/envs/" + name).status == 404
    db = sqlite3.connect(os.path.join(daemon.root, "paddock.db"))
    rows = [r[0] for r in db.execute("SELECT name FROM envs ORDER BY name")]
    db.close()
    assert rows == ["real"]
    assert str(base_c) not in daemon.uid_claims() and str(base_d) not in daemon.uid_claims()
    assert daemon.inspect("real")["state"] == "running"
    # the names are usable again
    daemon.create("halfmade")


def test_finishing_a_delete_frees_only_its_own_id_range(daemon):
    """A destroy's last step (the row's removal) is not synced: after a crash it can come back
    as "deleting" and is finished again at the next start. By then its id range may have been
    claimed by another daemon of the host: that claim stays."""
    daemon.create("keep")
    daemon.stop()
    base = 0x100000 + 65536 * 1002
    spec = json.dumps({"limits": {}, "env": {}, "labels": {}, "ttl": 0})
    db = sqlite3.connect(os.path.join(daemon.root, "paddock.db"))
    with db:
        db.execute("INSERT INTO envs (name, kind, image, status, uid_base, pid, pid_start, "
                   "created_at, expires_at, autostart, spec) VALUES (?,?,?,?,?,0,0,?,0,0,?)",
                   ("gone", "sandbox", "base", "deleting", base, int(time.time()), spec))
    db.close()
    claim = os.path.join(daemon.uids, str(base))
    with open(claim, "w") as f:
        f.write("/var/lib/another-paddock\tgone")
    try:
        daemon.start()
        assert set(daemon.envs()) == {"keep"}
        assert daemon.api("GET", "/v1/envs/gone").status == 404
        with open(claim) as f:
            assert f.read() == "/var/lib/another-paddock\tgone"
    finally:
        os.unlink(claim)


def test_sandbox_ttl_expires(daemon):
    e = daemon.create("short", "--ttl", "3s")
    pid = e["pid"]
    assert e["expires_at"] is not None
    daemon.create("long", "--ttl", "1h")
    wait_for(lambda: "short" not in daemon.envs(), 8, 0.2, "the 3 s TTL to expire")
    assert not os.path.exists(daemon.env_dir("short"))
    assert daemon.cgroup_dirs("short") == []
    wait_for(lambda: not pid_alive(pid), 5, what="PID 1 to be gone")
    assert "long" in daemon.envs()


def test_ttl_of_computer_and_update_ttl(daemon):
    daemon.create("comp", "--computer", "--ttl", "1h")
    t0 = time.time()
    daemon.cli("update", "comp", "--ttl", "2s")  # (cli() already fails on a non-zero exit)
    expires = calendar.timegm(time.strptime(daemon.inspect("comp")["expires_at"],
                                            "%Y-%m-%dT%H:%M:%SZ"))
    assert t0 - 1 <= expires <= t0 + 3, (t0, expires)  # 2 s from now, not the hour
    wait_for(lambda: "comp" not in daemon.envs(), 7, 0.2, "the updated TTL to expire")
    # ttl 0 means never
    daemon.create("forever", "--ttl", "0")
    assert daemon.inspect("forever")["expires_at"] is None


def test_ttl_expiring_while_daemon_is_down(daemon):
    e = daemon.create("brief", "--ttl", "3s")
    pid = e["pid"]
    daemon.create("stays", "--computer")
    daemon.kill9()
    time.sleep(4)
    daemon.start()
    assert set(daemon.envs()) == {"stays"}
    assert not os.path.exists(daemon.env_dir("brief"))
    assert daemon.cgroup_dirs("brief") == []
    wait_for(lambda: not pid_alive(pid), 5, what="the expired sandbox's PID 1 to be gone")


def test_autostart_brings_a_computer_back(daemon):
    e = daemon.create("auto", "--computer", "--autostart")
    assert e["autostart"] is True
    daemon.create("manual", "--computer")
    daemon.sh("auto", "echo still-here > /root/f")
    pids = {n: daemon.inspect(n)["pid"] for n in ("auto", "manual")}
    daemon.kill9()
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: all(reaped(p) for p in pids.values()), 15, what="PID 1s to die and be reaped")
    daemon.start()
    # autostart runs over the loop's turns once the daemon serves: "starting", then "running"
    wait_for(lambda: daemon.inspect("auto")["state"] == "running", 30, what="auto to be started again")
    a = daemon.inspect("auto")
    assert a["pid"] not in (None, pids["auto"]), a
    assert daemon.sh("auto", "cat /root/f") == "still-here\n"
    assert daemon.inspect("manual")["state"] == "stopped"

    # autostart can be switched off and on again
    r = daemon.api("PATCH", "/v1/envs/manual", {"autostart": True})
    assert r.status == 200 and r.json["autostart"] is True
    daemon.cli("update", "auto", "--no-autostart")
    assert daemon.inspect("auto")["autostart"] is False
    daemon.restart()
    assert daemon.inspect("manual")["state"] in ("starting", "running")
    wait_for(lambda: daemon.inspect("manual")["state"] == "running", 30, what="manual to be autostarted")


def test_second_daemon_on_same_root_is_refused(daemon):
    import subprocess
    from conftest import PADDOCKD
    p = subprocess.run(["nsenter", "--net=" + daemon.netns_path, PADDOCKD, "--root", daemon.root,
                        "--socket", daemon.sock + "2", "--uid-registry", daemon.uids],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert p.returncode != 0
    assert b"another paddockd" in p.stderr, p.stderr
    assert daemon.api("GET", "/v1/system").status == 200


def test_ttl_applies_while_an_exec_runs(daemon):
    """A sandbox's TTL is a hard limit: a command still running in it (an agent's endless loop)
    does not keep it alive past expiry."""
    import threading
    daemon.create("ttlbusy", "--ttl", "3s")
    res = {}
    th = threading.Thread(target=lambda: res.update(daemon.exec("ttlbusy", ["sleep", "12"])), daemon=True)
    th.start()
    t0 = time.monotonic()
    try:
        wait_for(lambda: "ttlbusy" not in daemon.envs(), 8, 0.2, "the sandbox to expire")
    finally:
        th.join(30)
    assert res.get("exit_code") == 137, res
    assert time.monotonic() - t0 < 10
