// The LangChain.js tools, invoked through LangChain's own interface (tool.invoke), against a
// real daemon; no model.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Paddock } from "../../../sdk/js/dist/index.js";
import { paddockTools } from "../../../sdk/js/dist/langchain.js";

const client = new Paddock();
after(() => client.close());
const tools = paddockTools(client);
const t = Object.fromEntries(tools.map((x) => [x.name, x]));

test("the tool set: names, descriptions, JSON schemas", () => {
  assert.deepEqual(Object.keys(t).sort(), [
    "paddock_create_environment", "paddock_destroy_environment", "paddock_fork", "paddock_list_environments",
    "paddock_list_files", "paddock_read_file", "paddock_read_process_output", "paddock_run_command",
    "paddock_set_network_policy", "paddock_snapshot", "paddock_start_process", "paddock_write_file",
  ]);
  for (const x of tools) {
    // a @langchain/core DynamicStructuredTool (the test cannot import @langchain/core itself:
    // it resolves from sdk/js/node_modules, next to the built package)
    assert.equal(x.constructor.name, "DynamicStructuredTool", x.name);
    assert.equal(typeof x.invoke, "function");
    assert.ok(x.description.length > 40, x.name);
    assert.equal(x.schema.type, "object");
  }
  assert.deepEqual(t.paddock_run_command.schema.required, ["env", "command"]);
});

test("an agent's steps through tool.invoke", async () => {
  let out = await t.paddock_create_environment.invoke({ name: "lc-box", kind: "computer", network_mode: "none" });
  assert.equal(JSON.parse(out).state, "running");
  try {
    assert.match(await t.paddock_list_environments.invoke({}), /"name":"lc-box"/);
    out = await t.paddock_write_file.invoke({ env: "lc-box", path: "/root/app/hello.sh", content: "echo hello from $1\n", mode: "0755" });
    assert.match(out, /wrote 19 bytes to \/root\/app\/hello.sh/);
    assert.equal(await t.paddock_read_file.invoke({ env: "lc-box", path: "/root/app/hello.sh" }), "echo hello from $1\n");
    assert.match(await t.paddock_list_files.invoke({ env: "lc-box", path: "/root/app" }), /^- +19 hello.sh$/);
    out = await t.paddock_run_command.invoke({ env: "lc-box", command: "/root/app/hello.sh agent; echo oops >&2; exit 2" });
    assert.equal(out, "exit_code: 2\nstdout:\nhello from agent\n\nstderr:\noops\n\n");
    out = await t.paddock_run_command.invoke({ env: "lc-box", command: "sleep 20", timeout: "1s" });
    assert.match(out, /timed out/);
    out = await t.paddock_run_command.invoke({ env: "lc-box", command: "head -c 30000 /dev/zero | tr '\\0' x" });
    assert.match(out, /truncated: 10000 more characters/);

    out = JSON.parse(await t.paddock_start_process.invoke({ env: "lc-box", command: "echo bg; sleep 2; echo end" }));
    assert.equal(out.state, "running");
    let first = "";
    for (let i = 0; i < 250 && !/bg/.test(first); i++) { // up to 5 s on a loaded machine
      if (i) await new Promise((r) => setTimeout(r, 20));
      first = await t.paddock_read_process_output.invoke({ env: "lc-box", id: out.id });
    }
    assert.match(first, /: running\nstdout:\nbg\n/);
    const done = await t.paddock_read_process_output.invoke({ env: "lc-box", id: out.id, wait: true });
    assert.match(done, /exited with exit_code 0\nstdout:\nbg\nend\n/);

    out = JSON.parse(await t.paddock_snapshot.invoke({ env: "lc-box", name: "before" }));
    assert.equal(out.name, "before");
    await t.paddock_run_command.invoke({ env: "lc-box", command: "rm /root/app/hello.sh" });
    out = JSON.parse(await t.paddock_fork.invoke({ env: "lc-box", name: "lc-fork", snapshot: "before" }));
    assert.equal(out.name, "lc-fork");
    assert.match(await t.paddock_run_command.invoke({ env: "lc-fork", command: "/root/app/hello.sh fork" }), /hello from fork/);
    assert.match(await t.paddock_destroy_environment.invoke({ env: "lc-fork" }), /destroyed lc-fork/);

    if ((await client.system()).network === "routed") {
      out = JSON.parse(await t.paddock_set_network_policy.invoke({ env: "lc-box", allow: ["example.com:443"] }));
      assert.deepEqual(out, { mode: "allow", allow: ["example.com:443"], links: [] });
    }
    // errors of the daemon come back as the answer, with its message
    assert.equal(await t.paddock_read_file.invoke({ env: "lc-box", path: "/nope" }).then((s) => s.startsWith("error (not_found):")), true);
    assert.match(await t.paddock_run_command.invoke({ env: "lc-none", command: "true" }), /^error \(not_found\): no such environment: lc-none/);
    // input that does not match the schema is refused by LangChain before the tool runs
    await assert.rejects(t.paddock_run_command.invoke({ env: "lc-box" }), /schema|command|Received tool input/i);
  } finally {
    assert.match(await t.paddock_destroy_environment.invoke({ env: "lc-box" }), /destroyed lc-box/);
  }
});
