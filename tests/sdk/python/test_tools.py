"""paddock.tools: every tool called directly, as a framework would (by name, with JSON
arguments), against a real daemon."""
import base64
import json

import pytest

import paddock
from paddock.tools import get_tool, make_tools, validate

NAMES = ["create_environment", "run_command", "start_process", "read_process_output",
         "read_file", "write_file", "list_files", "snapshot_environment", "fork_environment",
         "destroy_environment", "list_environments", "set_network_policy"]


@pytest.fixture
def tools(client):
    return {t.name: t for t in make_tools(client, max_output=1000)}


def test_every_tool_has_a_name_description_and_schema(client):
    ts = make_tools(client)
    assert [t.name for t in ts] == NAMES
    for t in ts:
        s = t.spec()
        assert set(s) == {"name", "description", "parameters"}
        assert len(s["description"]) > 40
        p = s["parameters"]
        assert p["type"] == "object" and p["additionalProperties"] is False
        assert set(p["required"]) <= set(p["properties"])
        json.dumps(s)  # serialisable as is
    assert [t.name for t in make_tools(client, prefix="paddock_")][0] == \
        "paddock_create_environment"
    assert get_tool(ts, "run_command").name == "run_command"


def test_the_tools_drive_a_whole_session(tools, name, sdk_daemon):
    env = tools["create_environment"].invoke(json.dumps(
        {"name": name, "kind": "computer", "memory": "256M", "network": "none",
         "labels": {"agent": "t"}, "env": {"WHO": "agent"}}))
    assert env["name"] == name and env["state"] == "running" and env["kind"] == "computer"
    assert env["network_mode"] == "none" and env["limits"]["memory"] == 256 << 20

    r = tools["run_command"].invoke({"environment": name, "command": "echo $WHO; echo e >&2"})
    assert r == {"exit_code": 0, "stdout": "agent\n", "stderr": "e\n",
                 "duration_ms": r["duration_ms"]}
    r = tools["run_command"](environment=name, command=["sh", "-c", "exit 4"])
    assert r["exit_code"] == 4
    r = tools["run_command"](environment=name, command="pwd", cwd="/tmp", user="user")
    assert r["stdout"] == "/tmp\n"
    r = tools["run_command"](environment=name, command="cat", stdin="fed")
    assert r["stdout"] == "fed"
    r = tools["run_command"](environment=name, command="echo so-far; sleep 20", timeout=1)
    assert r["timed_out"] is True and r["stdout"] == "so-far\n"
    r = tools["run_command"](environment=name, command="seq 1 5000")
    assert len(r["stdout"]) < 1100 and r["stdout"].startswith("1\n")
    assert r["stdout"].endswith("5000\n") and "omitted" in r["stdout"] and "note" in r

    w = tools["write_file"](environment=name, path="/root/app/main.sh",
                            content="echo main-ran\n", mode="0755")
    assert w == {"path": "/root/app/main.sh", "size": 14}
    tools["write_file"](environment=name, path="/root/app/bin",
                        content=base64.b64encode(b"\xff\x00\xfe").decode(), encoding="base64")
    assert tools["read_file"](environment=name, path="/root/app/main.sh") == {
        "path": "/root/app/main.sh", "content": "echo main-ran\n", "encoding": "utf-8",
        "truncated": False}
    b = tools["read_file"](environment=name, path="/root/app/bin")
    assert b["encoding"] == "base64" and base64.b64decode(b["content"]) == b"\xff\x00\xfe"
    cut = tools["read_file"](environment=name, path="/root/app/main.sh", max_bytes=4)
    assert cut["content"] == "echo" and cut["truncated"] is True
    ls = tools["list_files"](environment=name, path="/root/app")
    assert [(e["name"], e["type"], e["size"]) for e in ls["entries"]] == [
        ("bin", "file", 3), ("main.sh", "file", 14)]

    p = tools["start_process"](environment=name, command="/root/app/main.sh; sleep 0.3; "
                                                          "echo done")
    assert p["state"] == "running" and p["id"] >= 1
    out = tools["read_process_output"](environment=name, id=p["id"], wait_seconds=20)
    assert out["state"] == "exited" and out["exit_code"] == 0
    assert out["stdout"] == "main-ran\ndone\n"
    slow = tools["start_process"](environment=name, command="echo first; sleep 30")
    out = tools["read_process_output"](environment=name, id=slow["id"], wait_seconds=0.5)
    assert out["state"] == "running" and out["exit_code"] is None

    s = tools["snapshot_environment"](environment=name, name="s1")
    assert s["name"] == "s1" and s["created_at"]
    tools["run_command"](environment=name, command="echo later > /root/app/later")
    f = tools["fork_environment"](environment=name, new_name=name + "-f", snapshot="s1")
    assert f["name"] == name + "-f" and f["state"] == "running"
    assert tools["run_command"](environment=name + "-f",
                                command="ls /root/app")["stdout"] == "bin\nmain.sh\n"

    n = tools["set_network_policy"](environment=name, allow=["example.com:443"])
    assert n == {"name": name, "network": {"mode": "allow", "allow": ["example.com:443"],
                                           "links": []}}
    n = tools["set_network_policy"](environment=name, mode="none", links=[name + "-f"])
    assert n["network"]["mode"] == "none" and n["network"]["links"] == [name + "-f"]

    listed = tools["list_environments"]()
    assert sorted(e["name"] for e in listed["environments"]) == [name, name + "-f"]
    assert [e["name"] for e in tools["list_environments"](label="agent=t")["environments"]] \
        == [name, name + "-f"]  # a fork keeps the labels

    assert tools["destroy_environment"](environment=name + "-f") == {"destroyed": name + "-f"}
    assert tools["destroy_environment"].run({"environment": name}) == {"destroyed": name}
    assert tools["list_environments"]() == {"environments": []}


def test_tool_errors_carry_the_servers_message(tools, sandbox):
    r = tools["run_command"].run({"environment": "no-such-env", "command": "true"})
    assert r["error"]["code"] == "not_found" and "no-such-env" in r["error"]["message"]
    with pytest.raises(paddock.NotFound):
        tools["read_file"](environment=sandbox.name, path="/nope")
    r = tools["snapshot_environment"].run({"environment": sandbox.name})
    assert r["error"]["code"] == "unprocessable"
    r = tools["write_file"].run({"environment": sandbox.name, "path": "/etc/x", "content": "x"})
    assert r["error"]["code"] == "forbidden"
    r = tools["create_environment"].run({"name": sandbox.name})
    assert r["error"]["code"] == "conflict"
    # argument errors are found before any request
    for args, words in [({"command": "true"}, "environment"),
                        ({"environment": "e", "command": 5}, "command"),
                        ({"environment": "e", "command": "x", "colour": 1}, "colour"),
                        ({"environment": "e", "command": "x", "timeout": -1}, "timeout"),
                        ({"environment": "e", "command": ["a", 1]}, "command[1]")]:
        r = tools["run_command"].run(args)
        assert r["error"]["code"] == "invalid_argument" and words in r["error"]["message"], r
    r = tools["create_environment"].run({"kind": "vm"})
    assert r["error"]["code"] == "invalid_argument" and "kind" in r["error"]["message"]
    assert tools["list_environments"].run("not json")["error"]["code"] == "invalid_argument"
    with pytest.raises(paddock.InvalidArgument):
        validate(tools["write_file"].parameters, {"environment": "e", "path": "/p"})
