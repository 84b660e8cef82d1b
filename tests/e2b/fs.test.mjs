// filesystem.Filesystem through the unmodified e2b SDK: list, exists, getInfo, remove,
// rename, makeDir, watchDir. Run by tests/e2b/run.sh.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, FileType, FilesystemEventType, NotFoundError } from 'e2b'

const template = process.env.E2B_TEST_TEMPLATE || undefined
const sbx = await Sandbox.create(template, { timeoutMs: 300_000 })
after(async () => { await sbx.kill() })

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

test('list with depth, exists, getInfo', async () => {
  await sbx.commands.run('mkdir -p /tmp/fs/sub/deeper && printf hello > /tmp/fs/a.txt && ' +
    'chmod 644 /tmp/fs/a.txt && touch /tmp/fs/sub/deeper/f && ln -s a.txt /tmp/fs/link')
  const one = await sbx.files.list('/tmp/fs')
  assert.deepEqual(one.map((e) => e.path).sort(), ['/tmp/fs/a.txt', '/tmp/fs/link', '/tmp/fs/sub'])
  const three = await sbx.files.list('/tmp/fs', { depth: 3 })
  assert.ok(three.some((e) => e.path === '/tmp/fs/sub/deeper/f'))
  const info = await sbx.files.getInfo('/tmp/fs/a.txt')
  assert.equal(info.name, 'a.txt')
  assert.equal(info.type, FileType.FILE)
  assert.equal(info.size, 5)
  assert.equal(info.mode, 0o644)
  assert.equal(info.permissions, '-rw-r--r--')
  assert.ok(info.modifiedTime instanceof Date)
  const link = await sbx.files.getInfo('/tmp/fs/link')
  assert.equal(link.symlinkTarget, 'a.txt')
  assert.equal((await sbx.files.getInfo('/tmp/fs/sub')).type, FileType.DIR)
  assert.equal(await sbx.files.exists('/tmp/fs/a.txt'), true)
  assert.equal(await sbx.files.exists('/tmp/fs/nope'), false)
  await assert.rejects(sbx.files.getInfo('/tmp/fs/nope'), (e) => e instanceof NotFoundError)
})

test('makeDir, rename, remove', async () => {
  assert.equal(await sbx.files.makeDir('/tmp/fs2/x/y'), true)
  assert.equal(await sbx.files.makeDir('/tmp/fs2/x/y'), false) // exists
  await sbx.commands.run('echo data > /tmp/fs2/r1.txt')
  const moved = await sbx.files.rename('/tmp/fs2/r1.txt', '/tmp/fs2/renamed/r2.txt')
  assert.equal(moved.path, '/tmp/fs2/renamed/r2.txt')
  assert.equal(await sbx.files.exists('/tmp/fs2/r1.txt'), false)
  await assert.rejects(sbx.files.rename('/tmp/fs2/none', '/tmp/fs2/z'), (e) => e instanceof NotFoundError)
  await sbx.files.remove('/tmp/fs2')
  assert.equal(await sbx.files.exists('/tmp/fs2'), false)
  await sbx.files.remove('/tmp/fs2') // missing is fine
})

test('watchDir recursive sees create, write, remove, rename', async () => {
  await sbx.files.makeDir('/tmp/wd/inner')
  const events = []
  const w = await sbx.files.watchDir('/tmp/wd', (e) => events.push(e), { recursive: true })
  await sbx.commands.run('echo a > /tmp/wd/w.txt; echo b >> /tmp/wd/inner/deep.txt; ' +
    'mv /tmp/wd/w.txt /tmp/wd/moved.txt; rm /tmp/wd/moved.txt')
  const has = (name, type) => events.some((e) => e.name === name && e.type === type)
  for (let i = 0; i < 100 && !has('moved.txt', FilesystemEventType.REMOVE); i++) await sleep(100)
  await w.stop()
  assert.ok(has('w.txt', FilesystemEventType.CREATE), JSON.stringify(events))
  assert.ok(has('w.txt', FilesystemEventType.WRITE), JSON.stringify(events))
  assert.ok(has('inner/deep.txt', FilesystemEventType.CREATE), JSON.stringify(events))
  assert.ok(has('w.txt', FilesystemEventType.RENAME), JSON.stringify(events))
  assert.ok(has('moved.txt', FilesystemEventType.REMOVE), JSON.stringify(events))
})
