// One file although long: the writers and readers share the schemas, so a column added to the catalog reaches both here.
// Per-step token and episode tables (design.md#run-directory, contract): Arrow IPC *file* format, one row per completion
// token / per episode. Columns travel as struct-of-arrays: the trainer fills typed arrays and the credit
// analysis reads a million rows at once, so no per-row JS object is ever built on either side.
//
// Strings are plain Utf8, not dictionary-encoded, although `token`, `section` and `token_type` repeat a lot.
// A dictionary column keeps its values but changes the column's *type*: pyarrow reports
// `dictionary<values=string, indices=int32>`, pandas and polars a Categorical, so a schema
// check against design.md#run-directory ("token:utf8") would fail in every reader but ours. The price: with their 4-byte
// offsets the three columns take about 28 bytes per token instead of 12 for int32 indices, in rows of about
// 85 bytes, so a step file is roughly a fifth larger (8.4 MB per 100k tokens).
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
import type { TokenType } from '../../protocol';
import { EXTRA_COLUMN_RE, TOKEN_COLUMNS, type TokenColumnArrays, type TokenContractColumns, type TokenContractColumnsRead } from '../../protocol/token_columns';
import { UserError } from '../core/errors';
import { ipcFileFault, tableFault } from './ipc_check';
import { listLoggedSteps, stepFile } from './rundir';
import { writeFileAtomic } from '../core/files';

export type { TokenType };
export { EXTRA_COLUMN_RE };

/**
 * Columns of `<run>/tokens/step-NNNNNN.arrow` as the writer takes them: the contract columns declared in
 * protocol/token_columns.ts, one entry per completion token each.
 */
export type TokenColumns = TokenContractColumns & {
  /**
   * Per-token values beyond the contract, one nullable float32 column each after the contract columns: what an
   * imported trainer logged and we keep (prime-rl's importance_ratio, mismatch_kl, …). Names are snake_case and
   * never a contract column's name (EXTRA_COLUMN_RE).
   */
  extra?: Record<string, Float32Array | (number | null)[]>;
};

/** What the readers return: nullable float columns are a Float32Array (NaN where a row is null) or null. */
export type TokenColumnsRead = TokenContractColumnsRead & {
  /** every numeric column beyond the contract (NaN where null; NaN in the rows of a step without it) */
  extra: Record<string, Float32Array>;
};

/**
 * Every contract column of a token table of `n` rows, zeroed, from the catalog (protocol/token_columns.ts): the writers
 * (session/token_log.ts, analysis/synthetic.ts) fill them and null what they do not produce, so a new column needs no
 * allocation line of its own.
 */
export function allocTokenColumns(n: number): TokenColumnArrays {
  const cols: Record<string, Int32Array | Float32Array | string[]> = {};
  // a nullable int32 column (char_start) starts at −1, "not filled": a writer that leaves it so writes it as null
  for (const c of TOKEN_COLUMNS)
    cols[c.name] = c.type === 'int32' ? new Int32Array(n).fill(c.nullable ? -1 : 0) : c.type === 'float32' ? new Float32Array(n) : new Array<string>(n);
  return cols as TokenColumnArrays;
}

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
  /**
   * The completion stopped at max_new_tokens, as the sampler saw it; null where the writer did not know (an import, an
   * older engine: readers then infer it).
   */
  truncated?: (boolean | null)[];
  /** correct | wrong | truncated | no_answer (tasks/sections.ts answerStatus); null where the writer did not record it */
  status?: (string | null)[];
}

const int32 = (name: string) => new Field(name, new Int32(), false);
const float32 = (name: string, nullable = false) => new Field(name, new Float32(), nullable);
const utf8 = (name: string, nullable = false) => new Field(name, new Utf8(), nullable);

const ARROW_TYPE = { int32: () => new Int32(), float32: () => new Float32(), utf8: () => new Utf8() };

/** design.md#run-directory token table, in contract column order: protocol/token_columns.ts, as an Arrow schema. */
export const TOKEN_SCHEMA = new Schema(
  TOKEN_COLUMNS.map((c) => new Field(c.name, ARROW_TYPE[c.type](), c.nullable)),
  new Map([
    ['credit_lens.table', 'tokens'],
    ['credit_lens.version', '1'],
  ]),
);

/** design.md#run-directory episode table, in contract column order. */
export const EPISODE_SCHEMA = new Schema(
  [
    int32('step'),
    int32('episode'),
    int32('prompt_idx'),
    utf8('prompt'),
    utf8('completion'),
    float32('reward'),
    float32('reward_format'),
    float32('reward_answer'),
    new Field('success', new Bool(), false),
    float32('advantage'),
    int32('length'),
    utf8('oracle_span', true),
    new Field('truncated', new Bool(), true),
    utf8('status', true),
  ],
  new Map([
    ['credit_lens.table', 'episodes'],
    ['credit_lens.version', '1'],
  ]),
);

/**
 * `<run>/probes/step-NNNNNN.arrow`: one row per probed (episode, position) of a step, sorted by both. value V_t
 * is the mean reward of `rollouts` continuations of the prompt plus the completion's first t tokens (V_n, the whole
 * completion, is the episode's reward with rollouts 0 and value_se 0); delta = V_{t+1} − V_t, null where t + 1 was not
 * probed. It joins the token table on (episode, position).
 */
export interface ProbeColumns {
  episode: Int32Array;
  position: Int32Array;
  value: Float32Array;
  value_se: Float32Array;
  rollouts: Int32Array;
  /** NaN where null (as the readers give nullable floats) */
  delta: Float32Array;
  /** the values of the two independent halves of the continuations; NaN where absent (tables before halves were kept) */
  value_a?: Float32Array;
  value_b?: Float32Array;
  /** each half's variance as an estimate of V (s²/m); NaN where absent (tables before it was kept) */
  value_var_a?: Float32Array;
  value_var_b?: Float32Array;
}

export const PROBE_SCHEMA = new Schema(
  [
    int32('episode'),
    int32('position'),
    float32('value'),
    float32('value_se'),
    int32('rollouts'),
    float32('delta', true),
    float32('value_a', true),
    float32('value_b', true),
    float32('value_var_a', true),
    float32('value_var_b', true),
  ],
  new Map([
    ['credit_lens.table', 'probes'],
    ['credit_lens.version', '1'],
  ]),
);

// ---- writing ----

type AnyColumn = Int32Array | Float32Array | readonly unknown[] | null;

function rowCount(kind: string, schema: Schema, cols: Record<string, AnyColumn>): number {
  let n = -1;
  for (const f of schema.fields) {
    const c = cols[f.name];
    if (c === undefined && !f.nullable) throw new Error(`${kind} table: column ${f.name} is missing`);
    if (c === null || c === undefined) {
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

/**
 * An int32 column. Null, or a nullable column still at its allocation's −1 somewhere (allocTokenColumns: a writer that
 * does not fill char_start), is written as all nulls.
 */
function int32Data(v: Int32Array | null, n: number, nullable: boolean): Data {
  if (v === null || (nullable && v.some((x) => x < 0)))
    return makeData({ type: new Int32(), length: n, nullCount: n, data: new Int32Array(n), nullBitmap: new Uint8Array((n + 7) >> 3) });
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

function boolData(v: readonly (boolean | null)[] | null, n: number): Data {
  if (v === null) return makeData({ type: new Bool(), length: n, nullCount: n, data: new Uint8Array((n + 7) >> 3), nullBitmap: new Uint8Array((n + 7) >> 3) });
  const { bitmap } = bitmapOf(n, (i) => v[i] === true);
  const { bitmap: valid, unset } = bitmapOf(n, (i) => v[i] !== null);
  return makeData({ type: new Bool(), length: n, nullCount: unset, data: bitmap, ...(unset ? { nullBitmap: valid } : {}) });
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
    case Type.Int:
      return int32Data(col as Int32Array | null, n, field.nullable);
    case Type.Float:
      return float32Data(col as Float32Array | (number | null)[] | null, n);
    case Type.Bool:
      return boolData(col as (boolean | null)[] | null, n);
    case Type.Utf8:
      return utf8Data(col === null ? new Array<null>(n).fill(null) : (col as (string | null)[]));
    default:
      throw new Error(`no writer for column ${field.name} of type ${field.type}`);
  }
}

function writeTable(kind: string, path: string, schema: Schema, cols: Record<string, AnyColumn>): void {
  const n = rowCount(kind, schema, cols);
  const children = schema.fields.map((f) => columnData(f, cols[f.name] ?? null, n)); // an absent nullable column is all nulls
  const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children }));
  writeFileAtomic(path, tableToIPC(new Table(schema, [batch]), 'file'));
}

/** Write one step's token table atomically (tmp + rename). Column lengths must agree. */
export function writeTokenTable(path: string, cols: TokenColumns): void {
  const extra = Object.entries(cols.extra ?? {});
  if (!extra.length) {
    writeTable('token', path, TOKEN_SCHEMA, cols as unknown as Record<string, AnyColumn>);
    return;
  }
  const all: Record<string, AnyColumn> = { ...(cols as unknown as Record<string, AnyColumn>) };
  for (const [name, v] of extra) {
    if (!EXTRA_COLUMN_RE.test(name) || TOKEN_SCHEMA.fields.some((f) => f.name === name)) {
      throw new Error(`token table: extra column name ${JSON.stringify(name)} is not snake_case or is a contract column`);
    }
    all[name] = v;
  }
  const schema = new Schema([...TOKEN_SCHEMA.fields, ...extra.map(([name]) => float32(name, true))], TOKEN_SCHEMA.metadata);
  writeTable('token', path, schema, all);
}

/** Write one step's episode table atomically (tmp + rename). Column lengths must agree. */
export function writeEpisodeTable(path: string, cols: EpisodeColumns): void {
  writeTable('episode', path, EPISODE_SCHEMA, cols as unknown as Record<string, AnyColumn>);
}

/** Write one step's probe table atomically; a NaN delta is written as null. */
export function writeProbeTable(path: string, cols: ProbeColumns): void {
  const nullable = (c: Float32Array | undefined) => (c ? Array.from(c, (d) => (Number.isNaN(d) ? null : d)) : null);
  writeTable('probe', path, PROBE_SCHEMA, {
    ...cols,
    delta: nullable(cols.delta),
    value_a: nullable(cols.value_a),
    value_b: nullable(cols.value_b),
    value_var_a: nullable(cols.value_var_a),
    value_var_b: nullable(cols.value_var_b),
  } as unknown as Record<string, AnyColumn>);
}

// ---- reading ----
//
// Readers parse every file first, then copy each column once into an output array sized for all of them:
// the credit analysis reads a million rows across a run's steps, and building per-step arrays only to
// concatenate them would double the copying and the garbage.

const bitSet = (bitmap: Uint8Array, i: number) => (bitmap[i >> 3] & (1 << (i & 7))) !== 0;

export interface Source {
  path: string;
  table: Table;
}

/** An Arrow IPC file, structurally checked (ipc_check.ts, tableFault) before and after apache-arrow reads it. */
export function readTable(path: string): Source {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new UserError(`cannot read table ${path}: ${(e as Error).message}`);
  }
  const structural = ipcFileFault(bytes);
  if (structural) throw new UserError(`${path} is not a readable Arrow IPC file (truncated or corrupted?): ${structural}`);
  let table: Table;
  try {
    table = tableFromIPC(bytes);
  } catch (e) {
    throw new UserError(`${path} is not a readable Arrow IPC file (truncated or corrupted?): ${(e as Error).message}`);
  }
  const fault = tableFault(table);
  if (fault) throw new UserError(`${path} is corrupted: ${fault}`);
  return { path, table };
}

/** The column of each source; null where a nullable column is absent (an older writer left it out). */
function column(sources: Source[], schema: Schema, name: string): (Vector | null)[] {
  const field = schema.fields.find((f) => f.name === name)!;
  return sources.map(({ path, table }) => {
    const v = table.getChild(name);
    if (!v) {
      if (field.nullable) return null;
      throw new UserError(`${path} has no column ${name} (design.md#run-directory requires it)`);
    }
    const t = v.type as DataType;
    const ok =
      field.type.typeId === Type.Utf8
        ? t.typeId === Type.Utf8 || t.typeId === Type.LargeUtf8 || t.typeId === Type.Dictionary
        : field.type.typeId === Type.Bool
          ? t.typeId === Type.Bool
          : t.typeId === Type.Int || t.typeId === Type.Float;
    if (!ok) throw new UserError(`${path}: column ${name} has type ${t}, expected ${field.type}`);
    return v;
  });
}

/** Copy numeric values into out[base…]; Int64/Float64 columns from other writers are narrowed. */
function copyNumbers(v: Vector, out: Int32Array | Float32Array, base: number): void {
  const a = v.toArray() as ArrayLike<number | bigint>;
  if (a instanceof out.constructor) out.set(a as ArrayLike<number>, base);
  else for (let i = 0; i < v.length; i++) out[base + i] = Number(a[i]);
}

function int32Column(parts: (Vector | null)[], total: number): Int32Array {
  const out = new Int32Array(total);
  let base = 0;
  for (const v of parts) {
    copyNumbers(v!, out, base);
    base += v!.length;
  }
  return out;
}

/**
 * Float32 values with NaN for a null row (and for the rows of a source without the column). A nullable
 * column that is null or absent in every source is returned as null, also for zero rows: that is how
 * the writer's null column reads back.
 */
function float32Column(parts: (Vector | null)[], lengths: number[], total: number, nullable: boolean): Float32Array | null {
  if (nullable && parts.every((v) => v === null || v.nullCount === v.length)) return null;
  const out = new Float32Array(total);
  let base = 0;
  parts.forEach((v, k) => {
    if (v === null) {
      out.fill(NaN, base, base + lengths[k]);
    } else {
      copyNumbers(v, out, base);
      if (v.nullCount > 0) {
        let at = base;
        for (const d of v.data) {
          if (d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length > 0) {
            for (let i = 0; i < d.length; i++) if (!bitSet(d.nullBitmap, d.offset + i)) out[at + i] = NaN;
          }
          at += d.length;
        }
      }
    }
    base += lengths[k];
  });
  return out;
}

/** A nullable bool column: null where a row is null, and every row null for a file without the column. */
function nullableBoolColumn(parts: (Vector | null)[], total: number): (boolean | null)[] {
  const out = new Array<boolean | null>(total).fill(null);
  let base = 0;
  for (const v of parts) {
    if (v === null) continue;
    for (const d of v.data) {
      const bits = d.values as Uint8Array;
      const valid = d.nullBitmap as Uint8Array | null | undefined;
      for (let i = 0; i < d.length; i++) if (!valid || d.nullCount === 0 || bitSet(valid, d.offset + i)) out[base + i] = bitSet(bits, d.offset + i);
      base += d.length;
    }
  }
  return out;
}

function boolColumn(parts: (Vector | null)[], total: number): boolean[] {
  const out = new Array<boolean>(total);
  let base = 0;
  for (const v of parts) {
    for (const d of v!.data) {
      const bits = d.values as Uint8Array;
      for (let i = 0; i < d.length; i++) out[base + i] = bitSet(bits, d.offset + i);
      base += d.length;
    }
  }
  return out;
}

/**
 * Decode a Utf8 chunk with one TextDecoder call over its whole value buffer, then slice. Byte offsets
 * are mapped to UTF-16 offsets by counting code-point lead bytes (4-byte sequences are surrogate pairs);
 * for pure ASCII the two coincide. Per-value decoding would cost a native call per row.
 */
const decoder = new TextDecoder('utf-8');
const MAX_INTERNED = 16;
function readUtf8Chunk(d: Data, out: (string | null)[], base: number, seen: string[] | null): void {
  const offsets = d.valueOffsets as Int32Array;
  const bytes = d.values as Uint8Array;
  const n = d.length;
  const start = offsets[0];
  const end = offsets[n];
  const text = decoder.decode(bytes.subarray(start, end));
  const valid = d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length > 0 ? d.nullBitmap : null;
  const isNull = (i: number) => valid !== null && !bitSet(valid, d.offset + i);
  // Low-cardinality columns reuse one string per distinct value: `startsWith` at an offset compares
  // without allocating, while a slice per row would leave a million short strings for the GC.
  const take = (from: number, to: number): string => {
    if (seen !== null) {
      for (const s of seen) if (s.length === to - from && text.startsWith(s, from)) return s;
      const s = text.slice(from, to);
      if (seen.length < MAX_INTERNED) seen.push(s);
      return s;
    }
    return text.slice(from, to);
  };
  if (text.length === end - start) {
    // every byte decoded to one code unit: ASCII (or invalid bytes, each replaced by one U+FFFD)
    for (let i = 0; i < n; i++) out[base + i] = isNull(i) ? null : take(offsets[i] - start, offsets[i + 1] - start);
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
  for (let i = 0; i < n; i++) out[base + i] = isNull(i) ? null : take(units[i], units[i + 1]);
}

/**
 * A string column. `nullAs` replaces null cells: '' for columns the contract keeps non-null (a file from
 * another writer may still hold nulls there), null for nullable ones. `intern` is for columns with a
 * handful of distinct values (`section`, `token_type`).
 */
function stringColumn<T extends string | null>(parts: (Vector | null)[], lengths: number[], total: number, nullAs: T, intern = false): (string | T)[] {
  const out = new Array<string | null>(total);
  const seen = intern ? [] : null;
  let base = 0;
  parts.forEach((v, k) => {
    if (v === null) {
      out.fill(nullAs, base, base + lengths[k]);
    } else if (v.type.typeId === Type.Utf8) {
      let at = base;
      for (const d of v.data) {
        readUtf8Chunk(d, out, at, seen);
        at += d.length;
      }
    } else {
      let i = base;
      for (const x of v as Iterable<unknown>) out[i++] = x === null || x === undefined ? null : String(x);
    }
    if (v !== null && v.nullCount > 0 && nullAs !== null) {
      for (let i = base; i < base + lengths[k]; i++) out[i] ??= nullAs;
    }
    base += lengths[k];
  });
  return out as (string | T)[];
}

function readTokens(paths: string[]): TokenColumnsRead {
  const sources = paths.map(readTable);
  const lengths = sources.map((s) => s.table.numRows);
  const total = lengths.reduce((a, b) => a + b, 0);
  const out: Record<string, unknown> = {};
  for (const c of TOKEN_COLUMNS) {
    const parts = column(sources, TOKEN_SCHEMA, c.name);
    if (c.type === 'int32') out[c.name] = c.nullable && parts.some((v) => v === null || v.nullCount > 0) ? null : int32Column(parts, total);
    else if (c.type === 'float32') out[c.name] = float32Column(parts, lengths, total, c.nullable);
    else out[c.name] = stringColumn(parts, lengths, total, '', 'few_values' in c && c.few_values);
  }
  out.extra = extraColumns(sources, lengths, total);
  return out as TokenColumnsRead;
}

/**
 * The token rows in the order a reader that walks episodes needs: by step, then episode, then position, so that an
 * episode's tokens are one contiguous run of rows. Our trainer writes them so; a table written otherwise (another
 * tool, a hand-made or synthetic table) is put in that order here, every column alike, instead of being walked as if
 * it were. Two rows of one (step, episode, position) mean a corrupted table: a UserError that names the files.
 * The readers above keep the file's order (the extension's episode view orders its own rows).
 */
export function orderTokenRows(t: TokenColumnsRead, paths: string[]): TokenColumnsRead {
  const n = t.step.length;
  const before = (a: number, b: number) => t.step[a] - t.step[b] || t.episode[a] - t.episode[b] || t.position[a] - t.position[b];
  let ordered = true;
  for (let i = 1; i < n && ordered; i++) if (before(i - 1, i) >= 0) ordered = false;
  if (ordered) return t;
  const order = Int32Array.from({ length: n }, (_, i) => i).sort(before);
  for (let i = 1; i < n; i++)
    if (before(order[i - 1], order[i]) === 0) {
      const k = order[i];
      throw new UserError(`${paths.join(', ')}: corrupted: two rows of step ${t.step[k]}, episode ${t.episode[k]}, position ${t.position[k]}`);
    }
  const permute = <T extends { length: number }>(col: T): T => {
    if (col instanceof Int32Array) return Int32Array.from(order, (i) => col[i]) as unknown as T;
    if (col instanceof Float32Array) return Float32Array.from(order, (i) => col[i]) as unknown as T;
    if (Array.isArray(col)) return Array.from(order, (i) => col[i]) as unknown as T;
    return col;
  };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t)) {
    if (k === 'extra') out.extra = Object.fromEntries(Object.entries(t.extra ?? {}).map(([x, col]) => [x, permute(col)]));
    else out[k] = v === null || v === undefined || (v as { length?: number }).length !== n ? v : permute(v as { length: number });
  }
  return out as TokenColumnsRead;
}

/** Numeric columns beyond the contract, in first-seen order; NaN for the rows of a source without one. */
function extraColumns(sources: Source[], lengths: number[], total: number): Record<string, Float32Array> {
  const names: string[] = [];
  for (const { table } of sources) {
    for (const f of table.schema.fields) {
      const numeric = f.type.typeId === Type.Float || f.type.typeId === Type.Int;
      if (numeric && EXTRA_COLUMN_RE.test(f.name) && !TOKEN_SCHEMA.fields.some((c) => c.name === f.name) && !names.includes(f.name)) names.push(f.name);
    }
  }
  const out: Record<string, Float32Array> = {};
  for (const name of names)
    out[name] = float32Column(
      sources.map(({ table }) => table.getChild(name) ?? null),
      lengths,
      total,
      false,
    )!;
  return out;
}

/** Read one token table column-wise. */
export function readTokenTable(path: string): TokenColumnsRead {
  return readTokens([path]);
}

/**
 * A step's tables as every reader of one step wants them (the heatmap's worker, the probe): its token rows in (episode,
 * position) order, checked (orderTokenRows: a table written out of order is sorted, a duplicated row is an error), and
 * its episode table; without `tokens`, the episode table alone.
 */
export function readStepTables(runDir: string, step: number, o: { tokens?: boolean } = {}): { tokens?: TokenColumnsRead; episodes: EpisodeColumns } {
  const episodes = readEpisodeTable(stepFile(runDir, 'episodes', step));
  if (o.tokens === false) return { episodes };
  const file = stepFile(runDir, 'tokens', step);
  return { tokens: orderTokenRows(readTokenTable(file), [file]), episodes };
}

/**
 * Every logged step's token table in [fromStep, toStep] (inclusive; both optional), concatenated in
 * step order. Steps whose table is missing are simply not there (logging.every > 1, or a run still going).
 * A nullable column present in some steps only is NaN in the rows of the others.
 */
export function readTokenTables(runDir: string, range: { fromStep?: number; toStep?: number } = {}): TokenColumnsRead {
  const lo = range.fromStep ?? -Infinity;
  const hi = range.toStep ?? Infinity;
  const steps = listLoggedSteps(runDir, 'tokens').filter((s) => s >= lo && s <= hi);
  return readTokens(steps.map((s) => stepFile(runDir, 'tokens', s)));
}

/** Read one episode table column-wise. */
export function readEpisodeTable(path: string): EpisodeColumns {
  const sources = [readTable(path)];
  const lengths = [sources[0].table.numRows];
  const total = lengths[0];
  const col = (name: string) => column(sources, EPISODE_SCHEMA, name);
  const floats = (name: string) => float32Column(col(name), lengths, total, false)!;
  return {
    step: int32Column(col('step'), total),
    episode: int32Column(col('episode'), total),
    prompt_idx: int32Column(col('prompt_idx'), total),
    prompt: stringColumn(col('prompt'), lengths, total, ''),
    completion: stringColumn(col('completion'), lengths, total, ''),
    reward: floats('reward'),
    reward_format: floats('reward_format'),
    reward_answer: floats('reward_answer'),
    success: boolColumn(col('success'), total),
    advantage: floats('advantage'),
    length: int32Column(col('length'), total),
    oracle_span: stringColumn(col('oracle_span'), lengths, total, null),
    truncated: nullableBoolColumn(col('truncated'), total),
    status: stringColumn(col('status'), lengths, total, null),
  };
}

/** Read one probe table, checked as every table is, and for what a probe table must hold (positions, counts, order). */
export function readProbeTable(path: string): ProbeColumns {
  const sources = [readTable(path)];
  const lengths = [sources[0].table.numRows];
  const total = lengths[0];
  const col = (name: string) => column(sources, PROBE_SCHEMA, name);
  const out: ProbeColumns = {
    episode: int32Column(col('episode'), total),
    position: int32Column(col('position'), total),
    value: float32Column(col('value'), lengths, total, false)!,
    value_se: float32Column(col('value_se'), lengths, total, false)!,
    rollouts: int32Column(col('rollouts'), total),
    delta: float32Column(col('delta'), lengths, total, true) ?? new Float32Array(total).fill(NaN),
    value_a: float32Column(col('value_a'), lengths, total, true) ?? new Float32Array(total).fill(NaN),
    value_b: float32Column(col('value_b'), lengths, total, true) ?? new Float32Array(total).fill(NaN),
    value_var_a: float32Column(col('value_var_a'), lengths, total, true) ?? new Float32Array(total).fill(NaN),
    value_var_b: float32Column(col('value_var_b'), lengths, total, true) ?? new Float32Array(total).fill(NaN),
  };
  for (let i = 0; i < total; i++) {
    const bad =
      out.episode[i] < 0 || out.position[i] < 0
        ? 'a negative episode or position'
        : out.rollouts[i] < 0
          ? 'a negative rollout count'
          : !Number.isFinite(out.value[i]) || !(out.value_se[i] >= 0)
            ? 'a value that is not finite or a negative standard error'
            : i > 0 && (out.episode[i] < out.episode[i - 1] || (out.episode[i] === out.episode[i - 1] && out.position[i] <= out.position[i - 1]))
              ? 'rows out of (episode, position) order'
              : null;
    if (bad) throw new UserError(`${path} is corrupted: row ${i} has ${bad}`);
  }
  return out;
}

/** The probe columns a token table gets when its step was probed (joinProbeColumns), in the order the hover lists them. */
export const PROBE_TOKEN_COLUMNS = ['mc_value', 'mc_value_se', 'mc_delta', 'mc_delta_se', 'mc_rollouts'] as const;

/**
 * Join a step's probe table onto its token table by (episode, position), as extra columns: mc_value V_t (the value of
 * the prefix before the token), mc_value_se, mc_delta δ_t = V_{t+1} − V_t, its standard error mc_delta_se
 * √(se_t² + se_{t+1}²) (the two values come from independent continuations), and mc_rollouts M. NaN where the token was
 * not probed (or, for δ, where t + 1 was not).
 */
export function joinProbeColumns(tokens: TokenColumnsRead, probe: ProbeColumns): void {
  const n = tokens.episode.length;
  const key = (e: number, t: number) => e * 0x100000 + t;
  const at = new Map<number, number>();
  for (let i = 0; i < probe.episode.length; i++) at.set(key(probe.episode[i], probe.position[i]), i);
  const cols = Object.fromEntries(PROBE_TOKEN_COLUMNS.map((c) => [c, new Float32Array(n).fill(NaN)])) as Record<
    (typeof PROBE_TOKEN_COLUMNS)[number],
    Float32Array
  >;
  for (let k = 0; k < n; k++) {
    const i = at.get(key(tokens.episode[k], tokens.position[k]));
    if (i === undefined) continue;
    cols.mc_value[k] = probe.value[i];
    cols.mc_value_se[k] = probe.value_se[i];
    cols.mc_delta[k] = probe.delta[i];
    const next = at.get(key(tokens.episode[k], tokens.position[k] + 1));
    if (next !== undefined && !Number.isNaN(probe.delta[i])) cols.mc_delta_se[k] = Math.hypot(probe.value_se[i], probe.value_se[next]);
    cols.mc_rollouts[k] = probe.rollouts[i];
  }
  Object.assign(tokens.extra, cols);
}
