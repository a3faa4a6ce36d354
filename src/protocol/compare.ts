// `credit-lens compare --json` (design.md#statistics): groups of runs (one configuration, one run per seed) against a baseline
// group on the same eval instances. The CLI prints it, the sweep summary and Compare Runs show it; the runtime
// check guards the JSON the extension reads from the engine and posts to the webviews.
import { arrayOf, isBoolean, isNumber, isRecord, isString, nullable, oneOf, shape, type Check } from './validate';
import { formatCount, formatFixed } from './number_format';

/**
 * A run's configuration: its name without the seed part that `sweep.seeds` adds (`-seed2`), and the warm-start part
 * that `sweep.warm_starts` puts before it (`-start2-seed3`); compare groups by it.
 */
export function runGroup(name: string): string {
  return name.replace(/[-_]start[-_]?\d+(?=[-_]seed[-_]?\d+)/, '').replace(/[-_]seed[-_]?\d+/, '');
}

/** A rate in points with one decimal ("12.5"); '—' when unknown. */
export const pctText = (x: number | null) => (x !== null && Number.isFinite(x) ? formatFixed(100 * x, 1) : '—');
/** Three significant figures ("0.0123"); '—' when unknown. */
// Three significant digits; from 1,000 on a count with separators rather than 1.23e+3, and never "-0.00".
export const sig3 = (x: number | null) =>
  x === null || !Number.isFinite(x) ? '—' : Math.abs(x) >= 1000 ? formatCount(x) : x === 0 ? '0.00' : x.toPrecision(3);

/** A difference in points with its interval, signed: "+4.2 [+1.0, +7.5]"; the mean alone when the interval is unknown. */
export function diffText(mean: number | null, lo: number | null, hi: number | null): string {
  const s = (x: number | null) => (x !== null && Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${pctText(x)}` : '—');
  return lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi) ? s(mean) : `${s(mean)} [${s(lo)}, ${s(hi)}]`;
}

/** A p-value with two significant figures, in exponent form below 1e-4 ("0.031", "1.6e-8"). */
/**
 * A group's seeds in numeric order ("1, 2, 10", not the folder names' "1, 10, 2"); an unknown seed is "?". Runs from
 * K ≥ 2 shared warm starts repeat their seeds in each: "1, 2 × 3 starts".
 */
export function seedsText(seeds: (number | null)[], starts = 0): string {
  const list = starts >= 2 ? [...new Set(seeds)] : [...seeds];
  const text = list
    .sort((a, b) => (a ?? Infinity) - (b ?? Infinity))
    .map((x) => x ?? '?')
    .join(', ');
  return starts >= 2 ? `${text} × ${starts} starts` : text;
}

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
 * The gate of a row: the run-level test, with the training run as its unit (core/significance.ts says why). Δ is the
 * difference of the two groups' mean success over their runs, its standard error the two-way variance
 * σ_seed² (one, pooled over the sides) × (1/S_B + 1/S_A) + σ_inst²/n, the reference Student's t with Satterthwaite's df. Seeds are not paired by number:
 * two runs that share a seed number share nothing else.
 */
export interface RunTest {
  /** two-way t: each run drawn with its own start, or all from one; over warm starts: K shared starts crossed with the sides (core/start_gate.ts) */
  method: 'two-way t' | 'over warm starts';
  /** Δ and its 95 % t interval, from the same se and df as p */
  diff: number;
  lo: number;
  hi: number;
  se: number;
  df: number;
  p: number;
  /** runs on the baseline side (for a gain: the run's own start) and on this row's */
  runs_baseline: number;
  runs: number;
  /** the standard deviation of a run's success rate across seeds (σ_seed² + σ_e²/n, pooled over the sides); null with one run a side */
  run_sd: number | null;
  /** the method × instance interaction's standard deviation per instance (0 when the estimate is not positive) */
  instance_sd: number;
  instances: number;
  /** the shared warm starts the test generalises over (over warm starts); null for the two-way t */
  starts: number | null;
  /** the standard deviation of the contrast from start to start (its interaction with the method, and the runs' noise); null for the two-way t */
  start_sd: number | null;
  /** over warm starts: the contrast within each start (its folder's name) and the runs it rests on; null for the two-way t */
  by_start: { start: string; diff: number; runs: number; runs_baseline: number }[] | null;
}

/** "countdown-warm-start-1a2b… −1.2 pp (2 v 2)" for each start: how a difference over starts moves from start to start. */
export function byStartText(t: Pick<RunTest, 'by_start'>): string {
  const runs = (b: { runs: number; runs_baseline: number }) => (b.runs_baseline ? `${b.runs} v ${b.runs_baseline}` : `${b.runs} run${b.runs === 1 ? '' : 's'}`);
  return (t.by_start ?? []).map((b) => `${b.start} ${diffText(b.diff, null, null)} pp (${runs(b)})`).join(', ');
}

/**
 * The instance-clustered test, conditional on these checkpoints: do these trained policies differ on these instances?
 * Every baseline run against every run of the row (no seed pairing), each instance's summed difference sign-flipped,
 * exact; with one run a side it is McNemar's exact test. b / c count the (run pair, instance) outcomes where only the
 * baseline, resp. only this row, succeeded: descriptive. It is not the gate: it holds the seeds fixed.
 */
export interface ConditionalTest {
  diff: { mean: number; lo: number; hi: number; resamples: number };
  b: number;
  c: number;
  pairs: number;
  instances: number;
  p: number;
  /** Holm over the same rows as the gate */
  p_adjusted: number;
  /** the smallest difference between these checkpoints this test detects with 80 % power (instances as the only noise) */
  mde: number | null;
}

/** Which rows a p-value was adjusted over, and how. */
export interface Adjustment {
  method: 'holm';
  /** the rows of this comparison that carry a run-level test */
  family: number;
  /**
   * How many times these groups have been looked at with a verdict, this one included (`compare --looks K`: seeds added
   * in rounds). Each row's p is multiplied by it before Holm (Bonferroni over the looks: valid whatever the schedule).
   * 1: the design was fixed before the first look.
   */
  looks: number;
}

/** `--power-for d`, or else the observed Δ: about how many seeds per side the run-level gate needs to detect it with 80 % power. */
export interface SeedsNeeded {
  diff: number;
  basis: 'power-for' | 'observed';
  /** seeds a side; or, where the test is over warm starts, warm starts (each crossed with today's seeds) */
  unit: 'seeds' | 'starts';
  /** null when no number of seeds (starts) gets there on these instances, or the variance is unknown */
  seeds: number | null;
}

/** "5.0 pp (the observed Δ): about 7 seeds a side", or that no number gets there: the CLI's and Compare Runs' sentence. */
export function seedsNeededText(s: SeedsNeeded | null): string {
  if (!s) return '';
  const d = `${formatFixed(100 * s.diff, 1)} pp${s.basis === 'observed' ? ' (the observed Δ)' : ''}`;
  if (s.unit === 'starts')
    return s.seeds === null ? `${d}: not within 1000 warm starts (needs more instances)` : `${d}: about ${s.seeds} warm starts, each with these seeds`;
  return s.seeds === null
    ? `${d}: not within 1000 seeds (needs more instances, or 2 runs a side to know the seed variance)`
    : `${d}: about ${s.seeds} seeds a side`;
}

export interface CompareRow {
  /** the run name without its seed part (`-seed2`) */
  group: string;
  /** strategy and its headline parameter, e.g. "outcome_conditional (think_discount 0.5)" */
  label: string;
  strategy: string | null;
  baseline: boolean;
  seeds: (number | null)[];
  /** the shared SFT warm starts its runs began from (0: each run trained its own) */
  starts: number;
  runs: string[];
  instances: number;
  /** the eval step every run of the comparison was read at */
  step: number;
  eval_success: SeedInterval;
  /** vs the baseline: the gate's Δ with its 95 % t interval; null for the baseline and where the gate is withheld */
  diff: { mean: number; lo: number; hi: number } | null;
  /** the gate; null for the baseline, and with fewer than 2 runs on a side (verdict_withheld says so) */
  run_test: RunTest | null;
  /** the instance-clustered test, conditional on these checkpoints; null for the baseline */
  conditional: ConditionalTest | null;
  /** the gate's p, Holm-adjusted over the rows that have one; significance is p_adjusted < alpha */
  p_adjusted: number | null;
  significant: boolean | null;
  /** why a non-baseline row has no verdict (too few runs to know the seed variance); null otherwise */
  verdict_withheld: string | null;
  /**
   * Minimum detectable effect of the gate: the smallest true difference detected with 80 % power at α / family (Holm's
   * strictest step), with this row's seeds, the run-to-run variance of the runs at hand, and these instances.
   */
  mde: number | null;
  seeds_needed: SeedsNeeded | null;
  /** fewer than 3 seeds, or a run that did not complete: a hint, not a finding */
  exploratory: boolean;
  /**
   * The one SFT warm start every run of this row and of the baseline began GRPO from (its folder's name): the verdict is
   * about that start, since a start × method interaction cannot be seen from one. Null when the runs span several
   * starts, or each trained its own.
   */
  warm_start: string | null;
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

/** The comparison's note when every run began GRPO from one shared warm start (Compare Runs says it above its note instead). */
export const ONE_START_NOTE = (start: string) =>
  `every run starts GRPO from one warm start (${start}): the verdicts are conditional on it, since a start × method interaction cannot be seen (sweep.warm_starts trains several)`;

/** How a row's verdict reads everywhere: "0.012", with n.s. when it is not significant, "no verdict" when withheld. */
export function verdictText(r: {
  p_adjusted: number | null;
  significant: boolean | null;
  verdict_withheld?: string | null;
  warm_start?: string | null;
}): string {
  if (r.p_adjusted === null) return r.verdict_withheld ? 'no verdict' : '';
  const from = r.warm_start ? ` (from warm start ${r.warm_start})` : '';
  return (r.significant ? pText(r.p_adjusted) : `${pText(r.p_adjusted)} n.s.`) + from;
}

const n = nullable(isNumber);
export const isSeedInterval: Check<SeedInterval> = shape<SeedInterval>({ mean: n, lo: n, hi: n, n: isNumber, half: n });

const isRunTest = shape<RunTest>({
  method: oneOf('two-way t', 'over warm starts'),
  diff: isNumber,
  lo: isNumber,
  hi: isNumber,
  se: isNumber,
  df: isNumber,
  p: isNumber,
  runs_baseline: isNumber,
  runs: isNumber,
  run_sd: n,
  instance_sd: isNumber,
  instances: isNumber,
  starts: n,
  start_sd: n,
  by_start: nullable(
    arrayOf(
      shape<{ start: string; diff: number; runs: number; runs_baseline: number }>({ start: isString, diff: isNumber, runs: isNumber, runs_baseline: isNumber }),
    ),
  ),
});

const isConditionalTest = shape<ConditionalTest>({
  diff: shape<ConditionalTest['diff']>({ mean: isNumber, lo: isNumber, hi: isNumber, resamples: isNumber }),
  b: isNumber,
  c: isNumber,
  pairs: isNumber,
  instances: isNumber,
  p: isNumber,
  p_adjusted: isNumber,
  mde: n,
});

export const isCompareRow: Check<CompareRow> = shape<CompareRow>({
  group: isString,
  label: isString,
  strategy: nullable(isString),
  baseline: isBoolean,
  seeds: arrayOf(nullable(isNumber)),
  starts: isNumber,
  runs: arrayOf(isString),
  instances: isNumber,
  step: isNumber,
  eval_success: isSeedInterval,
  diff: nullable(shape<NonNullable<CompareRow['diff']>>({ mean: isNumber, lo: isNumber, hi: isNumber })),
  run_test: nullable(isRunTest),
  conditional: nullable(isConditionalTest),
  p_adjusted: n,
  significant: nullable(isBoolean),
  verdict_withheld: nullable(isString),
  mde: n,
  seeds_needed: nullable(shape<SeedsNeeded>({ diff: isNumber, basis: oneOf('power-for', 'observed'), unit: oneOf('seeds', 'starts'), seeds: n })),
  exploratory: isBoolean,
  warm_start: nullable(isString),
  filler_abs_c: nullable(isSeedInterval),
  reasoning_abs_c: nullable(isSeedInterval),
  filler_reasoning_ratio: nullable(isSeedInterval),
});

export const isCompareReport: Check<CompareReport> = (v): v is CompareReport =>
  isRecord(v) &&
  shape<CompareReport>({
    split: oneOf('test', 'validation'),
    alpha: isNumber,
    adjustment: shape<Adjustment>({ method: oneOf('holm'), family: isNumber, looks: isNumber }),
    power: isNumber,
    baseline: isString,
    rows: arrayOf(isCompareRow),
    notes: arrayOf(isString),
  })(v);
