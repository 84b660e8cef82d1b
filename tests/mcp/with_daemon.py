#!/usr/bin/python3
"""Run a command next to a private paddockd, started the way the integration tests start theirs
(tests/conftest.py: state under /var/tmp, its own socket, its own network namespace, image
"base" imported from a busybox root filesystem), then remove everything it made.

    with_daemon.py COMMAND [ARGS...]

The daemon serves its API through the network gateway too (paddockd --listen 127.0.0.1:8443,
TLS with its self-signed certificate, and --listen-plain 127.0.0.1:8444) inside its network
namespace (loopback up), and COMMAND runs in that namespace, so it reaches them as a remote
client would. COMMAND gets PADDOCK_SOCKET (the daemon's socket), PADDOCK_BIN (the CLI of
PADDOCK_BUILD, or build/; PADDOCK_MCP_BIN overrides it, e.g. with a sanitizer build),
PADDOCK_TEST_TLS_URL, PADDOCK_TEST_TLS_FINGERPRINT and PADDOCK_TEST_PLAIN_URL (the listeners),
PADDOCK_TEST_TOKEN (an admin token's secret: the gateway wants one), and NODE_EXTRA_CA_CERTS
(the daemon's certificate, so node's fetch trusts the TLS listener). Exit status: COMMAND's, or
1 when the clean-up found leaks."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))

import conftest  # noqa: E402  (the Daemon class of the integration tests)

PORT = 8443  # inside the daemon's own network namespace: always free


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
        daemon = conftest.Daemon(rootfs, loopback=True,
                                 extra_args=["--listen", "127.0.0.1:%d" % PORT,
                                             "--listen-plain", "127.0.0.1:%d" % (PORT + 1)])
        gw = daemon.api("GET", "/v1/system").json["gateway"]
        r = daemon.api("POST", "/v1/tokens", body={"name": "mcp-test-admin", "admin": True})
        assert r.status == 201, r
        # node reads the certificate at start; the state directory is root's alone
        ca = os.path.join(img, "gateway-cert.pem")
        shutil.copyfile(os.path.join(daemon.root, "tls", "cert.pem"), ca)
        env = dict(os.environ, PADDOCK_SOCKET=daemon.sock,
                   PADDOCK_BIN=os.environ.get("PADDOCK_MCP_BIN", conftest.PADDOCK), PADDOCK_REPO=REPO,
                   PADDOCK_TEST_TLS_URL="https://127.0.0.1:%d" % PORT,
                   PADDOCK_TEST_TLS_FINGERPRINT=gw["tls_fingerprint"],
                   PADDOCK_TEST_PLAIN_URL="http://127.0.0.1:%d" % (PORT + 1),
                   PADDOCK_TEST_TOKEN=r.json["secret"], NODE_EXTRA_CA_CERTS=ca)
        rc = subprocess.run(["nsenter", "--net=" + daemon.netns_path] + sys.argv[1:],
                            env=env).returncode
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
