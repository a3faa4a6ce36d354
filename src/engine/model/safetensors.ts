// Minimal safetensors reader/writer (https://github.com/huggingface/safetensors format):
// 8-byte little-endian header length, JSON header {name: {dtype, shape, data_offsets:[begin,end]}}, raw bytes.
import { closeSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
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

export function readSafetensorsHeader(path: string): { header: Record<string, { dtype: StDtype; shape: number[]; data_offsets: [number, number] }>; metadata: Record<string, string>; dataStart: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    throw new UserError(`cannot read safetensors file ${path}: ${(e as Error).message}`);
  }
  try {
    const lenBuf = Buffer.alloc(8);
    if (readSync(fd, lenBuf, 0, 8, 0) !== 8) throw new UserError(`${path} is not a safetensors file (shorter than 8 bytes)`);
    const n = Number(lenBuf.readBigUInt64LE(0));
    if (n <= 0 || n > 100_000_000) throw new UserError(`${path} is not a safetensors file (header length ${n})`);
    const hb = Buffer.alloc(n);
    readSync(fd, hb, 0, n, 8);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(hb.toString('utf8'));
    } catch {
      throw new UserError(`${path} is not a safetensors file (header is not JSON)`);
    }
    const metadata = (parsed.__metadata__ ?? {}) as Record<string, string>;
    delete parsed.__metadata__;
    return { header: parsed as never, metadata, dataStart: 8 + n };
  } finally {
    closeSync(fd);
  }
}

/** Read every tensor as Float32 (F16/BF16/I32/I64/F64 are converted). */
export function readSafetensors(path: string): { tensors: Record<string, StTensor>; metadata: Record<string, string> } {
  const { header, metadata, dataStart } = readSafetensorsHeader(path);
  const buf = readFileSync(path);
  const tensors: Record<string, StTensor> = {};
  for (const [name, info] of Object.entries(header)) {
    const [b, e] = info.data_offsets;
    const count = info.shape.reduce((a, d) => a * d, 1);
    if (!(info.dtype in BYTES)) throw new UserError(`${path}: tensor ${name} has unsupported dtype ${info.dtype} (supported: ${Object.keys(BYTES).join(', ')})`);
    if (e - b !== count * BYTES[info.dtype] || dataStart + e > buf.length) {
      throw new UserError(`${path}: tensor ${name} is truncated or its offsets are wrong (corrupted file?)`);
    }
    const raw = buf.subarray(dataStart + b, dataStart + e);
    const out = new Float32Array(count);
    const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    switch (info.dtype) {
      case 'F32': for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true); break;
      case 'F64': for (let i = 0; i < count; i++) out[i] = dv.getFloat64(i * 8, true); break;
      case 'I32': for (let i = 0; i < count; i++) out[i] = dv.getInt32(i * 4, true); break;
      case 'I64': for (let i = 0; i < count; i++) out[i] = Number(dv.getBigInt64(i * 8, true)); break;
      case 'F16': for (let i = 0; i < count; i++) out[i] = f16ToF32(dv.getUint16(i * 2, true)); break;
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
export function writeSafetensors(path: string, tensors: Record<string, StTensor>, opts: { dtype?: 'F32' | 'F16' | 'BF16'; metadata?: Record<string, string> } = {}): void {
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
    if (dtype === 'F32') { Buffer.from(d.buffer, d.byteOffset, d.byteLength).copy(out, p); p += d.byteLength; continue; }
    for (let i = 0; i < d.length; i++, p += 2) out.writeUInt16LE(dtype === 'F16' ? f32ToF16(d[i]) : f32ToBf16(d[i]), p);
  }
  const fd = openSync(path, 'w');
  try { writeSync(fd, out); } finally { closeSync(fd); }
}
