// The training loop: optional SFT warm start, then GRPO steps (design.md#semantics), writing the run directory (design.md#run-directory).
// One file although long: the phases share one Run, and the checkpoint, restore and KL reference they call are the loop's alone.
import * as tf from '@tensorflow/tfjs';
import { backendInfo } from '../model/backend';
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MetricsRow, RunInfo } from '../../protocol';
import { keepsPolicy, savePolicy } from '../rundir/policies';
import { checkpointDir, latestCheckpoint, loadCheckpoint, loadLatestGoodCheckpoint, saveCheckpoint } from '../rundir/checkpoint';
import { configToYaml, loadConfig, redactConfig, type CreditConfig } from '../config/config';
import { LORA_TARGETS } from '../config/base';
import { getStrategy } from '../credit';
import { strategySpec } from '../credit/catalog';
import { creditParams } from '../credit/types';
import type { CreditHead } from '../credit/types';
import { isUserError, UserError } from '../core/errors';
import { Transformer } from '../model/model';
import { Adam } from '../model/optim';
import { childSeed } from '../core/rng';
import {
  appendMetrics,
  createRunDir,
  openEngineLog,
  readMetrics,
  readRunInfo,
  readRunInfoChecked,
  redactSecrets,
  setAsideForRestart,
  setAsideTablesAfter,
  writeRunInfo,
} from '../rundir/rundir';
import { acquireRunLock } from '../rundir/run_lock';
import { diskFullError, isDiskFull, writeFileAtomic } from '../core/files';
import { buildSession, useWeights, type Session } from '../session/session';
import { checkTaskIdentity, taskIdentity } from '../tasks/identity';
import { ENGINE_VERSION } from '../core/version';
import { evalFile, writeEvalTable } from '../rundir/eval_table';
import { grpoStep, StepCancelled, type GrpoStepResult } from './grpo_step';
import { RunController, silentReporter, type Reporter, type TrainResult } from './run_control';
import { evaluate, sftStep } from './steps';
import { ServerError } from '../serving/client';
import { RolloutServer } from '../serving/rollout_sync';
import { unlessStopped } from '../model/sampler';
import { logsTables, logTables } from '../session/token_log';
import { ensureWarmStart, fromWarmStart } from './warm_start';
import { RunTrackers } from '../tracking/trackers';

export { grpoStep, StepCancelled, type GrpoStepOptions } from './grpo_step';
export { RunController, silentReporter, type Reporter, type TrainResult } from './run_control';
export { evaluate } from './steps';

export interface TrainOptions {
  configPath?: string;
  /** an already validated config (a sweep's expanded run); takes the place of configPath */
  config?: CreditConfig;
  sets?: string[];
  /** continue this run directory from its latest checkpoint */
  resume?: string;
  reporter?: Reporter;
  controller?: RunController;
  /** override the run directory's parent (tests) */
  outputDir?: string;
  /**
   * Train in exactly this folder: start the run there, or resume it when it already holds a run with a checkpoint
   * (a requeued Slurm task finds its own run this way). A folder with a run.json but no checkpoint yet (stopped
   * during its first steps) starts over in place.
   */
  runDir?: string;
}

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

/** On resume, drop metrics rows written after the checkpoint so no step appears twice. */
function keepFirstMetrics(runDir: string, n: number): void {
  const rows = readMetrics(runDir).slice(0, n);
  // Through a temporary file and a rename, like every other write: a crash here must not cost the rows kept.
  writeFileAtomic(join(runDir, 'metrics.jsonl'), rows.map((r) => JSON.stringify(r) + '\n').join(''));
}

interface Progress {
  phase: 'sft' | 'grpo';
  step: number;
}

async function exportVars(vars: Map<string, tf.Variable>): Promise<Record<string, { shape: number[]; data: Float32Array }>> {
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const [k, v] of vars) out[k] = { shape: v.shape, data: (await v.data()) as Float32Array };
  return out;
}

async function checkpoint(
  runDir: string,
  s: Session,
  head: CreditHead | null,
  sftOpt: Adam,
  grpoOpt: Adam,
  p: Progress,
  initialEval: number | null,
  metricsRows: number,
): Promise<string> {
  const opt = p.phase === 'sft' ? sftOpt : grpoOpt;
  return saveCheckpoint(runDir, p.phase === 'sft' ? 0 : p.step, {
    model: await s.model.readWeights(),
    ...(s.cfg.model.lora ? { adapters: await s.model.readAdapters() } : {}),
    ...(head ? { head: await exportVars(head.params) } : {}),
    optimizer: { name: 'adam', step: opt.step, state: s.model.joinOptimizerState(await opt.exportState()) },
    meta: {
      phase: p.phase,
      step: p.step,
      initial_eval: initialEval,
      metrics_rows: metricsRows,
      engine_version: ENGINE_VERSION,
      strategy: s.cfg.credit.strategy,
      task: taskIdentity(s.task, s.cfg.task.split_seed),
    },
  });
}

export async function train(opts: TrainOptions): Promise<TrainResult> {
  let cfg: CreditConfig;
  let runDir: string;
  let resumeFrom: string | null = null;
  let resumeDir = opts.resume;
  if (!resumeDir && opts.runDir && readRunInfo(opts.runDir) && latestCheckpoint(opts.runDir)) resumeDir = opts.runDir;
  let release: () => void;
  let resumed: ReturnType<typeof loadLatestGoodCheckpoint> = null;
  if (resumeDir) {
    const checked = readRunInfoChecked(resumeDir);
    if (!checked.ok) throw new UserError(`--resume ${resumeDir}: not a run directory (${checked.reason})`);
    if (checked.info.imported)
      throw new UserError(`--resume ${resumeDir}: an imported run (rollouts from ${checked.info.imported.source}) has no training to resume`);
    release = acquireRunLock(resumeDir);
    try {
      resumed = loadLatestGoodCheckpoint(resumeDir);
      if (!resumed) throw new UserError(`--resume ${resumeDir}: the run has no checkpoint to resume from; start it again instead`);
      cfg = loadConfig(join(resumeDir, 'config.yaml'), opts.sets).config;
      // The adapters the checkpoint holds are of the run's LoRA settings: another rank, scale or set of targets would
      // drop or rescale what they learned, so a resume cannot change them.
      const changed = loraChanges(loadConfig(join(resumeDir, 'config.yaml')).config, cfg);
      if (changed.length)
        throw new UserError(
          `--resume ${resumeDir}: the run's LoRA settings cannot change on a resume (its checkpoint holds adapters of them): ` +
            `${changed.join('; ')}. Resume without those --set, or start a new run`,
        );
    } catch (e) {
      if (isUserError(e)) {
        // A refused resume changes nothing of the run: its run.json (a completed run stays completed, and compare goes on
        // counting it) is left exactly as it was; only its engine.log notes the attempt.
        try {
          appendFileSync(join(resumeDir, 'engine.log'), `${new Date().toISOString()} error ${e.message}\n`);
        } catch {
          /* read-only folder */
        }
      }
      release();
      throw e;
    }
    resumeFrom = resumed.checkpoint.dir;
    runDir = resumeDir;
  } else {
    if (opts.config) cfg = opts.config;
    else if (opts.configPath) cfg = loadConfig(opts.configPath, opts.sets).config;
    else throw new UserError('train: a config file is required');
    if (cfg.sft.share && cfg.sft.steps > 0 && !cfg.model.init_checkpoint) {
      // One SFT warm start for every run that shares its model, task and sft (warm_start.ts); this run records it as
      // its model.init_checkpoint with sft.steps 0, so a resume or a copy of its config starts from the same weights.
      const controller = opts.controller ?? new RunController();
      const dir = await ensureWarmStart(cfg, { train, reporter: opts.reporter ?? silentReporter, controller });
      if (dir === null) throw new UserError('stopped while the shared warm start was being trained; nothing of this run was started');
      cfg = fromWarmStart(cfg, dir);
    }
    if (opts.runDir) {
      runDir = opts.runDir;
      for (const sub of ['tokens', 'episodes', 'checkpoints']) mkdirSync(join(runDir, sub), { recursive: true });
      release = acquireRunLock(runDir);
      // A start that died before its first checkpoint (a requeued Slurm task): begin again in place from an empty run
      // directory. Its tables, probes, kept policies and metrics are set aside as a resume sets aside an abandoned
      // trajectory's, never read as this run's.
      const aside = setAsideForRestart(runDir);
      if (aside)
        appendFileSync(join(runDir, 'engine.log'), `${new Date().toISOString()} info  restarted in place: the dead attempt's files moved to ${aside}\n`);
    } else {
      runDir = createRunDir(opts.outputDir ?? cfg.output_dir, cfg.name);
      release = acquireRunLock(runDir);
    }
    writeFileSync(join(runDir, 'config.yaml'), configToYaml(redactConfig(cfg)));
  }
  try {
    return await trainIn(opts, cfg, runDir, resumeFrom, resumed);
  } finally {
    release();
  }
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
  const run = openRun(opts, cfg, runDir, resumeFrom);
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
class Run {
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

/**
 * The run's engine log (its secrets masked) and run.json marked running. A strategy's secret that is not set fails the
 * run here, before the SFT warm start, not at the first GRPO step.
 */
function openRun(opts: TrainOptions, cfg: CreditConfig, runDir: string, resumeFrom: string | null): Run {
  const reporter = opts.reporter ?? silentReporter;
  // Defence in depth: an API key is never put in a message on purpose, but anything that echoes it is masked.
  const secretVars = strategySpec(cfg.credit.strategy)?.secrets?.(cfg) ?? [];
  // Each key as read and as its user trims it: either could be echoed back.
  const secrets = [...new Set(secretVars.flatMap((v) => (process.env[v.env] ? [process.env[v.env]!, process.env[v.env]!.trim()] : [])))].filter(Boolean);
  const elog = openEngineLog(runDir, { secrets });
  const info: RunInfo = {
    id: runDir.split(/[\\/]/).pop()!,
    name: cfg.name,
    status: 'running',
    started: new Date().toISOString(),
    ended: null,
    backend: 'pending',
    engine_version: ENGINE_VERSION,
    strategy: cfg.credit.strategy,
    total_steps: cfg.grpo.steps,
    last_step: 0,
    pid: process.pid,
    resumed_from: resumeFrom,
    config_path: opts.configPath,
  };
  // a resume logs on in the MLflow run it logged to
  const mlflow = resumeFrom ? readRunInfo(runDir)?.mlflow : undefined;
  if (mlflow) info.mlflow = mlflow;
  const unset = secretVars.find((v) => !process.env[v.env]);
  // checked before run.json is written: a resume refused for it leaves the run's record as it was
  if (!unset || !resumeFrom) writeRunInfo(runDir, info);
  if (unset) {
    const msg = `${unset.path}: the environment variable ${unset.env} is not set (${unset.user} reads its API key from it)`;
    if (!resumeFrom) writeRunInfo(runDir, { ...info, status: 'failed', ended: new Date().toISOString(), error: msg });
    elog.write('error', msg);
    elog.close();
    reporter.finished({ status: 'failed', runDir, error: msg });
    throw new UserError(msg);
  }
  return new Run(cfg, runDir, info, reporter, opts.controller ?? new RunController(), elog, secrets);
}

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
    resume: resumeFrom ? { phase: run.progress.phase === 'sft' ? 'sft' : 'grpo', step: run.progress.step } : null,
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
  const ref = run.progress.phase === 'grpo' && cfg.grpo.kl_beta > 0 ? await klReference(s, runDir, resumed, startWeights) : null;
  // rollout.server: the server samples; it loads the policy now (after the warm start, or the checkpoint resumed) and
  // after every update, before anything samples again
  const server = run.progress.phase === 'grpo' && cfg.rollout.server ? await RolloutServer.connect(cfg, runDir, s.tokenizer, (m) => run.log('info', m)) : null;
  const sync = async (step: number) => {
    const r = await server!.sync(step, s.model);
    info.rollout_server = server!.info;
    run.log('info', `rollout server: loaded the policy of step ${step} in ${r.seconds.toFixed(2)} s`);
  };
  s.rolloutSampler = server?.sampler ?? null;
  try {
    if (server) await sync(run.progress.step);
    // A stop during an eval ends it (a resume evaluates again); during the eval before GRPO nothing was trained yet.
    const stop = () => run.stopNow;
    if (run.progress.phase === 'grpo' && run.progress.step === 0 && !run.stopNow) {
      const ev = await unlessStopped(() => evaluateSplits(s, runDir, 0, stop));
      if (!ev) return;
      run.initialEval = ev.success;
      run.emit({ step: 0, phase: 'eval', eval_success: ev.success, reward_mean: ev.reward, ...(ev.val !== null ? { val_success: ev.val } : {}) });
      run.log('info', `eval before GRPO: success ${(ev.success * 100).toFixed(1)}%`);
    }
    while (run.progress.phase === 'grpo' && run.progress.step < cfg.grpo.steps && !run.stopNow) {
      await tick();
      if (run.stopNow) break;
      const step = run.progress.step + 1;
      // the policy about to sample this step, for `credit-lens probe` (a resumed step writes the same weights again)
      if (logsTables(cfg.logging, step) && keepsPolicy(step, cfg.logging.probe_every)) savePolicy(runDir, step, await s.model.readWeights());
      let r: GrpoStepResult;
      try {
        r = await grpoStep({ session: s, optimizer: run.grpoOpt, ref, step, log: (l, m) => run.log(l, m), head: run.head, runDir, signal: run.ctl.signal });
      } catch (e) {
        // Stopped while the step waited (on the oracle): the step is dropped whole, and the final checkpoint holds the
        // last finished one.
        if (e instanceof StepCancelled) break;
        throw e;
      }
      if (logsTables(cfg.logging, step)) run.trackers?.tokens(step, logTables(runDir, step, r.episodes, r.tok));
      if (server) {
        try {
          await sync(step);
        } catch (e) {
          // the update is done: the step is kept (without its eval) before the run stops, so its checkpoint is this step's
          run.emit(r.row);
          run.progress = { phase: 'grpo', step };
          info.last_step = step;
          throw e;
        }
      }
      if (step % cfg.grpo.eval_every === 0 || step === cfg.grpo.steps) {
        // the last step's eval runs whole: the run ends with it, and no resume would come back for it
        const ev = await unlessStopped(() => evaluateSplits(s, runDir, step, step === cfg.grpo.steps ? undefined : stop));
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
    }
  } catch (e) {
    // A rollout server that fails (dead, refusing, out of sync) stops the run with a checkpoint of its last finished
    // step: nothing is resampled here, and --resume picks up once the server is back.
    if (!(server && e instanceof ServerError)) throw e;
    const at = await run.ckpt();
    throw new ServerError(
      `${e.message}. The run stopped at step ${run.progress.step} with a checkpoint (${at}); once the server is back, resume it with credit-lens train --resume ${runDir}`,
      e.hint,
    );
  } finally {
    ref?.dispose();
    s.rolloutSampler = null;
    await server?.close();
  }
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

/** run.json failed with the error (a user error as it is, any other as an internal error with its stack in the log). */
function failRun(run: Run, e: unknown): void {
  const { runDir, info, secrets } = run;
  const msg = redactSecrets(isUserError(e) ? e.message : `internal error: ${(e as Error).stack ?? e}`, secrets);
  info.status = 'failed';
  info.ended = new Date().toISOString();
  info.error = redactSecrets(isUserError(e) ? e.message : (e as Error).message, secrets);
  try {
    writeRunInfo(runDir, info);
  } catch (w) {
    // a full disk: run.json keeps saying running with a pid that is gone, which readers take for a crashed run; the
    // checkpoint before it is intact and resumable
    if (!isDiskFull(w)) throw w;
  }
  run.log('error', msg);
  run.ctl.settle(null);
  run.reporter.finished({ status: 'failed', runDir, error: info.error });
}

/** A resume refused before it trained: run.json as it was before the attempt; engine.log says why. */
function refuseResume(run: Run, e: UserError, before: Buffer): void {
  try {
    writeFileAtomic(join(run.runDir, 'run.json'), before);
  } catch (w) {
    if (!isDiskFull(w)) throw w;
  }
  run.log('error', `resume refused, the run is as it was: ${redactSecrets(e.message, run.secrets)}`);
  run.ctl.settle(null);
  run.reporter.finished({ status: 'failed', runDir: run.runDir, error: redactSecrets(e.message, run.secrets) });
}

interface Restored {
  progress: Progress;
  initialEval: number | null;
  metricsRows: number;
  startWeights: ReturnType<Transformer['exportWeights']> | null;
}

/**
 * The policy a run starts or resumes from: model.init_checkpoint's weights, then on a resume the checkpoint's weights,
 * optimizer state and head, its progress, and metrics.jsonl cut back to the checkpoint's rows.
 */
async function restore(o: {
  s: Session;
  cfg: CreditConfig;
  head: CreditHead | null;
  sftOpt: Adam;
  grpoOpt: Adam;
  runDir: string;
  resumeFrom: string | null;
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>;
  log: (level: 'info' | 'warn', m: string) => void;
}): Promise<Restored> {
  const { s, cfg, head, resumeFrom, resumed, log } = o;
  const out: Restored = { progress: { phase: 'sft', step: 0 }, initialEval: null, metricsRows: 0, startWeights: null };
  if (cfg.model.init_checkpoint) {
    const dir = existsSync(join(cfg.model.init_checkpoint, 'run.json')) ? latestCheckpoint(cfg.model.init_checkpoint) : cfg.model.init_checkpoint;
    if (!dir) throw new UserError(`model.init_checkpoint: ${cfg.model.init_checkpoint} is a run without checkpoints`);
    const init = loadCheckpoint(dir);
    checkTaskIdentity(`model.init_checkpoint ${dir}`, init.meta.task, taskIdentity(s.task, cfg.task.split_seed), (m) => log('warn', m));
    useWeights(s, init.model);
    if (!resumeFrom) log('info', `initial weights from ${dir}`);
  }
  // The run's starting policy (seeded init, HF weights or init_checkpoint), kept for the KL reference of a run
  // without SFT that resumes in GRPO: the reference must not be the resumed weights.
  out.startWeights = resumeFrom && cfg.grpo.kl_beta > 0 && cfg.sft.steps === 0 && !cfg.model.lora ? await s.model.readWeights() : null;
  for (const sk of resumed?.skipped ?? []) log('warn', `skipped a damaged checkpoint: ${sk.reason}`);
  if (resumeFrom && resumed) {
    const ck = resumed.checkpoint;
    const meta = ck.meta as { phase: 'sft' | 'grpo'; step: number; initial_eval: number | null };
    checkTaskIdentity(`--resume ${resumeFrom}`, ck.meta.task, taskIdentity(s.task, cfg.task.split_seed), (m) => log('warn', m));
    // LoRA: the base stays the config's (or init_checkpoint's) and the trained adapters come back; ck.model holds the
    // merged weights, which as a base would count the adapters twice
    if (cfg.model.lora) {
      if (!ck.adapters)
        throw new UserError(`${resumeFrom}: checkpoint has no adapters.safetensors, but model.lora is set (was it written by a run without LoRA?)`);
      s.model.loadAdapters(ck.adapters);
    } else useWeights(s, ck.model);
    (meta.phase === 'sft' ? o.sftOpt : o.grpoOpt).importState(ck.optimizer.step, s.model.splitOptimizerState(ck.optimizer.state));
    if (head) {
      if (!ck.head) throw new UserError(`${resumeFrom}: checkpoint has no head.safetensors, but credit.strategy ${cfg.credit.strategy} needs its trained head`);
      for (const [name, v] of head.params) {
        const w = ck.head[name];
        if (!w) throw new UserError(`${resumeFrom}: head.safetensors lacks ${name}`);
        v.assign(tf.tensor(w.data, w.shape));
      }
    }
    out.progress = { phase: meta.phase, step: meta.step };
    out.initialEval = meta.initial_eval ?? null;
    keepFirstMetrics(o.runDir, (ck.meta as { metrics_rows?: number }).metrics_rows ?? 0);
    // The tables past the checkpoint are the abandoned trajectory's: out of the way before this one writes its own.
    const grpoStep = meta.phase === 'grpo' ? meta.step : 0;
    const aside = setAsideTablesAfter(o.runDir, { tables: grpoStep, eval: meta.phase === 'grpo' || meta.initial_eval !== null ? grpoStep : -1 });
    if (aside) log('info', `the tables written after ${meta.phase} step ${meta.step} belong to the trajectory this resume abandons: moved to ${aside}`);
    out.metricsRows = (ck.meta as { metrics_rows?: number }).metrics_rows ?? 0;
    log('info', `resumed from ${resumeFrom} (${meta.phase} step ${meta.step})`);
  }
  return out;
}

/**
 * The KL reference: the policy GRPO started from. The weights now, when GRPO starts in this process; on a resume inside
 * GRPO, the post-SFT checkpoint (step 0) or, without SFT, the run's starting weights.
 */
async function klReference(
  s: Session,
  runDir: string,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>,
  startWeights: Restored['startWeights'],
): Promise<Transformer> {
  // LoRA: the frozen base, shared (TRL's reference for a PEFT model: the model with its adapters disabled)
  if (s.cfg.model.lora) return s.model.baseView();
  const resumedInGrpo = (resumed?.checkpoint.meta as { phase?: string } | undefined)?.phase === 'grpo';
  if (!resumedInGrpo) return Transformer.fromWeights(s.modelCfg, await s.model.readWeights());
  if (s.cfg.sft.steps > 0) {
    const start = checkpointDir(runDir, 0);
    if (!existsSync(start))
      throw new UserError(`${runDir}: kl_beta > 0 needs the post-SFT checkpoint ${start} as the KL reference on resume, and it is missing`);
    return Transformer.fromWeights(s.modelCfg, loadCheckpoint(start).model);
  }
  return Transformer.fromWeights(s.modelCfg, startWeights!);
}

/**
 * How the effective LoRA settings of `next` differ from `trained`'s (alpha defaults to 2·r, targets to every
 * projection), one "model.lora.<key>: the run trained with …, now …" a key.
 */
export function loraChanges(trained: CreditConfig, next: CreditConfig): string[] {
  const eff = (c: CreditConfig) =>
    c.model.lora
      ? { r: c.model.lora.r, alpha: c.model.lora.alpha ?? 2 * c.model.lora.r, targets: [...(c.model.lora.targets ?? LORA_TARGETS)].sort().join(', ') }
      : null;
  const a = eff(trained);
  const b = eff(next);
  if (!a && !b) return [];
  if (!a || !b) return [`model.lora: the run trained ${a ? 'with adapters' : 'every weight'}, now ${b ? 'with adapters' : 'without'}`];
  return (['r', 'alpha', 'targets'] as const).filter((k) => a[k] !== b[k]).map((k) => `model.lora.${k}: the run trained with ${a[k]}, now ${b[k]}`);
}
