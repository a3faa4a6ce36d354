// What the runs tree and the sweep table say about a run, computed from its metrics.jsonl rows.
// Pure (no vscode), so it is unit-tested directly.
import type { MetricsRow } from '../protocol/index';
import { formatPercent } from '../protocol/number_format';

export interface MetricsSummary {
  /** Latest GRPO step logged (0 before the first). */
  lastGrpoStep: number;
  /** Reward mean of the latest GRPO step. */
  latestReward: number | null;
  /** Eval success of the latest evaluation (including the step-0 one before GRPO). */
  latestEvalSuccess: number | null;
  /** Eval success of the last evaluation after at least one GRPO step. */
  finalEvalSuccess: number | null;
  bestEvalSuccess: number | null;
  /** First GRPO step whose training success rate reached the threshold (10%). */
  stepsToThreshold: number | null;
  meanGradNorm: number | null;
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

export function summarizeMetrics(rows: readonly MetricsRow[], successThreshold = 0.1): MetricsSummary {
  let lastGrpoStep = 0;
  let latestReward: number | null = null;
  let latestEvalSuccess: number | null = null;
  let finalEvalSuccess: number | null = null;
  let bestEvalSuccess: number | null = null;
  let stepsToThreshold: number | null = null;
  let gradSum = 0;
  let gradCount = 0;
  for (const r of rows) {
    if (finite(r.eval_success)) {
      latestEvalSuccess = r.eval_success;
      if (r.phase === 'grpo') {
        finalEvalSuccess = r.eval_success;
        bestEvalSuccess = bestEvalSuccess === null ? r.eval_success : Math.max(bestEvalSuccess, r.eval_success);
      }
    }
    if (r.phase !== 'grpo') continue;
    lastGrpoStep = Math.max(lastGrpoStep, r.step);
    if (finite(r.reward_mean)) latestReward = r.reward_mean;
    if (stepsToThreshold === null && finite(r.success_rate) && r.success_rate >= successThreshold) stepsToThreshold = r.step;
    // A step skipped by the NaN guard logs no usable grad norm.
    if (finite(r.grad_norm) && !r.skipped) {
      gradSum += r.grad_norm;
      gradCount++;
    }
  }
  return {
    lastGrpoStep,
    latestReward,
    latestEvalSuccess,
    finalEvalSuccess,
    bestEvalSuccess,
    stepsToThreshold,
    meanGradNorm: gradCount ? gradSum / gradCount : null,
  };
}

/** `0.125` → `12.5%`; null → `—`. */
export function percent(v: number | null | undefined, digits = 0): string {
  return formatPercent(v, digits);
}

/**
 * A `--set key=value` argument. The CLI reads the value as YAML, so numbers and booleans go as written and
 * strings that YAML would read as something else (`"1e3"`, `"true"`, `"null"`) are quoted.
 */
export function setArg(key: string, value: unknown): string {
  if (typeof value === 'string') {
    const plain = /^[A-Za-z_][A-Za-z0-9_./-]*$/.test(value) && !/^(true|false|null|yes|no|on|off|~)$/i.test(value);
    return `${key}=${plain ? value : JSON.stringify(value)}`;
  }
  return `${key}=${JSON.stringify(value)}`;
}
