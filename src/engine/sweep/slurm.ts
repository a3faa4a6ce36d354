// Sweeps on a Slurm cluster (one job array per sweep), using Slurm as it is: sbatch to submit, squeue and
// `scontrol show job` to watch, scancel to cancel. Nothing here schedules; Slurm does. Each array task trains one
// run of the sweep into a run directory fixed at submission, so that the run directories (which every run writes)
// are what the extension watches, and a requeued task finds its directory and resumes from its last checkpoint.
//
// The sweep folder, `<output_dir>/sweep-<ts>/`, holds what a user needs to read and resubmit it by hand:
//   slurm/sweep.sbatch           the array script (every option as an #SBATCH line)
//   slurm/configs/task-<i>.yaml  the expanded, resolved config of task i
//   slurm/sweep.json             job id, tasks (name, config, run directory, overrides)
//   slurm/logs/<job>_<i>.out     Slurm's stdout/stderr of task i
// The output directory must be on storage that the login node and the compute nodes share: the script checks that
// it can see the sweep folder before it trains, and says so in its log when it cannot.
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { configToYaml, slurmDefaults, type CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { claimFolder, readRunInfo, runTimestamp } from '../rundir/rundir';
import { writeFileAtomic } from '../core/files';
import { describeSweepRun, type SweepRun } from './sweep';
import { SLURM_ACTIVE_STATES, type SlurmSweepJson, type SlurmTaskJson, type SlurmTaskStatus } from '../../protocol/slurm';

const ACTIVE = new Set<string>(SLURM_ACTIVE_STATES);

/** `sweep.slurm` of the config (sbatch's own option names where one exists; defaults and docs in the config schema). */
export type SlurmOptions = NonNullable<NonNullable<CreditConfig['sweep']>['slurm']>;

export const DEFAULT_SLURM: SlurmOptions = slurmDefaults();

export type SlurmTask = SlurmTaskJson;
export type SlurmSweep = SlurmSweepJson;

export const SWEEP_JSON = 'slurm/sweep.json';

/** A job id as sbatch --parsable prints it, or an array task of one. */
const JOB_ID = /^\d+(_\d+)?$/;

/** POSIX single quotes: the only quoting that needs no further escaping. */
export function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The #SBATCH lines of a sweep of `n` tasks (the order sbatch --help lists them). */
export function sbatchDirectives(o: SlurmOptions, n: number, name: string, logDir: string): string[] {
  const d: string[] = [
    `--job-name=${name}`,
    `--array=0-${n - 1}${o.max_parallel ? `%${o.max_parallel}` : ''}`,
    // quoted: sbatch reads an #SBATCH line's double quotes, so a log folder with a space stays one option
    `--output="${join(logDir, '%A_%a.out')}"`,
    '--open-mode=append',
  ];
  if (o.partition) d.push(`--partition=${o.partition}`);
  if (o.account) d.push(`--account=${o.account}`);
  if (o.qos) d.push(`--qos=${o.qos}`);
  if (o.time) d.push(`--time=${o.time}`);
  if (o.cpus_per_task) d.push(`--cpus-per-task=${o.cpus_per_task}`);
  if (o.mem) d.push(`--mem=${o.mem}`);
  if (o.signal) d.push(`--signal=${o.signal}`);
  d.push(o.requeue ? '--requeue' : '--no-requeue');
  d.push(...o.extra_args);
  return d;
}

/** The engine command line a task runs, as shell words. */
export function engineCommand(o: SlurmOptions, cliPath: string): string {
  return o.engine === 'path' ? 'credit-lens' : `${shq(o.node)} ${shq(cliPath)}`;
}

/**
 * The array script. The batch shell runs the engine in the background and forwards SIGTERM to it (`--signal=B:TERM`
 * reaches only the batch shell), then waits for it to finish its checkpoint: a time limit or a preemption ends the
 * run `stopped` and resumable rather than torn. `train --run-dir` starts the run in that folder, or resumes it
 * when a requeued task finds it already there.
 */
export function sbatchScript(sweep: SlurmSweep, o: SlurmOptions, cliPath: string, cwd: string): string {
  const logDir = join(sweep.sweep_dir, 'slurm', 'logs');
  const lines = [
    '#!/bin/bash',
    `# Credit Lens sweep: ${sweep.tasks.length} runs of ${sweep.config}`,
    `# Submitted with: sbatch --parsable ${shq(join(sweep.sweep_dir, 'slurm', 'sweep.sbatch'))}  (every option is below)`,
    ...sbatchDirectives(o, sweep.tasks.length, `credit-lens-${sweep.tasks[0]?.name.split('-')[0] ?? 'sweep'}`, logDir).map((x) => `#SBATCH ${x}`),
    'set -uo pipefail',
    `SWEEP_DIR=${shq(sweep.sweep_dir)}`,
    'if [ ! -d "$SWEEP_DIR/slurm/configs" ]; then',
    '  echo "credit-lens: $SWEEP_DIR is not visible on $(hostname): output_dir must be on storage that the login node and the compute nodes share" >&2',
    '  exit 3',
    'fi',
    ...o.setup,
    `cd ${shq(cwd)} 2>/dev/null || cd "$SWEEP_DIR"`,
    'i=${SLURM_ARRAY_TASK_ID:?not an array task}',
    'CONFIG="$SWEEP_DIR/slurm/configs/task-$i.yaml"',
    'RUN_DIR=$(sed -n "$((i + 1))p" "$SWEEP_DIR/slurm/run_dirs.txt")',
    'echo "credit-lens: task $i on $(hostname), restart ${SLURM_RESTART_COUNT:-0}: $RUN_DIR"',
    `${engineCommand(o, cliPath)} train "$CONFIG" --run-dir "$RUN_DIR" &`,
    'pid=$!',
    'trap \'kill -TERM "$pid" 2>/dev/null\' TERM INT',
    'wait "$pid"; rc=$?',
    // `wait` returns early (status > 128) when the trap ran; wait again until the engine has checkpointed and exited
    'while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done',
    'exit "$rc"',
    '',
  ];
  return lines.join('\n');
}

/** Fails with a clear message when `dir` cannot be created or written (before anything is submitted). */
function checkWritable(dir: string, key: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
    if (!statSync(dir).isDirectory()) throw new Error('not a directory');
  } catch (e) {
    throw new UserError(`${key}: ${dir} cannot be written (${(e as Error).message}); Slurm tasks write their run directories there`);
  }
}

export function findOnPath(cmd: string, path = process.env.PATH ?? ''): string | null {
  for (const d of path.split(delimiter).filter(Boolean)) {
    const p = join(d, cmd);
    try {
      accessSync(p, constants.X_OK);
      if (statSync(p).isFile()) return p;
    } catch {
      /* next */
    }
  }
  return null;
}

function requireSlurm(cmd: string): string {
  const p = findOnPath(cmd);
  if (!p) {
    throw new UserError(
      `${cmd} is not on PATH: a Slurm sweep needs Slurm's client commands (sbatch, squeue, scontrol, ` +
        'scancel) on this machine, i.e. a cluster login node. Use sweep.executor: local to train here.',
    );
  }
  return p;
}

export interface CmdResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a Slurm command without blocking the event loop, with a time budget (a busy controller can be slow). */
export function runSlurm(cmd: string, args: string[], timeoutMs = 20_000): Promise<CmdResult> {
  const bin = requireSlurm(cmd);
  return new Promise((res) => {
    execFile(bin, args, { timeout: timeoutMs, encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as NodeJS.ErrnoException).code === 'number' ? Number((err as NodeJS.ErrnoException).code) : 1) : 0;
      const timedOut = err && (err as { killed?: boolean }).killed;
      res({ code, stdout, stderr: timedOut ? `${cmd} did not answer within ${timeoutMs / 1000} s` : stderr });
    });
  });
}

export interface PrepareOptions {
  configPath: string;
  outputDir: string;
  runs: SweepRun[];
  slurm: SlurmOptions;
  cliPath: string;
  cwd?: string;
  now?: Date;
}

/** Writes the sweep folder (configs, script, sweep.json) without submitting it. */
export function prepareSlurmSweep(p: PrepareOptions): SlurmSweep {
  if (p.runs.length === 0) throw new UserError('sweep.grid expands to no runs: nothing to submit');
  const outputDir = resolve(p.outputDir);
  // The log folder goes into an #SBATCH line in double quotes, and every path into the script: a quote or a newline in
  // it would end the option (or the line) early.
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  if (/["\u0000-\u001f\u007f]/.test(outputDir))
    throw new UserError(`output_dir: ${JSON.stringify(outputDir)} cannot hold a Slurm sweep: its path has a double quote or a control character`);
  checkWritable(outputDir, 'output_dir');
  const ts = runTimestamp(p.now ?? new Date());
  // Claimed atomically: a second sweep prepared in the same second gets sweep-<ts>-2, never this one.
  const sweepDir = claimFolder(join(outputDir, `sweep-${ts}`));
  for (const sub of ['slurm/configs', 'slurm/logs']) mkdirSync(join(sweepDir, sub), { recursive: true });
  const tasks: SlurmTask[] = p.runs.map((run, index) => {
    const cfg: CreditConfig = { ...run.config, name: run.name };
    delete (cfg as { sweep?: unknown }).sweep;
    // Not *.credit.yaml: the workspace would take each expanded copy for a config of its own.
    const config = join(sweepDir, 'slurm', 'configs', `task-${index}.yaml`);
    writeFileAtomic(config, configToYaml(cfg));
    checkWritable(resolve(run.config.output_dir), `output_dir of ${run.name}`);
    // Reserved now, not when the task starts: a sweep prepared in the same second cannot be given the same folder (its
    // task would resume this run with its own config). The task's `train --run-dir` starts in the empty folder.
    const runDir = claimFolder(join(resolve(run.config.output_dir), `${run.name}-${ts}`));
    return { index, name: run.name, config, run_dir: runDir, overrides: run.overrides, ...describeSweepRun(run) };
  });
  const sweep: SlurmSweep = {
    kind: 'credit-lens-slurm-sweep',
    version: 1,
    sweep_dir: sweepDir,
    config: resolve(p.configPath),
    created: (p.now ?? new Date()).toISOString(),
    job_id: null,
    script: join(sweepDir, 'slurm', 'sweep.sbatch'),
    tasks,
  };
  writeFileAtomic(join(sweepDir, 'slurm', 'run_dirs.txt'), tasks.map((t) => t.run_dir).join('\n') + '\n');
  writeFileAtomic(sweep.script, sbatchScript(sweep, p.slurm, p.cliPath, p.cwd ?? process.cwd()));
  writeFileAtomic(join(sweepDir, SWEEP_JSON), JSON.stringify(sweep, null, 2) + '\n');
  return sweep;
}

/** Submits a prepared sweep as one job array; Slurm's own message when sbatch refuses it. */
export async function submitSlurmSweep(sweep: SlurmSweep, o: SlurmOptions): Promise<SlurmSweep> {
  const array = `--array=0-${sweep.tasks.length - 1}${o.max_parallel ? `%${o.max_parallel}` : ''}`;
  const r = await runSlurm('sbatch', ['--parsable', array, sweep.script]);
  if (r.code !== 0) throw new UserError(`sbatch refused the sweep: ${(r.stderr || r.stdout).trim() || `exit code ${r.code}`}\n(script: ${sweep.script})`);
  const jobId = r.stdout.trim().split(';')[0];
  if (!/^\d+$/.test(jobId)) throw new UserError(`sbatch answered ${JSON.stringify(r.stdout.trim())}, not a job id`);
  const out = { ...sweep, job_id: jobId };
  writeFileAtomic(join(sweep.sweep_dir, SWEEP_JSON), JSON.stringify(out, null, 2) + '\n');
  return out;
}

export function readSlurmSweep(sweepDir: string): SlurmSweep {
  const p = join(sweepDir, SWEEP_JSON);
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(p, 'utf8'));
  } catch (e) {
    throw new UserError(`${p}: not a readable Slurm sweep (${(e as Error).message})`);
  }
  const s = v as SlurmSweep;
  if (s?.kind !== 'credit-lens-slurm-sweep' || !Array.isArray(s.tasks)) throw new UserError(`${p}: not a Credit Lens Slurm sweep file`);
  // The job id goes to scancel, squeue and scontrol: only what sbatch --parsable answers (digits, an array task's _N).
  if (s.job_id !== null && (typeof s.job_id !== 'string' || !JOB_ID.test(s.job_id)))
    throw new UserError(
      `${p}: job_id ${JSON.stringify(s.job_id)} is not a Slurm job id (digits, optionally _ and an array task); the file was changed by hand?`,
    );
  return s;
}

/** Slurm's view of one array task: state, pending reason, exit code, restarts. */
export interface SlurmTaskState {
  state: string;
  reason: string | null;
  exit_code: string | null;
  restarts: number;
}

/** `scontrol show job` prints one record per array task, `Key=Value` pairs separated by spaces and lines. */
export function parseScontrol(text: string): Map<number, SlurmTaskState> {
  const out = new Map<number, SlurmTaskState>();
  for (const rec of text.split(/\n\s*\n/)) {
    const kv = new Map<string, string>();
    for (const m of rec.matchAll(/(\w+)=(\S*)/g)) if (!kv.has(m[1])) kv.set(m[1], m[2]);
    const task = kv.get('ArrayTaskId');
    if (task === undefined || !/^\d+$/.test(task)) continue;
    const reason = kv.get('Reason');
    out.set(Number(task), {
      state: kv.get('JobState') ?? 'UNKNOWN',
      reason: reason && reason !== 'None' ? reason : null,
      exit_code: kv.get('ExitCode') ?? null,
      restarts: Number(kv.get('Restarts') ?? 0),
    });
  }
  return out;
}

/** `squeue -h -r -o '%K|%T|%r'`: array task id, state, reason (pending tasks of an array may print as a range). */
export function parseSqueue(text: string): Map<number, SlurmTaskState> {
  const out = new Map<number, SlurmTaskState>();
  for (const line of text.split('\n')) {
    const [ids, state, reason] = line.trim().split('|');
    if (!ids || !state) continue;
    const r = reason && reason !== 'None' ? reason : null;
    for (const part of ids
      .replace(/^\[|\]$/g, '')
      .replace(/%\d+$/, '')
      .split(',')) {
      const m = /^(\d+)(?:-(\d+))?$/.exec(part);
      if (!m) continue;
      for (let i = Number(m[1]); i <= Number(m[2] ?? m[1]); i++) out.set(i, { state, reason: r, exit_code: null, restarts: 0 });
    }
  }
  return out;
}

export type TaskStatus = SlurmTaskStatus;

const SLURM_FAILURES: Record<string, string> = {
  OUT_OF_MEMORY: 'out of memory (raise sweep.slurm.mem)',
  TIMEOUT: 'hit the time limit (raise sweep.slurm.time)',
  NODE_FAIL: 'the node failed',
  CANCELLED: 'cancelled',
  FAILED: 'failed',
  PREEMPTED: 'preempted',
  BOOT_FAIL: 'the node failed to boot',
  DEADLINE: 'missed its deadline',
};

function summarize(s: SlurmTaskState | undefined, run: ReturnType<typeof readRunInfo>, sweepDir: string, jobId: string | null, index: number): string {
  const active = s && ACTIVE.has(s.state);
  // A run.json still saying `running` after Slurm ended the task means the engine was killed before it could write
  // its end (SIGKILL after KillWait, the OOM killer, a lost node): Slurm's state is then the truth.
  const torn = run?.status === 'running' && s && !active;
  if (run && !torn && !(active && run.status !== 'running')) return run.status + (run.error ? `: ${run.error.split('\n')[0]}` : '');
  if (s && active) return s.state.toLowerCase() + (s.reason ? ` (${s.reason})` : '');
  if (s && SLURM_FAILURES[s.state]) {
    const log = jobId ? join(sweepDir, 'slurm', 'logs', `${jobId}_${index}.out`) : null;
    const tail =
      log && existsSync(log)
        ? readFileSync(log, 'utf8')
            .trim()
            .split('\n')
            .filter((l) => /credit-lens:|error/i.test(l))
            .pop()
        : null;
    return `${SLURM_FAILURES[s.state]}${tail ? `: ${tail}` : ''}${run ? '' : ' before the run started'}`;
  }
  if (torn) return `ended by Slurm (${s!.state}) while the run was training; resume it from its last checkpoint`;
  if (s) return s.state.toLowerCase();
  return jobId ? 'unknown to Slurm (finished long ago?)' : 'not submitted';
}

/** What Slurm says when it no longer knows a job (it ended before MinJobAge): an answer, not a failure. */
const JOB_GONE = /invalid job id/i;

export interface SlurmStatus {
  tasks: TaskStatus[];
  /**
   * Why Slurm could not be asked (a controller timeout, squeue missing its daemon), or null when it answered. Without an
   * answer a task's Slurm state is unknown, not ended: watchers keep polling.
   */
  unanswered: string | null;
}

/** Every task's state, from Slurm (squeue, then scontrol for tasks squeue no longer lists) and the run directories. */
export async function slurmStatus(sweep: SlurmSweep): Promise<SlurmStatus> {
  const states = new Map<number, SlurmTaskState>();
  let unanswered: string | null = null;
  if (sweep.job_id) {
    const failed = (cmd: string, r: CmdResult) =>
      r.code !== 0 && !JOB_GONE.test(r.stderr) && `${cmd}: ${(r.stderr || r.stdout).trim() || `exit code ${r.code}`}`;
    const sc = await runSlurm('scontrol', ['show', 'job', sweep.job_id]);
    if (sc.code === 0) for (const [k, v] of parseScontrol(sc.stdout)) states.set(k, v);
    const sq = await runSlurm('squeue', ['-h', '-r', '-j', sweep.job_id, '-o', '%K|%T|%r']);
    if (sq.code === 0)
      for (const [k, v] of parseSqueue(sq.stdout)) states.set(k, { ...v, restarts: states.get(k)?.restarts ?? 0, exit_code: states.get(k)?.exit_code ?? null });
    // squeue lists what waits or runs; scontrol what ended lately. Without either answer nothing can be said.
    unanswered = failed('squeue', sq) || failed('scontrol', sc) || null;
  }
  const tasks = sweep.tasks.map((t) => {
    const s = states.get(t.index);
    const run = existsSync(t.run_dir) ? readRunInfo(t.run_dir) : null;
    return {
      index: t.index,
      name: t.name,
      run_dir: t.run_dir,
      slurm_job: sweep.job_id ? `${sweep.job_id}_${t.index}` : null,
      slurm_state: s?.state ?? null,
      slurm_reason: s?.reason ?? null,
      run_status: run?.status ?? null,
      summary:
        !s && !run && sweep.cancelled?.includes(t.index)
          ? 'cancelled before it started'
          : !s && unanswered && run?.status !== 'completed'
            ? `Slurm did not answer (${unanswered.split('\n')[0]})${run ? `; the run says ${run.status}` : ''}`
            : summarize(s, run, sweep.sweep_dir, sweep.job_id, t.index),
    };
  });
  return { tasks, unanswered };
}

/** Whether any task is still waiting or running, by Slurm's account or its run directory's. */
export function sweepActive(tasks: TaskStatus[]): boolean {
  return tasks.some((t) => (t.slurm_state && ACTIVE.has(t.slurm_state)) || (!t.slurm_state && t.run_status === 'running'));
}

/** scancel one task (`index`) or the whole array. The engine gets SIGTERM and ends `stopped`, resumable. */
export async function slurmCancel(sweep: SlurmSweep, index?: number): Promise<void> {
  if (!sweep.job_id) throw new UserError(`${sweep.sweep_dir}: the sweep was never submitted`);
  if (index !== undefined && !sweep.tasks.some((t) => t.index === index))
    throw new UserError(`--task ${index}: the sweep has tasks 0–${sweep.tasks.length - 1}`);
  const r = await runSlurm('scancel', [index === undefined ? sweep.job_id : `${sweep.job_id}_${index}`]);
  if (r.code !== 0) throw new UserError(`scancel failed: ${(r.stderr || r.stdout).trim()}`);
  // Slurm forgets a pending array task the moment it is cancelled; the sweep's own file remembers it.
  const cur = readSlurmSweep(sweep.sweep_dir);
  const cancelled = new Set([...(cur.cancelled ?? []), ...(index === undefined ? cur.tasks.map((t) => t.index) : [index])]);
  writeFileAtomic(join(sweep.sweep_dir, SWEEP_JSON), JSON.stringify({ ...cur, cancelled: [...cancelled].sort((a, b) => a - b) }, null, 2) + '\n');
}
