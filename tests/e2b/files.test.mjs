// envd's plain routes through the unmodified e2b SDK: files.read / write (text, bytes, blobs,
// streams, many files at once, raw and gzip'ed uploads), a 10 MB round trip, binary data,
// relative paths, upload and download URLs, and the errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Sandbox, FileNotFoundError, InvalidArgumentError } from 'e2b';
import { paddock } from './helpers.mjs';

let sbx;
before(async () => { sbx = await Sandbox.create({ timeoutMs: 300_000 }); });
after(async () => { if (sbx) await sbx.kill().catch(() => {}); });

test('text: write and read, relative paths land in /home/user', async () => {
  const info = await sbx.files.write('notes/a.txt', 'hello E2B\n');
  assert.equal(info.path, '/home/user/notes/a.txt');
  assert.equal(info.name, 'a.txt');
  assert.equal(info.type, 'file');
  assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'hello E2B\n');
  assert.equal(await sbx.files.read('notes/a.txt'), 'hello E2B\n');
  assert.equal(await sbx.files.read('~/notes/a.txt'), 'hello E2B\n');
  await sbx.files.write('notes/a.txt', 'replaced');
  assert.equal(await sbx.files.read('notes/a.txt'), 'replaced');
  await sbx.files.write('/tmp/empty', '');
  assert.equal(await sbx.files.read('/tmp/empty'), '');
});

test('files are owned by the user, or by root when asked', async () => {
  await sbx.files.write('/tmp/own-user', 'u');
  await sbx.files.write('/tmp/own-root', 'r', { user: 'root' });
  const stat = (p) => paddock('GET', `/v1/envs/${sbx.sandboxId}/files/stat?path=${p}`);
  assert.equal((await stat('/tmp/own-user')).json.uid, 1000);
  assert.equal((await stat('/tmp/own-root')).json.uid, 0);
  await sbx.files.write('deep/er/file', 'x');
  assert.equal((await stat('/home/user/deep/er')).json.uid, 1000, 'made parents belong to the user');
  const home = await paddock('GET', `/v1/envs/${sbx.sandboxId}/files/stat?path=/home/user`);
  assert.equal(home.json.uid, 1000);
});

test('bytes, blobs, streams and every byte value round trip', async () => {
  const all = new Uint8Array(256 * 4);
  for (let i = 0; i < all.length; i++) all[i] = i % 256;
  await sbx.files.write('/tmp/bin', all.buffer);
  assert.deepEqual(new Uint8Array(await sbx.files.read('/tmp/bin', { format: 'bytes' })), all);
  const blob = await sbx.files.read('/tmp/bin', { format: 'blob' });
  assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), all);
  await sbx.files.write('/tmp/blob', new Blob([all]));
  assert.deepEqual(new Uint8Array(await sbx.files.read('/tmp/blob', { format: 'bytes' })), all);
  const stream = new ReadableStream({ start(c) { c.enqueue(all.slice(0, 100)); c.enqueue(all.slice(100)); c.close(); } });
  await sbx.files.write('/tmp/stream', stream);
  const rs = await sbx.files.read('/tmp/stream', { format: 'stream' });
  const parts = [];
  for await (const p of rs) parts.push(...p);
  assert.deepEqual(new Uint8Array(parts), all);
});

test('raw and gzip uploads (envd 0.5.7 octet-stream)', async () => {
  await sbx.files.write('/tmp/raw.txt', 'raw body', { useOctetStream: true });
  assert.equal(await sbx.files.read('/tmp/raw.txt'), 'raw body');
  const text = 'zipped '.repeat(1000);
  await sbx.files.write('/tmp/gz.txt', text, { gzip: true });
  assert.equal(await sbx.files.read('/tmp/gz.txt'), text);
});

test('writeFiles: many files in one request, in order', async () => {
  const files = [];
  for (let i = 0; i < 12; i++) files.push({ path: `/tmp/many/d${i % 3}/f${i}.txt`, data: `file ${i}` });
  files.push({ path: 'rel/"quoted" name.txt', data: 'q' });
  const infos = await sbx.files.write(files);
  assert.equal(infos.length, files.length);
  assert.equal(infos[0].path, '/tmp/many/d0/f0.txt');
  assert.equal(infos[12].path, '/home/user/rel/"quoted" name.txt');
  for (let i = 0; i < 12; i++) assert.equal(await sbx.files.read(files[i].path), `file ${i}`);
  assert.equal(await sbx.files.read('rel/"quoted" name.txt'), 'q');
});

test('a 10 MB upload round trips', async () => {
  const big = crypto.randomBytes(10 * 1024 * 1024);
  const t0 = Date.now();
  await sbx.files.write('/tmp/big.bin', big);
  const back = Buffer.from(await sbx.files.read('/tmp/big.bin', { format: 'bytes' }));
  assert.equal(back.length, big.length);
  assert.ok(back.equals(big));
  console.log(`10 MB up and down in ${Date.now() - t0} ms`);
});

test('upload and download URLs', async () => {
  const up = await sbx.uploadUrl('/tmp/via-url.txt');
  const form = new FormData();
  form.append('file', new Blob(['by url']), '/tmp/via-url.txt');
  const res = await fetch(up, { method: 'POST', body: form, headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': sbx.envdAccessToken ?? '' } });
  assert.equal(res.status, 200, await res.clone().text());
  const down = await sbx.downloadUrl('/tmp/via-url.txt');
  const got = await fetch(down, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': sbx.envdAccessToken ?? '' } });
  assert.equal(got.status, 200);
  assert.equal(await got.text(), 'by url');
});

test('errors: a missing file, a directory, no access', async () => {
  await assert.rejects(sbx.files.read('/tmp/does-not-exist'), FileNotFoundError);
  await assert.rejects(sbx.files.read('/tmp'), InvalidArgumentError);
  await assert.rejects(sbx.files.write('/proc/sys/kernel/x', 'no'), (e) => e instanceof Error);
});
