// Run comparison: several runs' charts overlaid, one colour per run; runs can be added in place.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import type { MetricsPanelState } from '../../protocol/metrics_view';
import { MetricsPanel, stateRunDirs, type PanelDeps } from './metrics_panel';

export const COMPARE_VIEW_TYPE = 'creditLens.compareRuns';

export class ComparePanel extends MetricsPanel {
  private static readonly open = new Set<ComparePanel>();

  /** The panel already showing exactly these runs, else a new one. */
  static show(deps: PanelDeps, runDirs: string[]): ComparePanel {
    const dirs = [...new Set(runDirs)];
    const key = [...dirs].sort().join('\n');
    const existing = [...ComparePanel.open].find((p) => !p.isDisposed && p.key === key);
    if (existing) {
      existing.panel.reveal(undefined, false);
      return existing;
    }
    const panel = vscode.window.createWebviewPanel(COMPARE_VIEW_TYPE, 'Compare runs', vscode.ViewColumn.Active, { enableScripts: true });
    return new ComparePanel(panel, deps, dirs);
  }

  static serializer(deps: PanelDeps): vscode.WebviewPanelSerializer<MetricsPanelState> {
    return {
      async deserializeWebviewPanel(panel, state) {
        const dirs = stateRunDirs(state);
        if (!dirs.length) {
          panel.dispose();
          return;
        }
        new ComparePanel(panel, deps, dirs);
      },
    };
  }

  private constructor(panel: vscode.WebviewPanel, deps: PanelDeps, runDirs: string[]) {
    super(panel, deps, 'compare', runDirs);
    ComparePanel.open.add(this);
    this.disposables.push({ dispose: () => ComparePanel.open.delete(this) });
  }

  protected retitle(): void {
    const names = this.runDirs.map((d) => basename(d));
    this.panel.title = names.length <= 2 ? `Compare: ${names.join(' vs ')}` : `Compare ${names.length} runs`;
  }

  protected compareWith(runDirs: string[]): void {
    this.setRuns([...this.runDirs, ...runDirs]);
  }
}
