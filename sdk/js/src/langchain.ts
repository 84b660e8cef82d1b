/** LangChain.js tools for Paddock (`paddock/langchain`; needs the peer dependency
 * `@langchain/core`). Each tool is one SDK call. Errors of the daemon come back to the model
 * as the tool's answer ("error (not_found): no such environment: x"), so an agent can react
 * to them; other failures (the daemon unreachable) are thrown. */
import { tool } from "@langchain/core/tools";
import type { StructuredToolInterface } from "@langchain/core/tools";
import { Paddock, PaddockError, CommandTimeout, type ExecResult } from "./index.js";

export interface PaddockToolsOptions {
  /** Longest stdout / stderr / file content handed back, in characters (default 20000). */
  maxOutput?: number;
  /** Kind of environment created when the model does not say (default "sandbox"). */
  defaultKind?: "computer" | "sandbox";
}

const envName = { type: "string", description: "Name of the environment" } as const;

function clip(s: string, max: number): string {
  if (s.length <= max) return s;
  return s.slice(0, max) + `\n[... truncated: ${s.length - max} more characters not shown]`;
}

function describeResult(r: ExecResult, max: number): string {
  let s = `exit_code: ${r.exitCode}${r.timedOut ? " (timed out, killed)" : ""}\n`;
  s += `stdout:\n${clip(r.stdout, max)}\n`;
  if (r.stderr) s += `stderr:\n${clip(r.stderr, max)}\n`;
  if (r.truncated) s += "(the daemon truncated the output)\n";
  return s;
}

/** Run f; a PaddockError becomes the tool's text answer. */
async function guard(f: () => Promise<string>): Promise<string> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof CommandTimeout) return describeResult(e.result as ExecResult, 20000);
    if (e instanceof PaddockError && e.status > 0) return `error (${e.code}): ${e.message}`;
    throw e;
  }
}

/** The Paddock tool set for a LangChain agent. */
export function paddockTools(client: Paddock = new Paddock(), opts: PaddockToolsOptions = {}): StructuredToolInterface[] {
  const max = opts.maxOutput ?? 20000;
  const env = async (name: string) => client.envs.ref(name); // no request: each tool is one call
  const summary = (i: any) => JSON.stringify({ name: i.name, kind: i.kind, image: i.image, state: i.state,
    ip: i.network?.ip ?? null, network: i.network?.mode, limits: i.limits, expires_at: i.expires_at });
  const T = tool as any; // JSON-schema tools; the input types are checked by the schemas at run time

  return [
    T(async (a: any) => guard(async () => {
      const e = await client.envs.create({ name: a.name, kind: a.kind ?? opts.defaultKind ?? "sandbox", image: a.image,
        cpus: a.cpus, memory: a.memory, disk: a.disk, ttl: a.ttl,
        network: a.network_mode || a.allow ? { mode: a.network_mode, allow: a.allow } : undefined });
      return summary(e.info);
    }), {
      name: "paddock_create_environment",
      description: "Create and start an isolated Linux environment. A 'computer' keeps its disk (snapshots and forks work on computers); a 'sandbox' is throw-away (writable only below /tmp and /workspace, expires after 1h by default). Returns the environment's name and state; use the name with the other paddock tools.",
      schema: {
        type: "object",
        properties: {
          name: { type: "string", description: "Name (letters, digits, - _ .); generated when left out" },
          kind: { type: "string", enum: ["computer", "sandbox"], description: "computer (persistent) or sandbox (throw-away)" },
          image: { type: "string", description: "Image to start from (default: the daemon's default image)" },
          cpus: { type: "number", description: "CPU limit, e.g. 1.5" },
          memory: { type: "string", description: "Memory limit, e.g. 512M or 2G" },
          disk: { type: "string", description: "Disk limit, e.g. 10G" },
          ttl: { type: "string", description: "Destroy it after this long, e.g. 30m" },
          network_mode: { type: "string", enum: ["none", "open", "allow"], description: "none: loopback only; open: the internet; allow: only the allow list" },
          allow: { type: "array", items: { type: "string" }, description: "host[:port] or CIDR rules reachable in allow mode" },
        },
        additionalProperties: false,
      },
    }),

    T(async (a: any) => guard(async () => {
      const r = await (await env(a.env)).exec(["sh", "-c", a.command], { timeout: a.timeout ?? "5m", cwd: a.cwd, user: a.user, stdin: a.stdin, throwOnTimeout: false });
      return describeResult(r, max);
    }), {
      name: "paddock_run_command",
      description: "Run a shell command (sh -c) in an environment and wait for it. Returns the exit code, stdout and stderr (long output is truncated with a note). For long-running programs (servers, watchers) use paddock_start_process instead.",
      schema: {
        type: "object",
        properties: {
          env: envName,
          command: { type: "string", description: "Shell command line, run with sh -c" },
          timeout: { type: "string", description: "Kill it after this long (default 5m), e.g. 30s" },
          cwd: { type: "string", description: "Working directory" },
          user: { type: "string", description: "User to run as: a name, uid or uid:gid (default root)" },
          stdin: { type: "string", description: "Text for the command's standard input" },
        },
        required: ["env", "command"],
        additionalProperties: false,
      },
    }),

    T(async (a: any) => guard(async () => {
      const p = await (await env(a.env)).processes.start(["sh", "-c", a.command], { cwd: a.cwd, user: a.user });
      return JSON.stringify({ id: p.id, state: p.info.state, cmd: p.info.cmd });
    }), {
      name: "paddock_start_process",
      description: "Start a shell command in the background in an environment (a server, a long build). Returns its process id; read its output with paddock_read_process_output.",
      schema: {
        type: "object",
        properties: {
          env: envName,
          command: { type: "string", description: "Shell command line, run with sh -c" },
          cwd: { type: "string", description: "Working directory" },
          user: { type: "string", description: "User to run as (default root)" },
        },
        required: ["env", "command"],
        additionalProperties: false,
      },
    }),

    T(async (a: any) => guard(async () => {
      const e = await env(a.env);
      const out = await e.processes.logs(a.id, { follow: !!a.wait }).collect();
      const state = out.exit ? `exited with exit_code ${out.exit.exitCode}${out.exit.timedOut ? " (timed out)" : ""}` : "running";
      let s = `process ${a.id}: ${state}\nstdout:\n${clip(out.stdout, max)}\n`;
      if (out.stderr) s += `stderr:\n${clip(out.stderr, max)}\n`;
      return s;
    }), {
      name: "paddock_read_process_output",
      description: "Read the output of a background process started with paddock_start_process (its newest 1 MiB), and whether it still runs. With wait=true, waits until it has exited.",
      schema: {
        type: "object",
        properties: {
          env: envName,
          id: { type: "integer", description: "Process id returned by paddock_start_process" },
          wait: { type: "boolean", description: "Wait for the process to exit first (default false)" },
        },
        required: ["env", "id"],
        additionalProperties: false,
      },
    }),

    T(async (a: any) => guard(async () => clip(await (await env(a.env)).files.readText(a.path), max)), {
      name: "paddock_read_file",
      description: "Read a text file from an environment (absolute path). Long files are truncated with a note.",
      schema: { type: "object", properties: { env: envName, path: { type: "string", description: "Absolute path inside the environment" } }, required: ["env", "path"], additionalProperties: false },
    }),

    T(async (a: any) => guard(async () => {
      const r = await (await env(a.env)).files.write(a.path, a.content, { mode: a.mode });
      return `wrote ${r.size} bytes to ${r.path}`;
    }), {
      name: "paddock_write_file",
      description: "Write a text file in an environment (absolute path; parent directories are created; an existing file is replaced).",
      schema: {
        type: "object",
        properties: {
          env: envName,
          path: { type: "string", description: "Absolute path inside the environment" },
          content: { type: "string", description: "The file's complete new content" },
          mode: { type: "string", description: "Permission bits in octal, e.g. 0755 for a script" },
        },
        required: ["env", "path", "content"],
        additionalProperties: false,
      },
    }),

    T(async (a: any) => guard(async () => {
      const entries = await (await env(a.env)).files.list(a.path);
      return entries.map((x) => `${x.type === "dir" ? "d" : x.type === "symlink" ? "l" : "-"} ${String(x.size).padStart(10)} ${x.name}${x.type === "dir" ? "/" : ""}`).join("\n") || "(empty directory)";
    }), {
      name: "paddock_list_files",
      description: "List a directory in an environment: type (d directory, l symlink, - file), size and name of each entry.",
      schema: { type: "object", properties: { env: envName, path: { type: "string", description: "Absolute path of the directory" } }, required: ["env", "path"], additionalProperties: false },
    }),

    T(async (a: any) => guard(async () => JSON.stringify(await (await env(a.env)).snapshot(a.name))), {
      name: "paddock_snapshot",
      description: "Take a snapshot of a computer's disk (copy-on-write, milliseconds). Fork from it or restore it later.",
      schema: { type: "object", properties: { env: envName, name: { type: "string", description: "Snapshot name (default: snap-DATE-TIME)" } }, required: ["env"], additionalProperties: false },
    }),

    T(async (a: any) => guard(async () => summary((await (await env(a.env)).fork(a.name, { snapshot: a.snapshot })).info)), {
      name: "paddock_fork",
      description: "Fork a computer: a new running computer with a copy of its disk as it is now (or as in one of its snapshots), to try something without risking the original.",
      schema: {
        type: "object",
        properties: {
          env: envName,
          name: { type: "string", description: "Name of the new computer" },
          snapshot: { type: "string", description: "Fork from this snapshot instead of the current disk" },
        },
        required: ["env", "name"],
        additionalProperties: false,
      },
    }),

    T(async (a: any) => guard(async () => {
      await (await env(a.env)).destroy();
      return `destroyed ${a.env}`;
    }), {
      name: "paddock_destroy_environment",
      description: "Destroy an environment and everything in it (its processes, disk and snapshots).",
      schema: { type: "object", properties: { env: envName }, required: ["env"], additionalProperties: false },
    }),

    T(async () => guard(async () => {
      const all = await client.envs.list();
      return all.length ? all.map((e) => summary(e.info)).join("\n") : "(no environments)";
    }), {
      name: "paddock_list_environments",
      description: "List the environments: name, kind, image, state, address, network mode, limits.",
      schema: { type: "object", properties: {}, additionalProperties: false },
    }),

    T(async (a: any) => guard(async () => {
      const e = await (await env(a.env)).setNetwork({ mode: a.mode, allow: a.allow, links: a.links });
      const n = e.info.network;
      return JSON.stringify({ mode: n.mode, allow: n.allow, links: n.links });
    }), {
      name: "paddock_set_network_policy",
      description: "Change an environment's network policy at once: mode none (loopback only), open (the internet, never the host or private ranges) or allow (only the allow list: host[:port], *.domain[:port], CIDR[:port]); links name environments it may reach. Fields left out keep their value.",
      schema: {
        type: "object",
        properties: {
          env: envName,
          mode: { type: "string", enum: ["none", "open", "allow"] },
          allow: { type: "array", items: { type: "string" }, description: "Allowed destinations (replaces the list)" },
          links: { type: "array", items: { type: "string" }, description: "Environments it may reach (replaces the list)" },
        },
        required: ["env"],
        additionalProperties: false,
      },
    }),
  ];
}
