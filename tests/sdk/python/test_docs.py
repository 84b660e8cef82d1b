"""docs/sdk-python.md and the examples run: every Python example on the page (the first one,
the ten-line example, also over HTTPS), examples/agent_loop.py, and every route the SDK's
docstrings and the page name is a route of docs/API.md."""
import inspect
import os
import re
import subprocess
import sys

import pytest

import paddock
import paddock.tools

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
DOC = os.path.join(REPO, "docs", "sdk-python.md")
API_MD = os.path.join(REPO, "docs", "API.md")
ROUTE = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (/v1/[^\s`?,)]*|/metrics)")


def python_blocks():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def run_python(code, env_vars, timeout=120):
    env = dict(os.environ)
    for v in ("PADDOCK_HOST", "PADDOCK_TOKEN", "PADDOCK_SOCKET", "PADDOCK_FINGERPRINT",
              "PADDOCK_CA"):
        env.pop(v, None)
    env.update(env_vars)
    env["PYTHONPATH"] = os.path.join(REPO, "sdk", "python")
    return subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, timeout=timeout, cwd="/tmp")


def test_the_page_starts_with_a_ten_line_example():
    with open(DOC) as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("# ") and lines[1] == "" and lines[2] == "```python"
    end = lines.index("```", 3)
    assert end - 3 <= 10, "the first example has %d lines" % (end - 3)
    assert len(python_blocks()) >= 5


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_every_python_example_runs(client, sdk_daemon, index):
    code = python_blocks()[index]
    p = run_python(code, {"PADDOCK_SOCKET": sdk_daemon.sock})
    out = p.stdout.decode()
    assert p.returncode == 0, "example %d failed:\n%s\n%s" % (index, out, p.stderr.decode())
    assert sdk_daemon.envs() == {}, "the example left environments behind"
    expect = {0: ["0 hello from ", "echo hello from $(hostname)"],
              1: ["stdout b'line 3\\n'", "exit code 3", "progress", "timed out after"],
              2: ["['sh -c echo listening; sleep 30']", "exit code 143", "listening"],
              3: ["create /workspace/out", "42", "/tmp/copy/out/answer"],
              4: ["30 100", "exit code 5"],
              5: ['"name": "run_command"', "'stdout': 'Linux\\n'", "'code': 'not_found'"]}
    for want in expect.get(index, []):
        assert want in out, "example %d: %r not in its output:\n%s" % (index, want, out)


def test_the_first_example_over_https(client, sdk_daemon, gateway):
    p = run_python(python_blocks()[0], {"PADDOCK_HOST": gateway.url,
                                        "PADDOCK_FINGERPRINT": gateway.fingerprint,
                                        "PADDOCK_TOKEN": gateway.token})
    assert p.returncode == 0, p.stderr.decode()
    assert "0 hello from " in p.stdout.decode()
    assert sdk_daemon.envs() == {}


def test_agent_loop_example(client, sdk_daemon):
    p = subprocess.run([sys.executable, os.path.join(REPO, "examples", "agent_loop.py")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=dict(os.environ, PADDOCK_SOCKET=sdk_daemon.sock))
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    assert out.rstrip().endswith("all steps passed"), out
    assert out.count("\nstep ") + out.startswith("step ") == 13
    assert '"stdout": "55\\n2\\n"' in out and "832040" in out
    assert sdk_daemon.envs() == {}, "the example cleans up"


def test_agent_loop_fails_loudly_and_still_cleans_up(client, sdk_daemon):
    p = subprocess.run([sys.executable, os.path.join(REPO, "examples", "agent_loop.py"),
                        "--image", "no-such-image"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120,
                       env=dict(os.environ, PADDOCK_SOCKET=sdk_daemon.sock))
    assert p.returncode == 1 and "FAILED" in p.stdout.decode()
    assert sdk_daemon.envs() == {}


def api_routes():
    with open(API_MD) as f:
        return set(re.findall(r"^### `(\w+) (/\S+)`", f.read(), re.M))


NO_REQUEST = {"Paddock.close"}


def public_methods():
    for cls in (paddock.Paddock, paddock.Envs, paddock.Env, paddock.Procs, paddock.Files,
                paddock.Tokens):
        for n, f in inspect.getmembers(cls, inspect.isfunction):
            if not n.startswith("_"):
                yield "%s.%s" % (cls.__name__, n), f


def test_every_method_names_its_route():
    routes = api_routes()
    assert len(routes) > 30
    for where, f in public_methods():
        if where in NO_REQUEST:
            continue
        doc = inspect.getdoc(f) or ""
        named = ROUTE.findall(doc)
        assert named, "%s: the docstring names no route" % where
        for method, path in named:
            assert (method, path) in routes, "%s names %s %s, not in API.md" % (
                where, method, path)


def test_routes_on_the_page_exist():
    routes = api_routes()
    with open(DOC) as f:
        text = f.read()
    found = ROUTE.findall(text)
    assert len(found) > 25
    for method, path in found:
        assert (method, path) in routes, "docs/sdk-python.md names %s %s" % (method, path)
