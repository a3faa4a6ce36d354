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

/**
 * The paired test of a row: a sign-flip permutation test on each eval instance's difference summed over the
 * seeds, exact; the instance is the cluster, so k copies of one seed give that seed's p. b / c count the (seed, instance)
 * pairs where only the baseline, resp. only this group, succeeded: descriptive, not the test's unit.
 */
export interface PairedTest {
  b: number;
  c: number;
  /** (seed, instance) pairs */
  pairs: number;
  /** instances: the clusters the test and the bootstrap resample */
  instances: number;
  /** the test's own two-sided p */
  p: number;
}

/** Which rows a p-value was adjusted over, and how. */
export interface Adjustment {
  method: 'holm';
  /** the rows of this comparison that carry a test (every group but the baseline) */
  family: number;
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
  /** the eval step every run of the comparison was read at */
  step: number;
  eval_success: SeedInterval;
  /** vs the baseline: cluster bootstrap over instances (each with all its seeds); null for the baseline itself */
  diff: { mean: number; lo: number; hi: number; resamples: number } | null;
  /**
   * vs the baseline run of the same seed: the per-seed differences of eval success, mean ± the 95 % t half-width over
   * seeds. Information about how much the seeds disagree, not a second gate.
   */
  diff_seeds: SeedInterval | null;
  test: PairedTest | null;
  /** Holm-adjusted over the comparison's rows (Adjustment); significance is p_adjusted < alpha */
  p_adjusted: number | null;
  significant: boolean | null;
  /**
   * Minimum detectable effect: the smallest true difference in success rate the test detects with 80 % power at this
   * row's instances and seeds, at α / family (Holm's strictest step); null for the baseline.
   */
  mde: number | null;
  /** `--power-for d`: about how many seeds on these instances detect a difference of d with 80 % power; seeds null when no number does */
  seeds_needed: { diff: number; seeds: number | null } | null;
  /** fewer than 3 seeds, or a run that did not complete: a hint, not a finding */
  exploratory: boolean;
  /** seed doc 002's mean |c|, c = A·ℓ, of filler and reasoning tokens (and their ratio), over seeds; null without token tables */
  filler_abs_c: SeedInterval | null;
  reasoning_abs_c: SeedInterval | null;
  filler_reasoning_ratio: SeedInterval | null;
}

export interface CompareReport {
  split: 'test' | 'validation';
  alpha: number;
  adjustment: Adjustment;
  /** the power the MDE is computed at */
  power: number;
  baseline: string;
  rows: CompareRow[];
  notes: string[];
}

/** How a row's verdict reads everywhere: "p_adj 0.012", with n.s. when it is not significant. */
export function verdictText(r: { p_adjusted: number | null; significant: boolean | null }): string {
  if (r.p_adjusted === null) return '';
  return r.significant ? pText(r.p_adjusted) : `${pText(r.p_adjusted)} n.s.`;
}

const n = nullable(isNumber);
export const isSeedInterval: Check<SeedInterval> = shape<SeedInterval>({ mean: n, lo: n, hi: n, n: isNumber, half: n });

const isPairedTest = shape<PairedTest>({ b: isNumber, c: isNumber, pairs: isNumber, instances: isNumber, p: isNumber });

export const isCompareRow: Check<CompareRow> = shape<CompareRow>({
  group: isString,
  label: isString,
  strategy: nullable(isString),
  baseline: isBoolean,
  seeds: arrayOf(nullable(isNumber)),
  runs: arrayOf(isString),
  instances: isNumber,
  step: isNumber,
  eval_success: isSeedInterval,
  diff: nullable(shape<NonNullable<CompareRow['diff']>>({ mean: isNumber, lo: isNumber, hi: isNumber, resamples: isNumber })),
  diff_seeds: nullable(isSeedInterval),
  test: nullable(isPairedTest),
  p_adjusted: nullable(isNumber),
  significant: nullable(isBoolean),
  mde: nullable(isNumber),
  seeds_needed: nullable(shape<NonNullable<CompareRow['seeds_needed']>>({ diff: isNumber, seeds: nullable(isNumber) })),
  exploratory: isBoolean,
  filler_abs_c: nullable(isSeedInterval),
  reasoning_abs_c: nullable(isSeedInterval),
  filler_reasoning_ratio: nullable(isSeedInterval),
});

export const isCompareReport: Check<CompareReport> = (v): v is CompareReport =>
  isRecord(v) &&
  shape<CompareReport>({
    split: oneOf('test', 'validation'),
    alpha: isNumber,
    adjustment: shape<Adjustment>({ method: oneOf('holm'), family: isNumber }),
    power: isNumber,
    baseline: isString,
    rows: arrayOf(isCompareRow),
    notes: arrayOf(isString),
  })(v);
