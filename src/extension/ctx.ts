// The extension's state, owned in one place (rust-analyzer's Ctx). What lives for the whole activation goes
// on `pushExtCleanup`; what lives as long as one engine process is on that EngineProcess's own list
// (engine.ts), so stopping a run and closing the window both release exactly what they should.
import * as vscode from 'vscode';
import { AnalysisRunner } from './analysis_runner';
import { readSettings } from './vscode_settings';
import { EngineCli } from './engine_cli';
import { ConfigDiagnostics } from './diagnostics';
import { RunManager } from './runs';
import { RunDirWatcher } from './run_watcher';
import { RunsTreeProvider, type RunsTreeNode } from './runs_tree';
import { SweepManager } from './sweeps';
import { QueryClient, TableReader, WorkerClient } from './worker_client';

export class Ctx {
  readonly log: vscode.LogOutputChannel;
  readonly cliPath: string;
  readonly runs: RunManager;
  /** Run directories changed on disk (run_watcher.ts says why this is the one way to watch them). */
  readonly runWatcher: RunDirWatcher;
  readonly tree: RunsTreeProvider;
  readonly treeView: vscode.TreeView<RunsTreeNode>;
  readonly diagnostics: ConfigDiagnostics;
  /** The engine's one-shot commands (analyze, Slurm submit/status/cancel), with the Node that trains. */
  readonly engineCli: EngineCli;
  readonly analysis: AnalysisRunner;
  readonly sweeps: SweepManager;
  /** Step tables and Browse Rollouts' queries, read by one worker thread, never on the host's main thread (worker_client.ts). */
  readonly tables: TableReader;
  readonly queries: QueryClient;

  constructor(readonly extCtx: vscode.ExtensionContext) {
    this.log = this.pushExtCleanup(vscode.window.createOutputChannel('Credit Lens', { log: true }));
    this.cliPath = extCtx.asAbsolutePath('dist/engine/cli.js');
    this.runs = new RunManager(this.cliPath, this.log);
    // Not on the cleanup list: deactivate() awaits runs.dispose() so engines checkpoint before the host exits.
    this.runWatcher = this.pushExtCleanup(new RunDirWatcher());
    // One worker program and one client, started twice: the Runs tree's and the heatmap's step reads come in bursts, and a
    // Browse Rollouts query (or its index load) must not wait behind them, nor they behind it.
    const worker = extCtx.asAbsolutePath('dist/extension/run_worker.js');
    this.tables = new TableReader(this.pushExtCleanup(new WorkerClient(worker)));
    this.queries = new QueryClient(this.pushExtCleanup(new WorkerClient(worker)));
    this.tree = this.pushExtCleanup(new RunsTreeProvider(this.runs, this.runWatcher, this.tables));
    this.treeView = this.pushExtCleanup(
      vscode.window.createTreeView('creditLens.runs', { treeDataProvider: this.tree, showCollapseAll: true, canSelectMany: true }),
    );
    this.tree.startRescan(this.treeView);
    this.diagnostics = this.pushExtCleanup(new ConfigDiagnostics());
    this.engineCli = new EngineCli(this.cliPath, () => readSettings().nodePath);
    this.analysis = this.pushExtCleanup(
      new AnalysisRunner(
        this.engineCli,
        () => this.sweepsChanged(),
        (m) => this.log.warn(m),
      ),
    );
    this.sweeps = this.pushExtCleanup(new SweepManager(extCtx.workspaceState, this.runs, this.analysis, this.engineCli, this.log));
    this.tree.setSweeps(this.sweeps);
    this.tree.setLog(this.log);
  }

  get extensionUri(): vscode.Uri {
    return this.extCtx.extensionUri;
  }

  /** A command that lives for the activation; a failure is logged with its stack and shown, never thrown at VS Code. */
  registerCommand(id: string, fn: (...args: never[]) => unknown): vscode.Disposable {
    return this.pushExtCleanup(
      vscode.commands.registerCommand(id, async (...args: never[]) => {
        try {
          return await fn(...args);
        } catch (e) {
          this.log.error(`${id}: ${(e as Error).stack ?? e}`);
          void vscode.window.showErrorMessage(`Credit Lens: ${(e as Error).message}`);
          return undefined;
        }
      }),
    );
  }

  pushExtCleanup<T extends vscode.Disposable>(d: T): T {
    this.extCtx.subscriptions.push(d);
    return d;
  }

  private sweepsChanged(): void {
    for (const s of this.sweeps.all()) this.sweeps.notify(s.id);
  }
}
