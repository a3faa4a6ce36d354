// Asking for runs when a command was called bare: a QuickPick of every run directory the Runs view knows,
// newest first, with its strategy, status (live when this window trains it), progress and eval results.
import { basename } from 'node:path';
import { WARM_START_DIR } from '../protocol/index';
import * as vscode from 'vscode';
import { findConfigs, findRuns, runRoots } from './discovery';
import { percent, summarizeMetrics } from './metrics_summary';
import { readMetrics } from '../engine/rundir/rundir';
import { formatFixed } from '../protocol/number_format';

export interface RunPickItem extends vscode.QuickPickItem {
  runDir: string;
}

export interface PickOptions {
  /** Runs not to offer (those already in a comparison, the run itself). */
  exclude?: Iterable<string>;
  /** Only runs this accepts; `status` is the live status when `statusOf` knows one, else run.json's. */
  filter?: (runDir: string, status: string) => boolean;
  /** The live status of a run this window trains (RunManager.statusOf). */
  statusOf?: (runDir: string) => string | null;
}

async function items(o: PickOptions): Promise<RunPickItem[]> {
  const exclude = new Set(o.exclude ?? []);
  const found = (await findRuns(runRoots(await findConfigs())))
    .map((r) => ({ ...r, status: o.statusOf?.(r.runDir) ?? r.info.status }))
    // a shared SFT warm start is no run to compare, import into or analyse
    .filter((r) => !exclude.has(r.runDir) && !WARM_START_DIR.test(r.runDir) && (!o.filter || o.filter(r.runDir, r.status)))
    .sort((a, b) => b.info.started.localeCompare(a.info.started));
  return found.map((r) => {
    const s = summarizeMetrics(readMetrics(r.runDir));
    return {
      label: basename(r.runDir),
      description: `${r.info.strategy ?? '?'} · ${r.status} · step ${r.info.last_step ?? 0}/${r.info.total_steps ?? '?'}`,
      detail: `final eval ${percent(s.finalEvalSuccess, 1)} · best eval ${percent(s.bestEvalSuccess, 1)} · latest reward ${formatFixed(s.latestReward, 3)}`,
      runDir: r.runDir,
    };
  });
}

/** Several runs (checkboxes); [] when cancelled or fewer than `minimum` are there to pick. */
export async function pickRunDirs(title: string, o: PickOptions & { minimum?: number } = {}): Promise<string[]> {
  const list = await items(o);
  if (list.length < (o.minimum ?? 1)) {
    void vscode.window.showInformationMessage(`Credit Lens: ${list.length ? 'not enough' : 'no'} other runs in this workspace to ${title.toLowerCase()}.`);
    return [];
  }
  const picked = await vscode.window.showQuickPick(list, { title: `Credit Lens: ${title}`, canPickMany: true, matchOnDescription: true });
  return picked?.map((p) => p.runDir) ?? [];
}

/** One run; undefined when cancelled. */
export async function pickRunDir(title: string, o: PickOptions = {}): Promise<string | undefined> {
  const list = await items(o);
  if (!list.length) {
    void vscode.window.showInformationMessage(`Credit Lens: no run in this workspace to ${title.toLowerCase()}.`);
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(list, { title: `Credit Lens: ${title}`, matchOnDescription: true });
  return picked?.runDir;
}
