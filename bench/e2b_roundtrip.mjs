// E2B drop-in round trip: Sandbox.create() + commands.run('true') + kill() through the
// unmodified e2b SDK, beside the same through Paddock's own API (create, exec, delete) over
// the same listener and token, interleaved, N runs each; medians and p90 in ms.
// Run through bench/e2b_roundtrip (a private daemon; tests/e2b/with_daemon.py).
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tests/e2b/package.json', import.meta.url));
const { Sandbox } = require('e2b');

const N = Number(process.env.BENCH_RUNS ?? process.argv[2] ?? 40);
const base = process.env.E2B_API_URL;
const auth = { Authorization: `Bearer ${process.env.E2B_API_KEY}` };

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method, headers: body ? { ...auth, 'Content-Type': 'application/json' } : auth,
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

let seq = 0;
const rows = {
  'E2B SDK: create + commands.run(true) + kill': async () => {
    const s = await Sandbox.create();
    try {
      const r = await s.commands.run('true');
      if (r.exitCode !== 0) throw new Error('exit ' + r.exitCode);
    } finally { await s.kill(); }
  },
  'E2B SDK: create + kill (no command)': async () => {
    const s = await Sandbox.create();
    await s.kill();
  },
  'Paddock API: create computer + exec true + delete': async () => {
    const name = `bench-c-${process.pid}-${seq++}`;
    await api('POST', '/v1/envs', { name, kind: 'computer', memory: '512M', cpus: 2 });
    try {
      const r = await api('POST', `/v1/envs/${name}/exec`, { cmd: ['true'] });
      if (r.exit_code !== 0) throw new Error('exit ' + r.exit_code);
    } finally { await api('DELETE', `/v1/envs/${name}?force=1`); }
  },
  'Paddock API: create sandbox + exec true + delete': async () => {
    const name = `bench-s-${process.pid}-${seq++}`;
    await api('POST', '/v1/envs', { name });
    try {
      const r = await api('POST', `/v1/envs/${name}/exec`, { cmd: ['true'] });
      if (r.exit_code !== 0) throw new Error('exit ' + r.exit_code);
    } finally { await api('DELETE', `/v1/envs/${name}?force=1`); }
  },
};

const times = Object.fromEntries(Object.keys(rows).map((k) => [k, []]));
const failed = {};
for (const [k, fn] of Object.entries(rows)) { // warm up, and find out what works
  try { await fn(); } catch (e) { failed[k] = String(e.message ?? e).split('\n')[0]; }
}
for (let i = 0; i < N; i++) {
  for (const [k, fn] of Object.entries(rows)) {
    if (failed[k]) continue;
    const t0 = process.hrtime.bigint();
    try { await fn(); } catch (e) { failed[k] = String(e.message ?? e).split('\n')[0]; continue; }
    times[k].push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
}
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
console.log(`| round trip (N=${N}, interleaved) | median ms | p90 ms |`);
console.log('|---|---|---|');
for (const k of Object.keys(rows)) {
  if (failed[k]) console.log(`| ${k} | failed: ${failed[k].replace(/\|/g, '/')} | |`);
  else console.log(`| ${k} | ${q(times[k], 0.5).toFixed(1)} | ${q(times[k], 0.9).toFixed(1)} |`);
}
