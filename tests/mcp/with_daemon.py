#!/usr/bin/python3
"""Run a command next to a private paddockd, started the way the integration tests start theirs
(tests/conftest.py: state under /var/tmp, its own socket, its own network namespace, image
"base" imported from a busybox root filesystem), then remove everything it made.

    with_daemon.py COMMAND [ARGS...]

COMMAND gets PADDOCK_SOCKET (the daemon's socket) and PADDOCK_BIN (the CLI of PADDOCK_BUILD, or
build/). Exit status: COMMAND's, or 1 when the clean-up found leaks."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))

import conftest  # noqa: E402  (the Daemon class of the integration tests)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if os.geteuid() != 0:
        sys.exit("with_daemon.py: run as root (the daemon makes namespaces and cgroups)")
    img = tempfile.mkdtemp(prefix="paddock-mcp-img-", dir="/var/tmp")
    daemon = None
    rc = 1
    try:
        rootfs = os.path.join(img, "rootfs")
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                       stdout=subprocess.DEVNULL)
        daemon = conftest.Daemon(rootfs)
        env = dict(os.environ, PADDOCK_SOCKET=daemon.sock,
                   PADDOCK_BIN=conftest.PADDOCK, PADDOCK_REPO=REPO)
        rc = subprocess.run(sys.argv[1:], env=env).returncode
    finally:
        if daemon is not None:
            if rc != 0:
                sys.stderr.write("---- paddockd log (tail)\n%s\n" % daemon.log()[-4000:])
            problems = daemon.teardown()
            if problems:
                sys.stderr.write("clean-up found leaks:\n  %s\n" % "\n  ".join(problems))
                rc = rc or 1
        shutil.rmtree(img, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
