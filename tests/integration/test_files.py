"""Files API: /v1/envs/{name}/files[/list|stat|mkdir|move] and /archive.

Functional round trips and limits. The escape classes (path strings, symlinks, /proc magic
links, races, tar entries) are in tests/security/test_filesystem_escapes.py."""
import hashlib
import io
import os
import tarfile
import time

import pytest

from files_api import Files, tar_bytes, tinfo, untar, error_code, make_env

KINDS = ["computer", "sandbox"]


# --------------------------------------------------------------------------- functional


@pytest.mark.parametrize("kind", KINDS)
def test_write_read_round_trip(daemon, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env)
    data = os.urandom(1 << 20)
    base = "/workspace" if kind == "sandbox" else "/root"
    r = fs.write(base + "/deep/er/blob.bin", data)
    assert r.status == 200, r
    assert r.json == {"path": base + "/deep/er/blob.bin", "size": len(data)}
    r = fs.read(base + "/deep/er/blob.bin")
    assert r.status == 200 and r.headers["Content-Type"] == "application/octet-stream"
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(data).hexdigest()
    # the environment sees the same bytes
    out = daemon.sh(env, "sha256sum %s/deep/er/blob.bin" % base)
    assert out.split()[0] == hashlib.sha256(data).hexdigest()
    # replacing keeps the mode unless told otherwise; ?mode= sets it
    daemon.sh(env, "chmod 0600 %s/deep/er/blob.bin" % base)
    assert fs.write(base + "/deep/er/blob.bin", b"second").status == 200
    assert fs.stat(base + "/deep/er/blob.bin").json["mode"] == 0o600
    assert fs.write(base + "/deep/er/blob.bin", b"third", mode="0751").status == 200
    st = fs.stat(base + "/deep/er/blob.bin").json
    assert st["mode"] == 0o751 and st["size"] == 5
    assert fs.read(base + "/deep/er/blob.bin").body == b"third"
    # empty files, no temporary files left behind
    assert fs.write(base + "/empty", b"").status == 200
    assert fs.read(base + "/empty").body == b""
    assert "paddock-upload" not in daemon.sh(env, "ls -a %s %s/deep/er" % (base, base))
    # parents=0 needs the directory
    msg = error_code(fs.write(base + "/nope/x", b"x", parents="0"), 404)
    assert "nope" in msg
    # a directory is not a file
    error_code(fs.write(base + "/deep", b"x"), 400)
    error_code(fs.read(base + "/deep"), 400)
    error_code(fs.read(base + "/missing"), 404)
    # no leftover per-operation cgroups
    for d in daemon.cgroup_dirs(env):
        assert not [k for k in os.listdir(d) if k.startswith("files-")], os.listdir(d)


def test_list_stat(daemon):
    env = make_env(daemon, "computer")
    fs = Files(daemon, env)
    daemon.sh(env, "mkdir -p /srv/t/sub && printf 12345 > /srv/t/f && ln -s /etc/passwd "
                   "/srv/t/link && mkfifo /srv/t/fifo && chmod 0640 /srv/t/f")
    r = fs.list("/srv/t")
    assert r.status == 200, r
    j = r.json
    assert j["truncated"] is False and j["path"] == "/srv/t"
    names = [e["name"] for e in j["entries"]]
    assert names == sorted(names) == ["f", "fifo", "link", "sub"]
    by = {e["name"]: e for e in j["entries"]}
    assert by["f"]["type"] == "file" and by["f"]["size"] == 5 and by["f"]["mode"] == 0o640
    assert by["sub"]["type"] == "dir" and by["link"]["type"] == "symlink"
    assert by["fifo"]["type"] == "other"
    assert set(by["f"]) == {"name", "type", "size", "mode", "mtime"}
    assert by["f"]["mtime"].endswith("Z")
    st = fs.stat("/srv/t/link").json
    assert st["type"] == "symlink" and st["target"] == "/etc/passwd", st
    st = fs.stat("/srv/t/f").json
    assert st == {"path": "/srv/t/f", "type": "file", "size": 5, "mode": 0o640,
                  "mtime": st["mtime"], "uid": 0, "gid": 0}
    assert fs.stat("/").json["type"] == "dir"
    error_code(fs.stat("/srv/t/none"), 404)
    error_code(fs.list("/srv/t/f"), 400)  # not a directory
    error_code(fs.list("/srv/none"), 404)
    # bounded: 10000 entries, then "truncated"
    daemon.sh(env, "mkdir /srv/many && cd /srv/many && i=0; while [ $i -lt 10050 ]; do "
                   ": > f$i; i=$((i+1)); done")
    j = fs.list("/srv/many").json
    assert len(j["entries"]) == 10000 and j["truncated"] is True


def test_mkdir_move_remove(daemon):
    env = make_env(daemon, "computer")
    fs = Files(daemon, env)
    assert fs.mkdir("/srv").status == 200
    r = fs.mkdir("/srv/a")
    assert r.status == 200 and r.json == {"path": "/srv/a"}, r
    error_code(fs.mkdir("/srv/a"), 409)
    error_code(fs.mkdir("/srv/b/c/d"), 404)
    assert fs.mkdir("/srv/b/c/d", parents="1", mode="0700").status == 200
    assert fs.mkdir("/srv/b/c/d", parents="1").status == 200  # mkdir -p: existing is fine
    assert fs.stat("/srv/b/c/d").json["mode"] == 0o700
    assert fs.stat("/srv/b/c").json["mode"] == 0o755
    assert fs.write("/srv/a/f", b"one").status == 200
    assert fs.write("/srv/a/g", b"two").status == 200
    # move: no silent overwrite
    error_code(fs.move("/srv/a/f", "/srv/a/g"), 409)
    r = fs.move("/srv/a/f", "/srv/a/h")
    assert r.status == 200 and r.json == {"from": "/srv/a/f", "to": "/srv/a/h"}, r
    assert fs.move("/srv/a/h", "/srv/a/g", overwrite=True).status == 200
    assert fs.read("/srv/a/g").body == b"one"
    error_code(fs.move("/srv/a/none", "/srv/a/x"), 404)
    error_code(fs.move("/srv/a/g", "/srv/nodir/x"), 404)
    assert fs.move("/srv/a", "/srv/b/moved").status == 200
    assert fs.read("/srv/b/moved/g").body == b"one"
    r = daemon.api("POST", "/v1/envs/%s/files/move" % env, body={"from": "/srv/b", "extra": 1})
    error_code(r, 400)
    # remove
    error_code(fs.remove("/srv/b"), 409)  # not empty
    r = fs.remove("/srv/b/moved/g")
    assert r.status == 200 and r.json == {"deleted": "/srv/b/moved/g"}
    error_code(fs.remove("/srv/b/moved/g"), 404)
    assert fs.remove("/srv/b", recursive="1").status == 200
    error_code(fs.stat("/srv/b"), 404)
    error_code(fs.remove("/"), 409)
    error_code(fs.remove("/proc"), 409)  # a mount point
    # a symlink is removed, not what it points to
    daemon.sh(env, "mkdir -p /srv/keep && echo k > /srv/keep/k && ln -s /srv/keep /srv/lk")
    assert fs.remove("/srv/lk", recursive="1").status == 200
    assert daemon.sh(env, "cat /srv/keep/k") == "k\n"


@pytest.mark.parametrize("kind", KINDS)
def test_archive_round_trip(daemon, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env)
    blob = os.urandom(300000)
    daemon.sh(env, "mkdir -p /tmp/tree/a/b /tmp/tree/empty && echo hello > /tmp/tree/a/h.txt "
                   "&& ln -s a/h.txt /tmp/tree/rel && ln -s /etc/passwd /tmp/tree/abs "
                   "&& chmod 0750 /tmp/tree/a/b")
    assert fs.write("/tmp/tree/a/b/blob", blob, mode="0600").status == 200
    r = fs.archive_get("/tmp/tree")
    assert r.status == 200 and r.headers["Content-Type"] == "application/x-tar", r
    t = untar(r.body)
    members = {m.name.rstrip("/"): m for m in t.getmembers()}
    assert set(members) == {"tree", "tree/a", "tree/a/b", "tree/a/h.txt", "tree/a/b/blob",
                            "tree/empty", "tree/rel", "tree/abs"}, sorted(members)
    assert members["tree/rel"].issym() and members["tree/rel"].linkname == "a/h.txt"
    assert members["tree/abs"].issym() and members["tree/abs"].linkname == "/etc/passwd"
    assert t.extractfile(members["tree/a/b/blob"]).read() == blob
    assert members["tree/a/b"].mode & 0o7777 == 0o750
    # back in, elsewhere: same tree
    r = fs.archive_put("/tmp/copy", r.body)
    assert r.status == 200, r
    assert r.json["entries"] == 8 and r.json["bytes"] == len(blob) + 6, r.json
    assert fs.read("/tmp/copy/tree/a/b/blob").body == blob
    assert fs.stat("/tmp/copy/tree/rel").json["target"] == "a/h.txt"
    assert fs.stat("/tmp/copy/tree/a/b").json["mode"] == 0o750
    assert fs.stat("/tmp/copy/tree/a/b/blob").json["mode"] == 0o600
    assert fs.stat("/tmp/copy/tree/empty").json["type"] == "dir"
    assert daemon.sh(env, "cd /tmp/tree && find . | sort") == \
        daemon.sh(env, "cd /tmp/copy/tree && find . | sort")
    # a single file, and a gzip'd upload
    t = untar(fs.archive_get("/tmp/tree/a/h.txt").body)
    assert [m.name for m in t.getmembers()] == ["h.txt"]
    gz = io.BytesIO()
    with tarfile.open(fileobj=gz, mode="w:gz") as z:
        i = tinfo("z.txt")
        i.size = 3
        z.addfile(i, io.BytesIO(b"gz!"))
    assert fs.archive_put("/tmp/gz", gz.getvalue()).status == 200
    assert fs.read("/tmp/gz/z.txt").body == b"gz!"
    error_code(fs.archive_put("/tmp/bad", b"this is not a tar archive" * 100), 400)
    error_code(fs.archive_get("/tmp/none"), 404)


def test_sandbox_writes_only_tmp_and_workspace(daemon):
    env = make_env(daemon, "sandbox")
    fs = Files(daemon, env)
    for path in ("/etc/x", "/x", "/usr/bin/x"):
        msg = error_code(fs.write(path, b"x"), 403)
        assert "/tmp and /workspace" in msg, msg
    error_code(fs.mkdir("/newdir"), 403)
    error_code(fs.remove("/etc/passwd"), 403)
    error_code(fs.archive_put("/", tar_bytes([(tinfo("x"), b"x")])), 403)
    assert fs.write("/tmp/ok", b"1").status == 200
    assert fs.write("/workspace/ok", b"2").status == 200
    # /tmp and /workspace are separate file systems
    error_code(fs.move("/tmp/ok", "/workspace/ok2"), 409)


@pytest.mark.parametrize("kind", KINDS)
def test_owner_is_the_environments_root(daemon, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env)
    base = "/tmp" if kind == "sandbox" else "/srv"
    assert fs.write(base + "/o/owned", b"x").status == 200
    st = fs.stat(base + "/o/owned").json
    assert (st["uid"], st["gid"]) == (0, 0), st
    assert fs.stat(base + "/o").json["uid"] == 0
    assert daemon.sh(env, "stat -c %u:%g " + base + "/o/owned") == "0:0\n"
    assert fs.write(base + "/u/byuser", b"x", user="user").status == 200
    assert (fs.stat(base + "/u/byuser").json["uid"], fs.stat(base + "/u").json["uid"]) == \
        (1000, 1000)
    assert fs.write(base + "/byid", b"x", user="1234:55").status == 200
    st = fs.stat(base + "/byid").json
    assert (st["uid"], st["gid"]) == (1234, 55)
    assert fs.mkdir(base + "/ud", user="user").status == 200
    assert fs.stat(base + "/ud").json["uid"] == 1000
    r = fs.archive_put(base + "/ua", tar_bytes([(tinfo("f"), b"x")]), user="user")
    assert r.status == 200, r
    assert fs.stat(base + "/ua/f").json["uid"] == 1000
    error_code(fs.write(base + "/x", b"x", user="no-such-user"), 404)
    if kind == "computer":
        disk = os.path.join(daemon.env_dir(env), "disk")
        if os.path.isdir(disk):
            # btrfs driver: the computer's own tree is idmapped; on disk ids stay 0..65535
            hs = os.stat(disk + base + "/o/owned")
            assert (hs.st_uid, hs.st_gid) == (0, 0)
            assert os.stat(disk + base + "/u/byuser").st_uid == 1000
            return
        # dir driver: the file in the upper layer belongs to the environment's range
        uid_base = daemon.inspect(env)["uid_base"]
        upper = os.path.join(daemon.env_dir(env), "upper")
        hs = os.stat(upper + base + "/o/owned")
        assert (hs.st_uid, hs.st_gid) == (uid_base, uid_base)
        assert os.stat(upper + base + "/u/byuser").st_uid == uid_base + 1000


def test_errors_and_limits(daemon):
    env = make_env(daemon, "computer")
    fs = Files(daemon, env)
    error_code(daemon.api("GET", "/v1/envs/%s/files" % env), 400)  # no path
    error_code(fs.read("relative/path"), 400)
    error_code(fs.read("/" + "a" * 256), 400)
    error_code(fs.read("/a" * 2100), 400)
    error_code(daemon.api("GET", "/v1/envs/nope/files?path=/etc/passwd"), 404)
    error_code(daemon.api("POST", "/v1/envs/%s/files?path=/x" % env), 405)
    error_code(daemon.api("GET", "/v1/envs/%s/files/mkdir?path=/x" % env), 405)
    error_code(daemon.api("GET", "/v1/envs/%s/files/bogus?path=/x" % env), 404)
    error_code(fs.write("/srv/m", b"x", mode="999"), 400)
    error_code(fs.write("/srv/m", b"x", parents="maybe"), 400)
    error_code(fs.read("/etc/passwd", max="2G"), 400)
    # a file larger than ?max=
    assert fs.write("/srv/four", b"1234").status == 200
    assert fs.read("/srv/four", max="4").body == b"1234"
    error_code(fs.read("/srv/four", max="3"), 413)
    # a stopped environment has no namespaces to enter
    daemon.cli("stop", env)
    msg = error_code(fs.read("/etc/passwd"), 409)
    assert "not running" in msg


# --------------------------------------------------------------------------- hostile files


@pytest.mark.parametrize("kind", KINDS)
def test_fifo_and_devices_never_hang(daemon, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env)
    daemon.sh(env, "mkfifo /tmp/fifo && mkdir /tmp/withfifo && mkfifo /tmp/withfifo/p")
    for path in ("/tmp/fifo", "/dev/zero", "/dev/null", "/dev/urandom", "/dev/tty"):
        t0 = time.monotonic()
        r = fs.read(path, timeout=20)
        assert time.monotonic() - t0 < 10, path
        assert r.status == 400, (path, r)
        assert "not a regular file" in r.error()[1] or path == "/dev/tty", r
    assert fs.stat("/tmp/fifo").json["type"] == "other"
    t = untar(fs.archive_get("/tmp/withfifo", timeout=20).body)
    assert [m.name for m in t.getmembers() if m.isfifo()] == ["withfifo/p"]
    t = untar(fs.archive_get("/dev", timeout=20).body)
    assert not [m for m in t.getmembers() if m.ischr() or m.isblk()]
    # writing replaces the FIFO instead of opening it
    assert fs.write("/tmp/fifo", b"now a file", timeout=20).status == 200
    assert fs.read("/tmp/fifo").body == b"now a file"
    # kernel files that report size 0 are read to their end
    r = fs.read("/proc/1/status")
    assert r.status == 200 and b"paddock-init" in r.body, r
    assert fs.read("/proc/self/status").status == 404  # the helper is not in its pid namespace
    # /proc and /sys contents are not archived
    t = untar(fs.archive_get("/proc", timeout=20).body)
    assert t.getnames() == ["proc"]


@pytest.mark.parametrize("kind", KINDS)
def test_huge_file_is_refused(daemon, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env)
    daemon.sh(env, "truncate -s 2G /tmp/huge")
    t0 = time.monotonic()
    msg = error_code(fs.read("/tmp/huge"), 413)
    assert "2147483648" in msg and time.monotonic() - t0 < 10
    error_code(fs.read("/tmp/huge", max="1G"), 413)
