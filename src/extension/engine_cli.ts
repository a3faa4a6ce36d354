// One way for the extension to run the engine's command line (not a training run: those are EngineProcesses with
// JSON-RPC, runs.ts): `analyze`, Slurm submission, status and cancel. Every call is asynchronous, has a time budget
// and can be cancelled, so a slow cluster controller or a large analysis never blocks the extension host. The engine
// ships in the same .vsix, so every command it documents is there; a failure is reported with the engine's own
// message (its stderr's `error:` line).
import { execFile } from 'node:child_process';
import type { CreditAnalysis } from '../protocol/analysis';
import type { SlurmSweepJson, SlurmStatusJson } from '../protocol/slurm';
import { chooseNode } from './node';

export interface CliResult { code: number; stdout: string; stderr: string }

export class EngineCliError extends Error {}

/** The engine's one-line reason from its stderr (`error: …`), else the last line. */
export function engineMessage(stderr: string, fallback: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  const err = lines.findIndex((l) => l.startsWith('error: '));
  if (err >= 0) return lines.slice(err).join('\n').replace(/^error: /, '');
  return lines[lines.length - 1] ?? fallback;
}

export class EngineCli {
  constructor(private readonly cliPath: string, private readonly nodePath: () => string | undefined) {}

  /** Runs `credit-lens <args>`; resolves with the exit code (never rejects on a non-zero exit, only on a spawn failure). */
  exec(args: string[], opts: { signal?: AbortSignal; timeoutMs?: number; cwd?: string } = {}): Promise<CliResult> {
    const node = chooseNode(this.nodePath());
    return new Promise((resolve, reject) => {
      execFile(node.command, [this.cliPath, ...args], {
        env: { ...process.env, ...node.env }, maxBuffer: 256 << 20, timeout: opts.timeoutMs ?? 120_000, signal: opts.signal, cwd: opts.cwd,
      }, (err, stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { code?: number | string; killed?: boolean }) | null;
        if (e && typeof e.code !== 'number' && !e.killed) {
          if (e.name === 'AbortError') { reject(new EngineCliError('cancelled')); return; }
          reject(new EngineCliError(`the engine could not be started: ${e.message}`));
          return;
        }
        resolve({ code: e ? (typeof e.code === 'number' ? e.code : 1) : 0, stdout, stderr: e?.killed ? `${stderr}\nerror: no answer within ${(opts.timeoutMs ?? 120_000) / 1000} s` : stderr });
      });
    });
  }

  private async json<T>(args: string[], what: string, opts: { signal?: AbortSignal; timeoutMs?: number; cwd?: string } = {}): Promise<T> {
    const r = await this.exec(args, opts);
    if (r.code !== 0) throw new EngineCliError(engineMessage(r.stderr, `${what} failed (exit code ${r.code})`));
    try {
      return JSON.parse(r.stdout) as T;
    } catch {
      throw new EngineCliError(`${what}: the engine's answer is not JSON`);
    }
  }

  /** `credit-lens analyze <run> --json` (seed 002's tables; DESIGN §7). */
  analyze(runDir: string, extra: string[] = [], signal?: AbortSignal): Promise<CreditAnalysis> {
    return this.json<CreditAnalysis>(['analyze', runDir, '--json', ...extra], 'analyze', { signal, timeoutMs: 300_000 });
  }

  /** Submits a config's sweep to Slurm as one job array (`credit-lens sweep <cfg> --executor slurm --json`). */
  slurmSubmit(configPath: string, sets: string[], signal?: AbortSignal): Promise<SlurmSweepJson> {
    return this.json<SlurmSweepJson>(['sweep', configPath, '--executor', 'slurm', '--json', ...sets.flatMap((s) => ['--set', s])], 'sbatch', { signal, timeoutMs: 60_000 });
  }

  slurmStatus(sweepDir: string, signal?: AbortSignal): Promise<SlurmStatusJson> {
    return this.json<SlurmStatusJson>(['slurm', 'status', sweepDir, '--json'], 'squeue', { signal, timeoutMs: 60_000 });
  }

  async slurmCancel(sweepDir: string, task?: number): Promise<void> {
    const r = await this.exec(['slurm', 'cancel', sweepDir, ...(task === undefined ? [] : ['--task', String(task)])], { timeoutMs: 60_000 });
    if (r.code !== 0) throw new EngineCliError(engineMessage(r.stderr, `scancel failed (exit code ${r.code})`));
  }
}
