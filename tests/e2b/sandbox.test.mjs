// The E2B control plane through the unmodified e2b SDK: create, connect, list (metadata
// filters, paging), setTimeout, getInfo, getMetrics, kill, pause/resume, and the errors the
// SDK turns into its exception classes.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, NotFoundError, SandboxNotFoundError, AuthenticationError } from 'e2b';
import { paddock, sleep, RUN } from './helpers.mjs';

const made = [];
async function create(opts = {}) {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, ...opts });
  made.push(sbx.sandboxId);
  return sbx;
}
after(async () => {
  for (const id of made) await Sandbox.kill(id).catch(() => {});
});

test('create maps template, timeout, metadata and envs onto a Paddock environment', async () => {
  const t0 = Date.now();
  const sbx = await create({ template: 'base', timeoutMs: 90_000,
    metadata: { suite: 'create', run: RUN, 'odd key/ü': 'a b=c&d' }, envs: { CONF_A: 'x y' } });
  assert.match(sbx.sandboxId, /^[a-z0-9]{20}$/);
  assert.equal(sbx.getHost(8080), `8080-${sbx.sandboxId}.${process.env.E2B_DOMAIN_EXPECTED}`);
  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  assert.equal(info.templateId, 'base');
  assert.equal(info.state, 'running');
  assert.equal(info.envdVersion, '0.5.7');
  assert.deepEqual(info.metadata, { suite: 'create', run: RUN, 'odd key/ü': 'a b=c&d' });
  const left = info.endAt.getTime() - t0;
  assert.ok(left > 80_000 && left < 100_000, `endAt ${info.endAt.toISOString()}`);
  assert.ok(await sbx.isRunning());

  const env = await paddock('GET', `/v1/envs/${sbx.sandboxId}`);
  assert.equal(env.status, 200);
  assert.equal(env.json.kind, 'computer');
  assert.equal(env.json.image, 'base');
  assert.equal(env.json.ttl, 90);
  assert.equal(env.json.env.CONF_A, 'x y');
  assert.equal(env.json.owner, 'agent');
  // The E2B user was made: the test image has none.
  const passwd = await sbx.files.read('/etc/passwd');
  assert.match(passwd, /^user:x:\d+:\d+::\/home\/user:\/bin\/bash$/m);
});

test('paddock.kind metadata makes a read-only Paddock sandbox', async () => {
  const sbx = await create({ metadata: { 'paddock.kind': 'sandbox' } });
  const env = await paddock('GET', `/v1/envs/${sbx.sandboxId}`);
  assert.equal(env.json.kind, 'sandbox');
  await sbx.files.write('/tmp/x.txt', 'in a sandbox');
  assert.equal(await sbx.files.read('/tmp/x.txt'), 'in a sandbox');
});

test('connect returns the running sandbox; both handles keep working', async () => {
  const sbx = await create({ timeoutMs: 60_000 });
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 200_000 });
  assert.equal(again.sandboxId, sbx.sandboxId);
  assert.ok(await again.isRunning());
  assert.ok(await sbx.isRunning(), 'the first handle (its access token) still works');
  const info = await again.getInfo();
  assert.ok(info.endAt.getTime() - Date.now() > 150_000, 'connect extended the deadline');
  // connect never shortens it
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 });
  assert.ok((await sbx.getInfo()).endAt.getTime() - Date.now() > 150_000);
});

test('list filters by metadata and state and pages with nextToken', async () => {
  const tag = `${RUN}-list`;
  const ids = [];
  for (let i = 0; i < 5; i++)
    ids.push((await create({ metadata: { tag, 'sp ace': 'v&=%', i: String(i) } })).sandboxId);
  const other = await create({ metadata: { tag: `${tag}-other` } });

  const all = await Sandbox.list({ query: { metadata: { tag, 'sp ace': 'v&=%' } } }).nextItems();
  assert.deepEqual(all.map((s) => s.sandboxId).sort(), [...ids].sort());
  assert.ok(all.every((s) => s.state === 'running' && s.metadata.tag === tag));
  const one = await Sandbox.list({ query: { metadata: { tag, i: '3' } } }).nextItems();
  assert.deepEqual(one.map((s) => s.sandboxId), [ids[3]]);

  const pager = Sandbox.list({ limit: 2, query: { metadata: { tag } } });
  const seen = [];
  let pages = 0;
  while (pager.hasNext) {
    const items = await pager.nextItems();
    assert.ok(items.length <= 2);
    seen.push(...items.map((s) => s.sandboxId));
    pages++;
  }
  assert.equal(pages, 3);
  assert.deepEqual([...seen].sort(), [...ids].sort());
  assert.ok(!seen.includes(other.sandboxId));

  const paused = await Sandbox.list({ query: { metadata: { tag }, state: ['paused'] } }).nextItems();
  assert.deepEqual(paused, []);
});

test('setTimeout replaces the deadline, getMetrics reports usage', async () => {
  const sbx = await create({ timeoutMs: 300_000 });
  await sbx.setTimeout(30_000);
  const left = (await sbx.getInfo()).endAt.getTime() - Date.now();
  assert.ok(left > 20_000 && left < 40_000, `left ${left}`);
  const env = await paddock('GET', `/v1/envs/${sbx.sandboxId}`);
  assert.equal(env.json.ttl, 30);
  const m = await sbx.getMetrics();
  assert.equal(m.length, 1);
  assert.equal(m[0].cpuCount, 2);
  assert.equal(m[0].memTotal, 512 * 1024 * 1024);
  assert.ok(m[0].memUsed > 0);
  assert.ok(m[0].timestamp instanceof Date);
});

test('betaPause freezes, connect resumes', async () => {
  const sbx = await create();
  await sbx.files.write('/tmp/keep.txt', 'survives');
  assert.equal(await sbx.betaPause(), true);
  assert.equal(await sbx.betaPause(), false, 'already paused: 409 -> false');
  assert.equal(await sbx.isRunning(), false);
  assert.equal((await sbx.getInfo()).state, 'paused');
  const env = await paddock('GET', `/v1/envs/${sbx.sandboxId}`);
  assert.equal(env.json.state, 'paused');
  const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
  assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId));

  const resumed = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 });
  assert.ok(await resumed.isRunning());
  assert.equal((await resumed.getInfo()).state, 'running');
  assert.equal(await resumed.files.read('/tmp/keep.txt'), 'survives');
});

test('kill: the sandbox is gone everywhere; a second kill returns false', async () => {
  const sbx = await create({ metadata: { tag: `${RUN}-kill` } });
  const id = sbx.sandboxId;
  assert.equal(await sbx.kill(), true);
  assert.equal(await Sandbox.kill(id), false);
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(Sandbox.getInfo(id), SandboxNotFoundError);
  await assert.rejects(Sandbox.connect(id), SandboxNotFoundError);
  await assert.rejects(sbx.setTimeout(1000), SandboxNotFoundError);
  const listed = await Sandbox.list({ query: { metadata: { tag: `${RUN}-kill` } } }).nextItems();
  assert.deepEqual(listed, []);
  assert.equal((await paddock('GET', `/v1/envs/${id}`)).status, 404);
});

test('unknown sandbox: NotFoundError', async () => {
  await assert.rejects(Sandbox.getInfo('inosuchsandbox000000'), NotFoundError);
  await assert.rejects(Sandbox.connect('inosuchsandbox000000'), SandboxNotFoundError);
  assert.equal(await Sandbox.kill('inosuchsandbox000000'), false);
});

test('an expired sandbox behaves like a killed one', async () => {
  const sbx = await create({ timeoutMs: 2000 });
  const id = sbx.sandboxId;
  let gone = false;
  for (let i = 0; i < 60 && !gone; i++) {
    await sleep(250);
    gone = (await paddock('GET', `/v1/envs/${id}`)).status === 404;
  }
  assert.ok(gone, 'the TTL sweep destroyed it');
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(sbx.getInfo(), SandboxNotFoundError);
  assert.equal(await sbx.kill(), false);
});

test('another API key does not see the sandbox', async () => {
  const sbx = await create({ metadata: { tag: `${RUN}-mine` } });
  const apiKey = process.env.E2B_OTHER_API_KEY;
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey }), SandboxNotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey }), SandboxNotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey }), false);
  const theirs = await Sandbox.list({ apiKey, query: { metadata: { tag: `${RUN}-mine` } } }).nextItems();
  assert.deepEqual(theirs, []);
  // an administrator token sees every sandbox
  const admin = await Sandbox.getInfo(sbx.sandboxId, { apiKey: process.env.E2B_ADMIN_API_KEY });
  assert.equal(admin.sandboxId, sbx.sandboxId);
  assert.ok(await sbx.isRunning());
});

test('a bad API key: AuthenticationError', async () => {
  const apiKey = 'pdk_' + 'A'.repeat(43);
  await assert.rejects(Sandbox.create({ apiKey }), AuthenticationError);
  await assert.rejects(Sandbox.list({ apiKey }).nextItems(), AuthenticationError);
  await assert.rejects(Sandbox.create({ apiKey: 'e2b_not_a_paddock_token' }), AuthenticationError);
});

test('an unknown template is refused', async () => {
  await assert.rejects(Sandbox.create({ template: 'no-such-image' }), /404|not found/);
});
