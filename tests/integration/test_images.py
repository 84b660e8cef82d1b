"""Images: export/import round trips, pulls from a local OCI registry, crash safety.

The registry is Debian's docker-registry, started inside the test daemon's network namespace on
127.0.0.1:5000, fronted on 127.0.0.1:5001 by registry_proxy.py, which demands Docker Hub's
Bearer-token dance. Pulls reach only public addresses unless paddockd allows a registry, so
the daemons here run with --insecure-registry for both (plain http to loopback; see also
tests/security/test_network_escapes.py). Images are OCI layouts made with umoci (plus hand-made
blobs for an opaque directory, a zstd layer and a multi-platform index) and pushed with
skopeo."""
import glob
import io
import json
import os
import shutil
import signal
import subprocess
import time
import sys
import tarfile
import tempfile

import pytest

from conftest import PADDOCK, pid_alive, wait_for
from oci_layout import Layout, make_tar, run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REGISTRY = "127.0.0.1:5000"  # plain registry, no auth
AUTHED = "127.0.0.1:5001"    # the token-demanding front
PULL_ARGS = ["--insecure-registry", REGISTRY, "--insecure-registry", AUTHED]


@pytest.fixture
def daemon(make_daemon):
    """The daemon of this file: allowed to pull from the loopback registries, over http."""
    return make_daemon(extra_args=PULL_ARGS)


def members(tar_path_or_bytes):
    """name -> (type, uid, gid, mode, size, linkname) of a tar, leading ./ dropped."""
    out = {}
    if isinstance(tar_path_or_bytes, bytes):
        t = tarfile.open(fileobj=io.BytesIO(tar_path_or_bytes), mode="r:*")
    else:
        t = tarfile.open(tar_path_or_bytes, "r:*")
    with t:
        for m in t.getmembers():
            name = m.name.lstrip("./") or "."
            out[name] = (m.type, m.uid, m.gid, m.mode, m.size if m.isfile() else 0, m.linkname)
    return out


def partials(daemon):
    return glob.glob(os.path.join(daemon.root, "images", ".partial-*"))


def image_names(daemon):
    return sorted(i["name"] for i in daemon.api("GET", "/v1/images").json["images"])


# --------------------------------------------------------------------------- export


@pytest.fixture
def owned_image_dir(image_dir):
    """The busybox rootfs plus files owned by other ids, a setuid file, a symlink, a hardlink."""
    d = tempfile.mkdtemp(prefix="paddock-it-own-", dir="/var/tmp")
    rootfs = os.path.join(d, "rootfs")
    shutil.copytree(image_dir, rootfs, symlinks=True)
    os.makedirs(os.path.join(rootfs, "home/user"), exist_ok=True)
    with open(os.path.join(rootfs, "home/user/notes"), "w") as f:
        f.write("mine\n")
    os.chown(os.path.join(rootfs, "home/user"), 1000, 1000)
    os.chown(os.path.join(rootfs, "home/user/notes"), 1000, 1001)
    with open(os.path.join(rootfs, "nobody"), "w") as f:
        f.write("n")
    os.chown(os.path.join(rootfs, "nobody"), 65534, 65534)
    os.chmod(os.path.join(rootfs, "nobody"), 0o4755)
    os.symlink("/home/user/notes", os.path.join(rootfs, "link"))
    os.link(os.path.join(rootfs, "nobody"), os.path.join(rootfs, "hard"))
    yield rootfs
    shutil.rmtree(d)


def test_export_import_round_trip(daemon, owned_image_dir, tmp_path):
    daemon.cli("image", "import", "owned", owned_image_dir)
    plain = tmp_path / "owned.tar"
    daemon.cli("image", "export", "owned", str(plain))
    m = members(str(plain))
    assert m["home/user/notes"][:4] == (tarfile.REGTYPE, 1000, 1001, 0o644)
    assert m["home/user"][1:3] == (1000, 1000)
    assert m["nobody"][1:4] == (65534, 65534, 0o4755)
    assert m["link"][0] == tarfile.SYMTYPE and m["link"][5] == "/home/user/notes"
    assert tarfile.LNKTYPE in (m["hard"][0], m["nobody"][0])   # a hardlink, not a second copy
    assert "bin/busybox" in m

    # every compression, by suffix and by flag, and to stdout; each imports back the same
    outs = {"gz": tmp_path / "o.tar.gz", "zst": tmp_path / "o.tar.zst"}
    for f in outs.values():
        daemon.cli("image", "export", "owned", str(f))
    with open(outs["gz"], "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    with open(outs["zst"], "rb") as f:
        assert f.read(4) == b"\x28\xb5\x2f\xfd"
    flagged = tmp_path / "flagged"
    daemon.cli("image", "export", "owned", str(flagged), "--compress", "zstd")
    with open(flagged, "rb") as f:
        assert f.read(4) == b"\x28\xb5\x2f\xfd"
    stdout = daemon.cli("image", "export", "owned", "-").stdout
    assert members(str(plain)) == members(stdout)

    for i, f in enumerate([plain, outs["gz"], outs["zst"]]):
        daemon.cli("image", "import", "back%d" % i, str(f))
        again = tmp_path / ("again%d.tar" % i)
        daemon.cli("image", "export", "back%d" % i, str(again))
        assert members(str(plain)) == members(str(again))
        r = rootfs(daemon, "back%d" % i)
        assert os.stat(os.path.join(r, "hard")).st_ino == os.stat(os.path.join(r, "nobody")).st_ino

    # an environment made from the round-tripped image sees the owners
    daemon.create("rt", "--computer", "--image", "back2")
    assert daemon.sh("rt", "stat -c %u:%g /home/user/notes; cat /home/user/notes") == "1000:1001\nmine\n"


def test_export_errors(daemon, tmp_path):
    r = daemon.api("GET", "/v1/images/nosuch/export")
    assert r.status == 404 and "nosuch" in r.error()[1]
    r = daemon.api("GET", "/v1/images/base/export?compression=lz4")
    assert r.status == 400 and r.error()[0] == "invalid_argument"
    p = daemon.cli("image", "export", "nosuch", str(tmp_path / "x.tar"), check=False)
    assert p.returncode == 1 and "not found" in p.err and not os.path.exists(tmp_path / "x.tar")
    p = daemon.cli("image", "export", "base", str(tmp_path / "x.tar"), "--compress", "lz4",
                   check=False)
    assert p.returncode == 2
    r = daemon.api("GET", "/v1/images/base/export")
    assert r.status == 200 and r.headers["Content-Type"] == "application/x-tar"
    assert "bin/busybox" in members(r.body)


# --------------------------------------------------------------------------- the registry


@pytest.fixture(scope="module")
def layout(image_dir):
    """tags: v1 (busybox + files), v2 (whiteout of /etc/removed), v3 (opaque /opq),
    v4 (a zstd layer), arm (an arm64 image), multi (index: arm64 first, then v4 as amd64),
    slow (v4 again, for the trickling repository), tampered (one unique layer)."""
    d = tempfile.mkdtemp(prefix="paddock-it-oci-", dir="/var/tmp")
    L = Layout(os.path.join(d, "layout"))
    bundle = os.path.join(d, "bundle")

    def v1(rootfs):
        subprocess.run(["cp", "-a", image_dir + "/.", rootfs], check=True)
        for name, text in (("etc/removed", "gone soon"), ("etc/keep", "kept"), ("etc/arch", "amd64"),
                           ("opq/old1", "old"), ("opq/sub/old2", "old")):
            os.makedirs(os.path.dirname(os.path.join(rootfs, name)), exist_ok=True)
            with open(os.path.join(rootfs, name), "w") as f:
                f.write(text)
        os.chown(os.path.join(rootfs, "etc/keep"), 1000, 1000)

    L.new("base")
    L.commit_dir("base", "v1", bundle, v1)
    L.commit_dir("v1", "v2", bundle, lambda r: os.unlink(os.path.join(r, "etc/removed")))
    L.add_tar_layer("v2", "v3", make_tar([("opq", "dir", None), ("opq/.wh..wh..opq", "file", b""),
                                          ("opq/new", "file", b"new")]))
    L.add_tar_layer("v3", "v4", make_tar([("zstd-file", "file", b"from a zstd layer\n")]),
                    compression="zstd")

    def arm(rootfs):
        os.makedirs(os.path.join(rootfs, "etc"))
        with open(os.path.join(rootfs, "etc/arch"), "w") as f:
            f.write("arm64")

    L.new("armbase", arch="arm64")
    L.commit_dir("armbase", "arm", bundle, arm)
    L.index("multi", [("arm", "arm64"), ("v4", "amd64")])
    L.new("tbase")
    L.commit_dir("tbase", "tampered", bundle, lambda r: open(os.path.join(r, "unique"), "wb").write(os.urandom(4096)))
    yield L
    shutil.rmtree(d)


def hostile_answers():
    """What a hostile registry at AUTHED/evil/CASE:1 answers (see test_pull_hostile_registry)."""
    import base64
    import gzip as gz
    out = {}

    def put(path, body, status=200, type="application/json"):
        out[path] = {"status": status, "type": type, "body": base64.b64encode(body).decode()}

    def blob(case, data):
        d = "sha256:" + __import__("hashlib").sha256(data).hexdigest()
        put("/v2/evil/%s/blobs/%s" % (case, d), data, type="application/octet-stream")
        return d

    def manifest(case, layers, config=b"{}", doc=None):
        m = doc or {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                               "digest": blob(case, config), "size": len(config)},
                    "layers": layers}
        put("/v2/evil/%s/manifests/1" % case, json.dumps(m).encode(),
            type="application/vnd.oci.image.manifest.v1+json")

    def layer(case, tar, size=None, media="application/vnd.oci.image.layer.v1.tar+gzip"):
        data = gz.compress(tar)
        return {"mediaType": media, "digest": blob(case, data), "size": len(data) if size is None else size}

    ok_tar = make_tar([("etc", "dir", None), ("etc/ok", "file", b"ok")])
    manifest("longer", [layer("longer", ok_tar, size=10)])
    manifest("shorter", [layer("shorter", ok_tar, size=100000)])
    manifest("foreign", [layer("foreign", ok_tar,
                               media="application/vnd.docker.image.rootfs.foreign.diff.tar.gzip")])
    manifest("schema1", [], doc={"schemaVersion": 1, "name": "x", "fsLayers": []})
    put("/v2/evil/notjson/manifests/1", b"<html>", type="text/html")
    put("/v2/evil/huge/manifests/1", b"{" + b" " * (5 << 20) + b"}")
    idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
           "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                          "digest": "sha256:" + "0" * 64, "size": 10,
                          "platform": {"os": "windows", "architecture": "amd64"}}]}
    put("/v2/evil/nolinux/manifests/1", json.dumps(idx).encode(),
        type="application/vnd.oci.image.index.v1+json")
    # a layer whose entries aim outside the image: refused, nothing written on the host. Enough
    # ".." to reach / from any directory it could be unpacked in (six only reached /var from
    # <root>/images/<partial>/rootfs, so /tmp/paddock-evil-escape was never where it would land)
    esc = make_tar([("../" * 24 + "tmp/paddock-evil-escape", "file", b"x")])  # < 100 chars
    manifest("escape", [layer("escape", esc)])
    manifest("many", [layer("many", ok_tar)] * 129)
    return out


class Registry:
    def __init__(self, daemon, layout):
        self.daemon, self.layout = daemon, layout
        self.dir = tempfile.mkdtemp(prefix="paddock-it-reg-", dir="/var/tmp")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "proxy.log")
        self.procs = []
        subprocess.run(["ip", "-n", daemon.netns, "link", "set", "lo", "up"], check=True)
        cfg = os.path.join(self.dir, "config.yml")
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                    "    rootdirectory: %s\nhttp:\n  addr: %s\n" % (self.data, REGISTRY))
        out = open(os.path.join(self.dir, "registry.log"), "wb")
        self.procs.append(subprocess.Popen(self.ns(["docker-registry", "serve", cfg]),
                                           stdout=out, stderr=out))
        self.canned = os.path.join(self.dir, "canned.json")
        with open(self.canned, "w") as f:
            json.dump(hostile_answers(), f)
        self.procs.append(subprocess.Popen(self.ns(["/usr/bin/python3",
                                                    os.path.join(os.path.dirname(__file__), "registry_proxy.py"),
                                                    "5001", "5000", self.log, self.canned]),
                                           stdout=out, stderr=out))
        out.close()
        for port in (5000, 5001):
            wait_for(lambda: subprocess.run(self.ns(["curl", "-s", "-o", "/dev/null",
                                                     "http://127.0.0.1:%d/v2/" % port]))
                     .returncode == 0, timeout=20, what="registry on port %d" % port)

    def ns(self, cmd):
        return ["nsenter", "--net=" + self.daemon.netns_path] + cmd

    def push(self, tag, dest, all=False):
        run(*self.ns(["skopeo", "copy", "--quiet", "--dest-tls-verify=false"]
                     + (["--all"] if all else [])
                     + ["oci:" + self.layout.ref(tag), "docker://%s/%s" % (REGISTRY, dest)]))

    def blob_file(self, digest):
        return os.path.join(self.data, "docker/registry/v2/blobs/sha256", digest[7:9], digest[7:], "data")

    def proxy_log(self):
        try:
            with open(self.log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def close(self):
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
            p.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def registry(daemon, layout):
    r = Registry(daemon, layout)
    yield r
    r.close()


def pull(daemon, *args, check=True):
    return daemon.cli("image", "pull", "--insecure", *args, check=check, timeout=120)


def rootfs(daemon, name):
    return os.path.join(daemon.root, "images", name, "rootfs")


def test_pull_through_token_auth_applies_layers_and_whiteouts(daemon, registry):
    registry.push("v4", "test/busybox:v4")
    p = pull(daemon, AUTHED + "/test/busybox:v4")
    assert p.out == "busybox-v4\n"
    assert "layer 4/4" in p.err and "unpacking layer 4/4" in p.err, p.err
    # Docker Hub's dance: refused without a token, a token from the realm, then accepted
    log = registry.proxy_log()
    assert any(l.startswith("GET /v2/test/busybox/manifests/v4 auth=-") for l in log), log
    assert any(l.startswith("GET /token?") for l in log), log
    assert any("/blobs/sha256:" in l and "auth=Bearer paddock-test-token-1" in l for l in log), log

    r = rootfs(daemon, "busybox-v4")
    assert not os.path.lexists(os.path.join(r, "etc/removed"))          # whiteout
    assert not os.path.lexists(os.path.join(r, "etc/.wh.removed"))
    with open(os.path.join(r, "etc/keep")) as f:
        assert f.read() == "kept"
    assert os.stat(os.path.join(r, "etc/keep")).st_uid == 1000
    assert sorted(os.listdir(os.path.join(r, "opq"))) == ["new"]        # opaque directory
    with open(os.path.join(r, "zstd-file")) as f:                        # zstd layer
        assert f.read() == "from a zstd layer\n"
    img = [i for i in daemon.api("GET", "/v1/images").json["images"] if i["name"] == "busybox-v4"][0]
    assert img["size"] > 1000000
    assert partials(daemon) == []

    daemon.create("pulled", "--computer", "--image", "busybox-v4")
    assert daemon.sh("pulled", "cat /etc/keep /zstd-file; ls /opq; test ! -e /etc/removed") == \
        "keptfrom a zstd layer\nnew\n"


def test_pull_index_takes_amd64_and_digest_refs(daemon, registry):
    registry.push("multi", "test/multi:1", all=True)
    assert pull(daemon, REGISTRY + "/test/multi:1", "--name", "multi").out == "multi\n"
    with open(os.path.join(rootfs(daemon, "multi"), "etc/arch")) as f:
        assert f.read() == "amd64"
    # by digest: the manifest of v4, verified against it; the name comes from the digest
    digest = registry.layout.descriptor("v4")["digest"]
    p = pull(daemon, "%s/test/multi@%s" % (REGISTRY, digest), "-q")
    assert p.out == "multi-%s\n" % digest[7:19] and p.err == ""
    # JSON answer without streaming
    r = daemon.api("POST", "/v1/images", {"pull": REGISTRY + "/test/multi:1", "name": "m2",
                                          "insecure": True})
    assert r.status == 201 and r.json["name"] == "m2" and r.json["size"] > 0, r


def test_pull_refuses_a_tampered_blob_and_leaves_nothing(daemon, registry):
    registry.push("tampered", "test/tampered:1")
    layer = registry.layout.manifest("tampered")["layers"][-1]["digest"]
    path = registry.blob_file(layer)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        f.seek(0)
        f.write(data)
    p = pull(daemon, REGISTRY + "/test/tampered:1", check=False)
    assert p.returncode == 1 and "does not match its digest" in p.err, p.err
    r = daemon.api("POST", "/v1/images", {"pull": REGISTRY + "/test/tampered:1", "insecure": True})
    assert r.status == 422 and "does not match its digest" in r.error()[1], r
    assert "tampered-1" not in image_names(daemon)
    assert partials(daemon) == []
    assert not os.path.exists(os.path.join(daemon.root, "images", "tampered-1"))


def test_pull_errors(daemon, registry):
    p = pull(daemon, REGISTRY + "/test/busybox:nosuchtag", check=False)
    assert p.returncode == 1 and "manifest" in p.err and "nosuchtag" in p.err, p.err
    r = daemon.api("POST", "/v1/images", {"pull": REGISTRY + "/test/busybox:nosuchtag",
                                          "insecure": True})
    assert r.status == 404 and "nosuchtag" in r.error()[1], r
    assert partials(daemon) == [] and image_names(daemon) == ["base"]
    p = pull(daemon, AUTHED + "/test/nosuchrepo:1", check=False)
    assert p.returncode == 1 and "nosuchrepo" in p.err, p.err
    # https is the default: a plain-http registry is not spoken to without --insecure
    p = daemon.cli("image", "pull", REGISTRY + "/test/busybox:v4", check=False)
    assert p.returncode == 1 and "paddock: " in p.err
    for bad in ["", "UPPER/case", "a:b:c", "debian@sha256:123", "x/../y", "debian:" + "t" * 200,
                "host:99999/x", "-x", "a//b", "a/", "debian:-tag"]:
        r = daemon.api("POST", "/v1/images", {"pull": bad})
        assert r.status == 400 and r.error()[0] == "invalid_argument", (bad, r)
    for body in [{"pull": 5}, {"pull": "debian", "insecure": "yes"}, {"pull": "debian", "bogus": 1},
                 {"pull": "debian", "name": "../x"}, {}]:
        r = daemon.api("POST", "/v1/images", body)
        assert r.status == 400, (body, r)
    r = daemon.api("POST", "/v1/images", {"pull": "debian:bookworm", "insecure": True})
    assert r.status == 400 and "--insecure-registry" in r.error()[1], r
    r = daemon.api("POST", "/v1/images", {"pull": "127.0.0.1:5002/test/x:1", "insecure": True})
    assert r.status == 400 and "--insecure-registry, not 127.0.0.1:5002" in r.error()[1], r
    r = daemon.api("POST", "/v1/images", {"pull": REGISTRY + "/test/x:1", "name": "base",
                                          "insecure": True})
    assert r.status == 409
    p = daemon.cli("image", "pull", check=False)
    assert p.returncode == 2
    assert partials(daemon) == [] and image_names(daemon) == ["base"]


def not_lasting(st):
    """Neither the daemon's lxcfs (it outlives the daemon on purpose: environments keep their
    /proc views, the next daemon adopts it) nor its sync and spare processes (syncer.c: live
    as long as the daemon, share its fd table) nor its spawn process (spawner.c: a copy of the
    daemon at start-up, which clones PID 1s and exec slots): they are no helpers."""
    return st[st.index("(") + 1:st.rindex(")")] not in ("lxcfs", "paddockd-sync",
                                                        "paddockd-spare", "paddockd-spawn")


def helper_pids(daemon_pid):
    """Children of the daemon (image helpers)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) == daemon_pid and not_lasting(st):
                out.append(int(d))
    return out


def start_slow_pull(daemon, registry):
    """A CLI pull of a repository whose blobs stall after their first 16 KiB, waited for until
    its first layer is on disk (the job is then mid-download, and stays there until it is
    cancelled). Returns the CLI process: kill it to cancel."""
    registry.push("v4", "test/slow/busybox:v4")
    layer = os.path.join(daemon.root, "images", ".partial-busybox-v4", "layer-0")
    cli = subprocess.Popen([PADDOCK, "--socket", daemon.sock, "image", "pull", "--insecure",
                            AUTHED + "/test/slow/busybox:v4"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and cli.poll() is None and not os.path.exists(layer):
        time.sleep(0.05)
    if os.path.exists(layer) and cli.poll() is None:
        return cli
    cli.kill()
    out, err = cli.communicate()
    raise AssertionError("the slow pull never reached its first layer: %r" % err)


def test_kill9_during_pull_leaves_nothing(daemon, registry):
    cli = start_slow_pull(daemon, registry)
    try:
        helpers = helper_pids(daemon.pid)
        assert helpers
        daemon.kill9()
        # the helper dies with the daemon (PR_SET_PDEATHSIG)
        wait_for(lambda: not any(pid_alive(p) for p in helpers), timeout=10, what="helpers to die")
    finally:
        cli.kill()
        cli.wait()
    daemon.start()
    assert partials(daemon) == []
    assert image_names(daemon) == ["base"]
    # and the same pull works afterwards
    registry.push("v4", "test/busybox:v4")
    assert pull(daemon, REGISTRY + "/test/busybox:v4").out == "busybox-v4\n"


# --------------------------------------------------------------------------- build


def make_deb(workdir, name, files, depends=None, arch="all"):
    d = os.path.join(workdir, name)
    os.makedirs(os.path.join(d, "DEBIAN"))
    control = "Package: %s\nVersion: 1.0\nArchitecture: %s\nMaintainer: t <t@example.org>\n" \
              "Description: test package\n" % (name, arch)
    if depends:
        control += "Depends: %s\n" % depends
    with open(os.path.join(d, "DEBIAN", "control"), "w") as f:
        f.write(control)
    for path, content, owner in files:
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if isinstance(content, str) and content.startswith("->"):
            os.symlink(content[2:], p)
            continue
        with open(p, "wb") as f:
            f.write(content)
        os.chmod(p, 0o755)
        os.chown(p, owner, owner)
    return d


@pytest.fixture
def local_mirror(daemon, image_dir):
    """<root>/mirrors/tiny: a flat apt repository of tiny-busybox (busybox, /bin/sh),
    tiny-hello (depends on it; /etc/hello, a file owned by 1000) and tiny-big (40 MB)."""
    work = tempfile.mkdtemp(prefix="paddock-it-debs-", dir="/var/tmp")
    repo = os.path.join(daemon.root, "mirrors", "tiny")
    os.makedirs(repo)
    with open(os.path.join(image_dir, "bin", "busybox"), "rb") as f:
        busybox = f.read()
    pkgs = [make_deb(work, "tiny-busybox", [("bin/busybox", busybox, 0), ("bin/sh", "->busybox", 0)],
                     arch="amd64"),
            make_deb(work, "tiny-hello", [("etc/hello", b"hello from a deb\n", 0),
                                          ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0),
                                          ("etc/group", b"root:x:0:\n", 0),
                                          ("home/user/owned", b"x", 1000)], depends="tiny-busybox"),
            make_deb(work, "tiny-big", [("big", os.urandom(40 << 20), 0)])]
    stanzas = []
    for d in pkgs:
        deb = os.path.basename(d) + ".deb"
        run("dpkg-deb", "-Zgzip", "-z1", "-b", d, os.path.join(repo, deb))
        ctl = subprocess.run(["dpkg-deb", "-f", os.path.join(repo, deb)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
        with open(os.path.join(repo, deb), "rb") as f:
            data = f.read()
        stanzas.append("%s\nFilename: ./%s\nSize: %d\nSHA256: %s\n"
                       % (ctl, deb, len(data), __import__("hashlib").sha256(data).hexdigest()))
    with open(os.path.join(repo, "Packages"), "w") as f:
        f.write("\n".join(stanzas))
    shutil.rmtree(work)
    return "local:tiny"


def test_build_from_a_local_mirror(daemon, local_mirror):
    p = daemon.cli("image", "build", "tiny", "--from", "debian:bookworm", "--variant", "extract",
                   "--mirror", local_mirror, "--packages", "tiny-hello", timeout=300)
    assert p.out == "tiny\n"
    assert "building debian:bookworm (extract) with tiny-hello" in p.err
    assert "I: " in p.err and "unpacking" in p.err, p.err      # mmdebstrap's own lines, live
    r = rootfs(daemon, "tiny")
    with open(os.path.join(r, "etc/hello")) as f:
        assert f.read() == "hello from a deb\n"
    assert os.path.isfile(os.path.join(r, "bin/busybox"))       # the dependency came along
    assert os.stat(os.path.join(r, "home/user/owned")).st_uid == 1000
    assert not any(os.path.exists(os.path.join(r, "dev", n)) for n in ("null", "console", "zero"))
    assert partials(daemon) == []
    img = [i for i in daemon.api("GET", "/v1/images").json["images"] if i["name"] == "tiny"][0]
    assert img["size"] > 1000000
    daemon.create("built", "--computer", "--image", "tiny")
    assert daemon.sh("built", "cat /etc/hello") == "hello from a deb\n"


def test_build_errors_leave_nothing(daemon, local_mirror):
    p = daemon.cli("image", "build", "x", "--variant", "extract", "--mirror", local_mirror,
                   "--packages", "tiny-nosuch", check=False, timeout=300)
    assert p.returncode == 1 and "tiny-nosuch" in p.err.splitlines()[-1], p.err
    assert partials(daemon) == [] and image_names(daemon) == ["base"]
    p = daemon.cli("image", "build", "x", "--mirror", "local:nosuch", check=False)
    assert p.returncode == 1 and "no local mirror nosuch" in p.err
    for build in [{"from": "ubuntu:jammy"}, {"from": "debian:Book!"}, {"from": "debian:"},
                  {"from": "debian:--help"}, {"from": "debian:-customize-hook"},
                  {"packages": ["ok", "A B"]}, {"packages": "a,../x"}, {"packages": 5},
                  {"mirror": "file:///etc"}, {"mirror": "local:../x"}, {"mirror": "http://x/ y"},
                  {"mirror": "ftp://x"}, {"variant": "everything"}, {"bogus": 1},
                  {"packages": ["p%d" % i for i in range(201)]}]:
        r = daemon.api("POST", "/v1/images", {"name": "x", "build": build})
        assert r.status == 400 and r.error()[0] == "invalid_argument", (build, r)
    r = daemon.api("POST", "/v1/images", {"build": {}})
    assert r.status == 400 and "name" in r.error()[1]
    r = daemon.api("POST", "/v1/images", {"name": "base", "build": {"mirror": local_mirror}})
    assert r.status == 409
    assert daemon.cli("image", "build", check=False).returncode == 2
    assert partials(daemon) == [] and image_names(daemon) == ["base"]


# A proxy that logs each request line and answers 404: apt asks it for the mirror's files.
LOGGING_PROXY = r"""
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(16)
print(srv.getsockname()[1], flush=True)
log = open(sys.argv[1], "a")
while True:
    c, _ = srv.accept()
    c.settimeout(10)
    try:
        head = c.recv(65536).decode("latin-1")
        log.write(head.split("\r\n", 1)[0] + "\n"); log.flush()
        c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    c.close()
"""


def test_build_takes_the_hosts_apt_mirror_and_proxy(make_daemon, tmp_path):
    """Without --mirror a build uses the archive and the proxy of the host's apt (here a
    --apt-config directory: the daemon's own test host keeps its /etc/apt)."""
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    log = tmp_path / "proxy.log"
    d = make_daemon(extra_args=["--apt-config", str(apt)])
    subprocess.run(["ip", "-n", d.netns, "link", "set", "lo", "up"], check=True)
    proxy = subprocess.Popen(["nsenter", "--net=" + d.netns_path, sys.executable, "-c",
                              LOGGING_PROXY, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proxy.stdout.readline())
        # no source yet: a clear error, nothing left behind
        p = d.cli("image", "build", "x", check=False, timeout=60)
        assert p.returncode == 1 and "no Debian mirror to build from" in p.err, p.err
        assert "--mirror" in p.err and partials(d) == []
        (apt / "sources.list.d" / "debian.sources").write_text(
            "Types: deb\nURIs: http://mirror.paddock.test/debian\nSuites: bookworm "
            "bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://security.paddock."
            "test/debian-security\nSuites: bookworm-security\nComponents: main\n")
        (apt / "apt.conf").write_text('Acquire::http::Proxy "http://127.0.0.1:%d";\n' % port)
        p = d.cli("image", "build", "x", check=False, timeout=300)
        assert p.returncode == 1, p.err
        assert "mirror http://mirror.paddock.test/debian (the host's apt: %s)" % (
            apt / "sources.list.d" / "debian.sources") in p.err, p.err
        # apt went to the host's mirror, through the host's proxy
        asked = log.read_text()
        assert "GET http://mirror.paddock.test/debian/dists/bookworm/" in asked, (asked, p.err)
        assert "security" not in asked, asked
        assert partials(d) == [] and image_names(d) == ["base"]
    finally:
        proxy.kill()
        proxy.wait()


def descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            if not_lasting(st):
                kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def test_kill9_during_build_leaves_nothing(daemon, local_mirror):
    cli = subprocess.Popen([PADDOCK, "--socket", daemon.sock, "image", "build", "big",
                            "--variant", "extract", "--mirror", local_mirror,
                            "--packages", "tiny-big,tiny-hello"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        procs = wait_for(lambda: [p for p in descendants(daemon.pid) if comm(p) == "mmdebstrap"]
                         and descendants(daemon.pid), timeout=30, what="mmdebstrap to run")
        daemon.kill9()
        wait_for(lambda: not any(pid_alive(p) for p in procs), timeout=15,
                 what="every process of the build to die")
    finally:
        cli.kill()
        cli.wait()
    daemon.start()
    assert partials(daemon) == []
    assert image_names(daemon) == ["base"]


# --------------------------------------------------------------------------- the default image


def test_create_without_image_uses_default(make_daemon, image_dir):
    d = make_daemon(extra_args=["--default-image", "default"])
    p = d.cli("create", "x", check=False)
    assert p.returncode == 1 and "default image default does not exist" in p.err, p.err
    assert "paddock image build default" in p.err
    assert d.envs() == {}
    d.cli("image", "import", "default", image_dir)
    env = d.create("x")
    assert env["image"] == "default"
    # an explicit image still wins, and the default in use cannot be removed
    assert d.create("y", "--image", "base")["image"] == "base"
    assert d.api("DELETE", "/v1/images/default").status == 409


def test_kill9_during_import_leaves_nothing(daemon, tmp_path):
    big = tmp_path / "big.tar"
    with tarfile.open(big, "w") as t:
        for i in range(40):
            ti = tarfile.TarInfo("data/%02d" % i)
            ti.size = 4 << 20
            t.addfile(ti, io.BytesIO(os.urandom(ti.size)))
    cli = subprocess.Popen([PADDOCK, "--socket", daemon.sock, "image", "import", "big", str(big)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        helpers = wait_for(lambda: os.path.isdir(os.path.join(daemon.root, "images", ".partial-big"))
                           and helper_pids(daemon.pid), timeout=60, interval=0.01,
                           what="the import helper")
        daemon.kill9()
        wait_for(lambda: not any(pid_alive(p) for p in helpers), timeout=10, what="helpers to die")
    finally:
        cli.kill()
        cli.wait()
    daemon.start()
    assert partials(daemon) == []
    assert image_names(daemon) == ["base"]


@pytest.mark.parametrize("case,status,text", [
    ("longer", 413, "longer than the 10 bytes announced"),
    ("shorter", 422, "instead of 100000"),
    ("foreign", 422, "unsupported media type"),
    ("schema1", 422, "schema 1"),
    ("notjson", 422, "not a JSON object"),
    ("huge", 413, "larger than"),
    ("nolinux", 404, "no linux/amd64"),
    ("escape", 400, "Path contains '..'"),
    ("many", 422, "at most 128 layers"),
])
def test_pull_hostile_registry(daemon, registry, case, status, text):
    assert not os.path.exists("/tmp/paddock-evil-escape")
    r = daemon.api("POST", "/v1/images", {"pull": "%s/evil/%s:1" % (AUTHED, case), "insecure": True})
    assert r.status == status and text in r.error()[1], r
    assert not os.path.exists("/tmp/paddock-evil-escape")
    assert partials(daemon) == [] and image_names(daemon) == ["base"]


def test_client_going_away_cancels_the_pull(daemon, registry):
    cli = start_slow_pull(daemon, registry)
    try:
        helpers = helper_pids(daemon.pid)
        cli.send_signal(signal.SIGINT)
        cli.wait(10)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    wait_for(lambda: not any(pid_alive(p) for p in helpers) and partials(daemon) == [],
             timeout=15, what="the cancelled pull to be cleaned up")
    assert helpers  # the cancelled pull had its helper running
    assert image_names(daemon) == ["base"]
    assert "cancelled" in daemon.log() or "pull failed" in daemon.log()


def test_api_client_going_away_cancels_a_pull_that_sends_nothing(daemon, registry):
    """A plain JSON pull (no progress stream) whose client hangs up while the registry sends
    nothing is cancelled at once, not when the download next moves."""
    import socket
    registry.push("v4", "test/slow/busybox:v4")
    layer = os.path.join(daemon.root, "images", ".partial-busybox-v4", "layer-0")
    body = json.dumps({"pull": AUTHED + "/test/slow/busybox:v4", "insecure": True}).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect(daemon.sock)
    s.sendall(b"POST /v1/images HTTP/1.1\r\nHost: paddock\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    wait_for(lambda: os.path.exists(layer), timeout=30, what="the pull to reach its first layer")
    helpers = helper_pids(daemon.pid)
    assert helpers
    s.close()
    wait_for(lambda: not any(pid_alive(p) for p in helpers) and partials(daemon) == [],
             timeout=10, what="the abandoned pull to be cancelled")
    assert image_names(daemon) == ["base"]


def test_commit_does_not_take_the_name_of_a_pull_in_progress(daemon, registry):
    """A commit must not delete or replace the .partial directory of a running pull."""
    daemon.create("src", "--computer")
    cli = start_slow_pull(daemon, registry)
    layer = os.path.join(daemon.root, "images", ".partial-busybox-v4", "layer-0")
    try:
        r = daemon.api("POST", "/v1/envs/src/commit", {"image": "busybox-v4"})
        assert r.status == 409 and "being made" in r.error()[1], r
        assert os.path.exists(layer)  # the pull's files are untouched
    finally:
        cli.kill()
        cli.wait()
    # the disconnect cancels the pull; afterwards the name is free for a commit
    wait_for(lambda: partials(daemon) == [], timeout=15, what="the pull to be cancelled")
    assert "busybox-v4" not in image_names(daemon)
    r = daemon.api("POST", "/v1/envs/src/commit", {"image": "busybox-v4"})
    assert r.status in (200, 201), r


def fd_targets(pid):
    out = {}
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        try:
            out[int(fd)] = os.readlink(os.path.join(d, fd))
        except OSError:
            pass
    return out


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def test_image_helpers_run_without_host_root(daemon, registry):
    """A pull's helper parses what a hostile registry sends: it runs as the root of a user
    namespace of its own, mapped to an unprivileged host range, so a parser bug gives at most
    that range (no host capabilities, not the daemon's socket or state directory)."""
    cli = start_slow_pull(daemon, registry)
    try:
        helpers = helper_pids(daemon.pid)
        assert helpers
        init_userns = os.readlink("/proc/self/ns/user")
        for h in helpers:
            st = proc_status(h)
            assert all(int(u) >= 0x100000 for u in st["Uid"] + st["Gid"]), st["Uid"]
            assert os.readlink("/proc/%d/ns/user" % h) != init_userns
            assert st["Seccomp"] == ["2"]  # filtered
            with open("/proc/%d/uid_map" % h) as f:
                inside, outside, count = f.read().split()
            assert (inside, count) == ("0", "65536") and int(outside) >= 0x100000
            # the state directory (root only, 0700) is closed to the helper's uid
            assert os.stat(daemon.root).st_mode & 0o077 == 0
    finally:
        cli.kill()
        cli.wait()
    wait_for(lambda: partials(daemon) == [], timeout=15, what="the pull to be cancelled")


def test_build_runs_mmdebstrap_without_host_root(daemon, local_mirror):
    """A build runs package scripts: mmdebstrap and everything it starts run as ids of the
    image helpers' range, not as host root."""
    cli = subprocess.Popen([PADDOCK, "--socket", daemon.sock, "image", "build", "big",
                            "--variant", "extract", "--mirror", local_mirror,
                            "--packages", "tiny-big,tiny-hello"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = {}
    try:
        deadline = time.monotonic() + 120
        while cli.poll() is None and time.monotonic() < deadline:
            for h in helper_pids(daemon.pid):
                for pid in [h] + descendants(h):
                    try:
                        seen[pid] = proc_status(pid)["Uid"]
                    except (OSError, KeyError):
                        pass
            time.sleep(0.02)
        out, err = cli.communicate(timeout=60)
        assert cli.returncode == 0, err
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert len(seen) >= 2, seen  # the helper and mmdebstrap at least
    assert all(int(u) >= 0x100000 for uids in seen.values() for u in uids), seen
    # the image is owned by ids 0..65535 on disk, as every image
    r = rootfs(daemon, "big")
    assert os.stat(os.path.join(r, "etc/hello")).st_uid == 0
    assert os.stat(os.path.join(r, "home/user/owned")).st_uid == 1000


def test_image_helpers_hold_none_of_the_daemons_descriptors(daemon, registry):
    """The helper parses what a registry sends: the daemon's API socket, database, pidfds and
    sessions must not be within its reach."""
    daemon.create("other", "--computer")  # the daemon holds this environment's pidfd
    cli = start_slow_pull(daemon, registry)
    try:
        daemon_fds = fd_targets(daemon.pid)
        assert any("pidfd" in t for t in daemon_fds.values())  # the test can fail
        helpers = helper_pids(daemon.pid)
        assert helpers
        for h in helpers:
            for fd, target in fd_targets(h).items():
                if fd <= 2:
                    continue
                assert "pidfd" not in target and "paddock.db" not in target, (fd, target)
                assert target not in daemon_fds.values() or target.startswith("pipe:"), (fd, target)
    finally:
        cli.kill()
        cli.wait()
    wait_for(lambda: partials(daemon) == [], timeout=15, what="the pull to be cancelled")


def test_decompression_bomb_stops_at_the_image_limit(make_daemon, tmp_path):
    """A small archive that unpacks to more than --max-image-size fails with a clear error and
    leaves nothing; the pool is not filled."""
    d = make_daemon(extra_args=["--max-image-size", "24M"])
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz") as t:
        for i in range(3):
            ti = tarfile.TarInfo("zeros/%d" % i)
            ti.size = 32 << 20
            t.addfile(ti, io.BytesIO(bytes(ti.size)))
    assert os.path.getsize(bomb) < 1 << 20
    p = d.cli("image", "import", "bomb", str(bomb), check=False)
    assert p.returncode != 0, p.out
    assert "quota" in p.err.lower() or "space" in p.err.lower(), p.err
    assert partials(d) == [] and image_names(d) == ["base"]
    # an image under the limit still imports
    small = tmp_path / "small.tar.gz"
    with tarfile.open(small, "w:gz") as t:
        ti = tarfile.TarInfo("bin/data")
        ti.size = 4 << 20
        t.addfile(ti, io.BytesIO(bytes(ti.size)))
    d.cli("image", "import", "small", str(small))
    assert image_names(d) == ["base", "small"]
