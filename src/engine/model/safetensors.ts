// Minimal safetensors reader/writer (https://github.com/huggingface/safetensors format):
// 8-byte little-endian header length, JSON header {name: {dtype, shape, data_offsets:[begin,end]}}, raw bytes.
import { closeSync, fstatSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import { UserError } from '../core/errors';

export type StDtype = 'F32' | 'F16' | 'BF16' | 'I32' | 'I64' | 'F64';
export interface StTensor {
  shape: number[];
  data: Float32Array;
}

const BYTES: Record<StDtype, number> = { F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8, F64: 8 };

function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/** F32 → F16 bits, round to nearest even (used by tests to write F16 checkpoints). */
export function f32ToF16(v: number): number {
  const f32 = new Float32Array([v]);
  const x = new Uint32Array(f32.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  let mant = x & 0x7fffff;
  if (((x >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 31) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - exp;
    let h = mant >> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (exp << 10) | (mant >> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** F32 → BF16 bits, round to nearest even. */
export function f32ToBf16(v: number): number {
  const x = new Uint32Array(new Float32Array([v]).buffer)[0];
  const lsb = (x >>> 16) & 1;
  return ((x + 0x7fff + lsb) >>> 16) & 0xffff;
}

export interface StEntry {
  dtype: StDtype;
  shape: number[];
  data_offsets: [number, number];
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * Check a parsed header against the format: an object of tensors, each {dtype, shape: counts, data_offsets: [b, e]}
 * with e − b = elements × dtype size, inside the file. Anything else (null, arrays, negative or fractional numbers,
 * `__proto__` names, overlapping the end of the file) is a UserError naming the file and the entry, never a crash
 * deeper in. Names go into a null-prototype object, so no name can reach Object.prototype.
 */
function validateHeader(path: string, parsed: unknown, dataBytes: number): { header: Record<string, StEntry>; metadata: Record<string, string> } {
  const bad = (what: string) => new UserError(`${path}: corrupt safetensors header: ${what}`);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw bad(`expected a JSON object, got ${parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : typeof parsed}`);
  const header: Record<string, StEntry> = Object.create(null);
  const metadata: Record<string, string> = Object.create(null);
  for (const [name, v] of Object.entries(parsed as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('__metadata__ is not an object of strings');
      for (const [k, m] of Object.entries(v as Record<string, unknown>)) {
        if (typeof m !== 'string') throw bad(`__metadata__.${k} is not a string`);
        if (k !== '__proto__') metadata[k] = m;
      }
      continue;
    }
    if (name === '__proto__' || name === 'constructor' || name === 'prototype') throw bad(`tensor name ${JSON.stringify(name)} is not allowed`);
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad(`tensor ${name} is not an object`);
    const e = v as Record<string, unknown>;
    if (typeof e.dtype !== 'string' || !(e.dtype in BYTES))
      throw bad(`tensor ${name} has dtype ${JSON.stringify(e.dtype)} (supported: ${Object.keys(BYTES).join(', ')})`);
    if (!Array.isArray(e.shape) || !e.shape.every(isCount))
      throw bad(`tensor ${name} has shape ${JSON.stringify(e.shape)}; expected a list of non-negative integers`);
    const off = e.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every(isCount) || off[0] > off[1]) {
      throw bad(`tensor ${name} has data_offsets ${JSON.stringify(off)}; expected [begin, end] with 0 ≤ begin ≤ end`);
    }
    const count = (e.shape as number[]).reduce((a, d) => a * d, 1);
    if (!Number.isSafeInteger(count * BYTES[e.dtype as StDtype]) || off[1] - off[0] !== count * BYTES[e.dtype as StDtype]) {
      throw bad(
        `tensor ${name}: data_offsets span ${off[1] - off[0]} bytes but shape ${JSON.stringify(e.shape)} of ${e.dtype} needs ${count * BYTES[e.dtype as StDtype]}`,
      );
    }
    if (off[1] > dataBytes) throw bad(`tensor ${name} ends at byte ${off[1]} of the data but the file holds ${dataBytes} (truncated?)`);
    header[name] = { dtype: e.dtype as StDtype, shape: e.shape as number[], data_offsets: [off[0], off[1]] };
  }
  return { header, metadata };
}

export function readSafetensorsHeader(path: string): { header: Record<string, StEntry>; metadata: Record<string, string>; dataStart: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    throw new UserError(`cannot read safetensors file ${path}: ${(e as Error).message}`);
  }
  try {
    const size = fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (readSync(fd, lenBuf, 0, 8, 0) !== 8) throw new UserError(`${path} is not a safetensors file (shorter than 8 bytes)`);
    const n = Number(lenBuf.readBigUInt64LE(0));
    if (n <= 0 || n > 100_000_000 || 8 + n > size) throw new UserError(`${path} is not a safetensors file (header length ${n}, file size ${size})`);
    const hb = Buffer.alloc(n);
    if (readSync(fd, hb, 0, n, 8) !== n) throw new UserError(`${path}: the header is truncated`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(hb.toString('utf8'));
    } catch {
      throw new UserError(`${path} is not a safetensors file (header is not JSON)`);
    }
    return { ...validateHeader(path, parsed, size - 8 - n), dataStart: 8 + n };
  } finally {
    closeSync(fd);
  }
}

/** Read every tensor as Float32 (F16/BF16/I32/I64/F64 are converted). */
export function readSafetensors(path: string): { tensors: Record<string, StTensor>; metadata: Record<string, string> } {
  const { header, metadata, dataStart } = readSafetensorsHeader(path);
  const buf = readFileSync(path);
  const tensors: Record<string, StTensor> = Object.create(null);
  for (const [name, info] of Object.entries(header)) {
    const [b, e] = info.data_offsets;
    const count = info.shape.reduce((a, d) => a * d, 1);
    if (dataStart + e > buf.length) throw new UserError(`${path}: tensor ${name} is truncated (the file changed while it was read?)`);
    const raw = buf.subarray(dataStart + b, dataStart + e);
    const out = new Float32Array(count);
    const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    switch (info.dtype) {
      case 'F32':
        for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true);
        break;
      case 'F64':
        for (let i = 0; i < count; i++) out[i] = dv.getFloat64(i * 8, true);
        break;
      case 'I32':
        for (let i = 0; i < count; i++) out[i] = dv.getInt32(i * 4, true);
        break;
      case 'I64':
        for (let i = 0; i < count; i++) out[i] = Number(dv.getBigInt64(i * 8, true));
        break;
      case 'F16':
        for (let i = 0; i < count; i++) out[i] = f16ToF32(dv.getUint16(i * 2, true));
        break;
      case 'BF16': {
        const u = new Uint32Array(out.buffer);
        for (let i = 0; i < count; i++) u[i] = dv.getUint16(i * 2, true) << 16;
        break;
      }
    }
    tensors[name] = { shape: info.shape, data: out };
  }
  return { tensors, metadata };
}

/** Write tensors in the given dtype (default F32). Names are written sorted, as the Python library does. */
export function writeSafetensors(
  path: string,
  tensors: Record<string, StTensor>,
  opts: { dtype?: 'F32' | 'F16' | 'BF16'; metadata?: Record<string, string> } = {},
): void {
  const dtype = opts.dtype ?? 'F32';
  const bpe = BYTES[dtype];
  const names = Object.keys(tensors).sort();
  const header: Record<string, unknown> = {};
  if (opts.metadata) header.__metadata__ = opts.metadata;
  let off = 0;
  for (const n of names) {
    const bytes = tensors[n].data.length * bpe;
    header[n] = { dtype, shape: tensors[n].shape, data_offsets: [off, off + bytes] };
    off += bytes;
  }
  const raw = Buffer.from(JSON.stringify(header), 'utf8');
  // The format aligns the data to 8 bytes by padding the header with spaces (count bytes, not characters).
  const hbuf = Buffer.concat([raw, Buffer.from(' '.repeat((8 - (raw.length % 8)) % 8))]);
  const out = Buffer.alloc(8 + hbuf.length + off);
  out.writeBigUInt64LE(BigInt(hbuf.length), 0);
  hbuf.copy(out, 8);
  let p = 8 + hbuf.length;
  for (const n of names) {
    const d = tensors[n].data;
    if (dtype === 'F32') {
      Buffer.from(d.buffer, d.byteOffset, d.byteLength).copy(out, p);
      p += d.byteLength;
      continue;
    }
    for (let i = 0; i < d.length; i++, p += 2) out.writeUInt16LE(dtype === 'F16' ? f32ToF16(d[i]) : f32ToBf16(d[i]), p);
  }
  writeAll(path, out);
}

/**
 * The whole buffer to `path`: writeSync may write less than asked (a full disk can end a write part-way), so it goes
 * on until every byte is down; an error carries the file's path, so a full disk is reported as "disk full while
 * writing <this file>".
 */
export function writeAll(path: string, out: Uint8Array, write: typeof writeSync = writeSync): void {
  let fd: number | null = null;
  try {
    fd = openSync(path, 'w');
    for (let at = 0; at < out.length;) {
      const n = write(fd, out, at, out.length - at);
      if (n <= 0) throw Object.assign(new Error(`short write to ${path}`), { code: 'ENOSPC' });
      at += n;
    }
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err && typeof err === 'object' && !err.path) err.path = path;
    throw err;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}
