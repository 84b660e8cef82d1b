// `npm pack` makes an installable package: it is installed into a fresh project, and the
// first example of docs/sdk-js.md and examples/agent_loop.ts are type-checked against its
// declarations (tsc) and run against the daemon, as a user would.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { promises as fsp } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const sdk = path.join(repo, "sdk/js");
const proj = path.join(process.env.PADDOCK_TEST_DIR, "user-project");
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], ...opts });

test("npm pack, install, type-check and run the docs example and the agent loop", async () => {
  await fsp.rm(proj, { recursive: true, force: true });
  await fsp.mkdir(proj, { recursive: true });
  const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", proj], { cwd: sdk }));
  const files = packed[0].files.map((f) => f.path);
  for (const f of ["dist/index.js", "dist/index.d.ts", "dist/langchain.js", "dist/langchain.d.ts", "package.json"])
    assert.ok(files.includes(f), `${f} in the package: ${files}`);
  assert.ok(!files.some((f) => f.startsWith("src/") || f.includes("node_modules")));
  const manifest = JSON.parse(await fsp.readFile(path.join(sdk, "package.json"), "utf8"));
  assert.equal(manifest.dependencies, undefined, "no runtime dependencies");

  await fsp.writeFile(path.join(proj, "package.json"), JSON.stringify({ name: "user-project", private: true, type: "module" }));
  run("npm", ["install", "--offline", "--no-audit", "--no-fund", path.join(proj, packed[0].filename)], { cwd: proj });

  const doc = await fsp.readFile(path.join(repo, "docs/sdk-js.md"), "utf8");
  const first = doc.match(/```ts\n([\s\S]*?)```/)[1];
  assert.ok(first.trim().split("\n").length <= 10, "the docs start with a ten-line example");
  await fsp.writeFile(path.join(proj, "readme_example.ts"), first);
  await fsp.copyFile(path.join(repo, "examples/agent_loop.ts"), path.join(proj, "agent_loop.ts"));
  run(path.join(sdk, "node_modules/.bin/tsc"), ["--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022",
    "--strict", "--typeRoots", path.join(sdk, "node_modules/@types"), "--types", "node", "--outDir", "out",
    "readme_example.ts", "agent_loop.ts"], { cwd: proj });

  const out = run("node", ["out/readme_example.js"], { cwd: proj, timeout: 60000 });
  assert.match(out, /^0 hello from \S+\n\n$/);

  const loop = run("node", ["out/agent_loop.js"], { cwd: proj, timeout: 120000 });
  assert.match(loop, /created computer agent-\d+\n/);
  assert.match(loop, /step 3: run it: printed 5\n/);
  assert.match(loop, /step 6: fork the snapshot and check the fork: agent-\d+-fork printed 5\n/);
  assert.match(loop, /cleaned up\n$/);
  await fsp.rm(proj, { recursive: true, force: true });
});
