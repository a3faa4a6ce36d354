// What the analysis reads from a run directory besides its token tables: run.json, config.yaml's credit block,
// metrics.jsonl's eval and training summaries; each failure a UserError naming the file.
import { meanOfSum } from './credit_tables';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { MetricsRow } from '../../protocol';
import type { CreditAnalysis, EvalSuccess } from '../../protocol/analysis';
import { UserError } from '../core/errors';
import { RUN_JSON } from '../rundir/rundir';
import { readRunConfig } from '../rundir/run_config';

// ---- reading the run ----

export function checkRunDir(runDir: string): void {
  let isDir = false;
  try {
    isDir = statSync(runDir).isDirectory();
  } catch {
    throw new UserError(`${runDir}: no such run directory`);
  }
  if (!isDir) throw new UserError(`${runDir} is not a directory; analyze takes a run directory (the folder holding run.json and tokens/)`);
  if (!existsSync(join(runDir, RUN_JSON)) && !existsSync(join(runDir, 'tokens'))) {
    throw new UserError(`${runDir} is not a run directory: it has neither ${RUN_JSON} nor tokens/`);
  }
}

export function compileRegex(source: string | undefined): RegExp | null {
  if (source === undefined) return null;
  if (source === '') throw new UserError('--reasoning-regex is empty; give a regex such as "^[0-9+\\-*/=().]+$"');
  try {
    // No flags, like design.md#semantics's default regex, so a pattern written for it (e.g. with `\=`) compiles the same.
    return new RegExp(source);
  } catch (e) {
    throw new UserError(`--reasoning-regex ${JSON.stringify(source)} is not a valid regular expression: ${(e as Error).message}`);
  }
}

export function checkStep(name: string, v: number | undefined): void {
  if (v !== undefined && !(Number.isInteger(v) && v >= 0)) throw new UserError(`${name} must be a non-negative integer, got ${v}`);
}

export function readConfigCredit(runDir: string): Record<string, unknown> | null {
  return readRunConfig(runDir)?.credit ?? null;
}

export function evalSuccess(rows: MetricsRow[], toStep: number | undefined): EvalSuccess {
  const evals = rows.filter((r) => typeof r.eval_success === 'number' && r.phase !== 'sft');
  // The trainer logs the pre-GRPO eval as the one `phase: 'eval'` row (step 0); GRPO rows carry the later ones.
  const before = evals.find((r) => r.phase === 'eval');
  const bound = toStep ?? Infinity;
  let last: MetricsRow | undefined;
  for (const r of evals) if (r.step <= bound) last = r;
  return { before_grpo: before?.eval_success ?? null, final: last?.eval_success ?? null, final_step: last?.step ?? null };
}

/**
 * Training success and reward over the analysed steps, from the GRPO rows of metrics.jsonl: every step has
 * prompts_per_step × group_size episodes, so the mean of the per-step rates is the rate over the episodes.
 * (Reading the episode tables for this would cost a tenth of the time budget for a million tokens.)
 */
export function trainingSummary(rows: MetricsRow[], steps: number[]): CreditAnalysis['meta']['training'] {
  const wanted = new Set(steps);
  let n = 0,
    nr = 0,
    success = 0,
    reward = 0;
  for (const r of rows) {
    if (r.phase !== 'grpo' || !wanted.has(r.step)) continue;
    if (typeof r.success_rate === 'number') {
      n++;
      success += r.success_rate;
    }
    if (typeof r.reward_mean === 'number') {
      nr++;
      reward += r.reward_mean;
    }
  }
  return { steps: Math.max(n, nr), success_rate: meanOfSum(success, n), reward_mean: meanOfSum(reward, nr) };
}
