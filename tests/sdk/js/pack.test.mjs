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

  // the LangChain example needs @langchain/core in the project: the pinned one, from the
  // npm cache that npm ci filled where it can, else from the registry (npm ci caches the
  // tarballs of the lockfile but not the registry's package documents that an install by
  // version needs: on a machine with an empty cache --offline fails)
  const lc = JSON.parse(await fsp.readFile(path.join(sdk, "package.json"), "utf8")).devDependencies["@langchain/core"];
  run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "@langchain/core@" + lc], { cwd: proj });

  const doc = await fsp.readFile(path.join(repo, "docs/sdk-js.md"), "utf8");
  const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  const first = blocks[0];
  assert.ok(first.trim().split("\n").length <= 10, "the docs start with a ten-line example");
  assert.ok(blocks.length >= 5, "the page's other examples: " + blocks.length);
  await fsp.writeFile(path.join(proj, "readme_example.ts"), first);
  // every other example runs inside an environment `env` named box1 (imports hoisted)
  const snippets = blocks.slice(1).map((b, i) => {
    const lines = b.split("\n");
    const imports = lines.filter((l) => l.startsWith("import "));
    const body = lines.filter((l) => !l.startsWith("import "));
    if (!imports.some((l) => /\bPaddock\b/.test(l))) imports.unshift('import { Paddock } from "paddock";');
    const name = `snippet_${i + 1}.ts`;
    const src = imports.join("\n") + "\nconst paddock = new Paddock();\n" +
      'await paddock.withEnv({ name: "box1", kind: "computer" }, async (env) => {\n' + body.join("\n") + "\n});\npaddock.close();\n";
    return { name, src };
  });
  for (const sn of snippets) await fsp.writeFile(path.join(proj, sn.name), sn.src);
  await fsp.copyFile(path.join(repo, "examples/agent_loop.ts"), path.join(proj, "agent_loop.ts"));
  run(path.join(sdk, "node_modules/.bin/tsc"), ["--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022",
    "--strict", "--skipLibCheck", "--typeRoots", path.join(sdk, "node_modules/@types"), "--types", "node", "--outDir", "out",
    "readme_example.ts", "agent_loop.ts", ...snippets.map((x) => x.name)], { cwd: proj });

  const out = run("node", ["out/readme_example.js"], { cwd: proj, timeout: 60000 });
  assert.match(out, /^0 hello from \S+\n\n$/);
  const snippetOut = {};
  for (const sn of snippets) snippetOut[sn.name] = run("node", ["out/" + sn.name.replace(/\.ts$/, ".js")], { cwd: proj, timeout: 60000 });
  const all = Object.values(snippetOut).join("\n---\n");
  assert.match(all, /step 1\nstep 2\nstep 3\n0\n/);           // execStream
  assert.match(all, /\n3\n/);                                    // the terminal's exit code
  assert.match(all, /create \/workspace\/out\/done/);             // watch
  assert.match(all, /exit_code: 0\nstdout:\nLinux /);            // the LangChain tool

  const loop = run("node", ["out/agent_loop.js"], { cwd: proj, timeout: 120000 });
  assert.match(loop, /created computer agent-\d+\n/);
  assert.match(loop, /step 3: run it: printed 5\n/);
  assert.match(loop, /step 6: fork the snapshot and check the fork: agent-\d+-fork printed 5\n/);
  assert.match(loop, /cleaned up\n$/);
  await fsp.rm(proj, { recursive: true, force: true });
});
