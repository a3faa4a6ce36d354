// The run dashboard: one run's charts, live while it trains, one panel per run, restored after a reload.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import type { MetricsPanelState } from '../../protocol/metrics_view';
import { ComparePanel } from './compare_panel';
import { MetricsPanel, stateRunDirs, type PanelDeps } from './metrics_panel';
import { runTabName } from '../../protocol/run_names';

export const DASHBOARD_VIEW_TYPE = 'creditLens.dashboard';

/** A run's dashboard tab: its name and the time it started, not its folder's timestamp. */
const dashboardTitle = (runDir: string) => `Dashboard: ${runTabName(basename(runDir))}`;

export class DashboardPanel extends MetricsPanel {
  private static readonly open = new Map<string, DashboardPanel>();

  static show(deps: PanelDeps, runDir: string, column: vscode.ViewColumn = vscode.ViewColumn.Active, preserveFocus = false): DashboardPanel {
    const existing = DashboardPanel.open.get(runDir);
    if (existing && !existing.isDisposed) {
      existing.panel.reveal(undefined, preserveFocus);
      return existing;
    }
    const panel = vscode.window.createWebviewPanel(DASHBOARD_VIEW_TYPE, dashboardTitle(runDir), { viewColumn: column, preserveFocus }, { enableScripts: true });
    return new DashboardPanel(panel, deps, runDir);
  }

  static serializer(deps: PanelDeps): vscode.WebviewPanelSerializer<MetricsPanelState> {
    return {
      async deserializeWebviewPanel(panel, state) {
        const [runDir] = stateRunDirs(state);
        if (!runDir) {
          panel.dispose();
          return;
        }
        new DashboardPanel(panel, deps, runDir);
      },
    };
  }

  private constructor(panel: vscode.WebviewPanel, deps: PanelDeps, runDir: string) {
    super(panel, deps, 'dashboard', [runDir]);
    DashboardPanel.open.set(runDir, this);
    this.disposables.push({ dispose: () => DashboardPanel.open.get(runDir) === this && DashboardPanel.open.delete(runDir) });
  }

  get runDir(): string {
    return this.runDirs[0];
  }

  // Called by the base constructor, before this class's fields exist: it reads only the base's runDirs.
  protected retitle(): void {
    this.panel.title = dashboardTitle(this.runDirs[0]);
  }

  protected compareWith(runDirs: string[]): void {
    ComparePanel.show(this.deps, [this.runDir, ...runDirs]);
  }
}
