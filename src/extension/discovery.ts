// Where runs are: every workspace config's output_dir (resolved against the config's folder, design.md#config)
// plus the folders in `creditLens.runDirectories`, searched for run directories (a folder with run.json).
// A run trained elsewhere and copied into one of those folders is found like any other.
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import * as vscode from 'vscode';
import { parse } from 'yaml';
import { readSettings } from './vscode_settings';
import type { RunInfo } from '../protocol/index';
import type { SlurmSweepJson } from '../protocol/slurm';
import { isLocalSweepJson, LOCAL_SWEEP_JSON, type LocalSweepJson } from '../protocol/sweep_record';
import { findRunDirsAsync, readRunInfoChecked } from '../engine/rundir/rundir';
import { processAlive } from '../engine/rundir/run_lock';

export const CONFIG_GLOB = '**/*.credit.yaml';
const EXCLUDE_GLOB = '{**/node_modules/**,**/.git/**}';

/** The config's `output_dir`, absolute; design.md#config's default `runs` when the file does not set one. */
export function outputDirOf(configPath: string, text: string): string {
  let dir = 'runs';
  try {
    const doc = parse(text) as { output_dir?: unknown } | null;
    if (doc && typeof doc.output_dir === 'string' && doc.output_dir.trim()) dir = doc.output_dir;
  } catch {
    // a config mid-edit that does not parse still has its runs in the default place
  }
  return isAbsolute(dir) ? dir : resolve(configPath, '..', dir);
}

export async function findConfigs(): Promise<string[]> {
  const uris = await vscode.workspace.findFiles(CONFIG_GLOB, EXCLUDE_GLOB);
  return uris
    .filter((u) => u.scheme === 'file')
    .map((u) => u.fsPath)
    .sort();
}

export function runRoots(configs: readonly string[]): string[] {
  const roots = new Set<string>();
  for (const c of configs) {
    try {
      roots.add(outputDirOf(c, readFileSync(c, 'utf8')));
    } catch {
      // deleted between findFiles and here
    }
  }
  const extra = readSettings().runDirectories;
  const base = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  for (const d of extra) {
    if (isAbsolute(d)) roots.add(d);
    else if (base) roots.add(join(base, d));
  }
  return [...roots].sort();
}

export interface FoundRun {
  runDir: string;
  info: RunInfo;
}

/** A folder with a run.json that cannot be used (another tool's, an older version's, a bad merge), and why. */
export interface UnreadableRun {
  runDir: string;
  reason: string;
}

export interface RunScanResult {
  runs: FoundRun[];
  unreadable: UnreadableRun[];
  truncated: string[];
}

/**
 * Every run under the roots, walked asynchronously with a budget per root, so `output_dir: /` or a huge
 * `creditLens.runDirectories` entry ends in a partial list and a note instead of a frozen extension host. In an
 * untrusted workspace only folders inside the workspace are walked.
 */
export async function scanRuns(roots: readonly string[]): Promise<RunScanResult> {
  const seen = new Set<string>();
  const out: RunScanResult = { runs: [], unreadable: [], truncated: [] };
  const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
  const inside = (p: string) => folders.some((f) => p === f || p.startsWith(f.endsWith(sep) ? f : f + sep));
  for (const root of roots) {
    if (!vscode.workspace.isTrusted && !inside(root)) {
      out.truncated.push(`${root} is outside this untrusted workspace; not searched`);
      continue;
    }
    const scan = await findRunDirsAsync(root);
    if (scan.truncated) out.truncated.push(scan.truncated);
    for (const runDir of scan.dirs) {
      if (seen.has(runDir)) continue;
      seen.add(runDir);
      const r = readRunInfoChecked(runDir);
      if (r.ok) out.runs.push({ runDir, info: r.info });
      else if (!r.missing) out.unreadable.push({ runDir, reason: r.reason });
    }
  }
  return out;
}

export async function findRuns(roots: readonly string[]): Promise<FoundRun[]> {
  return (await scanRuns(roots)).runs;
}

/** Whether the process that wrote a `running` run.json is still alive here (false: it died with its window). */
export function engineAlive(info: RunInfo): boolean {
  return !info.pid || processAlive(info.pid);
}

/** A sweep folder under a run root, started from the command line or another window: its record on disk. */
export type FoundSweep = { sweepDir: string; local: LocalSweepJson } | { sweepDir: string; slurm: SlurmSweepJson };

/**
 * The sweep folders directly under the roots (`sweep-<ts>/`): a local sweep's `sweep.json` or a Slurm sweep's
 * `slurm/sweep.json`. A record that does not parse is skipped: it is not a sweep this version can show.
 */
export async function findSweeps(roots: readonly string[]): Promise<FoundSweep[]> {
  const out: FoundSweep[] = [];
  for (const root of roots) {
    let names: string[];
    try {
      names = (await readdir(root, { withFileTypes: true })).filter((d) => d.isDirectory() && d.name.startsWith('sweep-')).map((d) => d.name);
    } catch {
      continue; // no runs yet
    }
    for (const name of names.sort()) {
      const sweepDir = join(root, name);
      const local = readLocalSweep(sweepDir);
      if (local) {
        out.push({ sweepDir, local });
        continue;
      }
      const slurm = readJson(join(sweepDir, 'slurm', 'sweep.json')) as SlurmSweepJson | null;
      if (slurm?.kind === 'credit-lens-slurm-sweep' && Array.isArray(slurm.tasks)) {
        const move = rebase(slurm.sweep_dir, sweepDir);
        out.push({
          sweepDir,
          slurm: { ...slurm, sweep_dir: sweepDir, tasks: slurm.tasks.map((t) => ({ ...t, run_dir: move(t.run_dir), config: move(t.config) })) },
        });
      }
    }
  }
  return out;
}

/**
 * A terminal sweep's record, or null. A sweep folder copied or moved with its runs (from a cluster, into a test
 * fixture) names the folders where they were made: paths under the output_dir it was written in are read as under
 * the one it is in now.
 */
export function readLocalSweep(sweepDir: string): LocalSweepJson | null {
  const j = readJson(join(sweepDir, LOCAL_SWEEP_JSON));
  if (!isLocalSweepJson(j)) return null;
  const move = rebase(j.sweep_dir, sweepDir);
  return { ...j, sweep_dir: sweepDir, tasks: j.tasks.map((t) => ({ ...t, run_dir: t.run_dir === null ? null : move(t.run_dir) })) };
}

function rebase(recorded: string, actual: string): (p: string) => string {
  const from = dirname(recorded) + sep;
  const to = dirname(actual) + sep;
  return (p) => (from !== to && p.startsWith(from) ? to + p.slice(from.length) : p);
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return null;
  }
}
