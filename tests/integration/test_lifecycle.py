"""Create, list, inspect, stop/start/restart and remove environments."""
import calendar
import json
import os
import threading
import time

from conftest import pid_alive, wait_for


def ts(s):
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def test_quickstart_flow_through_the_cli(daemon):
    """The quick start a user follows: create, exec, ls, stop, start, rm."""
    assert daemon.cli("create", "agent1", "--computer").out.strip() == "agent1"
    p = daemon.cli("exec", "agent1", "--", "sh", "-c", "echo hello from $(hostname)")
    assert p.out == "hello from agent1\n"

    ls = daemon.cli("ls").out.splitlines()
    assert ls[0].split()[:3] == ["NAME", "KIND", "STATE"]
    row = [l.split() for l in ls[1:] if l.split()[0] == "agent1"]
    assert row and row[0][1:3] == ["computer", "running"], ls

    assert daemon.cli("stop", "agent1").out.strip() == "agent1"
    row = [l.split() for l in daemon.cli("ls").out.splitlines() if l.startswith("agent1 ")]
    assert row[0][2] == "stopped"

    assert daemon.cli("start", "agent1").out.strip() == "agent1"
    assert daemon.cli("exec", "agent1", "--", "echo", "back").out == "back\n"

    p = daemon.cli("rm", "agent1", check=False)
    assert p.returncode == 1 and p.out == ""
    assert p.err.startswith("paddock: ") and "running" in p.err and p.err.count("\n") == 1, p.err

    assert daemon.cli("rm", "-f", "agent1").out.strip() == "agent1"
    assert [l for l in daemon.cli("ls").out.splitlines()[1:] if l.strip()] == []
    assert json.loads(daemon.cli("ls", "--json").out)["envs"] == []


def test_create_computer_and_sandbox_inspect_fields(daemon):
    before = int(time.time())
    c = daemon.create("comp1", "--computer")
    s = daemon.create("sand1")  # sandbox is the default kind
    after = int(time.time())

    assert c["kind"] == "computer" and s["kind"] == "sandbox"
    for e, name in ((c, "comp1"), (s, "sand1")):
        assert e["name"] == name
        assert e["state"] == "running"
        assert e["image"] == "base"
        assert isinstance(e["pid"], int) and e["pid"] > 1 and pid_alive(e["pid"])
        assert before - 1 <= ts(e["created_at"]) <= after + 1
        assert set(e["limits"]) >= {"cpus", "memory", "swap", "pids"}
        assert e["uid_count"] == 65536 and e["uid_base"] > 0
        # sandboxes default to loopback only; computers to open (NAT) with an address
        net = e["network"]
        if name == "sand1":
            assert net["mode"] == "none" and net["ip"] is None
        else:
            assert net["mode"] == "open" and net["ip"].startswith("10.77.")
        assert e["autostart"] is False
        assert e["oom_kills"] == 0

    # a computer lives until removed; a sandbox gets the default TTL of one hour
    assert c["expires_at"] is None
    assert abs(ts(s["expires_at"]) - ts(s["created_at"]) - 3600) <= 2, s

    # CLI inspect --json and ls --json say the same as the API
    cj = json.loads(daemon.cli("inspect", "comp1", "--json").out)
    assert cj["name"] == "comp1" and cj["kind"] == "computer" and cj["state"] == "running"
    listed = {e["name"]: e for e in json.loads(daemon.cli("ls", "--json").out)["envs"]}
    assert set(listed) == {"comp1", "sand1"}
    assert listed["sand1"]["kind"] == "sandbox" and listed["sand1"]["state"] == "running"

    # human-readable inspect names the env and its state
    out = daemon.cli("inspect", "sand1").out
    assert "sand1" in out and "running" in out and "sandbox" in out


def test_create_with_explicit_limits_env_labels(daemon):
    e = daemon.create("lim1", "--computer", "--cpus", "1.5", "--memory", "256M", "--swap", "0",
                      "--pids", "100", "--ttl", "2h", "--env", "FOO=bar baz", "--label", "team=a")
    assert e["limits"] == {"cpus": 1.5, "memory": 256 << 20, "swap": 0, "pids": 100}
    assert abs(ts(e["expires_at"]) - ts(e["created_at"]) - 7200) <= 2
    assert e["env"] == {"FOO": "bar baz"}
    assert e["labels"] == {"team": "a"}
    assert daemon.sh("lim1", 'printf %s "$FOO"') == "bar baz"
    # label filter
    daemon.create("lim2", "--label", "team=b")
    names = [x["name"] for x in json.loads(daemon.cli("ls", "--label", "team=a", "--json").out)["envs"]]
    assert names == ["lim1"]
    r = daemon.api("GET", "/v1/envs?label=team=b")
    assert [x["name"] for x in r.json["envs"]] == ["lim2"]


def test_computer_stop_start_restart_keeps_files(daemon):
    daemon.create("pc", "--computer")
    daemon.sh("pc", "echo hello > /root/note")
    pid1 = daemon.inspect("pc")["pid"]

    r = daemon.api("POST", "/v1/envs/pc/stop")
    assert r.status == 200, r
    assert r.json["state"] == "stopped" and r.json["pid"] is None
    assert not pid_alive(pid1)
    assert daemon.inspect("pc")["state"] == "stopped"
    assert daemon.cgroup_dirs("pc") == [], "a stopped environment keeps no cgroup"

    # exec into a stopped env is a conflict
    r = daemon.api("POST", "/v1/envs/pc/exec", {"cmd": ["true"]})
    assert r.status == 409, r
    assert r.error()[0] == "conflict"

    r = daemon.api("POST", "/v1/envs/pc/start")
    assert r.status == 200 and r.json["state"] == "running", r
    pid2 = r.json["pid"]
    assert pid2 != pid1 and pid_alive(pid2)
    assert daemon.sh("pc", "cat /root/note") == "hello\n"

    # starting a running env is a conflict, not a second PID 1
    r = daemon.api("POST", "/v1/envs/pc/start")
    assert r.status == 409, r
    assert daemon.inspect("pc")["pid"] == pid2

    p = daemon.cli("restart", "pc")
    assert p.out.strip() == "pc"
    e = daemon.inspect("pc")
    assert e["state"] == "running" and e["pid"] not in (pid2, None)
    assert not pid_alive(pid2)
    assert daemon.sh("pc", "cat /root/note") == "hello\n"


def test_sandbox_tmp_and_workspace_are_empty_after_restart(daemon):
    daemon.create("sb")
    daemon.sh("sb", "echo x > /tmp/scratch && echo y > /workspace/out && ls /tmp /workspace")
    r = daemon.api("POST", "/v1/envs/sb/restart")
    assert r.status == 200 and r.json["state"] == "running", r
    assert daemon.sh("sb", "ls -A /tmp") == ""
    assert daemon.sh("sb", "ls -A /workspace") == ""


def test_rm_needs_force_while_running(daemon):
    daemon.create("r1", "--computer")
    daemon.create("r2")
    pid1 = daemon.inspect("r1")["pid"]
    envdir = daemon.env_dir("r1")
    assert os.path.isdir(envdir)
    assert daemon.cgroup_dirs("r1"), "a running environment has cgroups"

    r = daemon.api("DELETE", "/v1/envs/r1")
    assert r.status == 409, r
    code, msg = r.error()
    assert code == "conflict" and "r1" in msg
    assert daemon.inspect("r1")["state"] == "running" and pid_alive(pid1)

    p = daemon.cli("rm", "-f", "r1")
    assert p.out.strip() == "r1"
    assert daemon.api("GET", "/v1/envs/r1").status == 404
    assert not pid_alive(pid1)
    assert not os.path.exists(envdir)
    assert daemon.cgroup_dirs("r1") == []
    assert "r1" not in daemon.envs()

    # a stopped environment goes without force
    daemon.cli("stop", "r2")
    r = daemon.api("DELETE", "/v1/envs/r2")
    assert r.status == 200 and r.json == {"deleted": "r2"}, r
    assert daemon.envs() == {}
    assert os.listdir(os.path.join(daemon.root, "envs")) == []
    assert daemon.uid_claims() == [], "id ranges are released"


def test_failed_create_leaves_nothing(daemon):
    p = daemon.cli("create", "ghost", "--image", "nosuchimage", check=False)
    assert p.returncode == 1 and p.out == ""
    assert p.err.startswith("paddock: ") and "nosuchimage" in p.err, p.err

    r = daemon.api("POST", "/v1/envs", {"name": "ghost2", "image": "nosuchimage"})
    assert r.status == 422, r
    code, msg = r.error()
    assert code == "unprocessable" and "nosuchimage" in msg

    for n in ("ghost", "ghost2"):
        assert daemon.api("GET", "/v1/envs/" + n).status == 404
        assert not os.path.exists(daemon.env_dir(n))
        assert daemon.cgroup_dirs(n) == []
    assert daemon.envs() == {}
    assert os.listdir(os.path.join(daemon.root, "envs")) == []
    assert daemon.uid_claims() == []
    # and the name is free for a real one
    daemon.create("ghost")


def test_stop_kills_what_ignores_sigterm_after_the_timeout(daemon):
    daemon.create("stubborn", "--computer")
    pid1 = daemon.inspect("stubborn")["pid"]
    # The exec returns only once the loop ignores TERM (else a stop that comes before the
    # background shell has run its trap would kill it at once).
    daemon.sh("stubborn", "(trap '' TERM; touch /tmp/trapped; while :; do sleep 1; done) "
                          ">/dev/null 2>&1 & while [ ! -e /tmp/trapped ]; do sleep 0.05; done")
    t0 = time.monotonic()
    p = daemon.cli("stop", "--timeout", "1s", "stubborn")
    took = time.monotonic() - t0
    assert p.out.strip() == "stubborn"
    # at least the 1 s grace: something did ignore SIGTERM (without that loop running, the
    # stop ends at once and the test would prove nothing); then killed long before 15 s
    assert 0.9 <= took < 15, took
    assert daemon.inspect("stubborn")["state"] == "stopped"
    assert not pid_alive(pid1)
    assert daemon.cgroup_dirs("stubborn") == []


def test_pause_and_resume(daemon):
    """The CLI offers pause/resume (freeze and thaw)."""
    daemon.create("frz", "--computer")
    p = daemon.cli("pause", "frz", check=False)
    assert p.returncode == 0, p.err
    assert daemon.inspect("frz")["state"] != "running"
    p = daemon.cli("resume", "frz", check=False)
    assert p.returncode == 0, p.err
    assert daemon.inspect("frz")["state"] == "running"
    assert daemon.sh("frz", "echo thawed") == "thawed\n"


def test_images_import_list_and_remove(daemon):
    import subprocess
    tgz = os.path.join(daemon.tmp, "img.tar.gz")
    subprocess.run(["tar", "czf", tgz, "-C", daemon.image_dir, "."], check=True)
    assert daemon.cli("image", "import", "fromtar", tgz).out.strip() == "fromtar"
    with open(tgz, "rb") as f:
        assert daemon.cli("image", "import", "fromstdin", "-", input=f.read()).out.strip() == "fromstdin"
    images = {i["name"]: i for i in json.loads(daemon.cli("image", "ls", "--json").out)["images"]}
    assert set(images) >= {"base", "fromtar", "fromstdin"}
    assert images["fromtar"]["size"] > 0 and images["fromtar"]["used_by"] == 0

    daemon.create("it", "--computer", "--image", "fromtar")
    assert daemon.inspect("it")["image"] == "fromtar"
    assert daemon.sh("it", "echo ok") == "ok\n"
    r = daemon.api("DELETE", "/v1/images/fromtar")
    assert r.status == 409 and r.error()[0] == "conflict", r
    p = daemon.cli("image", "rm", "fromtar", check=False)
    assert p.returncode == 1 and "fromtar" in p.err
    daemon.cli("rm", "-f", "it")
    daemon.cli("image", "rm", "fromtar", "fromstdin")
    names = [i["name"] for i in json.loads(daemon.cli("image", "ls", "--json").out)["images"]]
    assert "fromtar" not in names and "fromstdin" not in names
    r = daemon.api("DELETE", "/v1/images/fromtar")
    assert r.status == 404, r


def test_system_info(daemon):
    daemon.create("one")
    s = json.loads(daemon.cli("system", "--json").out)
    assert s["cgroup_mode"] in ("v2", "hybrid", "v1")
    assert s["root"] == os.path.realpath(daemon.root)
    assert s["envs"] == 1
    assert isinstance(s["version"], str) and s["version"]


def _exec_in_background(daemon, name, cmd):
    import threading
    res = {}

    def run():
        t0 = time.monotonic()
        try:
            res.update(daemon.exec(name, cmd))
        except Exception as ex:  # reported by the caller's assertions
            res["error"] = repr(ex)
        res["elapsed"] = time.monotonic() - t0

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, res


def test_rm_force_while_an_exec_runs(daemon):
    """rm -f of a busy environment ends its exec and does not stall the daemon (a killed
    command has nothing left to wait for; seconds here mean a hang, not slowness)."""
    daemon.create("busy", "--computer")
    daemon.create("other", "--computer")
    th, res = _exec_in_background(daemon, "busy", ["sleep", "100"])
    wait_for(lambda: "sleep 100" in daemon.sh("busy", "ps -o args"), 5, what="the exec to start")
    t0 = time.monotonic()
    r = daemon.api("DELETE", "/v1/envs/busy?force=1")
    took = time.monotonic() - t0
    assert r.status == 200, r
    th.join(30)
    assert res.get("exit_code") == 137, res
    assert took < 3, "rm -f took %.1f s (the daemon answers nobody meanwhile)" % took
    assert daemon.sh("other", "echo ok") == "ok\n"


def host_pids_of(daemon, argv):
    """Host pids in the daemon's cgroup subtree whose command line is exactly argv."""
    want = "\0".join(argv) + "\0"
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d) as f:
                cmdline = f.read()
            with open("/proc/%s/cgroup" % d) as f:
                cgroup = f.read()
        except OSError:
            continue
        if cmdline == want and "/" + daemon.subtree + "/" in cgroup:
            found.append(int(d))
    return found


def test_stop_while_an_exec_runs(daemon):
    daemon.create("busy", "--computer")
    th, res = _exec_in_background(daemon, "busy", ["sleep", "100"])
    wait_for(lambda: "sleep 100" in daemon.sh("busy", "ps -o args"), 5, what="the exec to start")
    sleepers = wait_for(lambda: host_pids_of(daemon, ["sleep", "100"]), 5, what="its host pid")
    r = daemon.api("POST", "/v1/envs/busy/stop?timeout=2s")
    assert r.status == 200 and r.json["state"] == "stopped", r
    th.join(30)
    assert "exit_code" in res and res["exit_code"] != 0, res
    # the command is gone on the host (a new PID namespace after start could never show it)
    assert not [p for p in sleepers if pid_alive(p)], sleepers
    daemon.cli("start", "busy")
    assert daemon.sh("busy", "echo ok") == "ok\n"


def test_rm_force_of_a_paused_sandbox_and_the_same_name_again(daemon):
    """A destroy records one synced "deleting" and no "stopped" on the way: a paused sandbox
    (with a warm exec slot from its first exec) goes entirely, and its name, id range and
    cgroup are free for the next create at once."""
    daemon.create("again", "--sandbox")
    assert daemon.sh("again", "echo one") == "one\n"
    pid1 = daemon.inspect("again")["pid"]
    assert daemon.cli("pause", "again").returncode == 0
    r = daemon.api("DELETE", "/v1/envs/again?force=1")
    assert r.status == 200, r
    assert daemon.api("GET", "/v1/envs/again").status == 404
    assert not pid_alive(pid1)
    assert daemon.cgroup_dirs("again") == []
    assert daemon.uid_claims() == []
    assert not os.path.exists(daemon.env_dir("again"))
    daemon.create("again", "--sandbox")
    assert daemon.sh("again", "echo two") == "two\n"
    daemon.cli("rm", "-f", "again")
    assert daemon.uid_claims() == []


def test_rm_force_answers_once_gone_and_meanwhile_only_inspect_and_delete(daemon):
    """A forced delete kills the environment and answers once it is gone, without the daemon
    waiting for the processes to die: meanwhile it is listed as "deleting", inspect and delete
    work (a second delete answers with the first), everything else is 409, and other
    environments are served. The v1 freezer holds its processes while their SIGKILL waits,
    which makes "meanwhile" as long as the test needs."""
    daemon.create("dying", "--sandbox")
    daemon.create("bystander", "--sandbox")
    pid1 = daemon.inspect("dying")["pid"]
    state = daemon.freeze_from_outside("dying")
    answers = {}

    def delete(key, query):
        answers[key] = daemon.api("DELETE", "/v1/envs/dying" + query)

    first = threading.Thread(target=delete, args=("first", "?force=1"))
    try:
        first.start()
        wait_for(lambda: daemon.inspect("dying")["state"] == "deleting", 10,
                 what="the environment to be marked deleting")
        second = threading.Thread(target=delete, args=("second", ""))
        second.start()
        r = daemon.api("POST", "/v1/envs/dying/exec", {"cmd": ["true"]})
        assert r.status == 409 and r.json["error"] == {
            "code": "conflict", "message": "dying is being deleted"}, r
        assert daemon.api("POST", "/v1/envs/dying/stop").status == 409
        assert daemon.api("GET", "/v1/envs/dying/files/list?path=/").status == 409
        r = daemon.api("POST", "/v1/envs", {"name": "dying", "kind": "sandbox"})
        assert r.status == 409, r
        rows = {e["name"]: e["state"] for e in daemon.api("GET", "/v1/envs").json["envs"]}
        assert rows == {"dying": "deleting", "bystander": "running"}, rows
        assert daemon.sh("bystander", "echo served") == "served\n"
        time.sleep(0.2)
        assert first.is_alive() and second.is_alive(), answers
    finally:
        daemon.thaw_from_outside(state)
    first.join(30)
    second.join(30)
    for key in ("first", "second"):
        assert answers[key].status == 200 and answers[key].json == {"deleted": "dying"}, answers
    assert daemon.api("GET", "/v1/envs/dying").status == 404
    assert not pid_alive(pid1)
    assert daemon.cgroup_dirs("dying") == []
    assert not os.path.exists(daemon.env_dir("dying"))
    daemon.create("dying", "--sandbox")
    assert daemon.sh("dying", "echo reborn") == "reborn\n"


def test_rm_force_of_an_environment_that_cannot_die_is_finished_after_a_time_limit(daemon):
    """Processes that do not die of their SIGKILL (a group frozen from outside, held here by
    the v1 freezer and never thawed by the test) do not leave a delete unanswered: after 10 s
    the daemon kills the cgroup (which thaws it) and finishes the removal; a restart that was
    waiting for the stop meanwhile does not start it again."""
    daemon.create("stuck", "--sandbox")
    pid1 = daemon.inspect("stuck")["pid"]
    state = daemon.freeze_from_outside("stuck")
    restarted = {}
    # a restart already waiting for its stop when the delete comes: it must not start it again
    restart = threading.Thread(target=lambda: restarted.update(
        r=daemon.api("POST", "/v1/envs/stuck/restart?timeout=60s", timeout=60)))
    try:
        restart.start()
        wait_for(lambda: daemon.inspect("stuck")["state"] == "stopping" and restart.is_alive(),
                 5, what="the restart to wait")
        time.sleep(0.2)
        r = daemon.api("DELETE", "/v1/envs/stuck?force=1", timeout=60)
        assert r.status == 200 and r.json == {"deleted": "stuck"}, r
    finally:
        daemon.thaw_from_outside(state)
    restart.join(30)
    assert restarted["r"].status == 404, restarted
    assert restarted["r"].json["error"]["message"] == "environment was removed", restarted
    assert daemon.api("GET", "/v1/envs/stuck").status == 404
    wait_for(lambda: not pid_alive(pid1), 10, what="PID 1 to be gone")
    assert daemon.cgroup_dirs("stuck") == []
    assert "stuck: still dying after 10 s: killing its cgroup" in daemon.log()
