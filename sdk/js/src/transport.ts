/** HTTP/1.1 to paddockd: over its unix socket, or over HTTPS to the gateway with a Bearer
 * token. The server certificate is checked against a CA (or the system's), or pinned by the
 * SHA-256 fingerprint of the certificate; the pin is checked before a byte of the request
 * (and so the token) is sent. */
import * as http from "node:http";
import * as https from "node:https";
import * as tls from "node:tls";
import type { Duplex, Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { PaddockError, errorFromResponse } from "./errors.js";

export interface TransportOptions {
  /** `https://HOST:PORT` of the gateway; without it the unix socket is used. */
  host?: string;
  token?: string;
  socketPath?: string;
  /** SHA-256 fingerprint of the server's certificate (hex, colons and a `sha256:` prefix allowed). */
  fingerprint?: string;
  /** PEM CA certificate(s) that signed the server's certificate. */
  ca?: string | Buffer | Array<string | Buffer>;
}

export type Query = Record<string, string | number | boolean | undefined | null | Array<string>>;

export interface RequestOptions {
  method: string;
  path: string;
  query?: Query;
  json?: unknown;
  /** A raw body: bytes, or a stream / async iterable of chunks (sent chunked). */
  body?: Buffer | Uint8Array | string | Readable | AsyncIterable<Uint8Array>;
  contentType?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export function normalizeFingerprint(fp: string): string {
  let s = fp.trim().toLowerCase();
  if (s.startsWith("sha256:")) s = s.slice(7);
  s = s.replace(/[:\s]/g, "");
  if (!/^[0-9a-f]{64}$/.test(s)) throw new PaddockError("invalid_argument", 0, "fingerprint must be a SHA-256 in hex (64 digits, colons allowed)");
  return s;
}

/** An https.Agent that verifies a pinned certificate fingerprint once the TLS handshake is
 * done and hands the socket to the request only when it matches. */
class PinnedAgent extends https.Agent {
  constructor(private readonly pin: string, opts: https.AgentOptions) {
    super(opts);
  }
  override createConnection(options: http.ClientRequestArgs, cb?: (err: Error | null, s: Duplex) => void): Duplex | null | undefined {
    // The chain is not checked (a pinned certificate is usually self-signed): the pin is.
    const sock = tls.connect({ ...(options as tls.ConnectionOptions), rejectUnauthorized: false });
    const none = undefined as unknown as Duplex;
    const onErr = (e: Error) => cb?.(e, none);
    sock.once("error", onErr);
    sock.once("secureConnect", () => {
      sock.removeListener("error", onErr);
      const cert = sock.getPeerCertificate();
      const got = cert && cert.fingerprint256 ? cert.fingerprint256.replace(/:/g, "").toLowerCase() : "";
      if (got !== this.pin) {
        const err = new PaddockError("certificate_mismatch", 0,
          `the server's certificate has SHA-256 fingerprint ${got || "(none)"}, not the pinned ${this.pin}`);
        sock.destroy();
        cb?.(err, none);
        return;
      }
      cb?.(null, sock);
    });
    return undefined; // the socket comes through cb
  }
}

function appendQuery(path: string, query?: Query): string {
  if (!query) return path;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null) continue;
    const vals = Array.isArray(v) ? v : [typeof v === "boolean" ? (v ? "1" : "0") : String(v)];
    for (const x of vals) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(x));
  }
  return parts.length ? path + (path.includes("?") ? "&" : "?") + parts.join("&") : path;
}

export class Transport {
  readonly remote: boolean;
  readonly socketPath: string;
  private readonly url?: URL;
  private readonly token?: string;
  private readonly agent: http.Agent;

  constructor(opts: TransportOptions = {}) {
    const env = process.env;
    // an explicit socketPath wins over PADDOCK_HOST
    const host = opts.host ?? (opts.socketPath ? "" : env.PADDOCK_HOST ?? "");
    this.token = opts.token ?? (env.PADDOCK_TOKEN || undefined);
    this.socketPath = opts.socketPath ?? (env.PADDOCK_SOCKET || "/run/paddock/paddock.sock");
    if (host && !host.startsWith("unix:")) {
      let u: URL;
      try {
        u = new URL(host.includes("://") ? host : "https://" + host);
      } catch {
        throw new PaddockError("invalid_argument", 0, `bad host: ${host} (want https://HOST:PORT)`);
      }
      if (u.protocol !== "https:")
        throw new PaddockError("invalid_argument", 0, `host ${host}: only https:// is supported over the network`);
      this.url = u;
      this.remote = true;
      const fp = opts.fingerprint ?? (env.PADDOCK_FINGERPRINT || undefined);
      const agentOpts: https.AgentOptions = { keepAlive: true, ca: opts.ca };
      this.agent = fp ? new PinnedAgent(normalizeFingerprint(fp), agentOpts) : new https.Agent(agentOpts);
    } else {
      if (host.startsWith("unix:")) this.socketPath = host.replace(/^unix:(\/\/)?/, "");
      this.remote = false;
      this.agent = new http.Agent({ keepAlive: true });
    }
  }

  /** Close idle keep-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  private reqOptions(o: RequestOptions, extra: http.OutgoingHttpHeaders = {}): http.RequestOptions {
    const headers: http.OutgoingHttpHeaders = { ...o.headers, ...extra };
    if (this.token) headers["Authorization"] = "Bearer " + this.token;
    const path = appendQuery(o.path, o.query);
    if (this.url)
      return { method: o.method, host: this.url.hostname.replace(/^\[|\]$/g, ""), port: this.url.port || 443,
               path, headers, agent: this.agent, signal: o.signal };
    return { method: o.method, socketPath: this.socketPath, path, headers: { Host: "localhost", ...headers },
             agent: this.agent, signal: o.signal };
  }

  /** Send a request and resolve with the response head once it arrives (body unread). */
  open(o: RequestOptions): Promise<http.IncomingMessage> {
    const extra: http.OutgoingHttpHeaders = {};
    let payload: Buffer | undefined;
    let streamBody: Readable | AsyncIterable<Uint8Array> | undefined;
    if (o.json !== undefined) {
      payload = Buffer.from(JSON.stringify(o.json));
      extra["Content-Type"] = "application/json";
    } else if (o.body !== undefined) {
      if (typeof o.body === "string") payload = Buffer.from(o.body);
      else if (o.body instanceof Uint8Array) payload = Buffer.from(o.body.buffer, o.body.byteOffset, o.body.byteLength);
      else streamBody = o.body;
      extra["Content-Type"] = o.contentType ?? "application/octet-stream";
    }
    if (payload) extra["Content-Length"] = String(payload.length);
    else if (!streamBody && o.method !== "GET") extra["Content-Length"] = "0";
    const mod = this.url ? https : http;
    return new Promise((resolve, reject) => {
      let req: http.ClientRequest;
      try {
        req = mod.request(this.reqOptions(o, extra));
      } catch (e) {
        reject(wrapConnError(e));
        return;
      }
      let bodyErr: unknown;
      req.on("response", resolve);
      // a failure of the body's source (a file we could not read) is that error, not a connection error
      req.on("error", (e) => reject(bodyErr ?? wrapConnError(e)));
      if (payload) {
        req.end(payload);
      } else if (streamBody) {
        pump(streamBody, req).catch((e) => {
          bodyErr = e;
          req.destroy(e);
        });
      } else {
        req.end();
      }
    });
  }

  /** Send a request; read the whole answer; throw the typed error of a status >= 400. */
  async request(o: RequestOptions): Promise<Response> {
    const res = await this.open(o);
    const body = await readAll(res);
    const status = res.statusCode ?? 0;
    if (status >= 400) throw errorFromResponse(status, body, res.headers["retry-after"]);
    return { status, headers: res.headers, body };
  }

  /** request() and parse the JSON answer. */
  async json<T = any>(o: RequestOptions): Promise<T> {
    const r = await this.request(o);
    try {
      return JSON.parse(r.body.toString()) as T;
    } catch (e) {
      throw new PaddockError("protocol", r.status, `${o.method} ${o.path}: the answer is not JSON`, { cause: e });
    }
  }

  /** Send a request and return the response stream; a status >= 400 throws. */
  async stream(o: RequestOptions): Promise<http.IncomingMessage> {
    const res = await this.open(o);
    const status = res.statusCode ?? 0;
    if (status >= 400) throw errorFromResponse(status, await readAll(res), res.headers["retry-after"]);
    return res;
  }

  /** An HTTP Upgrade (the WebSocket handshake): resolves with the upgraded socket and the
   * bytes already read past the head; a non-101 answer throws its typed error. */
  upgrade(o: RequestOptions): Promise<{ res: http.IncomingMessage; socket: Duplex; head: Buffer }> {
    const mod = this.url ? https : http;
    return new Promise((resolve, reject) => {
      // (node takes an upgraded socket out of the agent's pool)
      const ro = this.reqOptions(o);
      const req = mod.request(ro);
      req.on("upgrade", (res, socket, head) => resolve({ res, socket, head }));
      req.on("response", async (res) => {
        const body = await readAll(res).catch(() => Buffer.alloc(0));
        const status = res.statusCode ?? 0;
        reject(status >= 400 ? errorFromResponse(status, body, res.headers["retry-after"])
          : new PaddockError("protocol", status, `expected 101 Switching Protocols, got ${status}`));
      });
      req.on("error", (e) => reject(wrapConnError(e)));
      req.end();
    });
  }
}

function wrapConnError(e: unknown): Error {
  if (e instanceof PaddockError) return e;
  const err = e as NodeJS.ErrnoException;
  if (err && err.name === "AbortError") return err;
  return new PaddockError("connection_failed", 0, `cannot reach paddockd: ${err?.message ?? String(e)}`, { cause: e });
}

async function pump(src: Readable | AsyncIterable<Uint8Array>, req: http.ClientRequest): Promise<void> {
  for await (const chunk of src as AsyncIterable<Uint8Array>) {
    if (!req.write(chunk)) await new Promise<void>((r) => req.once("drain", r));
  }
  req.end();
}

export async function readAll(res: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The lines of an NDJSON stream, parsed; empty lines (keep-alives) are skipped. */
export async function* ndjson(res: Readable): AsyncGenerator<any> {
  let buf = "";
  const dec = new StringDecoder("utf8");
  for await (const c of res) {
    buf += dec.write(c as Buffer);
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) yield JSON.parse(line);
    }
  }
  if (buf.trim()) yield JSON.parse(buf);
}
