// "▶ Run · Sweep · Validate" above the first line of every `*.credit.yaml` ("■ Stop" while it trains).
import * as vscode from 'vscode';
import { isEnded } from './run_status';
import type { RunManager } from './runs';

export class ConfigCodeLensProvider implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;
  private readonly subscription: vscode.Disposable;
  private lastActive = '';

  constructor(private readonly runs: RunManager) {
    // Re-render when a run of some config changes status, not on every progress tick. (Firing only when the
    // set of training configs changed was not enough: in code-server 1.100 the single event fired right
    // after the click on "▶ Run" did not make VS Code ask for lenses again, so "■ Stop" never appeared.)
    this.subscription = runs.onDidChange(() => {
      const active = this.runs
        .active()
        .map((r) => `${r.request.configPath}:${r.status}`)
        .sort()
        .join('\n');
      if (active !== this.lastActive) {
        this.lastActive = active;
        this.changed.fire();
      }
    });
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    const top = new vscode.Range(0, 0, 0, 0);
    const training = this.runs.runs().filter((r) => r.request.configPath === doc.uri.fsPath && !isEnded(r.status));
    const lenses: vscode.CodeLens[] = [];
    if (training.length) {
      const r = training[training.length - 1];
      lenses.push(
        new vscode.CodeLens(top, { title: `■ Stop (${r.status})`, command: 'creditLens.stop', arguments: [r.key], tooltip: 'Checkpoint and stop this run' }),
      );
    }
    lenses.push(
      new vscode.CodeLens(top, {
        title: '▶ Run',
        command: 'creditLens.run',
        arguments: [doc.uri],
        tooltip: 'Train this config (a new run directory under its output_dir)',
      }),
      new vscode.CodeLens(top, {
        title: 'Sweep',
        command: 'creditLens.sweep',
        arguments: [doc.uri],
        tooltip: "Run a sweep: the config's sweep.grid, or strategies and values you pick",
      }),
      new vscode.CodeLens(top, {
        title: 'Validate',
        command: 'creditLens.validate',
        arguments: [doc.uri],
        tooltip: "Check the config against the engine's schema",
      }),
    );
    return lenses;
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}
