// Episodes as read-only documents on the `credit-lens-episode:` scheme. The URI names the run directory, step and
// episode, and the episode it is compared with, so the text is a function of the URI alone. A read-only
// FileSystemProvider rather than a TextDocumentContentProvider: VS Code restores the editors of a file system's
// documents after a window reload (activating the extension on onFileSystem:credit-lens-episode), while a content
// provider's tabs are dropped.
import { statSync } from 'node:fs';
import { basename } from 'node:path';
import * as vscode from 'vscode';
import { stepFile } from '../../engine/rundir/rundir';
import { buildHeatmapEpisode, StepTables, type EpisodeRef, type HeatmapEpisode } from './episode';
import type { TableReader } from '../worker_client';

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
  /** the step's token, episode and probe tables as they were when read (stepIdentity) */
  identity: string;
  tables: StepTables;
}

/**
 * Size, mtime and inode of the step's token, episode and probe tables ("gone" where one is missing): a table rewritten
 * under the same step number (a restart in place, a resume that set steps aside, a new probe) is read afresh, even
 * where its size and mtime happen to match.
 */
function stepIdentity(runDir: string, step: number): string {
  return (['tokens', 'episodes', 'probes'] as const)
    .map((kind) => {
      try {
        const st = statSync(stepFile(runDir, kind, step));
        return `${st.size}:${st.mtimeMs}:${st.ino}`;
      } catch {
        return 'gone';
      }
    })
    .join(';');
}

/**
 * Step tables (a few, least recently used first out) and the views of open episode documents. A step file is
 * written once by an atomic rename; its identity (size, mtime, inode) still guards against a run re-trained in place.
 * Tables are read by the TableReader's worker thread, so opening a long run's episode never blocks the host.
 */
export class EpisodeStore implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly steps = new Map<string, CachedStep>();
  private readonly loading = new Map<string, Promise<StepTables>>();
  private readonly views = new Map<string, HeatmapEpisode>();
  private readonly loaded = new vscode.EventEmitter<void>();
  /** A step's tables arrived (a compared episode's, read after its pair was painted): repaint. */
  readonly onDidLoad = this.loaded.event;
  // No onDidChange: an episode document's text comes from a step table the engine writes once (atomic rename)
  // and never appends to, so a shown document cannot go stale. A run re-trained in place is caught by the
  // tables' identity (stepIdentity) the next time the document is opened.
  private readonly changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.loaded, this.changed];

  constructor(
    readonly reader: TableReader,
    private readonly maxSteps = 8,
  ) {
    vscode.workspace.onDidCloseTextDocument((d) => this.views.delete(d.uri.toString()), null, this.disposables);
  }

  /** The step's tables when they are cached and still current; null otherwise. */
  cached(runDir: string, step: number): StepTables | null {
    const key = `${runDir}\u0000${step}`;
    const hit = this.steps.get(key);
    if (!hit) return null;
    if (hit.identity !== stepIdentity(runDir, step)) return null;
    this.steps.delete(key);
    this.steps.set(key, hit);
    return hit.tables;
  }

  /** The step's tables, read in the worker when they are not cached (one read per step at a time). */
  tables(runDir: string, step: number): Promise<StepTables> {
    const hit = this.cached(runDir, step);
    if (hit) return Promise.resolve(hit);
    const key = `${runDir}\u0000${step}`;
    const inFlight = this.loading.get(key);
    if (inFlight) return inFlight;
    const p = (async () => {
      const identity = stepIdentity(runDir, step);
      const { tokens, episodes } = await this.reader.step(runDir, step);
      const tables = new StepTables(runDir, step, tokens, episodes);
      this.steps.set(key, { identity, tables });
      while (this.steps.size > this.maxSteps) this.steps.delete(this.steps.keys().next().value!);
      this.loaded.fire();
      return tables;
    })().finally(() => this.loading.delete(key));
    this.loading.set(key, p);
    return p;
  }

  private async build(uri: vscode.Uri): Promise<HeatmapEpisode> {
    const t = parseEpisodeUri(uri);
    if (!t) throw vscode.FileSystemError.FileNotFound(uri);
    let tables: StepTables;
    try {
      tables = await this.tables(t.runDir, t.step);
    } catch (e) {
      // a run directory deleted since the editor was opened (a reload restores its tab): say so, not a stack
      throw vscode.FileSystemError.FileNotFound(`${basename(t.runDir)} step ${t.step}: ${(e as Error).message}`);
    }
    return this.setView(uri, tables, t);
  }

  /** The view of `uri`'s episode on these tables, kept for the painter and the hover. */
  private setView(uri: vscode.Uri, tables: StepTables, t: EpisodeTarget): HeatmapEpisode {
    const view = buildHeatmapEpisode(tables, t, { pair: t.pair ? { ...t.pair, runName: basename(t.pair.runDir) } : null });
    this.views.set(uri.toString(), view);
    return view;
  }

  // ---- the read-only file system: stat and readFile; everything that would write is refused ----

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const t = parseEpisodeUri(uri);
    if (!t) throw vscode.FileSystemError.FileNotFound(uri);
    let mtime = 0;
    try {
      mtime = statSync(stepFile(t.runDir, 'tokens', t.step)).mtimeMs;
    } catch {
      throw vscode.FileSystemError.FileNotFound(uri);
    }
    return { type: vscode.FileType.File, ctime: mtime, mtime, size: 0, permissions: vscode.FilePermission.Readonly };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    return new TextEncoder().encode((await this.build(uri)).text);
  }

  watch(): vscode.Disposable {
    // step tables are written once (atomic rename): nothing to watch
    return new vscode.Disposable(() => {});
  }

  readDirectory(): [string, vscode.FileType][] {
    throw vscode.FileSystemError.NoPermissions('episodes are documents, not folders');
  }

  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  writeFile(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  delete(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  /**
   * Read a step's tables again (its probe table changed: `credit-lens probe` ran) and rebuild the views of its open
   * episode documents on them; their text is unchanged, their columns are new, so the painter repaints.
   */
  async reload(runDir: string, step: number): Promise<void> {
    const tables = await this.tables(runDir, step);
    for (const [uri, view] of this.views) {
      if (view.ref.runDir !== runDir || view.ref.step !== step || view.tables === tables) continue;
      this.views.set(uri, buildHeatmapEpisode(tables, view.ref, { pair: view.pair }));
    }
    this.loaded.fire();
  }

  /**
   * The view of an open episode document: set when VS Code read its text, else rebuilt from the cached tables (VS Code
   * can reopen a document it still holds without reading it again).
   */
  view(uri: vscode.Uri): HeatmapEpisode | undefined {
    const known = this.views.get(uri.toString());
    if (known) return known;
    const t = parseEpisodeUri(uri);
    const tables = t && this.cached(t.runDir, t.step);
    if (!t || !tables) return undefined;
    return this.setView(uri, tables, t);
  }

  /**
   * Token rows of an episode that is not open (the compared episode when its editor is closed), from the cache;
   * when they are not cached yet they are read in the background and onDidLoad fires.
   */
  rowsOf(ref: EpisodeRef): { tables: StepTables; rows: Int32Array } | null {
    const tables = this.cached(ref.runDir, ref.step);
    if (tables) return { tables, rows: tables.rows(ref.episode) };
    this.tables(ref.runDir, ref.step).catch(() => {});
    return null;
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
    this.steps.clear();
    this.views.clear();
  }
}
