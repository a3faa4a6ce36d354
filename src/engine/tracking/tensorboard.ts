// TensorBoard event files: TFRecord framing around tensorboard.Event protos (tensorboard/compat/proto/event.proto,
// summary.proto, histogram.proto). The few fields written are encoded by hand: a protobuf library would be a
// dependency for five messages, and the test reads the files back with a decoder written independently of this one.
import { crc32c } from '@aws-crypto/crc32c';
import { closeSync, existsSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

// ---- protobuf wire format (https://protobuf.dev/programming-guides/encoding/) ----

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

/** A message under construction: fields appended in field-number order, as protoc would write them. */
class Msg {
  private parts: Uint8Array[] = [];
  private size = 0;

  private push(b: Uint8Array): void {
    this.parts.push(b);
    this.size += b.length;
  }

  private key(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  /** an unsigned varint of a non-negative integer below 2^53 (a step, a length, an enum) */
  varint(n: number): void {
    const out: number[] = [];
    while (n >= 0x80) {
      out.push((n % 0x80) | 0x80);
      n = Math.floor(n / 0x80);
    }
    out.push(n);
    this.push(Uint8Array.from(out));
  }

  double(field: number, v: number): this {
    this.key(field, I64);
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.push(b);
    return this;
  }

  float(field: number, v: number): this {
    this.key(field, I32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.push(b);
    return this;
  }

  /** int64 / enum; proto3 omits a zero, as protoc does */
  int(field: number, v: number): this {
    if (v === 0) return this;
    if (v < 0 || !Number.isSafeInteger(v)) throw new Error(`protobuf: ${v} is not a non-negative safe integer`);
    this.key(field, VARINT);
    this.varint(v);
    return this;
  }

  bytes(field: number, b: Uint8Array): this {
    this.key(field, LEN);
    this.varint(b.length);
    this.push(b);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }

  msg(field: number, m: Msg): this {
    return this.bytes(field, m.done());
  }

  packedDoubles(field: number, vs: ArrayLike<number>): this {
    const b = new Uint8Array(8 * vs.length);
    const dv = new DataView(b.buffer);
    for (let i = 0; i < vs.length; i++) dv.setFloat64(8 * i, vs[i], true);
    return this.bytes(field, b);
  }

  done(): Uint8Array {
    const out = new Uint8Array(this.size);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

// ---- TFRecord framing (tensorflow/core/lib/io/record_writer.cc) ----

const MASK_DELTA = 0xa282ead8;

/** TFRecord's masked CRC-32C: the CRC rotated right by 15 bits plus a constant, so a CRC of CRCs stays informative */
export function maskedCrc32c(b: Uint8Array): number {
  const c = crc32c(b) >>> 0;
  return ((((c >>> 15) | (c << 17)) >>> 0) + MASK_DELTA) >>> 0;
}

/** length (uint64 LE), masked CRC of the length, the data, masked CRC of the data */
export function tfRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length + 4);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, data.length, true);
  dv.setUint32(4, Math.floor(data.length / 2 ** 32), true);
  dv.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  dv.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

// ---- tensorboard.Event ----

export interface Histogram {
  min: number;
  max: number;
  num: number;
  sum: number;
  sumSquares: number;
  /** right edges; bucket i counts (limit[i-1], limit[i]], bucket 0 everything up to limit[0] */
  bucketLimit: number[];
  bucket: number[];
}

/** HISTOGRAM_BUCKETS equal-width buckets over the finite values (TensorBoard's own summary writers use 30); null for none */
export function histogramOf(values: ArrayLike<number | null>, buckets = HISTOGRAM_BUCKETS): Histogram | null {
  let min = Infinity;
  let max = -Infinity;
  let num = 0;
  let sum = 0;
  let sumSquares = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) continue;
    if (v < min) min = v;
    if (v > max) max = v;
    num++;
    sum += v;
    sumSquares += v * v;
  }
  if (num === 0) return null;
  if (max === min) return { min, max, num, sum, sumSquares, bucketLimit: [max], bucket: [num] };
  const width = (max - min) / buckets;
  const bucket = new Array<number>(buckets).fill(0);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) continue;
    // a value on an edge belongs to the bucket it closes; the maximum to the last
    bucket[Math.min(buckets - 1, Math.max(0, Math.ceil((v - min) / width) - 1))]++;
  }
  const bucketLimit = bucket.map((_, i) => (i === buckets - 1 ? max : min + (i + 1) * width));
  return { min, max, num, sum, sumSquares, bucketLimit, bucket };
}

const HISTOGRAM_BUCKETS = 30;

function event(step: number, wallTime: number): Msg {
  return new Msg().double(1, wallTime).int(2, step);
}

function scalarValue(tag: string, v: number): Msg {
  return new Msg().string(1, tag).float(2, v);
}

function histogramValue(tag: string, h: Histogram): Msg {
  const p = new Msg().double(1, h.min).double(2, h.max).double(3, h.num).double(4, h.sum).double(5, h.sumSquares);
  p.packedDoubles(6, h.bucketLimit).packedDoubles(7, h.bucket);
  return new Msg().string(1, tag).msg(5, p);
}

function summaryEvent(step: number, wallTime: number, values: Msg[]): Uint8Array {
  const summary = new Msg();
  for (const v of values) summary.msg(1, v);
  return event(step, wallTime).msg(5, summary).done();
}

const SESSION_START = 1;

/**
 * One run's event file in `dir`, created at the first write: `events.out.tfevents.<unix seconds>.<host>`, opening with
 * the `brain.Event:2` version record. With `purgeFrom`, the next record is a SessionLog START at that step, which tells
 * TensorBoard to drop every step from there on that earlier files hold (a resumed run's abandoned steps). Each call
 * appends its records in one write, so a reader polling the folder sees whole steps.
 */
export class EventFileWriter {
  private fd: number | null = null;
  path: string | null = null;

  constructor(
    readonly dir: string,
    private readonly purgeFrom: number | null = null,
  ) {}

  private open(wallTime: number): void {
    mkdirSync(this.dir, { recursive: true });
    const base = `events.out.tfevents.${Math.floor(wallTime)}.${hostname()}`;
    // a resume within the same second on the same host: the later file sorts after the earlier one, as TensorBoard reads them
    let name = base;
    for (let i = 1; existsSync(join(this.dir, name)); i++) name = `${base}.${i}`;
    this.path = join(this.dir, name);
    this.fd = openSync(this.path, 'a');
    const first = [event(0, wallTime).string(3, 'brain.Event:2').done()];
    if (this.purgeFrom !== null) first.push(event(this.purgeFrom, wallTime).msg(7, new Msg().int(1, SESSION_START)).done());
    this.write(first);
  }

  private write(events: Uint8Array[]): void {
    const records = events.map(tfRecord);
    const out = new Uint8Array(records.reduce((a, r) => a + r.length, 0));
    let at = 0;
    for (const r of records) {
      out.set(r, at);
      at += r.length;
    }
    writeSync(this.fd!, out);
  }

  /** one Summary of scalars (simple_value) and histograms at `step` */
  add(step: number, scalars: [string, number][], histograms: [string, Histogram][] = [], wallTime = Date.now() / 1000): void {
    if (!scalars.length && !histograms.length) return;
    if (this.fd === null) this.open(wallTime);
    const values = [...scalars.map(([t, v]) => scalarValue(t, v)), ...histograms.map(([t, h]) => histogramValue(t, h))];
    this.write([summaryEvent(step, wallTime, values)]);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
