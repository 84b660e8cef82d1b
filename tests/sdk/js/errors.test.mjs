// Error answers the test daemon cannot be made to give (401, quota_exceeded, 429 with
// Retry-After, a non-JSON body), from a stand-in HTTP server on a unix socket; and that the
// token goes out as a Bearer header on the socket too.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import { createHash } from "node:crypto";
import * as path from "node:path";
import {
  Paddock, PaddockError, Unauthorized, Forbidden, QuotaExceeded, RateLimited, NotFound,
} from "../../../sdk/js/dist/index.js";

const sockPath = path.join(process.env.PADDOCK_TEST_DIR ?? "/tmp", "fake-" + process.pid + ".sock");
let server;
const seen = [];
const answers = {
  "/v1/envs/a": [401, {}, { error: { code: "unauthorized", message: "missing or unknown token" } }],
  "/v1/envs/b": [403, {}, { error: { code: "quota_exceeded", message: "token t may have at most 2 environments" } }],
  "/v1/envs/c": [429, { "Retry-After": "7" }, { error: { code: "rate_limited", message: "slow down" } }],
  "/v1/envs/d": [403, {}, { error: { code: "forbidden", message: "an agent token may not do this" } }],
  "/v1/envs/e": [502, {}, "<html>bad gateway</html>"],
  "/v1/envs/f": [503, {}, { error: { code: "unavailable", message: "too many execs" } }],
};

before(async () => {
  server = http.createServer((req, res) => {
    seen.push({ url: req.url, auth: req.headers.authorization });
    const [status, headers, body] = answers[req.url] ?? [404, {}, { error: { code: "not_found", message: "no such route: " + req.url } }];
    res.writeHead(status, { "Content-Type": typeof body === "string" ? "text/html" : "application/json", ...headers });
    res.end(typeof body === "string" ? body : JSON.stringify(body));
  });
  // A terminal whose whole session (output, exit, close) comes in the same write as the
  // handshake's answer, as a fast command's can.
  server.on("upgrade", (req, socket) => {
    const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    const frame = (op, payload) => Buffer.concat([Buffer.from([0x80 | op, payload.length]), payload]);
    const answer = Buffer.from("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n");
    if (req.url.startsWith("/v1/envs/drop/")) { // the connection goes without a close frame
      socket.end(Buffer.concat([answer, frame(2, Buffer.from("partial"))]));
      return;
    }
    socket.end(Buffer.concat([
      answer,
      frame(2, Buffer.from("early\r\n")),
      frame(1, Buffer.from(JSON.stringify({ exit_code: 3, duration_ms: 1 }))),
      frame(8, Buffer.from([0x03, 0xe8])),
    ]));
  });
  await new Promise((r) => server.listen(sockPath, r));
});
after(() => server.close());

test("error codes map to classes with the server's message", async () => {
  const p = new Paddock({ socketPath: sockPath, token: "pdk_test" });
  const get = (n) => p.envs.get(n).catch((e) => e);
  let e = await get("a");
  assert.ok(e instanceof Unauthorized && e.status === 401 && e.message === "missing or unknown token");
  e = await get("b");
  assert.ok(e instanceof QuotaExceeded && e.code === "quota_exceeded" && /at most 2/.test(e.message));
  e = await get("c");
  assert.ok(e instanceof RateLimited && e.retryAfter === 7 && e.status === 429);
  e = await get("d");
  assert.ok(e instanceof Forbidden && !(e instanceof QuotaExceeded));
  e = await get("e");
  assert.ok(e instanceof PaddockError && e.status === 502 && e.code === "http_502" && /bad gateway/.test(e.message));
  e = await get("f");
  assert.ok(e.constructor === PaddockError && e.code === "unavailable");
  e = await get("zz");
  assert.ok(e instanceof NotFound);
  assert.ok(seen.every((s) => s.auth === "Bearer pdk_test"), JSON.stringify(seen));
  p.close();
});

test("a terminal keeps what came with the handshake's answer", async () => {
  const p = new Paddock({ socketPath: sockPath });
  const t = await p.envs.ref("w").terminal({ cmd: "echo early" });
  assert.match(await t.readUntil((s) => s.includes("early")), /early\r\n/);
  assert.equal((await t.wait()).exitCode, 3);
  p.close();
});

test("a terminal that ends before the awaited output says how it ended", async () => {
  const p = new Paddock({ socketPath: sockPath });
  const t = await p.envs.ref("w").terminal({ cmd: "echo early" });
  let e = await t.readUntil((s) => s.includes("never")).catch((x) => x);
  assert.ok(e instanceof PaddockError && e.code === "protocol", String(e));
  assert.match(e.message, /the command exited with code 3\) before the awaited output: "early\\r\\n"/);
  const d = await p.envs.ref("drop").terminal({ cmd: "true" });
  e = await d.readUntil((s) => s.includes("never")).catch((x) => x);
  assert.match(e.message, /\(connection closed without a close frame\) before the awaited output: "partial"/);
  assert.equal(await d.wait(), null);
  p.close();
});

test("an Env reference costs no request", async () => {
  const p = new Paddock({ socketPath: sockPath });
  const before = seen.length;
  const env = p.envs.ref("a");
  assert.equal(env.name, "a");
  assert.equal(seen.length, before);
  await assert.rejects(env.exec("true"), NotFound); // the stand-in knows no exec route
  assert.equal(seen.length, before + 1);
  assert.equal(seen.at(-1).url, "/v1/envs/a/exec");
  assert.equal(seen.at(-1).auth, undefined);
  p.close();
  // an explicit socketPath wins over PADDOCK_HOST from the environment
  process.env.PADDOCK_HOST = "https://192.0.2.1:1";
  try {
    const q = new Paddock({ socketPath: sockPath });
    await assert.rejects(q.envs.get("b"), QuotaExceeded);
    q.close();
  } finally {
    delete process.env.PADDOCK_HOST;
  }
});
