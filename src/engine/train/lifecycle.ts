// A run directory's lifecycle around the training loop: open (new, resumed, restarted in place after a dead first
// attempt), locked, its run.json marked running with its secrets masked in every log line; and its ends other than
// completion: failed with a readable message and resumable, or a refused resume that leaves the run as it was.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { WARM_START_DIR, type RunInfo } from '../../protocol';
import { configToYaml, loadConfig, redactConfig, type CreditConfig } from '../config/config';
import { LORA_TARGETS } from '../config/base';
import { strategySpec } from '../credit/catalog';
import { isUserError, UserError } from '../core/errors';
import { isDiskFull, writeFileAtomic } from '../core/files';
import { ENGINE_VERSION } from '../core/version';
import { credentialSecrets } from '../core/credentials';
import { latestCheckpoint, loadLatestGoodCheckpoint } from '../rundir/checkpoint';
import { createRunDir, openEngineLog, readRunInfo, readRunInfoChecked, redactSecrets, setAsideForRestart, writeRunInfo } from '../rundir/rundir';
import { acquireRunLock } from '../rundir/run_lock';
import { RunController, silentReporter, type Reporter, type TrainResult } from './run_control';
import { ensureWarmStart, fromWarmStart } from './warm_start';

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
  /** engine: trl: how the `credit-lens reward` worker is started, [node, cli.js] (the running CLI's own by default) */
  engineCommand?: string[];
}

/** What a run's record is made of when it opens: run.json's content, the log, the secrets it masks, who hears of it. */
export interface RunRecordParts {
  info: RunInfo;
  reporter: Reporter;
  ctl: RunController;
  elog: ReturnType<typeof openEngineLog>;
  secrets: string[];
}

/** What the ends of a run write to: its folder and run.json, its log, and who hears of it. */
export interface RunRecord {
  readonly runDir: string;
  readonly info: RunInfo;
  readonly secrets: string[];
  readonly reporter: Reporter;
  readonly ctl: RunController;
  log(level: 'info' | 'warn' | 'error', m: string): void;
}

/** A run directory opened for training: the config it trains, where it resumes from, and its lock's release. */
export interface OpenedRun {
  cfg: CreditConfig;
  runDir: string;
  resumeFrom: string | null;
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>;
  release: () => void;
}

/**
 * The run directory a training starts or resumes in: resume (its checkpoint checked, its LoRA settings unchanged), a
 * restart in place (a requeued task's folder), or a new folder; locked, with the resolved config written. A refused
 * resume changes nothing of the run but a line in its engine.log. `trainShared` trains a shared SFT warm start first.
 */
export async function openRunDirectory(opts: TrainOptions, trainShared: (o: TrainOptions) => Promise<TrainResult>): Promise<OpenedRun> {
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
      const dir = await ensureWarmStart(cfg, { train: trainShared, reporter: opts.reporter ?? silentReporter, controller });
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
  return { cfg, runDir, resumeFrom, resumed, release };
}

/**
 * The run's engine log (its secrets masked) and run.json marked running. A strategy's secret that is not set fails the
 * run here, before the SFT warm start, not at the first GRPO step.
 */
export function openRunRecord(opts: TrainOptions, cfg: CreditConfig, runDir: string, resumeFrom: string | null): RunRecordParts {
  const reporter = opts.reporter ?? silentReporter;
  // Defence in depth: an API key is never put in a message on purpose, but anything that echoes it is masked.
  const secretVars = strategySpec(cfg.credit.strategy)?.secrets?.(cfg) ?? [];
  // Each key as read and as its user trims it: either could be echoed back.
  const secrets = [
    ...new Set([...secretVars.flatMap((v) => (process.env[v.env] ? [process.env[v.env]!, process.env[v.env]!.trim()] : [])), ...credentialSecrets()]),
  ].filter(Boolean);
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
  // the shared warm start it begins from (fromWarmStart made it the model's init_checkpoint; a resume's config keeps it)
  const init = cfg.model.init_checkpoint;
  if (init && WARM_START_DIR.test(basename(resolve(init)))) info.warm_start = resolve(init);
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
  return { info, reporter, ctl: opts.controller ?? new RunController(), elog, secrets };
}

/** run.json failed with the error (a user error as it is, any other as an internal error with its stack in the log). */
export function failRun(run: RunRecord, e: unknown): void {
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
export function refuseResume(run: RunRecord, e: UserError, before: Buffer): void {
  try {
    writeFileAtomic(join(run.runDir, 'run.json'), before);
  } catch (w) {
    if (!isDiskFull(w)) throw w;
  }
  run.log('error', `resume refused, the run is as it was: ${redactSecrets(e.message, run.secrets)}`);
  run.ctl.settle(null);
  run.reporter.finished({ status: 'failed', runDir: run.runDir, error: redactSecrets(e.message, run.secrets) });
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
