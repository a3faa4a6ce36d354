// `credit-lens compare --json` (DESIGN §10): groups of runs (one configuration, one run per seed) against a baseline
// group on the same eval instances. The CLI prints it, the sweep summary and Compare Runs show it; the runtime
// check guards the JSON the extension reads from the engine and posts to the webviews.
import { arrayOf, isBoolean, isNumber, isRecord, isString, nullable, oneOf, shape, type Check } from './validate';

/** A run's configuration: its name without the seed part that `sweep.seeds` adds (`-seed2`); compare groups by it. */
export function runGroup(name: string): string {
  return name.replace(/[-_]seed[-_]?\d+/, '');
}

/** A rate in points with one decimal ("12.5"); '—' when unknown. */
export const pctText = (x: number | null) => (x !== null && Number.isFinite(x) ? (100 * x).toFixed(1) : '—');
/** Three significant figures ("0.0123"); '—' when unknown. */
export const sig3 = (x: number | null) => (x !== null && Number.isFinite(x) ? x.toPrecision(3) : '—');

/** A difference in points with its interval, signed: "+4.2 [+1.0, +7.5]"; the mean alone when the interval is unknown. */
export function diffText(mean: number | null, lo: number | null, hi: number | null): string {
  const s = (x: number | null) => (x !== null && Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${pctText(x)}` : '—');
  return lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi) ? s(mean) : `${s(mean)} [${s(lo)}, ${s(hi)}]`;
}

/** A p-value with two significant figures, in exponent form below 1e-4 ("0.031", "1.6e-8"). */
export const pText = (p: number) => (p < 1e-4 ? p.toExponential(1) : p.toPrecision(2));

/** "12.3 ± 1.4" (mean ± the 95 % half-width), the mean alone with one seed, '—' without one: the CLI's and the views' cell. */
export function intervalText(i: SeedInterval | null, fmt: (x: number | null) => string): string {
  if (!i || i.mean === null) return '—';
  return i.half === null ? fmt(i.mean) : `${fmt(i.mean)} ± ${fmt(i.half)}`;
}

/** Mean over seeds with a two-sided 95 % t interval; lo/hi/half are null with fewer than two seeds. */
export interface SeedInterval {
  mean: number | null;
  lo: number | null;
  hi: number | null;
  n: number;
  half: number | null;
}

export interface CompareRow {
  /** the run name without its seed part (`-seed2`) */
  group: string;
  /** strategy and its headline parameter, e.g. "outcome_conditional (think_discount 0.5)" */
  label: string;
  strategy: string | null;
  baseline: boolean;
  seeds: (number | null)[];
  runs: string[];
  instances: number;
  eval_success: SeedInterval;
  /** vs the baseline: paired bootstrap over instances pooled over seeds; null for the baseline itself */
  diff: { mean: number; lo: number; hi: number; resamples: number } | null;
  /**
   * vs the baseline run of the same seed: the per-seed differences of eval success, mean ± the 95 % t half-width over
   * seeds. Wider than `diff` when seeds disagree: it counts the seed-to-seed spread that pooling instances leaves out.
   */
  diff_seeds: SeedInterval | null;
  /** McNemar's exact test on per-(seed, instance) success; b: only the baseline succeeded, c: only this group */
  mcnemar: { b: number; c: number; pairs: number; p: number } | null;
  significant: boolean | null;
  /** seed doc 002's mean |contribution| of filler and reasoning tokens (and their ratio), over seeds; null without token tables */
  filler_abs_c: SeedInterval | null;
  reasoning_abs_c: SeedInterval | null;
  filler_reasoning_ratio: SeedInterval | null;
}

export interface CompareReport {
  split: 'test' | 'validation';
  alpha: number;
  baseline: string;
  rows: CompareRow[];
  notes: string[];
}

const n = nullable(isNumber);
export const isSeedInterval: Check<SeedInterval> = shape<SeedInterval>({ mean: n, lo: n, hi: n, n: isNumber, half: n });

export const isCompareRow: Check<CompareRow> = shape<CompareRow>({
  group: isString,
  label: isString,
  strategy: nullable(isString),
  baseline: isBoolean,
  seeds: arrayOf(nullable(isNumber)),
  runs: arrayOf(isString),
  instances: isNumber,
  eval_success: isSeedInterval,
  diff: nullable(shape<NonNullable<CompareRow['diff']>>({ mean: isNumber, lo: isNumber, hi: isNumber, resamples: isNumber })),
  diff_seeds: nullable(isSeedInterval),
  mcnemar: nullable(shape<NonNullable<CompareRow['mcnemar']>>({ b: isNumber, c: isNumber, pairs: isNumber, p: isNumber })),
  significant: nullable(isBoolean),
  filler_abs_c: nullable(isSeedInterval),
  reasoning_abs_c: nullable(isSeedInterval),
  filler_reasoning_ratio: nullable(isSeedInterval),
});

export const isCompareReport: Check<CompareReport> = (v): v is CompareReport =>
  isRecord(v) &&
  shape<CompareReport>({ split: oneOf('test', 'validation'), alpha: isNumber, baseline: isString, rows: arrayOf(isCompareRow), notes: arrayOf(isString) })(v);
