// process.Process through the unmodified e2b SDK: commands and terminals.
// Run by tests/e2b/run.sh with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, TimeoutError } from 'e2b'

const template = process.env.E2B_TEST_TEMPLATE || undefined
const sbx = await Sandbox.create(template, { timeoutMs: 300_000 })
after(async () => { await sbx.kill() })

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

test('foreground run: output callbacks, envs, cwd, user', async () => {
  const out = [], err = []
  const r = await sbx.commands.run('echo "hi $CONF_A"; echo oops >&2; pwd; whoami', {
    envs: { CONF_A: 'x y' }, cwd: '/tmp',
    onStdout: (d) => out.push(d), onStderr: (d) => err.push(d),
  })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hi x y\n/tmp\nuser\n') // the sandbox's default user
  assert.equal(r.stderr, 'oops\n')
  assert.equal(out.join(''), r.stdout)
  assert.equal(err.join(''), 'oops\n')
  const root = await sbx.commands.run('id -u', { user: 'root' })
  assert.equal(root.stdout.trim(), '0')
  const home = await sbx.commands.run('echo "$HOME $USER $LOGNAME $(pwd)"')
  assert.equal(home.stdout, '/home/user user user /home/user\n')
})

test('a non-zero exit is a CommandExitError', async () => {
  await assert.rejects(sbx.commands.run('echo partial; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'partial\n')
    assert.match(e.message, /exit status 7/)
    return true
  })
})

test('background handle: sendStdin, wait, list, kill, connect', async () => {
  const h = await sbx.commands.run('read line; echo "got $line"', { background: true, stdin: true })
  assert.ok(h.pid > 0)
  assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid))
  await sbx.commands.sendStdin(h.pid, 'ping\n')
  const r = await h.wait()
  assert.equal(r.stdout, 'got ping\n')
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid))

  const long = await sbx.commands.run('for i in $(seq 1 600); do echo tick $i; sleep 0.1; done',
    { background: true, timeoutMs: 0 })
  await long.disconnect() // the process keeps running
  await sleep(500)
  const listed = (await sbx.commands.list()).find((p) => p.pid === long.pid)
  assert.ok(listed, 'still running after disconnect')
  assert.equal(listed.cmd, '/bin/bash')
  const seen = []
  const again = await sbx.commands.connect(long.pid, { onStdout: (d) => seen.push(d) })
  for (let i = 0; i < 50 && seen.length === 0; i++) await sleep(100)
  assert.ok(seen.join('').includes('tick'))
  assert.equal(await again.kill(), true)
  await assert.rejects(again.wait(), (e) => e instanceof CommandExitError && /signal: killed/.test(e.message))
  assert.equal(await sbx.commands.kill(long.pid), false) // gone
})

test('a command timeout kills the command', async () => {
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }),
    (e) => e instanceof TimeoutError)
  assert.ok(Date.now() - t0 < 15_000)
  await sleep(1000)
  const left = await sbx.commands.list()
  assert.ok(!left.some((p) => p.args.includes('sleep 30')), 'the command was killed')
})

test('pty: create, sendInput, resize, kill', async () => {
  let data = ''
  const dec = new TextDecoder()
  const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { data += dec.decode(d) } })
  const enc = new TextEncoder()
  await sbx.pty.sendInput(t.pid, enc.encode('stty size\n'))
  for (let i = 0; i < 100 && !data.includes('24 80'); i++) await sleep(100)
  assert.ok(data.includes('24 80'), data)
  await sbx.pty.resize(t.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(t.pid, enc.encode('stty size\n'))
  for (let i = 0; i < 100 && !data.includes('30 100'); i++) await sleep(100)
  assert.ok(data.includes('30 100'), data)
  assert.equal(await sbx.pty.kill(t.pid), true)
  await assert.rejects(t.wait())
})
