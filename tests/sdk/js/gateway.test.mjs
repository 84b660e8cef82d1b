// The SDK through paddockd's own network gateway (`paddockd --listen`), when the daemon under
// test has one: TLS pinned to the fingerprint GET /v1/system reports, a request without a
// token refused, and (with the tokens API) an agent token's requests, streams and terminal.
// The daemon listens inside its network namespace; a forwarder started there (nsenter) and
// a local TCP listener carry the TLS bytes unchanged.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as net from "node:net";
import * as path from "node:path";
import { Paddock, NotFound, Unauthorized } from "../../../sdk/js/dist/index.js";

const ns = process.env.PADDOCK_TEST_NETNS;
const target = process.env.PADDOCK_TEST_GATEWAY; // ADDR:PORT inside the namespace
const local = new Paddock({ socketPath: process.env.PADDOCK_SOCKET });
let gw = null, fwd, server, host;
const conns = new Set();

const FORWARDER = `
const net = require("node:net");
const [unixPath, addr, port] = process.argv.slice(1);
net.createServer((c) => {
  const u = net.connect(Number(port), addr);
  const drop = () => { c.destroy(); u.destroy(); };
  c.pipe(u).pipe(c);
  c.on("error", drop).on("close", () => u.end());
  u.on("error", drop).on("close", () => c.end());
}).listen(unixPath, () => console.log("ready"));
`;

before(async () => {
  gw = (await local.system()).gateway ?? null;
  if (!ns || !target || !gw) return;
  const unixPath = path.join(process.env.PADDOCK_TEST_DIR, "gw-fwd.sock");
  const [addr, port] = [target.slice(0, target.lastIndexOf(":")), target.slice(target.lastIndexOf(":") + 1)];
  fwd = spawn("nsenter", ["--net=" + ns, process.execPath, "-e", FORWARDER, unixPath, addr, port], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    fwd.stdout.once("data", resolve);
    fwd.once("exit", (c) => reject(new Error("forwarder exited " + c)));
  });
  server = net.createServer((c) => {
    const u = net.connect(unixPath);
    conns.add(c).add(u);
    c.pipe(u).pipe(c);
    const drop = () => { c.destroy(); u.destroy(); };
    c.on("error", drop).on("close", () => { u.end(); conns.delete(c); });
    u.on("error", drop).on("close", () => { c.end(); conns.delete(u); });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  host = `https://127.0.0.1:${server.address().port}`;
});

after(() => {
  for (const c of conns) c.destroy();
  server?.close();
  if (fwd && fwd.exitCode === null) fwd.kill("SIGTERM"); // the pid started here
  local.close();
});

test("the gateway: pinned TLS, a token required, an agent token's calls", async (t) => {
  if (!gw) return t.skip("this daemon has no network gateway (paddockd --listen)");
  assert.match(gw.tls_fingerprint, /^sha256(:[0-9A-F]{2}){32}$/);
  const anon = new Paddock({ host, fingerprint: gw.tls_fingerprint, token: "" });
  const e = await anon.envs.list().catch((x) => x);
  anon.close();
  assert.ok(e instanceof Unauthorized, String(e));
  assert.match(e.message, /token/i);

  const probe = await local.tokens.list().catch((x) => x);
  if (probe instanceof NotFound) return t.skip("no /v1/tokens in this daemon: only the refusal without a token is checked");
  const tok = await local.tokens.create({ name: "js-gw-agent" });
  const agent = new Paddock({ host, fingerprint: gw.tls_fingerprint, token: tok.secret });
  try {
    await agent.withEnv({ name: "gw-env", kind: "sandbox" }, async (env) => {
      assert.equal((await env.exec("echo through the gateway")).stdout, "through the gateway\n");
      const parts = [];
      await env.exec("echo a; sleep 0.2; echo b", { onStdout: (s) => parts.push(s) });
      assert.equal(parts.join(""), "a\nb\n");
      await env.files.write("/workspace/f", "data");
      assert.equal(await env.files.readText("/workspace/f"), "data");
      const term = await env.terminal({ cmd: ["sh", "-c", "read x; echo got-$x; exit 4"] });
      term.write("gw\n");
      await term.readUntil((s) => s.includes("got-gw"));
      assert.equal((await term.wait()).exitCode, 4);
      assert.deepEqual((await agent.envs.list()).map((x) => x.name), ["gw-env"]);
    });
  } finally {
    agent.close();
    await local.tokens.remove("js-gw-agent");
  }
  const revoked = new Paddock({ host, fingerprint: gw.tls_fingerprint, token: tok.secret });
  await assert.rejects(revoked.envs.list(), Unauthorized);
  revoked.close();
});
