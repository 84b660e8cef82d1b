"""Hostile images: a package whose maintainer script attacks the host during `paddock image
build`. Package scripts run as root of the build's chroot, which is the root of the image
helpers' own user namespace (an unprivileged host id range), never host root: whatever the
script tries against the host is refused, and the image is still made. (Hostile archives and
registries: tests/integration/test_images.py and tests/unit/test_image.c.)"""
import hashlib
import os
import shutil
import subprocess
import tempfile

import pytest

HOST_BINARIES = ["/usr/bin/dpkg", "/usr/bin/dpkg-deb", "/usr/bin/dpkg-split",
                 "/usr/bin/dpkg-query", "/usr/bin/tar"]
APPLETS = ["sh", "rm", "diff", "id", "touch", "cat", "ls", "mkdir", "mknod", "start-stop-daemon"]

# Each attempt is what a script running as host root could do; the script notes the outcome in
# /hostile-results inside the image. The module path is written back unchanged, so even a
# broken confinement changes nothing while the test still sees that the write was allowed.
POSTINST = """#!/bin/sh
r=/hostile-results
: > $r
try() { if sh -c "$2" >/trash 2>&1; then echo "$1 ALLOWED" >> $r; else echo "$1 refused" >> $r; fi; }
try write-host-etc "echo pwned > /proc/1/root/etc/paddock-hostile-postinst"
try read-host-shadow "cat /proc/1/root/etc/shadow"
try list-state-dir "ls /proc/1/root{state}"
try write-state-dir "echo pwned > /proc/1/root{state}/hostile"
try set-module-loader "cat /proc/sys/kernel/modprobe > /m && cat /m > /proc/sys/kernel/modprobe"
try make-block-device "mknod /hostile-sda b 8 0"
echo done >> $r
"""


def shared_libraries(binary):
    out = subprocess.run(["ldd", binary], check=True, stdout=subprocess.PIPE, text=True).stdout
    libs = set()
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.add(parts[2])
        elif parts and parts[0].startswith("/"):
            libs.add(parts[0])
    return libs


def make_deb(work, name, files, arch="all", depends=None, postinst=None):
    """files: (path in the package, host file | "->target" | "=text" | "dir")."""
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "DEBIAN"))
    control = ("Package: %s\nVersion: 1.0\nArchitecture: %s\nMaintainer: t <t@example.org>\n"
               "Description: test package\n" % (name, arch))
    if depends:
        control += "Depends: %s\n" % depends
    with open(os.path.join(d, "DEBIAN", "control"), "w") as f:
        f.write(control)
    if postinst:
        with open(os.path.join(d, "DEBIAN", "postinst"), "w") as f:
            f.write(postinst)
        os.chmod(os.path.join(d, "DEBIAN", "postinst"), 0o755)
    for path, src in files:
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if src == "dir":
            os.makedirs(p)
        elif src.startswith("->"):
            os.symlink(src[2:], p)
        elif src.startswith("="):
            with open(p, "w") as f:
                f.write(src[1:])
            os.chmod(p, 0o755)
        else:
            shutil.copy2(src, p)
    return d


@pytest.fixture
def hostile_mirror(daemon):
    """<root>/mirrors/hostile: tiny-dpkg (the host's dpkg, GNU tar and busybox, enough for
    mmdebstrap's custom variant to install packages and run their scripts) and tiny-hostile,
    whose postinst attacks the host."""
    busybox = os.path.realpath(shutil.which("busybox"))
    files = [(b.lstrip("/"), b) for b in HOST_BINARIES]
    for b in HOST_BINARIES:
        files += [(lib.lstrip("/"), os.path.realpath(lib)) for lib in shared_libraries(b)]
    files += [("usr/bin/busybox", busybox), ("bin/sh", "->/usr/bin/busybox"),
              ("usr/sbin/ldconfig", "=#!/bin/sh\nexit 0\n"), ("etc/dpkg/dpkg.cfg", "=\n"),
              ("proc", "dir")]
    files += [("usr/bin/" + a, "->busybox") for a in APPLETS]
    work = tempfile.mkdtemp(prefix="paddock-it-hostile-", dir="/var/tmp")
    repo = os.path.join(daemon.root, "mirrors", "hostile")
    os.makedirs(repo)
    pkgs = [make_deb(work, "tiny-dpkg", files, arch="amd64"),
            make_deb(work, "tiny-hostile", [("etc/hostile", "=installed\n")], depends="tiny-dpkg",
                     postinst=POSTINST.replace("{state}", daemon.root))]
    stanzas = []
    for d in pkgs:
        deb = os.path.basename(d) + ".deb"
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "-b", d,
                        os.path.join(repo, deb)], check=True, stdout=subprocess.DEVNULL)
        ctl = subprocess.run(["dpkg-deb", "-f", os.path.join(repo, deb)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
        with open(os.path.join(repo, deb), "rb") as f:
            data = f.read()
        stanzas.append("%s\nFilename: ./%s\nSize: %d\nSHA256: %s\n"
                       % (ctl, deb, len(data), hashlib.sha256(data).hexdigest()))
    with open(os.path.join(repo, "Packages"), "w") as f:
        f.write("\n".join(stanzas))
    shutil.rmtree(work)
    yield "local:hostile"
    assert not os.path.exists("/etc/paddock-hostile-postinst")


def test_hostile_maintainer_script_reaches_nothing_on_the_host(daemon, hostile_mirror):
    before = sorted(os.listdir(daemon.root))
    p = daemon.cli("image", "build", "hostile", "--variant", "custom", "--mirror", hostile_mirror,
                   "--packages", "tiny-hostile", timeout=300)
    assert p.out == "hostile\n", p.err
    rootfs = os.path.join(daemon.root, "images", "hostile", "rootfs")
    with open(os.path.join(rootfs, "etc/hostile")) as f:
        assert f.read() == "installed\n"  # the package was installed and its script ran
    with open(os.path.join(rootfs, "hostile-results")) as f:
        results = f.read().splitlines()
    assert results[-1] == "done" and len(results) == 7, results
    assert all(line.endswith(" refused") for line in results[:-1]), results
    assert not os.path.exists("/etc/paddock-hostile-postinst")
    assert not os.path.exists(os.path.join(daemon.root, "hostile"))
    assert sorted(os.listdir(daemon.root)) == before
    assert not os.path.lexists(os.path.join(rootfs, "hostile-sda"))
