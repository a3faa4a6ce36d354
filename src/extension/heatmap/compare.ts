// "Compare With…": the same prompt's episode from another run, in the column beside, both painted on one scale
// (each document's URI names the other, so each painter joins both value ranges). Token-level credit of two
// strategies on the same prompt, side by side.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import { findSamePrompt, type EpisodeRef } from './episode';
import { parseEpisodeUri, type EpisodeStore } from './episode_doc';
import { episodeOf } from '../args';
import { runPickItem, runsWithEpisodes, showEpisode } from './open_rollouts';

/** The episode a command acts on: its argument (a tree node), else the active episode editor's. */
export function targetEpisode(arg: unknown): EpisodeRef | null {
  const direct = episodeOf(arg);
  if (direct) return direct;
  const uri = arg instanceof vscode.Uri ? arg : vscode.window.activeTextEditor?.document.uri;
  const t = uri && parseEpisodeUri(uri);
  return t ? { runDir: t.runDir, step: t.step, episode: t.episode } : null;
}

export async function compareWith(store: EpisodeStore, arg?: unknown, otherRunDir?: string): Promise<boolean> {
  const ref = targetEpisode(arg);
  if (!ref) {
    void vscode.window.showInformationMessage('Credit Lens: open an episode first (Open Episode…, or an episode in the Runs view).');
    return false;
  }
  if (!otherRunDir) {
    const runs = (await runsWithEpisodes()).filter((r) => r.runDir !== ref.runDir);
    if (!runs.length) {
      void vscode.window.showInformationMessage('Credit Lens: no other run with logged episodes to compare with.');
      return false;
    }
    const pick = await vscode.window.showQuickPick(runs.map(runPickItem), {
      title: `Compare ${basename(ref.runDir)} step ${ref.step} episode ${ref.episode} with…`,
      placeHolder: 'a run that trained on the same prompts (same task and seed)',
      matchOnDescription: true,
    });
    if (!pick) return false;
    otherRunDir = pick.run.runDir;
  }
  return openPair(store, ref, otherRunDir);
}

/** Opens `ref` and the same prompt's episode of `otherRunDir` side by side; false when that run never saw it. */
export async function openPair(store: EpisodeStore, ref: EpisodeRef, otherRunDir: string, column?: vscode.ViewColumn): Promise<boolean> {
  const tables = await store.tables(ref.runDir, ref.step);
  const i = tables.episodeIndex(ref.episode);
  if (i < 0) throw new Error(`step ${ref.step} of ${ref.runDir} has no episode ${ref.episode}`);
  const prompt = tables.episodes.prompt[i];
  const other = await findSamePrompt(otherRunDir, prompt, ref.step, ref.episode, tables.episodes.reward[i], (d, s) => store.reader.episodes(d, s));
  if (!other) {
    void vscode.window.showInformationMessage(
      `Credit Lens: ${basename(otherRunDir)} has no episode of the prompt ${JSON.stringify(prompt.replace(/\s+/g, ' ').trim())}.`,
    );
    return false;
  }
  const left = await showEpisode(
    { ...ref, pair: other },
    { viewColumn: column ?? vscode.window.activeTextEditor?.viewColumn ?? vscode.ViewColumn.One, preview: true },
  );
  await showEpisode({ ...other, pair: ref }, { viewColumn: vscode.ViewColumn.Beside, preview: true, preserveFocus: true });
  // Beside a column that was the rightmost, Beside opens a new one; focus stays on the episode asked for.
  await vscode.window.showTextDocument(left.document, { viewColumn: left.viewColumn, preserveFocus: false });
  return true;
}
