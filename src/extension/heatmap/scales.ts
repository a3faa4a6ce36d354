// Colour scales of the token heatmap. Pure (no vscode), so it is unit-tested directly.
//
// A value becomes one of a fixed set of buckets (as GitLens' heatmap does): one decoration type per bucket
// keeps thousands of painted tokens to a dozen setDecorations calls and a dozen CSS classes. Signed metrics get
// a diverging scale centred on 0 (equal magnitudes of either sign get equally strong colours), the others a
// sequential one from the smallest to the largest value in the normalisation scope.

import { HEATMAP_HUES, rgba, tintRange, type ThemeKind } from '../../protocol/heatmap_colors';
import { KNOWN_EXTRA_COLUMNS, TOKEN_COLUMNS, type HeatmapScale, type PaintableColumn, type TokenColumnDef } from '../../protocol/token_columns';
import { formatCount, formatNumber } from '../../protocol/number_format';

/** The token-table columns (design.md#run-directory) a heatmap can paint: those protocol/token_columns.ts gives a heatmap scale. */
export type BuiltinMetricId = PaintableColumn;
/** A builtin column, or `extra.<name>`: a numeric column beyond the contract (what an imported trainer logged). */
export type MetricId = BuiltinMetricId | `extra.${string}`;

export interface MetricDef extends HeatmapScale {
  id: MetricId;
  /** Hover and QuickPick text: what the value is (design.md#semantics). */
  description: string;
}

/** The metric picker's order for the columns it has always shown; a column added later follows them in catalog order. */
// Â first: its sign is the direction the update pushed the token, so it is the default metric and reads without a key
const PICKER_ORDER: readonly string[] = ['effective_advantage', 'contribution', 'entropy', 'attribution', 'importance', 'logprob', 'weight'];
const pickerRank = (id: string) => (PICKER_ORDER.includes(id) ? PICKER_ORDER.indexOf(id) : PICKER_ORDER.length);

const paintable = (c: TokenColumnDef): c is TokenColumnDef & { heatmap: HeatmapScale } => c.heatmap !== undefined;

/** The paintable columns, in the order of the metric picker (Â first, the default). */
export const METRICS: readonly MetricDef[] = (TOKEN_COLUMNS as readonly TokenColumnDef[])
  .filter(paintable)
  .map((c) => ({ id: c.name as BuiltinMetricId, ...c.heatmap, description: c.meaning }))
  .sort((a, b) => pickerRank(a.id) - pickerRank(b.id));

const EXTRA_ID_RE = /^extra\.[a-z][a-z0-9_]{0,63}$/;

export function metricDef(id: MetricId): MetricDef {
  if (id.startsWith('extra.')) {
    const name = id.slice('extra.'.length);
    const known = KNOWN_EXTRA_COLUMNS.find((c) => c.name === name);
    return {
      id,
      ...(known
        ? { ...known.heatmap, description: known.meaning }
        : { label: name.replace(/_/g, ' '), signed: false, description: `${name}: a per-token column the source of this run logged` }),
    };
  }
  const m = METRICS.find((d) => d.id === id);
  if (!m) throw new Error(`unknown heatmap metric ${id}`);
  return m;
}

export function isMetricId(v: unknown): v is MetricId {
  return typeof v === 'string' && (METRICS.some((m) => m.id === v) || EXTRA_ID_RE.test(v));
}

/** The metric after `current` among `available` (METRICS order, then the extras), wrapping around; skips unavailable ones. */
export function nextMetric(current: MetricId, available: readonly MetricId[], direction: 1 | -1 = 1): MetricId {
  const builtin: MetricId[] = METRICS.map((m) => m.id);
  const order = [...builtin.filter((id) => available.includes(id)), ...available.filter((id) => !builtin.includes(id))];
  if (!order.length) return current;
  const at = order.indexOf(current);
  if (at < 0) return order[0];
  return order[(at + direction + order.length) % order.length];
}

export type { Normalization } from '../types';

/** Buckets per sign on a diverging scale, and on a sequential one. */
export const DIVERGING_SIDE = 6;
export const SEQUENTIAL_BUCKETS = 10;

export interface Range {
  min: number;
  max: number;
}

export interface Scale {
  kind: 'diverging' | 'sequential';
  /** Values at or beyond lo / hi take the end buckets. Diverging: lo = −hi. */
  lo: number;
  hi: number;
  invert: boolean;
  buckets: number;
  /**
   * Diverging: the sign painted as "up" (blue). A metric whose up is its negative side (the contribution Â·ℓ) is painted
   * mirrored, so blue means the same on every metric: the update pushed the token up.
   */
  up: 'positive' | 'negative';
}

/** The quantiles a scale spans (p2–p98): the key says the ends are clipped there. */
export const CLIP_QUANTILE = 0.98;

/**
 * The range a scale spans: the q and 1 − q quantiles of the finite values (nearest rank on the sorted values; p2–p98 by
 * default), not their extremes. A completion's contributions are skewed — a handful of unlikely tokens carry most of
 * |Â·ℓ| — and with the extremes as ends one outlier in 5,000 tokens would leave every other token in the
 * faintest buckets. Values beyond the range take the end buckets; the hover shows the exact value. Up to about
 * 25 values, rank round(q·(n − 1)) is the largest one, so a short episode's range is its min and max.
 */
export function quantileRange(values: ArrayLike<number>, rows?: ArrayLike<number>, q = CLIP_QUANTILE): Range | null {
  const n = rows ? rows.length : values.length;
  const finite = new Float32Array(n);
  let k = 0;
  for (let i = 0; i < n; i++) {
    const v = values[rows ? rows[i] : i];
    if (!Number.isNaN(v)) finite[k++] = v;
  }
  if (k === 0) return null;
  const sorted = finite.subarray(0, k).sort();
  return { min: sorted[Math.round((1 - q) * (k - 1))], max: sorted[Math.round(q * (k - 1))] };
}

/** The union of ranges (a shared scale for two episodes compared side by side); null ranges are ignored. */
export function unionRange(ranges: readonly (Range | null)[]): Range | null {
  let out: Range | null = null;
  for (const r of ranges) {
    if (!r) continue;
    out = out ? { min: Math.min(out.min, r.min), max: Math.max(out.max, r.max) } : { ...r };
  }
  return out;
}

/** The scale a metric is painted on over `range` (the normalisation scope's values); null: nothing to paint. */
export function scaleFor(metric: MetricDef, range: Range | null): Scale | null {
  if (!range) return null;
  if (metric.signed) {
    const m = Math.max(Math.abs(range.min), Math.abs(range.max));
    return { kind: 'diverging', lo: -m, hi: m, invert: false, buckets: 2 * DIVERGING_SIDE, up: metric.up ?? 'positive' };
  }
  return { kind: 'sequential', lo: range.min, hi: range.max, invert: !!metric.invert, buckets: SEQUENTIAL_BUCKETS, up: 'positive' };
}

/**
 * Which colour is which, in words: for a metric that says which way the update moved a token, "blue = pushed up · red =
 * pushed down" (short, for the status bar: "blue ↑ red ↓"); for another signed one, which sign is which; for a
 * sequential one, which end is strong.
 */
export function scaleSense(metric: MetricDef, scale: Scale, form: 'long' | 'short' = 'long'): string {
  if (scale.kind === 'sequential') return `darker = ${scale.invert ? 'lower' : 'higher'}`;
  if (form === 'short') return metric.up ? 'blue ↑ red ↓' : 'blue + red −';
  const [up, down] = metric.up ? (metric.upMeans ?? ['pushed up', 'pushed down']) : ['positive', 'negative'];
  return `blue = ${up} · red = ${down}`;
}

/** The colour key of a metric painted on `scale`: its sense in words (so no meaning rests on colour alone), then the range, clipped at p2–p98. */
export function scaleKey(metric: MetricDef, scale: Scale | null): string {
  if (!scale) return `${metric.label}: no values`;
  return `${scaleSense(metric, scale)} · ${metric.label} ${formatScale(scale)}, clipped at p2–p98`;
}

/**
 * The bucket of `v`, or −1 for no colour. Diverging: buckets 0…K−1 are "down" (0 the strongest), K…2K−1 "up"
 * (2K−1 the strongest; the positive side, or the negative one for a metric whose up is negative), |v|/hi split into K
 * equal steps; exactly 0 (no credit at all) and a
 * scale of all zeros stay uncoloured. Sequential: (v − lo)/(hi − lo) split into N equal steps (reversed when
 * inverted); a scale whose values are all equal puts them in the middle bucket. NaN (a null row): −1.
 */
export function bucketOf(scale: Scale, v: number): number {
  if (Number.isNaN(v)) return -1;
  if (scale.kind === 'diverging') {
    if (scale.up === 'negative') v = -v;
    const K = scale.buckets / 2;
    if (v === 0 || scale.hi === 0) return -1;
    const k = Math.min(K - 1, Math.floor((Math.abs(v) / scale.hi) * K));
    return v < 0 ? K - 1 - k : K + k;
  }
  const N = scale.buckets;
  const width = scale.hi - scale.lo;
  if (!(width > 0)) return N >> 1;
  let t = (v - scale.lo) / width;
  if (scale.invert) t = 1 - t;
  return Math.max(0, Math.min(N - 1, Math.floor(t * N)));
}

/** Buckets of values[rows[i]] for every i. */
export function quantise(scale: Scale, values: ArrayLike<number>, rows: ArrayLike<number>): Int8Array {
  const out = new Int8Array(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = bucketOf(scale, values[rows[i]]);
  return out;
}

// ---- colours ----

export type { ThemeKind };

/**
 * Opacity of the k-th of n intensity steps, over the theme's tint range (protocol/heatmap_colors.ts). In high contrast
 * the bucket's colour is also repeated as an underline (`borderColor` in paint.ts), so the strength still shows.
 */
export function bucketAlpha(k: number, n: number, theme: ThemeKind): number {
  const [lo, hi] = tintRange(theme);
  return n <= 1 ? hi : Math.round((lo + ((hi - lo) * k) / (n - 1)) * 1000) / 1000;
}

/** One CSS colour per bucket of a scale of this kind, in bucket order. */
export function bucketColors(kind: Scale['kind'], theme: ThemeKind): string[] {
  const variant = theme === 'light' || theme === 'highContrastLight' ? 'light' : 'dark';
  if (kind === 'diverging') {
    const K = DIVERGING_SIDE;
    const neg = Array.from({ length: K }, (_, b) => rgba(HEATMAP_HUES.negative[variant], bucketAlpha(K - 1 - b, K, theme)));
    const pos = Array.from({ length: K }, (_, k) => rgba(HEATMAP_HUES.positive[variant], bucketAlpha(k, K, theme)));
    return [...neg, ...pos];
  }
  return Array.from({ length: SEQUENTIAL_BUCKETS }, (_, k) => rgba(HEATMAP_HUES.sequential[variant], bucketAlpha(k, SEQUENTIAL_BUCKETS, theme)));
}

/** Enough significant digits to tell the ends of a range apart, without a tail of float32 noise. */
export function formatValue(v: number): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? '—' : String(v);
  // a range's ends from 1,000 on keep their integer digits (1,235, not 1,230)
  return Math.abs(v) >= 1000 ? formatCount(v) : formatNumber(v, 3);
}

export function formatScale(scale: Scale | null): string {
  if (!scale) return 'no values';
  return `[${formatValue(scale.lo)}, ${formatValue(scale.hi)}]`;
}

/** The metrics a probe gives (credit-lens probe's mc_* columns, joined from <run>/probes/). */
export function isProbeMetric(metric: MetricId): boolean {
  return metric.startsWith('extra.mc_');
}
