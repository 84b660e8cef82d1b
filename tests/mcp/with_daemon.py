#!/usr/bin/python3
"""Run a command next to a private paddockd, started the way the integration tests start theirs
(tests/conftest.py: state under /var/tmp, its own socket, its own network namespace, image
"base" imported from a busybox root filesystem), then remove everything it made.

    with_daemon.py COMMAND [ARGS...]

COMMAND gets PADDOCK_SOCKET (the daemon's socket), PADDOCK_BIN (the CLI of PADDOCK_BUILD, or
build/; PADDOCK_MCP_BIN overrides it, e.g. with a sanitizer build), and PADDOCK_TEST_TLS_URL and
PADDOCK_TEST_TLS_FINGERPRINT: a TLS front to the same daemon (tests/integration/tls_front.py, as
the remote-CLI tests use; it takes the Authorization header out, so any token passes) for the
remote way of `paddock --host URL --token T mcp`. Exit status: COMMAND's, or 1 when the
clean-up found leaks."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))

import conftest  # noqa: E402  (the Daemon class of the integration tests)
import tls_front  # noqa: E402  (on the path conftest sets up)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if os.geteuid() != 0:
        sys.exit("with_daemon.py: run as root (the daemon makes namespaces and cgroups)")
    img = tempfile.mkdtemp(prefix="paddock-mcp-img-", dir="/var/tmp")
    daemon = front = None
    rc = 1
    try:
        rootfs = os.path.join(img, "rootfs")
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                       stdout=subprocess.DEVNULL)
        daemon = conftest.Daemon(rootfs)
        front = tls_front.TLSFront(daemon.sock, tls_front.make_self_signed(img, "server"))
        env = dict(os.environ, PADDOCK_SOCKET=daemon.sock,
                   PADDOCK_BIN=os.environ.get("PADDOCK_MCP_BIN", conftest.PADDOCK), PADDOCK_REPO=REPO,
                   PADDOCK_TEST_TLS_URL=front.url, PADDOCK_TEST_TLS_FINGERPRINT=front.fingerprint)
        rc = subprocess.run(sys.argv[1:], env=env).returncode
    finally:
        if front is not None:
            front.close()
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
