#!/usr/bin/python3
"""Run a command next to a private paddockd that serves the E2B API, then remove everything.

    with_daemon.py COMMAND [ARGS...]

The daemon is started the way the integration tests start theirs (tests/conftest.py: state
under /var/tmp, its own socket, its own network namespace with loopback up) with the plain
gateway listener on 127.0.0.1:PORT and --domain e2b.test, and image "base": a busybox root
file system plus the host's /bin/bash and the libraries it needs (every E2B command runs
through /bin/bash), without the E2B user (the daemon adds it at create). COMMAND runs inside
the daemon's network namespace with E2B_API_URL = E2B_SANDBOX_URL = http://127.0.0.1:PORT,
E2B_API_KEY = a new agent token, E2B_OTHER_API_KEY = a second agent token, E2B_ADMIN_API_KEY
= an administrator token, E2B_DOMAIN_EXPECTED = the domain and PADDOCK_SOCKET. Exit status:
COMMAND's, or 1 when the clean-up found leaks."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))

import conftest  # noqa: E402  (the Daemon class of the integration tests)

PORT = 8444
DOMAIN = "e2b.test"


def make_image(rootfs):
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run(["ldd", "/bin/bash"], check=True, capture_output=True, text=True).stdout
    files = ["/bin/bash"] + [w for line in out.splitlines() for w in line.split()
                             if w.startswith("/")]
    for f in files:
        dst = os.path.join(rootfs, f.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.lexists(dst):
            os.unlink(dst)
        shutil.copy2(os.path.realpath(f), dst)
    # No E2B user in the image: creating a sandbox must add it.
    for name in ("passwd", "group"):
        p = os.path.join(rootfs, "etc", name)
        with open(p) as fh:
            lines = [ln for ln in fh if not ln.startswith("user:")]
        with open(p, "w") as fh:
            fh.writelines(lines)
    os.rmdir(os.path.join(rootfs, "home", "user"))


def token(daemon, name, admin=False):
    r = daemon.api("POST", "/v1/tokens", {"name": name, "admin": admin})
    assert r.status == 201, r
    return r.json["secret"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if os.geteuid() != 0:
        sys.exit("with_daemon.py: run as root (the daemon makes namespaces and cgroups)")
    img = tempfile.mkdtemp(prefix="paddock-e2b-img-", dir="/var/tmp")
    daemon = None
    rc = 1
    try:
        rootfs = os.path.join(img, "rootfs")
        make_image(rootfs)
        daemon = conftest.Daemon(rootfs, loopback=True, extra_args=[
            "--listen-plain", "127.0.0.1:%d" % PORT, "--domain", DOMAIN])
        url = "http://127.0.0.1:%d" % PORT
        env = dict(os.environ, PADDOCK_SOCKET=daemon.sock, E2B_API_URL=url, E2B_SANDBOX_URL=url,
                   E2B_API_KEY=token(daemon, "agent"), E2B_OTHER_API_KEY=token(daemon, "other"),
                   E2B_ADMIN_API_KEY=token(daemon, "admin", admin=True),
                   E2B_DOMAIN_EXPECTED=DOMAIN, PADDOCK_BIN=conftest.PADDOCK)
        env.pop("E2B_DEBUG", None)
        env.pop("E2B_DOMAIN", None)
        rc = subprocess.run(["nsenter", "--net=" + daemon.netns_path] + sys.argv[1:],
                            env=env).returncode
    finally:
        if daemon is not None:
            if rc != 0:
                sys.stderr.write("---- paddockd log (tail)\n%s\n" % daemon.log()[-6000:])
            problems = daemon.teardown()
            if problems:
                sys.stderr.write("clean-up found leaks:\n  %s\n" % "\n  ".join(problems))
                rc = rc or 1
        shutil.rmtree(img, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
