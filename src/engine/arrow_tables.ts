// Per-step token and episode tables (DESIGN §5, contract): Arrow IPC *file* format, one row per completion
// token / per episode. Columns travel as struct-of-arrays: the trainer fills typed arrays and the credit
// analysis reads a million rows at once, so no per-row JS object is ever built on either side.
//
// Strings are plain Utf8, not dictionary-encoded, although `token`, `section` and `token_type` repeat a lot.
// A dictionary column keeps its values but changes the column's *type*: pyarrow reports
// `dictionary<values=string, indices=int32>`, pandas a Categorical and polars a Categorical, so a schema
// check against DESIGN §5 ("token:utf8") would fail in every reader but ours. The price is small: a 10k-token
// step spends about 60 KB on these three columns, a fraction of its 13 float/int columns (~520 KB).
import {
  Bool,
  Field,
  Float32,
  Int32,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  Type,
  Utf8,
  tableFromIPC,
  tableToIPC,
  type Data,
  type DataType,
  type Vector,
} from 'apache-arrow';
import { readFileSync } from 'node:fs';
import type { SectionName } from '../protocol/index';
import { UserError } from './errors';
import { listLoggedSteps, stepFile, writeFileAtomic } from './rundir';

export type TokenType = 'filler' | 'reasoning';

/** Columns of `<run>/tokens/step-NNNNNN.arrow`; every array has one entry per completion token. */
export interface TokenColumns {
  step: Int32Array;
  episode: Int32Array;
  prompt_idx: Int32Array;
  position: Int32Array;
  token_id: Int32Array;
  token: string[];
  logprob: Float32Array;
  entropy: Float32Array;
  /** A_i, the episode's advantage. */
  advantage: Float32Array;
  weight: Float32Array;
  /** Â = A_i·w. */
  effective_advantage: Float32Array;
  contribution: Float32Array;
  /**
   * null: the strategy does not produce it, and the whole column is written as nulls. When writing, a
   * `(number | null)[]` marks single rows null; when reading, single null rows come back as NaN.
   */
  attribution: Float32Array | (number | null)[] | null;
  importance: Float32Array | (number | null)[] | null;
  section: SectionName[];
  token_type: TokenType[];
  reward: Float32Array;
}

/** What the readers return: nullable float columns are a Float32Array (NaN where a row is null) or null. */
export type TokenColumnsRead = Omit<TokenColumns, 'attribution' | 'importance'> & {
  attribution: Float32Array | null;
  importance: Float32Array | null;
};

/** Columns of `<run>/episodes/step-NNNNNN.arrow`; one entry per episode. */
export interface EpisodeColumns {
  step: Int32Array;
  episode: Int32Array;
  prompt_idx: Int32Array;
  prompt: string[];
  completion: string[];
  reward: Float32Array;
  reward_format: Float32Array;
  reward_answer: Float32Array;
  success: boolean[];
  advantage: Float32Array;
  length: Int32Array;
  /** The CAL oracle's error span text, null for an episode without one (and for every other strategy). */
  oracle_span: (string | null)[];
}

const int32 = (name: string) => new Field(name, new Int32(), false);
const float32 = (name: string, nullable = false) => new Field(name, new Float32(), nullable);
const utf8 = (name: string, nullable = false) => new Field(name, new Utf8(), nullable);

/** DESIGN §5 token table, in contract column order. */
export const TOKEN_SCHEMA = new Schema([
  int32('step'), int32('episode'), int32('prompt_idx'), int32('position'), int32('token_id'), utf8('token'),
  float32('logprob'), float32('entropy'), float32('advantage'), float32('weight'), float32('effective_advantage'),
  float32('contribution'), float32('attribution', true), float32('importance', true),
  utf8('section'), utf8('token_type'), float32('reward'),
], new Map([['credit_lens.table', 'tokens'], ['credit_lens.version', '1']]));

/** DESIGN §5 episode table, in contract column order. */
export const EPISODE_SCHEMA = new Schema([
  int32('step'), int32('episode'), int32('prompt_idx'), utf8('prompt'), utf8('completion'),
  float32('reward'), float32('reward_format'), float32('reward_answer'), new Field('success', new Bool(), false),
  float32('advantage'), int32('length'), utf8('oracle_span', true),
], new Map([['credit_lens.table', 'episodes'], ['credit_lens.version', '1']]));

// ---- writing ----

type AnyColumn = Int32Array | Float32Array | readonly unknown[] | null;

function rowCount(kind: string, schema: Schema, cols: Record<string, AnyColumn>): number {
  let n = -1;
  for (const f of schema.fields) {
    const c = cols[f.name];
    if (c === undefined) throw new Error(`${kind} table: column ${f.name} is missing`);
    if (c === null) {
      if (!f.nullable) throw new Error(`${kind} table: column ${f.name} cannot be null`);
      continue;
    }
    if (n < 0) n = c.length;
    else if (c.length !== n) throw new Error(`${kind} table: column ${f.name} has ${c.length} rows, expected ${n}`);
  }
  return Math.max(n, 0);
}

function bitmapOf(n: number, isSet: (i: number) => boolean): { bitmap: Uint8Array; unset: number } {
  const bitmap = new Uint8Array((n + 7) >> 3);
  let unset = 0;
  for (let i = 0; i < n; i++) {
    if (isSet(i)) bitmap[i >> 3] |= 1 << (i & 7);
    else unset++;
  }
  return { bitmap, unset };
}

function int32Data(v: Int32Array): Data {
  return makeData({ type: new Int32(), length: v.length, nullCount: 0, data: v });
}

function float32Data(v: Float32Array | (number | null)[] | null, n: number): Data {
  if (v === null) {
    return makeData({ type: new Float32(), length: n, nullCount: n, data: new Float32Array(n), nullBitmap: new Uint8Array((n + 7) >> 3) });
  }
  if (v instanceof Float32Array) return makeData({ type: new Float32(), length: n, nullCount: 0, data: v });
  const { bitmap, unset } = bitmapOf(n, (i) => v[i] !== null);
  const data = Float32Array.from(v, (x) => x ?? 0);
  return makeData({ type: new Float32(), length: n, nullCount: unset, data, ...(unset ? { nullBitmap: bitmap } : {}) });
}

function boolData(v: readonly boolean[]): Data {
  const { bitmap } = bitmapOf(v.length, (i) => v[i]);
  return makeData({ type: new Bool(), length: v.length, nullCount: 0, data: bitmap });
}

/**
 * UTF-8 bytes and int32 offsets for a string column. Most logged text is ASCII: then one join and one
 * encode do it, since byte offsets equal character offsets. Otherwise each string is encoded in place;
 * a UTF-16 code unit never takes more than 3 UTF-8 bytes (a surrogate pair: 2 units → 4 bytes).
 */
function utf8Data(v: readonly (string | null)[]): Data {
  const n = v.length;
  const offsets = new Int32Array(n + 1);
  const joined = v.join(''); // null joins as ''
  let bytes: Uint8Array = Buffer.from(joined, 'utf8');
  if (bytes.length === joined.length) {
    let p = 0;
    for (let i = 0; i < n; i++) offsets[i + 1] = p += v[i]?.length ?? 0;
  } else {
    const buf = Buffer.allocUnsafeSlow(joined.length * 3);
    let p = 0;
    for (let i = 0; i < n; i++) {
      const s = v[i];
      if (s) p += buf.write(s, p, 'utf8');
      offsets[i + 1] = p;
    }
    bytes = buf.subarray(0, p);
  }
  if (bytes.length > 0x7fffffff) throw new Error('string column exceeds 2 GiB, the limit of Arrow Utf8 offsets');
  let nulls = 0;
  for (let i = 0; i < n; i++) if (v[i] === null) nulls++;
  if (nulls === 0) return makeData({ type: new Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data: bytes });
  const { bitmap } = bitmapOf(n, (i) => v[i] !== null);
  return makeData({ type: new Utf8(), length: n, nullCount: nulls, valueOffsets: offsets, data: bytes, nullBitmap: bitmap });
}

function columnData(field: Field, col: AnyColumn, n: number): Data {
  switch (field.type.typeId) {
    case Type.Int: return int32Data(col as Int32Array);
    case Type.Float: return float32Data(col as Float32Array | (number | null)[] | null, n);
    case Type.Bool: return boolData(col as boolean[]);
    case Type.Utf8: return utf8Data(col === null ? new Array<null>(n).fill(null) : (col as (string | null)[]));
    default: throw new Error(`no writer for column ${field.name} of type ${field.type}`);
  }
}

function writeTable(kind: string, path: string, schema: Schema, cols: Record<string, AnyColumn>): void {
  const n = rowCount(kind, schema, cols);
  const children = schema.fields.map((f) => columnData(f, cols[f.name], n));
  const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children }));
  writeFileAtomic(path, tableToIPC(new Table(schema, [batch]), 'file'));
}

/** Write one step's token table atomically (tmp + rename). Column lengths must agree. */
export function writeTokenTable(path: string, cols: TokenColumns): void {
  writeTable('token', path, TOKEN_SCHEMA, cols as unknown as Record<string, AnyColumn>);
}

/** Write one step's episode table atomically (tmp + rename). Column lengths must agree. */
export function writeEpisodeTable(path: string, cols: EpisodeColumns): void {
  writeTable('episode', path, EPISODE_SCHEMA, cols as unknown as Record<string, AnyColumn>);
}

// ---- reading ----

const bitSet = (bitmap: Uint8Array, i: number) => (bitmap[i >> 3] & (1 << (i & 7))) !== 0;

function readTable(path: string): Table {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new UserError(`cannot read table ${path}: ${(e as Error).message}`);
  }
  try {
    return tableFromIPC(bytes);
  } catch (e) {
    throw new UserError(`${path} is not a readable Arrow IPC file (truncated or corrupted?): ${(e as Error).message}`);
  }
}

function column(path: string, table: Table, field: Field): Vector | null {
  const v = table.getChild(field.name);
  if (!v) {
    if (field.nullable) return null; // an optional column that an older writer left out reads as all-null
    throw new UserError(`${path} has no column ${field.name} (DESIGN §5 requires it)`);
  }
  const t = v.type as DataType;
  const ok = field.type.typeId === Type.Utf8 ? t.typeId === Type.Utf8 || t.typeId === Type.LargeUtf8 || t.typeId === Type.Dictionary
    : field.type.typeId === Type.Bool ? t.typeId === Type.Bool
    : t.typeId === Type.Int || t.typeId === Type.Float;
  if (!ok) throw new UserError(`${path}: column ${field.name} has type ${t}, expected ${field.type}`);
  return v;
}

function readInt32(v: Vector): Int32Array {
  const a = v.toArray() as ArrayLike<number | bigint>;
  if (a instanceof Int32Array) return a;
  return Int32Array.from(a as ArrayLike<number>, Number);
}

/**
 * Float32 values; a null row becomes NaN. A nullable column that is entirely null or absent becomes null
 * (for zero rows too, which is how the writer's null column reads back).
 */
function readFloat32(v: Vector | null, nullable = false): Float32Array | null {
  if (v === null || (v.nullCount === v.length && (nullable || v.length > 0))) return null;
  const raw = v.toArray() as ArrayLike<number | bigint>;
  const out = raw instanceof Float32Array ? raw : Float32Array.from(raw as ArrayLike<number>, Number);
  if (v.nullCount === 0) return out;
  const copy = out === raw ? Float32Array.from(out) : out; // toArray() may be a view of the file's bytes
  let base = 0;
  for (const d of v.data) {
    if (d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length > 0) {
      for (let i = 0; i < d.length; i++) if (!bitSet(d.nullBitmap, d.offset + i)) copy[base + i] = NaN;
    }
    base += d.length;
  }
  return copy;
}

function readBool(v: Vector): boolean[] {
  const out = new Array<boolean>(v.length);
  let base = 0;
  for (const d of v.data) {
    const bits = d.values as Uint8Array;
    for (let i = 0; i < d.length; i++) out[base + i] = bitSet(bits, d.offset + i);
    base += d.length;
  }
  return out;
}

/**
 * Decode a Utf8 chunk with one TextDecoder call over its whole value buffer, then slice. Byte offsets
 * are mapped to UTF-16 offsets by counting code-point lead bytes (4-byte sequences are surrogate pairs);
 * for pure ASCII the two coincide. Per-value decoding would cost a native call per row.
 */
const decoder = new TextDecoder('utf-8');
function readUtf8Chunk(d: Data, out: (string | null)[], base: number): void {
  const offsets = d.valueOffsets as Int32Array;
  const bytes = d.values as Uint8Array;
  const n = d.length;
  const start = offsets[0];
  const end = offsets[n];
  const text = decoder.decode(bytes.subarray(start, end));
  const valid = d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length > 0 ? d.nullBitmap : null;
  const isNull = (i: number) => valid !== null && !bitSet(valid, d.offset + i);
  if (text.length === end - start) {
    // every byte decoded to one code unit: ASCII (or invalid bytes, each replaced by one U+FFFD)
    for (let i = 0; i < n; i++) out[base + i] = isNull(i) ? null : text.slice(offsets[i] - start, offsets[i + 1] - start);
    return;
  }
  let b = start;
  let u = 0;
  const units = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) {
    const stop = offsets[i + 1];
    for (; b < stop; b++) {
      const c = bytes[b];
      if ((c & 0xc0) !== 0x80) u += c >= 0xf0 ? 2 : 1;
    }
    units[i + 1] = u;
  }
  if (u !== text.length) {
    // invalid UTF-8 (never written by us): the replacement characters break the count, decode one by one
    for (let i = 0; i < n; i++) out[base + i] = isNull(i) ? null : decoder.decode(bytes.subarray(offsets[i], offsets[i + 1]));
    return;
  }
  for (let i = 0; i < n; i++) out[base + i] = isNull(i) ? null : text.slice(units[i], units[i + 1]);
}

function readStrings(v: Vector | null, n: number): (string | null)[] {
  if (v === null) return new Array<null>(n).fill(null);
  if (v.type.typeId !== Type.Utf8) return Array.from(v as Iterable<string | null>, (x) => (x === null ? null : String(x)));
  const out = new Array<string | null>(v.length);
  let base = 0;
  for (const d of v.data) {
    readUtf8Chunk(d, out, base);
    base += d.length;
  }
  return out;
}

/** A non-null string column: a null cell (a file from another writer) reads as ''. */
function readRequiredStrings(v: Vector): string[] {
  const out = readStrings(v, v.length);
  if (v.nullCount > 0) for (let i = 0; i < out.length; i++) out[i] ??= '';
  return out as string[];
}

/** Read one token table column-wise. */
export function readTokenTable(path: string): TokenColumnsRead {
  const t = readTable(path);
  const c = (name: string) => column(path, t, TOKEN_SCHEMA.fields.find((f) => f.name === name)!);
  const n = t.numRows;
  const req = (name: string) => c(name)!;
  return {
    step: readInt32(req('step')),
    episode: readInt32(req('episode')),
    prompt_idx: readInt32(req('prompt_idx')),
    position: readInt32(req('position')),
    token_id: readInt32(req('token_id')),
    token: readRequiredStrings(req('token')),
    logprob: readFloat32(req('logprob')) ?? new Float32Array(n).fill(NaN),
    entropy: readFloat32(req('entropy')) ?? new Float32Array(n).fill(NaN),
    advantage: readFloat32(req('advantage')) ?? new Float32Array(n).fill(NaN),
    weight: readFloat32(req('weight')) ?? new Float32Array(n).fill(NaN),
    effective_advantage: readFloat32(req('effective_advantage')) ?? new Float32Array(n).fill(NaN),
    contribution: readFloat32(req('contribution')) ?? new Float32Array(n).fill(NaN),
    attribution: readFloat32(c('attribution'), true),
    importance: readFloat32(c('importance'), true),
    section: readRequiredStrings(req('section')) as SectionName[],
    token_type: readRequiredStrings(req('token_type')) as TokenType[],
    reward: readFloat32(req('reward')) ?? new Float32Array(n).fill(NaN),
  };
}

/** Read one episode table column-wise. */
export function readEpisodeTable(path: string): EpisodeColumns {
  const t = readTable(path);
  const c = (name: string) => column(path, t, EPISODE_SCHEMA.fields.find((f) => f.name === name)!);
  const n = t.numRows;
  const req = (name: string) => c(name)!;
  const f32 = (name: string) => readFloat32(req(name)) ?? new Float32Array(n).fill(NaN);
  return {
    step: readInt32(req('step')),
    episode: readInt32(req('episode')),
    prompt_idx: readInt32(req('prompt_idx')),
    prompt: readRequiredStrings(req('prompt')),
    completion: readRequiredStrings(req('completion')),
    reward: f32('reward'),
    reward_format: f32('reward_format'),
    reward_answer: f32('reward_answer'),
    success: readBool(req('success')),
    advantage: f32('advantage'),
    length: readInt32(req('length')),
    oracle_span: readStrings(c('oracle_span'), n),
  };
}

function concatInt32(parts: Int32Array[], total: number): Int32Array {
  const out = new Int32Array(total);
  let p = 0;
  for (const a of parts) { out.set(a, p); p += a.length; }
  return out;
}

function concatFloat32(parts: (Float32Array | null)[], lengths: number[], total: number, allowNull: boolean): Float32Array | null {
  if (allowNull && parts.every((a) => a === null)) return null;
  const out = new Float32Array(total);
  let p = 0;
  parts.forEach((a, i) => {
    if (a) out.set(a, p);
    else out.fill(NaN, p, p + lengths[i]); // a step without the column, next to steps with it
    p += lengths[i];
  });
  return out;
}

function concatStrings<T>(parts: T[][], total: number): T[] {
  const out = new Array<T>(total);
  let p = 0;
  for (const a of parts) for (let i = 0; i < a.length; i++) out[p++] = a[i];
  return out;
}

/**
 * Every logged step's token table in [fromStep, toStep] (inclusive; both optional), concatenated in
 * step order. Steps whose table is missing are simply not there (logging.every > 1, or a run still going).
 */
export function readTokenTables(runDir: string, range: { fromStep?: number; toStep?: number } = {}): TokenColumnsRead {
  const lo = range.fromStep ?? -Infinity;
  const hi = range.toStep ?? Infinity;
  const tables = listLoggedSteps(runDir, 'tokens')
    .filter((s) => s >= lo && s <= hi)
    .map((s) => readTokenTable(stepFile(runDir, 'tokens', s)));
  const lengths = tables.map((t) => t.step.length);
  const total = lengths.reduce((a, b) => a + b, 0);
  const ints = (k: 'step' | 'episode' | 'prompt_idx' | 'position' | 'token_id') => concatInt32(tables.map((t) => t[k]), total);
  const floats = (k: 'logprob' | 'entropy' | 'advantage' | 'weight' | 'effective_advantage' | 'contribution' | 'reward') =>
    concatFloat32(tables.map((t) => t[k]), lengths, total, false)!;
  return {
    step: ints('step'),
    episode: ints('episode'),
    prompt_idx: ints('prompt_idx'),
    position: ints('position'),
    token_id: ints('token_id'),
    token: concatStrings(tables.map((t) => t.token), total),
    logprob: floats('logprob'),
    entropy: floats('entropy'),
    advantage: floats('advantage'),
    weight: floats('weight'),
    effective_advantage: floats('effective_advantage'),
    contribution: floats('contribution'),
    attribution: concatFloat32(tables.map((t) => t.attribution), lengths, total, true),
    importance: concatFloat32(tables.map((t) => t.importance), lengths, total, true),
    section: concatStrings(tables.map((t) => t.section), total),
    token_type: concatStrings(tables.map((t) => t.token_type), total),
    reward: floats('reward'),
  };
}
