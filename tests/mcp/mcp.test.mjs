// `paddock mcp` driven by the real MCP TypeScript SDK (Client + StdioClientTransport) against a
// real paddockd. Run by run.sh, which starts the daemon (with_daemon.py) and sets
// PADDOCK_SOCKET and PADDOCK_BIN.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.env.PADDOCK_BIN;
const SOCKET = process.env.PADDOCK_SOCKET;
const REPO = process.env.PADDOCK_REPO ?? path.resolve(import.meta.dirname, "../..");
assert.ok(BIN && SOCKET, "run through run.sh: PADDOCK_BIN and PADDOCK_SOCKET must be set");

const TOOLS = [
  "create_environment", "run_command", "start_process", "read_process_output", "kill_process",
  "read_file",
  "write_file", "list_files", "snapshot", "fork", "destroy_environment", "list_environments",
  "set_network_policy",
];

let client;

before(async () => {
  client = new Client({ name: "paddock-mcp-test", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: BIN,
    args: ["mcp"],
    env: { PATH: process.env.PATH, PADDOCK_SOCKET: SOCKET },
    stderr: "inherit",
  });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
});

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.content.length, 1);
  assert.equal(r.content[0].type, "text");
  return r;
}

async function ok(name, args) {
  const r = await call(name, args);
  assert.equal(r.isError, false, `${name} failed: ${r.content[0].text}`);
  return r;
}

test("initialize negotiates a protocol revision the server speaks", () => {
  // The SDK asks for its newest revision; the server answers with its own newest one, which
  // the SDK accepts (it would have disconnected otherwise).
  assert.equal(client.getServerVersion().name, "paddock");
  assert.ok(client.getServerCapabilities().tools);
  assert.match(client.getInstructions(), /create_environment/);
});

test("tools/list: every tool, each with a description and a strict schema", async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
  for (const t of tools) {
    assert.ok(t.description.length > 80, `${t.name}: description too short`);
    assert.equal(t.inputSchema.type, "object");
    assert.equal(t.inputSchema.additionalProperties, false, t.name);
    if (t.name !== "list_environments")
      assert.ok(t.inputSchema.required.length >= 1, `${t.name} requires nothing`);
  }
  const run = tools.find((t) => t.name === "run_command");
  assert.deepEqual(run.inputSchema.required, ["environment", "command"]);
  const create = tools.find((t) => t.name === "create_environment");
  assert.deepEqual(create.inputSchema.properties.kind.enum, ["sandbox", "computer"]);
  assert.deepEqual(create.inputSchema.properties.network.properties.mode.enum,
                   ["none", "allow", "open"]);
});

test("a sandbox: create, run commands, files, background process, destroy", async () => {
  let r = await ok("create_environment", {
    name: "mcp-sb", kind: "sandbox", image: "base", memory: "256M", pids: 64, ttl: "10m",
    network: { mode: "none" }, env: { GREETING: "hello" }, labels: { suite: "mcp" },
  });
  assert.equal(r.structuredContent.name, "mcp-sb");
  assert.equal(r.structuredContent.kind, "sandbox");
  assert.equal(r.structuredContent.state, "running");
  assert.equal(JSON.parse(r.content[0].text).name, "mcp-sb");

  // A shell string and an array.
  r = await ok("run_command", {
    environment: "mcp-sb", command: "echo $GREETING; echo oops >&2; exit 3",
  });
  assert.equal(r.structuredContent.exit_code, 3);
  assert.equal(r.structuredContent.stdout, "hello\n");
  assert.equal(r.structuredContent.stderr, "oops\n");
  assert.match(r.content[0].text, /^exit_code: 3\n--- stdout ---\nhello\n--- stderr ---\noops\n/);
  r = await ok("run_command", {
    environment: "mcp-sb", command: ["sh", "-c", "pwd; cat; echo $X"], cwd: "/tmp",
    stdin: "from stdin\n", env: { X: "y" }, user: "1000",
  });
  assert.equal(r.structuredContent.stdout, "/tmp\nfrom stdin\ny\n");
  r = await ok("run_command", { environment: "mcp-sb", command: ["id", "-u"], user: "user" });
  assert.equal(r.structuredContent.stdout, "1000\n");
  r = await ok("run_command", { environment: "mcp-sb", command: "sleep 5", timeout: 1 });
  assert.equal(r.structuredContent.timed_out, true);
  assert.match(r.content[0].text, /timed out/);

  // Files.
  r = await ok("write_file", {
    environment: "mcp-sb", path: "/workspace/app/hello.sh", content: "#!/bin/sh\necho hi from $0\n",
    mode: "0755",
  });
  assert.equal(r.structuredContent.size, 26);
  r = await ok("run_command", { environment: "mcp-sb", command: ["/workspace/app/hello.sh"] });
  assert.equal(r.structuredContent.stdout, "hi from /workspace/app/hello.sh\n");
  r = await ok("read_file", { environment: "mcp-sb", path: "/workspace/app/hello.sh" });
  assert.equal(r.content[0].text, "#!/bin/sh\necho hi from $0\n");
  assert.equal(r.structuredContent.encoding, "utf-8");
  r = await ok("write_file", {
    environment: "mcp-sb", path: "/workspace/app/bin", content: Buffer.from([0, 1, 255]).toString("base64"),
    encoding: "base64",
  });
  r = await ok("read_file", { environment: "mcp-sb", path: "/workspace/app/bin" });
  assert.equal(r.structuredContent.encoding, "base64");
  assert.deepEqual([...Buffer.from(r.structuredContent.content, "base64")], [0, 1, 255]);
  r = await ok("list_files", { environment: "mcp-sb", path: "/workspace/app" });
  assert.deepEqual(r.structuredContent.entries.map((e) => e.name), ["bin", "hello.sh"]);
  r = await call("read_file", { environment: "mcp-sb", path: "/workspace/nope" });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /404/);
  // A sandbox may not write outside /tmp and /workspace: the daemon's refusal is a tool error.
  r = await call("write_file", { environment: "mcp-sb", path: "/etc/x", content: "x" });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /403/);

  // A background process.
  r = await ok("start_process", {
    environment: "mcp-sb", command: "echo start; sleep 2; echo done >&2; exit 4",
  });
  const id = r.structuredContent.id;
  assert.ok(Number.isInteger(id));
  assert.match(r.content[0].text, new RegExp(`started process ${id}`));
  r = await ok("read_process_output", { environment: "mcp-sb", id });
  assert.equal(r.structuredContent.state, "running");
  assert.equal(r.structuredContent.exit_code, null);
  assert.match(r.content[0].text, new RegExp(`process ${id} is still running`));
  r = await ok("read_process_output", { environment: "mcp-sb", id, wait: true });
  assert.equal(r.structuredContent.state, "exited");
  assert.equal(r.structuredContent.exit_code, 4);
  assert.equal(r.structuredContent.stdout, "start\n");
  assert.equal(r.structuredContent.stderr, "done\n");
  assert.match(r.content[0].text, /exited, exit_code: 4/);

  // A server-like process, stopped.
  r = await ok("start_process", { environment: "mcp-sb", command: ["sleep", "300"] });
  const sleeper = r.structuredContent.id;
  r = await ok("kill_process", { environment: "mcp-sb", id: sleeper, signal: "KILL" });
  assert.equal(r.structuredContent.id, sleeper);
  r = await ok("read_process_output", { environment: "mcp-sb", id: sleeper, wait: true });
  assert.equal(r.structuredContent.state, "exited");
  assert.equal(r.structuredContent.exit_code, 137);
  r = await call("kill_process", { environment: "mcp-sb", id: sleeper });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /409/);
  r = await call("read_process_output", { environment: "mcp-sb", id: 999 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /no process 999 in mcp-sb/);

  r = await ok("list_environments", { labels: { suite: "mcp" } });
  assert.deepEqual(r.structuredContent.envs.map((e) => e.name), ["mcp-sb"]);
  r = await ok("list_environments", { labels: { suite: "other" } });
  assert.deepEqual(r.structuredContent.envs, []);

  r = await ok("destroy_environment", { environment: "mcp-sb" });
  assert.equal(r.structuredContent.deleted, "mcp-sb");
  r = await ok("list_environments", {});
  assert.ok(!r.structuredContent.envs.some((e) => e.name === "mcp-sb"));
});

test("big output is cut in the middle with a note saying how much", async () => {
  await ok("create_environment", { name: "mcp-big", image: "base" });
  try {
    const r = await ok("run_command", {
      environment: "mcp-big", command: "yes 0123456789 | head -c 300000; echo tail-marker",
    });
    const { stdout, stdout_bytes_cut: cut } = r.structuredContent;
    assert.equal(cut, 300000 + 12 - 102400);
    assert.ok(stdout.length < 102400 + 300, `stdout is ${stdout.length} bytes`);
    assert.match(stdout, /^0123456789\n0123456789\n/);
    assert.ok(stdout.endsWith("tail-marker\n"));
    assert.match(stdout, new RegExp(`\\[\\.\\.\\. ${cut} bytes of stdout cut here: it had 300012 bytes`));
    assert.equal(r.structuredContent.stderr_bytes_cut, 0);
  } finally {
    await ok("destroy_environment", { environment: "mcp-big" });
  }
});

test("a computer: network policy, snapshot, fork", async () => {
  let r = await ok("create_environment", { name: "mcp-pc", kind: "computer", image: "base" });
  assert.equal(r.structuredContent.kind, "computer");
  try {
    r = await ok("set_network_policy", {
      environment: "mcp-pc", allow: ["example.com:443", "10.1.2.3/32"], links: ["mcp-fork"],
    });
    assert.equal(r.structuredContent.mode, "allow");
    assert.deepEqual(r.structuredContent.allow, ["example.com:443", "10.1.2.3"]);
    assert.deepEqual(r.structuredContent.links, ["mcp-fork"]);
    r = await ok("set_network_policy", { environment: "mcp-pc", mode: "none" });
    assert.equal(r.structuredContent.mode, "none");
    r = await call("set_network_policy", { environment: "mcp-pc", allow: ["not a rule!"] });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /400/);

    await ok("write_file", { environment: "mcp-pc", path: "/root/state", content: "before\n" });
    r = await ok("snapshot", { environment: "mcp-pc", name: "s1" });
    assert.equal(r.structuredContent.name, "s1");
    await ok("write_file", { environment: "mcp-pc", path: "/root/state", content: "after\n" });
    r = await ok("fork", { environment: "mcp-pc", name: "mcp-fork", snapshot: "s1" });
    assert.equal(r.structuredContent.name, "mcp-fork");
    assert.equal(r.structuredContent.state, "running");
    r = await ok("read_file", { environment: "mcp-fork", path: "/root/state" });
    assert.equal(r.content[0].text, "before\n");
    r = await ok("read_file", { environment: "mcp-pc", path: "/root/state" });
    assert.equal(r.content[0].text, "after\n");
    r = await call("snapshot", { environment: "mcp-pc", name: "s1" });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /409/);
  } finally {
    await ok("destroy_environment", { environment: "mcp-pc" });
    await call("destroy_environment", { environment: "mcp-fork" });
  }
});

test("errors: the daemon's message as a tool error, bad arguments as invalid params", async () => {
  let r = await call("run_command", { environment: "nope", command: ["true"] });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /no such environment: nope/);
  r = await call("destroy_environment", { environment: "nope" });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /no such environment: nope/);
  r = await call("create_environment", { name: "bad name!" });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /HTTP 400/);

  const invalid = async (name, args, pattern) => {
    await assert.rejects(client.callTool({ name, arguments: args }), (e) => {
      assert.equal(e.code, -32602, e.message);
      assert.match(e.message, pattern);
      return true;
    });
  };
  await invalid("run_command", { environment: "x" }, /missing required property "command"/);
  await invalid("run_command", { environment: "x", command: 5 }, /command: expected array or string/);
  await invalid("run_command", { environment: "x", command: [] }, /command: too few items/);
  await invalid("run_command", { environment: "x", command: ["a", 1] }, /command\[1\]: expected string/);
  await invalid("create_environment", { name: "x", kind: "vm" }, /kind: must be one of sandbox, computer/);
  await invalid("create_environment", { name: "x", colour: "red" }, /colour: unknown property/);
  await invalid("create_environment", { name: "x", network: { mode: "open", x: 1 } },
                /network\.x: unknown property/);
  await invalid("read_process_output", { environment: "x", id: "1" }, /id: expected integer/);
  await invalid("no_such_tool", {}, /unknown tool: no_such_tool/);
  // Still serving after all that.
  await client.ping();
});

/* The raw protocol, without the SDK: what a broken client may send. */
function rawSession(lines) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ["mcp"], {
      env: { PATH: process.env.PATH, PADDOCK_SOCKET: SOCKET },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, err, replies: out.split("\n").filter(Boolean).map((l) => JSON.parse(l)) }));
    for (const l of lines) p.stdin.write(l);
    p.stdin.end();
  });
}

test("malformed and oversized lines are answered with errors and the server goes on", async () => {
  const huge = '{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"' + "a".repeat(17 << 20) + '"}}\n';
  const { code, replies } = await rawSession([
    "this is not json\n",
    "\n",
    huge,
    "[1,2]\n",
    '{"jsonrpc":"2.0","id":1}\n',
    '{"jsonrpc":"1.0","id":2,"method":"ping"}\n',
    '{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
    '{"jsonrpc":"2.0","id":4,"method":"resources/list"}\n',
    '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}\n',
    '{"jsonrpc":"2.0","id":"five","method":"ping"}\n',
    '{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}\n',
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_environments","arguments":[]}}\n',
  ]);
  assert.equal(code, 0);
  const summary = replies.map((r) => [r.id, r.error?.code ?? "ok"]);
  assert.deepEqual(summary, [
    [null, -32700], [null, -32700], [null, -32600], [1, -32600], [2, -32600], [3, "ok"],
    [4, -32601], ["five", "ok"], [6, "ok"], [7, -32602],
  ]);
  assert.match(replies[1].error.message, /longer than 16 MiB/);
  assert.equal(replies[5].result.protocolVersion, "2025-06-18");
  assert.equal(replies[8].result.protocolVersion, "2025-03-26");
});

test("docs/mcp.md: its client configurations parse and name a real verb", () => {
  const doc = readFileSync(path.join(REPO, "docs", "mcp.md"), "utf8");
  const blocks = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]));
  const configs = blocks.filter((b) => b.mcpServers?.paddock);
  assert.ok(configs.length >= 2, "a local and a remote configuration");
  // The configuration of paddockd's own endpoint (a URL, no command) is run by the test of
  // POST /mcp below.
  assert.ok(blocks.some((b) => b.mcpServers?.["paddock-http"]?.url));
  for (const c of configs) {
    const s = c.mcpServers.paddock;
    assert.equal(s.command, "paddock");
    assert.deepEqual(s.args, ["mcp"]);
  }
  assert.ok(configs.some((c) => c.mcpServers.paddock.env?.PADDOCK_HOST?.startsWith("https://")));
  assert.ok(configs.some((c) => c.mcpServers.paddock.env?.PADDOCK_TOKEN));
  const help = execFileSync(BIN, ["mcp", "--help"], { encoding: "utf8" });
  assert.match(help, /Usage: paddock mcp/);
  const readme = readFileSync(path.join(REPO, "README.md"), "utf8");
  const inline = readme.match(/`(\{"mcpServers".*?)`/);
  assert.ok(inline, "README shows the configuration");
  assert.deepEqual(JSON.parse(inline[1]).mcpServers.paddock, { command: "paddock", args: ["mcp"] });
  // Every tool the server lists has its own heading in the doc.
  for (const t of TOOLS) assert.match(doc, new RegExp(`^### \`${t}\``, "m"), t);
});

/* ------------------------------------------------------------------ streamable HTTP */

import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { request as httpRequest } from "node:http";

/* A request to paddockd's socket: {status, body}. */
function api(method, apiPath, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest({ socketPath: SOCKET, method, path: apiPath,
                              headers: data ? { "Content-Type": "application/json" } : {} }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : null }));
    });
    req.on("error", reject);
    req.end(data);
  });
}

/* A token the daemon takes: a new agent token where the daemon has tokens, else any word (a
 * daemon without tokens treats every caller as its administrator). */
async function agentToken() {
  const r = await api("POST", "/v1/tokens", { name: "mcp-http-test" });
  if (r.status === 404 && /no such route/.test(r.body?.error?.message ?? ""))
    return { token: "pdk_notokensonthisdaemon", cleanup: async () => {} };
  assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r));
  const token = r.body.secret ?? r.body.token;
  assert.ok(token, JSON.stringify(r.body));
  return { token, cleanup: () => api("DELETE", "/v1/tokens/mcp-http-test") };
}

function startHttpServer(address) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ["mcp", "--http", address], {
      env: { PATH: process.env.PATH, PADDOCK_SOCKET: SOCKET },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    p.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/serving MCP at (http:\/\/\S+)/);
      if (m) resolve({ proc: p, url: m[1] });
    });
    p.on("error", reject);
    p.on("exit", (code) => reject(new Error(`paddock mcp --http exited with ${code}: ${err}`)));
  });
}

test("streamable HTTP: the SDK's HTTP client, the caller's token passed on to paddockd", async () => {
  // The example of docs/mcp.md, on its own port unless something else has that one.
  const doc = readFileSync(path.join(REPO, "docs", "mcp.md"), "utf8");
  const address = doc.match(/^paddock mcp --http (\S+)$/m)[1];
  const { proc, url } = await startHttpServer(address).catch((e) => {
    assert.match(e.message, /Address already in use/);
    return startHttpServer("127.0.0.1:0");
  });
  const { token, cleanup } = await agentToken();
  const http = new Client({ name: "paddock-mcp-http-test", version: "1.0.0" });
  try {
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    if (!address.endsWith(":0") && !url.endsWith(`:${address.split(":")[1]}/mcp`))
      console.log(`# ${address} was taken; used ${url}`);
    await http.connect(new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }));
    assert.equal(http.getServerVersion().name, "paddock");
    const { tools } = await http.listTools();
    assert.equal(tools.length, TOOLS.length);
    let r = await http.callTool({ name: "create_environment", arguments: { name: "mcp-http", image: "base" } });
    assert.equal(r.isError, false, r.content[0].text);
    r = await http.callTool({ name: "run_command", arguments: { environment: "mcp-http", command: "echo over http" } });
    assert.equal(r.structuredContent.stdout, "over http\n");
    r = await http.callTool({ name: "run_command", arguments: { environment: "nope", command: ["true"] } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /no such environment: nope/);
    await assert.rejects(http.callTool({ name: "run_command", arguments: {} }), (e) => e.code === -32602);
    r = await http.callTool({ name: "destroy_environment", arguments: { environment: "mcp-http" } });
    assert.equal(r.isError, false, r.content[0].text);
    await http.ping();

    // Without a token: refused before anything reaches the daemon.
    const anon = new Client({ name: "anon", version: "1.0.0" });
    await assert.rejects(anon.connect(new StreamableHTTPClientTransport(new URL(url))), /401|token/i);
    // Plain HTTP checks: no event stream, no foreign origin, malformed bodies.
    const auth = { Authorization: `Bearer ${token}`, "Content-Type": "application/json",
                   Accept: "application/json, text/event-stream" };
    let res = await fetch(url, { headers: auth });
    assert.equal(res.status, 405);
    res = await fetch(url, { method: "POST", headers: { ...auth, Origin: "http://evil.example" },
                             body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(res.status, 403);
    res = await fetch(url, { method: "POST", headers: auth, body: "{not json" });
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error.code, -32700);
    res = await fetch(url, { method: "POST", headers: { ...auth, "MCP-Protocol-Version": "1999-01-01" },
                             body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(res.status, 400);
    res = await fetch(url.replace(/\/mcp$/, "/other"), { method: "POST", headers: auth, body: "{}" });
    assert.equal(res.status, 404);
  } finally {
    await http.close().catch(() => {});
    await cleanup();
    proc.removeAllListeners("exit");
    proc.kill("SIGTERM");
  }
});

/* ------------------------------------------------------------------ a remote daemon */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";

test("a remote daemon: PADDOCK_HOST, PADDOCK_TOKEN and PADDOCK_FINGERPRINT, as docs/mcp.md configures it", async () => {
  const url = process.env.PADDOCK_TEST_TLS_URL;
  const fingerprint = process.env.PADDOCK_TEST_TLS_FINGERPRINT;
  assert.ok(url?.startsWith("https://") && fingerprint, "run through run.sh");
  const home = mkdtempSync(path.join(tmpdir(), "paddock-mcp-home-"));
  const remote = new Client({ name: "paddock-mcp-remote-test", version: "1.0.0" });
  try {
    // No socket in its environment: only the TLS listener leads to the daemon.
    await remote.connect(new StdioClientTransport({
      command: BIN,
      args: ["mcp"],
      env: { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: home, PADDOCK_HOST: url,
             PADDOCK_TOKEN: process.env.PADDOCK_TEST_TOKEN, PADDOCK_FINGERPRINT: fingerprint,
             PADDOCK_SOCKET: "/nonexistent/paddock.sock" },
      stderr: "inherit",
    }));
    let r = await remote.callTool({ name: "create_environment", arguments: { name: "mcp-remote", image: "base" } });
    assert.equal(r.isError, false, r.content[0].text);
    r = await remote.callTool({ name: "run_command", arguments: { environment: "mcp-remote", command: "echo remote" } });
    assert.equal(r.structuredContent.stdout, "remote\n");
    r = await remote.callTool({ name: "destroy_environment", arguments: { environment: "mcp-remote" } });
    assert.equal(r.isError, false, r.content[0].text);
  } finally {
    await remote.close();
    rmSync(home, { recursive: true, force: true });
  }
  // A wrong fingerprint: the call fails with the CLI's reason and nothing is sent.
  const wrong = new Client({ name: "paddock-mcp-wrong-pin", version: "1.0.0" });
  try {
    await wrong.connect(new StdioClientTransport({
      command: BIN, args: ["mcp"],
      env: { PATH: process.env.PATH, HOME: home, PADDOCK_HOST: url,
             PADDOCK_FINGERPRINT: "sha256:" + "00:".repeat(31) + "00" },
      stderr: "ignore",
    }));
    const r = await wrong.callTool({ name: "list_environments", arguments: {} });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /certificate|fingerprint/i);
  } finally {
    await wrong.close();
  }
});

/* ------------------------------------------------------------------ paddockd's own POST /mcp */

/* An agent token, and a function that removes it. */
async function makeToken(name, fields = {}) {
  const r = await api("POST", "/v1/tokens", { name, ...fields });
  assert.equal(r.status, 201, JSON.stringify(r));
  return { token: r.body.secret, cleanup: () => api("DELETE", `/v1/tokens/${name}`) };
}

async function connectHttp(url, token, name = "paddock-daemon-mcp-test") {
  const c = new Client({ name, version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: token ? { Authorization: `Bearer ${token}` } : {} },
  }));
  return c;
}

test("paddockd's POST /mcp through the gateway: the same tools, acting as the agent's token", async () => {
  const tlsUrl = process.env.PADDOCK_TEST_TLS_URL;
  const plainUrl = process.env.PADDOCK_TEST_PLAIN_URL;
  assert.ok(tlsUrl && plainUrl, "run through run.sh");
  // The configuration docs/mcp.md gives for the endpoint, pointed at this daemon.
  const doc = readFileSync(path.join(REPO, "docs", "mcp.md"), "utf8");
  const cfg = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]))
    .find((b) => b.mcpServers?.["paddock-http"]).mcpServers["paddock-http"];
  assert.equal(cfg.type, "http");
  const documented = new URL(cfg.url);
  assert.equal(documented.pathname, "/mcp");
  assert.match(cfg.headers.Authorization, /^Bearer pdk_/);
  const url = new URL(documented.pathname, tlsUrl).href;

  const a = await makeToken("mcp-daemon-a");
  const b = await makeToken("mcp-daemon-b");
  const ca = await connectHttp(url, a.token);
  const cb = await connectHttp(`${plainUrl}/mcp`, b.token);
  try {
    assert.equal(ca.getServerVersion().name, "paddock");
    assert.match(ca.getInstructions(), /create_environment/);
    // Exactly the tools of `paddock mcp` (the stdio client of the first tests).
    const mine = await ca.listTools();
    const cli = await client.listTools();
    assert.deepEqual(mine, cli);
    assert.equal(mine.tools.length, TOOLS.length);

    let r = await ca.callTool({ name: "create_environment", arguments: { name: "mcp-daemon", image: "base" } });
    assert.equal(r.isError, false, r.content[0].text);
    assert.equal(r.structuredContent.owner, "mcp-daemon-a");
    r = await ca.callTool({ name: "run_command", arguments: { environment: "mcp-daemon", command: "echo in the daemon; exit 4" } });
    assert.equal(r.structuredContent.stdout, "in the daemon\n");
    assert.equal(r.structuredContent.exit_code, 4);
    r = await ca.callTool({ name: "write_file", arguments: { environment: "mcp-daemon", path: "/tmp/a.py", content: "print(6*7)\n" } });
    assert.equal(r.isError, false, r.content[0].text);
    r = await ca.callTool({ name: "list_files", arguments: { environment: "mcp-daemon", path: "/tmp" } });
    assert.ok(JSON.stringify(r.structuredContent).includes("a.py"));
    r = await ca.callTool({ name: "start_process", arguments: { environment: "mcp-daemon", command: "sleep 0.2; echo done" } });
    r = await ca.callTool({ name: "read_process_output", arguments: { environment: "mcp-daemon", id: r.structuredContent.id, wait: true } });
    assert.equal(r.structuredContent.stdout, "done\n");

    // The other token, on the plain listener: the environment does not exist for it.
    r = await cb.callTool({ name: "list_environments", arguments: {} });
    assert.deepEqual(r.structuredContent.envs, []);
    r = await cb.callTool({ name: "run_command", arguments: { environment: "mcp-daemon", command: ["true"] } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /no such environment: mcp-daemon/);
    await assert.rejects(cb.callTool({ name: "fork", arguments: { environment: "mcp-daemon" } }),
                         (e) => e.code === -32602);

    r = await ca.callTool({ name: "destroy_environment", arguments: { environment: "mcp-daemon" } });
    assert.equal(r.isError, false, r.content[0].text);
    await ca.ping();

    // A wrong token, no token: refused by the gateway and the daemon (401).
    await assert.rejects(connectHttp(url, "pdk_" + "A".repeat(43), "wrong"), /401|token/i);
    await assert.rejects(connectHttp(url, null, "anon"), /401|token/i);
    // No server stream: GET is 405.
    const res = await fetch(url, { headers: { Authorization: `Bearer ${a.token}`,
                                              Accept: "text/event-stream" } });
    assert.equal(res.status, 405);
  } finally {
    await ca.close().catch(() => {});
    await cb.close().catch(() => {});
    await a.cleanup();
    await b.cleanup();
  }
});
