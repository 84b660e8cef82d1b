/** Tar in plain TypeScript for directory upload and download: ustar headers with pax
 * extended headers for long or non-ASCII names, links and big sizes; a streaming reader for
 * the daemon's pax archives (and GNU long names). */
import { promises as fsp, constants as C } from "node:fs";
import * as path from "node:path";
import { PaddockError } from "./errors.js";

const BLOCK = 512;

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  const bodyLen = Buffer.byteLength(body);
  let len = bodyLen + 1;
  while (String(len).length + bodyLen !== len) len = String(len).length + bodyLen;
  return Buffer.from(String(len) + body);
}

function header(name: string, o: { mode: number; size: number; mtime: number; type: string; linkname?: string }): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, "utf8");
  h.write(octal(o.mode & 0o7777, 8), 100, "ascii");
  h.write(octal(0, 8), 108, "ascii");
  h.write(octal(0, 8), 116, "ascii");
  h.write(octal(o.size, 12), 124, "ascii");
  h.write(octal(Math.max(0, Math.floor(o.mtime)), 12), 136, "ascii");
  h.write("        ", 148, "ascii");
  h.write(o.type, 156, "ascii");
  if (o.linkname) h.write(o.linkname, 157, 100, "utf8");
  h.write("ustar\0", 257, "ascii");
  h.write("00", 263, "ascii");
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += h[i];
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "ascii");
  return h;
}

const MAX_OCTAL_SIZE = 0o77777777777;
const isPlain = (s: string, max: number) => /^[\x20-\x7e]*$/.test(s) && s.length < max;

/** Headers of one member (a pax header first when a field does not fit ustar). */
function memberHeaders(name: string, o: { mode: number; size: number; mtime: number; type: string; linkname?: string }): Buffer[] {
  const recs: Buffer[] = [];
  if (!isPlain(name, 100)) recs.push(paxRecord("path", name));
  if (o.linkname !== undefined && !isPlain(o.linkname, 100)) recs.push(paxRecord("linkpath", o.linkname));
  if (o.size > MAX_OCTAL_SIZE) recs.push(paxRecord("size", String(o.size)));
  const out: Buffer[] = [];
  if (recs.length) {
    const data = Buffer.concat(recs);
    out.push(header("PaxHeaders/" + Buffer.from(name).subarray(0, 80).toString("latin1").replace(/[^\x20-\x7e]/g, "_"),
      { mode: 0o644, size: data.length, mtime: o.mtime, type: "x" }));
    out.push(data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK));
  }
  const plainName = isPlain(name, 100) ? name : Buffer.from(name).subarray(0, 99).toString("latin1").replace(/[^\x20-\x7e]/g, "_");
  const plainLink = o.linkname !== undefined && !isPlain(o.linkname, 100) ? "" : o.linkname;
  out.push(header(plainName, { ...o, size: o.size > MAX_OCTAL_SIZE ? 0 : o.size, linkname: plainLink }));
  return out;
}

/** A tar stream of directory `dir`'s contents, members named `./` and `./REL` (as
 * `tar -C DIR -cf - .` names them). Regular files, directories and symlinks; others are left out. */
export async function* packDir(dir: string): AsyncGenerator<Buffer> {
  const st = await fsp.stat(dir);
  if (!st.isDirectory()) throw new PaddockError("invalid_argument", 0, `${dir} is not a directory`);
  yield* memberHeaders("./", { mode: st.mode, size: 0, mtime: st.mtimeMs / 1000, type: "5" });
  yield* walk(dir, ".");
  yield Buffer.alloc(BLOCK * 2);
}

async function* walk(abs: string, rel: string): AsyncGenerator<Buffer> {
  const names = (await fsp.readdir(abs)).sort();
  for (const n of names) {
    const a = path.join(abs, n);
    const r = rel + "/" + n;
    const st = await fsp.lstat(a);
    const mtime = st.mtimeMs / 1000;
    if (st.isDirectory()) {
      yield* memberHeaders(r + "/", { mode: st.mode, size: 0, mtime, type: "5" });
      yield* walk(a, r);
    } else if (st.isSymbolicLink()) {
      yield* memberHeaders(r, { mode: 0o777, size: 0, mtime, type: "2", linkname: await fsp.readlink(a) });
    } else if (st.isFile()) {
      yield* memberHeaders(r, { mode: st.mode, size: st.size, mtime, type: "0" });
      const fh = await fsp.open(a, C.O_RDONLY | C.O_NOFOLLOW);
      try {
        let left = st.size;
        while (left > 0) {
          const want = Math.min(left, 1 << 20);
          const b = Buffer.alloc(want);
          const { bytesRead } = await fh.read(b, 0, want, null);
          if (bytesRead === 0) {
            yield Buffer.alloc(left); // the file shrank meanwhile: keep the size we promised
            left = 0;
            break;
          }
          left -= bytesRead;
          yield b.subarray(0, bytesRead);
        }
      } finally {
        await fh.close();
      }
      if (st.size % BLOCK) yield Buffer.alloc(BLOCK - (st.size % BLOCK));
    }
  }
}

/** Reads exact byte counts from an async iterable of chunks. */
class ByteReader {
  private chunks: Buffer[] = [];
  private have = 0;
  private done = false;
  constructor(private readonly it: AsyncIterator<Buffer>) {}
  private async fill(n: number): Promise<void> {
    while (this.have < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else if (r.value.length) {
        this.chunks.push(r.value);
        this.have += r.value.length;
      }
    }
  }
  /** Exactly n bytes, or fewer at the end of the stream. */
  async read(n: number): Promise<Buffer> {
    await this.fill(n);
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const out = all.subarray(0, Math.min(n, all.length));
    const rest = all.subarray(out.length);
    this.chunks = rest.length ? [rest] : [];
    this.have = rest.length;
    return out;
  }
  /** Up to n bytes (at least one unless at the end). */
  async some(n: number): Promise<Buffer> {
    await this.fill(1);
    return this.read(Math.min(n, this.have));
  }
}

function cstr(b: Buffer): string {
  const i = b.indexOf(0);
  return b.subarray(0, i < 0 ? b.length : i).toString("utf8");
}

function num(b: Buffer): number {
  if (b[0] & 0x80) {
    let n = 0;
    for (let i = 1; i < b.length; i++) n = n * 256 + b[i];
    return n;
  }
  const s = cstr(b).trim();
  return s ? parseInt(s, 8) : 0;
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let off = 0;
  while (off < data.length) {
    const sp = data.indexOf(0x20, off);
    if (sp < 0) break;
    const len = parseInt(data.subarray(off, sp).toString(), 10);
    if (!(len > 0)) break;
    const rec = data.subarray(sp + 1, off + len - 1).toString("utf8");
    const eq = rec.indexOf("=");
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    off += len;
  }
  return out;
}

function safeRel(name: string, strip: number): string[] | null {
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (name.startsWith("/") || parts.includes(".."))
    throw new PaddockError("protocol", 0, `refusing archive member ${JSON.stringify(name)}`);
  if (parts.length <= strip) return null;
  return parts.slice(strip);
}

export interface UnpackResult {
  entries: number;
  bytes: number;
}

/** Extract a tar stream into `dest` (made with its parents), dropping the first `strip`
 * components of every name. Names that are absolute or contain `..` are refused; symlinks
 * and hard links are made after everything else, so no member is written through one. */
export async function unpackTo(src: AsyncIterable<Buffer>, dest: string, strip = 1): Promise<UnpackResult> {
  await fsp.mkdir(dest, { recursive: true });
  const rd = new ByteReader(src[Symbol.asyncIterator]());
  const links: Array<{ at: string; target: string; hard: boolean }> = [];
  const dirModes: Array<{ at: string; mode: number; mtime: number }> = [];
  let pax: Record<string, string> = {};
  let longName: string | undefined;
  let longLink: string | undefined;
  let entries = 0;
  let bytes = 0;
  for (;;) {
    const h = await rd.read(BLOCK);
    if (h.length < BLOCK) {
      if (h.length === 0) break;
      throw new PaddockError("protocol", 0, "the archive ends in the middle of a header");
    }
    if (h.every((x) => x === 0)) break;
    const type = String.fromCharCode(h[156] || 0x30);
    let size = num(h.subarray(124, 136));
    const ustar = h.subarray(257, 262).toString("latin1") === "ustar";
    let name = cstr(h.subarray(0, 100));
    if (ustar && h[345]) name = cstr(h.subarray(345, 500)) + "/" + name;
    let linkname = cstr(h.subarray(157, 257));
    const mode = num(h.subarray(100, 108));
    const mtime = num(h.subarray(136, 148));
    if (pax.size !== undefined) size = Number(pax.size);
    const pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (type === "x" || type === "g" || type === "L" || type === "K") {
      const data = await rd.read(size + pad);
      if (data.length < size + pad) throw new PaddockError("protocol", 0, "the archive is cut short");
      const body = data.subarray(0, size);
      if (type === "x") pax = { ...pax, ...parsePax(body) };
      else if (type === "L") longName = cstr(body);
      else if (type === "K") longLink = cstr(body);
      continue;
    }
    if (longName !== undefined) name = longName;
    if (longLink !== undefined) linkname = longLink;
    if (pax.path !== undefined) name = pax.path;
    if (pax.linkpath !== undefined) linkname = pax.linkpath;
    pax = {};
    longName = longLink = undefined;
    const rel = safeRel(name, strip);
    const at = rel ? path.join(dest, ...rel) : dest;
    if (type === "0" || type === "7" || type === "\0") {
      if (!rel) throw new PaddockError("protocol", 0, `archive member ${JSON.stringify(name)} is a file where the directory should be`);
      await fsp.mkdir(path.dirname(at), { recursive: true });
      await fsp.rm(at, { force: true });
      const fh = await fsp.open(at, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW, mode & 0o7777 || 0o644);
      try {
        let left = size;
        while (left > 0) {
          const b = await rd.some(Math.min(left, 1 << 20));
          if (b.length === 0) throw new PaddockError("protocol", 0, "the archive is cut short");
          await fh.write(b);
          left -= b.length;
        }
        await fh.chmod(mode & 0o7777);
        await fh.utimes(mtime, mtime);
      } finally {
        await fh.close();
      }
      bytes += size;
      await rd.read(pad);
    } else {
      await rd.read(size + pad); // no data expected; skip whatever there is
      if (type === "5") {
        await fsp.mkdir(at, { recursive: true });
        dirModes.push({ at, mode: mode & 0o7777, mtime });
      } else if (type === "2" && rel) {
        links.push({ at, target: linkname, hard: false });
      } else if (type === "1" && rel) {
        const t = safeRel(linkname, strip);
        if (t) links.push({ at, target: path.join(dest, ...t), hard: true });
      } else {
        continue; // devices, fifos: left out
      }
    }
    entries++;
  }
  for (const l of links) {
    await fsp.mkdir(path.dirname(l.at), { recursive: true });
    await fsp.rm(l.at, { force: true });
    if (l.hard) await fsp.link(l.target, l.at);
    else await fsp.symlink(l.target, l.at);
  }
  for (const d of dirModes.reverse()) {
    await fsp.chmod(d.at, d.mode);
    await fsp.utimes(d.at, d.mtime, d.mtime);
  }
  return { entries, bytes };
}
