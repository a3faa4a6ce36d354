// The one way the extension learns that a run directory changed on disk (a run trained by another window,
// the CLI or a Slurm job): VS Code's FileSystemWatcher on run.json and metrics.jsonl (and on probe records, which
// the dashboards chart at their steps), shared by the Runs
// tree, the sweep table and the dashboards, which used to hold three watchers of three different scopes.
//
// Why FileSystemWatcher, and not fs.watch or polling:
// - inside the workspace it rides on the watcher VS Code already runs for the explorer (no extra inotify
//   handles per panel), and it works the same in a remote or code-server window, where the files live;
// - Node's fs.watch is not recursive on Linux before Node 22 and misses directories created later (a new run);
// - polling every run's metrics.jsonl costs a stat per run per tick for what is usually an idle list.
// One workspace-wide watcher sees every run under a workspace folder, including output_dirs that do not exist
// yet; a root outside every folder (creditLens.runDirectories, an absolute output_dir) gets its own
// RelativePattern watcher, which the workspace glob would never see.
import { dirname } from 'node:path';
import * as vscode from 'vscode';
import { onSettingChange } from './vscode_settings';
import { CONFIG_GLOB, findConfigs, runRoots } from './discovery';

const RUN_FILES = '{run.json,metrics.jsonl}';
// a probe's record is written when it has scored its step (credit-lens probe, Probe This Episode…)
const PROBE_RECORDS = 'probes/step-*.json';

export class RunDirWatcher implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<string>();
  /** Fires with the run directory whose run.json or metrics.jsonl was created, changed or deleted. */
  readonly onDidChange = this.changed.event;
  private readonly probes = new vscode.EventEmitter<string>();
  /** Fires with the run directory one of whose probe records (probes/step-N.json) was written or deleted. */
  readonly onDidChangeProbes = this.probes.event;
  private readonly configs = new vscode.EventEmitter<void>();
  /** Fires when a *.credit.yaml is created, changed or deleted (the tree lists configs; roots may move). */
  readonly onDidChangeConfigs = this.configs.event;
  private readonly outside = new Map<string, vscode.Disposable>();
  private readonly disposables: vscode.Disposable[] = [this.changed, this.probes, this.configs];
  private disposed = false;

  constructor() {
    this.listen(vscode.workspace.createFileSystemWatcher(`**/${RUN_FILES}`), (u) => this.changed.fire(dirname(u.fsPath)));
    this.listen(vscode.workspace.createFileSystemWatcher(`**/${PROBE_RECORDS}`), (u) => this.probes.fire(dirname(dirname(u.fsPath))));
    this.listen(vscode.workspace.createFileSystemWatcher(CONFIG_GLOB), () => {
      this.configs.fire();
      void this.updateRoots();
    });
    this.disposables.push(
      onSettingChange('runDirectories', () => void this.updateRoots()),
      vscode.workspace.onDidChangeWorkspaceFolders(() => void this.updateRoots()),
    );
    void this.updateRoots();
  }

  private listen(w: vscode.FileSystemWatcher, fire: (u: vscode.Uri) => void, into: vscode.Disposable[] = this.disposables): void {
    into.push(w, w.onDidCreate(fire), w.onDidChange(fire), w.onDidDelete(fire));
  }

  /** Watch each run root that no workspace folder contains; stop watching roots that are gone. */
  private async updateRoots(): Promise<void> {
    const roots = runRoots(await findConfigs()).filter((r) => !vscode.workspace.getWorkspaceFolder(vscode.Uri.file(r)));
    for (const [root, w] of this.outside) {
      if (!roots.includes(root)) {
        w.dispose();
        this.outside.delete(root);
      }
    }
    for (const root of roots) {
      if (this.outside.has(root)) continue;
      const w = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(vscode.Uri.file(root), `**/${RUN_FILES}`));
      const subs: vscode.Disposable[] = [];
      this.listen(w, (u) => this.changed.fire(dirname(u.fsPath)), subs);
      const pw = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(vscode.Uri.file(root), `**/${PROBE_RECORDS}`));
      this.listen(pw, (u) => this.probes.fire(dirname(dirname(u.fsPath))), subs);
      if (this.disposed) return vscode.Disposable.from(...subs).dispose();
      this.outside.set(root, vscode.Disposable.from(...subs));
    }
  }

  dispose(): void {
    this.disposed = true;
    for (const w of this.outside.values()) w.dispose();
    this.outside.clear();
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}
