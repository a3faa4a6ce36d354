// Sweeps: a named list of runs expanded from a grid, queued on the run manager, with one cancellable
// "k / n" notification for all of them. The list is kept in workspace state, so the summary table of a
// sweep still shows its rows after a reload.
import * as vscode from 'vscode';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename } from 'node:path';
import { parse } from 'yaml';
import type { SlurmTaskJson, SlurmTaskStatus } from '../protocol/slurm';
import type { LocalSweepTaskJson } from '../protocol/sweep_record';
import type { SweepComparison, SweepRow, SweepView } from '../protocol/sweep_view';
import type { EngineCli } from './engine_cli';
import { readMetrics, readRunInfo } from '../engine/rundir/rundir';
import { processAlive } from '../engine/rundir/run_lock';
import type { AnalysisRunner } from './analysis_runner';
import { engineAlive, readLocalSweep, type FoundSweep } from './discovery';
import { summarizeMetrics } from './metrics_summary';
import { isEnded, isTraining } from './run_status';
import type { LiveRun, RunManager } from './runs';
import { slurmRowStatus, slurmTaskActive } from './slurm_status';
import { SLURM_ACTIVE_STATES } from '../protocol/slurm';

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
  /** A sweep sent to Slurm: its job array and its folder (sweep.json, the script, logs). */
  slurm?: { jobId: string; sweepDir: string };
  /** A sweep trained by `credit-lens sweep` in a terminal: its folder, whose sweep.json that process keeps up to date. */
  local?: { sweepDir: string };
}

const STATE_KEY = 'creditLens.sweeps';

/** A sweep row's strategy and knobs from a task of a record on disk (Slurm records before this field: its config). */
function runOfTask(t: LocalSweepTaskJson | SlurmTaskJson): Pick<SweepRunRecord, 'index' | 'name' | 'strategy' | 'params' | 'sets'> {
  let strategy = t.strategy;
  if (!strategy && 'config' in t) {
    try {
      strategy = (parse(readFileSync(t.config, 'utf8')) as { credit?: { strategy?: string } })?.credit?.strategy;
    } catch {
      // the task's config is gone: the row says so through its name
    }
  }
  const params =
    t.params ??
    Object.fromEntries(
      Object.entries(t.overrides)
        .filter(([k]) => k !== 'seed')
        .map(([k, v]) => [k, typeof v === 'object' && v !== null ? JSON.stringify(v) : (v as string)]),
    );
  return { index: t.index, name: t.name, strategy: strategy ?? 'none', params, sets: [] };
}

/** Workspace state is not a database: the most recent sweeps are enough to reopen their tables. */
const MAX_SWEEPS = 50;

export class SweepManager implements vscode.Disposable {
  private readonly live = new Map<string, LiveRun[]>();
  private readonly changed = new vscode.EventEmitter<string>();
  /** Fires with a sweep id when any of its runs changes. */
  readonly onDidChange = this.changed.event;
  private readonly subscription: vscode.Disposable;

  /** The last Slurm status of each Slurm sweep, by sweep id; polled while any task waits or runs. */
  private readonly slurmTasks = new Map<string, SlurmTaskStatus[]>();
  /** Why Slurm did not answer the last poll of a sweep, by sweep id (null once it answers again). */
  private readonly slurmErrors = new Map<string, string | null>();
  private readonly slurmPolls = new Map<string, { timer: NodeJS.Timeout | undefined; abort: AbortController; soon(): void }>();

  constructor(
    private readonly state: vscode.Memento,
    private readonly runs: RunManager,
    private readonly analysis: AnalysisRunner,
    private readonly cli: EngineCli,
    private readonly log: vscode.LogOutputChannel,
  ) {
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
    // Slurm sweeps outlive the window that submitted them: watch the unfinished ones again after a reload.
    for (const rec of this.all()) if (rec.slurm) this.watchSlurm(rec);
  }

  /** Submits a sweep as one Slurm job array through the engine CLI; its runs' folders are known at once. */
  async startSlurm(
    title: string,
    configPath: string,
    sets: string[],
    runs: Omit<SweepRunRecord, 'index' | 'runDir' | 'cancelled' | 'sets'>[],
  ): Promise<SweepRecord> {
    const sweep = await this.cli.slurmSubmit(configPath, sets);
    const rec: SweepRecord = {
      ...newSweepRecord(title, configPath),
      runs: sweep.tasks.map((t, index) => ({ ...runs[index], name: t.name, index, sets: [], runDir: t.run_dir, cancelled: false })),
      slurm: { jobId: sweep.job_id ?? '', sweepDir: sweep.sweep_dir },
    };
    await this.save(rec);
    this.log.info(`sweep ${title}: submitted Slurm job ${sweep.job_id} (${sweep.tasks.length} runs, ${sweep.script})`);
    this.watchSlurm(rec);
    return rec;
  }

  /**
   * Polls `credit-lens slurm status` for one sweep: every 2 s at first, backing off to 30 s, and stopping once no
   * task waits or runs. The call runs in a child process with a time budget, so a slow controller never blocks the
   * host; a failed poll is logged and retried later.
   */
  private watchSlurm(rec: SweepRecord): void {
    if (!rec.slurm || this.slurmPolls.has(rec.id)) return;
    const poll = { timer: undefined as NodeJS.Timeout | undefined, abort: new AbortController(), soon: () => {} };
    this.slurmPolls.set(rec.id, poll);
    let delay = 2000;
    const tick = async () => {
      try {
        const st = await this.cli.slurmStatus(rec.slurm!.sweepDir, poll.abort.signal);
        const error = st.slurm_error ?? null;
        if (error !== (this.slurmErrors.get(rec.id) ?? null)) {
          if (error) this.log.warn(`sweep ${rec.title}: Slurm did not answer: ${error}; asking again`);
          this.slurmErrors.set(rec.id, error);
          this.changed.fire(rec.id);
        }
        // Silence is not an answer: the tasks keep their last known state, and polling goes on (backing off).
        if (!error) {
          const before = JSON.stringify(this.slurmTasks.get(rec.id) ?? null);
          this.slurmTasks.set(rec.id, st.tasks);
          if (JSON.stringify(st.tasks) !== before) {
            this.changed.fire(rec.id);
            delay = 2000;
          }
        }
        if (!error && !st.tasks.some(slurmTaskActive)) {
          this.slurmPolls.delete(rec.id);
          this.updateContext();
          this.changed.fire(rec.id);
          return;
        }
      } catch (e) {
        if (poll.abort.signal.aborted) return;
        this.log.warn(`sweep ${rec.title}: Slurm status failed: ${(e as Error).message}`);
      }
      this.updateContext();
      delay = Math.min(30_000, delay * 1.5);
      poll.timer = setTimeout(() => void tick(), delay);
    };
    // A run directory changed (a run ended, one started): ask Slurm again now rather than at the backed-off time.
    poll.soon = () => {
      if (!poll.timer) return; // a poll is in flight
      clearTimeout(poll.timer);
      delay = 2000;
      poll.timer = setTimeout(() => void tick(), 300);
    };
    void tick();
  }

  /** The Slurm task that trains `runDir`, if it belongs to a Slurm sweep of this workspace. */
  slurmTaskOf(runDir: string): { sweep: SweepRecord; task: SlurmTaskStatus | null; index: number } | undefined {
    for (const rec of this.all()) {
      if (!rec.slurm) continue;
      const i = rec.runs.findIndex((r) => r.runDir === runDir);
      if (i >= 0) return { sweep: rec, task: this.slurmTasks.get(rec.id)?.find((t) => t.index === i) ?? null, index: i };
    }
    return undefined;
  }

  /** Tasks of Slurm sweeps that wait or run and have no run directory on disk yet (shown as queued in the tree). */
  pendingSlurmTasks(): { sweep: SweepRecord; task: SlurmTaskStatus }[] {
    const out: { sweep: SweepRecord; task: SlurmTaskStatus }[] = [];
    for (const rec of this.all()) {
      for (const t of (rec.slurm && this.slurmTasks.get(rec.id)) || []) if (t.run_status === null && slurmTaskActive(t)) out.push({ sweep: rec, task: t });
    }
    return out;
  }

  /** scancel one run of a Slurm sweep: its engine checkpoints and ends `stopped`, resumable. */
  async cancelSlurmTask(id: string, index: number): Promise<void> {
    const rec = this.get(id);
    if (!rec?.slurm) return;
    await this.cli.slurmCancel(rec.slurm.sweepDir, index);
    if (rec.runs[index] && !readRunInfo(rec.runs[index].runDir ?? '')) {
      rec.runs[index].cancelled = true;
      await this.save(rec);
    }
    this.slurmPolls.get(id)?.abort.abort();
    this.slurmPolls.delete(id);
    this.watchSlurm(rec);
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

  /** The record of a sweep folder found on disk (started from a terminal or another window), added once. */
  async adopt(found: FoundSweep): Promise<SweepRecord> {
    const known = this.all().find((r) => (r.local ?? r.slurm)?.sweepDir === found.sweepDir);
    if (known) return known;
    const id = `${found.sweepDir.split(/[\\/]/).pop()}-${createHash('sha256').update(found.sweepDir).digest('hex').slice(0, 8)}`;
    let rec: SweepRecord;
    if ('local' in found) {
      const j = found.local;
      rec = {
        id,
        title: j.name,
        configPath: j.config,
        created: j.created,
        runs: j.tasks.map((t) => ({ ...runOfTask(t), runDir: t.run_dir, cancelled: t.outcome === 'skipped' })),
        local: { sweepDir: found.sweepDir },
      };
    } else {
      const j = found.slurm;
      rec = {
        id,
        title: basename(j.config).replace(/\.credit\.ya?ml$/, ''),
        configPath: j.config,
        created: j.created,
        runs: j.tasks.map((t) => ({ ...runOfTask(t), runDir: t.run_dir, cancelled: j.cancelled?.includes(t.index) ?? false })),
        slurm: { jobId: j.job_id ?? '', sweepDir: found.sweepDir },
      };
    }
    await this.save(rec);
    this.log.info(`sweep ${rec.title}: opened from ${found.sweepDir}`);
    if (rec.slurm) this.watchSlurm(rec);
    return rec;
  }

  /** A terminal sweep's record as its process last wrote it: run folders as they start, and whether it still runs. */
  private refreshLocal(rec: SweepRecord): { pid: number | null; outcome: Map<number, string> } {
    const j = rec.local ? readLocalSweep(rec.local.sweepDir) : null;
    if (!j) return { pid: null, outcome: new Map() };
    for (const t of j.tasks) if (rec.runs[t.index] && t.run_dir) rec.runs[t.index].runDir = t.run_dir;
    // `pid`: the sweep's process while it still trains here, else null
    const pid = j.pid !== null && j.host === hostname() && processAlive(j.pid) ? j.pid : null;
    return { pid, outcome: new Map(j.tasks.filter((t) => t.outcome).map((t) => [t.index, t.outcome!])) };
  }

  /** Something a sweep's table shows changed outside its runs (an analysis finished). */
  notify(id: string): void {
    this.changed.fire(id);
  }

  isActive(id: string): boolean {
    const rec = this.get(id);
    if (rec?.local) return this.refreshLocal(rec).pid !== null;
    if (rec?.slurm) return this.slurmPolls.has(id) || (this.slurmTasks.get(id) ?? []).some(slurmTaskActive);
    return (this.live.get(id) ?? []).some((r) => !isEnded(r.status));
  }

  /** Queue every run of a sweep; resolves when all have ended (or were cancelled). */
  async start(title: string, configPath: string, runs: Omit<SweepRunRecord, 'index' | 'runDir' | 'cancelled'>[]): Promise<SweepRecord> {
    const rec: SweepRecord = { ...newSweepRecord(title, configPath), runs: runs.map((r, index) => ({ ...r, index, runDir: null, cancelled: false })) };
    await this.save(rec);
    const live = rec.runs.map((r) =>
      this.runs.enqueue({
        configPath,
        sets: r.sets,
        label: r.name,
        sweepId: rec.id,
        sweepIndex: r.index,
        quiet: true,
      }),
    );
    this.live.set(rec.id, live);
    this.updateContext();
    this.showProgress(rec, live);
    return rec;
  }

  async cancel(id: string): Promise<void> {
    const rec = this.get(id);
    if (rec?.slurm) {
      // The whole array: Slurm signals each running engine (checkpoint, `stopped`) and drops the pending tasks.
      await this.cli.slurmCancel(rec.slurm.sweepDir);
      for (const r of rec.runs) if (!readRunInfo(r.runDir ?? '')) r.cancelled = true;
      await this.save(rec);
      this.slurmPolls.get(id)?.abort.abort();
      this.slurmPolls.delete(id);
      this.watchSlurm(rec);
      return;
    }
    if (rec?.local) {
      // The terminal's `credit-lens sweep` stops as on Ctrl-C: the training run checkpoints (`stopped`), the rest are skipped.
      const { pid } = this.refreshLocal(rec);
      if (pid !== null) process.kill(pid, 'SIGINT');
      this.changed.fire(id);
      return;
    }
    const live = this.live.get(id) ?? [];
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
        const summary =
          `Credit Lens sweep ${rec.title}: ${n - failed - cancelled} of ${n} runs completed` +
          `${failed ? `, ${failed} failed` : ''}${cancelled ? `, ${cancelled} stopped or cancelled` : ''}.`;
        void vscode.window.showInformationMessage(summary, 'Open Summary').then((b) => {
          if (b) void vscode.commands.executeCommand('creditLens.openSweepSummary', rec.id);
        });
      },
    );
  }

  private updateContext(): void {
    const any = [...this.live.keys(), ...this.slurmPolls.keys()].some((id) => this.isActive(id));
    void vscode.commands.executeCommand('setContext', 'creditLens.hasActiveSweeps', any);
  }

  /** The summary table's content, from run.json and metrics.jsonl of every run (live state for queued ones). */
  view(id: string): SweepView | null {
    const rec = this.get(id);
    if (!rec) return null;
    const live = this.live.get(id) ?? [];
    const slurm = rec.slurm ? (this.slurmTasks.get(rec.id) ?? []) : null;
    const terminal = rec.local ? this.refreshLocal(rec) : null;
    const rows: SweepRow[] = rec.runs.map((r) => {
      const run = live[r.index];
      const runDir = r.runDir ?? run?.runDir ?? null;
      const info = runDir ? readRunInfo(runDir) : null;
      const task = slurm?.find((t) => t.index === r.index) ?? null;
      let status: SweepRow['status'];
      const liveStatus = isTraining(run?.status) ? 'running' : run?.status;
      if (run && liveStatus && !isEnded(run.status)) status = liveStatus as SweepRow['status'];
      else if (info) status = isTraining(info.status) && !engineAlive(info) && !run ? 'failed' : info.status;
      else if (liveStatus) status = liveStatus as SweepRow['status'];
      else status = 'cancelled'; // queued in a window that has since closed: it never started
      if (r.cancelled && !info) status = 'cancelled';
      if (terminal && !info)
        status = terminal.outcome.get(r.index) === 'failed' ? 'failed' : terminal.pid !== null && !terminal.outcome.has(r.index) ? 'queued' : 'cancelled';
      if (rec.slurm) status = slurmRowStatus(task, info?.status ?? null, r.cancelled);
      const s = runDir ? summarizeMetrics(readMetrics(runDir)) : null;
      return {
        index: r.index,
        name: r.name,
        strategy: r.strategy,
        params: r.params,
        status,
        runDir,
        step: run && !isEnded(run.status) && run.phase === 'grpo' ? run.step : (s?.lastGrpoStep ?? null),
        totalSteps: info?.total_steps ?? (run?.phase === 'grpo' ? run.total : null),
        finalEvalSuccess: s?.finalEvalSuccess ?? null,
        bestEvalSuccess: s?.bestEvalSuccess ?? null,
        stepsTo10pct: s?.stepsToThreshold ?? null,
        meanGradNorm: s?.meanGradNorm ?? null,
        fillerReasoningRatio: runDir && (status === 'completed' || status === 'stopped') ? this.analysis.ratio(runDir, info) : null,
        slurm: rec.slurm
          ? {
              job: task?.slurm_job ?? `${rec.slurm.jobId}_${r.index}`,
              state: task?.slurm_state ?? null,
              reason: task?.slurm_reason ?? null,
              summary: task?.summary ?? 'waiting for squeue',
            }
          : null,
      };
    });
    const comparison = this.comparison(rows);
    if (rows.some((r) => isEnded(r.status) && r.slurm?.state && (SLURM_ACTIVE_STATES as readonly string[]).includes(r.slurm.state)))
      this.slurmPolls.get(id)?.soon();
    return {
      sweepId: rec.id,
      title: rec.title,
      configPath: rec.configPath,
      created: rec.created,
      rows,
      done: rows.filter((r) => isEnded(r.status)).length,
      total: rows.length,
      // a terminal sweep's record was just read above: not again
      active: terminal ? terminal.pid !== null : this.isActive(id),
      slurm: rec.slurm ? { jobId: rec.slurm.jobId, sweepDir: rec.slurm.sweepDir, error: this.slurmErrors.get(rec.id) ?? null } : null,
      comparison,
    };
  }

  /**
   * The completed runs grouped by configuration (a run's name without its `-seedN`) against the baseline group —
   * plain GRPO (strategy none) when the sweep has it, else the first row's — through `credit-lens compare`, re-run
   * each time another run completes.
   */
  private comparison(rows: SweepRow[]): SweepComparison | null {
    const c = this.analysis.compareGroups(
      rows.map((r) => ({ dir: r.runDir ?? '', name: r.name, strategy: r.strategy, ready: r.status === 'completed' && !!r.runDir })),
      null,
      '',
    );
    const pending = rows.length - c.ready;
    const waiting = pending ? `${pending} of ${rows.length} runs not completed yet; the table covers the completed ones.` : '';
    switch (c.state) {
      case 'single':
        return null;
      case 'waiting':
        return { report: null, note: `The comparison with ${c.baseline} appears once it and another configuration have a completed run. ${waiting}`.trim() };
      case 'running':
        return { report: null, note: `Comparing ${c.ready} completed runs with ${c.baseline} on the same test instances…` };
      case 'failed':
        return { report: null, note: `credit-lens compare failed: ${c.error}` };
      case 'done':
        return { report: c.report, note: waiting };
    }
  }

  dispose(): void {
    for (const p of this.slurmPolls.values()) {
      p.abort.abort();
      clearTimeout(p.timer);
    }
    this.subscription.dispose();
    this.changed.dispose();
  }
}

/** A new sweep's record header (id, title, config, when), for a local sweep and a Slurm one alike. */
function newSweepRecord(title: string, configPath: string): Omit<SweepRecord, 'runs'> {
  const created = new Date();
  return { id: `${created.getTime().toString(36)}-${Math.random().toString(36).slice(2, 6)}`, title, configPath, created: created.toISOString() };
}
