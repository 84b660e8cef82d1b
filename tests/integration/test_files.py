"""Files API: /v1/envs/{name}/files[/list|stat|mkdir|move] and /archive.

Functional round trips first, then the escape classes: every path is resolved inside the
environment (openat2 RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS in a helper whose root is the
environment's), so no path string, symlink, /proc magic link, race or tar entry may read, write
or reveal a canary file on the host."""
import hashlib
import io
import os
import tarfile
import threading
import time
import urllib.parse
import uuid

import pytest

KINDS = ["computer", "sandbox"]


# --------------------------------------------------------------------------- helpers


class Files:
    """The files API of one environment. Every answer is checked against the canary's secret:
    no route may ever return it."""

    def __init__(self, daemon, env, secret=None):
        self.d = daemon
        self.env = env
        self.secret = secret.encode() if secret else None

    def call(self, method, route, params=None, raw=None, body=None, timeout=60):
        url = "/v1/envs/%s/%s" % (self.env, route)
        if params:
            url += "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
        r = self.d.api(method, url, raw=raw, body=body, timeout=timeout)
        if self.secret:
            assert self.secret not in r.body, "canary revealed by %s %s" % (method, url)
        return r

    def read(self, path, **kw):
        return self.call("GET", "files", dict(path=path, **kw))

    def write(self, path, data, **kw):
        return self.call("PUT", "files", dict(path=path, **kw), raw=data)

    def remove(self, path, **kw):
        return self.call("DELETE", "files", dict(path=path, **kw))

    def list(self, path):
        return self.call("GET", "files/list", dict(path=path))

    def stat(self, path):
        return self.call("GET", "files/stat", dict(path=path))

    def mkdir(self, path, **kw):
        return self.call("POST", "files/mkdir", dict(path=path, **kw))

    def move(self, src, dst, **kw):
        return self.call("POST", "files/move", body=dict({"from": src, "to": dst}, **kw))

    def archive_get(self, path, **kw):
        return self.call("GET", "archive", dict(path=path, **kw))

    def archive_put(self, path, data, **kw):
        return self.call("PUT", "archive", dict(path=path, **kw), raw=data)


def tar_bytes(members):
    """members: (TarInfo, bytes or None) pairs -> an uncompressed tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            else:
                t.addfile(info)
    return buf.getvalue()


def tinfo(name, kind=tarfile.REGTYPE, linkname="", mode=0o644):
    i = tarfile.TarInfo(name)
    i.type = kind
    i.linkname = linkname
    i.mode = mode
    i.mtime = 1700000000
    return i


def untar(data):
    return tarfile.open(fileobj=io.BytesIO(data), mode="r:")


def error_code(r, status):
    assert r.status == status, r
    code, msg = r.error()
    return msg


class Canary:
    """A secret file in the test's temp dir and one at /root/paddock-canary-<pid>: nothing an
    environment does through the files API may read, change, or put anything next to them."""

    def __init__(self, tmp_path):
        self.secret = "paddock-canary-secret-%s" % uuid.uuid4().hex
        self.dir = str(tmp_path / "canary-dir")
        os.mkdir(self.dir)
        self.file = os.path.join(self.dir, "canary.txt")
        self.root_file = "/root/paddock-canary-%d" % os.getpid()
        self.marker = "paddock-files-marker-%s" % uuid.uuid4().hex  # a name we try to create
        for p in (self.file, self.root_file):
            with open(p, "w") as f:
                f.write(self.secret)
        self.stats = {p: os.stat(p) for p in (self.file, self.root_file)}
        self.root_listing = sorted(os.listdir("/root"))

    def check(self):
        for p, st in self.stats.items():
            with open(p) as f:
                assert f.read() == self.secret, "canary %s was changed" % p
            now = os.stat(p)
            assert (now.st_ino, now.st_mtime_ns, now.st_mode, now.st_uid) == \
                   (st.st_ino, st.st_mtime_ns, st.st_mode, st.st_uid), "canary %s touched" % p
        assert os.listdir(self.dir) == ["canary.txt"], os.listdir(self.dir)
        assert sorted(os.listdir("/root")) == self.root_listing
        for top in ("/", "/tmp", "/root", self.dir):
            hits = [n for n in os.listdir(top) if n.startswith(self.marker)]
            assert not hits, "wrote %s on the host: %s" % (top, hits)

    def remove(self):
        try:
            os.unlink(self.root_file)
        except FileNotFoundError:
            pass


@pytest.fixture
def canary(tmp_path):
    c = Canary(tmp_path)
    try:
        yield c
        c.check()
    finally:
        c.remove()


def make_env(daemon, kind, name=None):
    name = name or kind[:3] + "-" + uuid.uuid4().hex[:6]
    daemon.create(name, "--" + kind)
    return name


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


# --------------------------------------------------------------------------- escapes


@pytest.mark.parametrize("kind", KINDS)
def test_path_strings_stay_inside(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    env_passwd = daemon.sh(env, "cat /etc/passwd").encode()
    with open("/etc/passwd", "rb") as f:
        assert f.read() != env_passwd
    # relative paths are refused, ".." stops at the environment's root
    error_code(fs.read("../../etc/shadow"), 400)
    error_code(fs.read("/../../etc/shadow"), 404)  # the image has none; the host's stays unread
    r = fs.read("/../../../etc/passwd")
    assert r.status == 200 and r.body == env_passwd
    assert fs.read("/tmp/../../../../etc/./passwd").body == env_passwd
    # absolute host paths mean paths inside the environment
    for p in (canary.file, canary.root_file, canary.dir):
        assert fs.read(p).status == 404
        assert fs.stat(p).status == 404
        assert fs.list(p).status == 404
        assert fs.archive_get(p).status == 404
    # /proc magic links are never followed
    for prefix in ("/proc/self/root", "/proc/1/cwd", "/proc/1/root", "/proc/thread-self/root"):
        for p in (canary.file, canary.root_file, "/etc/passwd"):
            r = fs.read(prefix + p)
            assert r.status in (400, 404), (prefix + p, r)
            assert fs.stat(prefix + p).status in (400, 404)
            assert fs.archive_get(prefix + p).status in (400, 404)
        assert fs.list(prefix + "/root").status in (400, 404)
        assert fs.write(prefix + "/tmp/" + canary.marker, b"x").status in (400, 403, 404)
        assert fs.archive_put(prefix + "/tmp",
                              tar_bytes([(tinfo(canary.marker), b"x")])).status in (400, 403, 404)
    r = fs.read("/proc/1/root/etc/passwd")
    assert r.status == 400 and "symbolic links" in r.error()[1].lower() or r.status == 404, r
    # writes to host-looking paths land inside the environment
    writable = kind == "computer" or canary.file.startswith("/tmp/")
    r = fs.write("/../../.." + canary.file, b"inside")
    assert r.status == (200 if writable else 403), r
    if writable:
        assert daemon.sh(env, "cat " + canary.file) == "inside"
    r = fs.write(canary.root_file, b"inside")
    assert r.status == (200 if kind == "computer" else 403), r
    r = fs.write("/../" + canary.marker, b"x")
    assert r.status == (200 if kind == "computer" else 403), r
    r = fs.archive_put("/../..", tar_bytes([(tinfo(canary.marker + ".t"), b"x")]))
    assert r.status == (200 if kind == "computer" else 403), r
    assert fs.remove(canary.root_file).status in (200, 403, 404)
    assert os.path.exists(canary.root_file)
    assert fs.move(canary.file, "/tmp/moved").status in (200, 403, 404)
    assert fs.move("/tmp/none", canary.file).status == 404


@pytest.mark.parametrize("kind", KINDS)
def test_symlinks_stay_inside(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    env_passwd = daemon.sh(env, "cat /etc/passwd").encode()
    daemon.sh(env, "cd /tmp && ln -s / l_root && ln -s ../../.. l_up && ln -s %s l_canary && "
                   "ln -s %s l_cdir && ln -s %s l_rcanary && ln -s /proc/1/root l_proc && "
                   "ln -s /proc/self/root l_self && mkdir -p real && echo inside > real/f"
              % (canary.file, canary.dir, canary.root_file))
    # reads follow symlinks, but only inside
    for link in ("/tmp/l_root", "/tmp/l_up", "/tmp/l_up/tmp/l_root"):
        assert fs.read(link + "/etc/passwd").body == env_passwd
        assert fs.read(link + canary.file).status == 404
        assert fs.read(link + canary.root_file).status == 404
        names = [e["name"] for e in fs.list(link + "/root").json["entries"]]
        assert os.path.basename(canary.root_file) not in names
        t = untar(fs.archive_get(link + "/root").body)
        assert not [m for m in t.getnames() if "paddock-canary" in m]
    for link in ("/tmp/l_canary", "/tmp/l_rcanary", "/tmp/l_cdir/canary.txt"):
        assert fs.read(link).status == 404
    for link in ("/tmp/l_proc/etc/passwd", "/tmp/l_self" + canary.file,
                 "/tmp/l_proc" + canary.root_file):
        assert fs.read(link).status in (400, 404)
    assert fs.list("/tmp/l_cdir").status == 404
    assert fs.list("/tmp/l_proc/").status in (400, 404)
    # stat describes the symlink itself (its text is the environment's own)
    st = fs.stat("/tmp/l_canary").json
    assert st["type"] == "symlink" and st["target"] == canary.file
    assert fs.stat("/tmp/l_proc").json["type"] == "symlink"
    # archives hold symlinks as symlinks and never follow them
    r = fs.archive_get("/tmp")
    assert r.status == 200
    t = untar(r.body)
    links = {m.name: m.linkname for m in t.getmembers() if m.issym()}
    assert links["tmp/l_root"] == "/" and links["tmp/l_canary"] == canary.file
    assert links["tmp/l_proc"] == "/proc/1/root"
    assert not [n for n in t.getnames() if n.startswith("tmp/l_root/")]
    t = untar(fs.archive_get("/tmp/l_root").body)
    assert [(m.name, m.issym()) for m in t.getmembers()] == [("l_root", True)]
    # writing a symlink's name replaces the symlink; writing through a symlinked directory
    # stays inside
    assert fs.write("/tmp/l_canary", b"replaced").status == 200
    assert fs.stat("/tmp/l_canary").json["type"] == "file"
    assert fs.write("/tmp/l_root/tmp/through", b"t").status == 200
    assert daemon.sh(env, "cat /tmp/through") == "t"
    assert fs.write("/tmp/l_cdir/" + canary.marker, b"m").status in (200, 403, 404)
    r = fs.write("/tmp/l_up/root/" + os.path.basename(canary.root_file), b"env's own")
    assert r.status == (200 if kind == "computer" else 403), r
    assert fs.write("/tmp/l_proc/tmp/" + canary.marker, b"x").status in (400, 404)
    assert fs.mkdir("/tmp/l_cdir/sub", parents="1").status in (200, 403, 404)
    assert fs.mkdir("/tmp/l_proc/sub", parents="1").status in (400, 404)
    # archive uploads into symlinked targets stay inside
    tb = tar_bytes([(tinfo(canary.marker), b"m")])
    assert fs.archive_put("/tmp/l_cdir", tb).status in (200, 403, 404)
    assert fs.archive_put("/tmp/l_proc", tb).status in (400, 404)
    r = fs.archive_put("/tmp/l_up", tb)
    assert r.status == (200 if kind == "computer" else 403), r
    # removal and moves act on the link, not on its target
    assert fs.remove("/tmp/l_rcanary").status == 200
    assert fs.move("/tmp/l_cdir", "/tmp/l_cdir2").status == 200
    assert fs.remove("/tmp/l_root", recursive="1").status == 200
    assert daemon.sh(env, "cat /tmp/real/f") == "inside\n"


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


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_tar_uploads(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    m = canary.marker
    fs.mkdir("/tmp/up")
    cases = {
        "dotdot": [(tinfo("ok1"), b"1"), (tinfo("../" + m), b"x")],
        "dotdot-deep": [(tinfo("a/../../" + m), b"x")],
        "absolute": [(tinfo("/" + m), b"x")],
        "absolute-host": [(tinfo(canary.file), b"x")],
        "symlink-then-through": [(tinfo("s", tarfile.SYMTYPE, "/"), None),
                                 (tinfo("s/tmp/" + m), b"x")],
        "relsymlink-then-through": [(tinfo("r", tarfile.SYMTYPE, "../../.."), None),
                                    (tinfo("r/tmp/" + m), b"x")],
        "hostsymlink-then-through": [(tinfo("h", tarfile.SYMTYPE, canary.dir), None),
                                     (tinfo("h/" + m), b"x")],
        "hardlink-out": [(tinfo("hl", tarfile.LNKTYPE, "../../etc/passwd"), None)],
        "hardlink-abs": [(tinfo("ha", tarfile.LNKTYPE, canary.file), None)],
    }
    for name, members in cases.items():
        r = fs.archive_put("/tmp/up/" + name, tar_bytes(members))
        assert r.status in (200, 400, 403, 404), (name, r)
    out = daemon.sh(env, "find / -xdev -name '%s*' 2>/dev/null; find /tmp -name '%s*'" % (m, m))
    for line in out.split():
        assert line.startswith("/tmp/up/"), out
    # devices are skipped, the rest is extracted
    dev = tinfo("null2", tarfile.CHRTYPE)
    dev.devmajor, dev.devminor = 1, 3
    r = fs.archive_put("/tmp/up/dev", tar_bytes([(dev, None), (tinfo("plain"), b"p")]))
    assert r.status == 200 and r.json["entries"] == 1, r
    assert fs.stat("/tmp/up/dev/null2").status == 404
    assert fs.read("/tmp/up/dev/plain").body == b"p"


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_swapped_during_archives(daemon, canary, kind):
    env = make_env(daemon, kind)
    fs = Files(daemon, env, canary.secret)
    daemon.sh(env, "mkdir -p /tmp/real/d && echo inside > /tmp/real/f && ln -s %s /tmp/real/c"
              % canary.file)
    stop = "/tmp/stop-" + uuid.uuid4().hex[:6]
    script = ("while [ ! -e %s ]; do ln -sfn / /tmp/x; ln -sfn /tmp/real /tmp/x; "
              "rm -rf /tmp/real/d2; ln -s %s /tmp/real/d2; rm -f /tmp/real/d2; "
              "mkdir /tmp/real/d2; :; done" % (stop, canary.dir))
    res = {}
    th = threading.Thread(target=lambda: res.update(
        daemon.exec(env, ["sh", "-c", script], timeout="60s")))
    th.start()
    try:
        time.sleep(0.3)
        tb = tar_bytes([(tinfo(canary.marker + "-up/f"), b"x"),
                        (tinfo("d2/" + canary.marker), b"y"),
                        (tinfo("x/" + canary.marker), b"z")])
        deadline = time.monotonic() + 8
        rounds = 0
        seen = set()
        while time.monotonic() < deadline:
            r = fs.archive_get("/tmp")
            assert r.status == 200
            members = untar(r.body).getmembers()
            x = [m for m in members if m.name == "tmp/x"]
            # /tmp/x may briefly be a real directory: archive_put/write with parents=1 create it
            # while `ln -sfn` has it unlinked. As a symlink it is never followed.
            if not x or x[0].issym():
                for m in members:
                    assert not m.name.startswith("tmp/x/"), m.name  # never followed
            # ln -sfn unlinks before it links: /tmp/x may be missing for a moment (404)
            r = fs.archive_get("/tmp/x")
            assert r.status in (200, 404), r
            if r.status == 200:
                # (empty when it vanished between the check and the walk)
                got = untar(r.body).getmembers()
                if got and got[0].isdir():
                    # a real directory made by archive_put/write below: only what they wrote,
                    # never what lies behind either symlink target (/ or /tmp/real)
                    names = {m.name for m in got}
                    assert not names & {"x/etc", "x/usr", "x/tmp", "x/f", "x/c", "x/d"}, names
                else:
                    assert [m.name for m in got] in ([], ["x"])
            seen.add(fs.read("/tmp/x/f").status)  # 200 through /tmp/real, 404 through /
            for p in ("/tmp/x" + canary.file, "/tmp/x/tmp/real/c", "/tmp/x/c"):
                assert fs.read(p).status in (200, 404)
            fs.stat("/tmp/x/c")
            fs.list("/tmp/x")
            assert fs.archive_put("/tmp/x", tb).status in (200, 400, 403, 404)
            assert fs.archive_put("/tmp/real", tb).status in (200, 400, 403, 404)
            assert fs.write("/tmp/x/d2/" + canary.marker, b"w").status in (200, 403, 404)
            rounds += 1
        assert rounds >= 3
        assert seen == {200, 404}, seen  # the race was live
    finally:
        daemon.api("PUT", "/v1/envs/%s/files?path=%s" % (env, stop), raw=b"")
        th.join(90)
    assert "exit_code" in res and not res.get("timed_out"), res
    canary.check()
