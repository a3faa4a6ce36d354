// The host half of the run dashboard and the run comparison: loads each run from disk, forwards the
// `run/metrics` rows of runs this window trains as they arrive (timestamped, so the webview can measure
// the update latency), follows metrics.jsonl for runs trained elsewhere, and saves exported charts.
import { writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { MetricsRow } from '../../protocol/index';
import { metricsChecks, type MetricsPanelState, type MetricsProtocol } from '../../protocol/metrics_view';
import { readMetrics, readRunInfo } from '../../engine/rundir/rundir';
import { isEnded, isTraining, type LiveStatus } from '../run_status';
import type { LiveRun, RunManager } from '../runs';
import type { RunDirWatcher } from '../run_watcher';
import { WebviewPanelHost } from '../webview';
import type { AnalysisRunner } from '../analysis_runner';
import { pickRunDirs } from '../pick';
import { loadRunData, pngBytes, probeRows, safeFileName } from './run_data';

/** The latency log the panel keeps for its median. */
const MAX_LATENCIES = 500;

export interface PanelDeps {
  extensionUri: vscode.Uri;
  runs: RunManager;
  log: vscode.LogOutputChannel;
  runWatcher: RunDirWatcher;
  /** `credit-lens compare` in the background, for Compare Runs' test table */
  analysis: AnalysisRunner;
}

type Mode = MetricsPanelState['mode'];

/** A live status as the charts show it: a run between "starting" and "stopping" is running. */
function shownStatus(s: LiveStatus): string {
  return isTraining(s) ? 'running' : s;
}

export abstract class MetricsPanel extends WebviewPanelHost<MetricsProtocol> {
  /** Rows of metrics.jsonl already sent, per run, for runs followed through the file system. */
  private readonly diskRows = new Map<string, number>();
  private readonly lastLive = new Map<string, MetricsRow | null>();
  private readonly lastStatus = new Map<string, string>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly latencies: number[] = [];
  private ready = false;

  protected constructor(
    panel: vscode.WebviewPanel,
    protected readonly deps: PanelDeps,
    readonly mode: Mode,
    protected runDirs: string[],
  ) {
    // The dashboard and the comparison are one bundle; the init message tells it which to be.
    super(panel, deps.extensionUri, 'metrics', metricsChecks, deps.log);
    panel.iconPath = vscode.Uri.joinPath(deps.extensionUri, 'media', 'credit-lens.svg');
    deps.runs.onDidChange((run) => this.onLive(run), null, this.disposables);
    // Runs trained by another window or the CLI reach us only through metrics.jsonl and run.json.
    deps.runWatcher.onDidChange((dir) => this.runDirs.includes(dir) && this.scheduleDiskRead(dir), null, this.disposables);
    deps.runWatcher.onDidChangeProbes((dir) => this.runDirs.includes(dir) && this.sendProbes(dir), null, this.disposables);
    this.disposables.push({ dispose: () => this.clearTimers() });
    this.retitle();
  }

  get key(): string {
    return [...this.runDirs].sort().join('\n');
  }

  protected abstract retitle(): void;

  /** Show other runs with this one: the comparison takes over this panel's runs plus the picked ones. */
  protected abstract compareWith(runDirs: string[]): void;

  protected setRuns(runDirs: string[]): void {
    this.runDirs = [...new Set(runDirs)];
    this.clearTimers();
    this.retitle();
    if (this.ready) this.init();
  }

  private liveRun(runDir: string): LiveRun | undefined {
    const r = this.deps.runs.byRunDir(runDir);
    return r && !isEnded(r.status) ? r : undefined;
  }

  private init(): void {
    const runs = this.runDirs.map((dir) => {
      const live = this.liveRun(dir);
      const data = loadRunData(dir, live ? shownStatus(live.status) : undefined);
      this.diskRows.set(dir, data.rows.length);
      this.lastLive.set(dir, live?.lastMetrics ?? null);
      this.lastStatus.set(dir, data.status);
      return data;
    });
    this.post({ kind: 'notification', method: 'metrics/init', params: { mode: this.mode, runs } });
    this.afterInit();
  }

  /** Compare Runs sends its test table after the charts. */
  protected afterInit(): void {}

  /** A run's status changed on disk or live (its comparison may now be computed). */
  protected onStatusChange(_dir: string): void {}

  protected get isReady(): boolean {
    return this.ready;
  }

  protected setBaseline(_group: string): void {}

  protected setStep(_step: number | null): void {}

  /** A `run/metrics` notification reaches the RunManager, which fires synchronously: now is its arrival. */
  private onLive(run: LiveRun): void {
    if (!this.ready || !run.runDir || !this.runDirs.includes(run.runDir)) return;
    const receivedAt = Date.now();
    const dir = run.runDir;
    const status = shownStatus(run.status);
    const row = run.lastMetrics;
    const newRow = row && row !== this.lastLive.get(dir);
    if (!newRow && status === this.lastStatus.get(dir)) return;
    this.lastLive.set(dir, row);
    const changed = status !== this.lastStatus.get(dir);
    this.lastStatus.set(dir, status);
    this.post({
      kind: 'notification',
      method: 'metrics/append',
      params: { runDir: dir, rows: newRow ? [row] : [], status, receivedAt: newRow ? receivedAt : null },
    });
    if (changed) this.onStatusChange(dir);
  }

  private clearTimers(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  private scheduleDiskRead(dir: string): void {
    if (this.timers.has(dir)) return;
    this.timers.set(
      dir,
      setTimeout(() => {
        this.timers.delete(dir);
        this.readDisk(dir);
      }, 300),
    );
  }

  private readDisk(dir: string): void {
    // This window's own runs arrive through run/metrics, sooner than through the file.
    if (!this.ready || this.liveRun(dir)) return;
    const rows = readMetrics(dir);
    const sent = this.diskRows.get(dir) ?? 0;
    const status = readRunInfo(dir)?.status ?? 'unknown';
    if (rows.length < sent) {
      // A resume cut metrics.jsonl back to its checkpoint: start over from the file.
      this.init();
      return;
    }
    if (rows.length === sent && status === this.lastStatus.get(dir)) return;
    this.diskRows.set(dir, rows.length);
    const changed = status !== this.lastStatus.get(dir);
    this.lastStatus.set(dir, status);
    this.post({ kind: 'notification', method: 'metrics/append', params: { runDir: dir, rows: rows.slice(sent), status, receivedAt: null } });
    if (changed) this.onStatusChange(dir);
  }

  /**
   * A probe that finished while the dashboard is open: its step's row (lift, rank, placebo, reliability) joins the
   * charts at once, merged into the step's point as the charts merge every row (a live run's too).
   */
  private sendProbes(dir: string): void {
    if (!this.ready) return;
    const rows = probeRows(dir);
    if (!rows.length) return;
    const status = this.lastStatus.get(dir) ?? readRunInfo(dir)?.status ?? 'unknown';
    this.post({ kind: 'notification', method: 'metrics/append', params: { runDir: dir, rows, status, receivedAt: null } });
  }

  protected onMessage(m: MetricsProtocol['toHost']): void {
    switch (m.method) {
      case 'webview/ready':
        this.ready = true;
        this.init();
        break;
      case 'metrics/drawn': {
        this.latencies.push(m.params.latencyMs);
        // A dashboard left open on a long run gets thousands of points: keep the last few hundred.
        if (this.latencies.length > MAX_LATENCIES) this.latencies.splice(0, this.latencies.length - MAX_LATENCIES);
        const sorted = [...this.latencies].sort((a, b) => a - b);
        const median = sorted[Math.floor((sorted.length - 1) / 2)];
        this.deps.log.info(
          `dashboard: ${basename(m.params.runDir)} step ${m.params.step} drawn ${m.params.latencyMs} ms after its run/metrics notification (median ${median} ms over ${sorted.length})`,
        );
        break;
      }
      case 'metrics/exportPng':
        void this.save(`${safeFileName(m.params.chartId)}.png`, { 'PNG image': ['png'] }, () => pngBytes(m.params.dataUrl));
        break;
      case 'metrics/exportCsv':
        void this.save(`${safeFileName(m.params.chartId)}.csv`, { CSV: ['csv'] }, () => m.params.csv);
        break;
      case 'metrics/openAnalysis':
        void vscode.commands.executeCommand('creditLens.openAnalysis', m.params.runDir);
        break;
      case 'metrics/openRun':
        void vscode.commands.executeCommand('creditLens.openDashboard', m.params.runDir);
        break;
      case 'metrics/compareWith':
        void pickRunDirs(this.mode === 'compare' ? 'add runs to the comparison' : `compare ${basename(this.runDirs[0])} with`, {
          exclude: m.params.runDirs,
        }).then((picked) => picked.length && this.compareWith(picked));
        break;
      case 'metrics/setBaseline':
        this.setBaseline(m.params.group);
        break;
      case 'metrics/setStep':
        this.setStep(m.params.step);
        break;
    }
  }

  /** Save dialog, defaulting to the (first) run's folder; a comparison's file is named after its runs' parent. */
  private async save(fileName: string, filters: Record<string, string[]>, bytes: () => string | Buffer): Promise<void> {
    const first = this.runDirs[0];
    const folder = this.mode === 'compare' ? dirname(first) : first;
    const name = this.mode === 'compare' ? `compare-${fileName}` : fileName;
    const target = await vscode.window.showSaveDialog({ defaultUri: vscode.Uri.file(join(folder, name)), filters, title: 'Credit Lens: export chart' });
    if (!target) return;
    try {
      writeFileSync(target.fsPath, bytes());
    } catch (e) {
      void vscode.window.showErrorMessage(`Credit Lens: could not write ${target.fsPath}: ${(e as Error).message}`);
      return;
    }
    this.deps.log.info(`exported ${target.fsPath}`);
    const choice = await vscode.window.showInformationMessage(`Credit Lens: saved ${basename(target.fsPath)}.`, 'Open');
    if (choice === 'Open') await vscode.commands.executeCommand('vscode.open', target);
  }
}

export function stateRunDirs(state: unknown): string[] {
  return metricsChecks.state(state) ? state.runDirs : [];
}
