// The credit-analysis view's host half. The analysis runs as `credit-lens analyze <run> --json` in its own
// process (EngineCli), the same command a user runs in a terminal and the sweep table uses: a long run's
// million token rows take a second or two to read, which would freeze every extension in the extension host.
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import * as vscode from 'vscode';
import { analysisChecks, type AnalysisPanelState, type AnalysisProtocol, type AnalysisView } from '../../protocol/analysis_view';
import { listLoggedSteps } from '../../engine/rundir/rundir';
import { CancelledError, type EngineCli } from '../engine_cli';
import { WebviewPanelHost } from '../webview';
import { pickRunDir } from '../pick';
import { safeFileName } from './run_data';
import { runTabName } from '../../protocol/run_names';

export const ANALYSIS_VIEW_TYPE = 'creditLens.creditAnalysis';

/** Only a run that logged token tables can be analysed (logging.tokens). */
export const hasTokenTables = (runDir: string): boolean => listLoggedSteps(runDir, 'tokens').length > 0;

export interface AnalysisDeps {
  extensionUri: vscode.Uri;
  cli: EngineCli;
  log: vscode.LogOutputChannel;
}

export class AnalysisPanel extends WebviewPanelHost<AnalysisProtocol> {
  private static readonly open = new Map<string, AnalysisPanel>();
  private abort: AbortController | null = null;
  private from: number | null;
  private to: number | null;
  private baselineDir: string | null;

  static show(deps: AnalysisDeps, runDir: string, opts: { baselineDir?: string } = {}): AnalysisPanel {
    const existing = AnalysisPanel.open.get(runDir);
    if (existing && !existing.isDisposed) {
      existing.panel.reveal(undefined, false);
      if (opts.baselineDir) existing.setBaseline(opts.baselineDir);
      return existing;
    }
    const panel = vscode.window.createWebviewPanel(ANALYSIS_VIEW_TYPE, `Credit analysis: ${runTabName(basename(runDir))}`, vscode.ViewColumn.Active, {
      enableScripts: true,
    });
    return new AnalysisPanel(panel, deps, { runDir, from: null, to: null, baselineDir: opts.baselineDir ?? null });
  }

  static serializer(deps: AnalysisDeps): vscode.WebviewPanelSerializer<AnalysisPanelState> {
    return {
      async deserializeWebviewPanel(panel, state) {
        if (!analysisChecks.state(state)) {
          panel.dispose();
          return;
        }
        new AnalysisPanel(panel, deps, state);
      },
    };
  }

  private constructor(
    panel: vscode.WebviewPanel,
    private readonly deps: AnalysisDeps,
    state: AnalysisPanelState,
  ) {
    super(panel, deps.extensionUri, 'analysis', analysisChecks, deps.log);
    this.runDir = state.runDir;
    this.from = state.from;
    this.to = state.to;
    this.baselineDir = state.baselineDir;
    panel.iconPath = vscode.Uri.joinPath(deps.extensionUri, 'media', 'credit-lens.svg');
    AnalysisPanel.open.set(this.runDir, this);
    this.disposables.push({
      dispose: () => {
        this.abort?.abort();
        if (AnalysisPanel.open.get(this.runDir) === this) AnalysisPanel.open.delete(this.runDir);
      },
    });
  }

  readonly runDir: string;

  setBaseline(dir: string | null): void {
    this.baselineDir = dir;
    this.analyze();
  }

  private analyze(): void {
    this.abort?.abort();
    const abort = (this.abort = new AbortController());
    const { runDir, from, to, baselineDir } = this;
    this.post({ kind: 'notification', method: 'analysis/busy', params: { runDir, from, to, baselineDir } });
    const logged = listLoggedSteps(runDir, 'tokens');
    const base: Omit<AnalysisView, 'report' | 'error' | 'elapsedMs'> = {
      runDir,
      id: basename(runDir),
      from,
      to,
      baselineDir,
      loggedSteps: logged.length ? { first: logged[0], last: logged[logged.length - 1], count: logged.length } : null,
    };
    const t0 = Date.now();
    this.deps.cli.analyze(runDir, { from, to, baselineDir, signal: abort.signal }).then(
      ({ report, elapsedMs }) => this.post({ kind: 'notification', method: 'analysis/result', params: { ...base, report, error: null, elapsedMs } }),
      (e: Error) => {
        // A newer request (or closing the panel) replaced this one: its result is the one to show.
        if (e instanceof CancelledError) return;
        this.deps.log.warn(`analyze ${runDir}: ${e.message}`);
        this.post({ kind: 'notification', method: 'analysis/result', params: { ...base, report: null, error: e.message, elapsedMs: Date.now() - t0 } });
      },
    );
  }

  protected onMessage(m: AnalysisProtocol['toHost']): void {
    switch (m.method) {
      case 'webview/ready':
        this.analyze();
        break;
      case 'analysis/setRange':
        this.from = m.params.from;
        this.to = m.params.to;
        this.analyze();
        break;
      case 'analysis/pickBaseline':
        void pickRunDir(`baseline for ${basename(this.runDir)}`, { exclude: [this.runDir], filter: hasTokenTables }).then(
          (dir) => dir && this.setBaseline(dir),
        );
        break;
      case 'analysis/clearBaseline':
        this.setBaseline(null);
        break;
      case 'analysis/openDashboard':
        void vscode.commands.executeCommand('creditLens.openDashboard', m.params.runDir);
        break;
      case 'analysis/exportCsv':
        void this.saveCsv(m.params.name, m.params.csv);
        break;
    }
  }

  private async saveCsv(name: string, csv: string): Promise<void> {
    const target = await vscode.window.showSaveDialog({
      defaultUri: vscode.Uri.file(join(this.runDir, `analysis-${safeFileName(name)}.csv`)),
      filters: { CSV: ['csv'] },
      title: 'Credit Lens: export table',
    });
    if (!target) return;
    try {
      writeFileSync(target.fsPath, csv);
    } catch (e) {
      void vscode.window.showErrorMessage(`Credit Lens: could not write ${target.fsPath}: ${(e as Error).message}`);
      return;
    }
    void vscode.window.showInformationMessage(`Credit Lens: saved ${basename(target.fsPath)}.`);
  }
}
