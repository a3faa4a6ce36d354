// metrics.jsonl rows → the dashboard's charts: which metric goes on which chart, where each row sits on the
// x axis, the runs' columns aligned on one x array (what uPlot draws), and a chart's data as CSV.
// Pure (no DOM), so the unit tests check it with hand-computed numbers.
import type { MetricsRow } from '../protocol/index';
import { toCsv } from './csv';

export interface SeriesSpec {
  key: string;
  label: string;
  /** `points` for sparse metrics (eval success every eval_every steps): markers joined across the gaps. */
  style?: 'line' | 'points';
}

export interface ChartSpec {
  id: string;
  title: string;
  /** What the metric is, for the chart's tooltip. */
  hint: string;
  series: SeriesSpec[];
  /** A shaded mean ± std band around the series `mean`. */
  band?: { mean: string; std: string };
  /** Values in [0, 1] shown as percentages. */
  percent?: boolean;
}

/**
 * An eval row's `reward_mean` is the greedy eval reward (train.ts logs it before GRPO step 1), not a training
 * batch's mean, so it goes under its own key and stays off the reward chart.
 */
export const EVAL_REWARD_KEY = 'eval_reward_mean';

export const CHARTS: readonly ChartSpec[] = [
  {
    id: 'reward',
    title: 'Reward (mean ± std)',
    hint: 'training batch reward: mean, and a band of ± one sample std over the batch',
    series: [{ key: 'reward_mean', label: 'reward' }],
    band: { mean: 'reward_mean', std: 'reward_std' },
  },
  {
    id: 'success',
    title: 'Success rate',
    hint: 'share of training episodes solved, and greedy eval success at each evaluation',
    percent: true,
    series: [
      { key: 'success_rate', label: 'train' },
      { key: 'eval_success', label: 'eval', style: 'points' },
    ],
  },
  {
    id: 'loss',
    title: 'Loss',
    hint: 'SFT: cross-entropy of the demonstrations; GRPO: the clipped surrogate (+ kl_beta·KL), aggregated by loss_agg',
    series: [{ key: 'loss', label: 'loss' }],
  },
  { id: 'grad_norm', title: 'Gradient norm', hint: 'global gradient norm before clipping', series: [{ key: 'grad_norm', label: '|g|' }] },
  { id: 'kl', title: 'KL to reference', hint: 'mean k3 estimate of KL(π‖π_ref) over valid tokens', series: [{ key: 'kl', label: 'KL' }] },
  { id: 'entropy', title: 'Entropy', hint: 'mean policy entropy over sampled completion tokens (nats)', series: [{ key: 'entropy_mean', label: 'entropy' }] },
  {
    id: 'effective_groups',
    title: 'Effective groups',
    hint: 'share of groups whose rewards are not all equal: the only groups whose advantages are not 0',
    percent: true,
    series: [{ key: 'effective_groups', label: 'effective' }],
  },
  { id: 'clip_frac', title: 'Clip fraction', hint: 'share of tokens whose ratio was clipped', percent: true, series: [{ key: 'clip_frac', label: 'clipped' }] },
  { id: 'response_len', title: 'Response length', hint: 'mean completion length in tokens', series: [{ key: 'response_len', label: 'tokens' }] },
  { id: 'tokens_per_s', title: 'Throughput', hint: 'tokens processed per second of step time', series: [{ key: 'tokens_per_s', label: 'tokens/s' }] },
];

/** The credit row, after the fixed charts: where the credit went per step, and what probes measured where they ran. */
const CREDIT_CHARTS: readonly ChartSpec[] = [
  {
    id: 'credit_by_type',
    title: 'Credit by token type (mean |c|)',
    hint: 'mean |c_A| of the step’s filler and reasoning tokens, c_A = A·ℓ (the episode’s advantage times the log-prob; the heatmap’s c_Â uses the strategy’s Â): the credit analysis’s headline numbers, per step',
    series: [
      { key: 'credit/filler_abs_c', label: 'filler' },
      { key: 'credit/reasoning_abs_c', label: 'reasoning' },
    ],
  },
  {
    id: 'credit_concentration',
    title: 'Credit concentration (Gini, effective token ratio)',
    hint:
      'per episode with credit, the Gini coefficient of |Â| over its tokens and (Σ|Â|)² / (n·ΣÂ²), the share of its tokens that ' +
      'effectively carry the credit; mean over the step’s episodes. Plain GRPO: 0 and 1. A learned credit collapsing onto a few ' +
      'tokens drives Gini toward 1 and the ratio toward 1/n (ARCA’s degeneration checks)',
    series: [
      { key: 'credit/gini', label: 'Gini' },
      { key: 'credit/effective_token_ratio', label: 'effective token ratio' },
    ],
  },
  {
    id: 'mc_lift',
    title: 'MC credit lift (probed steps)',
    hint:
      'credit-lens probe at a step: the δ² where the run’s Â puts its weight beyond uniform credit’s (Σ p·δ̂ᴬ·δ̂ᴮ with p = |Â|/Σ|Â|, minus ' +
      'uniform’s), unbiased at any M, beside the best trivial baseline’s (A·(1 − π), entropy, position); 0 is uniform credit',
    series: [
      { key: 'mc/lift', label: 'Â (the run’s)', style: 'points' },
      { key: 'mc/lift_best_baseline', label: 'best trivial baseline', style: 'points' },
    ],
  },
  {
    id: 'mc_accuracy',
    title: 'MC credit rank (probed steps; attenuated by the probe’s noise)',
    hint:
      'credit-lens probe at a step: the rank correlation of the run’s |Â| with the Monte Carlo δ² (spearman_unbiased; noise pulls it toward 0), the best trivial ' +
      'baseline’s (A·(1 − π), entropy, position), the noise placebo’s, and the split-half reliability of δ̂, the ceiling; a score ' +
      'at the placebo’s or the baseline’s is not evidence of credit',
    series: [
      { key: 'mc/spearman_unbiased', label: 'Â (the run’s)', style: 'points' },
      { key: 'mc/best_baseline', label: 'best trivial baseline', style: 'points' },
      { key: 'mc/placebo', label: 'noise placebo', style: 'points' },
      { key: 'mc/reliability', label: 'reliability (ceiling)', style: 'points' },
    ],
  },
];

const ATTRIBUTION_CHARTS: readonly ChartSpec[] = [
  {
    id: 'attribution/attribution_entropy',
    title: 'Attribution entropy',
    hint: '−Σ α log α of the attribution softmax, mean over episodes',
    series: [{ key: 'attribution/attribution_entropy', label: 'entropy' }],
  },
  {
    id: 'attribution/attribution_range',
    title: 'Attribution max / min / std',
    hint: 'max, min and std of α within an episode, mean over episodes',
    series: [
      { key: 'attribution/attribution_max', label: 'max' },
      { key: 'attribution/attribution_min', label: 'min' },
      { key: 'attribution/attribution_std', label: 'std' },
    ],
  },
];

/** metrics.jsonl keys that are bookkeeping, not curves. */
const NOT_CHARTED = new Set(['step', 'phase', 'step_time_s', 'skipped', 'reward_std', EVAL_REWARD_KEY]);

/** Where a row sits on the shared x axis: GRPO steps as they are, SFT steps counted back from GRPO step 0. */
export function xOf(row: Pick<MetricsRow, 'step' | 'phase'>, sftSteps: number): number {
  return row.phase === 'sft' ? row.step - sftSteps - 1 : row.step;
}

export type XPhase = 'sft' | 'eval' | 'grpo';

/** The phase an x position belongs to (x = 0 is the greedy eval before the first GRPO step). */
export function phaseOfX(x: number): XPhase {
  return x < 0 ? 'sft' : x === 0 ? 'eval' : 'grpo';
}

/** One run's values by x. Rows at the same x merge, the later one winning, so a row seen twice (live and on disk) counts once. */
export type RunPoints = Map<number, Record<string, number>>;

export function upsertRow(points: RunPoints, row: MetricsRow, sftSteps: number): number {
  const x = xOf(row, sftSteps);
  const values = points.get(x) ?? {};
  for (const [k, v] of Object.entries(row)) {
    if (k === 'step' || k === 'phase' || typeof v !== 'number' || !Number.isFinite(v)) continue;
    values[row.phase === 'eval' && k === 'reward_mean' ? EVAL_REWARD_KEY : k] = v;
  }
  points.set(x, values);
  return x;
}

export function pointsOf(rows: readonly MetricsRow[], sftSteps: number): RunPoints {
  const points: RunPoints = new Map();
  for (const r of rows) upsertRow(points, r, sftSteps);
  return points;
}

/**
 * The charts worth drawing for these runs: the fixed ones that have at least one value, the attribution
 * charts when a run logged `attribution/*`, and one chart per other namespaced metric (e.g. `cal/oracle_calls`).
 */
export function chartsFor(runs: readonly RunPoints[]): ChartSpec[] {
  const keys = new Set<string>();
  for (const p of runs) for (const v of p.values()) for (const k of Object.keys(v)) keys.add(k);
  const has = (s: ChartSpec) => s.series.some((x) => keys.has(x.key));
  const out = [...CHARTS, ...CREDIT_CHARTS, ...ATTRIBUTION_CHARTS].filter(has);
  const covered = new Set([...CHARTS, ...CREDIT_CHARTS, ...ATTRIBUTION_CHARTS].flatMap((c) => c.series.map((s) => s.key)));
  for (const k of [...keys].sort()) {
    if (covered.has(k) || NOT_CHARTED.has(k) || !k.includes('/')) continue;
    out.push({ id: k, title: k, hint: `${k} as the strategy logs it`, series: [{ key: k, label: k.slice(k.indexOf('/') + 1) }] });
  }
  return out;
}

export interface AlignedColumn {
  run: number;
  key: string;
  label: string;
  style: 'line' | 'points';
  /** What is drawn: the smoothed values when smoothing is on (line series only), else the logged ones. */
  values: (number | null)[];
  /** The logged values when `values` are smoothed (drawn faintly behind, and what the CSV holds). */
  raw?: (number | null)[];
}

/** How the dashboard shows its charts: the x-range and the smoothing of line series. */
export interface ChartView {
  /** Draw the SFT warm start and the eval before GRPO (x ≤ 0); off, the charts start at GRPO step 1. */
  includeSft: boolean;
  /** TensorBoard's smoothing weight w in [0, 1): EMA s_t = w·s_{t−1} + (1 − w)·v_t, debiased; 0 draws the values as logged. */
  smoothing: number;
}

/**
 * Why a chart has nothing to show although its metric is logged, or null: KL with grpo.kl_beta = 0 in every run is
 * logged as a constant 0, which a flat line would present as a measurement; so is a clip fraction of 0 at every GRPO
 * step (one epoch per step is on-policy: the ratio is 1 at every update, and nothing can be clipped).
 */
export function emptyState(chartId: string, runs: readonly { klBeta: number | null; rows?: readonly MetricsRow[] }[]): string | null {
  const every = runs.length > 1 ? ' in every run' : '';
  if (chartId === 'kl' && runs.length && runs.every((r) => r.klBeta === 0))
    return `KL not computed: grpo.kl_beta = 0${every} (no reference policy term in the loss)`;
  if (chartId === 'clip_frac') {
    const values = runs.flatMap((r) => (r.rows ?? []).filter((x) => x.phase === 'grpo' && typeof x.clip_frac === 'number').map((x) => x.clip_frac as number));
    if (values.length && values.every((v) => v === 0))
      return `Nothing clipped${every}: the ratio stayed inside the clip range at every step (one epoch per step is on-policy, ρ = 1)`;
  }
  return null;
}

export const DEFAULT_VIEW: ChartView = { includeSft: false, smoothing: 0 };

/**
 * The first x a chart shows: GRPO step 1 unless the SFT warm start is asked for. A run with no GRPO step yet (still
 * warming up) shows its SFT steps rather than nothing.
 */
export function firstVisibleX(runs: readonly RunPoints[], view: ChartView): number {
  if (view.includeSft) return -Infinity;
  const anyGrpo = runs.some((p) => [...p.keys()].some((x) => x >= 1));
  return anyGrpo ? 1 : -Infinity;
}

/**
 * TensorBoard's debiased exponential moving average over the non-null values in x order: s_t = w·s_{t−1} + (1 − w)·v_t
 * with s_0 = 0, divided by 1 − w^n after n values, so the first value is itself. It restarts where the phase changes:
 * the warm start's loss never leaks into GRPO's. Nulls stay null.
 */
export function ema(x: readonly number[], values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight > 0)) return [...values];
  const w = Math.min(weight, 0.999);
  let s = 0;
  let n = 0;
  let phase: XPhase | null = null;
  return values.map((v, i) => {
    if (v === null) return null;
    const ph = phaseOfX(x[i]) === 'sft' ? 'sft' : 'grpo';
    if (ph !== phase) {
      phase = ph;
      s = 0;
      n = 0;
    }
    s = w * s + (1 - w) * v;
    n++;
    return s / (1 - w ** n);
  });
}

/** The values a chart's series have at x = 0 (the eval before GRPO), per run: shown as text when x = 0 is not drawn. */
export function beforeGrpo(spec: ChartSpec, runs: readonly { label: string; points: RunPoints }[]): { label: string; key: string; value: number }[] {
  const out: { label: string; key: string; value: number }[] = [];
  for (const r of runs) {
    const v = r.points.get(0);
    if (!v) continue;
    for (const s of spec.series)
      if (v[s.key] !== undefined) out.push({ label: runs.length === 1 ? s.label : `${r.label} · ${s.label}`, key: s.key, value: v[s.key] });
  }
  return out;
}

export interface AlignedChart {
  /** The union of every run's x positions that carry a value of this chart, ascending. */
  x: number[];
  columns: AlignedColumn[];
  /** Per run with a band: mean − std and mean + std at each x (null where either is missing). */
  bands: { run: number; lo: (number | null)[]; hi: (number | null)[] }[];
}

/**
 * Every run's series of one chart on a common x array, null where a run has no value (uPlot's aligned data), from
 * `view`'s first x on, line series smoothed as it asks.
 */
export function alignChart(
  spec: ChartSpec,
  runs: readonly { label: string; points: RunPoints }[],
  view: ChartView = { includeSft: true, smoothing: 0 },
): AlignedChart {
  const keys = spec.series.map((s) => s.key);
  const from = firstVisibleX(
    runs.map((r) => r.points),
    view,
  );
  const xs = new Set<number>();
  for (const r of runs) for (const [x, v] of r.points) if (x >= from && keys.some((k) => k in v)) xs.add(x);
  const x = [...xs].sort((a, b) => a - b);
  const single = runs.length === 1;
  const columns: AlignedColumn[] = [];
  const bands: AlignedChart['bands'] = [];
  runs.forEach((r, run) => {
    for (const s of spec.series) {
      const values = x.map((xi) => r.points.get(xi)?.[s.key] ?? null);
      if (!values.some((v) => v !== null)) continue;
      // One series per chart and run: the run's name says it all; otherwise name both.
      const label = single ? s.label : spec.series.length === 1 ? r.label : `${r.label} · ${s.label}`;
      const style = s.style ?? 'line';
      // Sparse points (eval every eval_every steps) are each a measurement of their own: never smoothed.
      if (style === 'line' && view.smoothing > 0) columns.push({ run, key: s.key, label, style, values: ema(x, values, view.smoothing), raw: values });
      else columns.push({ run, key: s.key, label, style, values });
    }
    if (spec.band) {
      const { mean, std } = spec.band;
      const lo: (number | null)[] = [];
      const hi: (number | null)[] = [];
      for (const xi of x) {
        const v = r.points.get(xi);
        const m = v?.[mean];
        const sd = v?.[std];
        lo.push(m !== undefined && sd !== undefined ? m - sd : null);
        hi.push(m !== undefined && sd !== undefined ? m + sd : null);
      }
      if (lo.some((v) => v !== null)) bands.push({ run, lo, hi });
    }
  });
  return { x, columns, bands };
}

/**
 * A chart's data as CSV (the x-range shown, the values as logged): `step` (the shared x: SFT steps are −sft_steps … −1, 0 the eval before GRPO),
 * `phase`, then one column per drawn series (and `… − std` / `… + std` for a band), numbers at full precision,
 * empty where a run has no value. Lines end in \n.
 */
export function chartCsv(spec: ChartSpec, data: AlignedChart, runLabels: readonly string[]): string {
  const header = ['step', 'phase', ...data.columns.map((c) => c.label)];
  // The logged values, never the smoothing: a CSV is data, not a picture.
  const cols: (number | null)[][] = data.columns.map((c) => c.raw ?? c.values);
  for (const b of data.bands) {
    const who = runLabels.length === 1 ? spec.band!.mean : `${runLabels[b.run]} · ${spec.band!.mean}`;
    header.push(`${who} - ${spec.band!.std}`, `${who} + ${spec.band!.std}`);
    cols.push(b.lo, b.hi);
  }
  return toCsv(
    header,
    data.x.map((x, i) => [x, phaseOfX(x), ...cols.map((c) => c[i])]),
  );
}
