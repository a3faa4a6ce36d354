// The training loop: optional SFT warm start, then GRPO steps (design.md#semantics), writing the run directory (design.md#run-directory).
// The loop reads rollout → update → eval → checkpoint; the run directory's lifecycle around it is lifecycle.ts, where the
// policy starts and how it is kept is restore.ts, and a rollout server is the session's sampler, which follows the policy.
import { backendInfo } from '../model/backend';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MetricsRow, RunInfo } from '../../protocol';
import { keepsPolicy, savePolicy } from '../rundir/policies';
import { loadConfig, redactConfig, type CreditConfig } from '../config/config';
import { getStrategy } from '../credit';
import { strategySpec } from '../credit/catalog';
import { creditParams } from '../credit/types';
import type { CreditHead } from '../credit/types';
import { isUserError, UserError } from '../core/errors';
import { Adam } from '../model/optim';
import { childSeed } from '../core/rng';
import { appendMetrics, openEngineLog, redactSecrets, writeRunInfo } from '../rundir/rundir';
import type { loadLatestGoodCheckpoint } from '../rundir/checkpoint';
import { diskFullError, isDiskFull } from '../core/files';
import { buildSession, type Session } from '../session/session';
import { taskIdentity } from '../tasks/identity';
import { evalFile, writeEvalTable } from '../rundir/eval_table';
import { grpoStep, StepCancelled, type GrpoStepResult } from './grpo_step';
import { RunController, silentReporter, type Reporter, type TrainResult } from './run_control';
import { trainTrl } from '../trl/train_trl';
import { evaluate, sftStep } from './steps';
import { SamplerLost } from '../model/sampling';
import { openRolloutSampler } from '../serving/rollout_sync';
import { unlessStopped } from '../model/sampler';
import { logsTables, logTables } from '../session/token_log';
import { RunTrackers } from '../tracking/trackers';
import { failRun, openRunDirectory, openRunRecord, refuseResume, type RunRecord, type TrainOptions } from './lifecycle';
import { checkpoint, klReference, needsReference, restore, type Progress } from './restore';

export { grpoStep, StepCancelled, type GrpoStepOptions } from './grpo_step';
export { RunController, silentReporter, type Reporter, type TrainResult } from './run_control';
export { evaluate } from './steps';
export { loraChanges, type TrainOptions } from './lifecycle';

const TIMING_KEYS = new Set(['step_time_s', 'tokens_per_s']);
export function metricsWithoutTiming(row: MetricsRow): MetricsRow {
  return Object.fromEntries(Object.entries(row).filter(([k]) => !TIMING_KEYS.has(k))) as MetricsRow;
}

/**
 * The test split's greedy eval, and the validation split's when the task has one, into one eval table (rows marked
 * by split): the success rates and the test split's mean reward.
 */
async function evaluateSplits(
  s: Session,
  runDir: string,
  step: number,
  stop?: () => boolean,
): Promise<{ success: number; reward: number; val: number | null }> {
  const ev = await evaluate(s, s.task.eval, 'test', stop);
  const rows = ev.rows;
  let val: number | null = null;
  if (s.task.validation.length) {
    const v = await evaluate(s, s.task.validation, 'validation', stop);
    val = v.success;
    rows.instance_id.push(...v.rows.instance_id);
    rows.split.push(...v.rows.split);
    rows.success.push(...v.rows.success);
    rows.completion.push(...v.rows.completion);
    const reward = new Float32Array(rows.reward.length + v.rows.reward.length);
    reward.set(rows.reward);
    reward.set(v.rows.reward, rows.reward.length);
    rows.reward = reward;
  }
  writeEvalTable(evalFile(runDir, step), rows);
  return { success: ev.success, reward: ev.reward, val };
}

export async function train(opts: TrainOptions): Promise<TrainResult> {
  if (engineOf(opts) === 'trl') return trainWithTrl(opts);
  const { cfg, runDir, resumeFrom, resumed, release } = await openRunDirectory(opts, train);
  try {
    return await trainIn(opts, cfg, runDir, resumeFrom, resumed);
  } finally {
    release();
  }
}

/** Which engine trains the run: its config's `engine` (the run's own config.yaml on a resume). */
function engineOf(opts: TrainOptions): CreditConfig['engine'] {
  if (opts.config) return opts.config.engine;
  if (opts.resume) {
    // the run's own engine; a bad --set or a broken folder is refused by the resume itself, which logs it in the run
    try {
      return loadConfig(join(opts.resume, 'config.yaml')).config.engine;
    } catch {
      return 'tfjs';
    }
  }
  return opts.configPath ? loadConfig(opts.configPath, opts.sets).config.engine : 'tfjs';
}

/** A run of `engine: trl` (trl/train_trl.ts), with this engine's reporter and controller. */
async function trainWithTrl(opts: TrainOptions): Promise<TrainResult> {
  const controller = opts.controller ?? new RunController();
  const stopRequested = new Promise<void>((resolve) =>
    controller.signal.aborted ? resolve() : controller.signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  const r = await trainTrl({ ...opts, reporter: opts.reporter ?? silentReporter, stopRequested });
  controller.settle(null);
  return { runDir: r.runDir, status: r.status, finalEval: null, initialEval: null };
}

/**
 * One training run, GRPO-Zero's way: phases that each fit a screen, sharing one Run. The warm start (SFT) and the GRPO
 * steps write metrics, tables and checkpoints as they go; a stop ends the current step and checkpoints; any error marks
 * the run failed with a readable message and keeps its directory resumable.
 */
async function trainIn(
  opts: TrainOptions,
  cfg: CreditConfig,
  runDir: string,
  resumeFrom: string | null,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>,
): Promise<TrainResult> {
  // A resume refused before it trains (its task changed, the checkpoint lacks adapters, the model no longer fits, a
  // secret is unset) changes nothing of the run: run.json goes back to these bytes, so a completed run stays completed.
  const before = resumeFrom ? readFileSync(join(runDir, 'run.json')) : null;
  const r = openRunRecord(opts, cfg, runDir, resumeFrom);
  const run = new Run(cfg, runDir, r.info, r.reporter, r.ctl, r.elog, r.secrets);
  let started = false;
  try {
    const start = await startRun(run, resumeFrom, resumed);
    started = true;
    await warmStartPhase(run);
    await grpoPhase(run, resumed, start.startWeights);
    return await finishRun(run);
  } catch (e) {
    const err = diskFullError(e, (e as NodeJS.ErrnoException).path ?? runDir);
    // (a full disk is not a refusal: the run may have changed, and failRun says so)
    if (before && !started && isUserError(err) && !isDiskFull(e)) refuseResume(run, err, before);
    else {
      failRun(run, err);
      await endTrackers(run, 'FAILED');
    }
    throw err;
  } finally {
    run.close();
  }
}

/** What the phases of one run share: its config and directory, its session and optimizers, and where it has got to. */
class Run implements RunRecord {
  s: Session | null = null;
  head: CreditHead | null = null;
  readonly sftOpt: Adam;
  readonly grpoOpt: Adam;
  progress: Progress = { phase: 'sft', step: 0 };
  initialEval: number | null = null;
  finalEval: number | null = null;
  metricsRows = 0;
  /** TensorBoard and MLflow (logging.tensorboard, logging.mlflow), opened once the resume point is known */
  trackers: RunTrackers | null = null;
  private nonFinite = 0;

  constructor(
    readonly cfg: CreditConfig,
    readonly runDir: string,
    readonly info: RunInfo,
    readonly reporter: Reporter,
    readonly ctl: RunController,
    private readonly elog: ReturnType<typeof openEngineLog>,
    readonly secrets: string[],
  ) {
    this.sftOpt = new Adam(cfg.sft.lr);
    this.grpoOpt = new Adam(cfg.grpo.lr);
  }

  log(level: 'info' | 'warn' | 'error', m: string): void {
    this.elog.write(level, m);
    this.reporter.log(level, redactSecrets(m, this.secrets));
  }

  get stopNow(): boolean {
    return this.ctl.stopRequested;
  }

  emit(row: MetricsRow): void {
    appendMetrics(this.runDir, row);
    this.metricsRows++;
    this.trackers?.metrics(row);
    this.reporter.metrics(this.runDir, row);
  }

  /** Ends the run as diverged after grpo.max_nonfinite_steps skipped steps in a row. */
  checkDiverged(row: MetricsRow, what: string, step: number): void {
    this.nonFinite = row.skipped ? this.nonFinite + 1 : 0;
    if (this.nonFinite >= this.cfg.grpo.max_nonfinite_steps) {
      throw new UserError(
        `diverged at ${what} ${step}: ${this.nonFinite} steps in a row had a non-finite loss or gradient (grpo.max_nonfinite_steps ${this.cfg.grpo.max_nonfinite_steps})`,
        `lower ${row.phase === 'sft' ? 'sft' : 'grpo'}.lr`,
      );
    }
  }

  ckpt(): Promise<string> {
    return checkpoint(this.runDir, this.s!, this.head, this.sftOpt, this.grpoOpt, this.progress, this.initialEval, this.metricsRows);
  }

  close(): void {
    this.trackers?.close();
    this.elog.close();
    this.sftOpt.dispose();
    this.grpoOpt.dispose();
    this.s?.model.dispose();
    this.head?.dispose();
  }
}

/** Steps run synchronously; yielding between them lets signals and the RPC `run/stop` request through. */
const tick = () => new Promise<void>((r) => setImmediate(r));

/** The session (backend, model, task) recorded in run.json, the strategy's head and warnings, and the resume point. */
async function startRun(
  run: Run,
  resumeFrom: string | null,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>,
): Promise<Awaited<ReturnType<typeof restore>>> {
  const { cfg, runDir, info } = run;
  const s = (run.s = await buildSession(cfg, (m) => run.log('info', m), runDir, { training: true }));
  info.backend = s.backend.backend;
  info.backend_reason = s.backend.reason;
  const adapter = backendInfo()?.adapter;
  if (adapter) info.adapter = { ...adapter };
  info.task = taskIdentity(s.task, cfg.task.split_seed);
  writeRunInfo(runDir, info);
  run.log(
    'info',
    `model ${s.modelCfg.nLayers}×d${s.modelCfg.dModel}, vocab ${s.modelCfg.vocabSize}; task ${cfg.task.name} (${s.task.train.length} train / ${s.task.eval.length} eval)`,
  );
  const strategy = getStrategy(cfg.credit.strategy);
  run.head = strategy.createHead?.(s.modelCfg.dModel, childSeed(cfg.seed, 'credit-head'), creditParams(cfg.credit)) ?? null;
  for (const w of strategySpec(cfg.credit.strategy)?.warnings?.(cfg) ?? []) run.log('warn', w);
  run.reporter.started({ runDir, id: info.id, name: cfg.name, backend: s.backend.backend, totalSteps: cfg.sft.steps + cfg.grpo.steps });
  const start = await restore({ s, cfg, head: run.head, sftOpt: run.sftOpt, grpoOpt: run.grpoOpt, runDir, resumeFrom, resumed, log: (l, m) => run.log(l, m) });
  ({ progress: run.progress, initialEval: run.initialEval, metricsRows: run.metricsRows } = start);
  run.trackers = new RunTrackers({
    runDir,
    runName: cfg.name,
    logging: cfg.logging,
    config: redactConfig(cfg),
    resume: resumeFrom
      ? {
          phase: run.progress.phase === 'sft' ? 'sft' : 'grpo',
          step: run.progress.step,
          // the rows the trajectory this resume abandons logged after its checkpoint
          abandonedRows: start.abandonedRows,
        }
      : null,
    mlflowRun: info.mlflow ?? null,
    onMlflowRun: (ref) => {
      info.mlflow = ref;
      writeRunInfo(runDir, info);
    },
    log: (l, m) => run.log(l, m),
  });
  return start;
}

/** The SFT warm start's steps, then a checkpoint that starts GRPO at step 0. */
async function warmStartPhase(run: Run): Promise<void> {
  const { cfg, s } = run;
  if (run.progress.phase !== 'sft') return;
  for (let step = run.progress.step + 1; step <= cfg.sft.steps && !run.stopNow; step++) {
    await tick();
    if (run.stopNow) break;
    const row = await sftStep(s!, run.sftOpt, step);
    run.emit(row);
    run.progress = { phase: 'sft', step };
    run.checkDiverged(row, 'SFT step', step);
    run.reporter.progress({ phase: 'sft', step, total: cfg.sft.steps, message: `loss ${row.loss?.toFixed(3)}` });
  }
  if (!run.stopNow) {
    run.progress = { phase: 'grpo', step: 0 };
    if (cfg.sft.steps > 0) await run.ckpt();
  }
}

/** The eval before GRPO, then each GRPO step: its policy kept for probes, its tables, evals and checkpoints. */
async function grpoPhase(
  run: Run,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>,
  startWeights: Awaited<ReturnType<typeof restore>>['startWeights'],
): Promise<void> {
  const { cfg, runDir, info } = run;
  const s = run.s!;
  if (run.progress.phase !== 'grpo') return;
  const ref = needsReference(cfg) ? await klReference(s, runDir, resumed, startWeights) : null;
  // the session's sampler for rollouts and evals: this process, or an inference server that follows the policy
  s.rolloutSampler = await openRolloutSampler(cfg, runDir, s.tokenizer, {
    log: (m) => run.log('info', m),
    onSync: (server) => (info.rollout_server = server),
  });
  try {
    await s.rolloutSampler?.follow?.(run.progress.step, s.model);
    if (run.progress.step === 0 && !run.stopNow && !(await evalBeforeGrpo(run))) return;
    while (run.progress.step < cfg.grpo.steps && !run.stopNow) {
      await tick();
      if (run.stopNow || !(await grpoIteration(run, ref))) break;
    }
  } catch (e) {
    // A sampler that is lost (a server dead, refusing, out of sync) stops the run with a checkpoint of its last
    // finished step: nothing is resampled here, and --resume picks up once it is back.
    if (!(e instanceof SamplerLost)) throw e;
    const at = await run.ckpt();
    throw new SamplerLost(
      `${e.message}. The run stopped at step ${run.progress.step} with a checkpoint (${at}); once the server is back, resume it with credit-lens train --resume ${runDir}`,
      e.hint,
    );
  } finally {
    ref?.dispose();
    await s.rolloutSampler?.close();
    s.rolloutSampler = null;
  }
}

/** The greedy eval of the policy GRPO starts from (step 0); false where a stop ended it (nothing was trained yet). */
async function evalBeforeGrpo(run: Run): Promise<boolean> {
  const ev = await unlessStopped(() => evaluateSplits(run.s!, run.runDir, 0, () => run.stopNow));
  if (!ev) return false;
  run.initialEval = ev.success;
  run.emit({ step: 0, phase: 'eval', eval_success: ev.success, reward_mean: ev.reward, ...(ev.val !== null ? { val_success: ev.val } : {}) });
  run.log('info', `eval before GRPO: success ${(ev.success * 100).toFixed(1)}%`);
  return true;
}

/** One GRPO step and what follows it: its tables, the sampler following the update, its eval, its row and checkpoint. */
async function grpoIteration(run: Run, ref: Awaited<ReturnType<typeof klReference>> | null): Promise<boolean> {
  const { cfg, runDir, info } = run;
  const s = run.s!;
  const step = run.progress.step + 1;
  // the policy about to sample this step, for `credit-lens probe` (a resumed step writes the same weights again)
  if (logsTables(cfg.logging, step) && keepsPolicy(step, cfg.logging.probe_every)) savePolicy(runDir, step, await s.model.readWeights());
  let r: GrpoStepResult;
  try {
    r = await grpoStep({ session: s, optimizer: run.grpoOpt, ref, step, log: (l, m) => run.log(l, m), head: run.head, runDir, signal: run.ctl.signal });
  } catch (e) {
    // Stopped while the step waited (on the oracle): the step is dropped whole, and the final checkpoint holds the
    // last finished one.
    if (e instanceof StepCancelled) return false;
    throw e;
  }
  if (logsTables(cfg.logging, step)) run.trackers?.tokens(step, logTables(runDir, step, r.episodes, r.tok));
  try {
    await s.rolloutSampler?.follow?.(step, s.model);
  } catch (e) {
    // the update is done: the step is kept (without its eval) before the run stops, so its checkpoint is this step's
    run.emit(r.row);
    run.progress = { phase: 'grpo', step };
    info.last_step = step;
    throw e;
  }
  if (step % cfg.grpo.eval_every === 0 || step === cfg.grpo.steps) {
    // the last step's eval runs whole: the run ends with it, and no resume would come back for it
    const ev = await unlessStopped(() => evaluateSplits(s, runDir, step, step === cfg.grpo.steps ? undefined : () => run.stopNow));
    if (ev) {
      r.row.eval_success = ev.success;
      if (ev.val !== null) r.row.val_success = ev.val;
      run.finalEval = ev.success;
    } else run.log('info', `stopped during the eval of step ${step}: the step is kept without its eval`);
  }
  run.emit(r.row);
  run.progress = { phase: 'grpo', step };
  info.last_step = step;
  run.checkDiverged(r.row, 'step', step);
  run.reporter.progress({ phase: 'grpo', step, total: cfg.grpo.steps, message: `reward ${r.row.reward_mean?.toFixed(3)}` });
  if (step % cfg.grpo.checkpoint_every === 0 && step < cfg.grpo.steps) await run.ckpt();
  writeRunInfo(runDir, info);
  return true;
}

/** The last checkpoint, and run.json completed (or stopped, where a stop came before the last step). */
async function finishRun(run: Run): Promise<TrainResult> {
  const { cfg, runDir, info } = run;
  const ck = await run.ckpt();
  const stopped = run.ctl.stopRequested && !(run.progress.phase === 'grpo' && run.progress.step >= cfg.grpo.steps);
  info.status = stopped ? 'stopped' : 'completed';
  info.ended = new Date().toISOString();
  writeRunInfo(runDir, info);
  run.log('info', `${info.status} at ${run.progress.phase} step ${run.progress.step}; checkpoint ${ck}`);
  await endTrackers(run, stopped ? 'KILLED' : 'FINISHED');
  run.ctl.settle(ck);
  run.reporter.finished({ status: info.status, runDir });
  return { runDir, status: info.status, finalEval: run.finalEval, initialEval: run.initialEval };
}

/**
 * The trackers' end: MLflow gets run.json and, for a run that trained, the credit analysis as artifacts, then its status
 * (a bounded wait; what a dead server did not take stays in the run directory).
 */
async function endTrackers(run: Run, status: 'FINISHED' | 'FAILED' | 'KILLED'): Promise<void> {
  const t = run.trackers;
  if (!t) return;
  if (t.keepsArtifacts) {
    t.artifact('run.json', JSON.stringify(redactedInfo(run), null, 2) + '\n');
    if (status !== 'FAILED' && run.progress.phase === 'grpo' && run.progress.step > 0) {
      try {
        const { analyzeRun } = await import('../analysis/analysis');
        const { analysisToMarkdown } = await import('../analysis/markdown');
        t.artifact('analysis.md', analysisToMarkdown(analyzeRun(run.runDir, {})));
      } catch (e) {
        run.log('info', `MLflow: no analysis artifact (${(e as Error).message})`);
      }
    }
  }
  await t.end(status);
}

const redactedInfo = (run: Run): RunInfo => JSON.parse(redactSecrets(JSON.stringify(run.info), run.secrets)) as RunInfo;
