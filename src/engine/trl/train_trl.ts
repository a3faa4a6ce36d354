// `engine: trl`: a run trained by TRL's GRPOTrainer through the Python package (python -m credit_lens.run), launched and
// stopped as any run. This side makes the run folder and its config.yaml, checks the config (carried.ts), writes the
// run's spec (TRL's arguments, the strategy, the reward worker's command) and starts Python; Python's RunWriter writes
// run.json, metrics.jsonl and the tables in the engine's format, so the Runs tree, the dashboard and the heatmaps read it
// as they read any run. A stop (the controller, SIGTERM) reaches Python as SIGTERM: it ends the run "stopped", and a
// resume continues from TRL's last checkpoint (grpo.checkpoint_every) in the same folder.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { loadConfig, configToYaml, redactConfig } from '../config/config';
import type { CreditConfig } from '../config/schema';
import { flattenCredit } from '../credit/catalog';
import { createRunDir, readRunInfo, readRunInfoChecked, writeRunInfo } from '../rundir/rundir';
import { acquireRunLock } from '../rundir/run_lock';
import { checkTrlConfig, grpoConfigOf } from './carried';
import type { MetricsRow, RunInfo } from '../../protocol';
// the engine's reporter (type only: train/ sits above this folder and calls it)
import type { Reporter } from '../train/run_control';

export interface TrlTrainOptions {
  configPath?: string;
  config?: CreditConfig;
  sets?: string[];
  resume?: string;
  outputDir?: string;
  runDir?: string;
  /** how this engine is started again as the reward worker: [node, cli.js] (process.argv's first two by default) */
  engineCommand?: string[];
  reporter: Reporter;
  /** resolves when the run is asked to stop */
  stopRequested: Promise<void>;
}

/** The Python that runs credit_lens: CREDIT_LENS_PYTHON (the extension sets it from creditLens.python), else python3. */
export function pythonCommand(): string {
  return process.env.CREDIT_LENS_PYTHON || 'python3';
}

/** Refuses, with what to install, a Python without credit_lens (or without TRL). */
export function checkPython(python: string): void {
  const r = spawnSync(python, ['-c', 'import credit_lens.trl'], { encoding: 'utf8' });
  if (r.error)
    throw new UserError(
      `engine: trl needs Python with the credit_lens package; ${python} did not start (${r.error.message}). Set creditLens.python (or CREDIT_LENS_PYTHON) to its interpreter`,
    );
  if (r.status !== 0) {
    const missing = /No module named '([^']+)'/.exec(r.stderr)?.[1];
    throw new UserError(
      `engine: trl: ${python} cannot import credit_lens.trl${missing ? ` (no module ${missing})` : ''}; install it there: ` +
        `${python} -m pip install -e "<this repository>/python[trl]" (or set creditLens.python to the interpreter that has it)`,
    );
  }
}

/**
 * Refuses a strategy, parameter or choice the Python package does not carry, with its own message (credit_lens's
 * resolve(), so the reasons live in one place), before anything of the run is made.
 */
export function checkStrategy(python: string, strategy: string, flat: Record<string, unknown>): void {
  const code = [
    'import json, sys',
    'from credit_lens.strategies.catalog import STRATEGIES, UnsupportedStrategy, resolve',
    'name, flat = sys.argv[1], json.loads(sys.argv[2])',
    'keys = STRATEGIES[name].defaults if name in STRATEGIES else {}',
    'try:',
    '    resolve(name, {k: v for k, v in flat.items() if k in keys})',
    'except UnsupportedStrategy as e:',
    '    print(e)',
    '    sys.exit(2)',
  ].join('\n');
  const r = spawnSync(python, ['-c', code, strategy, JSON.stringify(flat)], { encoding: 'utf8' });
  if (r.status === 2) throw new UserError(`engine: trl: ${r.stdout.trim()}`);
  if (r.status !== 0) throw new UserError(`engine: trl: cannot check credit.strategy ${strategy} in ${python}: ${r.stderr.trim().split('\n').pop()}`);
}

/** What a TRL checkpoint holds once written whole (a stop during its save can leave a folder without some of them). */
const TRL_CHECKPOINT_FILES = ['trainer_state.json', 'optimizer.pt', 'scheduler.pt', 'rng_state.pth', 'training_args.bin'];

/** The run's latest whole TRL checkpoint: a folder a stop cut short while TRL was saving it is passed over. */
export function latestTrlCheckpoint(runDir: string): string | null {
  const dir = join(runDir, 'trl');
  if (!existsSync(dir)) return null;
  const steps = readdirSync(dir)
    .map((f) => /^checkpoint-(\d+)$/.exec(f))
    .filter((m): m is RegExpExecArray => !!m)
    .map((m) => Number(m[1]))
    .sort((a, b) => b - a);
  const whole = steps.find((n) => TRL_CHECKPOINT_FILES.every((f) => existsSync(join(dir, `checkpoint-${n}`, f))));
  return whole === undefined ? null : join(dir, `checkpoint-${whole}`);
}

/** Trains the run with TRL; resolves with its final status. */
export async function trainTrl(o: TrlTrainOptions): Promise<{ runDir: string; status: 'completed' | 'failed' | 'stopped' }> {
  let cfg: CreditConfig;
  let resumeFrom: string | null = null;
  // a folder given with --run-dir that already holds this run and a checkpoint (a requeued Slurm task) resumes it
  const resumeDir = o.resume ?? (o.runDir && readRunInfo(o.runDir) && latestTrlCheckpoint(o.runDir) ? o.runDir : undefined);
  if (resumeDir) {
    const checked = readRunInfoChecked(resumeDir);
    if (!checked.ok) throw new UserError(`--resume ${resumeDir}: not a run directory (${checked.reason})`);
    cfg = loadConfig(join(resumeDir, 'config.yaml'), o.sets).config;
    resumeFrom = latestTrlCheckpoint(resumeDir);
    if (!resumeFrom)
      throw new UserError(
        `--resume ${resumeDir}: the run has no TRL checkpoint yet (trl/checkpoint-N, every grpo.checkpoint_every steps); start it again instead`,
      );
  } else cfg = o.config ?? loadConfig(o.configPath!, o.sets).config;
  // everything that can refuse the run is checked before its folder exists
  checkTrlConfig(cfg);
  const python = pythonCommand();
  checkPython(python);
  const strategyParams = flattenCredit(cfg.credit);
  checkStrategy(python, cfg.credit.strategy, strategyParams);
  const runDir = resumeDir ?? o.runDir ?? createRunDir(o.outputDir ?? cfg.output_dir, cfg.name);
  mkdirSync(runDir, { recursive: true });
  const release = acquireRunLock(runDir);
  try {
    if (!resumeFrom) writeFileSync(join(runDir, 'config.yaml'), configToYaml(redactConfig(cfg)));
    const engine = o.engineCommand ?? process.argv.slice(0, 2);
    const spec = {
      run_dir: runDir,
      name: cfg.name,
      resume_from: resumeFrom,
      model_path: cfg.model.path,
      grpo: grpoConfigOf(cfg),
      strategy: cfg.credit.strategy,
      strategy_params: strategyParams,
      logging: { every: cfg.logging.every, tokens: cfg.logging.tokens },
      reward_worker: [...engine, 'reward', join(runDir, 'config.yaml')],
    };
    writeFileSync(join(runDir, 'trl_spec.json'), JSON.stringify(spec, null, 1) + '\n');
    o.reporter.started({ runDir, id: runDir.split(/[\\/]/).pop()!, name: cfg.name, backend: 'trl', totalSteps: cfg.grpo.steps });
    const child = spawn(python, ['-m', 'credit_lens.run', join(runDir, 'trl_spec.json')], { stdio: ['ignore', 'inherit', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-20_000);
      process.stderr.write(d);
    });
    void o.stopRequested.then(() => child.kill('SIGTERM'));
    const poller = followMetrics(runDir, cfg.grpo.steps, o.reporter);
    const code: number = await new Promise((resolve) => child.on('close', (c) => resolve(c ?? 1)));
    poller.stop();
    return finish(runDir, cfg, code, stderr, o.reporter);
  } finally {
    release();
  }
}

/**
 * The metrics rows as Python writes them: the dashboard and the progress bar follow the run as they follow any. Read
 * from where the last read ended (whole lines only), not the whole file each time.
 */
function followMetrics(runDir: string, total: number, reporter: TrlTrainOptions['reporter']): { stop(): void } {
  const path = join(runDir, 'metrics.jsonl');
  let offset = 0;
  const poll = () => {
    if (!existsSync(path)) return;
    const fd = openSync(path, 'r');
    let text: string;
    try {
      const size = fstatSync(fd).size;
      // a resume rewrites the file shorter (the steps after its checkpoint set aside): read it again from its start
      if (size < offset) offset = 0;
      const buf = Buffer.alloc(size - offset);
      text = buf.subarray(0, readSync(fd, buf, 0, buf.length, offset)).toString('utf8');
    } finally {
      closeSync(fd);
    }
    const whole = text.slice(0, text.lastIndexOf('\n') + 1);
    offset += Buffer.byteLength(whole);
    for (const line of whole.split('\n').filter(Boolean)) {
      const row = JSON.parse(line) as MetricsRow;
      reporter.metrics(runDir, row);
      reporter.progress({ phase: 'grpo', step: row.step, total });
    }
  };
  const timer = setInterval(poll, 500);
  return {
    stop() {
      clearInterval(timer);
      poll();
    },
  };
}

/** The run's final status from its run.json, reported; a Python that died without saying so leaves a failed run. */
function finish(
  runDir: string,
  cfg: CreditConfig,
  code: number,
  stderr: string,
  reporter: TrlTrainOptions['reporter'],
): { runDir: string; status: 'completed' | 'failed' | 'stopped' } {
  {
    const info = readRunInfo(runDir);
    const final: 'completed' | 'failed' | 'stopped' = info?.status === 'completed' || info?.status === 'stopped' ? info.status : 'failed';
    const error = final === 'failed' ? (info?.error ?? `credit_lens.run exited with ${code}: ${stderr.trim().split('\n').slice(-3).join(' ')}`) : undefined;
    // Python died before its run record was written, or while it said running: the folder still reads as a failed run
    if (final === 'failed' && info?.status !== 'failed')
      writeRunInfo(runDir, {
        ...(info ?? { id: runDir.split(/[\\/]/).pop()!, name: cfg.name, started: new Date().toISOString(), backend: 'trl', strategy: cfg.credit.strategy }),
        status: 'failed',
        ended: new Date().toISOString(),
        total_steps: cfg.grpo.steps,
        last_step: info?.last_step ?? 0,
        error,
      } as RunInfo);
    if (error) reporter.log('error', error);
    reporter.finished({ status: final, runDir, ...(error ? { error } : {}) });
    return { runDir, status: final };
  }
}
