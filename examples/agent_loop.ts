// A scripted agent loop (no model): a fixed list of steps an agent would take, run against
// paddockd through the TypeScript SDK. It creates a computer, installs a tool into it (a
// directory uploaded from here, so no network is needed), writes code, runs it, snapshots,
// forks, checks the fork, and cleans up.
//
//   cd sdk/js && npm ci && npm run build     (or: npm install ./paddock-0.1.0.tgz)
//   PADDOCK_SOCKET=/run/paddock/paddock.sock node agent_loop.js
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Paddock, type Env } from "paddock";

type Step = { say: string; run: (env: Env) => Promise<string> };

// The "package" to install: a tiny tool, staged in a local directory.
const pkg = mkdtempSync(join(tmpdir(), "agent-pkg-"));
mkdirSync(join(pkg, "bin"));
writeFileSync(join(pkg, "bin", "wordcount"), "#!/bin/sh\nwc -w | tr -d ' '\n", { mode: 0o755 });

const paddock = new Paddock();
const name = "agent-" + process.pid;

const steps: Step[] = [
  { say: "install the wordcount tool", run: async (env) => {
      const r = await env.files.upload(pkg, "/opt/wordcount");
      await env.exec("mkdir -p /usr/local/bin && ln -sf /opt/wordcount/bin/wordcount /usr/local/bin/");
      return `${r.entries} entries`;
    } },
  { say: "write a program", run: async (env) => {
      await env.files.write("/root/app/main.sh", "#!/bin/sh\necho \"the quick brown fox jumps\" | PATH=/usr/local/bin:$PATH wordcount\n", { mode: 0o755 });
      return (await env.files.list("/root/app")).map((e) => e.name).join(",");
    } },
  { say: "run it", run: async (env) => {
      const r = await env.exec(["/root/app/main.sh"]);
      if (r.exitCode !== 0 || r.stdout.trim() !== "5") throw new Error(`unexpected result: ${JSON.stringify(r)}`);
      return `printed ${r.stdout.trim()}`;
    } },
  { say: "snapshot the working state", run: async (env) => (await env.snapshot("works")).name },
  { say: "break the original", run: async (env) => {
      await env.exec("rm -rf /root/app");
      return (await env.exec("test -e /root/app/main.sh")).exitCode === 1 ? "gone" : "still there";
    } },
  { say: "fork the snapshot and check the fork", run: async (env) => {
      const fork = await env.fork(name + "-fork", { snapshot: "works" });
      try {
        const r = await fork.exec(["/root/app/main.sh"]);
        if (r.stdout.trim() !== "5") throw new Error("the fork lost the program");
        return `${fork.name} printed ${r.stdout.trim()}`;
      } finally {
        await fork.destroy();
      }
    } },
];

try {
  await paddock.withEnv({ name, kind: "computer", network: { mode: "none" } }, async (env) => {
    console.log(`created ${env.kind} ${env.name}`);
    for (const [i, s] of steps.entries()) console.log(`step ${i + 1}: ${s.say}: ${await s.run(env)}`);
  });
  console.log("cleaned up");
} finally {
  rmSync(pkg, { recursive: true, force: true });
  paddock.close();
}
