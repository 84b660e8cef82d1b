/** A minimal RFC 6455 WebSocket client over an upgraded HTTP/1.1 connection: masked frames
 * out, whole messages in (fragments joined), pings answered, the close handshake. */
import { createHash, randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import { PaddockError } from "./errors.js";
import type { Transport, Query } from "./transport.js";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const MAX_MESSAGE = 64 << 20;

export interface WsMessage {
  /** 1 text, 2 binary */
  opcode: 1 | 2;
  data: Buffer;
}

export class WebSocketClient {
  private buf: Buffer;
  private frags: Buffer[] = [];
  private fragOpcode = 0;
  private closed = false;
  private sentClose = false;
  /** Close code the server sent (null: none, or the connection dropped). */
  closeCode: number | null = null;
  private messageHandler: ((m: WsMessage) => void) | null = null;
  private closeHandler: ((err?: Error) => void) | null = null;
  /** Messages, and the end, that came before their handler was set: frames can arrive in the
   * same read as the handshake's answer, before the caller has had a turn to listen. */
  private early: WsMessage[] = [];
  private endedEarly: { err?: Error } | null = null;

  set onMessage(fn: (m: WsMessage) => void) {
    this.messageHandler = fn;
    for (let m = this.early.shift(); m; m = this.early.shift()) fn(m);
  }

  set onClose(fn: (err?: Error) => void) {
    this.closeHandler = fn;
    if (this.endedEarly) {
      const { err } = this.endedEarly;
      this.endedEarly = null;
      fn(err);
    }
  }

  private deliver(m: WsMessage): void {
    if (this.messageHandler) this.messageHandler(m);
    else this.early.push(m);
  }

  private constructor(private readonly sock: Duplex, head: Buffer) {
    this.buf = head;
    sock.on("data", (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.parse();
    });
    sock.on("close", () => this.finish());
    sock.on("end", () => this.finish());
    sock.on("error", (e) => this.finish(e));
    if (head.length) queueMicrotask(() => this.parse());
  }

  static async connect(t: Transport, path: string, query?: Query): Promise<WebSocketClient> {
    const key = randomBytes(16).toString("base64");
    const { res, socket, head } = await t.upgrade({
      method: "GET", path, query,
      headers: { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13" },
    });
    const want = createHash("sha1").update(key + GUID).digest("base64");
    if (res.statusCode !== 101 || res.headers["sec-websocket-accept"] !== want) {
      socket.destroy();
      throw new PaddockError("protocol", res.statusCode ?? 0, "bad WebSocket handshake answer");
    }
    (socket as any).setNoDelay?.(true);
    return new WebSocketClient(socket, head);
  }

  private finish(err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.sock.destroy();
    if (this.closeHandler) this.closeHandler(err);
    else this.endedEarly = { err };
  }

  private parse(): void {
    for (;;) {
      const b = this.buf;
      if (b.length < 2) return;
      const fin = (b[0] & 0x80) !== 0;
      const opcode = b[0] & 0x0f;
      const masked = (b[1] & 0x80) !== 0;
      let len = b[1] & 0x7f;
      let off = 2;
      if (len === 126) {
        if (b.length < 4) return;
        len = b.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        const big = b.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE)) return this.fail("frame too large");
        len = Number(big);
        off = 10;
      }
      if (masked) off += 4;
      if (b.length < off + len) return;
      let payload = b.subarray(off, off + len);
      if (masked) {
        const mask = b.subarray(off - 4, off);
        payload = Buffer.from(payload);
        for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      }
      this.buf = b.subarray(off + len);
      if (opcode === 0x9) {
        this.sendFrame(0xa, payload);
      } else if (opcode === 0xa) {
        /* pong */
      } else if (opcode === 0x8) {
        this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : null;
        if (!this.sentClose) this.sendFrame(0x8, payload.subarray(0, 2));
        this.sock.end();
        this.finish();
        return;
      } else if (opcode === 0x0 || opcode === 0x1 || opcode === 0x2) {
        if (opcode !== 0) {
          this.fragOpcode = opcode;
          this.frags = [];
        }
        this.frags.push(Buffer.from(payload));
        if (fin) {
          const data = Buffer.concat(this.frags);
          this.frags = [];
          this.deliver({ opcode: this.fragOpcode as 1 | 2, data });
        }
      } else {
        return this.fail("unknown opcode " + opcode);
      }
    }
  }

  private fail(why: string): void {
    this.finish(new PaddockError("protocol", 0, "WebSocket: " + why));
  }

  private sendFrame(opcode: number, payload: Buffer): void {
    if (this.closed || this.sentClose) return;
    if (opcode === 0x8) this.sentClose = true;
    const n = payload.length;
    const hdr = Buffer.alloc(n < 126 ? 2 : n < 65536 ? 4 : 10);
    hdr[0] = 0x80 | opcode;
    if (n < 126) hdr[1] = 0x80 | n;
    else if (n < 65536) {
      hdr[1] = 0x80 | 126;
      hdr.writeUInt16BE(n, 2);
    } else {
      hdr[1] = 0x80 | 127;
      hdr.writeBigUInt64BE(BigInt(n), 2);
    }
    const mask = randomBytes(4);
    const body = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) body[i] = payload[i] ^ mask[i & 3];
    this.sock.write(Buffer.concat([hdr, mask, body]));
  }

  sendBinary(data: Buffer | Uint8Array | string): void {
    this.sendFrame(0x2, typeof data === "string" ? Buffer.from(data) : Buffer.from(data));
  }

  sendText(text: string): void {
    this.sendFrame(0x1, Buffer.from(text));
  }

  /** Start the close handshake (1000); the connection ends when the server answers. */
  close(code = 1000): void {
    if (this.closed) return;
    const p = Buffer.alloc(2);
    p.writeUInt16BE(code, 0);
    this.sendFrame(0x8, p);
    setTimeout(() => this.finish(), 2000).unref();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
