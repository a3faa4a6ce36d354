// Opening episodes: from the Runs tree (an episode item's command), or "Open Episode…" — QuickPicks for run →
// step → episode, where typing filters the episodes by reward, solved/not solved, prompt or completion.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import type { TableReader } from '../worker_client';
import { readMetrics } from '../../engine/rundir/rundir';
import { episodeOf } from '../args';
import { findConfigs, findRuns, runRoots, type FoundRun } from '../discovery';
import { episodeSteps } from './episode';
import { episodeUri, type EpisodeTarget } from './episode_doc';
import { formatFixed } from '../../protocol/number_format';

export async function showEpisode(t: EpisodeTarget, opts: vscode.TextDocumentShowOptions = {}): Promise<vscode.TextEditor> {
  const doc = await vscode.workspace.openTextDocument(episodeUri(t));
  return vscode.window.showTextDocument(doc, { preview: true, ...opts });
}

/** Runs with at least one logged episode table, newest first. */
export async function runsWithEpisodes(): Promise<FoundRun[]> {
  const runs = await findRuns(runRoots(await findConfigs()));
  return runs.filter((r) => episodeSteps(r.runDir).length > 0).sort((a, b) => b.info.started.localeCompare(a.info.started));
}

export function runPickItem(r: FoundRun): vscode.QuickPickItem & { run: FoundRun } {
  return {
    label: basename(r.runDir),
    description: `${r.info.status} · strategy ${r.info.strategy ?? '?'}`,
    detail: r.runDir,
    run: r,
  };
}

/** The "Open Episode…" command: run → step → episode, each step of the way skipped when its argument says it. */
export async function openRollouts(tables: TableReader, arg?: unknown): Promise<void> {
  const direct = episodeOf(arg);
  if (direct) {
    // from Browse Rollouts: beside its table, which stays in view
    const beside = (arg as { beside?: unknown }).beside === true;
    await showEpisode(direct, beside ? { viewColumn: vscode.ViewColumn.Beside } : {});
    return;
  }
  let runDir = arg && typeof arg === 'object' && typeof (arg as { runDir?: unknown }).runDir === 'string' ? (arg as { runDir: string }).runDir : null;
  if (!runDir) {
    const runs = await runsWithEpisodes();
    if (!runs.length) {
      void vscode.window.showInformationMessage('Credit Lens: no run with logged episodes yet (logging.tokens must be on).');
      return;
    }
    const pick = await vscode.window.showQuickPick(runs.map(runPickItem), {
      title: 'Open Episode: run',
      placeHolder: 'a run with logged episodes',
      matchOnDescription: true,
    });
    if (!pick) return;
    runDir = pick.run.runDir;
  }
  const given = (arg as { step?: unknown } | undefined)?.step;
  const step = typeof given === 'number' ? given : await pickStep(runDir);
  if (step === undefined) return;
  const episode = await pickEpisode(tables, runDir, step);
  if (episode === undefined) return;
  await showEpisode({ runDir, step, episode });
}

async function pickStep(runDir: string): Promise<number | undefined> {
  const steps = episodeSteps(runDir);
  if (steps.length === 1) return steps[0];
  const rows = new Map(
    readMetrics(runDir)
      .filter((r) => r.phase === 'grpo')
      .map((r) => [r.step, r]),
  );
  const items = steps
    .slice()
    .reverse()
    .map((s) => {
      const r = rows.get(s);
      const parts = r
        ? [
            r.reward_mean !== undefined ? `reward ${formatFixed(r.reward_mean, 3)}` : '',
            r.success_rate !== undefined ? `success ${formatFixed(100 * r.success_rate, 0)}%` : '',
            r.response_len !== undefined ? `${formatFixed(r.response_len, 0)} tokens` : '',
          ].filter(Boolean)
        : [];
      return { label: `step ${s}`, description: parts.join(' · '), step: s };
    });
  const pick = await vscode.window.showQuickPick(items, {
    title: `Open Episode: step of ${basename(runDir)}`,
    placeHolder: 'latest first; type a step number',
    matchOnDescription: true,
  });
  return pick?.step;
}

async function pickEpisode(tables: TableReader, runDir: string, step: number): Promise<number | undefined> {
  const t = await tables.episodes(runDir, step);
  const order = Array.from(t.episode.keys()).sort((a, b) => t.reward[b] - t.reward[a] || t.episode[a] - t.episode[b]);
  const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim();
  const items = order.map((i) => ({
    // The label carries the words a filter can type: the reward's digits, "solved" / "not solved".
    label: `${t.success[i] ? '$(check)' : '$(dash)'} ${formatFixed(t.reward[i], 3)} #${t.episode[i]}`,
    description: `${t.success[i] ? 'solved' : 'not solved'} · ${oneLine(t.prompt[i])}`,
    detail: oneLine(t.completion[i]).slice(0, 160),
    episode: t.episode[i],
  }));
  const pick = await vscode.window.showQuickPick(items, {
    title: `Open Episode: episode of ${basename(runDir)} step ${step}`,
    placeHolder: 'best reward first; filter by reward, "solved", prompt or completion text',
    matchOnDescription: true,
    matchOnDetail: true,
  });
  return pick?.episode;
}
