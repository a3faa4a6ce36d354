// The Slurm side of the command line: `credit-lens sweep <cfg> --executor slurm` submits, `credit-lens slurm
// status|cancel <sweep-dir>` watches and cancels. The extension runs the same commands, so what a person sees in VS
// Code is what they would see in a terminal on the login node.
import { join } from 'node:path';
import type { CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import {
  DEFAULT_SLURM,
  prepareSlurmSweep,
  readSlurmSweep,
  slurmCancel,
  slurmStatus,
  submitSlurmSweep,
  sweepActive,
  type SlurmOptions,
  type SlurmSweep,
  type TaskStatus,
} from './slurm';
import type { SweepRun } from './sweep';
import type { SlurmStatusJson } from '../../protocol/slurm';

/** The engine bundle a task runs (`engine: bundled`): this very file's bundle, dist/engine/cli.js. */
export function bundledCli(): string {
  return process.argv[1] && /cli\.js$/.test(process.argv[1]) ? process.argv[1] : join(__dirname, 'cli.js');
}

export async function submitSweep(
  configPath: string,
  config: CreditConfig,
  runs: SweepRun[],
  slurm: Partial<SlurmOptions> | undefined,
  opts: { dryRun?: boolean; cliPath?: string } = {},
): Promise<SlurmSweep> {
  const o: SlurmOptions = { ...DEFAULT_SLURM, ...(slurm ?? {}) };
  const sweep = prepareSlurmSweep({ configPath, outputDir: config.output_dir, runs, slurm: o, cliPath: opts.cliPath ?? bundledCli() });
  return opts.dryRun ? sweep : submitSlurmSweep(sweep, o);
}

export function statusTable(tasks: TaskStatus[]): string {
  const lines = ['| task | run | Slurm job | Slurm state | status | run directory |', '|---|---|---|---|---|---|'];
  for (const t of tasks) {
    lines.push(
      `| ${t.index} | ${t.name} | ${t.slurm_job ?? '—'} | ${t.slurm_state ?? '—'}${t.slurm_reason ? ` (${t.slurm_reason})` : ''} | ${t.summary} | ${t.run_dir} |`,
    );
  }
  return lines.join('\n');
}

/** `credit-lens slurm status <sweep-dir> [--json] [--wait] [--poll S]` and `credit-lens slurm cancel <sweep-dir> [--task I]`. */
export async function cmdSlurm(
  sub: string | undefined,
  sweepDir: string | undefined,
  flags: { json?: boolean; wait?: boolean; poll?: number; task?: number },
  out: (s: string) => void,
): Promise<number> {
  if (!sweepDir) throw new UserError('slurm status|cancel needs the sweep folder (<output_dir>/sweep-<ts>)');
  const sweep = readSlurmSweep(sweepDir);
  if (sub === 'cancel') {
    await slurmCancel(sweep, flags.task);
    out(flags.task === undefined ? `cancelled job ${sweep.job_id} (${sweep.tasks.length} tasks)` : `cancelled task ${sweep.job_id}_${flags.task}`);
    return 0;
  }
  if (sub !== 'status') throw new UserError(`slurm ${sub ?? ''}: expected status or cancel`);
  let st = await slurmStatus(sweep);
  // Poll with a growing interval: Slurm's controller is shared by everyone on the cluster. A poll Slurm did not answer
  // says nothing about the tasks: --wait goes on (saying so), it never reads silence as the end.
  let delay = (flags.poll ?? 2) * 1000;
  while (flags.wait && (st.unanswered || sweepActive(st.tasks))) {
    if (st.unanswered) process.stderr.write(`Slurm did not answer (${st.unanswered}); asking again in ${Math.round(delay / 1000)} s\n`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 1.5, 30_000);
    st = await slurmStatus(sweep);
  }
  const json: SlurmStatusJson = { job_id: sweep.job_id, sweep_dir: sweep.sweep_dir, tasks: st.tasks, slurm_error: st.unanswered };
  out(flags.json ? JSON.stringify(json, null, 2) : statusTable(st.tasks) + (st.unanswered ? `\nSlurm did not answer: ${st.unanswered}` : ''));
  return 0;
}
