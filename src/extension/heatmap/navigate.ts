// Next / previous episode and step from the focused episode document. Episodes go in episode order and run on
// into the neighbouring step; a step move keeps the episode number. A compared pair stays a pair: the new
// episode is compared with the same other run again.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import type { EpisodeRef } from './episode';
import { episodeSteps } from './episode';
import { parseEpisodeUri, type EpisodeStore } from './episode_doc';
import { openPair } from './compare';
import { showEpisode } from './open_rollouts';

export type Move = 'nextEpisode' | 'previousEpisode' | 'nextStep' | 'previousStep';

/** Where a move lands, or null at either end of the run. Pure given the step list and the episode lists. */
export function neighbour(ref: EpisodeRef, move: Move, steps: readonly number[], episodesOf: (step: number) => readonly number[]): EpisodeRef | null {
  const si = steps.indexOf(ref.step);
  if (si < 0) return null;
  if (move === 'nextStep' || move === 'previousStep') {
    const s = steps[si + (move === 'nextStep' ? 1 : -1)];
    if (s === undefined) return null;
    const eps = episodesOf(s);
    if (!eps.length) return null;
    // The same episode number when the step has it (the same group member), else the last one there is.
    return { runDir: ref.runDir, step: s, episode: eps.includes(ref.episode) ? ref.episode : eps[eps.length - 1] };
  }
  const dir = move === 'nextEpisode' ? 1 : -1;
  const eps = episodesOf(ref.step);
  const ei = eps.indexOf(ref.episode);
  const e = eps[ei + dir];
  if (ei >= 0 && e !== undefined) return { ...ref, episode: e };
  for (let k = si + dir; k >= 0 && k < steps.length; k += dir) {
    const other = episodesOf(steps[k]);
    if (other.length) return { runDir: ref.runDir, step: steps[k], episode: dir > 0 ? other[0] : other[other.length - 1] };
  }
  return null;
}

export async function navigate(store: EpisodeStore, move: Move): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const t = editor && parseEpisodeUri(editor.document.uri);
  if (!editor || !t) {
    void vscode.window.showInformationMessage('Credit Lens: open an episode first (Open Rollouts…, or an episode in the Runs view).');
    return;
  }
  const episodesOf = (step: number) => {
    try {
      return Array.from(store.tables(t.runDir, step).episodes.episode).sort((a, b) => a - b);
    } catch {
      return [];
    }
  };
  const next = neighbour(t, move, episodeSteps(t.runDir), episodesOf);
  if (!next) {
    vscode.window.setStatusBarMessage(`Credit Lens: ${move.startsWith('next') ? 'last' : 'first'} ${move.endsWith('Step') ? 'step' : 'episode'} of ${basename(t.runDir)}`, 3000);
    return;
  }
  if (t.pair && (await openPair(store, next, t.pair.runDir, editor.viewColumn))) return;
  await showEpisode(next, { viewColumn: editor.viewColumn });
}
