// The run directory (design.md#run-directory, contract): the engine writes it, the extension, the webviews and
// `credit-lens analyze` read it, often while a run is still writing. Every whole-file write therefore goes
// through a temporary file and a rename, so a reader sees the old file or the new one, never half of one.
import { credentialSecrets } from '../core/credentials';
import { IMPORT_FORMATS } from '../../protocol/import_formats';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, statSync, writeSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { MetricsRow, Phase, RunInfo } from '../../protocol';
import { z } from 'zod';
import { UserError } from '../core/errors';
import { diskFullError, isDiskFull, renameWithRetry, writeFileAtomic } from '../core/files';

export const RUN_JSON = 'run.json';
export const METRICS_JSONL = 'metrics.jsonl';
export const ENGINE_LOG = 'engine.log';
export const CONFIG_YAML = 'config.yaml';
export type TableKind = 'tokens' | 'episodes' | 'probes';

// ---- creating and finding runs ----

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** `yyyymmdd-hhmmss` in local time: the user reads it next to their clock. */
export function runTimestamp(now: Date): string {
  return `${now.getFullYear()}${pad(now.getMonth() + 1)}${pad(now.getDate())}-${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
}

/** Creates `base`, or `base-2`, `base-3`, … if taken: mkdir without `recursive` claims a name atomically. */
export function claimFolder(base: string): string {
  for (let k = 1; ; k++) {
    const dir = k === 1 ? base : `${base}-${k}`;
    try {
      mkdirSync(dir);
      return dir;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

/**
 * Create `<outputDir>/<name>-<yyyymmdd-hhmmss>/` with `tokens/`, `episodes/` and `checkpoints/`. Two runs started in
 * the same second (a sweep) get `-2`, `-3`, … (claimFolder), so two processes cannot both take the same one.
 */
export function createRunDir(outputDir: string, name: string, now = new Date()): string {
  if (!name || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw new UserError(`run name ${JSON.stringify(name)} cannot be used as a folder name (it must be non-empty and contain no / or \\)`);
  }
  mkdirSync(outputDir, { recursive: true });
  const dir = claimFolder(join(outputDir, `${name}-${runTimestamp(now)}`));
  for (const sub of ['tokens', 'episodes', 'checkpoints']) mkdirSync(join(dir, sub));
  return dir;
}

const SKIP_DIRS = new Set(['node_modules', '.git']);

/**
 * Every folder under `root` (itself included) that holds a `run.json`, sorted, to at most `maxDepth`
 * levels below root. It does not descend into a run (its tokens/ folder can hold thousands of files),
 * nor into hidden folders, node_modules or symlinked folders (which could loop).
 */
export function findRunDirs(root: string, maxDepth = 4): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (existsSync(join(dir, RUN_JSON))) {
      found.push(dir);
      return;
    }
    if (depth >= maxDepth) return;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // unreadable or vanished while we walked: not a run
    }
    for (const e of entries) {
      if (!e.isDirectory() || e.name.startsWith('.') || SKIP_DIRS.has(e.name)) continue;
      walk(join(dir, e.name), depth + 1);
    }
  };
  walk(root, 0);
  return found.sort();
}

export interface RunScan {
  dirs: string[];
  /** why the walk stopped early (entry or time budget, cancelled), or null when it saw everything */
  truncated: string | null;
}

/**
 * findRunDirs for a host that must stay responsive (the extension host): asynchronous reads, breadth first, and
 * a budget of directory entries and milliseconds, so `output_dir: /` or a huge `creditLens.runDirectories` entry
 * ends in a partial list and a reason instead of a frozen window. The same rules as findRunDirs otherwise.
 */
export async function findRunDirsAsync(
  root: string,
  opts: { maxDepth?: number; maxEntries?: number; budgetMs?: number; signal?: AbortSignal } = {},
): Promise<RunScan> {
  const maxDepth = opts.maxDepth ?? 4;
  const maxEntries = opts.maxEntries ?? 50_000;
  const deadline = Date.now() + (opts.budgetMs ?? 3000);
  const found: string[] = [];
  let entries = 0;
  let queue: string[] = [root];
  for (let depth = 0; queue.length; depth++) {
    const next: string[] = [];
    for (const dir of queue) {
      if (opts.signal?.aborted) return { dirs: found.sort(), truncated: 'cancelled' };
      if (Date.now() > deadline) return { dirs: found.sort(), truncated: `stopped after ${opts.budgetMs ?? 3000} ms in ${root}` };
      let list: import('node:fs').Dirent[];
      try {
        list = await readdir(dir, { withFileTypes: true });
      } catch {
        continue; // unreadable or vanished while we walked: not a run
      }
      entries += list.length;
      if (list.some((e) => e.name === RUN_JSON && e.isFile())) {
        found.push(dir);
        continue;
      }
      if (entries > maxEntries) return { dirs: found.sort(), truncated: `stopped after ${maxEntries} entries in ${root}` };
      if (depth >= maxDepth) continue;
      for (const e of list) if (e.isDirectory() && !e.name.startsWith('.') && !SKIP_DIRS.has(e.name)) next.push(join(dir, e.name));
    }
    queue = next;
  }
  return { dirs: found.sort(), truncated: null };
}

// ---- run.json ----

export function writeRunInfo(runDir: string, info: RunInfo): void {
  writeFileAtomic(join(runDir, RUN_JSON), JSON.stringify(info, null, 2) + '\n');
}

// run.json comes from this engine, older versions, other tools and bad merges; every reader (runs tree, pickers,
// sweep tables) polls it while a run writes it. It is checked against this schema, and a file that fails is
// "unreadable" with the first reason — listed as such, never a crash and never a half-filled record.
const optNum = z.number().finite().optional();
const runInfoSchema = z.looseObject({
  id: z.string().min(1),
  name: z.string(),
  status: z.enum(['running', 'completed', 'failed', 'stopped']),
  started: z.string(),
  ended: z.string().nullable().optional(),
  backend: z.string().optional(),
  backend_reason: z.string().optional(),
  /** backend webgpu: the adapter (GPUAdapterInfo's vendor, architecture, description; its buffer limits) */
  adapter: z.looseObject({ vendor: z.string(), architecture: z.string(), description: z.string(), software: z.boolean() }).optional(),
  engine_version: z.string().optional(),
  config_path: z.string().optional(),
  strategy: z.string().optional(),
  total_steps: optNum,
  last_step: optNum,
  pid: optNum,
  error: z.string().optional(),
  resumed_from: z.string().nullable().optional(),
  warm_start: z.string().optional(),
  imported: z
    .looseObject({
      source: z.string(),
      format: z.enum(IMPORT_FORMATS),
      model: z.string().nullable(),
      records: z.number().int().min(0),
      skipped: z.number().int().min(0),
    })
    .optional(),
});

export type RunInfoRead = { ok: true; info: RunInfo } | { ok: false; missing: boolean; reason: string };

/** run.json checked against its schema: the record, or why it cannot be used (missing, not JSON, a bad field). */
export function readRunInfoChecked(runDir: string): RunInfoRead {
  let text: string;
  try {
    text = readFileSync(join(runDir, RUN_JSON), 'utf8');
  } catch (e) {
    return {
      ok: false,
      missing: (e as NodeJS.ErrnoException).code === 'ENOENT',
      reason: `run.json cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
    };
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, missing: false, reason: text.trim() ? 'run.json is not valid JSON' : 'run.json is empty' };
  }
  const r = runInfoSchema.safeParse(v);
  if (!r.success) {
    const i = r.error.issues[0];
    const at = i.path.length ? i.path.join('.') : 'run.json';
    const got = i.path.reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<PropertyKey, unknown>)[k as PropertyKey] : undefined), v);
    return {
      ok: false,
      missing: false,
      reason: `${at}: ${i.code === 'invalid_value' || i.code === 'invalid_type' ? `got ${JSON.stringify(got) ?? 'nothing'}; ` : ''}${i.message}`,
    };
  }
  return { ok: true, info: r.data as RunInfo };
}

/** null when run.json is missing, unreadable or not a valid run record; readers poll it and must not crash. */
export function readRunInfo(runDir: string): RunInfo | null {
  const r = readRunInfoChecked(runDir);
  return r.ok ? r.info : null;
}

export function updateRunInfo(runDir: string, patch: Partial<RunInfo>): RunInfo {
  const cur = readRunInfo(runDir);
  if (!cur) throw new UserError(`cannot update ${join(runDir, RUN_JSON)}: it is missing or not valid JSON`);
  const next = { ...cur, ...patch };
  writeRunInfo(runDir, next);
  return next;
}

// ---- metrics.jsonl ----

/**
 * Append one JSON line. The line goes out in one write(2) on an O_APPEND descriptor, so a crash leaves
 * whole lines plus at most one torn last line. If the file already ends in a torn line (an earlier crash),
 * a newline is written first so the new row is not glued onto it.
 */
export function appendMetrics(runDir: string, row: MetricsRow): void {
  const path = join(runDir, METRICS_JSONL);
  const fd = openSync(path, 'a+');
  try {
    let line = JSON.stringify(row) + '\n';
    const size = fstatSync(fd).size;
    if (size > 0) {
      const last = Buffer.alloc(1);
      readSync(fd, last, 0, 1, size - 1);
      if (last[0] !== 0x0a) line = '\n' + line;
    }
    writeSync(fd, line);
  } catch (e) {
    throw diskFullError(e, path);
  } finally {
    closeSync(fd);
  }
}

const PHASES = new Set(['sft', 'grpo', 'eval']);

/**
 * A metrics row as readers may use it: an integer step and a known phase, else the row is dropped; a value that is
 * neither a finite number nor a string (a null reward from another tool, NaN written as null) is dropped from the
 * row, so charts and tables see "no value" rather than a crash.
 */
export function sanitizeMetricsRow(v: unknown): MetricsRow | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const r = v as Record<string, unknown>;
  if (typeof r.step !== 'number' || !Number.isInteger(r.step) || typeof r.phase !== 'string' || !PHASES.has(r.phase)) return null;
  const out: MetricsRow = { step: r.step, phase: r.phase as Phase };
  for (const [k, x] of Object.entries(r)) {
    if (k === 'step' || k === 'phase' || k === '__proto__') continue;
    if ((typeof x === 'number' && Number.isFinite(x)) || typeof x === 'string') out[k] = x;
  }
  return out;
}

function parseMetricsLines(text: string): { row: MetricsRow; line: string }[] {
  const out: { row: MetricsRow; line: string }[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const row = sanitizeMetricsRow(JSON.parse(line));
      if (row) out.push({ row, line });
    } catch {
      // a torn line from a crash mid-write: skip it, the rows around it are whole
    }
  }
  return out;
}

/** Every whole row of metrics.jsonl in file order; [] when there is none yet. */
export function readMetrics(runDir: string): MetricsRow[] {
  let text: string;
  try {
    text = readFileSync(join(runDir, METRICS_JSONL), 'utf8');
  } catch {
    return [];
  }
  return parseMetricsLines(text).map((x) => x.row);
}

// ---- per-step tables ----

export function stepFile(runDir: string, kind: TableKind, step: number): string {
  return join(runDir, kind, `step-${pad(step, 6)}.arrow`);
}

const STEP_FILE = /^step-(\d+)\.arrow$/;
/** A file keyed by a step: a table, a probe's record, a kept policy. */
const STEP_KEYED = /^step-(\d+)\.(arrow|json|safetensors)$/;

/** Steps that have a complete table of `kind`, ascending (`.tmp-*` files of a write in progress are not). */
export function listLoggedSteps(runDir: string, kind: TableKind = 'tokens'): number[] {
  let names: string[];
  try {
    names = readdirSync(join(runDir, kind));
  } catch {
    return [];
  }
  const steps: number[] = [];
  for (const n of names) {
    const m = STEP_FILE.exec(n);
    if (m) steps.push(Number(m[1]));
  }
  return steps.sort((a, b) => a - b);
}

/** Where a resume puts the tables of the trajectory it does not continue. */
/**
 * The identity of a run's step tables as they are on disk: every logged step's token, episode and probe table by size,
 * modification time and inode. A reader that keeps tables in memory (Browse Rollouts' worker) reloads when it changes:
 * a run still training appends steps, a probe rewrites its table, and a restart or a resume that set steps aside
 * rewrites tables under the same step numbers, which a key of step numbers alone would not see.
 */
export function tablesIdentity(runDir: string): string {
  let key = '';
  for (const kind of ['tokens', 'episodes', 'probes'] as const)
    for (const s of listLoggedSteps(runDir, kind)) {
      try {
        const st = statSync(stepFile(runDir, kind, s));
        key += `${kind}/${s}:${st.size}:${st.mtimeMs}:${st.ino};`;
      } catch {
        key += `${kind}/${s}:gone;`;
      }
    }
  return key;
}

export const ABANDONED_DIR = 'abandoned';

/**
 * A restart in place of a run that died before its first checkpoint: every step-keyed file, metrics.jsonl and the
 * TensorBoard events go to
 * `<run>/abandoned/<ts>/`, so the new attempt starts from an empty run directory. Returns the folder, or null when
 * there was nothing to move.
 */
export function setAsideForRestart(runDir: string, now = new Date()): string | null {
  let dest = setAsideTablesAfter(runDir, { tables: -1, eval: -1 }, now);
  if (existsSync(join(runDir, METRICS_JSONL))) {
    if (!dest) {
      mkdirSync(join(runDir, ABANDONED_DIR), { recursive: true });
      dest = claimFolder(join(runDir, ABANDONED_DIR, runTimestamp(now)));
    }
    renameWithRetry(join(runDir, METRICS_JSONL), join(dest, METRICS_JSONL));
    // the dead attempt's TensorBoard events would be read as this run's first steps
    if (existsSync(join(runDir, 'tensorboard'))) renameWithRetry(join(runDir, 'tensorboard'), join(dest, 'tensorboard'));
  }
  return dest;
}

/**
 * A resume continues from a checkpoint; everything keyed by a step after it (the tokens, episodes and eval tables, the
 * probes of those steps and the policies kept for probing them) belongs to a trajectory that will not be continued, and
 * would otherwise be read with the new one's (analyze and compare would mix two trajectories, and a probe's δ would be
 * painted on the new trajectory's tokens). They are moved to
 * `<run>/abandoned/<ts>/<kind>/`, one rename per file: nothing is deleted, and a resume interrupted while moving moves
 * the rest the next time. `after.tables` / `after.eval`: the last step whose tables the checkpoint covers (-1: none).
 * Returns the folder they went to, or null when nothing was past the checkpoint.
 */
export function setAsideTablesAfter(runDir: string, after: { tables: number; eval: number }, now = new Date()): string | null {
  const moves: [string, string][] = [];
  for (const kind of ['tokens', 'episodes', 'eval', 'probes', 'policies'] as const) {
    const last = kind === 'eval' ? after.eval : after.tables;
    let names: string[];
    try {
      names = readdirSync(join(runDir, kind));
    } catch {
      continue;
    }
    for (const n of names) {
      const m = STEP_KEYED.exec(n);
      if (m && Number(m[1]) > last) moves.push([kind, n]);
    }
  }
  if (!moves.length) return null;
  mkdirSync(join(runDir, ABANDONED_DIR), { recursive: true });
  const dest = claimFolder(join(runDir, ABANDONED_DIR, runTimestamp(now)));
  for (const [kind, n] of moves) {
    mkdirSync(join(dest, kind), { recursive: true });
    renameWithRetry(join(runDir, kind, n), join(dest, kind, n));
  }
  return dest;
}

// ---- engine.log ----

/**
 * Replace every occurrence of each secret with `***`. Longer secrets go first so that a secret containing
 * a shorter one is hidden whole. Empty strings are ignored (an unset variable is not a secret).
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  const sorted = secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
  for (const s of sorted) text = text.split(s).join('***');
  return text;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export interface EngineLog {
  write(level: LogLevel, msg: string): void;
  close(): void;
}

/**
 * Append-only `<run>/engine.log`: `<ISO time> <LEVEL> <message>`, continuation lines indented so every
 * record starts with its time. Writes are synchronous so the last lines before a crash are on disk.
 * Callers must not log secrets; `secrets` is a second line of defence (e.g. the CAL oracle's API key).
 * Writes after close() are dropped: late log calls during shutdown must not throw.
 */
export function openEngineLog(runDir: string, opts: { secrets?: readonly string[] } = {}): EngineLog {
  let fd: number | null = openSync(join(runDir, ENGINE_LOG), 'a');
  const secrets = [...(opts.secrets ?? []), ...credentialSecrets()];
  return {
    write(level, msg) {
      if (fd === null) return;
      const text = secrets.length ? redactSecrets(msg, secrets) : msg;
      try {
        writeSync(fd, `${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} ${text.replace(/\r?\n/g, '\n    ')}\n`);
      } catch (e) {
        // a full disk must not turn every log line into a crash: the message still reaches the reporter
        if (!isDiskFull(e)) throw e;
      }
    },
    close() {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}
