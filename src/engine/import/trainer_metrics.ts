// The external trainer's own metrics, imported beside its rollouts so the dashboard charts its curves: veRL's `file`
// logger (VERL_FILE_LOGGER_PATH: one `{"step": N, "data": {…}}` line per step) and prime-rl's metrics.jsonl (its
// FileMonitor: `{"step": N, "time": t, …}`). Read incrementally: a follow reads what was appended since the last call.
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { MetricsRow } from '../../protocol';
import { UserError } from '../core/errors';
import type { ImportFormat } from './formats';

/**
 * The trainer's names for what our rows call loss, KL, gradient norm, clip fraction and step time (veRL's documented
 * metric names). Rewards, success, lengths and entropy are not mapped: the import computes them from the rollouts.
 */
const OURS: Record<string, string> = {
  'actor/pg_loss': 'loss',
  'actor/kl_loss': 'kl',
  'actor/grad_norm': 'grad_norm',
  'actor/pg_clipfrac': 'clip_frac',
  'timing_s/step': 'step_time_s',
};
const NOT_METRICS = new Set(['step', 'time', 'elapsed_seconds', 'data', 'phase']);

/**
 * One logger line as a metrics row: the mapped values under our names, and every finite number under its own name
 * behind the trainer's (`verl/critic/rewards/mean`, `prime/loss/mean`), so nothing collides with the import's own
 * columns and the dashboard charts each one. null for a line that is not a step's metrics.
 */
export function trainerMetricsRow(v: unknown, source: ImportFormat): MetricsRow | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o.step !== 'number' || !Number.isInteger(o.step) || o.step < 0) return null;
  const values = typeof o.data === 'object' && o.data !== null && !Array.isArray(o.data) ? (o.data as Record<string, unknown>) : o;
  const row: MetricsRow = { step: o.step, phase: 'grpo' };
  let n = 0;
  for (const [k, x] of Object.entries(values)) {
    if (NOT_METRICS.has(k) || typeof x !== 'number' || !Number.isFinite(x)) continue;
    row[`${source}/${k}`] = x;
    if (OURS[k]) row[OURS[k]] = x;
    n++;
  }
  return n ? row : null;
}

/**
 * Where the trainer wrote its metrics, when nobody said: `metrics.jsonl` in the source folder or beside it (prime-rl's
 * output folder holds it beside rollouts/ and token_exports/), if its first line is a trainer's (a step, no phase: not
 * a Credit Lens run's own).
 */
export function findTrainerMetrics(source: string): string | null {
  for (const p of [join(source, 'metrics.jsonl'), join(dirname(source), 'metrics.jsonl')]) {
    if (!existsSync(p)) continue;
    const first = firstLine(p);
    if (first && typeof first.step === 'number' && !('phase' in first)) return p;
  }
  return null;
}

/** The first line of a file as a JSON object (from its first 64 KiB), or null. */
function firstLine(path: string): Record<string, unknown> | null {
  try {
    const fd = openSync(path, 'r');
    try {
      const buf = Buffer.alloc(64 * 1024);
      const n = readSync(fd, buf, 0, buf.length, 0);
      return JSON.parse(buf.subarray(0, n).toString('utf8').split('\n')[0]) as Record<string, unknown>;
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}

/** A logger file read as it grows: each call returns the rows of the whole lines appended since the last. */
export class TrainerMetrics {
  private offset = 0;
  private partial = '';

  constructor(
    readonly path: string,
    readonly source: ImportFormat,
  ) {}

  /** The rows appended since the last call (lines that are not JSON objects with a step are skipped). */
  read(): MetricsRow[] {
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new UserError(`--metrics ${this.path}: ${(e as Error).message}`);
    }
    let text: string;
    try {
      const size = fstatSync(fd).size;
      // a logger that started again (the file truncated) is read from its start
      if (size < this.offset) {
        this.offset = 0;
        this.partial = '';
      }
      const buf = Buffer.alloc(size - this.offset);
      const n = buf.length ? readSync(fd, buf, 0, buf.length, this.offset) : 0;
      this.offset += n;
      text = this.partial + buf.subarray(0, n).toString('utf8');
    } finally {
      closeSync(fd);
    }
    const end = text.lastIndexOf('\n') + 1;
    this.partial = text.slice(end);
    const rows: MetricsRow[] = [];
    for (const line of text.slice(0, end).split('\n')) {
      if (!line.trim()) continue;
      try {
        const row = trainerMetricsRow(JSON.parse(line), this.source);
        if (row) rows.push(row);
      } catch {
        // a line that is not JSON: the logger's, not ours to report per line
      }
    }
    return rows;
  }
}
