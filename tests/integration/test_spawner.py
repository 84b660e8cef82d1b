"""PID 1s are cloned by the daemon's spawn process (paddockd-spawn, src/daemon/spawner.h), a
small copy of the daemon made at start-up, so that the clone and its copy-on-write faults stay
out of the daemon. PID 1 is still the daemon's child; a spawn process that is stuck or killed
costs nothing but speed: the daemon clones in its loop again."""
import os
import signal
import time

from conftest import children_of, wait_for
from test_create_async import create_in_thread, started
from test_exec_slots import slots


def spawner_of(daemon):
    pids = [p for p, comm, _ in children_of(daemon.pid) if comm == "paddockd-spawn"]
    assert len(pids) == 1, children_of(daemon.pid)
    return pids[0]


def parent_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    return int(st[st.rindex(")") + 2:].split()[1])


def test_pid1_comes_from_the_spawn_process_and_is_the_daemons_child(daemon):
    spawner = spawner_of(daemon)
    # Held: a create waits for it (the spawn process, not the loop, clones PID 1) ...
    os.kill(spawner, signal.SIGSTOP)
    try:
        t, box = create_in_thread(daemon, {"name": "held"})
        time.sleep(1)
        assert t.is_alive() and "r" not in box, box
        # ... and the daemon serves others meanwhile.
        assert daemon.api("GET", "/v1/system", timeout=5).status == 200
    finally:
        os.kill(spawner, signal.SIGCONT)
    t.join(30)
    assert box["r"].status == 201, box
    pid = daemon.inspect("held")["pid"]
    assert parent_of(pid) == daemon.pid
    assert daemon.sh("held", "echo ok") == "ok\n"
    assert spawner_of(daemon) == spawner  # the same process goes on serving
    daemon.cli("rm", "-f", "held")
    assert daemon.cgroup_dirs("held") == []


def test_a_creates_exec_slot_comes_with_pid_1_and_the_loop_never_waits_for_it(daemon):
    """The spawn process makes a new PID 1's first exec slot right after PID 1 and answers with
    both: the loop asks once and never sits waiting for the slot's clone (its cgroup join can
    wait for the kernel's cgroup lock). Here the slot is held back 1.5 s: the daemon answers
    others meanwhile, the create still gets its slot, and the spawn process is not taken for
    stuck (the loop would kill it after waiting 1 s for an answer)."""
    daemon.extra_env["PADDOCK_TEST_SLOT_DELAY_MS"] = "1500"
    daemon.restart()
    spawner = spawner_of(daemon)
    t, box = create_in_thread(daemon, {"name": "held"})
    # PID 1 is cloned before the slot, and the answer waits for both
    wait_for(lambda: started(daemon, "held"), 10, 0.02, "the create's PID 1")
    answered = [daemon.api("GET", "/v1/system", timeout=5).status for _ in range(3)]
    assert t.is_alive(), box  # the create still waits for the spawn process ...
    assert answered == [200] * 3  # ... and others were answered meanwhile
    t.join(30)
    assert box["r"].status == 201, box
    assert "did not answer" not in daemon.log()
    assert spawner_of(daemon) == spawner
    first = slots(daemon, "held")  # listed with the create's answer, no wait
    assert len(first) == 1, children_of(daemon.pid)
    assert daemon.exec("held", ["true"])["exit_code"] == 0
    assert slots(daemon, "held") == first  # the first command ran in it
    daemon.cli("rm", "-f", "held")
    wait_for(lambda: not [p for p, comm, _ in children_of(daemon.pid) if comm == "paddockd"],
             10, 0.05, "the slot gone with its environment")


def test_a_killed_spawn_process_leaves_creates_to_the_loop(daemon):
    spawner = spawner_of(daemon)
    os.kill(spawner, signal.SIGKILL)  # the daemon's child, started for this test
    wait_for(lambda: "spawn process (pid %d) is gone" % spawner in daemon.log(), 10,
             what="the daemon to notice")
    assert [p for p, comm, _ in children_of(daemon.pid) if p == spawner] == []  # reaped
    daemon.create("after")
    assert daemon.sh("after", "echo ok") == "ok\n"
    assert parent_of(daemon.inspect("after")["pid"]) == daemon.pid


def test_a_stuck_spawn_process_is_replaced_by_the_loop(daemon):
    spawner = spawner_of(daemon)
    os.kill(spawner, signal.SIGSTOP)
    t0 = time.monotonic()
    t, box = create_in_thread(daemon, {"name": "late"})
    t.join(30)
    # Its watchdog (5 s) killed it; the create was cloned in the loop instead.
    assert box["r"].status == 201, box
    assert time.monotonic() - t0 >= 4
    assert "did not answer" in daemon.log()
    assert [p for p, comm, _ in children_of(daemon.pid) if p == spawner] == []
    assert daemon.sh("late", "echo ok") == "ok\n"


def test_a_delete_while_a_starts_clone_is_asked_leaves_nothing(daemon):
    """A create in progress is not listed (a delete cannot name it), but a start is: its delete
    overtakes it while the spawn process has not answered; the daemon waits a moment for the
    answer, then takes the process for stuck and goes on without it."""
    import threading
    daemon.create("st", "--computer")
    daemon.cli("stop", "st", "--timeout", "0")
    spawner = spawner_of(daemon)
    os.kill(spawner, signal.SIGSTOP)
    box = {}
    t = threading.Thread(target=lambda: box.update(
        r=daemon.api("POST", "/v1/envs/st/start", timeout=60)))
    try:
        t.start()
        wait_for(lambda: daemon.inspect("st")["state"] == "starting", 10, 0.02, "the start")
        time.sleep(0.2)  # its checks, then the clone asked, each a turn
        assert daemon.inspect("st")["state"] == "starting"
        # the spawn process makes the cgroups with the clone, not the loop
        assert daemon.cgroup_dirs("st") == []
        r = daemon.api("DELETE", "/v1/envs/st?force=1", timeout=30)
        assert r.status in (200, 204), r
    finally:
        try:
            os.kill(spawner, signal.SIGCONT)
        except ProcessLookupError:
            pass
    t.join(30)
    assert box["r"].status >= 400, box
    assert "did not answer in 1000 ms" in daemon.log()  # it waited for the clone's answer
    assert "st" not in daemon.envs()
    assert daemon.cgroup_dirs("st") == []
    assert not os.path.exists(daemon.env_dir("st"))
    # no setup child of it is left behind
    assert all(comm != "paddockd" for p, comm, _ in children_of(daemon.pid)), \
        children_of(daemon.pid)
    daemon.create("st")
    assert daemon.sh("st", "echo ok") == "ok\n"


def test_a_create_waiting_for_the_spawn_process_at_shutdown_leaves_nothing(daemon):
    spawner = spawner_of(daemon)
    os.kill(spawner, signal.SIGSTOP)
    try:
        t, box = create_in_thread(daemon, {"name": "cut"})
        time.sleep(0.5)
        daemon.stop()
    finally:
        try:
            os.kill(spawner, signal.SIGCONT)
        except ProcessLookupError:
            pass
    t.join(60)
    assert "error" in box or box["r"].status >= 500, box
    assert daemon.proc.returncode == 0, open(daemon.logpath).read()[-2000:]
    assert "did not answer in 1000 ms" in daemon.log()
    daemon.start()
    assert "cut" not in daemon.envs()
    assert daemon.cgroup_dirs("cut") == []
    daemon.create("after")
    assert daemon.sh("after", "echo ok") == "ok\n"
