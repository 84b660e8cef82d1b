"""Fixtures of the Python SDK's tests: one private paddockd for the whole session (started
like the integration tests' daemons: its own root, socket, uid registry and network namespace,
with the busybox image "base" and the network gateway's TLS listener), a client per test that
removes whatever the test left, and the gateway reached from inside the daemon's network
namespace.

Run as root:  tests/sdk/run-python.sh   (PADDOCK_BUILD selects the binaries)"""
import ctypes
import importlib.util
import os
import sys

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
    d = it.Daemon(image_dir, loopback=True,
                  extra_args=["--listen", "127.0.0.1:%d" % GATEWAY_PORT,
                              "--listen", "[::1]:%d" % GATEWAY_PORT])
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


# --------------------------------------------------------------------------- the gateway

GATEWAY_PORT = 8443  # inside the session daemon's own network namespace: always free


class Gateway:
    """The session daemon's TLS listener (paddockd --listen, the real gateway): ``url``,
    ``port``, ``fingerprint`` (its certificate's SHA-256 as GET /v1/system reports it), ``ca``
    (the certificate file in the state directory, ROOT/tls/cert.pem) and ``token`` (an admin
    token's secret: the gateway refuses requests without one)."""

    def __init__(self, daemon):
        gw = daemon.api("GET", "/v1/system").json["gateway"]
        self.port = GATEWAY_PORT
        assert gw["listen"][0] == "127.0.0.1:%d" % self.port, gw
        self.url = "https://127.0.0.1:%d" % self.port
        self.fingerprint = gw["tls_fingerprint"]
        self.ca = os.path.join(daemon.root, "tls", "cert.pem")
        r = daemon.api("POST", "/v1/tokens", body={"name": "sdk-gateway-admin", "admin": True})
        assert r.status == 201, r
        self.token = r.json["secret"]


@pytest.fixture(scope="session")
def gateway_info(sdk_daemon):
    return Gateway(sdk_daemon)


@pytest.fixture
def gateway(gateway_info, sdk_daemon):
    """The gateway, with this test (its main thread, and every thread or process it starts)
    inside the daemon's network namespace where the listener is; back in the host's namespace
    afterwards. The SDK connects as it would to any host: nothing of it is patched."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(sdk_daemon.netns_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(target, it.CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns %s: %s" % (sdk_daemon.netns_path, os.strerror(e)))
        yield gateway_info
    finally:
        if libc.setns(home, it.CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns back to the host: %s" % os.strerror(e))
        os.close(home)
        os.close(target)
