// Browse Rollouts' host half: one panel per run, its queries answered by the run reader's worker (worker_client.ts),
// an episode opened painted in the editor (at the token of a search hit), exports written where the person chooses.
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import * as vscode from 'vscode';
import { browseChecks, DEFAULT_QUERY, emptyResult, type BrowsePanelState, type BrowseProtocol, type BrowseQuery } from '../../protocol/browse_view';
import type { QueryClient } from '../worker_client';
import { WebviewPanelHost } from '../webview';
import { safeFileName } from './run_data';
import { runTabName } from '../../protocol/run_names';

export const BROWSE_VIEW_TYPE = 'creditLens.browseRollouts';

export interface BrowseDeps {
  extensionUri: vscode.Uri;
  log: vscode.LogOutputChannel;
  queries: QueryClient;
}

export class BrowsePanel extends WebviewPanelHost<BrowseProtocol> {
  private static readonly open = new Map<string, BrowsePanel>();
  private query: BrowseQuery;
  private seq = 0;

  static show(deps: BrowseDeps, runDir: string): BrowsePanel {
    const existing = BrowsePanel.open.get(runDir);
    if (existing && !existing.isDisposed) {
      existing.panel.reveal(undefined, false);
      return existing;
    }
    const panel = vscode.window.createWebviewPanel(BROWSE_VIEW_TYPE, `Rollouts: ${runTabName(basename(runDir))}`, vscode.ViewColumn.Active, {
      enableScripts: true,
    });
    return new BrowsePanel(panel, deps, { runDir, ...DEFAULT_QUERY });
  }

  static serializer(deps: BrowseDeps): vscode.WebviewPanelSerializer<BrowsePanelState> {
    return {
      async deserializeWebviewPanel(panel, state) {
        if (!browseChecks.state(state)) {
          panel.dispose();
          return;
        }
        new BrowsePanel(panel, deps, state);
      },
    };
  }

  readonly runDir: string;

  private constructor(
    panel: vscode.WebviewPanel,
    private readonly deps: BrowseDeps,
    state: BrowsePanelState,
  ) {
    super(panel, deps.extensionUri, 'browse', browseChecks, deps.log);
    this.runDir = state.runDir;
    const { runDir: _, ...query } = state;
    this.query = { ...DEFAULT_QUERY, ...query };
    panel.iconPath = vscode.Uri.joinPath(deps.extensionUri, 'media', 'credit-lens.svg');
    BrowsePanel.open.set(this.runDir, this);
    this.disposables.push({ dispose: () => BrowsePanel.open.get(this.runDir) === this && BrowsePanel.open.delete(this.runDir) });
  }

  private run(): void {
    const mine = ++this.seq;
    this.post({ kind: 'notification', method: 'browse/busy', params: { runDir: this.runDir } });
    this.deps.queries.query(this.runDir, this.query).then(
      (result) => {
        if (mine !== this.seq) return; // a newer query superseded this one
        this.deps.log.info(
          `browse ${basename(this.runDir)}: ${result.total} of ${result.stats.episodes} episodes (${result.stats.tokens} tokens) in ${result.stats.queryMs.toFixed(0)} ms${result.stats.loadMs ? `, loaded in ${result.stats.loadMs.toFixed(0)} ms` : ''}`,
        );
        this.post({ kind: 'notification', method: 'browse/result', params: result });
      },
      (e: Error) => {
        if (mine !== this.seq) return;
        this.deps.log.warn(`browse ${this.runDir}: ${e.message}`);
        this.post({ kind: 'notification', method: 'browse/result', params: emptyResult(this.runDir, this.query, e.message) });
      },
    );
  }

  protected onMessage(m: BrowseProtocol['toHost']): void {
    switch (m.method) {
      case 'webview/ready':
        this.run();
        break;
      case 'browse/query':
        this.query = m.params;
        this.run();
        break;
      case 'browse/openEpisode':
        void vscode.commands.executeCommand('creditLens.openEpisode', { runDir: this.runDir, ...m.params, beside: true });
        break;
      case 'browse/export':
        void this.export(m.params.what, m.params.format, m.params.query);
        break;
    }
  }

  private async export(what: 'episodes' | 'tokens', format: 'csv' | 'jsonl', query: BrowseQuery): Promise<void> {
    const target = await vscode.window.showSaveDialog({
      defaultUri: vscode.Uri.file(join(this.runDir, `rollouts-${safeFileName(what)}.${format}`)),
      filters: format === 'csv' ? { CSV: ['csv'] } : { 'JSON lines': ['jsonl'] },
      title: `Credit Lens: export the ${what === 'episodes' ? 'filtered episodes' : 'token aggregate'}`,
    });
    if (!target) return;
    try {
      writeFileSync(target.fsPath, await this.deps.queries.exportRows(this.runDir, query, what, format));
    } catch (e) {
      void vscode.window.showErrorMessage(`Credit Lens: could not export to ${target.fsPath}: ${(e as Error).message}`);
      return;
    }
    void vscode.window.showInformationMessage(`Credit Lens: saved ${basename(target.fsPath)}.`);
  }
}
