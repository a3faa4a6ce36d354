// One name for each metrics.jsonl value in the trackers outside (TensorBoard's tags, MLflow's metric keys): grouped with
// `/`, as TensorBoard's dashboard and MLflow's charts group them.
import type { MetricsRow } from '../../protocol';

/** GRPO values that describe where the credit went rather than how the policy trained */
const CREDIT_KEYS = new Set(['effective_groups', 'groups_drawn', 'resampled_frac']);
/** timings and throughput */
const PERF_KEYS = new Set(['step_time_s', 'tokens_per_s', 'realized_seconds']);

/**
 * The tag of `key` in a row of `phase`:
 * - a key that is already grouped (a strategy's own, `attribution/attribution_entropy`, `cal/oracle_calls`) keeps its name;
 * - eval values go under `eval/` (`eval_success` → `eval/success`, `val_success` → `eval/val_success`), in any phase;
 * - the SFT warm start's under `sft/`;
 * - a GRPO step's under `credit/` (the share of groups that carry a signal, dynamic sampling's draws), `perf/` (step time,
 *   throughput) or `train/` (reward, loss, KL, entropy, …).
 */
export function metricTag(phase: MetricsRow['phase'], key: string): string {
  if (key.includes('/')) return key;
  if (key.startsWith('eval_')) return `eval/${key.slice('eval_'.length)}`;
  if (key === 'val_success' || phase === 'eval') return `eval/${key}`;
  if (phase === 'sft') return `sft/${key}`;
  if (CREDIT_KEYS.has(key)) return `credit/${key}`;
  if (PERF_KEYS.has(key)) return `perf/${key}`;
  return `train/${key}`;
}

/** The row's finite numbers under their tags (strings such as a skipped step's reason are not charted). */
export function rowScalars(row: MetricsRow): [string, number][] {
  const out: [string, number][] = [];
  for (const [k, v] of Object.entries(row)) {
    if (k === 'step' || k === 'phase' || typeof v !== 'number' || !Number.isFinite(v)) continue;
    out.push([metricTag(row.phase, k), v]);
  }
  return out;
}

/** The token table's columns charted as histograms at each logged step, under `tokens/`. */
export const HISTOGRAM_COLUMNS = ['contribution', 'effective_advantage', 'entropy', 'grad_norm'] as const;
export type HistogramColumn = (typeof HISTOGRAM_COLUMNS)[number];
export type TokenColumnsForHistograms = Partial<Record<HistogramColumn, ArrayLike<number | null> | null>>;
