// Rollouts logged by other trainers (`credit-lens import`), read into ImportedRecords: the source's files listed in
// their order, each file's rows read (JSONL, a W&B table, CSV), the format detected, and each row made records by its
// format's reader (readers/: veRL, TRL, prime-rl, plain JSONL, one file each). A record that cannot be read is reported
// with its file and line and skipped, and the reading goes on.
import { readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { UserError } from '../core/errors';
import { readCsv } from './csv';
import { PendingRowError, RowError, fileStep, isObj, type ImportedRecord, type Obj } from './fields';
export type { ImportedRecord, ImportedTokens } from './fields';
import { IMPORT_READERS, importReader } from './readers/catalog';
import { PRIME_EXTRA_COLUMNS, PRIME_TRACES } from './readers/prime';
import { PRIME_STREAM } from './readers/prime_stream';
import { dataExtension, readDataText, withoutSealedTwins } from './compressed';

import { IMPORT_FORMATS, type ImportFormat } from '../../protocol/import_formats';
export { IMPORT_FORMATS, type ImportFormat };
export { PRIME_EXTRA_COLUMNS, fileStep };

export interface ImportProblem {
  file: string;
  line: number;
  reason: string;
  /** the row may become whole (PendingRowError): a follow reads it again rather than skipping it */
  pending?: boolean;
}

export interface ReadResult {
  format: ImportFormat;
  files: string[];
  records: ImportedRecord[];
  problems: ImportProblem[];
}

// .jsonl.zst: prime-rl's sealed trace-stream chunks (compressed.ts)
// .parquet: TRL's GRPOTrainer (1.x) writes its completions table as <output_dir>/completions/completions_NNNNN.parquet
const DATA_EXT = new Set(['.jsonl', '.json', '.csv', '.parquet']);
const MAX_FILES = 100_000;

/** Natural order: step_2 before step_10, 9.jsonl before 10.jsonl. */
function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, undefined, { numeric: true, sensitivity: 'base' });
}

const relativeTo = (root: string, f: string) => relative(root, f) || f;

/** The data files of a file or folder (recursively; hidden folders skipped), in natural order. */
export function listImportFiles(source: string, problems?: ImportProblem[]): string[] {
  let st;
  try {
    st = statSync(source);
  } catch (e) {
    throw new UserError(`import: cannot read ${source}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or folder' : (e as Error).message}`);
  }
  if (st.isFile()) return [source];
  let out: string[] = [];
  // links are followed (a folder of links to each run's output is common); a folder is walked once, by its real path,
  // so a link back up the tree ends there
  const seen = new Set<string>([realpathSync(source)]);
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((x, y) => naturalCompare(x.name, y.name))) {
      if (e.name.startsWith('.')) continue;
      const p = join(dir, e.name);
      let isDir = e.isDirectory();
      let isFile = e.isFile();
      if (e.isSymbolicLink()) {
        const target = statSync(p, { throwIfNoEntry: false });
        if (!target) {
          problems?.push({ file: relativeTo(source, p), line: 0, reason: 'a link whose target does not exist' });
          continue;
        }
        isDir = target.isDirectory();
        isFile = target.isFile();
      }
      if (isDir) {
        const real = realpathSync(p);
        if (seen.has(real)) {
          if (e.isSymbolicLink()) problems?.push({ file: relativeTo(source, p), line: 0, reason: `a link to a folder already read (${real}): read once` });
          continue;
        }
        seen.add(real);
        walk(p);
      } else if (isFile && DATA_EXT.has(dataExtension(e.name))) {
        const real = realpathSync(p);
        if (seen.has(real)) {
          problems?.push({ file: relativeTo(source, p), line: 0, reason: `a link to a file already read (${real}): read once` });
          continue;
        }
        seen.add(real);
        out.push(p);
      }
      if (out.length > MAX_FILES) throw new UserError(`import: more than ${MAX_FILES} data files under ${source}; point at the rollout folder itself`);
    }
  };
  walk(source);
  out = withoutSealedTwins(out);
  if (!out.length) throw new UserError(`import: no .jsonl, .json, .csv or .parquet files under ${source}`);
  // A prime-rl output folder also holds logs and configs: when it has token exports, those are the rollouts.
  const exports = out.filter((f) => /(^|[/\\])token_exports[/\\]/.test(relativeTo(source, f)));
  if (exports.length) return exports;
  const traces = primeTrainTraces(out.filter((f) => PRIME_TRACES.test(relativeTo(source, f))));
  if (traces.length) return traces;
  // prime-rl's trace stream: its stream files are the rollouts (the annotations are read with them, the indexes never)
  const stream = out.filter((f) => PRIME_STREAM.test(relativeTo(source, f)));
  if (stream.length) return stream;
  // a trainer's metrics log beside its rollouts (prime-rl's output folder, a veRL file logger's) is not rollouts
  const data = out.filter((f) => !isTrainerMetricsFile(f));
  return data.length ? data : out;
}

/** `metrics.jsonl`: where prime-rl (and a veRL file logger pointed there) logs a step's metrics, never rollouts. */
export const isTrainerMetricsFile = (f: string) => basename(f) === 'metrics.jsonl';

/**
 * The training episodes of each step: the `effective` subset (the episodes the step trained on) where the step has
 * one, else `all`; eval episodes are not training steps.
 */
function primeTrainTraces(files: string[]): string[] {
  const byStep = new Map<string, string[]>();
  for (const f of files) {
    const m = PRIME_TRACES.exec(f);
    if (!m || m[2] !== 'train') continue;
    const stepDir = f.replace(/[/\\](train|eval)[/\\](all|effective)[/\\]traces\.jsonl$/, '');
    byStep.set(stepDir, [...(byStep.get(stepDir) ?? []), f]);
  }
  return [...byStep.values()].map((fs) => fs.find((f) => /[/\\]effective[/\\]/.test(f)) ?? fs[0]).sort(naturalCompare);
}

export interface Row {
  line: number;
  value: Obj;
}

/** A Parquet value as JSON would hold it: int64 as a number, lists and structs (a conversational prompt) as arrays and objects. */
function plainValue(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (v && typeof v === 'object') {
    const o = v as { toArray?: () => unknown; toJSON?: () => unknown; [Symbol.iterator]?: unknown };
    if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<number | bigint>, plainValue);
    if (typeof o.toJSON === 'function') {
      const j = o.toJSON();
      if (Array.isArray(j)) return j.map(plainValue);
      if (j && typeof j === 'object') return Object.fromEntries(Object.entries(j).map(([k, x]) => [k, plainValue(x)]));
      return j;
    }
  }
  return v;
}

/** A Parquet file's rows (through parquet-wasm and Arrow); an unreadable file is one problem. */
async function parquetRows(path: string, shown: string, problems: ImportProblem[]): Promise<Row[]> {
  const { readParquetTable } = await import('../importance/parquet');
  try {
    const table = await readParquetTable(path);
    const names = table.schema.fields.map((f) => f.name);
    const rows: Row[] = [];
    for (let i = 0; i < table.numRows; i++) {
      const r = table.get(i) as Record<string, unknown> | null;
      if (r) rows.push({ line: i + 1, value: Object.fromEntries(names.map((n) => [n, plainValue(r[n])])) });
    }
    return rows;
  } catch (e) {
    problems.push({ file: shown, line: 0, reason: (e as Error).message });
    return [];
  }
}

/** The rows of a data file: JSONL lines, a W&B table's rows, or CSV rows (header → keys). Bad lines are problems. */
export async function readRows(path: string, shown: string, problems: ImportProblem[], o: { wholeLinesOnly?: boolean } = {}): Promise<Row[]> {
  const ext = dataExtension(path);
  if (ext === '.parquet') return parquetRows(path, shown, problems);
  if (ext === '.csv') {
    // streamed from the file: a CSV export can be larger than the text a string may hold
    const { rows, error } = await readCsv(path);
    if (error) problems.push({ file: shown, line: error.line, reason: error.reason });
    if (!rows.length) return [];
    const header = rows[0].cells;
    return rows.slice(1).map((r) => ({ line: r.line, value: Object.fromEntries(header.map((h, i) => [h, csvValue(r.cells[i] ?? '')])) }));
  }
  let text: string;
  try {
    text = readDataText(path);
  } catch (e) {
    problems.push({ file: shown, line: 0, reason: `cannot read the file: ${(e as Error).message}` });
    return [];
  }
  if (ext === '.json') {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      problems.push({ file: shown, line: 1, reason: `not valid JSON: ${(e as Error).message}` });
      return [];
    }
    const t = v as Obj;
    if (t && Array.isArray(t.columns) && Array.isArray(t.data)) {
      const cols = t.columns.map(String);
      return (t.data as unknown[]).flatMap((row, i): Row[] => {
        if (!Array.isArray(row)) {
          problems.push({ file: shown, line: i + 1, reason: 'table row is not a list' });
          return [];
        }
        return [{ line: i + 1, value: Object.fromEntries(cols.map((c, k) => [c, row[k]])) }];
      });
    }
    if (Array.isArray(v)) {
      return v.flatMap((x, i): Row[] =>
        isObj(x) ? [{ line: i + 1, value: x }] : (problems.push({ file: shown, line: i + 1, reason: 'array item is not an object' }), []),
      );
    }
    problems.push({ file: shown, line: 1, reason: 'a .json file must be a W&B table ({"columns": [...], "data": [[...]]}) or an array of objects' });
    return [];
  }
  // a file still being written (import --follow): its last line counts once it ends
  if (o.wholeLinesOnly) text = text.slice(0, text.lastIndexOf('\n') + 1);
  const rows: Row[] = [];
  let line = 0;
  for (const raw of text.split('\n')) {
    line++;
    const s = raw.trim();
    if (!s) continue;
    let v: unknown;
    try {
      v = JSON.parse(s);
    } catch (e) {
      problems.push({ file: shown, line, reason: `not valid JSON (${(e as Error).message})` });
      continue;
    }
    if (!isObj(v)) {
      problems.push({ file: shown, line, reason: 'not a JSON object' });
      continue;
    }
    rows.push({ line, value: v });
  }
  return rows;
}

/** A CSV cell: numbers and booleans as such, the rest as text. */
function csvValue(s: string): unknown {
  if (s === '') return null;
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) return Number(s);
  if (s === 'true' || s === 'True') return true;
  if (s === 'false' || s === 'False') return false;
  return s;
}

/** The format of a source, from its paths and its first readable row: the first reader (in detection order) that claims it. */
export function detectFormat(files: string[], first: Obj | null): ImportFormat {
  const reader = IMPORT_READERS.find((r) => r.detect(files, first));
  if (reader) return reader.id;
  const keys = first ? Object.keys(first).slice(0, 8).join(', ') : 'no readable rows';
  throw new UserError(`import: cannot tell the format (first row has ${keys}); pass --format ${IMPORT_FORMATS.join('|')}`);
}

/** Read every record of `source` (file or folder) in `format` ('auto': detected). */
export async function readImport(source: string, format: ImportFormat | 'auto' = 'auto'): Promise<ReadResult> {
  const problems: ImportProblem[] = [];
  const files = listImportFiles(source, problems);
  const root = statSync(source).isDirectory() ? source : join(source, '..');
  const records: ImportedRecord[] = [];
  let fmt: ImportFormat | null = format === 'auto' ? null : format;
  for (const f of files) {
    const shown = relative(root, f) || f;
    const rows = await readRows(f, shown, problems);
    if (!rows.length) continue; // an empty file (a step that logged nothing) tells nothing about the format
    if (!fmt) fmt = detectFormat(files, rows[0].value);
    records.push(...recordsOf(rows, fmt, f, shown, problems));
  }
  if (!fmt) fmt = detectFormat(files, null);
  return { format: fmt, files, records, problems };
}

/** A file's rows as records of `fmt`; a row that is not one is a problem naming the file and line. */
export function recordsOf(rows: Row[], fmt: ImportFormat, path: string, shown: string, problems: ImportProblem[]): ImportedRecord[] {
  const records: ImportedRecord[] = [];
  const reader = importReader(fmt);
  const read = reader.forFile?.(path) ?? ((o: Obj) => reader.records(o, path));
  for (const r of rows) {
    try {
      const recs = read(r.value);
      for (const rec of recs) records.push({ file: shown, line: r.line, ...rec });
    } catch (e) {
      if (!(e instanceof RowError)) throw e;
      problems.push({ file: shown, line: r.line, reason: e.message, ...(e instanceof PendingRowError ? { pending: true } : {}) });
    }
  }
  return records;
}
