// The sweep summary webview: one row per run of a sweep, updated live, restored after a reload.
import * as vscode from 'vscode';
import { sweepChecks, type SweepPanelState, type SweepProtocol } from '../../protocol/sweep_view';
import type { RunDirWatcher } from '../run_watcher';
import type { SweepManager } from '../sweeps';
import { WebviewPanelHost } from '../webview';

export const SWEEP_VIEW_TYPE = 'creditLens.sweepSummary';

export interface SweepPanelDeps {
  extensionUri: vscode.Uri;
  sweeps: SweepManager;
  runWatcher: RunDirWatcher;
  log: vscode.LogOutputChannel;
}

export class SweepPanel extends WebviewPanelHost<SweepProtocol> {
  private static readonly open = new Map<string, SweepPanel>();
  private timer: NodeJS.Timeout | undefined;

  static show(deps: SweepPanelDeps, sweepId: string): SweepPanel {
    const existing = SweepPanel.open.get(sweepId);
    if (existing && !existing.isDisposed) {
      existing.panel.reveal(undefined, false);
      return existing;
    }
    const title = deps.sweeps.get(sweepId)?.title ?? 'sweep';
    const panel = vscode.window.createWebviewPanel(SWEEP_VIEW_TYPE, `Sweep: ${title}`, vscode.ViewColumn.Active, { enableScripts: true });
    return new SweepPanel(panel, deps, sweepId);
  }

  static serializer(deps: SweepPanelDeps): vscode.WebviewPanelSerializer<SweepPanelState> {
    return {
      async deserializeWebviewPanel(panel, state) {
        if (!sweepChecks.state(state)) {
          panel.dispose();
          return;
        }
        new SweepPanel(panel, deps, state.sweepId);
      },
    };
  }

  private readonly sweeps: SweepManager;

  private constructor(
    panel: vscode.WebviewPanel,
    deps: SweepPanelDeps,
    readonly sweepId: string,
  ) {
    super(panel, deps.extensionUri, 'sweep', sweepChecks, deps.log);
    const sweeps = (this.sweeps = deps.sweeps);
    panel.iconPath = vscode.Uri.joinPath(deps.extensionUri, 'media', 'credit-lens.svg');
    SweepPanel.open.set(sweepId, this);
    sweeps.onDidChange((id) => id === sweepId && this.schedule(), null, this.disposables);
    // Metrics of a sweep run trained by another window reach us only through the file system.
    // Any run directory: this window's record of a sweep run started elsewhere may not know its directory yet.
    deps.runWatcher.onDidChange(() => this.schedule(), null, this.disposables);
    this.disposables.push({ dispose: () => clearTimeout(this.timer) }, { dispose: () => SweepPanel.open.delete(sweepId) });
  }

  /** Redraw at most twice a second, however fast metrics arrive. */
  schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.update();
    }, 500);
  }

  private update(): void {
    const view = this.sweeps.view(this.sweepId);
    if (view) {
      this.panel.title = `Sweep: ${view.title} (${view.done}/${view.total})`;
      this.post({ kind: 'notification', method: 'sweep/update', params: view });
    }
  }

  protected onMessage(m: SweepProtocol['toHost']): void {
    switch (m.method) {
      case 'webview/ready':
        this.update();
        if (!this.sweeps.get(this.sweepId)) {
          void vscode.window.showWarningMessage('Credit Lens: this sweep is no longer in the workspace state (only the 50 most recent are kept).');
        }
        break;
      case 'sweep/openRun':
        void vscode.commands.executeCommand('creditLens.openRun', m.params.runDir);
        break;
      case 'sweep/cancel':
        void this.sweeps.cancel(this.sweepId).catch((e) => vscode.window.showErrorMessage(`Credit Lens: ${(e as Error).message}`));
        break;
      case 'sweep/cancelRun':
        void this.sweeps.cancelSlurmTask(this.sweepId, m.params.index).catch((e) => vscode.window.showErrorMessage(`Credit Lens: ${(e as Error).message}`));
        break;
    }
  }
}
