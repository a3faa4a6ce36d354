// Episodes as read-only documents on the `credit-lens-episode:` scheme (vscode-extension-samples'
// TextDocumentContentProvider pattern). The URI names the run directory, step and episode, and the episode it
// is compared with, so the text is a function of the URI alone and a reload restores the same document.
import { statSync } from 'node:fs';
import { basename } from 'node:path';
import * as vscode from 'vscode';
import { stepFile } from '../../engine/rundir/rundir';
import { buildHeatmapEpisode, StepTables, type EpisodeRef, type HeatmapEpisode } from './episode';

export const EPISODE_SCHEME = 'credit-lens-episode';

export interface EpisodeTarget extends EpisodeRef {
  /** the episode painted on the same scale, shown beside this one */
  pair?: EpisodeRef | null;
}

export function episodeUri(t: EpisodeTarget): vscode.Uri {
  const q = new URLSearchParams({ run: t.runDir, step: String(t.step), episode: String(t.episode) });
  if (t.pair) q.set('pair', JSON.stringify([t.pair.runDir, t.pair.step, t.pair.episode]));
  // The path is only the tab's title; the query is what identifies the episode.
  return vscode.Uri.from({ scheme: EPISODE_SCHEME, path: `/${basename(t.runDir)} · step ${t.step} · episode ${t.episode}`, query: q.toString() });
}

export function parseEpisodeUri(uri: vscode.Uri): EpisodeTarget | null {
  if (uri.scheme !== EPISODE_SCHEME) return null;
  const q = new URLSearchParams(uri.query);
  const runDir = q.get('run');
  const step = Number(q.get('step'));
  const episode = Number(q.get('episode'));
  if (!runDir || !Number.isInteger(step) || !Number.isInteger(episode)) return null;
  let pair: EpisodeRef | null = null;
  const p = q.get('pair');
  if (p) {
    try {
      const [d, s, e] = JSON.parse(p) as [string, number, number];
      if (typeof d === 'string' && Number.isInteger(s) && Number.isInteger(e)) pair = { runDir: d, step: s, episode: e };
    } catch {
      // a hand-edited URI: show the episode unpaired
    }
  }
  return { runDir, step, episode, pair };
}

interface CachedStep {
  mtimeMs: number;
  size: number;
  tables: StepTables;
}

/**
 * Step tables (a few, least recently used first out) and the views of open episode documents. A step file is
 * written once by an atomic rename; its mtime and size still guard against a run that was re-trained in place.
 */
export class EpisodeStore implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly steps = new Map<string, CachedStep>();
  private readonly views = new Map<string, HeatmapEpisode>();
  // No onDidChange: an episode document's text comes from a step table the engine writes once (atomic rename)
  // and never appends to, so a shown document cannot go stale. A run re-trained in place is caught by the
  // mtime/size check the next time the document is opened.
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly maxSteps = 8) {
    vscode.workspace.onDidCloseTextDocument((d) => this.views.delete(d.uri.toString()), null, this.disposables);
  }

  tables(runDir: string, step: number): StepTables {
    const key = `${runDir}\u0000${step}`;
    const st = statSync(stepFile(runDir, 'tokens', step));
    const hit = this.steps.get(key);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) {
      this.steps.delete(key);
      this.steps.set(key, hit);
      return hit.tables;
    }
    const tables = StepTables.read(runDir, step);
    this.steps.set(key, { mtimeMs: st.mtimeMs, size: st.size, tables });
    while (this.steps.size > this.maxSteps) this.steps.delete(this.steps.keys().next().value!);
    return tables;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const t = parseEpisodeUri(uri);
    if (!t) throw new Error(`not an episode: ${uri.toString()}`);
    const view = buildHeatmapEpisode(this.tables(t.runDir, t.step), t, {
      pair: t.pair ? { ...t.pair, runName: basename(t.pair.runDir) } : null,
    });
    this.views.set(uri.toString(), view);
    return view.text;
  }

  /** The view of an open episode document (built again if VS Code kept the text but this cache dropped it). */
  view(uri: vscode.Uri): HeatmapEpisode | undefined {
    const v = this.views.get(uri.toString());
    if (v || uri.scheme !== EPISODE_SCHEME) return v;
    try {
      this.provideTextDocumentContent(uri);
    } catch {
      return undefined;
    }
    return this.views.get(uri.toString());
  }

  /** Token rows of an episode that is not open (the compared episode when its editor is closed). */
  rowsOf(ref: EpisodeRef): { tables: StepTables; rows: Int32Array } | null {
    try {
      const tables = this.tables(ref.runDir, ref.step);
      return { tables, rows: tables.rows(ref.episode) };
    } catch {
      return null;
    }
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
    this.steps.clear();
    this.views.clear();
  }
}
