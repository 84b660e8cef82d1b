"""Fixtures of the Python SDK's tests: one private paddockd for the whole session (started
like the integration tests' daemons: its own root, socket, uid registry and network namespace,
with the busybox image "base"), a client per test that removes whatever the test left, and a
TLS-terminating proxy standing in for the gateway.

Run as root:  tests/sdk/run-python.sh   (PADDOCK_BUILD selects the binaries)"""
import importlib.util
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SDK = os.path.join(REPO, "sdk", "python")
if SDK not in sys.path:
    sys.path.insert(0, SDK)

# The integration harness (Daemon, image building, leak checks): tests/conftest.py, a parent
# conftest that pytest loads by itself (its fixtures image_dir, make_daemon, daemon apply here
# too). It is loaded once more under its own name for its classes.
_HARNESS = os.path.join(REPO, "tests", "conftest.py")
_spec = importlib.util.spec_from_file_location("paddock_it_conftest", _HARNESS)
it = importlib.util.module_from_spec(_spec)
sys.modules["paddock_it_conftest"] = it
_spec.loader.exec_module(it)

import paddock  # noqa: E402


@pytest.fixture(scope="session")
def sdk_daemon(image_dir):
    """One daemon for the session; its teardown fails the run on leaks."""
    d = it.Daemon(image_dir)
    yield d
    problems = d.teardown()
    if problems:
        pytest.fail("cleanup found leaks:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def client(sdk_daemon, monkeypatch):
    """A Paddock client on the session daemon's socket; every environment the test left is
    destroyed afterwards."""
    for v in ("PADDOCK_HOST", "PADDOCK_TOKEN", "PADDOCK_SOCKET", "PADDOCK_FINGERPRINT",
              "PADDOCK_CA"):
        monkeypatch.delenv(v, raising=False)
    c = paddock.Paddock(socket=sdk_daemon.sock)
    yield c
    c.close()
    for name in list(sdk_daemon.envs()):
        sdk_daemon.api("DELETE", "/v1/envs/%s?force=1" % name)


_names = iter(range(1, 1 << 30))


@pytest.fixture
def name(request):
    """A fresh environment name for this test."""
    base = request.node.name.split("[")[0].replace("test_", "")[:40].replace("_", "-")
    return "%s-%d" % (base, next(_names))


@pytest.fixture
def sandbox(client, name):
    return client.envs.create(name, kind="sandbox")


@pytest.fixture
def computer(client, name):
    return client.envs.create(name, kind="computer")


# --------------------------------------------------------------------------- TLS stand-in


class TLSProxy:
    """Terminates TLS on 127.0.0.1:<port> with a fresh self-signed certificate and forwards
    each connection's bytes to the daemon's unix socket (what the gateway will do, minus its
    checks). ``fingerprint`` is the certificate's SHA-256 as sha256:AB:CD:..; ``ca`` its file."""

    def __init__(self, unix_path):
        self.unix_path = unix_path
        self.tmp = tempfile.mkdtemp(prefix="paddock-sdk-tls-", dir="/var/tmp")
        self.cert = os.path.join(self.tmp, "cert.pem")
        self.key = os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", self.key, "-out", self.cert],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(["openssl", "x509", "-in", self.cert, "-noout", "-fingerprint",
                              "-sha256"], check=True, stdout=subprocess.PIPE).stdout.decode()
        self.fingerprint = "sha256:" + out.strip().split("=", 1)[1]
        self.ca = self.cert
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(self.cert, self.key)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.url = "https://127.0.0.1:%d" % self.port
        self.connections = 0
        self.stopping = False
        self.socks = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            c.settimeout(30)
            tls = self.ctx.wrap_socket(c, server_side=True)
            tls.settimeout(None)
        except (OSError, ssl.SSLError):
            c.close()
            return
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            u.connect(self.unix_path)
        except OSError:
            tls.close()
            return
        self.socks += [tls, u]

        def pump(src, dst):
            try:
                while True:
                    b = src.recv(65536)
                    if not b:
                        break
                    dst.sendall(b)
            except (OSError, ssl.SSLError):
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except (OSError, ssl.SSLError):
                    pass

        t = threading.Thread(target=pump, args=(u, tls), daemon=True)
        t.start()
        pump(tls, u)
        t.join(10)
        tls.close()
        u.close()

    def close(self):
        self.stopping = True
        self.lsock.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        subprocess.run(["rm", "-rf", self.tmp])


@pytest.fixture(scope="session")
def tls_proxy(sdk_daemon):
    p = TLSProxy(sdk_daemon.sock)
    yield p
    p.close()
