// HTTPS with a pinned certificate fingerprint, a CA, and a token. Until the real gateway is
// part of the build, a small TLS-terminating proxy made here (node:tls, a self-signed
// certificate from openssl) forwards each connection to the daemon's unix socket.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as tls from "node:tls";
import { Paddock, PaddockError, NotFound, Unauthorized, Forbidden, QuotaExceeded } from "../../../sdk/js/dist/index.js";

const sock = process.env.PADDOCK_SOCKET;
const dir = process.env.PADDOCK_TEST_DIR;
let server, host, certPem, fingerprint, forwarded = 0;
const conns = new Set();

before(async () => {
  const key = path.join(dir, "tls.key");
  const crt = path.join(dir, "tls.crt");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], { stdio: "ignore" });
  certPem = readFileSync(crt, "utf8");
  fingerprint = new X509Certificate(certPem).fingerprint256; // AB:CD:...
  server = tls.createServer({ key: readFileSync(key), cert: certPem }, (c) => {
    const up = net.connect(sock);
    conns.add(c).add(up);
    c.on("data", (d) => { forwarded += d.length; });
    c.pipe(up).pipe(c);
    // One side gone: the other gets what is already on its way, then its end (destroying it
    // at once could drop the last frames of a session the daemon has just closed).
    const drop = () => { c.destroy(); up.destroy(); };
    c.on("error", drop).on("close", () => { up.end(); conns.delete(c); });
    up.on("error", drop).on("close", () => { c.end(); conns.delete(up); });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  host = `https://127.0.0.1:${server.address().port}`;
});
after(() => {
  for (const c of conns) c.destroy();
  server.close();
});

test("a pinned fingerprint: requests, streams and a terminal over TLS", async () => {
  const p = new Paddock({ host, fingerprint: "sha256:" + fingerprint.toLowerCase() });
  try {
    assert.equal(typeof (await p.system()).version, "string");
    await p.withEnv({ name: "tls-env", kind: "sandbox" }, async (env) => {
      assert.equal((await env.exec("echo over tls")).stdout, "over tls\n");
      const chunks = [];
      await env.exec("echo a; echo b", { onStdout: (s) => chunks.push(s) });
      assert.equal(chunks.join(""), "a\nb\n");
      const t = await env.terminal({ cmd: ["sh", "-c", "read x; echo got-$x; exit 3"] });
      t.write("pin\n");
      await t.readUntil((s) => s.includes("got-pin"));
      assert.equal((await t.wait()).exitCode, 3);
    });
  } finally {
    p.close();
  }
});

test("a wrong fingerprint is refused before the request is sent", async () => {
  const before = forwarded;
  const p = new Paddock({ host, fingerprint: createHash("sha256").update("other").digest("hex"), token: "pdk_secret" });
  const e = await p.system().catch((x) => x);
  p.close();
  assert.ok(e instanceof PaddockError, String(e));
  assert.equal(e.code, "certificate_mismatch");
  assert.match(e.message, new RegExp(fingerprint.replace(/:/g, "").toLowerCase()));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(forwarded, before, "no application bytes (and no token) went to the server");
});

test("a CA certificate verifies the chain and the name; no CA and no pin fails", async () => {
  const p = new Paddock({ host, ca: certPem });
  assert.equal(typeof (await p.system()).version, "string");
  p.close();
  const q = new Paddock({ host: host.replace("127.0.0.1", "localhost"), ca: certPem });
  assert.equal(typeof (await q.system()).version, "string");
  q.close();
  const bare = new Paddock({ host });
  const e = await bare.system().catch((x) => x);
  bare.close();
  assert.equal(e.code, "connection_failed");
  assert.match(e.message, /self[- ]signed/i);
  assert.throws(() => new Paddock({ host: "http://127.0.0.1:1" }), /only https/);
});

test("an agent token over HTTPS sees only its own environments", async (t) => {
  const local = new Paddock({ socketPath: sock });
  try {
    const probe = await local.tokens.list().catch((e) => e);
    if (probe instanceof NotFound && /no such route/.test(probe.message)) {
      t.skip("this daemon has no /v1/tokens yet (the tokens helper has not landed)");
      return;
    }
    const made = await local.tokens.create({ name: "js-agent", max_envs: 2 });
    assert.match(made.secret, /^pdk_[A-Za-z0-9_-]{43}$/);
    assert.equal(made.max_envs, 2);
    try {
      assert.ok((await local.tokens.list()).some((x) => x.name === "js-agent" && !("secret" in x)));
      const admin = await local.envs.create({ name: "tls-admins", kind: "sandbox" });
      const agent = new Paddock({ host, fingerprint, token: made.secret });
      try {
        const mine = await agent.envs.create({ name: "tls-agents", kind: "sandbox" });
        assert.equal((await mine.exec("echo mine")).stdout, "mine\n");
        assert.deepEqual((await agent.envs.list()).map((e) => e.name), ["tls-agents"]);
        await assert.rejects(agent.envs.get("tls-admins"), NotFound);
        await agent.envs.create({ name: "tls-agents2", kind: "sandbox" });
        const q = await agent.envs.create({ name: "tls-agents3", kind: "sandbox" }).catch((e) => e);
        assert.ok(q instanceof QuotaExceeded, String(q));
        await assert.rejects(agent.tokens.list(), Forbidden);
        await mine.destroy();
        await agent.envs.ref("tls-agents2").destroy();
      } finally {
        agent.close();
        await admin.destroy();
      }
      const wrong = new Paddock({ host, fingerprint, token: "pdk_" + "A".repeat(43) });
      await assert.rejects(wrong.envs.list(), Unauthorized);
      wrong.close();
    } finally {
      await local.tokens.remove("js-agent");
    }
  } finally {
    local.close();
  }
});
