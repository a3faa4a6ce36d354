// Sweeps: a named list of runs expanded from a grid, queued on the run manager, with one cancellable
// "k / n" notification for all of them. The list is kept in workspace state, so the summary table of a
// sweep still shows its rows after a reload.
import * as vscode from 'vscode';
import type { SweepRow, SweepView } from '../protocol/sweep_view';
import { readMetrics, readRunInfo } from '../engine/rundir/rundir';
import type { AnalysisRunner } from './analysis';
import { engineAlive } from './discovery';
import { summarizeMetrics } from './metrics_summary';
import { isEnded, isTraining } from './run_status';
import type { LiveRun, RunManager } from './runs';

export interface SweepRunRecord {
  index: number;
  name: string;
  strategy: string;
  params: Record<string, string | number | boolean | null>;
  sets: string[];
  runDir: string | null;
  cancelled: boolean;
}

export interface SweepRecord {
  id: string;
  title: string;
  configPath: string;
  created: string;
  runs: SweepRunRecord[];
}

const STATE_KEY = 'creditLens.sweeps';
/** Workspace state is not a database: the most recent sweeps are enough to reopen their tables. */
const MAX_SWEEPS = 50;

export class SweepManager implements vscode.Disposable {
  private readonly live = new Map<string, LiveRun[]>();
  private readonly changed = new vscode.EventEmitter<string>();
  /** Fires with a sweep id when any of its runs changes. */
  readonly onDidChange = this.changed.event;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly state: vscode.Memento, private readonly runs: RunManager, private readonly analysis: AnalysisRunner) {
    this.subscription = runs.onDidChange((run) => {
      const id = run.request.sweepId;
      if (!id) return;
      const rec = this.get(id);
      const idx = run.request.sweepIndex;
      if (rec && idx !== undefined && run.runDir && rec.runs[idx] && rec.runs[idx].runDir !== run.runDir) {
        rec.runs[idx].runDir = run.runDir;
        void this.save(rec);
      }
      this.changed.fire(id);
    });
  }

  all(): SweepRecord[] {
    return this.state.get<SweepRecord[]>(STATE_KEY, []);
  }

  get(id: string): SweepRecord | undefined {
    return this.all().find((s) => s.id === id);
  }

  private async save(rec: SweepRecord): Promise<void> {
    const rest = this.all().filter((s) => s.id !== rec.id);
    await this.state.update(STATE_KEY, [rec, ...rest].slice(0, MAX_SWEEPS));
  }

  /** Something a sweep's table shows changed outside its runs (an analysis finished). */
  notify(id: string): void {
    this.changed.fire(id);
  }

  isActive(id: string): boolean {
    return (this.live.get(id) ?? []).some((r) => !isEnded(r.status));
  }

  /** Queue every run of a sweep; resolves when all have ended (or were cancelled). */
  async start(title: string, configPath: string, runs: Omit<SweepRunRecord, 'index' | 'runDir' | 'cancelled'>[]): Promise<SweepRecord> {
    const created = new Date();
    const rec: SweepRecord = {
      id: `${created.getTime().toString(36)}-${Math.random().toString(36).slice(2, 6)}`,
      title, configPath, created: created.toISOString(),
      runs: runs.map((r, index) => ({ ...r, index, runDir: null, cancelled: false })),
    };
    await this.save(rec);
    const live = rec.runs.map((r) => this.runs.enqueue({
      configPath, sets: r.sets, label: r.name, sweepId: rec.id, sweepIndex: r.index, quiet: true,
    }));
    this.live.set(rec.id, live);
    this.updateContext();
    this.showProgress(rec, live);
    return rec;
  }

  async cancel(id: string): Promise<void> {
    const live = this.live.get(id) ?? [];
    const rec = this.get(id);
    // Queued runs first, so none of them starts while the training one checkpoints.
    const queued = live.filter((r) => r.status === 'queued');
    for (const r of queued) {
      await this.runs.stop(r);
      if (rec && r.request.sweepIndex !== undefined) rec.runs[r.request.sweepIndex].cancelled = true;
    }
    if (rec) await this.save(rec);
    await Promise.all(live.filter((r) => !isEnded(r.status)).map((r) => this.runs.stop(r)));
    this.changed.fire(id);
  }

  private showProgress(rec: SweepRecord, live: LiveRun[]): void {
    const n = live.length;
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Credit Lens sweep ${rec.title}`, cancellable: true },
      async (progress, token) => {
        token.onCancellationRequested(() => void this.cancel(rec.id));
        const report = () => {
          const done = live.filter((r) => isEnded(r.status)).length;
          const cur = live.find((r) => isTraining(r.status));
          progress.report({
            message: `${done} / ${n}${cur ? ` · ${cur.name ?? cur.request.label} step ${cur.step}/${cur.total ?? '?'}` : ''}`,
          });
        };
        const sub = this.runs.onDidChange((r) => r.request.sweepId === rec.id && report());
        report();
        let done = 0;
        await Promise.all(live.map((r) => r.done.then(() => progress.report({ increment: 100 / n, message: `${++done} / ${n}` }))));
        sub.dispose();
        this.updateContext();
        const failed = live.filter((r) => r.status === 'failed').length;
        const cancelled = live.filter((r) => r.status === 'cancelled' || r.status === 'stopped').length;
        const summary = `Credit Lens sweep ${rec.title}: ${n - failed - cancelled} of ${n} runs completed` +
          `${failed ? `, ${failed} failed` : ''}${cancelled ? `, ${cancelled} stopped or cancelled` : ''}.`;
        void vscode.window.showInformationMessage(summary, 'Open Summary').then((b) => {
          if (b) void vscode.commands.executeCommand('creditLens.openSweepSummary', rec.id);
        });
      },
    );
  }

  private updateContext(): void {
    const any = [...this.live.keys()].some((id) => this.isActive(id));
    void vscode.commands.executeCommand('setContext', 'creditLens.hasActiveSweeps', any);
  }

  /** The summary table's content, from run.json and metrics.jsonl of every run (live state for queued ones). */
  view(id: string): SweepView | null {
    const rec = this.get(id);
    if (!rec) return null;
    const live = this.live.get(id) ?? [];
    const rows: SweepRow[] = rec.runs.map((r) => {
      const run = live[r.index];
      const runDir = r.runDir ?? run?.runDir ?? null;
      const info = runDir ? readRunInfo(runDir) : null;
      let status: SweepRow['status'];
      const liveStatus = isTraining(run?.status) ? 'running' : run?.status;
      if (run && liveStatus && !isEnded(run.status)) status = liveStatus as SweepRow['status'];
      else if (info) status = isTraining(info.status) && !engineAlive(info) && !run ? 'failed' : info.status;
      else if (liveStatus) status = liveStatus as SweepRow['status'];
      else status = 'cancelled'; // queued in a window that has since closed: it never started
      if (r.cancelled && !info) status = 'cancelled';
      const s = runDir ? summarizeMetrics(readMetrics(runDir)) : null;
      return {
        index: r.index, name: r.name, strategy: r.strategy, params: r.params, status, runDir,
        step: run && !isEnded(run.status) && run.phase === 'grpo' ? run.step : s?.lastGrpoStep ?? null,
        totalSteps: info?.total_steps ?? (run?.phase === 'grpo' ? run.total : null),
        finalEvalSuccess: s?.finalEvalSuccess ?? null,
        bestEvalSuccess: s?.bestEvalSuccess ?? null,
        stepsTo10pct: s?.stepsToThreshold ?? null,
        meanGradNorm: s?.meanGradNorm ?? null,
        fillerReasoningRatio: runDir && (status === 'completed' || status === 'stopped') ? this.analysis.ratio(runDir, info) : null,
      };
    });
    return {
      sweepId: rec.id, title: rec.title, configPath: rec.configPath, created: rec.created, rows,
      done: rows.filter((r) => isEnded(r.status)).length, total: rows.length,
      active: this.isActive(id),
    };
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}
