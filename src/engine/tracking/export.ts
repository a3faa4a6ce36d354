// `credit-lens export tensorboard`: the event files a run would have written as it went, from what its directory
// holds (metrics.jsonl and the token tables), for runs made before runs wrote them.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { readTokenTable } from '../rundir/arrow_tables';
import { listLoggedSteps, readMetrics, readRunInfoChecked, stepFile } from '../rundir/rundir';
import { acquireRunLock, RunLockedError } from '../rundir/run_lock';
import type { RunInfo } from '../../protocol';
import { RunTrackers, TENSORBOARD_DIR } from './trackers';

export interface ExportResult {
  runDir: string;
  rows: number;
  histogramSteps: number;
  files: string[];
}

/** Event files under <run>/tensorboard/ (its sft/ folder included), by path. */
function eventFiles(runDir: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names.sort()) {
      if (n.includes('tfevents')) out.push(join(dir, n));
      else if (n === 'sft') walk(join(dir, n));
    }
  };
  walk(join(runDir, TENSORBOARD_DIR));
  return out;
}

/**
 * Writes <run>/tensorboard/ from the run's metrics.jsonl and token tables: every row's scalars at its step, and the
 * histograms of each logged step's tokens just before that step's row. Wall times are the run's start plus the steps'
 * own step_time_s, so TensorBoard's relative axis reads as the run went. A run that already has event files is refused
 * unless `replace`, which writes them again.
 */
export function exportTensorboard(runDir: string, o: { replace?: boolean } = {}): ExportResult {
  const checked = readRunInfoChecked(runDir);
  if (!checked.ok) throw new UserError(`export tensorboard ${runDir}: not a run directory (${checked.reason})`);
  // a run still training (or importing) has its event files open: deleting them would lose every later step to
  // TensorBoard, and writing beside them would give each tag two lines
  let release: () => void;
  try {
    release = acquireRunLock(runDir);
  } catch (e) {
    if (!(e instanceof RunLockedError)) throw e;
    throw new UserError(
      `export tensorboard ${runDir}: the run is still running, and its trainer writes its event files (${e.message}); export it once it has stopped`,
    );
  }
  try {
    return writeEvents(runDir, checked.info, o);
  } finally {
    release();
  }
}

function writeEvents(runDir: string, info: RunInfo, o: { replace?: boolean }): ExportResult {
  const existing = eventFiles(runDir);
  if (existing.length && !o.replace)
    throw new UserError(`export tensorboard ${runDir}: the run already has event files (${existing.length}, e.g. ${existing[0]}); --replace writes them again`);
  if (existing.length) rmSync(join(runDir, TENSORBOARD_DIR), { recursive: true, force: true });
  const rows = readMetrics(runDir);
  const tableSteps = new Set(listLoggedSteps(runDir, 'tokens'));
  const trackers = new RunTrackers({ runDir, runName: info.name, logging: { tensorboard: true }, log: () => {} });
  const started = Date.parse(info.started);
  let clock = Number.isFinite(started) ? started / 1000 : Date.now() / 1000;
  let histogramSteps = 0;
  try {
    for (const row of rows) {
      if (typeof row.step_time_s === 'number') clock += row.step_time_s;
      if (row.phase === 'grpo' && tableSteps.has(row.step)) {
        const t = readTokenTable(stepFile(runDir, 'tokens', row.step));
        trackers.tokens(row.step, t, clock);
        tableSteps.delete(row.step);
        histogramSteps++;
      }
      trackers.metrics(row, clock);
    }
  } finally {
    trackers.close();
  }
  return { runDir, rows: rows.length, histogramSteps, files: eventFiles(runDir).filter((f) => existsSync(f)) };
}
