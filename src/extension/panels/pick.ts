// Choosing runs for the dashboards: a QuickPick of every run directory the Runs view knows, newest first.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import { findConfigs, findRuns, runRoots } from '../discovery';
import { percent, summarizeMetrics } from '../metrics_summary';
import { readMetrics } from '../../engine/rundir/rundir';

export interface RunPickItem extends vscode.QuickPickItem {
  runDir: string;
}

async function items(exclude: ReadonlySet<string>, filter?: (runDir: string) => boolean): Promise<RunPickItem[]> {
  const found = findRuns(runRoots(await findConfigs()))
    .filter((r) => !exclude.has(r.runDir) && (!filter || filter(r.runDir)))
    .sort((a, b) => b.info.started.localeCompare(a.info.started));
  return found.map((r) => {
    const s = summarizeMetrics(readMetrics(r.runDir));
    return {
      label: basename(r.runDir),
      description: `${r.info.strategy ?? '?'} · ${r.info.status} · step ${r.info.last_step ?? 0}/${r.info.total_steps ?? '?'}`,
      detail: `final eval ${percent(s.finalEvalSuccess, 1)} · best eval ${percent(s.bestEvalSuccess, 1)} · latest reward ${s.latestReward?.toFixed(3) ?? '—'}`,
      runDir: r.runDir,
    };
  });
}

/** Several runs (checkboxes); [] when cancelled or nothing is left to pick. */
export async function pickRunDirs(title: string, exclude: Iterable<string> = [], minimum = 1): Promise<string[]> {
  const list = await items(new Set(exclude));
  if (list.length < minimum) {
    void vscode.window.showInformationMessage(`Credit Lens: ${list.length ? 'not enough' : 'no'} other runs in this workspace to ${title.toLowerCase()}.`);
    return [];
  }
  const picked = await vscode.window.showQuickPick(list, { title: `Credit Lens: ${title}`, canPickMany: true, matchOnDescription: true });
  return picked?.map((p) => p.runDir) ?? [];
}

/** One run; undefined when cancelled. */
export async function pickRunDir(title: string, exclude: Iterable<string> = [], filter?: (runDir: string) => boolean): Promise<string | undefined> {
  const list = await items(new Set(exclude), filter);
  if (!list.length) {
    void vscode.window.showInformationMessage(`Credit Lens: no run in this workspace to ${title.toLowerCase()}.`);
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(list, { title: `Credit Lens: ${title}`, matchOnDescription: true });
  return picked?.runDir;
}
