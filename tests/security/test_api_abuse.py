"""Bad input gets a precise error and changes nothing."""
import json
import os


def assert_error(r, status, code, *words):
    assert r.status == status, r
    c, msg = r.error()
    assert c == code, r
    for w in words:
        assert w in msg, (w, r)
    return msg


def assert_nothing_left(daemon, name):
    assert daemon.api("GET", "/v1/envs/" + name).status == 404
    assert name not in daemon.envs()
    assert not os.path.exists(daemon.env_dir(name))
    assert daemon.cgroup_dirs(name) == []


def cli_error(daemon, *args, rc=1):
    p = daemon.cli(*args, check=False)
    assert p.returncode == rc, (args, p.returncode, p.out, p.err)
    assert p.out == "", p.out
    assert p.err.startswith("paddock: ") and p.err.endswith("\n") and p.err.count("\n") == 1, p.err
    return p.err


def test_unknown_environment(daemon):
    for method, path, body in (("GET", "/v1/envs/nope", None), ("DELETE", "/v1/envs/nope", None),
                               ("PATCH", "/v1/envs/nope", {"pids": 10}),
                               ("POST", "/v1/envs/nope/start", None), ("POST", "/v1/envs/nope/stop", None),
                               ("POST", "/v1/envs/nope/restart", None),
                               ("POST", "/v1/envs/nope/exec", {"cmd": ["true"]})):
        r = daemon.api(method, path, body)
        assert_error(r, 404, "not_found", "nope")
        assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    for args in (("inspect", "nope"), ("rm", "nope"), ("rm", "-f", "nope"), ("stop", "nope"),
                 ("start", "nope"), ("update", "nope", "--pids", "10"), ("exec", "nope", "--", "true")):
        assert "nope" in cli_error(daemon, *args)


def test_invalid_names(daemon):
    for name in ["bad/name", "-x", "a" * 64, "", ".hidden", "a b", "ünï", "x\n", "..", "a/../b"]:
        r = daemon.api("POST", "/v1/envs", {"name": name})
        assert_error(r, 400, "invalid_argument", "name")
    r = daemon.api("POST", "/v1/envs", {"name": 5})
    assert_error(r, 400, "invalid_argument", "name")
    assert daemon.envs() == {}
    assert os.listdir(os.path.join(daemon.root, "envs")) == []


def test_name_limits_and_cli(daemon):
    assert "name" in cli_error(daemon, "create", "bad/name")
    # an option-looking name is a usage error of the CLI (exit 2)
    assert daemon.cli("create", "-x", check=False).returncode == 2
    ok = "a" * 63
    daemon.create(ok)
    assert ok in daemon.envs()


def test_names_that_look_like_cgroup_files(daemon):
    """Names the API documents as valid (letters, digits, '-', '_', '.') either work or are
    refused as a bad *name*; they must not fail deep inside with an unexplained cgroup error."""
    wrong = []
    for name in ["cpu", "memory", "io", "tasks", "cgroup", "pids.x"]:
        r = daemon.api("POST", "/v1/envs", {"name": name})
        if r.status == 201:
            assert daemon.sh(name, "hostname") == name + "\n"
        elif r.status != 400 or "name" not in r.error()[1]:
            wrong.append((name, r.status, r.body.decode().strip()))
        else:
            assert_nothing_left(daemon, name)
    assert wrong == [], "valid names refused without naming the name: %s" % wrong


INVALID_FIELDS = [
    ("memory", "12Q", "memory"), ("memory", "-5M", "memory"), ("memory", "1M", "memory"),
    ("swap", "lots", "swap"), ("ttl", "5 parsecs", "ttl"), ("ttl", "-1", "ttl"),
    ("cpus", 0, "cpus"), ("cpus", "0", "cpus"), ("cpus", -1, "cpus"), ("cpus", "many", "cpus"),
    ("pids", 0, "pids"), ("pids", "ten", "pids"), ("pids", -3, "pids"),
    ("kind", "vm", "kind"), ("image", "../etc", "image"), ("autostart", "yes", "autostart"),
    ("env", {"BAD-KEY": "v"}, "env"), ("env", ["x"], "env"), ("labels", {"k": 1}, "labels"),
    ("network", {"mode": 7}, "network"), ("bogus", 1, "bogus"),
]


def test_invalid_create_fields(daemon):
    for field, value, word in INVALID_FIELDS:
        r = daemon.api("POST", "/v1/envs", {"name": "x1", field: value})
        assert_error(r, 400, "invalid_argument", word)
    assert_nothing_left(daemon, "x1")
    assert daemon.uid_claims() == []


def test_invalid_values_through_the_cli(daemon):
    assert "memory" in cli_error(daemon, "create", "y", "--memory", "12Q")
    assert "ttl" in cli_error(daemon, "create", "y", "--ttl", "5 parsecs")
    assert "cpus" in cli_error(daemon, "create", "y", "--cpus", "0")
    assert_nothing_left(daemon, "y")
    # usage errors exit 2
    for args in (("create",), ("frobnicate",), ("create", "y", "--no-such-option")):
        p = daemon.cli(*args, check=False)
        assert p.returncode == 2 and p.err.startswith("paddock: "), (args, p.returncode, p.err)


def test_duplicate_name(daemon):
    e = daemon.create("dup", "--computer")
    r = daemon.api("POST", "/v1/envs", {"name": "dup"})
    assert_error(r, 409, "conflict", "dup")
    assert "dup" in cli_error(daemon, "create", "dup")
    after = daemon.inspect("dup")
    assert after["pid"] == e["pid"] and after["kind"] == "computer" and after["state"] == "running"
    assert len(daemon.envs()) == 1


def test_missing_image(daemon):
    r = daemon.api("POST", "/v1/envs", {"name": "noimg", "image": "ghost-image"})
    assert_error(r, 422, "unprocessable", "ghost-image")
    assert "ghost-image" in cli_error(daemon, "create", "noimg", "--image", "ghost-image")
    assert_nothing_left(daemon, "noimg")
    assert daemon.uid_claims() == []


def test_oversized_body(daemon):
    body = json.dumps({"name": "big", "labels": {"k": "a" * (9 << 20)}}).encode()
    status, head, resp = daemon.raw_request(
        b"POST /v1/envs HTTP/1.1\r\nHost: paddock\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert status == 413, head
    assert json.loads(resp)["error"]["code"] == "too_large"
    # also when the size is not announced up front (chunked)
    c = daemon.conn()
    try:
        def chunks():
            for _ in range(9):
                yield b"a" * (1 << 20)
        try:
            c.request("POST", "/v1/envs", body=chunks(), encode_chunked=True,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            assert r.status == 413
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was sent; the daemon must still be fine
    finally:
        c.close()
    assert_nothing_left(daemon, "big")
    assert daemon.api("GET", "/v1/system").status == 200


def test_malformed_json(daemon):
    for raw in (b"{nope", b"[1,2]", b"", b"null", b'{"name": "x"', b"\xff\xfe", b'"name"'):
        r = daemon.api("POST", "/v1/envs", raw=raw, headers={"Content-Type": "application/json"})
        assert_error(r, 400, "invalid_argument")
    daemon.create("m1")
    r = daemon.api("PATCH", "/v1/envs/m1", raw=b"{oops")
    assert_error(r, 400, "invalid_argument")
    r = daemon.api("POST", "/v1/envs/m1/exec", raw=b"not json")
    assert_error(r, 400, "invalid_argument")
    assert set(daemon.envs()) == {"m1"}


ROUTES = [
    ("GET", "/v1/nope", 404), ("GET", "/v2/envs", 404), ("GET", "/", 404),
    ("GET", "/v1/envs/x/y/z/w", 404), ("POST", "/v1/envs/x/frobnicate", 404),
    ("GET", "/v1/envs/x/frobnicate", 404),
    ("PUT", "/v1/envs", 405), ("DELETE", "/v1/envs", 405), ("DELETE", "/v1/system", 405),
    ("POST", "/v1/system", 405), ("GET", "/v1/envs/x/start", 405), ("PUT", "/v1/envs/x", 405),
]


def test_routes_and_methods(daemon):
    daemon.create("x")
    wrong = []
    for method, path, status in ROUTES:
        r = daemon.api(method, path, raw=b"{}" if method in ("POST", "PUT") else None)
        code = "not_found" if status == 404 else "method_not_allowed"
        if r.status != status or r.error()[0] != code:
            wrong.append((method, path, r.status, r.body.decode().strip()))
    assert wrong == [], "wrong answers (expected 404 for unknown routes, 405 for wrong methods): %s" % wrong
    assert daemon.inspect("x")["state"] == "running"


def test_invalid_exec_requests(daemon):
    daemon.create("ex", "--computer")
    for body, word in (({}, "cmd"), ({"cmd": []}, "cmd"), ({"cmd": "ls"}, "cmd"),
                       ({"cmd": [1]}, "cmd"), ({"cmd": [""]}, "cmd"),
                       ({"cmd": ["true"], "cwd": "relative"}, "cwd"),
                       ({"cmd": ["true"], "timeout": "soon"}, "timeout"),
                       ({"cmd": ["true"], "max_output": "big"}, "max_output"),
                       ({"cmd": ["true"], "env": {"A B": "x"}}, "env"),
                       ({"cmd": ["true"], "stdin": "@@@", "stdin_encoding": "base64"}, "stdin"),
                       ({"cmd": ["true"], "stream": "yes"}, "stream"),
                       ({"cmd": ["true"], "user": ""}, "user"),
                       ({"cmd": ["true"], "what": 1}, "what")):
        r = daemon.api("POST", "/v1/envs/ex/exec", body)
        assert_error(r, 400, "invalid_argument", word)
    assert daemon.sh("ex", "echo ok") == "ok\n"


def test_invalid_patch_changes_nothing(daemon):
    daemon.create("pt", "--computer", "--memory", "256M", "--pids", "100")
    before = daemon.inspect("pt")["limits"]
    for body, word in (({"memory": "12Q"}, "memory"), ({"pids": 0}, "pids"), ({"cpus": 0}, "cpus"),
                       ({"name": "other"}, "name"), ({"pids": 50, "memory": "bad"}, "memory")):
        r = daemon.api("PATCH", "/v1/envs/pt", body)
        assert_error(r, 400, "invalid_argument", word)
    assert daemon.inspect("pt")["limits"] == before
    assert "memory" in cli_error(daemon, "update", "pt", "--memory", "12Q")


def test_failed_creates_leave_nothing_behind(daemon):
    """A burst of bad creates (every kind of failure) leaves no directory, cgroup, id claim or
    record, and the daemon keeps working."""
    bad = [{"name": "f1", "image": "missing"}, {"name": "f2", "memory": "12Q"},
           {"name": "f3", "kind": "vm"}, {"name": "f4", "cpus": 0}, {"name": "f5", "pids": 1}]
    for b in bad:
        assert daemon.api("POST", "/v1/envs", b).status in (400, 422)
    for b in bad:
        assert_nothing_left(daemon, b["name"])
    assert os.listdir(os.path.join(daemon.root, "envs")) == []
    assert daemon.uid_claims() == []
    daemon.create("f1")
    assert daemon.sh("f1", "echo ok") == "ok\n"
