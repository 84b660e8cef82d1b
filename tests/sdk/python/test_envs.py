"""The Python SDK against a real paddockd on its unix socket: environments, exec, background
processes, lifecycle, storage, network policy, limits."""
import os
import threading
import time

import pytest

import paddock


def test_create_get_list_and_destroy(client, name):
    env = client.envs.create(name, kind="sandbox", labels={"team": "a", "job": "1"},
                             env={"GREETING": "hi"}, memory="256M", pids=64, ttl="10m")
    assert env.name == name and env.kind == "sandbox" and env.state == "running"
    assert env.limits["memory"] == 256 << 20 and env.limits["pids"] == 64
    assert env.data["ttl"] == 600 and env.labels == {"team": "a", "job": "1"}
    assert env.exec("echo $GREETING").text == "hi\n"
    other = client.envs.create(name + "-b", labels={"team": "b"})
    assert client.envs.get(name).data["created_at"] == env.data["created_at"]
    assert {e.name for e in client.envs.list()} == {name, name + "-b"}
    assert [e.name for e in client.envs.list(label={"team": "a"})] == [name]
    assert [e.name for e in client.envs.list(label=["team=a", "job=1"])] == [name]
    assert client.envs.list(label="team=c") == []
    assert name in client.envs and "nope" not in client.envs
    env.destroy()
    other.destroy()
    with pytest.raises(paddock.NotFound) as ei:
        client.envs.get(name)
    assert ei.value.status == 404 and ei.value.code == "not_found"
    assert name in ei.value.message
    assert client.envs.list() == []


def test_context_manager_destroys_on_exit_also_after_an_error(client, name):
    with client.envs.create(name) as env:
        assert env.exec(["true"]).exit_code == 0
    assert name not in client.envs
    with pytest.raises(RuntimeError):
        with client.envs.create(name) as env:
            raise RuntimeError("boom")
    assert name not in client.envs


def test_default_name_and_computer_defaults(client):
    env = client.envs.create(kind="computer")
    try:
        assert env.name.startswith("sdk-") and env.kind == "computer"
        assert env.data["ttl"] is None and env.limits["pids"] == 4096
    finally:
        env.destroy()


def test_exec_output_exit_code_env_cwd_user(sandbox):
    r = sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.stdout, r.stderr, r.exit_code) == (b"out\n", b"err\n", 3)
    assert not r.ok and r.text == "out\n" and r.stderr_text == "err\n"
    assert r.duration_ms is not None and r.timed_out is False
    with pytest.raises(paddock.CommandFailed):
        r.check()
    assert sandbox.exec("echo $A-$B", env={"A": 1, "B": "two"}).text == "1-two\n"
    assert sandbox.exec("pwd", cwd="/tmp").text == "/tmp\n"
    assert sandbox.exec("id -u; id -g", user="1000:1000").text == "1000\n1000\n"
    assert sandbox.exec("id -un", user="user").text == "user\n"
    assert sandbox.exec(["nonexistent-cmd"]).exit_code == 127
    assert sandbox.exec("kill -9 $$").exit_code == 128 + 9


def test_exec_stdin_text_binary_and_large(sandbox):
    assert sandbox.exec("cat", stdin="hello\n").stdout == b"hello\n"
    blob = bytes(range(256)) * 4
    r = sandbox.exec("cat", stdin=blob)
    assert r.stdout == blob  # not UTF-8: came back base64 and was decoded
    big = os.urandom(3 << 20)  # more than the inline limit: the raw request body
    r = sandbox.exec("cat > /tmp/big; wc -c < /tmp/big; md5sum /tmp/big | cut -c1-32", stdin=big)
    import hashlib
    assert r.stdout.split() == [str(len(big)).encode(), hashlib.md5(big).hexdigest().encode()]
    path = os.path.join("/var/tmp", "paddock-sdk-stdin-%d" % os.getpid())
    try:
        with open(path, "wb") as f:
            f.write(big)
        with open(path, "rb") as f:
            assert sandbox.exec("wc -c", stdin=f).text.strip() == str(len(big))
    finally:
        os.unlink(path)


def test_exec_timeout_raises_with_the_output_so_far(sandbox):
    t0 = time.monotonic()
    with pytest.raises(paddock.CommandTimeout) as ei:
        sandbox.exec("echo started; sleep 30", timeout=1)
    assert time.monotonic() - t0 < 15
    assert ei.value.result.timed_out and ei.value.result.stdout == b"started\n"
    assert isinstance(ei.value, paddock.PaddockError)
    # the process tree is gone
    assert "sleep 30" not in sandbox.exec("ps -o args").text
    with pytest.raises(paddock.CommandTimeout):
        sandbox.exec("sleep 30", timeout="1s", on_stdout=lambda b: None)


def test_exec_max_output_truncates(sandbox):
    r = sandbox.exec("head -c 100000 /dev/zero | tr '\\0' x", max_output="1K")
    assert r.truncated and 0 < len(r.stdout) <= 1024


def test_exec_stream_iterator_and_callbacks(sandbox):
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.2; done; exit 5"
    chunks = []
    t0 = time.monotonic()
    first_at = None
    with sandbox.exec_stream(script) as s:
        for which, data in s:
            if first_at is None:
                first_at = time.monotonic() - t0
            chunks.append((which, data))
    assert s.result.exit_code == 5 and not s.result.timed_out
    assert first_at < 0.5, "the first output arrives before the command ends"
    out = b"".join(d for w, d in chunks if w == "stdout")
    err = b"".join(d for w, d in chunks if w == "stderr")
    assert (out, err) == (b"out1\nout2\nout3\n", b"err1\nerr2\nerr3\n")

    got_out, got_err = [], []
    r = sandbox.exec(script, on_stdout=got_out.append, on_stderr=got_err.append)
    assert r.exit_code == 5 and r.stdout == out and r.stderr == err
    assert b"".join(got_out) == out and b"".join(got_err) == err and len(got_out) >= 2

    # binary output through the stream
    with sandbox.exec_stream("printf '\\377\\376'", stdin=None) as s:
        data = b"".join(d for _, d in s)
    assert data == b"\xff\xfe" and s.result.exit_code == 0


def test_exec_stream_closed_early_stops_reading(sandbox):
    s = sandbox.exec_stream("while true; do echo y; sleep 0.05; done")
    which, data = next(s)
    assert which == "stdout" and data.startswith(b"y")
    s.close()
    # the client is still usable
    assert sandbox.exec("echo ok").text == "ok\n"


def test_background_processes(sandbox):
    p = sandbox.procs.start("echo begin; echo warn >&2; sleep 30; echo never")
    assert p.running and p.id >= 1 and "sleep 30" in p.cmd
    q = sandbox.procs.start(["sh", "-c", "echo quick; exit 4"])
    assert q.wait(timeout=30).exit_code == 4
    assert [x.id for x in sandbox.procs.list()] == [p.id, q.id]
    logs = sandbox.procs.logs(q.id)
    assert logs.stdout == b"quick\n" and logs.exit_code == 4

    def has_begin():
        return sandbox.procs.logs(p.id).stdout == b"begin\n"
    deadline = time.monotonic() + 10
    while not has_begin():
        assert time.monotonic() < deadline, sandbox.procs.logs(p.id)
        time.sleep(0.05)
    running = p.logs()
    assert running.exit_code is None and running.stderr == b"warn\n"
    with pytest.raises(paddock.Conflict):
        p.remove()  # still running
    p.kill("TERM")
    r = p.wait(timeout=30)
    assert r.exit_code == 128 + 15
    assert p.refresh().state == "exited" and p.exit_code == 128 + 15
    p.remove()
    assert [x.id for x in sandbox.procs.list()] == [q.id]
    with pytest.raises(paddock.NotFound):
        sandbox.procs.get(p.id)
    with pytest.raises(paddock.NotFound):
        sandbox.procs.kill(9999)


def test_process_output_follow_streams_live(sandbox):
    p = sandbox.procs.start("for i in 1 2 3; do echo line$i; sleep 0.3; done",
                            env={"X": "1"}, cwd="/tmp")
    seen = []
    with p.stream(follow=True) as s:
        for which, data in s:
            seen.append(data)
    assert b"".join(seen) == b"line1\nline2\nline3\n" and len(seen) >= 2
    assert s.result.exit_code == 0


def test_lifecycle_stop_start_restart_pause_resume(client, name):
    env = client.envs.create(name, kind="computer")
    env.exec("echo kept > /root/f")
    assert env.stop(timeout=5).state == "stopped"
    with pytest.raises(paddock.Conflict):
        env.exec("true")
    assert env.start().state == "running"
    assert env.files.read("/root/f") == b"kept\n"
    assert env.restart(timeout="2s").state == "running"
    assert env.pause().state == "paused"
    with pytest.raises(paddock.Conflict) as ei:
        env.exec("true")
    assert ei.value.code == "conflict"
    assert env.resume().state == "running"
    assert env.refresh().state == "running"
    env.destroy()
    assert env.state == "deleted"
    with pytest.raises(paddock.NotFound):
        env.refresh()


def test_update_limits(sandbox):
    e = sandbox.update(cpus=0.5, memory="128M", pids=100, ttl=3600)
    assert e.limits["cpus"] == 0.5 and e.limits["memory"] == 128 << 20
    assert e.limits["pids"] == 100 and e.data["ttl"] == 3600
    e = sandbox.update(memory=None)  # None removes a limit; others keep their value
    assert e.limits["memory"] is None and e.limits["cpus"] == 0.5
    with pytest.raises(paddock.InvalidArgument) as ei:
        sandbox.update(cpus="lots")
    assert "cpus" in ei.value.message


def test_network_policy(client, name, sdk_daemon):
    env = client.envs.create(name, kind="computer", network="none")
    assert env.network_policy["mode"] == "none"
    env.network(allow=["Example.COM:443", "10.1.2.3/8"])
    assert env.network_policy["mode"] == "allow"
    assert env.network_policy["allow"] == ["example.com:443", "10.0.0.0/8"]
    env.network(links=["peer"], bandwidth={"egress": "10mbit"})
    n = env.refresh().network_policy
    assert n["allow"] == ["example.com:443", "10.0.0.0/8"] and n["links"] == ["peer"]
    assert n["bandwidth"]["egress"] == 10_000_000
    env.network(mode="open", allow=[])
    assert env.network_policy["mode"] == "open" and env.network_policy["allow"] == []
    with pytest.raises(paddock.InvalidArgument):
        env.network(mode="sometimes")
    e2 = client.envs.create(name + "-2", kind="computer", network="allow",
                            allow=["example.org"], links=[name])
    assert e2.network_policy["allow"] == ["example.org"] and e2.network_policy["links"] == [name]


def test_snapshots_restore_and_fork(client, name):
    env = client.envs.create(name, kind="computer", labels={"role": "base"})
    env.exec("echo one > /root/state")
    s1 = env.snapshot("one")
    assert s1.name == "one" and s1.created_at
    auto = env.snapshot()
    assert auto.name.startswith("snap-")
    assert sorted(s.name for s in env.snapshots()) == sorted(["one", auto.name])
    with pytest.raises(paddock.Conflict):
        env.snapshot("one")
    env.exec("echo two > /root/state")

    child = env.fork(name + "-fork")
    assert child.state == "running" and child.labels == {"role": "base"}
    assert child.exec("cat /root/state").text == "two\n"
    old = env.fork(name + "-old", snapshot="one")
    assert old.exec("cat /root/state").text == "one\n"
    child.exec("echo mine > /root/state")
    assert env.exec("cat /root/state").text == "two\n", "a fork is a copy"

    with pytest.raises(paddock.Conflict):
        env.restore("one")  # running
    env.stop(timeout=0)
    assert env.restore(s1.name).state == "stopped"
    env.start()
    assert env.exec("cat /root/state").text == "one\n"
    env.delete_snapshot(auto.name)
    assert [s.name for s in env.snapshots()] == ["one"]
    with pytest.raises(paddock.NotFound):
        env.restore("nope")


def test_sandbox_snapshot_is_unprocessable(sandbox):
    with pytest.raises(paddock.Unprocessable) as ei:
        sandbox.snapshot("x")
    assert ei.value.status == 422 and "sandbox" in ei.value.message


def test_threads_share_one_client(client, sandbox):
    results, failures = {}, []

    def worker(i):
        try:
            for j in range(10):
                r = sandbox.exec(["echo", "%d-%d" % (i, j)])
                results[(i, j)] = r.text
        except Exception as ex:  # reported below
            failures.append(ex)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not failures
    assert results == {(i, j): "%d-%d\n" % (i, j) for i in range(6) for j in range(10)}


def test_system_and_images(client):
    s = client.system()
    assert s["version"] and s["storage_driver"] in ("btrfs", "dir")
    assert "base" in [i["name"] for i in client.images()]
