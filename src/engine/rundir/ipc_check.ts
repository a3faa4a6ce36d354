// Structural checks of an Arrow IPC *file*: before apache-arrow reads it (ipcFileFault) and of the table it returns
// (tableFault). apache-arrow trusts the counts in a file's
// flatbuffers: one flipped bit in the footer's record-batch count made tableFromIPC loop over millions of phantom
// batches (minutes of CPU, on the extension host's thread when a heatmap opened). This walks only what decides how
// much work the reader will do — the footer's block lists, the schema's field count, each record batch's node and
// buffer counts — with every read bounds-checked, and says what is wrong. The layout is the Arrow columnar format's
// (https://arrow.apache.org/docs/format/Columnar.html#ipc-file-format): "ARROW1\0\0", the stream, the footer
// flatbuffer, its int32 length, "ARROW1".

import { Type, type Data, type DataType, type Table } from 'apache-arrow';

const MAGIC = 'ARROW1';

/** Bounds-checked little-endian flatbuffer reads over one region of the file. */
class Fb {
  constructor(
    readonly buf: Buffer,
    readonly lo: number,
    readonly hi: number,
    readonly what: string,
  ) {}
  private need(at: number, n: number): void {
    if (!(at >= this.lo && at + n <= this.hi)) throw new Error(`${this.what}: read of ${n} bytes at ${at} outside ${this.lo}..${this.hi}`);
  }
  u8(at: number): number {
    this.need(at, 1);
    return this.buf.readUInt8(at);
  }
  u16(at: number): number {
    this.need(at, 2);
    return this.buf.readUInt16LE(at);
  }
  i32(at: number): number {
    this.need(at, 4);
    return this.buf.readInt32LE(at);
  }
  u32(at: number): number {
    this.need(at, 4);
    return this.buf.readUInt32LE(at);
  }
  i64(at: number): number {
    this.need(at, 8);
    return Number(this.buf.readBigInt64LE(at));
  }
  /** The position of field `i` of the table at `table`, or null when the field is absent. */
  field(table: number, i: number): number | null {
    const vt = table - this.i32(table);
    const vtSize = this.u16(vt);
    if (vtSize < 4 || vtSize % 2) throw new Error(`${this.what}: vtable size ${vtSize}`);
    // The whole vtable lies in the region: a flipped size bit otherwise makes later fields read table bytes as offsets.
    this.need(vt, vtSize);
    if (4 + 2 * i >= vtSize) return null;
    const off = this.u16(vt + 4 + 2 * i);
    return off ? table + off : null;
  }
  /** The table a uoffset field points to. */
  table(table: number, i: number): number | null {
    const f = this.field(table, i);
    return f === null ? null : f + this.u32(f);
  }
  /** [start of elements, length] of a vector field; the length is checked against the room left. */
  vector(table: number, i: number, elemBytes: number): [number, number] {
    const f = this.field(table, i);
    if (f === null) return [0, 0];
    const v = f + this.u32(f);
    const n = this.u32(v);
    if (v + 4 + n * elemBytes > this.hi)
      throw new Error(`${this.what}: a vector claims ${n} entries of ${elemBytes} bytes but ${this.hi - v - 4} bytes remain`);
    return [v + 4, n];
  }
}

/** A uoffset-referenced string's length, checked against the region. */
function stringLen(fb: Fb, table: number, i: number): number {
  const f = fb.field(table, i);
  if (f === null) return 0;
  const [, n] = fb.vector(table, i, 1);
  return n;
}

const MAX_FIELDS = 10_000;
const MAX_DEPTH = 32;

/**
 * The schema's fields, walked as apache-arrow will: each Field's name, children (recursively) and custom metadata,
 * every vector's length checked against the bytes left. A flipped bit in a children or metadata count otherwise has
 * the reader build millions of phantom fields (a hang of minutes on a 2 KB file). Bounded in depth and count.
 * Schema: endianness 0, fields 1, custom_metadata 2. Field: name 0, nullable 1, type_type 2, type 3, dictionary 4,
 * children 5, custom_metadata 6. KeyValue: key 0, value 1.
 */
function schemaFault(fb: Fb, schema: number): string | null {
  let seen = 0;
  const metadata = (table: number, i: number, where: string): string | null => {
    const [at, n] = fb.vector(table, i, 4);
    for (let k = 0; k < n; k++) {
      const kv = at + 4 * k + fb.u32(at + 4 * k);
      stringLen(fb, kv, 0);
      stringLen(fb, kv, 1);
    }
    return n > MAX_FIELDS ? `${where} has ${n} metadata entries` : null;
  };
  const fields = (table: number, i: number, depth: number): string | null => {
    if (depth > MAX_DEPTH) return `the schema nests fields more than ${MAX_DEPTH} deep`;
    const [at, n] = fb.vector(table, i, 4);
    for (let k = 0; k < n; k++) {
      if (++seen > MAX_FIELDS) return `the schema claims more than ${MAX_FIELDS} fields`;
      const f = at + 4 * k + fb.u32(at + 4 * k);
      stringLen(fb, f, 0);
      const fault = fields(f, 5, depth + 1) ?? metadata(f, 6, `field ${k}`);
      if (fault) return fault;
    }
    return null;
  };
  return fields(schema, 1, 0) ?? metadata(schema, 2, 'the schema');
}

/**
 * The first message of the stream (at byte 8): a continuation marker 0xFFFFFFFF and an int32 metadata length (or the
 * length alone, the pre-1.0 format), then a Message flatbuffer: version 0, header_type 1, header 2. A Schema header
 * (type 1) gets the same field walk as the footer's.
 */
function streamSchemaFault(buf: Buffer, streamEnd: number): string | null {
  let at = 8;
  if (at + 8 > streamEnd) return 'no room for a message';
  if (buf.readUInt32LE(at) === 0xffffffff) at += 4;
  const metaLen = buf.readInt32LE(at);
  const lo = at + 4;
  if (!(metaLen > 0 && lo + metaLen <= streamEnd)) return `metadata length ${metaLen} does not fit`;
  const fb = new Fb(buf, lo, lo + metaLen, 'schema message');
  const message = lo + fb.u32(lo);
  const typeAt = fb.field(message, 1);
  if (typeAt === null || fb.u8(typeAt) !== 1) return null;
  const header = fb.table(message, 2);
  if (header === null) return 'a Schema message without its schema';
  // Message: custom_metadata 4 (KeyValue tables).
  const [mAt, mN] = fb.vector(message, 4, 4);
  for (let k = 0; k < mN; k++) {
    const kv = mAt + 4 * k + fb.u32(mAt + 4 * k);
    stringLen(fb, kv, 0);
    stringLen(fb, kv, 1);
  }
  return schemaFault(fb, header);
}

/** null when the file's structure is sound enough to hand to apache-arrow; else what is wrong. */
export function ipcFileFault(buf: Buffer): string | null {
  try {
    const size = buf.length;
    if (size < 8 + 10) return `only ${size} bytes`;
    if (buf.toString('latin1', 0, 6) !== MAGIC) return 'no ARROW1 magic at the start';
    if (buf.toString('latin1', size - 6, size) !== MAGIC) return 'no ARROW1 magic at the end (truncated?)';
    const footerLen = buf.readInt32LE(size - 10);
    const footerStart = size - 10 - footerLen;
    if (footerLen <= 0 || footerStart < 8) return `footer length ${footerLen} does not fit a ${size}-byte file`;
    const fb = new Fb(buf, footerStart, size - 10, 'footer');
    const footer = footerStart + fb.u32(footerStart);
    // Footer: version 0, schema 1, dictionaries 2, recordBatches 3 (Block structs of 24 bytes: offset i64,
    // metaDataLength i32 + padding, bodyLength i64).
    const schema = fb.table(footer, 1);
    if (schema === null) return 'the footer has no schema';
    const [, nFields] = fb.vector(schema, 1, 4);
    if (nFields === 0) return 'the schema has no fields';
    const fieldFault = schemaFault(fb, schema);
    if (fieldFault) return fieldFault;
    // The stream's own Schema message right after the magic, which the reader parses as well.
    const streamFault = streamSchemaFault(buf, footerStart);
    if (streamFault) return `the stream's schema message: ${streamFault}`;
    for (const list of [2, 3]) {
      const [at, n] = fb.vector(footer, list, 24);
      for (let k = 0; k < n; k++) {
        const b = at + 24 * k;
        const offset = fb.i64(b);
        const metaLen = fb.i32(b + 8);
        const bodyLen = fb.i64(b + 16);
        if (!(offset >= 8 && metaLen > 0 && bodyLen >= 0 && offset + metaLen + bodyLen <= footerStart)) {
          return `block ${k} of the footer (offset ${offset}, metadata ${metaLen}, body ${bodyLen}) lies outside the ${footerStart}-byte stream`;
        }
        if (list === 3) {
          const fault = batchFault(buf, offset, metaLen);
          if (fault) return `record batch ${k}: ${fault}`;
        }
      }
    }
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** The counts of one RecordBatch message: FieldNode (16 bytes) and Buffer (16 bytes) vectors within its metadata. */
function batchFault(buf: Buffer, offset: number, metaLen: number): string | null {
  // A message starts with the continuation marker 0xFFFFFFFF and an int32 length (or, in old files, just the length).
  let at = offset;
  if (buf.readUInt32LE(at) === 0xffffffff) at += 4;
  const len = buf.readInt32LE(at);
  at += 4;
  if (len <= 0 || at + len > offset + metaLen) return `metadata length ${len} exceeds its block`;
  const fb = new Fb(buf, at, at + len, 'record batch metadata');
  const message = at + fb.u32(at);
  // Message: version 0, header_type 1, header 2, bodyLength 3. RecordBatch header: length 0, nodes 1, buffers 2.
  const headerType = fb.field(message, 1);
  if (headerType === null || fb.u8(headerType) !== 3) return 'not a record batch message';
  const header = fb.table(message, 2);
  if (header === null) return 'no header';
  fb.vector(header, 1, 16);
  fb.vector(header, 2, 16);
  const rows = fb.field(header, 0);
  if (rows !== null && fb.i64(rows) < 0) return `negative row count ${fb.i64(rows)}`;
  return null;
}

/**
 * The first inconsistency between a table's declared lengths and its buffers, or null. apache-arrow trusts the
 * lengths and offsets in a file; a few flipped bytes there made readers walk hundreds of MB past a buffer's end
 * (seconds of work on the extension host) and return garbage. Everything the readers below index is checked here:
 * row counts, null counts, validity bitmaps, fixed-width value buffers, and Utf8 offsets (in range, non-decreasing).
 */
export function tableFault(table: Table): string | null {
  const rows = table.numRows;
  if (!Number.isSafeInteger(rows) || rows < 0) return `row count ${rows}`;
  for (const f of table.schema.fields) {
    const v = table.getChild(f.name);
    if (!v) continue;
    if (v.length !== rows) return `column ${f.name} has ${v.length} rows, the table ${rows}`;
    for (const d of v.data) {
      const fault = dataFault(d, f.name);
      if (fault) return fault;
    }
  }
  return null;
}

function dataFault(d: Data, name: string): string | null {
  const n = d.length;
  const off = d.offset;
  if (!Number.isSafeInteger(n) || n < 0 || !Number.isSafeInteger(off) || off < 0) return `column ${name}: length ${n} at offset ${off}`;
  if (d.nullCount > n) return `column ${name}: ${d.nullCount} nulls in ${n} rows`;
  const bitmapBytes = Math.ceil((off + n) / 8);
  if (d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length > 0 && d.nullBitmap.length < bitmapBytes) {
    return `column ${name}: validity bitmap of ${d.nullBitmap.length} bytes for ${off + n} rows`;
  }
  const t = d.type as DataType;
  if (t.typeId === Type.Utf8) {
    const offsets = d.valueOffsets as Int32Array | undefined;
    const values = d.values as Uint8Array | undefined;
    if (!offsets || offsets.length < off + n + 1) return `column ${name}: ${offsets?.length ?? 0} offsets for ${n} strings`;
    const bytes = values?.length ?? 0;
    let prev = offsets[off];
    if (prev < 0 || prev > bytes) return `column ${name}: string offset ${prev} outside its ${bytes}-byte buffer`;
    for (let i = off + 1; i <= off + n; i++) {
      const o = offsets[i];
      if (o < prev || o > bytes) return `column ${name}: string offset ${o} at row ${i - off} (previous ${prev}, buffer ${bytes} bytes)`;
      prev = o;
    }
  } else if (t.typeId === Type.Bool) {
    const bits = d.values as Uint8Array | undefined;
    if (!bits || bits.length < bitmapBytes) return `column ${name}: ${bits?.length ?? 0} bytes of booleans for ${off + n} rows`;
  } else if (t.typeId === Type.Int || t.typeId === Type.Float) {
    const values = d.values as ArrayLike<unknown> | undefined;
    if (!values || values.length < off + n) return `column ${name}: ${values?.length ?? 0} values for ${off + n} rows`;
  } else if (t.typeId === Type.Dictionary) {
    const keys = d.values as ArrayLike<number> | undefined;
    const dict = d.dictionary;
    if (!keys || keys.length < off + n) return `column ${name}: ${keys?.length ?? 0} dictionary keys for ${off + n} rows`;
    const size = dict?.length ?? 0;
    for (let i = off; i < off + n; i++) if (keys[i] < 0 || keys[i] >= size) return `column ${name}: dictionary key ${keys[i]} of ${size}`;
    for (const dd of dict?.data ?? []) {
      const fault = dataFault(dd, `${name} (dictionary)`);
      if (fault) return fault;
    }
  }
  return null;
}
