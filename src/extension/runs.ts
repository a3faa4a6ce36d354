// The run manager: a queue of run requests, at most `creditLens.maxConcurrentRuns` engine processes at a
// time, each one's progress in a cancellable notification and the status bar, its log in the output
// channel, and a crash turned into a failed run the user can resume.
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { MetricsRow, Phase, RunStatus } from '../protocol/index';
import { readMetrics, readRunInfo, updateRunInfo } from '../engine/rundir/rundir';
import { percent, summarizeMetrics } from './metrics_summary';
import { pythonEnv, readSettings } from './vscode_settings';
import { isEnded, isTraining, type LiveStatus } from './run_status';
import { EngineProcess } from './engine';
import { chooseNode } from './node_runtime';
import { formatFixed } from '../protocol/number_format';

export interface RunRequest {
  /** The config the run trains (absolute). For a resume, the config it was first trained from. */
  configPath: string;
  /** `--set key=value` pairs, the value in the CLI's YAML syntax. */
  sets: string[];
  /** Continue this run directory from its latest checkpoint. */
  resumeDir?: string;
  /** What the user sees before the engine names the run. */
  label: string;
  sweepId?: string;
  sweepIndex?: number;
  /** No notification of its own: a sweep shows one for all its runs. */
  quiet?: boolean;
}

export interface LiveRun {
  readonly key: number;
  readonly request: RunRequest;
  status: LiveStatus;
  runDir: string | null;
  name: string | null;
  phase: Phase | null;
  step: number;
  total: number | null;
  lastMetrics: MetricsRow | null;
  error: string | null;
  /** The engine's process id (run.json records it too, which matches a new run directory to its run). */
  pid: number | null;
  /** Settles when the run has ended or was taken off the queue. */
  readonly done: Promise<LiveRun>;
}

/** A run directory whose checkpoints/ holds a checkpoint can be resumed (the engine picks the latest). */
export function isResumable(runDir: string): boolean {
  try {
    return readdirSync(join(runDir, 'checkpoints'), { withFileTypes: true }).some((e) => e.isDirectory() && /^step-\d+$/.test(e.name));
  } catch {
    return false;
  }
}

interface Slot {
  run: LiveRun;
  engine: EngineProcess | null;
  settle: (r: LiveRun) => void;
  tail: string[];
  finishedReported: boolean;
  stopRequested: boolean;
  progressTick: () => void;
}

const TAIL_LINES = 12;

export class RunManager implements vscode.Disposable {
  private readonly slots = new Map<number, Slot>();
  private readonly queue: Slot[] = [];
  private nextKey = 1;
  private readonly changed = new vscode.EventEmitter<LiveRun>();
  /** Fires on every status, progress and metrics change of a live run. */
  readonly onDidChange = this.changed.event;
  private readonly statusItem: vscode.StatusBarItem;
  private disposed = false;

  constructor(
    private readonly cliPath: string,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.statusItem = vscode.window.createStatusBarItem('creditLens.runs', vscode.StatusBarAlignment.Left, 10);
    this.statusItem.name = 'Credit Lens runs';
    this.statusItem.command = 'creditLens.runs.focus';
  }

  /** Every run this window launched, queued first-in first. */
  runs(): LiveRun[] {
    return [...this.slots.values()].map((s) => s.run);
  }

  active(): LiveRun[] {
    return this.runs().filter((r) => !isEnded(r.status));
  }

  byRunDir(runDir: string): LiveRun | undefined {
    const live = this.runs().filter((r) => r.runDir === runDir);
    return live.find((r) => !isEnded(r.status)) ?? live[live.length - 1];
  }

  /**
   * The live run a run directory on disk belongs to. The engine writes run.json (with its pid) before it
   * sends run/started, so for a moment only the pid connects the two.
   */
  match(runDir: string, pid: number | undefined): LiveRun | undefined {
    const byDir = this.byRunDir(runDir);
    if (byDir) return byDir;
    return pid ? this.runs().find((r) => r.pid === pid && !r.runDir && !isEnded(r.status)) : undefined;
  }

  /** Queue a run; it starts as soon as fewer than `maxConcurrentRuns` engines are training. */
  enqueue(request: RunRequest): LiveRun {
    if (!vscode.workspace.isTrusted) throw new Error(UNTRUSTED_MESSAGE);
    let settle!: (r: LiveRun) => void;
    const done = new Promise<LiveRun>((resolve) => (settle = resolve));
    // A resumed run shows where it stopped until the engine reports its first step.
    const resumed = request.resumeDir ? readRunInfo(request.resumeDir) : null;
    const run: LiveRun = {
      key: this.nextKey++,
      request,
      status: 'queued',
      runDir: request.resumeDir ?? null,
      name: resumed?.name ?? null,
      phase: resumed ? 'grpo' : null,
      step: resumed?.last_step ?? 0,
      total: resumed?.total_steps ?? null,
      lastMetrics: null,
      error: null,
      pid: null,
      done,
    };
    const slot: Slot = { run, engine: null, settle, tail: [], finishedReported: false, stopRequested: false, progressTick: () => {} };
    this.slots.set(run.key, slot);
    this.queue.push(slot);
    this.fire(run);
    this.pump();
    return run;
  }

  /** Stop a run: a queued one leaves the queue, a training one checkpoints and exits. */
  async stop(run: LiveRun): Promise<void> {
    const slot = this.slots.get(run.key);
    if (!slot || isEnded(run.status)) return;
    const qi = this.queue.indexOf(slot);
    if (qi >= 0) {
      this.queue.splice(qi, 1);
      this.end(slot, 'cancelled');
      return;
    }
    slot.stopRequested = true;
    run.status = 'stopping';
    this.fire(run);
    const graceMs = 1000 * readSettings().stopGraceSeconds;
    await slot.engine?.stop(graceMs);
    await run.done;
  }

  private pump(): void {
    if (this.disposed) return;
    const max = readSettings().maxConcurrentRuns;
    while (this.queue.length && this.runs().filter((r) => isTraining(r.status)).length < max) {
      this.start(this.queue.shift()!);
    }
    this.updateStatusBar();
  }

  private start(slot: Slot): void {
    const { run } = slot;
    const req = run.request;
    run.status = 'starting';
    this.fire(run);
    let node;
    try {
      const chosen = chooseNode(readSettings().nodePath);
      node = { ...chosen, env: { ...chosen.env, ...pythonEnv() } };
    } catch (e) {
      run.error = (e as Error).message;
      this.end(slot, 'failed');
      void vscode.window.showErrorMessage(run.error, 'Open Settings').then((b) => {
        if (b) void vscode.commands.executeCommand('workbench.action.openSettings', 'creditLens.nodePath');
      });
      return;
    }
    const args = ['train', req.configPath, ...req.sets.flatMap((s) => ['--set', s]), '--rpc'];
    if (req.resumeDir) args.push('--resume', req.resumeDir);
    const tag = () => `[${run.name ?? req.label}]`;
    this.log.info(`${tag()} ${node.command} (${node.reason}) ${[this.cliPath, ...args].join(' ')}`);

    const remember = (line: string) => {
      slot.tail.push(line);
      if (slot.tail.length > TAIL_LINES) slot.tail.shift();
    };
    const engine = new EngineProcess(node, this.cliPath, args, dirname(req.configPath), {
      started: (p) => {
        run.runDir = p.runDir;
        run.name = p.name;
        run.status = slot.stopRequested ? 'stopping' : 'running';
        this.fire(run);
      },
      progress: (p) => {
        run.phase = p.phase;
        run.step = p.step;
        run.total = p.total;
        slot.progressTick();
        this.fire(run);
      },
      metrics: (p) => {
        run.lastMetrics = p.row;
        this.fire(run);
      },
      log: (p) => {
        remember(p.message);
        const line = `${tag()} ${p.message}`;
        if (p.level === 'error') this.log.error(line);
        else if (p.level === 'warn') this.log.warn(line);
        else this.log.info(line);
      },
      finished: (p) => {
        slot.finishedReported = true;
        run.runDir = p.runDir;
        run.error = p.error ?? null;
        run.status = p.status;
      },
      stderr: (line) => {
        remember(line);
        this.log.info(`${tag()} ${line}`);
      },
    });
    slot.engine = engine;
    run.pid = engine.pid ?? null;
    if (!req.quiet) this.showProgress(slot);
    void engine.exited.then((exit) => this.onExit(slot, exit.code, exit.signal));
  }

  private onExit(slot: Slot, code: number | null, signal: string | null): void {
    const { run } = slot;
    if (slot.finishedReported && run.status !== 'running' && run.status !== 'starting' && run.status !== 'stopping') {
      this.end(slot, run.status as RunStatus);
      if (run.status === 'failed') this.reportFailure(slot, run.error ?? 'the engine reported a failure');
      if (run.status === 'completed') this.reportCompleted(slot);
      return;
    }
    // No run/finished reached us. run.json is the engine's own record and outlives the channel: a run that ended
    // there (completed, stopped, failed with its reason) ended so, whatever happened to the messages.
    const recorded = run.runDir ? readRunInfo(run.runDir) : null;
    if (recorded && recorded.status !== 'running') {
      run.status = recorded.status;
      run.error = recorded.error ?? null;
      this.log.warn(`[${run.name ?? run.request.label}] no end message from the engine; run.json says ${recorded.status}`);
      this.end(slot, recorded.status);
      if (recorded.status === 'failed') this.reportFailure(slot, recorded.error ?? 'the engine reported a failure');
      return;
    }
    // Nothing recorded either: killed after the stop grace period, or a crash (OOM, native abort, a bug).
    const status: RunStatus = slot.stopRequested ? 'stopped' : 'failed';
    const why = slot.stopRequested
      ? `killed after the stop grace period (${signal ?? `exit ${code}`})`
      : `the engine exited unexpectedly (${signal ? `signal ${signal}` : `exit code ${code}`})`;
    run.error = status === 'failed' ? why : null;
    if (run.runDir && existsSync(run.runDir)) {
      // The engine could not record its own end; keep the directory and say what happened in run.json.
      try {
        updateRunInfo(run.runDir, { status, ended: new Date().toISOString(), ...(status === 'failed' ? { error: why } : {}) });
      } catch (e) {
        this.log.warn(`could not update ${run.runDir}/run.json: ${(e as Error).message}`);
      }
    }
    this.end(slot, status);
    if (status === 'failed') this.reportFailure(slot, why);
  }

  /**
   * A finished run says so, with what it reached and the two views people open next. A sweep's runs are quiet: the
   * sweep's own notification reports them together.
   */
  private reportCompleted(slot: Slot): void {
    const { run } = slot;
    if (run.request.quiet || !run.runDir) return;
    const rows = readMetrics(run.runDir);
    const s = summarizeMetrics(rows);
    const before = rows.find((r) => r.phase === 'eval' && r.step === 0)?.eval_success;
    const evals =
      s.finalEvalSuccess !== null
        ? ` Greedy eval success ${before !== undefined ? `${percent(before, 1)} → ` : ''}${percent(s.finalEvalSuccess, 1)} at step ${s.lastGrpoStep}.`
        : '';
    void vscode.window
      .showInformationMessage(`Credit Lens: ${run.name ?? run.request.label} completed.${evals}`, 'Open Dashboard', 'Browse Rollouts')
      .then((choice) => {
        if (choice === 'Open Dashboard') void vscode.commands.executeCommand('creditLens.openDashboard', run.runDir);
        if (choice === 'Browse Rollouts') void vscode.commands.executeCommand('creditLens.browseRollouts', run.runDir);
      });
  }

  private reportFailure(slot: Slot, why: string): void {
    const { run } = slot;
    this.log.error(`[${run.name ?? run.request.label}] failed: ${why}`);
    // Stack frames say little to a user (they are in the log); the engine's own last messages do.
    const last = slot.tail.filter((l) => !/^\s*at\s/.test(l) && !l.includes(why)).slice(-2);
    const actions = ['Show Log'];
    if (run.runDir && isResumable(run.runDir)) actions.push('Resume from Checkpoint');
    // A notification shows no `detail` (only modal dialogs do), so the last lines go into the message itself.
    const tail = last.length ? ` Last lines: ${last.map((l) => l.trim()).join(' ⏎ ')}` : '';
    void vscode.window.showErrorMessage(`Credit Lens: run ${run.name ?? run.request.label} failed: ${why}.${tail}`, ...actions).then((choice) => {
      if (choice === 'Show Log') this.log.show(true);
      if (choice === 'Resume from Checkpoint' && run.runDir) void vscode.commands.executeCommand('creditLens.resume', run.runDir);
    });
  }

  private end(slot: Slot, status: LiveStatus): void {
    const { run } = slot;
    run.status = status;
    slot.engine = null;
    this.fire(run);
    slot.settle(run);
    this.pump();
  }

  private showProgress(slot: Slot): void {
    const { run } = slot;
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Credit Lens: ${run.request.label}`, cancellable: true },
      (progress, token) => {
        token.onCancellationRequested(() => void this.stop(run));
        let lastFraction = 0;
        let lastPhase: Phase | null = null;
        slot.progressTick = () => {
          const total = run.total ?? 0;
          const fraction = total > 0 ? Math.min(1, run.step / total) : 0;
          // VS Code's bar only moves forward; a new phase (SFT → GRPO) restarts the count in the message.
          const increment = run.phase === lastPhase ? Math.max(0, fraction - lastFraction) * 100 : fraction * 100;
          if (run.phase !== lastPhase) lastPhase = run.phase;
          lastFraction = fraction;
          const metric = run.lastMetrics?.reward_mean;
          progress.report({
            increment: run.phase === 'grpo' ? increment : 0,
            message: `${run.phase} step ${run.step}/${total}${metric !== undefined ? ` · reward ${formatFixed(metric, 3)}` : ''}`,
          });
        };
        return run.done;
      },
    );
  }

  private hadActive = false;

  private fire(run: LiveRun): void {
    this.updateStatusBar();
    const hasActive = this.active().length > 0;
    if (hasActive !== this.hadActive) {
      this.hadActive = hasActive;
      void vscode.commands.executeCommand('setContext', 'creditLens.hasActiveRuns', hasActive);
    }
    this.changed.fire(run);
  }

  private updateStatusBar(): void {
    const training = this.runs().filter((r) => isTraining(r.status));
    const queued = this.queue.length;
    if (!training.length && !queued) {
      this.statusItem.hide();
      return;
    }
    const parts = training.map((r) => `${r.name ?? r.request.label} ${r.phase ?? ''} ${r.step}/${r.total ?? '?'}`.replace(/\s+/g, ' '));
    this.statusItem.text = `$(sync~spin) ${parts.join(' · ') || 'starting'}${queued ? ` (+${queued} queued)` : ''}`;
    this.statusItem.tooltip = 'Credit Lens: training. Click to show the runs.';
    this.statusItem.show();
  }

  /** Closing VS Code: every engine checkpoints and exits, or is killed after a short grace. */
  async dispose(): Promise<void> {
    this.disposed = true;
    for (const slot of this.queue.splice(0)) this.end(slot, 'cancelled');
    // The extension host gives deactivate() only a few seconds: engines are asked to stop, waited for briefly, and
    // the ones still writing their checkpoint are left to finish detached — never killed in the middle of a write.
    const running = [...this.slots.values()].filter((s) => s.engine?.running);
    for (const s of running) {
      s.stopRequested = true;
      s.engine!.release();
    }
    await Promise.race([Promise.all(running.map((s) => s.engine!.exited)), new Promise((r) => setTimeout(r, 3000))]);
    this.statusItem.dispose();
    this.changed.dispose();
  }

  /** Statuses of run directories found on disk: run.json, unless this window is training it right now. */
  statusOf(runDir: string): LiveStatus | null {
    const live = this.byRunDir(runDir);
    if (live && !isEnded(live.status)) return live.status;
    return readRunInfo(runDir)?.status ?? null;
  }
}

export const UNTRUSTED_MESSAGE =
  'Credit Lens does not run experiments in an untrusted workspace: a config can name a JavaScript reward module ' +
  '(task.reward_module) that the engine would execute. Trust this workspace to run it. Existing runs can still be browsed.';
