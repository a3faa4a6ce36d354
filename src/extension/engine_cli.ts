// The engine's one-shot commands (`credit-lens analyze …`, `credit-lens sweep --executor slurm`, `credit-lens slurm
// status|cancel`), run as their own process with the Node that trains (design.md#protocol). One launch path for every caller —
// the credit-analysis view, the sweep table, the Slurm watcher — so all get the same typed answers, the same error
// text, a time budget and cancellation: a slow analysis or a slow cluster controller never blocks the host. The engine ships in the
// same .vsix as the extension, so there is no "engine without analyze" case to detect.
// No vscode import: the unit tests drive it with a stand-in CLI script.
import { isCompareReport, type CompareReport } from '../protocol/compare';
import { execFile, spawn } from 'node:child_process';
import type { AnalyzeReport } from '../protocol/analysis';
import type { ProbeReport } from '../engine/rundir/probe_record';
import type { ImportedInfo } from '../protocol';
import type { SlurmStatusJson, SlurmSweepJson } from '../protocol/slurm';
import { chooseNode } from './node_runtime';

export interface AnalyzeOptions {
  /** `--from-step` / `--to-step`; null or absent for an open end. */
  from?: number | null;
  to?: number | null;
  /** `--baseline <run>`: adds the report's `appendix_b`. */
  baselineDir?: string | null;
  /** Aborting kills the process; the promise then rejects with a CancelledError. */
  signal?: AbortSignal;
}

export interface AnalyzeResult {
  report: AnalyzeReport;
  /** Wall time of the process, for the view's footer. */
  elapsedMs: number;
}

export class CancelledError extends Error {
  constructor() {
    super('cancelled');
    this.name = 'CancelledError';
  }
}

/** `credit-lens compare` arguments after the CLI path. */
export function compareArgs(baselineDirs: string[], otherDirs: string[], split: 'test' | 'validation' = 'test', step?: number): string[] {
  // --common-step: runs that ended early (stopped, failed) are compared at the latest step all evaluated, marked exploratory;
  // --step N: the step a person picked
  const at = step === undefined ? ['--common-step'] : ['--step', String(step)];
  return ['compare', ...otherDirs, ...baselineDirs.flatMap((d) => ['--baseline', d]), '--split', split, ...at, '--json'];
}

/** A one-shot command's JSON answer; `what` names the command in the error. */
function parseJsonOutput(stdout: string, what: string): unknown {
  try {
    return JSON.parse(stdout);
  } catch (e) {
    throw new Error(`${what} printed no JSON: ${(e as Error).message}`);
  }
}

export function parseCompareReport(stdout: string): CompareReport {
  const v = parseJsonOutput(stdout, 'credit-lens compare');
  if (!isCompareReport(v)) throw new Error('credit-lens compare printed JSON of another shape (an engine of another version?)');
  return v;
}

/** `credit-lens analyze` arguments after the CLI path (src/engine/analysis USAGE). */
export function analyzeArgs(runDir: string, o: AnalyzeOptions = {}): string[] {
  // --probe: a probed run's credit-accuracy tables (empty for the others)
  const args = ['analyze', runDir, '--json', '--probe'];
  if (o.from != null) args.push('--from-step', String(o.from));
  if (o.to != null) args.push('--to-step', String(o.to));
  if (o.baselineDir) args.push('--baseline', o.baselineDir);
  return args;
}

/**
 * What a failed CLI printed that a user should read, its cause first: the CLI prints a UserError as "error: <message>"
 * after whatever it logged on the way (the backend, the memory), so that line and the ones after it come first, without
 * the prefix; a crash prints its stack, whose frames are dropped and whose last few lines are kept.
 */
export function cliError(stderr: string, fallback: string): string {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((l) => !/^\s+at\s/.test(l));
  const at = lines.map((l) => /^error: /.test(l)).lastIndexOf(true);
  if (at >= 0) return [lines[at].replace(/^error: /, ''), ...lines.slice(at + 1)].slice(0, 4).join('\n');
  return lines.slice(-4).join('\n') || fallback;
}

/** Checks the JSON is an analysis report of the version this extension reads, not only that it parses. */
export function parseAnalyzeReport(stdout: string): AnalyzeReport {
  const v = parseJsonOutput(stdout, 'credit-lens analyze');
  const r = v as Partial<AnalyzeReport> | null;
  if (!r || typeof r !== 'object' || r.version !== 1 || !r.meta || typeof r.meta !== 'object' || !r.token_types) {
    throw new Error(`credit-lens analyze printed JSON that is not a version 1 analysis report`);
  }
  return r as AnalyzeReport;
}

/** `credit-lens import --json`: what came in and where it went (src/engine/import/import.ts ImportResult). */
export interface ImportJson {
  runDir: string;
  format: ImportedInfo['format'];
  records: number;
  skipped: number;
  steps: number[];
  problems: { file: string; line: number; reason: string }[];
}

/** `credit-lens import` arguments after the CLI path. */
export function importArgs(source: string, o: { model?: string | null; out: string; format?: string }): string[] {
  const args = ['import', source, '--out', o.out, '--json', '--progress-json'];
  if (o.model) args.push('--model', o.model);
  if (o.format && o.format !== 'auto') args.push('--format', o.format);
  return args;
}

/** `credit-lens import <folder> --follow` arguments: a run still training, imported as it grows (until stopped). */
export function followArgs(source: string, o: { model?: string | null; out: string; format?: string }): string[] {
  const args = ['import', source, '--follow', '--out', o.out, '--json'];
  if (o.model) args.push('--model', o.model);
  if (o.format && o.format !== 'auto') args.push('--format', o.format);
  return args;
}

/** `credit-lens probe` arguments for one episode (the heatmap's Probe This Episode…). */
export function probeArgs(runDir: string, step: number, episode: number, o: { rollouts: number; replace?: boolean; server?: string }): string[] {
  return [
    'probe',
    runDir,
    '--step',
    String(step),
    '--episode',
    String(episode),
    '--rollouts',
    String(o.rollouts),
    ...(o.replace ? ['--replace'] : []),
    ...(o.server ? ['--server', o.server] : []),
    '--json',
    '--progress-json',
  ];
}

export class EngineCli {
  constructor(
    readonly cliPath: string,
    private readonly nodePath: () => string,
  ) {}

  /** Runs `credit-lens <args>` and resolves with its stdout; a non-zero exit rejects with the engine's own message. */
  private run(args: string[], what: string, o: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<string> {
    return new Promise((resolve, reject) => {
      if (o.signal?.aborted) return reject(new CancelledError());
      let node;
      try {
        node = chooseNode(this.nodePath());
      } catch (e) {
        return reject(e);
      }
      execFile(
        node.command,
        [this.cliPath, ...args],
        { env: { ...process.env, ...node.env }, maxBuffer: 256 << 20, timeout: o.timeoutMs ?? 60_000, signal: o.signal },
        (err, stdout, stderr) => {
          if (o.signal?.aborted) return reject(new CancelledError());
          if (err) return reject(new Error(cliError(stderr, `${what}: ${err.message}`)));
          resolve(stdout);
        },
      );
    });
  }

  /** The same, for the commands that answer in JSON (`--json`). */
  private async json<T>(args: string[], what: string, o: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<T> {
    const out = await this.run(args, what, o);
    try {
      return JSON.parse(out) as T;
    } catch {
      throw new Error(`${what}: the engine's answer is not JSON`);
    }
  }

  /** Submits a config's sweep to Slurm as one job array; sbatch's own message when it refuses. */
  slurmSubmit(configPath: string, sets: string[], signal?: AbortSignal): Promise<SlurmSweepJson> {
    return this.json(['sweep', configPath, '--executor', 'slurm', '--json', ...sets.flatMap((s) => ['--set', s])], 'sbatch', { signal });
  }

  /** Every task's Slurm state and run status (squeue, scontrol show job, the run directories). */
  slurmStatus(sweepDir: string, signal?: AbortSignal): Promise<SlurmStatusJson> {
    return this.json(['slurm', 'status', sweepDir, '--json'], 'squeue', { signal });
  }

  /** scancel one task, or the whole array. */
  async slurmCancel(sweepDir: string, task?: number): Promise<void> {
    await this.run(['slurm', 'cancel', sweepDir, ...(task === undefined ? [] : ['--task', String(task)])], 'scancel');
  }

  /** `credit-lens import … --json --progress-json`: resolves with its JSON, reporting progress; aborting sends SIGTERM. */
  importRollouts(args: string[], onProgress: (done: number, total: number) => void, signal?: AbortSignal): Promise<ImportJson> {
    return this.withProgress<ImportJson>(args, 'credit-lens import', onProgress, signal);
  }

  /** `credit-lens probe … --json --progress-json` (probeArgs): the probe's report. Aborting stops it keeping finished episodes. */
  probe(args: string[], onProgress: (done: number, total: number) => void, signal?: AbortSignal): Promise<ProbeReport> {
    return this.withProgress<ProbeReport>(args, 'credit-lens probe', onProgress, signal);
  }

  /**
   * `credit-lens import <dir> --follow --json` (followArgs): runs until `signal` aborts (SIGTERM, after which the engine
   * finishes the run directory with its whole steps and prints its answer) or until it ends by itself.
   */
  follow(args: string[], signal: AbortSignal): Promise<ImportJson> {
    return this.withProgress<ImportJson>(args, 'credit-lens import --follow', () => {}, signal, { answerAfterAbort: true });
  }

  /**
   * A long command that prints `{"progress": {done, total}}` lines on stderr and its JSON answer on stdout. An abort
   * sends SIGTERM and rejects with CancelledError, unless `answerAfterAbort`: then the answer the command prints as it
   * ends is the result.
   */
  private withProgress<T>(
    args: string[],
    what: string,
    onProgress: (done: number, total: number) => void,
    signal?: AbortSignal,
    o: { answerAfterAbort?: boolean } = {},
  ): Promise<T> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new CancelledError());
      let node;
      try {
        node = chooseNode(this.nodePath());
      } catch (e) {
        return reject(e);
      }
      const child = spawn(node.command, [this.cliPath, ...args], { env: { ...process.env, ...node.env }, stdio: ['ignore', 'pipe', 'pipe'] });
      const onAbort = () => child.kill('SIGTERM');
      signal?.addEventListener('abort', onAbort, { once: true });
      let stdout = '';
      let stderr = '';
      let partial = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        const lines = (partial + d).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          const p = /^\{"progress":/.test(line) ? (JSON.parse(line) as { progress: { done: number; total: number } }).progress : null;
          if (p) onProgress(p.done, p.total);
          else if (stderr.length < 1 << 20) stderr += line + '\n';
        }
      });
      child.on('error', (e) => reject(e));
      child.on('close', (code) => {
        signal?.removeEventListener('abort', onAbort);
        if (signal?.aborted && !o.answerAfterAbort) return reject(new CancelledError());
        if (code !== 0) return reject(new Error(cliError(stderr + partial, `${what} exited with code ${code}`)));
        try {
          resolve(JSON.parse(stdout) as T);
        } catch {
          reject(new Error(`${what}: the engine's answer is not JSON`));
        }
      });
    });
  }

  async analyze(runDir: string, o: AnalyzeOptions = {}): Promise<AnalyzeResult> {
    const t0 = Date.now();
    // A long run's million token rows take seconds to read and megabytes to print.
    const out = await this.run(analyzeArgs(runDir, o), 'credit-lens analyze', { signal: o.signal, timeoutMs: 300_000 });
    return { report: parseAnalyzeReport(out), elapsedMs: Date.now() - t0 };
  }

  /** `credit-lens compare --json`: groups of seeded runs against the baseline's, on the same eval instances. */
  async compare(
    baselineDirs: string[],
    otherDirs: string[],
    o: { split?: 'test' | 'validation'; step?: number; signal?: AbortSignal } = {},
  ): Promise<CompareReport> {
    const out = await this.run(compareArgs(baselineDirs, otherDirs, o.split, o.step), 'credit-lens compare', { signal: o.signal, timeoutMs: 300_000 });
    return parseCompareReport(out);
  }
}
