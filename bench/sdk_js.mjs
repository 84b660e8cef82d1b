// SDK overhead per exec: the TypeScript SDK's env.exec() against the same request made with
// raw node:http over the unix socket (a keep-alive agent, JSON body, JSON.parse of the answer).
// Both run `true` in one sandbox, interleaved, ITER times each; medians and p90 in µs.
//   cd sdk/js && npm ci && npm run build
//   sudo tests/sdk/js/with-daemon.sh node bench/sdk_js.mjs [ITER]      (a private daemon)
//   sudo PADDOCK_SOCKET=/run/paddock/paddock.sock node bench/sdk_js.mjs (an existing one)
import * as http from "node:http";
import { Paddock } from "../sdk/js/dist/index.js";

const ITER = Number(process.argv[2] ?? 300);
const sock = process.env.PADDOCK_SOCKET ?? "/run/paddock/paddock.sock";
const paddock = new Paddock({ socketPath: sock });
const agent = new http.Agent({ keepAlive: true });

function raw(name) {
  const body = JSON.stringify({ cmd: ["true"] });
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock, agent, method: "POST", path: `/v1/envs/${name}/exec`,
      headers: { Host: "localhost", "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const j = JSON.parse(Buffer.concat(chunks).toString());
        if (res.statusCode !== 200 || j.exit_code !== 0) reject(new Error(JSON.stringify(j)));
        else resolve(j);
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], p90: s[Math.floor(s.length * 0.9)] };
};
const us = (ns) => Number(ns) / 1000;

await paddock.withEnv({ name: "bench-sdk-js", kind: "sandbox" }, async (env) => {
  for (let i = 0; i < 20; i++) { await raw(env.name); await env.exec(["true"]); } // warm up
  const tRaw = [], tSdk = [];
  for (let i = 0; i < ITER; i++) {
    let t = process.hrtime.bigint();
    await raw(env.name);
    tRaw.push(us(process.hrtime.bigint() - t));
    t = process.hrtime.bigint();
    const r = await env.exec(["true"]);
    tSdk.push(us(process.hrtime.bigint() - t));
    if (r.exitCode !== 0) throw new Error("exec failed");
  }
  const a = stats(tRaw), b = stats(tSdk);
  console.log(`node ${process.version}, ${ITER} execs of \`true\` each, unix socket, keep-alive`);
  console.log(`| client | median µs | p90 µs |`);
  console.log(`|---|---|---|`);
  console.log(`| raw node:http | ${a.median.toFixed(0)} | ${a.p90.toFixed(0)} |`);
  console.log(`| SDK env.exec() | ${b.median.toFixed(0)} | ${b.p90.toFixed(0)} |`);
  const paired = stats(tSdk.map((x, i) => x - tRaw[i])).median;
  console.log(`SDK overhead per exec: ${(b.median - a.median).toFixed(0)} µs (difference of the medians), ${paired.toFixed(0)} µs (median of the paired differences)`);
});
paddock.close();
agent.destroy();
