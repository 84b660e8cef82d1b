/** Paddock SDK for TypeScript / Node.js (>= 18, no dependencies).
 *
 *   const paddock = new Paddock();
 *   const env = await paddock.envs.create({ kind: "computer" });
 *   const r = await env.exec(["sh", "-c", "echo hi"]);
 *
 * Objects the daemon returns (environments, processes, file entries) keep the API's field
 * names (docs/API.md); results the SDK assembles (ExecResult, ...) are camelCase. Every
 * method is exactly one API request. */
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { CommandTimeout, PaddockError } from "./errors.js";
import { Transport, ndjson, readAll, type TransportOptions, type Query } from "./transport.js";
import { WebSocketClient } from "./ws.js";
import { packDir, unpackTo, type UnpackResult } from "./tar.js";

export * from "./errors.js";
export type { TransportOptions } from "./transport.js";

// ------------------------------------------------------------------ API objects

export type Size = string | number;
export type Duration = string | number;
export type Rate = string | number;

export interface NetworkPolicy {
  mode?: "none" | "open" | "allow";
  allow?: string[];
  links?: string[];
  bandwidth?: Rate | { egress?: Rate | null; ingress?: Rate | null };
}

export interface Limits {
  cpus?: number | string | null;
  memory?: Size | null;
  swap?: Size | null;
  pids?: number | null;
  disk?: Size | null;
}

export interface EnvSpec extends Limits {
  /** Default: `sdk-` and 8 random hex digits. */
  name?: string;
  kind?: "computer" | "sandbox";
  image?: string;
  ttl?: Duration | null;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  autostart?: boolean;
  network?: NetworkPolicy;
}

export interface EnvUpdate extends Limits {
  ttl?: Duration | null;
  autostart?: boolean;
  network?: NetworkPolicy;
}

/** The environment object of the API (docs/API.md, "The environment object"). */
export interface EnvInfo {
  name: string;
  kind: "computer" | "sandbox";
  image: string;
  state: "creating" | "starting" | "running" | "paused" | "stopping" | "stopped" | "deleting";
  pid: number | null;
  created_at: string;
  expires_at: string | null;
  ttl: number | null;
  limits: { cpus: number | null; memory: number | null; swap: number | null; pids: number | null };
  usage: { memory: number; memory_peak: number; pids: number; cpu_usage_us: number; oom_kills: number } | null;
  oom_kills: number;
  autostart: boolean;
  labels: Record<string, string>;
  env: Record<string, string>;
  network: {
    mode: string; allow: string[]; links: string[]; bandwidth: { egress: number; ingress: number };
    ip: string | null; gateway?: string; ip6: string | null; denied: number;
    ports: Array<{ proto: string; host_port: number; port: number }>;
  };
  disk: { limit: number | null; used: number | null };
  [k: string]: unknown;
}

export interface ProcessInfo {
  id: number;
  cmd: string;
  state: "running" | "exited";
  exit_code: number | null;
  started_at: string;
  finished_at: string | null;
  timed_out: boolean;
  dropped_bytes: number;
}

export interface FileEntry { name: string; type: "file" | "dir" | "symlink" | "other"; size: number; mode: number; mtime: string; encoding?: string }
export interface FileStat { path: string; type: "file" | "dir" | "symlink" | "other"; size: number; mode: number; mtime: string; uid: number; gid: number; target?: string }
export interface WatchEvent { path: string; event: "create" | "modify" | "delete" | "move_from" | "move_to" | "attrib" | "overflow"; type?: "file" | "dir"; encoding?: string }
export interface Snapshot { name: string; created_at: string }
export interface Port { proto: "tcp" | "udp"; host_port: number; port: number }

// ------------------------------------------------------------------ exec

export interface ExecOptions {
  /** Text or bytes for the command's stdin (bytes and large text go as the raw body). */
  stdin?: string | Uint8Array;
  env?: Record<string, string>;
  cwd?: string;
  /** `root`, `1000` or `1000:1000` */
  user?: string;
  /** The command's timeout (`30s` or seconds); past it the command is killed. */
  timeout?: Duration;
  maxOutput?: Size;
  /** Called with each piece of output as it arrives (makes exec a streaming request). */
  onStdout?: (chunk: string, raw: Buffer) => void;
  onStderr?: (chunk: string, raw: Buffer) => void;
  /** Throw CommandTimeout when the command times out (default true). */
  throwOnTimeout?: boolean;
  signal?: AbortSignal;
}

export interface ExitInfo {
  exitCode: number;
  durationMs: number;
  timedOut: boolean;
  truncated: boolean;
}

export interface ExecResult extends ExitInfo {
  stdout: string;
  stderr: string;
  /** The exact bytes (stdout/stderr are these decoded as UTF-8). */
  stdoutBytes: Buffer;
  stderrBytes: Buffer;
}

export interface OutputChunk {
  stream: "stdout" | "stderr";
  data: Buffer;
  /** data decoded as UTF-8 */
  text: string;
}

function exitInfo(j: any): ExitInfo {
  return { exitCode: j.exit_code, durationMs: j.duration_ms, timedOut: !!j.timed_out, truncated: !!j.truncated };
}

function decodeField(s: string, enc?: string): Buffer {
  return enc === "base64" ? Buffer.from(s, "base64") : Buffer.from(s, "utf8");
}

/** Output of exec's streaming form or of a background process: iterate it for the chunks;
 * `exit` is set once the exit line came (null if the stream ended without one). */
export class OutputStream implements AsyncIterable<OutputChunk> {
  exit: ExitInfo | null = null;
  private used = false;
  constructor(private readonly open: () => Promise<IncomingMessage>) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<OutputChunk> {
    if (this.used) throw new PaddockError("invalid_argument", 0, "an output stream can be read once");
    this.used = true;
    const res = await this.open();
    try {
      for await (const j of ndjson(res)) {
        if (typeof j.stdout === "string") {
          const data = decodeField(j.stdout, j.encoding);
          yield { stream: "stdout", data, text: data.toString("utf8") };
        } else if (typeof j.stderr === "string") {
          const data = decodeField(j.stderr, j.encoding);
          yield { stream: "stderr", data, text: data.toString("utf8") };
        } else if (j.exit_code !== undefined) {
          this.exit = exitInfo(j);
        } else if (j.error) {
          throw new PaddockError(String(j.error.code), 200, String(j.error.message));
        }
      }
    } finally {
      res.destroy();
    }
  }

  /** Read to the end: all output and the exit (exit is null when the stream ended without
   * one, e.g. the non-following output of a process that still runs). */
  async collect(): Promise<{ stdout: string; stderr: string; stdoutBytes: Buffer; stderrBytes: Buffer; exit: ExitInfo | null }> {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    for await (const c of this) (c.stream === "stdout" ? out : err).push(c.data);
    const stdoutBytes = Buffer.concat(out);
    const stderrBytes = Buffer.concat(err);
    return { stdout: stdoutBytes.toString("utf8"), stderr: stderrBytes.toString("utf8"), stdoutBytes, stderrBytes, exit: this.exit };
  }
}

// ------------------------------------------------------------------ the client

export interface PaddockOptions extends TransportOptions {}

export class Paddock {
  readonly transport: Transport;
  readonly envs: Envs;
  readonly images: Images;
  readonly tokens: Tokens;

  /** Options default to PADDOCK_HOST, PADDOCK_TOKEN, PADDOCK_SOCKET, PADDOCK_FINGERPRINT;
   * without a host, the unix socket (default /run/paddock/paddock.sock). */
  constructor(opts: PaddockOptions = {}) {
    this.transport = new Transport(opts);
    this.envs = new Envs(this);
    this.images = new Images(this);
    this.tokens = new Tokens(this);
  }

  /** GET /v1/system */
  system(): Promise<Record<string, any>> {
    return this.transport.json({ method: "GET", path: "/v1/system" });
  }

  /** Create an environment, run fn with it, and destroy it afterwards (also when fn throws). */
  async withEnv<T>(spec: EnvSpec, fn: (env: Env) => Promise<T>): Promise<T> {
    const env = await this.envs.create(spec);
    let ok = false;
    try {
      const r = await fn(env);
      ok = true;
      return r;
    } finally {
      // an error of fn wins over one of the clean-up; an environment fn removed is fine
      await env.destroy().catch((e) => {
        if (ok && !(e instanceof PaddockError && e.code === "not_found")) throw e;
      });
    }
  }

  /** withEnv on a client made from the environment variables (closed afterwards). */
  static async withEnv<T>(spec: EnvSpec, fn: (env: Env) => Promise<T>, opts: PaddockOptions = {}): Promise<T> {
    const p = new Paddock(opts);
    try {
      return await p.withEnv(spec, fn);
    } finally {
      p.close();
    }
  }

  /** Close idle keep-alive connections (the process can exit without it). */
  close(): void {
    this.transport.close();
  }
}

const seg = encodeURIComponent;

export class Envs {
  constructor(private readonly p: Paddock) {}

  /** POST /v1/envs: create and start an environment. */
  async create(spec: EnvSpec = {}): Promise<Env> {
    const body = { ...spec, name: spec.name ?? "sdk-" + randomBytes(4).toString("hex") };
    return new Env(this.p, await this.p.transport.json({ method: "POST", path: "/v1/envs", json: body }));
  }

  /** GET /v1/envs/{name} */
  async get(name: string): Promise<Env> {
    return new Env(this.p, await this.p.transport.json({ method: "GET", path: `/v1/envs/${seg(name)}` }));
  }

  /** An Env for a name without asking the daemon (no request): its `info` holds only the
   * name until a call that returns the environment object (refresh, update, ...) fills it. */
  ref(name: string): Env {
    return new Env(this.p, { name } as EnvInfo);
  }

  /** GET /v1/envs (labels: all must match) */
  async list(opts: { labels?: Record<string, string> } = {}): Promise<Env[]> {
    const label = Object.entries(opts.labels ?? {}).map(([k, v]) => `${k}=${v}`);
    const j = await this.p.transport.json({ method: "GET", path: "/v1/envs", query: { label } });
    return (j.envs as EnvInfo[]).map((e) => new Env(this.p, e));
  }
}

export class Images {
  constructor(private readonly p: Paddock) {}
  /** GET /v1/images */
  async list(): Promise<Array<{ name: string; size: number; created_at: string; used_by: number }>> {
    return (await this.p.transport.json({ method: "GET", path: "/v1/images" })).images;
  }
  /** DELETE /v1/images/{name} */
  async remove(name: string): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: `/v1/images/${seg(name)}` });
  }
}

export interface TokenSpec {
  name: string;
  admin?: boolean;
  max_envs?: number | null;
  max_cpus?: number | null;
  max_memory?: Size | null;
  max_disk?: Size | null;
  /** requests per second: a number or "N/s"; 0 unlimited */
  rate?: number | string;
  /** a duration from now; left out: never */
  expires?: Duration;
}

export interface TokenInfo {
  name: string; admin: boolean; max_envs: number | null; max_cpus: number | null; max_memory: number | null;
  max_disk: number | null; rate: number; created_at: string; expires_at: string | null; expired: boolean;
}

/** API tokens (administrators only). */
export class Tokens {
  constructor(private readonly p: Paddock) {}
  /** POST /v1/tokens → the token object and its `secret` (shown this once). */
  create(spec: TokenSpec): Promise<TokenInfo & { secret: string }> {
    return this.p.transport.json({ method: "POST", path: "/v1/tokens", json: spec });
  }
  /** GET /v1/tokens */
  async list(): Promise<TokenInfo[]> {
    return (await this.p.transport.json({ method: "GET", path: "/v1/tokens" })).tokens;
  }
  /** DELETE /v1/tokens/{name}: it stops working at once. */
  async remove(name: string): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: `/v1/tokens/${seg(name)}` });
  }
}

/** One environment. `info` is the environment object as last returned by the daemon; the
 * calls that return it (refresh, update, state changes, restore) replace it. */
export class Env {
  readonly processes: Processes;
  readonly files: Files;
  readonly ports: Ports;

  constructor(private readonly p: Paddock, public info: EnvInfo) {
    this.processes = new Processes(p, this);
    this.files = new Files(p, this);
    this.ports = new Ports(p, this);
  }

  get name(): string { return this.info.name; }
  get kind(): string { return this.info.kind; }
  get state(): string { return this.info.state; }
  get image(): string { return this.info.image; }
  /** `/v1/envs/NAME` */
  get path(): string { return `/v1/envs/${seg(this.info.name)}`; }

  private async obj(method: string, sub: string, json?: unknown, query?: Query): Promise<this> {
    this.info = await this.p.transport.json({ method, path: this.path + sub, json, query });
    return this;
  }

  /** GET /v1/envs/{name} */
  refresh(): Promise<this> { return this.obj("GET", ""); }
  /** PATCH: limits, ttl, autostart, disk, network. */
  update(u: EnvUpdate): Promise<this> { return this.obj("PATCH", "", u); }
  /** PATCH {network}: fields left out keep their value; a list given replaces the old one. */
  setNetwork(policy: NetworkPolicy): Promise<this> { return this.obj("PATCH", "", { network: policy }); }
  start(): Promise<this> { return this.obj("POST", "/start"); }
  stop(opts: { timeout?: Duration } = {}): Promise<this> { return this.obj("POST", "/stop", undefined, { timeout: opts.timeout }); }
  restart(opts: { timeout?: Duration } = {}): Promise<this> { return this.obj("POST", "/restart", undefined, { timeout: opts.timeout }); }
  pause(): Promise<this> { return this.obj("POST", "/pause"); }
  resume(): Promise<this> { return this.obj("POST", "/resume"); }

  /** DELETE /v1/envs/{name}; force (default true) kills a running environment first. */
  async destroy(opts: { force?: boolean } = {}): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: this.path, query: { force: opts.force ?? true } });
  }

  /** POST .../snapshots (name optional) */
  async snapshot(name?: string): Promise<Snapshot> {
    return this.p.transport.json({ method: "POST", path: this.path + "/snapshots", json: name === undefined ? {} : { name } });
  }
  /** GET .../snapshots */
  async snapshots(): Promise<Snapshot[]> {
    return (await this.p.transport.json({ method: "GET", path: this.path + "/snapshots" })).snapshots;
  }
  /** DELETE .../snapshots/{snap} */
  async deleteSnapshot(name: string): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: `${this.path}/snapshots/${seg(name)}` });
  }
  /** POST .../restore: a stopped computer's disk becomes a copy of the snapshot. */
  restore(snapshot: string): Promise<this> { return this.obj("POST", "/restore", { snapshot }); }
  /** POST .../fork: a new running computer with a copy of this one's disk (now, or of a snapshot). */
  async fork(name: string, opts: { snapshot?: string } = {}): Promise<Env> {
    const j = await this.p.transport.json({ method: "POST", path: this.path + "/fork", json: { name, snapshot: opts.snapshot } });
    return new Env(this.p, j);
  }
  /** POST .../commit: this computer's disk becomes image `image`. */
  async commit(image: string): Promise<{ name: string; size: number; from: string }> {
    return this.p.transport.json({ method: "POST", path: this.path + "/commit", json: { image } });
  }

  private execBody(cmd: string | string[], o: ExecOptions, extra: Record<string, unknown>): { json?: unknown; body?: Buffer; query?: Query } {
    const spec: Record<string, unknown> = {
      cmd: typeof cmd === "string" ? ["sh", "-c", cmd] : cmd,
      env: o.env, cwd: o.cwd, user: o.user, timeout: o.timeout, max_output: o.maxOutput, ...extra,
    };
    for (const k of Object.keys(spec)) if (spec[k] === undefined) delete spec[k];
    const s = o.stdin;
    if (s === undefined) return { json: spec };
    if (typeof s === "string" && s.length < (1 << 20)) return { json: { ...spec, stdin: s } };
    // bytes or large text: the raw body, the spec in the query
    return { body: typeof s === "string" ? Buffer.from(s) : Buffer.from(s), query: { spec: JSON.stringify(spec) } };
  }

  /** POST .../exec: run a command (a string runs with `sh -c`) and wait for it. With
   * onStdout/onStderr the output is streamed to them as it comes. A command past its timeout
   * throws CommandTimeout (unless throwOnTimeout is false). A non-zero exit is not an error. */
  async exec(cmd: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    let result: ExecResult;
    if (opts.onStdout || opts.onStderr) {
      const st = this.execStream(cmd, opts);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      for await (const c of st) {
        if (c.stream === "stdout") { out.push(c.data); opts.onStdout?.(c.text, c.data); }
        else { err.push(c.data); opts.onStderr?.(c.text, c.data); }
      }
      if (!st.exit) throw new PaddockError("protocol", 200, "the exec stream ended without an exit status");
      const stdoutBytes = Buffer.concat(out);
      const stderrBytes = Buffer.concat(err);
      result = { ...st.exit, stdout: stdoutBytes.toString("utf8"), stderr: stderrBytes.toString("utf8"), stdoutBytes, stderrBytes };
    } else {
      const b = this.execBody(cmd, opts, {});
      const j = await this.p.transport.json({ method: "POST", path: this.path + "/exec", ...b, signal: opts.signal });
      const stdoutBytes = decodeField(j.stdout, j.encoding);
      const stderrBytes = decodeField(j.stderr, j.encoding);
      result = { ...exitInfo(j), stdout: stdoutBytes.toString("utf8"), stderr: stderrBytes.toString("utf8"), stdoutBytes, stderrBytes };
    }
    if (result.timedOut && opts.throwOnTimeout !== false)
      throw new CommandTimeout(`command timed out after ${opts.timeout ?? "its timeout"}: ${Array.isArray(cmd) ? cmd.join(" ") : cmd}`, result);
    return result;
  }

  /** POST .../exec with `stream: true`: iterate the output as it comes; `exit` is set at the
   * end. The request is sent when iteration begins. */
  execStream(cmd: string | string[], opts: ExecOptions = {}): OutputStream {
    const b = this.execBody(cmd, opts, { stream: true });
    return new OutputStream(() => this.p.transport.stream({ method: "POST", path: this.path + "/exec", ...b, signal: opts.signal }));
  }

  /** GET .../exec/ws: an interactive command on a terminal (default: a login shell). */
  async terminal(opts: TerminalOptions = {}): Promise<Terminal> {
    const spec: Record<string, unknown> = { ...opts };
    if (typeof opts.cmd === "string") spec.cmd = ["sh", "-c", opts.cmd];
    for (const k of Object.keys(spec)) if (spec[k] === undefined) delete spec[k];
    const ws = await WebSocketClient.connect(this.p.transport, this.path + "/exec/ws", { spec: JSON.stringify(spec) });
    return new Terminal(ws);
  }
}

// ------------------------------------------------------------------ terminal

export interface TerminalOptions {
  cmd?: string | string[];
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  timeout?: Duration;
  cols?: number;
  rows?: number;
}

/** A terminal session: write keystrokes, read output (iterate, or onData), wait for the exit. */
export class Terminal implements AsyncIterable<Buffer> {
  /** Set when the session has ended with an exit status. */
  exit: { exitCode: number; durationMs: number; timedOut: boolean } | null = null;
  /** Called with each piece of terminal output (instead of, or as well as, iterating). */
  onData?: (data: Buffer) => void;
  /** Called with {"error":...} messages the server sends about bad control messages. */
  onError?: (e: PaddockError) => void;
  private queue: Buffer[] = [];
  private waiters: Array<() => void> = [];
  private ended = false;
  private endError?: Error;
  private readonly done: Promise<void>;

  constructor(private readonly ws: WebSocketClient) {
    let resolveDone!: () => void;
    this.done = new Promise((r) => (resolveDone = r));
    ws.onMessage = (m) => {
      if (m.opcode === 2) {
        this.onData?.(m.data);
        this.queue.push(m.data);
      } else {
        let j: any;
        try { j = JSON.parse(m.data.toString()); } catch { return; }
        if (j.exit_code !== undefined) this.exit = { exitCode: j.exit_code, durationMs: j.duration_ms, timedOut: !!j.timed_out };
        else if (j.error) this.onError?.(new PaddockError(String(j.error.code), 200, String(j.error.message)));
      }
      this.wake();
    };
    ws.onClose = (err) => {
      this.ended = true;
      this.endError = err;
      resolveDone();
      this.wake();
    };
  }

  /** For error messages: the command's exit, or how the connection went. */
  private howEnded(): string {
    if (this.exit) return `the command exited with code ${this.exit.exitCode}`;
    if (this.endError) return `connection lost: ${this.endError.message}`;
    return this.ws.closeCode !== null ? `closed by the server with code ${this.ws.closeCode}` : "connection closed without a close frame";
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Send keystrokes (Ctrl-C is "\x03", Ctrl-D "\x04"). */
  write(data: string | Uint8Array): void { this.ws.sendBinary(typeof data === "string" ? Buffer.from(data) : data); }
  resize(cols: number, rows: number): void { this.ws.sendText(JSON.stringify({ resize: { cols, rows } })); }
  /** Send a signal to the terminal's foreground process group (INT, TERM, KILL, ...). */
  signal(name: string): void { this.ws.sendText(JSON.stringify({ signal: name })); }
  /** Hang up: the session gets SIGHUP. */
  close(): void { this.ws.close(); }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    for (;;) {
      if (this.queue.length) { yield this.queue.shift()!; continue; }
      if (this.ended) return;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** Read output until `pred(all output so far as text)` is true; returns that text. Throws
   * when the session ends first or after timeoutMs. */
  async readUntil(pred: (text: string) => boolean, timeoutMs = 30000): Promise<string> {
    let text = "";
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.queue.length) {
        text += this.queue.shift()!.toString("utf8");
        if (pred(text)) return text;
      }
      if (this.ended) throw new PaddockError("protocol", 0, `the terminal session ended (${this.howEnded()}) before the awaited output: ${JSON.stringify(text.slice(-300))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new PaddockError("timeout", 0, `timed out waiting for terminal output: ${JSON.stringify(text.slice(-300))}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => { clearTimeout(t); r(); });
      });
    }
  }

  /** Wait for the session to end; its exit status (null if it ended without one). */
  async wait(): Promise<{ exitCode: number; durationMs: number; timedOut: boolean } | null> {
    await this.done;
    if (!this.exit && this.endError) throw this.endError;
    return this.exit;
  }
}

// ------------------------------------------------------------------ background processes

export class Processes {
  constructor(private readonly p: Paddock, private readonly env: Env) {}
  private path(id?: number, sub = ""): string {
    return this.env.path + "/processes" + (id === undefined ? "" : "/" + id) + sub;
  }

  /** POST .../exec with detach: start a command in the background. */
  async start(cmd: string | string[], opts: Omit<ExecOptions, "onStdout" | "onStderr" | "throwOnTimeout"> = {}): Promise<Process> {
    const spec: Record<string, unknown> = {
      cmd: typeof cmd === "string" ? ["sh", "-c", cmd] : cmd, detach: true,
      env: opts.env, cwd: opts.cwd, user: opts.user, timeout: opts.timeout, max_output: opts.maxOutput,
    };
    for (const k of Object.keys(spec)) if (spec[k] === undefined) delete spec[k];
    let j: ProcessInfo;
    if (opts.stdin === undefined || typeof opts.stdin === "string")
      j = await this.p.transport.json({ method: "POST", path: this.env.path + "/exec", json: opts.stdin === undefined ? spec : { ...spec, stdin: opts.stdin } });
    else
      j = await this.p.transport.json({ method: "POST", path: this.env.path + "/exec", body: Buffer.from(opts.stdin), query: { spec: JSON.stringify(spec) } });
    return new Process(this, j);
  }

  /** GET .../processes (oldest first) */
  async list(): Promise<Process[]> {
    const j = await this.p.transport.json({ method: "GET", path: this.path() });
    return (j.processes as ProcessInfo[]).map((x) => new Process(this, x));
  }

  /** GET .../processes/{id} */
  async get(id: number): Promise<Process> {
    return new Process(this, await this.p.transport.json({ method: "GET", path: this.path(id) }));
  }

  /** GET .../processes/{id}/output: the buffered output (with follow: live until it exits). */
  logs(id: number, opts: { follow?: boolean; signal?: AbortSignal } = {}): OutputStream {
    return new OutputStream(() => this.p.transport.stream({ method: "GET", path: this.path(id, "/output"), query: { follow: opts.follow ? 1 : undefined }, signal: opts.signal }));
  }

  /** POST .../processes/{id}/wait */
  async wait(id: number): Promise<ExitInfo> {
    return exitInfo(await this.p.transport.json({ method: "POST", path: this.path(id, "/wait") }));
  }

  /** POST .../processes/{id}/signal (default TERM) */
  async kill(id: number, signal: string | number = "TERM"): Promise<ProcessInfo> {
    return this.p.transport.json({ method: "POST", path: this.path(id, "/signal"), json: { signal: String(signal) } });
  }

  /** DELETE .../processes/{id}: forget a finished process. */
  async remove(id: number): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: this.path(id) });
  }
}

/** A background process; `info` is the process object as last returned. */
export class Process {
  constructor(private readonly procs: Processes, public info: ProcessInfo) {}
  get id(): number { return this.info.id; }
  async refresh(): Promise<this> { this.info = (await this.procs.get(this.id)).info; return this; }
  logs(opts: { follow?: boolean; signal?: AbortSignal } = {}): OutputStream { return this.procs.logs(this.id, opts); }
  wait(): Promise<ExitInfo> { return this.procs.wait(this.id); }
  async kill(signal: string | number = "TERM"): Promise<this> { this.info = await this.procs.kill(this.id, signal); return this; }
  remove(): Promise<void> { return this.procs.remove(this.id); }
}

// ------------------------------------------------------------------ files

export class Files {
  constructor(private readonly p: Paddock, private readonly env: Env) {}
  private get base(): string { return this.env.path + "/files"; }

  /** GET .../files: the file's bytes. */
  async read(path: string, opts: { max?: Size } = {}): Promise<Buffer> {
    return (await this.p.transport.request({ method: "GET", path: this.base, query: { path, max: opts.max } })).body;
  }
  /** read() decoded as UTF-8 */
  async readText(path: string): Promise<string> {
    return (await this.read(path)).toString("utf8");
  }
  /** PUT .../files: replace the file atomically with data (text, bytes or a stream). */
  async write(path: string, data: string | Uint8Array | AsyncIterable<Uint8Array>, opts: { mode?: number | string; parents?: boolean; user?: string } = {}): Promise<{ path: string; size: number }> {
    const mode = typeof opts.mode === "number" ? "0" + opts.mode.toString(8) : opts.mode;
    return this.p.transport.json({ method: "PUT", path: this.base, query: { path, mode, parents: opts.parents, user: opts.user }, body: data });
  }
  /** GET .../files/list */
  async list(path: string): Promise<FileEntry[]> {
    return (await this.p.transport.json({ method: "GET", path: this.base + "/list", query: { path } })).entries;
  }
  /** GET .../files/stat (a symlink is described, not followed) */
  stat(path: string): Promise<FileStat> {
    return this.p.transport.json({ method: "GET", path: this.base + "/stat", query: { path } });
  }
  /** DELETE .../files */
  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: this.base, query: { path, recursive: opts.recursive ? 1 : undefined } });
  }
  /** POST .../files/mkdir (with its parents unless parents is false; an existing directory is fine then) */
  async mkdir(path: string, opts: { parents?: boolean; mode?: number | string; user?: string } = {}): Promise<void> {
    const mode = typeof opts.mode === "number" ? "0" + opts.mode.toString(8) : opts.mode;
    await this.p.transport.request({ method: "POST", path: this.base + "/mkdir", query: { path, parents: opts.parents ?? true, mode, user: opts.user } });
  }
  /** POST .../files/move */
  async move(from: string, to: string, opts: { overwrite?: boolean } = {}): Promise<void> {
    await this.p.transport.request({ method: "POST", path: this.base + "/move", json: { from, to, overwrite: opts.overwrite ?? false } });
  }
  /** PUT .../archive: the contents of the local directory localDir go into remoteDir (made
   * with its parents), owned by user (default root). */
  async upload(localDir: string, remoteDir: string, opts: { user?: string } = {}): Promise<{ path: string; entries: number; bytes: number }> {
    return this.p.transport.json({ method: "PUT", path: this.env.path + "/archive", query: { path: remoteDir, user: opts.user }, body: packDir(localDir), contentType: "application/x-tar" });
  }
  /** GET .../archive: remoteDir's contents into localDir (made with its parents). */
  async download(remoteDir: string, localDir: string): Promise<UnpackResult> {
    const res = await this.p.transport.stream({ method: "GET", path: this.env.path + "/archive", query: { path: remoteDir } });
    try {
      return await unpackTo(res as AsyncIterable<Buffer>, localDir, 1);
    } finally {
      res.destroy();
    }
  }
  /** GET .../files/watch: resolves once the watch is in place (every later change below dir
   * is reported); iterate the result for the changes. Leaving the loop, close(), or the
   * signal ends the watch; the daemon ends it when the environment stops or dir is removed. */
  async watch(dir: string, opts: { recursive?: boolean; signal?: AbortSignal } = {}): Promise<Watch> {
    const res = await this.p.transport.stream({ method: "GET", path: this.base + "/watch", query: { path: dir, recursive: opts.recursive === false ? 0 : undefined }, signal: opts.signal });
    return new Watch(res);
  }
}

/** A running watch: an async iterable of changes. */
export class Watch implements AsyncIterable<WatchEvent> {
  private closed = false;
  constructor(private readonly res: IncomingMessage) {}
  async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent> {
    try {
      for await (const ev of ndjson(this.res)) {
        if (ev.encoding === "base64" && typeof ev.path === "string") ev.path = Buffer.from(ev.path, "base64").toString("utf8");
        yield ev as WatchEvent;
      }
    } catch (e) {
      if (!this.closed) throw e;
    } finally {
      this.close();
    }
  }
  /** End the watch (the daemon's helper goes away with the connection). */
  close(): void {
    this.closed = true;
    this.res.destroy();
  }
}

// ------------------------------------------------------------------ ports

export class Ports {
  constructor(private readonly p: Paddock, private readonly env: Env) {}
  /** GET .../ports */
  async list(): Promise<Port[]> { return (await this.p.transport.json({ method: "GET", path: this.env.path + "/ports" })).ports; }
  /** POST .../ports */
  publish(hostPort: number, port: number, proto: "tcp" | "udp" = "tcp"): Promise<Port> {
    return this.p.transport.json({ method: "POST", path: this.env.path + "/ports", json: { host_port: hostPort, port, proto } });
  }
  /** DELETE .../ports/{host_port} */
  async unpublish(hostPort: number, proto: "tcp" | "udp" = "tcp"): Promise<void> {
    await this.p.transport.request({ method: "DELETE", path: `${this.env.path}/ports/${hostPort}`, query: { proto } });
  }
}

export { readAll };
