"""Files (read, write, list, stat, remove, mkdir, move, upload/download of directories,
watch) and terminal sessions through the Python SDK."""
import os
import shutil
import tempfile
import threading
import time

import pytest

import paddock


@pytest.fixture
def tmpdir_host():
    d = tempfile.mkdtemp(prefix="paddock-sdk-files-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_write_read_stat_list_mkdir_move_remove(sandbox):
    f = sandbox.files
    r = f.write("/workspace/a/b/hello.txt", "hello\n", mode=0o600)
    assert r == {"path": "/workspace/a/b/hello.txt", "size": 6}
    assert f.read("/workspace/a/b/hello.txt") == b"hello\n"
    assert f.read_text("/workspace/a/b/hello.txt") == "hello\n"
    st = f.stat("/workspace/a/b/hello.txt")
    assert st.type == "file" and st.is_file and st.size == 6 and st.mode == 0o600
    assert st.uid == 0 and st.mtime
    assert sandbox.exec("cat /workspace/a/b/hello.txt").text == "hello\n"

    blob = os.urandom(200000)
    f.write("/workspace/bin.dat", blob)
    assert f.read("/workspace/bin.dat") == blob
    with pytest.raises(paddock.TooLarge):
        f.read("/workspace/bin.dat", max="100")

    f.mkdir("/workspace/x/y/z", mode=0o750)
    assert f.stat("/workspace/x/y/z").is_dir and f.stat("/workspace/x/y/z").mode == 0o750
    with pytest.raises(paddock.NotFound):
        f.mkdir("/workspace/no/such", parents=False)
    f.mkdir("/workspace/owned", user="user")
    assert f.stat("/workspace/owned").uid == 1000
    f.write("/workspace/owned/u.txt", b"x", user="1000")
    assert sandbox.exec("stat -c %u /workspace/owned/u.txt").text == "1000\n"

    names = [(e.name, e.type) for e in f.list("/workspace")]
    assert names == [("a", "dir"), ("bin.dat", "file"), ("owned", "dir"), ("x", "dir")]
    assert f.list("/workspace")[1].size == 200000

    f.move("/workspace/bin.dat", "/workspace/x/moved.dat")
    assert not f.exists("/workspace/bin.dat") and f.exists("/workspace/x/moved.dat")
    f.write("/workspace/other", "o")
    with pytest.raises(paddock.PaddockError):
        f.move("/workspace/other", "/workspace/x/moved.dat")  # no overwrite
    f.move("/workspace/other", "/workspace/x/moved.dat", overwrite=True)
    assert f.read("/workspace/x/moved.dat") == b"o"

    f.remove("/workspace/a/b/hello.txt")
    assert not f.exists("/workspace/a/b/hello.txt")
    with pytest.raises(paddock.PaddockError):
        f.remove("/workspace/x")  # not empty
    f.remove("/workspace/x", recursive=True)
    assert not f.exists("/workspace/x")
    with pytest.raises(paddock.NotFound) as ei:
        f.read("/workspace/missing")
    assert ei.value.code == "not_found"
    with pytest.raises(paddock.Forbidden) as ei:
        f.write("/etc/evil", "x")  # a sandbox writes only below /tmp and /workspace
    assert ei.value.status == 403


def test_write_from_a_file_object_and_symlink_stat(sandbox, tmpdir_host):
    p = os.path.join(tmpdir_host, "src")
    with open(p, "wb") as fh:
        fh.write(b"z" * 70000)
    with open(p, "rb") as fh:
        assert sandbox.files.write("/tmp/z", fh)["size"] == 70000
    sandbox.exec("ln -s /tmp/z /tmp/link")
    st = sandbox.files.stat("/tmp/link")
    assert st.type == "symlink" and st.target == "/tmp/z"


def test_upload_download_round_trip(sandbox, tmpdir_host):
    src = os.path.join(tmpdir_host, "src")
    os.makedirs(os.path.join(src, "pkg", "deep", "er"))
    with open(os.path.join(src, "run.sh"), "w") as fh:
        fh.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(src, "run.sh"), 0o755)
    blob = os.urandom(300000)
    with open(os.path.join(src, "pkg", "deep", "er", "data.bin"), "wb") as fh:
        fh.write(blob)
    open(os.path.join(src, "pkg", "empty"), "w").close()
    os.symlink("deep/er/data.bin", os.path.join(src, "pkg", "link"))

    r = sandbox.files.upload(src, "/workspace/proj")
    assert r["path"] == "/workspace/proj" and r["entries"] >= 6
    assert sandbox.exec("/workspace/proj/run.sh").text == "ran\n"
    assert sandbox.exec("readlink /workspace/proj/pkg/link").text == "deep/er/data.bin\n"
    assert sandbox.exec("stat -c %u /workspace/proj/pkg/empty").text == "0\n"
    sandbox.exec("echo new > /workspace/proj/made-inside")

    dst = os.path.join(tmpdir_host, "dst")
    n = sandbox.files.download("/workspace/proj", dst)
    assert n >= 7
    with open(os.path.join(dst, "pkg", "deep", "er", "data.bin"), "rb") as fh:
        assert fh.read() == blob
    assert os.readlink(os.path.join(dst, "pkg", "link")) == "deep/er/data.bin"
    assert os.stat(os.path.join(dst, "run.sh")).st_mode & 0o777 == 0o755
    with open(os.path.join(dst, "made-inside")) as fh:
        assert fh.read() == "new\n"
    assert sorted(os.listdir(dst)) == ["made-inside", "pkg", "run.sh"]

    # a second download over the first replaces what is there
    sandbox.exec("echo newer > /workspace/proj/made-inside")
    sandbox.files.download("/workspace/proj", dst)
    with open(os.path.join(dst, "made-inside")) as fh:
        assert fh.read() == "newer\n"
    with pytest.raises(paddock.NotFound):
        sandbox.files.download("/workspace/none", os.path.join(tmpdir_host, "x"))
    owned = sandbox.files.upload(src, "/workspace/mine", user="user")
    assert owned["path"] == "/workspace/mine"
    assert sandbox.exec("stat -c %u /workspace/mine/run.sh").text == "1000\n"


def test_watch_sees_a_file_created(sandbox):
    sandbox.files.mkdir("/workspace/w")
    with sandbox.files.watch("/workspace/w") as w:
        sandbox.files.write("/workspace/w/new.txt", "x")
        sandbox.exec("mkdir /workspace/w/sub && touch /workspace/w/sub/inner")
        seen = []
        for ev in w:
            seen.append((ev.event, ev.path, ev.type))
            if ("create", "/workspace/w/sub/inner", "file") in seen:
                break
    paths = {p for _, p, _ in seen}
    assert ("create", "/workspace/w/sub", "dir") in seen
    assert any(p.startswith("/workspace/w/") for p in paths)
    # the atomic write shows as a file appearing under its final name
    assert "/workspace/w/new.txt" in paths, seen


def test_watch_ends_when_the_directory_goes(sandbox):
    sandbox.files.mkdir("/tmp/gone")
    w = sandbox.files.watch("/tmp/gone", recursive=False)
    sandbox.files.remove("/tmp/gone", recursive=True)
    evs = list(w)  # ends by itself
    assert evs[-1].event == "delete" and evs[-1].path == "/tmp/gone"
    with pytest.raises(paddock.NotFound):
        sandbox.files.watch("/tmp/none")


def test_pty_runs_echo_and_reports_the_exit_code(sandbox):
    with sandbox.pty(["sh", "-c", "echo hello-from-pty; exit 7"]) as t:
        assert t.wait(timeout=20) == 7
        assert b"hello-from-pty" in t.output
        assert t.close_code == 1000 and t.closed
        assert t.recv() == b""
    with sandbox.pty(["sh", "-c", "echo partial; exit 4"]) as t:
        with pytest.raises(EOFError, match=r"command exited with code 4\) before b'never'"):
            t.read_until("never", timeout=20)


def test_pty_interactive_shell_resize_and_signal(sandbox):
    t = sandbox.pty(["sh"], cols=100, rows=30)
    try:
        t.send("stty size\n")
        t.read_until("30 100")
        t.resize(132, 43)
        t.send(b"stty size\n")
        t.read_until("43 132")
        t.send("sleep 60\n")
        time.sleep(0.3)
        t.signal("INT")
        t.send("echo after-$((6*7))\n")
        t.read_until("after-42")
        t.send("tty\n")
        t.read_until("/dev/pts/")
        t.send("exit 3\n")
        assert t.wait(timeout=20) == 3
    finally:
        t.close()
    assert t.errors == []


def test_pty_login_shell_user_and_errors(client, sandbox):
    with sandbox.pty(user="user", cwd="/tmp", env={"FOO": "bar"}) as t:
        t.send("echo $(id -u) $PWD $FOO\nexit\n")
        t.read_until("1000 /tmp bar")
        assert t.wait(timeout=20) == 0
    with pytest.raises(paddock.NotFound):
        paddock.Env(client, {"name": "no-such-env"}).pty(["sh"])
    with sandbox.pty(["sh"]) as t:
        t._send_frame(1, b'{"resize":{"cols":0,"rows":0}}')  # a bad control message
        t.send("echo still-here\n")
        t.read_until("still-here")
        assert t.errors and t.errors[0]["code"] == "invalid_argument"
    sandbox.pause()
    try:
        with pytest.raises(paddock.Conflict):
            sandbox.pty(["sh"])
    finally:
        sandbox.resume()


def test_pty_large_output_and_threads(sandbox):
    with sandbox.pty(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a; echo; echo END"]) as t:
        code = t.wait(timeout=30)
    assert code == 0 and t.output.count(b"a") == 300000 and b"END" in t.output

    t = sandbox.pty(["cat"])
    got = []
    reader = threading.Thread(target=lambda: got.append(t.read_until("ping-9", timeout=20)))
    reader.start()
    for i in range(10):
        t.send("ping-%d\n" % i)
    reader.join(30)
    assert got and b"ping-9" in got[0]
    t.send(b"\x04")
    assert t.wait(timeout=20) == 0
