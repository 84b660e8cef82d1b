"""POST /mcp: paddockd serves the MCP tools itself over streamable HTTP, through the gateway's
TLS listener, with the API's tokens.

What a user would notice: an MCP client pointed at https://HOST:PORT/mcp with an agent token
initializes, lists exactly the tools `paddock mcp` lists (same names, descriptions, schemas),
and its tool calls act as that token: the environment it creates is the token's, another
token's tool calls cannot see or touch it, and the token's quotas refuse what they refuse over
REST. A bad token is a 401 before any JSON-RPC; malformed messages get JSON-RPC errors with the
status the transport asks for; GET (no server stream) is 405 and a foreign Origin is 403."""
import json
import subprocess

import pytest

from conftest import GATEWAY_PORT, PADDOCK, TLSConnection, gateway_info

PORT = GATEWAY_PORT
PLAIN = GATEWAY_PORT + 1
VERSION = "2025-06-18"


def make_token(d, name, **fields):
    r = d.api("POST", "/v1/tokens", body=dict(fields, name=name))
    assert r.status in (200, 201), r
    return r.json["secret"]


class MCP:
    """An MCP client of POST /mcp over the gateway (TLS pinned to the daemon's certificate, or
    its plain loopback listener)."""

    def __init__(self, d, token, tls=True):
        self.d = d
        self.token = token
        self.tls = tls
        self.fp = gateway_info(d)["tls_fingerprint"] if tls else None
        self.next_id = 0

    def post(self, body, headers=None, raw=None, path="/mcp", method="POST"):
        """(status, headers, body bytes)."""
        c = TLSConnection(self.d.netns_path, "127.0.0.1", PORT if self.tls else PLAIN, self.fp,
                          tls=self.tls)
        try:
            h = {"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": VERSION}
            if self.token:
                h["Authorization"] = "Bearer " + self.token
            h.update(headers or {})
            h = {k: v for k, v in h.items() if v is not None}
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def rpc(self, method, params=None, **kw):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        status, headers, body = self.post(msg, **kw)
        assert status == 200, (status, body)
        assert headers["content-type"].startswith("application/json"), headers
        reply = json.loads(body)
        assert reply["id"] == self.next_id and reply["jsonrpc"] == "2.0", reply
        return reply

    def call(self, name, args):
        reply = self.rpc("tools/call", {"name": name, "arguments": args})
        assert "result" in reply, reply
        return reply["result"]

    def ok(self, name, args):
        res = self.call(name, args)
        assert res["isError"] is False, res
        return res


def stdio_tools(d):
    """tools/list of `paddock mcp` on stdio, on the same daemon."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": VERSION, "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    p = subprocess.run([PADDOCK, "--socket", d.sock, "mcp"],
                       input="".join(json.dumps(m) + "\n" for m in lines).encode(),
                       stdout=subprocess.PIPE, timeout=60, check=True)
    replies = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert [r["id"] for r in replies] == [1, 2], replies
    return replies[1]["result"]["tools"]


def test_initialize_and_tools_match_the_cli(gateway_daemon):
    d = gateway_daemon
    m = MCP(d, make_token(d, "mcp-agent"))
    init = m.rpc("initialize", {"protocolVersion": VERSION, "capabilities": {},
                                "clientInfo": {"name": "pytest", "version": "1"}})["result"]
    assert init["protocolVersion"] == VERSION
    assert init["serverInfo"]["name"] == "paddock"
    assert "tools" in init["capabilities"]
    assert "create_environment" in init["instructions"]
    # an older revision the client asks for is the one answered
    old = m.rpc("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                               "clientInfo": {"name": "pytest", "version": "1"}},
                headers={"MCP-Protocol-Version": None})["result"]
    assert old["protocolVersion"] == "2025-03-26"
    # a notification: 202 and no body; no session is kept, so no Mcp-Session-Id
    status, headers, body = m.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (status, body) == (202, b""), (status, body)
    assert "mcp-session-id" not in headers
    assert m.rpc("ping")["result"] == {}
    tools = m.rpc("tools/list")["result"]["tools"]
    assert len(tools) == 13
    assert tools == stdio_tools(d)  # names, titles, descriptions and schemas: one copy


def test_tool_calls_act_as_the_token(gateway_daemon):
    d = gateway_daemon
    a = MCP(d, make_token(d, "agent-a"))
    b = MCP(d, make_token(d, "agent-b"))
    env = a.ok("create_environment", {"name": "mcp-a", "image": "base", "kind": "sandbox"})
    assert env["structuredContent"]["name"] == "mcp-a"
    # the environment is the token's, as if made over REST with it
    r = d.api("GET", "/v1/envs/mcp-a")
    assert r.status == 200 and r.json.get("owner") == "agent-a", r
    res = a.ok("run_command", {"environment": "mcp-a", "command": "echo through the gateway; id -u"})
    assert res["structuredContent"]["stdout"] == "through the gateway\n0\n"
    assert res["structuredContent"]["exit_code"] == 0
    a.ok("write_file", {"environment": "mcp-a", "path": "/tmp/x.txt", "content": "hello\n"})
    assert a.ok("read_file", {"environment": "mcp-a", "path": "/tmp/x.txt"})["content"][0]["text"] == "hello\n"
    # a background process and its output: several API requests inside one tool call
    p = a.ok("start_process", {"environment": "mcp-a", "command": "sleep 0.3; echo late"})
    pid = p["structuredContent"]["id"]
    out = a.ok("read_process_output", {"environment": "mcp-a", "id": pid, "wait": True})
    assert out["structuredContent"]["state"] == "exited", out
    assert out["structuredContent"]["stdout"] == "late\n"
    # another token sees nothing of it, through MCP or REST
    names = [e["name"] for e in b.ok("list_environments", {})["structuredContent"]["envs"]]
    assert "mcp-a" not in names
    res = b.call("run_command", {"environment": "mcp-a", "command": ["true"]})
    assert res["isError"] is True
    assert "no such environment: mcp-a" in res["content"][0]["text"]
    res = b.call("destroy_environment", {"environment": "mcp-a"})
    assert res["isError"] is True
    assert [e["name"] for e in a.ok("list_environments", {})["structuredContent"]["envs"]] == ["mcp-a"]
    # each API request of a tool call is the token's in the audit log, from the client's
    # address, like a REST call
    records = d.api("GET", "/v1/audit?token=agent-a").json["records"]
    mine = [x for x in records if x.get("env") == "mcp-a"]
    assert mine, records
    assert all(x["peer"].startswith("127.0.0.1:") for x in mine), mine
    assert not d.api("GET", "/v1/audit?token=agent-b&env=mcp-a").json["records"]
    a.ok("destroy_environment", {"environment": "mcp-a"})
    assert d.api("GET", "/v1/envs/mcp-a").status == 404


def test_quotas_apply(gateway_daemon):
    d = gateway_daemon
    q = MCP(d, make_token(d, "agent-q", max_envs=1))
    q.ok("create_environment", {"name": "mcp-q1", "image": "base"})
    res = q.call("create_environment", {"name": "mcp-q2", "image": "base"})
    assert res["isError"] is True
    assert "quota_exceeded" in res["content"][0]["text"], res
    assert d.api("GET", "/v1/envs/mcp-q2").status == 404
    q.ok("destroy_environment", {"environment": "mcp-q1"})


def test_refusals_and_malformed_messages(gateway_daemon):
    d = gateway_daemon
    token = make_token(d, "agent-r")
    m = MCP(d, token)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # no token, a wrong token: 401 before any JSON-RPC (TLS and plain listener alike)
    for tls in (True, False):
        assert MCP(d, None, tls=tls).post(ping)[0] == 401
        assert MCP(d, "pdk_" + "A" * 43, tls=tls).post(ping)[0] == 401
    assert MCP(d, token, tls=False).rpc("ping")["result"] == {}
    # no event stream offered, no sessions to end
    assert m.post(None, method="GET")[0] == 405
    assert m.post(None, method="DELETE")[0] == 405
    # a web page of another site
    assert m.post(ping, headers={"Origin": "http://evil.example"})[0] == 403
    assert m.post(ping, headers={"Origin": "http://127.0.0.1:3000"})[0] == 200
    # an unknown protocol revision, a body that is not JSON
    assert m.post(ping, headers={"MCP-Protocol-Version": "1999-01-01"})[0] == 400
    assert m.post(ping, headers={"Content-Type": "text/plain"})[0] == 415
    status, _, body = m.post(None, raw=b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700, body
    status, _, body = m.post({"jsonrpc": "2.0"})
    assert status == 400 and json.loads(body)["error"]["code"] == -32600, body
    # protocol errors of a request: 200 with a JSON-RPC error
    assert m.rpc("no/such/method")["error"]["code"] == -32601
    reply = m.rpc("tools/call", {"name": "run_command", "arguments": {}})
    assert reply["error"]["code"] == -32602
    assert "environment" in reply["error"]["message"]
    assert m.rpc("tools/call", {"name": "nope", "arguments": {}})["error"]["code"] == -32602
    # batches: in 2025-03-26, not in 2025-06-18
    batch = [ping, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "two", "method": "tools/list"}]
    status, _, body = m.post(batch, headers={"MCP-Protocol-Version": "2025-03-26"})
    assert status == 200, body
    replies = json.loads(body)
    assert [r["id"] for r in replies] == [1, "two"]
    assert len(replies[1]["result"]["tools"]) == 13
    assert m.post(batch)[0] == 400
    assert m.post([], headers={"MCP-Protocol-Version": "2025-03-26"})[0] == 400


def test_local_socket_is_the_administrator(gateway_daemon):
    d = gateway_daemon
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_environments", "arguments": {}}}
    r = d.api("POST", "/mcp", body=body)
    assert r.status == 200, r
    assert r.json["result"]["isError"] is False


def test_api_md_example(gateway_daemon):
    """The curl example of docs/API.md's POST /mcp, run against this daemon's socket."""
    import os
    import re
    d = gateway_daemon
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "API.md")) as f:
        text = f.read()
    section = text[text.index("### `POST /mcp`"):]
    cmd = re.search(r"```sh\n(curl .*?)\n```", section, re.S).group(1)
    cmd = cmd.replace("/run/paddock/paddock.sock", d.sock)
    out = subprocess.run(["sh", "-c", cmd], stdout=subprocess.PIPE, timeout=60, check=True).stdout
    tools = json.loads(out)["result"]["tools"]
    assert [t["name"] for t in tools] == [t["name"] for t in stdio_tools(d)]


def test_mcp_md_curl_example(gateway_daemon, tmp_path):
    """The curl example of docs/mcp.md, run inside the daemon's network namespace with its
    certificate file and an agent token: the token's (empty) list of environments."""
    import os
    import re
    import shutil
    d = gateway_daemon
    d.create("admins-own", "--sandbox")
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "mcp.md")) as f:
        text = f.read()
    section = text[text.index("## paddockd's own endpoint"):]
    cmd = re.search(r"```sh\n(curl .*?)\n```", section, re.S).group(1)
    assert "127.0.0.1:%d/mcp" % PORT in cmd
    shutil.copyfile(os.path.join(d.root, "tls", "cert.pem"), str(tmp_path / "cert.pem"))
    out = subprocess.run(["nsenter", "--net=" + d.netns_path, "sh", "-c", cmd],
                         stdout=subprocess.PIPE, timeout=60, check=True, cwd=str(tmp_path),
                         env={"PATH": "/usr/bin:/bin",
                              "PADDOCK_TOKEN": make_token(d, "curl-agent")}).stdout
    result = json.loads(out)["result"]
    assert result["isError"] is False and result["structuredContent"] == {"envs": []}, result


def test_calls_run_side_by_side_and_a_client_may_leave(gateway_daemon):
    """A tool call waits for its command without holding the daemon: other clients, REST and
    MCP, are answered meanwhile, and calls of several clients overlap. A client that hangs up
    in the middle of a call leaves nothing broken behind."""
    import threading
    import time
    d = gateway_daemon
    m = MCP(d, make_token(d, "agent-p"))
    m.ok("create_environment", {"name": "mcp-p", "image": "base"})
    results = {}

    def slow(i):
        c = MCP(d, m.token)
        results[i] = c.ok("run_command", {"environment": "mcp-p",
                                          "command": "sleep 1.5; echo %d" % i})

    threads = [threading.Thread(target=slow, args=(i,)) for i in range(3)]
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    assert d.api("GET", "/v1/system").status == 200
    assert m.rpc("tools/list")["result"]["tools"]
    assert time.monotonic() - t0 < 1.0, "the daemon waited for a tool call"
    for t in threads:
        t.join(30)
    assert time.monotonic() - started < 4.0, "the calls ran one after the other"
    assert sorted(r["structuredContent"]["stdout"] for r in results.values()) == ["0\n", "1\n", "2\n"]

    # hang up during a call: the daemon goes on, the command ends, the next calls work
    c = TLSConnection(d.netns_path, "127.0.0.1", PORT, m.fp)
    c.request("POST", "/mcp", body=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "run_command",
                    "arguments": {"environment": "mcp-p", "command": "sleep 1; echo gone"}}}),
        headers={"Authorization": "Bearer " + m.token, "Content-Type": "application/json"})
    time.sleep(0.3)
    c.close()
    time.sleep(1.5)
    assert m.ok("run_command", {"environment": "mcp-p", "command": "echo still"})[
        "structuredContent"]["stdout"] == "still\n"
    m.ok("destroy_environment", {"environment": "mcp-p"})
    assert d.running()
