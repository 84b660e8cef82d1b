// The TypeScript SDK against a real paddockd on its unix socket (run by with-daemon.sh,
// which sets PADDOCK_SOCKET). Each test makes its own environments and removes them.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { promises as fsp } from "node:fs";
import * as path from "node:path";
import {
  Paddock, PaddockError, NotFound, Conflict, InvalidArgument, CommandTimeout,
} from "../../../sdk/js/dist/index.js";

const paddock = new Paddock();
const scratch = process.env.PADDOCK_TEST_DIR;
after(() => paddock.close());

test("system, create, get, list, labels, destroy", async () => {
  const sys = await paddock.system();
  assert.equal(typeof sys.version, "string");
  const env = await paddock.envs.create({ name: "js-basic", kind: "sandbox", labels: { suite: "js" }, env: { GREETING: "hello" } });
  try {
    assert.equal(env.name, "js-basic");
    assert.equal(env.kind, "sandbox");
    assert.equal(env.state, "running");
    assert.equal((await paddock.envs.get("js-basic")).info.labels.suite, "js");
    const listed = await paddock.envs.list({ labels: { suite: "js" } });
    assert.deepEqual(listed.map((e) => e.name), ["js-basic"]);
    assert.deepEqual(await paddock.envs.list({ labels: { suite: "nope" } }), []);
    assert.equal((await env.exec("echo $GREETING")).stdout, "hello\n");
  } finally {
    await env.destroy();
  }
  await assert.rejects(paddock.envs.get("js-basic"), NotFound);
  // a generated name
  await paddock.withEnv({}, async (e) => assert.match(e.name, /^sdk-[0-9a-f]{8}$/));
});

test("typed errors carry the server's code, status and message", async () => {
  const err = await paddock.envs.get("no-such-env").catch((e) => e);
  assert.ok(err instanceof NotFound && err instanceof PaddockError);
  assert.equal(err.code, "not_found");
  assert.equal(err.status, 404);
  assert.match(err.message, /no such environment: no-such-env/);
  const bad = await paddock.envs.create({ name: "js-bad", bogus: 1 }).catch((e) => e);
  assert.ok(bad instanceof InvalidArgument, String(bad));
  assert.match(bad.message, /bogus/);
  await paddock.withEnv({ name: "js-dup", kind: "sandbox" }, async () => {
    const dup = await paddock.envs.create({ name: "js-dup" }).catch((e) => e);
    assert.ok(dup instanceof Conflict, String(dup));
    assert.equal(dup.status, 409);
  });
  const off = new Paddock({ socketPath: "/nonexistent/paddock.sock" });
  const ce = await off.system().catch((e) => e);
  assert.equal(ce.code, "connection_failed");
});

test("withEnv destroys the environment also when the callback throws", async () => {
  await assert.rejects(paddock.withEnv({ name: "js-with", kind: "sandbox" }, async (env) => {
    assert.equal(env.state, "running");
    throw new Error("boom");
  }), /boom/);
  await assert.rejects(paddock.envs.get("js-with"), NotFound);
});

test("exec: stdin, env, cwd, user, exit codes, binary, timeout, streaming", async () => {
  await paddock.withEnv({ name: "js-exec", kind: "sandbox" }, async (env) => {
    let r = await env.exec(["sh", "-c", "cat; echo \"$A\" >&2; pwd; id -u; exit 7"],
      { stdin: "in put\n", env: { A: "bee" }, cwd: "/tmp", user: "1000" });
    assert.equal(r.exitCode, 7);
    assert.equal(r.stdout, "in put\n/tmp\n1000\n");
    assert.equal(r.stderr, "bee\n");
    assert.equal(r.timedOut, false);
    // bytes as stdin (raw body) and binary output
    const bin = Buffer.from([0, 1, 2, 255, 254, 10]);
    r = await env.exec(["cat"], { stdin: bin });
    assert.deepEqual(r.stdoutBytes, bin);
    r = await env.exec("nosuchcommand");
    assert.equal(r.exitCode, 127);
    // timeout
    const t0 = Date.now();
    const te = await env.exec("sleep 30", { timeout: "1s" }).catch((e) => e);
    assert.ok(te instanceof CommandTimeout, String(te));
    assert.equal(te.result.timedOut, true);
    assert.ok(Date.now() - t0 < 15000);
    r = await env.exec("echo x; sleep 30", { timeout: 1, throwOnTimeout: false });
    assert.equal(r.timedOut, true);
    assert.equal(r.stdout, "x\n");
    // streaming: callbacks see the first line before the command ends
    const seen = [];
    let firstAt = 0;
    const t1 = Date.now();
    r = await env.exec("echo one; sleep 1; echo two >&2; echo three", {
      onStdout: (s) => { seen.push(["out", s]); firstAt ||= Date.now(); },
      onStderr: (s) => seen.push(["err", s]),
    });
    assert.ok(firstAt - t1 < 900, "the first chunk came while the command still ran");
    assert.equal(r.stdout, "one\nthree\n");
    assert.equal(r.stderr, "two\n");
    assert.equal(r.exitCode, 0);
    assert.deepEqual(seen.map((x) => x[0]).filter((x, i, a) => a[i - 1] !== x), ["out", "err", "out"]);
    // streaming: an async iterator
    const st = env.execStream(["sh", "-c", "printf a; printf b >&2; exit 4"]);
    const chunks = [];
    for await (const c of st) chunks.push(c.stream + ":" + c.text);
    assert.deepEqual(chunks.sort(), ["stderr:b", "stdout:a"]);
    assert.equal(st.exit.exitCode, 4);
  });
});

test("background processes: start, list, logs, follow, wait, kill, remove", async () => {
  await paddock.withEnv({ name: "js-procs", kind: "sandbox" }, async (env) => {
    const p = await env.processes.start("echo started; sleep 1; echo done; exit 3");
    assert.equal(p.info.state, "running");
    assert.ok((await env.processes.list()).some((x) => x.id === p.id));
    // follow: live output until the exit line
    const follow = p.logs({ follow: true });
    const got = await follow.collect();
    assert.equal(got.stdout, "started\ndone\n");
    assert.equal(got.exit.exitCode, 3);
    const w = await p.wait();
    assert.equal(w.exitCode, 3);
    assert.equal((await p.refresh()).info.state, "exited");
    const again = await env.processes.logs(p.id).collect();
    assert.equal(again.stdout, "started\ndone\n");
    await p.remove();
    await assert.rejects(env.processes.get(p.id), NotFound);

    const long = await env.processes.start(["sleep", "100"]);
    await assert.rejects(long.remove(), Conflict);
    await long.kill("KILL");
    const e = await long.wait();
    assert.equal(e.exitCode, 137);
    await assert.rejects(long.kill(), Conflict);
  });
});

test("files: write, read, stat, list, mkdir, move, remove", async () => {
  await paddock.withEnv({ name: "js-files", kind: "sandbox" }, async (env) => {
    const f = env.files;
    await f.mkdir("/workspace/a/b");
    const w = await f.write("/workspace/a/b/hello.txt", "hello\n", { mode: 0o600 });
    assert.equal(w.size, 6);
    assert.equal(await f.readText("/workspace/a/b/hello.txt"), "hello\n");
    const bin = Buffer.from([0, 255, 1, 2]);
    await f.write("/workspace/bin", bin);
    assert.deepEqual(await f.read("/workspace/bin"), bin);
    const st = await f.stat("/workspace/a/b/hello.txt");
    assert.equal(st.type, "file");
    assert.equal(st.size, 6);
    assert.equal(st.mode, 0o600);
    assert.deepEqual((await f.list("/workspace")).map((e) => [e.name, e.type]), [["a", "dir"], ["bin", "file"]]);
    await f.move("/workspace/bin", "/workspace/bin2");
    await assert.rejects(f.stat("/workspace/bin"), NotFound);
    await f.write("/workspace/bin", "x");
    await assert.rejects(f.move("/workspace/bin", "/workspace/bin2"), PaddockError);
    await f.move("/workspace/bin", "/workspace/bin2", { overwrite: true });
    assert.equal(await f.readText("/workspace/bin2"), "x");
    await assert.rejects(f.remove("/workspace/a"), PaddockError);
    await f.remove("/workspace/a", { recursive: true });
    await assert.rejects(f.stat("/workspace/a"), NotFound);
    const forb = await f.write("/etc/x", "no").catch((e) => e);
    assert.equal(forb.code, "forbidden");
  });
});

test("directory upload and download round trip", async () => {
  const src = path.join(scratch, "up");
  await fsp.rm(src, { recursive: true, force: true });
  await fsp.mkdir(path.join(src, "sub/deeper"), { recursive: true });
  await fsp.writeFile(path.join(src, "a.txt"), "alpha\n");
  await fsp.writeFile(path.join(src, "sub/run.sh"), "#!/bin/sh\necho ran\n", { mode: 0o755 });
  const big = Buffer.alloc(300000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
  await fsp.writeFile(path.join(src, "sub/deeper/big.bin"), big);
  const long = "n".repeat(120) + "-é.txt";
  await fsp.writeFile(path.join(src, "sub", long), "long name\n");
  await fsp.symlink("a.txt", path.join(src, "link"));
  await paddock.withEnv({ name: "js-tar", kind: "computer" }, async (env) => {
    const up = await env.files.upload(src, "/srv/project");
    assert.equal(up.entries, 8);
    assert.equal((await env.exec("/srv/project/sub/run.sh")).stdout, "ran\n");
    assert.equal((await env.exec("readlink /srv/project/link; cat /srv/project/sub/n*")).stdout, "a.txt\nlong name\n");
    await env.exec("echo made-inside > /srv/project/inside.txt");
    const dst = path.join(scratch, "down");
    await fsp.rm(dst, { recursive: true, force: true });
    await env.files.download("/srv/project", dst);
    assert.equal(await fsp.readFile(path.join(dst, "a.txt"), "utf8"), "alpha\n");
    assert.equal(await fsp.readFile(path.join(dst, "inside.txt"), "utf8"), "made-inside\n");
    assert.deepEqual(await fsp.readFile(path.join(dst, "sub/deeper/big.bin")), big);
    assert.equal(await fsp.readFile(path.join(dst, "sub", long), "utf8"), "long name\n");
    assert.equal(await fsp.readlink(path.join(dst, "link")), "a.txt");
    assert.equal((await fsp.stat(path.join(dst, "sub/run.sh"))).mode & 0o777, 0o755);
    await assert.rejects(env.files.download("/nope", dst), NotFound);
    await assert.rejects(env.files.upload(path.join(src, "a.txt"), "/srv/x"),
      (e) => e.code === "invalid_argument" && /not a directory/.test(e.message));
    await assert.rejects(env.files.upload(path.join(src, "missing"), "/srv/x"), (e) => e.code === "ENOENT");
  });
});

test("watch: an async iterator of changes", async () => {
  await paddock.withEnv({ name: "js-watch", kind: "sandbox" }, async (env) => {
    await env.files.mkdir("/workspace/w");
    const w = await env.files.watch("/workspace/w"); // resolves once the watch is in place
    const events = [];
    const reader = (async () => {
      for await (const ev of w) {
        events.push(ev);
        if (ev.event === "move_to") break; // leaving the loop ends the watch
      }
    })();
    await env.exec("echo x > /workspace/w/f; mkdir /workspace/w/d; mv /workspace/w/f /workspace/w/g");
    await Promise.race([reader, new Promise((_, rej) => setTimeout(() => rej(new Error("no move_to event: " + JSON.stringify(events))), 10000))]);
    assert.ok(events.some((e) => e.event === "create" && e.path === "/workspace/w/f" && e.type === "file"), JSON.stringify(events));
    assert.ok(events.some((e) => e.event === "create" && e.path === "/workspace/w/d" && e.type === "dir"));
    assert.ok(events.some((e) => e.event === "move_from" && e.path === "/workspace/w/f"));
    assert.equal(events.at(-1).path, "/workspace/w/g");
    await assert.rejects(env.files.watch("/workspace/none"), NotFound);
    // close() ends a loop that waits for events
    const w2 = await env.files.watch("/workspace/w", { recursive: false });
    const loop = (async () => { const got = []; for await (const ev of w2) got.push(ev); return got; })();
    setTimeout(() => w2.close(), 200);
    assert.deepEqual(await loop, []);
  });
});

test("terminal: echo, resize, signal, exit code", async () => {
  await paddock.withEnv({ name: "js-pty", kind: "sandbox" }, async (env) => {
    const t = await env.terminal({ cmd: ["sh"], cols: 80, rows: 24, env: { TERM: "dumb", PS1: "$ " } });
    t.write("stty size\n");
    await t.readUntil((s) => s.includes("24 80"));
    t.resize(100, 30);
    t.write("stty size; echo hello-$((6*7))\n");
    const out = await t.readUntil((s) => s.includes("hello-42"));
    assert.match(out, /30 100/);
    assert.ok(/hello-42\r\n/.test(out), "the pty turns \\n into \\r\\n");
    t.write("exit 5\n");
    const ex = await t.wait();
    assert.equal(ex.exitCode, 5);

    const t2 = await env.terminal({ cmd: "echo ready; exec sleep 60" });
    await t2.readUntil((s) => s.includes("ready")); // a signal needs the foreground group to exist
    t2.signal("INT");
    assert.equal((await t2.wait()).exitCode, 130);

    const t3 = await env.terminal({ cmd: ["cat"] });
    t3.write("typed\n");
    await t3.readUntil((s) => s.includes("typed\r\ntyped"));
    t3.write("\x04");
    assert.equal((await t3.wait()).exitCode, 0);

    await assert.rejects(paddock.envs.get("js-pty").then((e) => e.stop()).then((e) => e.terminal()), Conflict);
  });
});

test("lifecycle: stop, start, restart, pause, resume, update limits", async () => {
  await paddock.withEnv({ name: "js-life", kind: "computer", memory: "256M" }, async (env) => {
    assert.equal(env.info.limits.memory, 256 << 20);
    await env.update({ memory: "128M", pids: 100, cpus: 0.5 });
    assert.equal(env.info.limits.memory, 128 << 20);
    assert.equal(env.info.limits.pids, 100);
    assert.equal(env.info.limits.cpus, 0.5);
    assert.equal((await env.pause()).state, "paused");
    await assert.rejects(env.exec("true"), Conflict);
    assert.equal((await env.resume()).state, "running");
    await env.files.write("/root/keep", "kept");
    assert.equal((await env.stop({ timeout: 0 })).state, "stopped");
    await assert.rejects(env.exec("true"), Conflict);
    assert.equal((await env.start()).state, "running");
    assert.equal(await env.files.readText("/root/keep"), "kept");
    const pid = env.info.pid;
    assert.equal((await env.restart({ timeout: 0 })).state, "running");
    assert.notEqual(env.info.pid, pid);
    assert.equal((await env.refresh()).info.pid, env.info.pid);
  });
});

test("snapshot, restore, fork", async () => {
  await paddock.withEnv({ name: "js-snap", kind: "computer" }, async (env) => {
    await env.files.write("/root/state", "v1");
    const s = await env.snapshot("s1");
    assert.equal(s.name, "s1");
    assert.deepEqual((await env.snapshots()).map((x) => x.name), ["s1"]);
    await env.files.write("/root/state", "v2");
    const fork = await env.fork("js-snap-fork", { snapshot: "s1" });
    try {
      assert.equal(fork.state, "running");
      assert.equal(await fork.files.readText("/root/state"), "v1");
      const now = await env.fork("js-snap-fork2");
      assert.equal(await now.files.readText("/root/state"), "v2");
      await now.destroy();
    } finally {
      await fork.destroy();
    }
    await assert.rejects(env.restore("s1"), Conflict); // running: stop it first
    await env.stop({ timeout: 0 });
    await env.restore("s1");
    await env.start();
    assert.equal(await env.files.readText("/root/state"), "v1");
    await env.deleteSnapshot("s1");
    assert.deepEqual(await env.snapshots(), []);
    await assert.rejects(env.deleteSnapshot("s1"), NotFound);
  });
});

test("network policy", async () => {
  await paddock.withEnv({ name: "js-net", kind: "computer", network: { mode: "none" } }, async (env) => {
    assert.equal(env.info.network.mode, "none");
    if ((await paddock.system()).network !== "routed") return; // the daemon has no networking
    await env.setNetwork({ allow: ["example.com:443", "10.1.2.3/8"] });
    assert.equal(env.info.network.mode, "allow");
    assert.deepEqual(env.info.network.allow, ["example.com:443", "10.0.0.0/8"]);
    await env.setNetwork({ bandwidth: { egress: "10mbit" } });
    assert.equal(env.info.network.bandwidth.egress, 10000000);
    assert.deepEqual(env.info.network.allow, ["example.com:443", "10.0.0.0/8"]);
    await assert.rejects(env.setNetwork({ allow: ["not a rule"] }), InvalidArgument);
  });
});
