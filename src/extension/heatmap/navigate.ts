// Next / previous episode and step from the focused episode document. Episodes go in episode order and run on
// into the neighbouring step; a step move keeps the episode number. A compared pair stays a pair: the new
// episode is compared with the same other run again.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import { episodeSteps, neighbour, type Move } from './episode';
import { parseEpisodeUri, type EpisodeStore } from './episode_doc';
import { openPair } from './compare';
import { showEpisode } from './open_rollouts';

export type { Move };

export async function navigate(store: EpisodeStore, move: Move): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const t = editor && parseEpisodeUri(editor.document.uri);
  if (!editor || !t) {
    void vscode.window.showInformationMessage('Credit Lens: open an episode first (Open Episode…, or an episode in the Runs view).');
    return;
  }
  const episodesOf = async (step: number) => {
    try {
      return Array.from((await store.tables(t.runDir, step)).episodes.episode).sort((a, b) => a - b);
    } catch {
      return [];
    }
  };
  const next = await neighbour(t, move, episodeSteps(t.runDir), episodesOf);
  if (!next) {
    vscode.window.setStatusBarMessage(
      `Credit Lens: ${move.startsWith('next') ? 'last' : 'first'} ${move.endsWith('Step') ? 'step' : 'episode'} of ${basename(t.runDir)}`,
      3000,
    );
    return;
  }
  if (t.pair && (await openPair(store, next, t.pair.runDir, editor.viewColumn))) return;
  await showEpisode(next, { viewColumn: editor.viewColumn });
}
