"""Warm exec slots (docs/architecture.md, exec step 6): after an exec, a helper waits in the
finished exec's group and spawns the execs that follow, one at a time. An exec through a slot
must behave exactly like one without: the same confinement, nothing carried over from the
exec before, its timeout kills its own tree and nothing else, and the slot itself is invisible
and unreachable from inside."""
import os
import threading
import time

import pytest

from conftest import children_of, longest_wait, pid_alive, proc_cgroup, starved, wait_for


def slots(daemon, env):
    """Host pids of the daemon's children waiting in one of env's per-exec groups (clones of
    the daemon: the commands there are its children too, CLONE_PARENT)."""
    return [pid for pid, comm, _ in children_of(daemon.pid)
            if comm == "paddockd" and ("/env-%s/exec-" % env) in proc_cgroup(pid)]


CONFINEMENT = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
               "Seccomp_filters")


def status(daemon, env, pid, keys):
    res = daemon.exec(env, ["cat", "/proc/%s/status" % pid])
    assert res["exit_code"] == 0, res
    return {k: v.strip() for k, _, v in (l.partition(":") for l in res["stdout"].splitlines())
            if k in keys}


def confinement(daemon, env, pid):
    return status(daemon, env, pid, CONFINEMENT)


@pytest.mark.parametrize("kind", ["sandbox", "computer"])
def test_an_exec_through_a_slot_is_confined_like_pid_1(daemon, kind):
    # The slot loads the seccomp filter (and a sandbox's Landlock domain) once and its
    # commands inherit them; they must end up exactly as confined as PID 1, with one filter.
    daemon.create("cf", "--" + kind)
    daemon.sh("cf", "true")
    wait_for(lambda: slots(daemon, "cf"), 5, 0.05, "a slot after the first exec")
    pid1 = confinement(daemon, "cf", 1)
    assert pid1["Seccomp"] == "2" and pid1["Seccomp_filters"] == "1", pid1
    assert confinement(daemon, "cf", "self") == pid1
    # The slot keeps every signal blocked with default handlers: a command starts with none
    # blocked or ignored.
    assert status(daemon, "cf", "self", ("SigBlk", "SigIgn")) == \
        {"SigBlk": "0" * 16, "SigIgn": "0" * 16}
    # Landlock: a sandbox may write only to scratch places and a few devices. /dev/urandom is
    # a writable device on a read-only root, so only Landlock refuses it (a computer writes).
    res = daemon.exec("cf", ["sh", "-c", "echo x > /dev/urandom && echo x > /dev/null"])
    if kind == "sandbox":
        assert res["exit_code"] != 0 and "denied" in res["stderr"], res
    else:
        assert res["exit_code"] == 0, res
    # another user, and the working directory, still per command
    wait_for(lambda: slots(daemon, "cf"), 5, 0.05, "a slot again")
    res = daemon.exec("cf", "id -u; pwd", user="1000", cwd="/tmp")
    assert res["exit_code"] == 0 and res["stdout"] == "1000\n/tmp\n", res
    # an exec that finds the slot busy gets a second slot: the same confinement
    busy = threading.Thread(target=daemon.exec, args=("cf", ["sleep", "1"]))
    busy.start()
    try:
        time.sleep(0.2)
        assert confinement(daemon, "cf", "self") == pid1
    finally:
        busy.join()


def test_a_new_environment_has_its_slot_before_its_first_exec(daemon):
    # Made right after the create's answer, so the agent's first command does not wait for
    # its set-up; the same slot then runs that command and stays. A restart makes a new one.
    daemon.create("pw")
    first = wait_for(lambda: slots(daemon, "pw"), 5, 0.05, "a slot before any exec")
    assert len(first) == 1
    assert daemon.exec("pw", ["true"])["exit_code"] == 0
    wait_for(lambda: slots(daemon, "pw") == first, 5, 0.05, "the same slot after the exec")
    daemon.cli("stop", "pw")
    assert slots(daemon, "pw") == []
    daemon.cli("start", "pw")
    again = wait_for(lambda: slots(daemon, "pw"), 5, 0.05, "a slot after the start")
    assert again != first


def test_a_slot_made_ahead_goes_soon_if_no_command_comes(daemon):
    # A script that creates environments in a row must not leave a slot in each for long.
    daemon.create("nx")
    wait_for(lambda: slots(daemon, "nx"), 5, 0.05, "a slot made with the environment")
    t0 = time.monotonic()
    wait_for(lambda: slots(daemon, "nx") == [], 10, 0.1, "the unused slot gone")
    assert time.monotonic() - t0 < 5
    # let go without the daemon waiting for it, and reaped once gone: no zombie stays
    wait_for(lambda: not [p for p, _, st in children_of(daemon.pid) if st == "Z"], 5, 0.05,
             "no zombie left")
    assert daemon.sh("nx", "echo hi") == "hi\n"
    wait_for(lambda: slots(daemon, "nx"), 5, 0.05, "a slot again, made by the exec")


def test_execs_at_the_same_time_get_slots_of_their_own_up_to_four(daemon):
    # A background server keeps its slot busy for as long as it runs: the execs that follow
    # get a slot of their own instead of the slow way, and reuse it.
    daemon.create("par", "--computer")
    first = wait_for(lambda: slots(daemon, "par"), 5, 0.05, "a slot")
    pid1 = confinement(daemon, "par", 1)
    r = daemon.api("POST", "/v1/envs/par/exec", {"cmd": ["sleep", "60"], "detach": True})
    assert r.status == 201, r
    assert daemon.exec("par", ["true"])["exit_code"] == 0
    two = wait_for(lambda: len(slots(daemon, "par")) == 2 and slots(daemon, "par"), 5, 0.05,
                   "a second slot")
    for _ in range(3):
        assert daemon.exec("par", ["true"])["exit_code"] == 0
    assert sorted(slots(daemon, "par")) == sorted(two), "a new slot for every exec"
    # Four commands at once fill four slots; a fifth exec gets a slot for itself only, as
    # confined, which goes once its command runs.
    sleepers = [threading.Thread(target=daemon.exec, args=("par", ["sleep", "2"]))
                for _ in range(3)]
    for t in sleepers:
        t.start()
    try:
        wait_for(lambda: len(slots(daemon, "par")) == 4, 5, 0.05, "four slots")
        assert confinement(daemon, "par", "self") == pid1
        wait_for(lambda: len(slots(daemon, "par")) == 4, 5, 0.05, "the fifth's slot gone")
    finally:
        for t in sleepers:
            t.join()
    # Then one free slot stays besides the background server's: the others would hold
    # processes of the environment's pids limit for nothing.
    wait_for(lambda: len(slots(daemon, "par")) == 2, 5, 0.05, "two slots again")
    assert set(first) <= set(slots(daemon, "par"))


def test_one_slot_serves_the_execs_that_follow_and_carries_nothing_over(daemon):
    daemon.create("ser")
    daemon.sh("ser", "true")
    pid = wait_for(lambda: slots(daemon, "ser"), 5, 0.05, "a slot")[0]
    # a long environment, a user, a working directory, a failing and an unknown command: each
    # spawned by the same slot, which survives them all
    big = {"LEFTOVER_%d" % i: "x" * 50 for i in range(200)}
    res = daemon.exec("ser", "env | grep -c LEFTOVER_", env=big, user="1000", cwd="/tmp")
    assert res["exit_code"] == 0 and res["stdout"] == "200\n", res
    assert daemon.exec("ser", ["no-such-command"])["exit_code"] == 127
    assert daemon.exec("ser", "exit 3")["exit_code"] == 3
    assert daemon.exec("ser", "true", user="nobody-here")["exit_code"] == 126
    wait_for(lambda: slots(daemon, "ser") == [pid], 5, 0.05, "the same slot, free again")
    res = daemon.exec("ser", "env; id -u; pwd")
    assert res["exit_code"] == 0, res
    assert "LEFTOVER_" not in res["stdout"], res["stdout"]
    assert res["stdout"].endswith("\n0\n/workspace\n"), res["stdout"]
    assert "HOME=/root\n" in res["stdout"], res["stdout"]
    # the command is looked up in the PATH the exec gives, not in the daemon's
    daemon.sh("ser", "mkdir -p /tmp/own && printf '#!/bin/sh\\necho own\\n' > /tmp/own/mine "
                     "&& chmod +x /tmp/own/mine")
    res = daemon.exec("ser", ["mine"], env={"PATH": "/tmp/own:/bin"})
    assert res["exit_code"] == 0 and res["stdout"] == "own\n", res
    assert daemon.exec("ser", ["mine"])["exit_code"] == 127
    assert slots(daemon, "ser") == [pid]


def test_the_slot_cannot_be_seen_or_signalled_from_inside(daemon):
    daemon.create("pc", "--computer")
    # a process that, once the slot waits, lists every process it can see and signals every
    # one it may (its own exec's group stays busy, so it never becomes the slot)
    daemon.sh("pc", "(sleep 1.5; cat /proc/[0-9]*/comm > /root/seen 2>/dev/null; "
                    "kill -9 -1 2>/dev/null) >/dev/null 2>&1 </dev/null &")
    daemon.sh("pc", "true")  # its group becomes the slot
    pid = wait_for(lambda: slots(daemon, "pc"), 5, 0.05, "a slot")[0]
    # host root, not dumpable: the environment's root cannot trace it either
    st = open("/proc/%d/status" % pid).read()
    assert "\nUid:\t0\t0\t0\t0\n" in st, st
    time.sleep(2.5)
    assert os.path.exists("/proc/%d" % pid), "the slot was killed from inside"
    assert slots(daemon, "pc") == [pid]
    seen = daemon.sh("pc", "cat /root/seen")
    assert seen and "paddockd" not in seen, seen
    # and the next exec still works, through that slot
    assert daemon.sh("pc", "echo ok") == "ok\n"


def test_a_timeout_kills_its_own_tree_and_not_an_earlier_background_process(daemon):
    daemon.create("t", "--computer")
    # a background process that outlives its exec keeps that exec's group busy: the group must
    # not become a slot, or the next exec's timeout would kill it
    daemon.sh("t", "sleep 300 >/dev/null 2>&1 </dev/null & echo started")
    time.sleep(0.3)
    daemon.sh("t", "true")  # this one's group may become the slot
    wait_for(lambda: slots(daemon, "t"), 5, 0.05, "a slot")
    res = daemon.exec("t", "sleep 100 & sleep 100", timeout=2)
    assert res["timed_out"] is True, res
    ps = daemon.sh("t", "ps -o args")
    assert "sleep 100" not in ps, ps
    assert "sleep 300" in ps, ps


def test_slots_go_with_a_stop_and_come_back_after_a_start(daemon):
    daemon.create("st", "--computer")
    daemon.sh("st", "true")
    pid = wait_for(lambda: slots(daemon, "st"), 5, 0.05, "a slot")[0]
    daemon.cli("stop", "st")
    assert not os.path.exists("/proc/%d" % pid) or slots(daemon, "st") == []
    daemon.cli("start", "st")
    assert daemon.sh("st", "echo again") == "again\n"
    assert daemon.sh("st", "echo and again") == "and again\n"


def test_a_stop_watches_its_slots_end_and_does_not_wait_for_it(daemon):
    """Once PID 1 has ended, its exec slots (outside its pid namespace) are killed and the stop
    is finished when they are gone, watched from the loop: the last of them to exit tears down
    what is left of the environment's namespaces. A slot held by the v1 freezer (from outside,
    in a group of the test's own below the environment's) keeps the environment "stopping"
    while the daemon serves others and refuses execs into it; thawed, it dies and the stop is
    finished."""
    daemon.create("held", "--computer")
    daemon.create("other")
    pid1 = daemon.inspect("held")["pid"]
    daemon.sh("held", "true")
    slot = wait_for(lambda: slots(daemon, "held"), 5, 0.05, "a slot")[0]
    freezer = [d for d in daemon.cgroup_dirs("held") if "/freezer/" in d]
    if not freezer:
        pytest.skip("needs the cgroup v1 freezer: a cgroup v2 freeze lets SIGKILL through")
    hold = os.path.join(freezer[0], "hold")
    os.mkdir(hold)
    with open(os.path.join(hold, "cgroup.procs"), "w") as f:
        f.write(str(slot))
    state = os.path.join(hold, "freezer.state")
    with open(state, "w") as f:
        f.write("FROZEN")
    box = {}
    stop = threading.Thread(target=lambda: box.update(
        r=daemon.api("POST", "/v1/envs/held/stop?timeout=0s", timeout=60)))
    try:
        stop.start()
        wait_for(lambda: not pid_alive(pid1), 10, 0.05, "PID 1 to end")
        time.sleep(0.3)
        assert daemon.inspect("held")["state"] == "stopping"
        assert daemon.sh("other", "echo served") == "served\n"  # the loop is not waiting
        r = daemon.api("POST", "/v1/envs/held/exec", {"cmd": ["true"]})
        assert r.status == 409 and "held is stopping" in r.json["error"]["message"], r
        assert stop.is_alive() and pid_alive(slot)
    finally:
        daemon.thaw_from_outside(state)
    stop.join(30)
    assert box["r"].status == 200 and box["r"].json["state"] == "stopped", box
    assert not pid_alive(slot) and slots(daemon, "held") == []
    assert daemon.cgroup_dirs("held") == []
    daemon.cli("start", "held")
    assert daemon.sh("held", "echo again") == "again\n"


def test_an_exec_into_an_environment_starved_of_cpu_holds_up_only_its_caller(daemon):
    """The command's slot runs in the environment's cgroup: an environment with a 1% CPU limit
    and every thread busy gives it almost no CPU, and its answer can take seconds. The daemon
    does not wait for it: other clients are answered meanwhile (each well within 2 s, where a
    wait held them for 8 s and more), and the exec goes on when the slot answers, or ends when
    its environment does, leaving no process behind."""
    daemon.create("other")
    starved(daemon, "starved")
    box = {}
    ex = threading.Thread(target=lambda: box.update(
        r=daemon.api("POST", "/v1/envs/starved/exec", {"cmd": ["true"]}, timeout=120)))
    ex.start()
    try:
        time.sleep(0.2)
        worst = longest_wait(daemon)
        assert worst < 2, worst
        assert ex.is_alive(), box  # the starved exec was still under way all along
        assert daemon.sh("other", "echo served") == "served\n"
    finally:
        daemon.cli("rm", "-f", "starved")
    ex.join(60)
    assert not ex.is_alive() and box["r"].status == 200, box
    wait_for(lambda: not slots(daemon, "starved") and
             not [p for p, _, st in children_of(daemon.pid) if st == "Z"], 10, 0.1,
             "nothing of the exec left behind")


def test_an_exec_for_which_no_slot_can_be_made_fails_at_once(daemon):
    # Every exec runs through a slot; when none can be made (here a test hook: as when the
    # daemon is out of fds) the exec fails with 503 and the reason, and nothing is left over.
    daemon.extra_env["PADDOCK_TEST_NO_SLOT"] = "1"
    daemon.restart()
    daemon.create("noslot")
    # the slot that came with PID 1 runs a command that leaves a process behind, and so is
    # used up: the next exec needs a new one
    daemon.sh("noslot", "sleep 100 >/dev/null 2>&1 &")
    r = daemon.api("POST", "/v1/envs/noslot/exec", {"cmd": ["true"]})
    assert r.status == 503 and r.json["error"]["code"] == "unavailable", r
    assert "no process could be made in noslot" in r.json["error"]["message"], r
    p = daemon.cli("exec", "noslot", "--", "true", check=False)
    assert p.returncode != 0 and "no process could be made in noslot" in p.err, p
    assert not slots(daemon, "noslot")
    assert daemon.api("GET", "/v1/envs/noslot").status == 200


BIG_ARGS = ["%03d" % i + "x" * 99996 for i in range(12)]  # 1.2 MB: far past one slot message
BIG_ENV = {"BIG%d" % i: "y" * 30000 for i in range(4)}  # 32 KiB each at most


@pytest.mark.parametrize("kind", ["sandbox", "computer"])
def test_a_command_too_big_for_one_message_runs_intact_and_confined(daemon, kind):
    """Argv and environment over the ~96 KiB one slot message holds go to the slot in a sealed
    memfd: every byte arrives, and the command is confined exactly like PID 1."""
    daemon.create("big", "--" + kind)
    script = 'printf "%s\n" "$#" "${#BIG0}${#BIG3}"; printf %s "$@" | md5sum; grep -E "^(' + \
        "|".join(CONFINEMENT) + '):" /proc/self/status'
    res = daemon.exec("big", ["sh", "-c", script, "sh"] + BIG_ARGS, env=BIG_ENV)
    assert res["exit_code"] == 0, res["stderr"]
    lines = res["stdout"].splitlines()
    import hashlib
    assert lines[:2] == ["12", "3000030000"], lines[:2]
    assert lines[2].split()[0] == hashlib.md5("".join(BIG_ARGS).encode()).hexdigest()
    got = {k: v.strip() for k, _, v in (l.partition(":") for l in lines[3:])}
    assert got == confinement(daemon, "big", 1)
    # beyond what execve takes (a quarter of the stack limit): the command's own error
    res = daemon.exec("big", ["true"] + ["z" * 100000] * 60)
    assert res["exit_code"] == 126 and "too long" in res["stderr"], res


def test_oversized_environments_and_commands_are_refused_with_413(daemon):
    # Every process's execve carries the environment's variables, PID 1's too: more than the
    # kernel takes failed the create with 500; at most 1 MiB is accepted.
    env = {"V%03d" % i: "v" * 32000 for i in range(40)}  # 1.28 MB
    r = daemon.api("POST", "/v1/envs", {"name": "huge", "kind": "sandbox", "image": "base",
                                        "env": env})
    assert r.status == 413 and "at most 1048576" in r.json["error"]["message"], r
    env = {"V%03d" % i: "v" * 32000 for i in range(32)}  # 1.02 MB
    r = daemon.api("POST", "/v1/envs", {"name": "huge", "kind": "sandbox", "image": "base",
                                        "env": env})
    assert r.status == 201, r
    assert daemon.sh("huge", 'printf %s "${#V000}"') == "32000"
    # Those and the request's arguments together over 8 MiB: no execve takes that much, and
    # no helper is made to find it out.
    r = daemon.api("POST", "/v1/envs/huge/exec", {"cmd": ["true"] + ["a" * 100000] * 82},
                   timeout=60)
    assert r.status == 413 and "exceed 8 MiB" in r.json["error"]["message"], r


def test_a_big_command_into_a_starved_environment_holds_up_only_its_caller(daemon):
    """A command too big for one slot message took a helper the daemon waited for inside the
    environment's cgroup (CLONE_VFORK): a starved environment held every other client for
    seconds. It goes to the slot in a memfd now, and nothing waits for it. Such a command is
    the daemon's memory until it runs, so an environment that holds them back gets two at a
    time: a third is refused (503) until they run."""
    starved(daemon, "starved")
    done = []
    big = {"cmd": ["true"] + BIG_ARGS}
    ex = [threading.Thread(target=lambda: done.append(
        daemon.api("POST", "/v1/envs/starved/exec", big, timeout=120))) for _ in range(2)]
    for t in ex:
        t.start()
    try:
        time.sleep(0.5)
        r = daemon.api("POST", "/v1/envs/starved/exec", big, timeout=30)
        assert r.status == 503 and "still starting" in r.json["error"]["message"], r
        worst = longest_wait(daemon)
        assert worst < 2, worst
    finally:
        daemon.cli("rm", "-f", "starved")
    for t in ex:
        t.join(60)
    assert len(done) == 2 and all(r.status == 200 for r in done), done
    wait_for(lambda: not [p for p, _, st in children_of(daemon.pid) if st == "Z"], 10, 0.1,
             "no zombie left")


def test_an_environment_that_stops_every_new_process_cannot_stall_the_daemon(daemon):
    """An exec's command is in the environment's pid namespace from its clone on, and until
    its execve it runs our code on memory it may share with its spawner: an environment that
    stops it there (SIGSTOP cannot be blocked) must only hold up that exec, never the daemon."""
    daemon.create("hostile", "--computer")
    daemon.create("calm")
    stopper = ("while :; do for p in /proc/[0-9]*; do p=${p#/proc/}; "
               "[ \"$p\" = 1 ] || [ \"$p\" = $$ ] || kill -STOP \"$p\" 2>/dev/null; done; done")
    daemon.sh("hostile", "sh -c '%s' >/dev/null 2>&1 </dev/null &" % stopper.replace("'", "'\\''"))
    results, errors = [], []

    def execs():
        try:
            for _ in range(12):
                r = daemon.api("POST", "/v1/envs/hostile/exec", {"cmd": ["true"], "timeout": 1},
                               timeout=60)
                results.append(r.status)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    import threading
    t = threading.Thread(target=execs)
    t.start()
    worst = 0.0
    while t.is_alive():
        t0 = time.monotonic()
        r = daemon.api("GET", "/v1/envs/calm", timeout=60)
        worst = max(worst, time.monotonic() - t0)
        assert r.status == 200, r
        time.sleep(0.02)
    t.join()
    assert not errors, errors
    assert results and all(s == 200 for s in results), results
    # a stalled daemon answers nothing for seconds (or at all); a busy one within a fraction
    assert worst < 3, "the daemon stalled for %.1f s" % worst
    assert daemon.sh("calm", "echo fine") == "fine\n"
