"""Helpers for the files API tests (tests/integration/test_files.py and
tests/security/test_filesystem_escapes.py): a client for the routes, tar builders, the
host canary."""
import io
import os
import tarfile
import urllib.parse
import uuid



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


def make_env(daemon, kind, name=None):
    name = name or kind[:3] + "-" + uuid.uuid4().hex[:6]
    daemon.create(name, "--" + kind)
    return name
