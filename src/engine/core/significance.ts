// Inference for comparisons (design.md#statistics). Pure numbers in and out, so the CLI, the JSON, the sweep summary,
// Compare Runs and the analysis view print the same figures.
//
// The unit of a comparison is the eval *instance*, not the (seed, instance) pair. Each instance appears once per seed,
// and the runs of one configuration share their SFT start and their per-seed random streams, so the outcomes of one
// instance across seeds are correlated: an instance one method happens to solve tends to be solved in every seed.
// Counting 3 seeds × 256 instances as 768 independent pairs (McNemar's test pooled over seeds) inflates significance:
// three copies of one seed's table would look three times as sure. So:
// - the test is a sign-flip permutation test on each instance's summed difference over seeds, exact (the whole
//   randomisation distribution, by convolution); with one seed it *is* McNemar's exact test;
// - the interval is a cluster bootstrap that resamples instances, each with all of its seeds;
// - p-values of one comparison's rows are Holm-adjusted over those rows (@stdlib/stats-padjust);
// - the power figures (MDE, seeds needed) come from the same per-instance differences.
// The t interval over seeds (meanInterval) stays as information about seed-to-seed spread.
import padjust from '@stdlib/stats-padjust';
import normalQuantile from '@stdlib/stats-base-dists-normal-quantile';
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import tCdf from '@stdlib/stats-base-dists-t-cdf';
import { makeRng } from './rng';
import { mean, meanVar } from './stats';

export interface Interval {
  mean: number;
  lo: number;
  hi: number;
  n: number;
  /** t interval's half width; NaN with one value */ half: number;
}

/** The two-sided p of Student's t on `df` degrees of freedom (from the lower tail, which keeps small p exact). */
export function tTwoSided(t: number, df: number): number {
  return Math.min(1, 2 * tCdf(-Math.abs(t), df));
}

/** Mean and the two-sided `level` t interval over independent values (one per seed); one value gives no interval. */
export function meanInterval(values: number[], level = 0.95): Interval {
  const n = values.length;
  if (n === 0) return { mean: NaN, lo: NaN, hi: NaN, n, half: NaN };
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { mean, lo: NaN, hi: NaN, n, half: NaN };
  const sd = Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1));
  const half = tQuantile(1 - (1 - level) / 2, n - 1) * (sd / Math.sqrt(n));
  return { mean, lo: mean - half, hi: mean + half, n, half };
}

/**
 * Paired outcomes grouped by instance: `d[i][s]` is other − baseline (−1, 0 or +1 for success) of instance i in the
 * s-th run pair; an instance missing from a pair's common instances has fewer entries.
 */
export interface Clusters {
  d: number[][];
  /** pairs where only the baseline succeeded, and where only the other run did (over all seeds: descriptive) */
  b: number;
  c: number;
  pairs: number;
  /** the number of run pairs (seeds) */
  seeds: number;
}

/** Group (instance, baseline, other) outcomes of several run pairs by instance. `runs[s]` lists pair s's instances. */
export function clustersOf(runs: readonly (readonly { id: string; baseline: boolean; other: boolean }[])[]): Clusters {
  const byId = new Map<string, number[]>();
  let b = 0;
  let c = 0;
  let pairs = 0;
  for (const run of runs) {
    for (const { id, baseline, other } of run) {
      let row = byId.get(id);
      if (!row) byId.set(id, (row = []));
      row.push(Number(other) - Number(baseline));
      if (baseline && !other) b++;
      else if (!baseline && other) c++;
      pairs++;
    }
  }
  return { d: [...byId.values()], b, c, pairs, seeds: runs.length };
}

/** Each instance's difference summed over its seeds. */
const sums = (cl: Clusters) => cl.d.map((row) => row.reduce((a, x) => a + x, 0));

/** Mean of other − baseline over all (seed, instance) pairs: the difference in success rate. */
export function meanDiff(cl: Clusters): number {
  return cl.pairs ? sums(cl).reduce((a, x) => a + x, 0) / cl.pairs : NaN;
}

/**
 * Two-sided exact sign-flip permutation test of Σ_i D_i, D_i the instance's summed difference over seeds: under the
 * null each instance's D_i is as likely to be −D_i (the two methods exchangeable on that instance), so the statistic's
 * randomisation distribution is that of Σ ε_i·D_i with independent fair signs ε_i. Computed exactly by convolving one
 * instance at a time over the integer sums. p = P(|Σ ε_i D_i| ≥ |Σ D_i|). With one seed the D_i are the discordant pairs'
 * ±1 and this is McNemar's exact test; with k identical copies of one seed every D_i is k times larger and p is the same.
 */
export function signFlipP(cl: Clusters): number {
  const D = sums(cl)
    .map((x) => Math.round(x))
    .filter((x) => x !== 0);
  if (!D.length) return 1;
  const M = D.reduce((a, x) => a + Math.abs(x), 0);
  let dist = new Float64Array(2 * M + 1);
  let next = new Float64Array(2 * M + 1);
  dist[M] = 1;
  let reach = 0;
  for (const x of D) {
    const a = Math.abs(x);
    next.fill(0, M - reach - a, M + reach + a + 1);
    for (let j = M - reach; j <= M + reach; j++) {
      const p = dist[j];
      if (p === 0) continue;
      next[j - a] += 0.5 * p;
      next[j + a] += 0.5 * p;
    }
    reach += a;
    [dist, next] = [next, dist];
  }
  const t = Math.abs(D.reduce((a, x) => a + x, 0));
  let tail = 0;
  for (let j = 0; j <= 2 * M; j++) if (Math.abs(j - M) >= t) tail += dist[j];
  return Math.min(1, tail);
}

export interface Bootstrap {
  diff: number;
  lo: number;
  hi: number;
  resamples: number;
}

/**
 * Cluster bootstrap of the success-rate difference: resample instances with replacement, each with all of its seeds,
 * and take the ratio Σ D / Σ pairs of the resample; percentile interval at `level`. Seeded, so the same inputs print
 * the same interval.
 */
export function clusterBootstrap(cl: Clusters, opts: { resamples?: number; seed?: number; level?: number } = {}): Bootstrap {
  const resamples = opts.resamples ?? 10_000;
  const level = opts.level ?? 0.95;
  const n = cl.d.length;
  const diff = meanDiff(cl);
  if (n === 0) return { diff, lo: NaN, hi: NaN, resamples };
  const D = Float64Array.from(sums(cl));
  const k = Float64Array.from(cl.d, (row) => row.length);
  const rand = makeRng(opts.seed ?? 1);
  const stats = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    let m = 0;
    for (let i = 0; i < n; i++) {
      const j = Math.floor(rand() * n);
      s += D[j];
      m += k[j];
    }
    stats[r] = s / m;
  }
  stats.sort();
  const q = (p: number) => stats[Math.min(resamples - 1, Math.max(0, Math.floor(p * resamples)))];
  return { diff, lo: q((1 - level) / 2), hi: q(1 - (1 - level) / 2), resamples };
}

/** Holm's step-down adjustment over one family of p-values (the rows of one comparison), in the given order. */
export function holm(ps: readonly number[]): number[] {
  if (ps.length === 0) return [];
  return padjust([...ps], 'holm');
}

export interface Power {
  /** the smallest true difference (success-rate points as a fraction) the test detects with `power` at this design */
  mde: number;
  /** per-(seed, instance) variance of the difference, and the covariance of two seeds' differences on one instance */
  within: number;
  between: number;
  /** true with one seed: the between-seed covariance cannot be estimated and is taken as 0 (seeds independent) */
  assumedIndependent: boolean;
  instances: number;
  seeds: number;
  /** the per-test α the MDE is computed at (α over the family's rows: Holm's strictest step) */
  alpha: number;
  power: number;
}

/**
 * Power of the instance-clustered comparison, from the observed per-instance differences (normal approximation to the
 * sign-flip test). The summed difference of an instance over S seeds has variance S·w + S(S − 1)·c, w the variance of
 * one seed's difference and c the covariance of two seeds' on the same instance (method of moments, c clamped to
 * [0, w]); the mean difference's standard error with S seeds is √((w + (S − 1)c) / (n·S)), and the MDE is
 * (z₁₋α/₂ + z_power)·SE. More seeds shrink the first part only: with c > 0 the SE never falls below √(c/n).
 */
export function powerOf(cl: Clusters, alpha: number, power = 0.8): Power {
  const n = cl.d.length;
  const S = Math.max(1, cl.seeds);
  // w: each seed's variance of d over instances, averaged over seeds
  let within = 0;
  let seedsSeen = 0;
  for (let s = 0; s < S; s++) {
    const col = cl.d.filter((row) => row.length > s).map((row) => row[s]);
    if (col.length < 2) continue;
    const m = col.reduce((a, x) => a + x, 0) / col.length;
    within += col.reduce((a, x) => a + (x - m) ** 2, 0) / (col.length - 1);
    seedsSeen++;
  }
  within = seedsSeen ? within / seedsSeen : 0;
  let between = 0;
  const complete = cl.d.filter((row) => row.length === S).map((row) => row.reduce((a, x) => a + x, 0));
  if (S > 1 && complete.length > 1) {
    const m = complete.reduce((a, x) => a + x, 0) / complete.length;
    const varSum = complete.reduce((a, x) => a + (x - m) ** 2, 0) / (complete.length - 1);
    between = Math.min(within, Math.max(0, (varSum - S * within) / (S * (S - 1))));
  }
  const z = normalQuantile(1 - alpha / 2, 0, 1) + normalQuantile(power, 0, 1);
  // No discordant outcome at all leaves no variance to estimate from: an MDE of 0 would claim any difference is visible.
  const mde = n && within > 0 ? z * Math.sqrt((within + (S - 1) * between) / (n * S)) : NaN;
  return { mde, within, between, assumedIndependent: S === 1, instances: n, seeds: S, alpha, power };
}

/** MDE with `seeds` seeds on the same instances (the variance components of `p`). */
export function mdeWithSeeds(p: Power, seeds: number): number {
  const z = normalQuantile(1 - p.alpha / 2, 0, 1) + normalQuantile(p.power, 0, 1);
  return z * Math.sqrt((p.within + (seeds - 1) * p.between) / (p.instances * seeds));
}

/**
 * The fewest seeds (up to `max`) whose MDE on these instances is at most |diff|; null when no number of seeds gets
 * there (the between-seed covariance sets a floor: more instances are needed, not more seeds).
 */
export function seedsNeeded(p: Power, diff: number, max = 1000): number | null {
  if (!(p.instances > 0) || !(Math.abs(diff) > 0) || !(p.within > 0)) return null;
  for (let s = 1; s <= max; s++) if (mdeWithSeeds(p, s) <= Math.abs(diff)) return s;
  return null;
}

// ---- The run-level gate ----
//
// "Method B trains better policies than method A" is a claim about training runs, so its test has the run as its unit.
// A run's success rate on fixed instances varies from seed to seed by more than instance noise: a seed whose policy is
// better on many instances at once moves all of their differences together, which the instance-clustered test above
// reads as evidence. The gate is therefore the two-way variance of the difference of group means,
//
//   Var(Δ̂) = s_p² · Σ_k 1/S_k + σ̂_inst²/n,
//
// with s_p² the variance of a run's success rate across seeds (σ_seed² + σ_e²/n: the run effect and the residual noise
// of n instances), pooled over the sides with Σ_k (S_k − 1) degrees of freedom, and σ̂_inst² the method × instance
// interaction (how differently the two methods find each instance), so that the conclusion holds for new seeds *and*
// new instances from the same task. The t statistic gets Satterthwaite's degrees of freedom from the two components.
// Why pooled: under the null the method does not change how runs fall, so one run variance is estimated from all the
// runs. Each side's own variance (Welch) is liberal when the sides differ in size: at 11 v 2 it rejected 11.5 % of nulls
// at α 0.05, at 11 v 3 6.4 %, at 6 v 2 7.6 % (3,000 simulations a cell); pooled, 5.5 % at 11 v 2 and 5.1 % at 11 v 3
// (run_gate.test.ts simulates these cells). We chose the t reference over an exact permutation of run labels
// because at the sizes people run (3 seeds a side) the permutation has 20 labelings and cannot reach p < 0.1, whereas
// the t reference is calibrated there (the null simulation in run_gate.test.ts). Fewer than 2 runs on a side leave
// the seed variance unknown: no verdict, only the seeds needed.

/** One side of a run-level contrast: ±1 times the mean over its runs; `runs[s][i]` is run s's outcome on instance i. */
export interface RunSide {
  sign: 1 | -1;
  runs: readonly (readonly number[])[];
}

/** The variance components of a run-level contrast, estimated from the runs at hand. */
export interface RunComponents {
  /** runs per side */
  runs: number[];
  /** each side's variance of a run's mean outcome across its seeds (σ_seed² + σ_e²/n); null with one run */
  runVar: (number | null)[];
  /** the run variance pooled over the sides that have ≥ 2 runs (df-weighted); null when none has */
  pooledRunVar: number | null;
  pooledDf: number;
  /** the interaction variance per instance, σ̂_inst² (method of moments, clamped at 0) */
  instanceVar: number;
  instances: number;
}

export interface RunLevelTest {
  /** the contrast: Σ_k sign_k · mean over side k's runs of the run's mean outcome */
  diff: number;
  se: number;
  df: number;
  t: number;
  p: number;
  /** the 95 % t interval of diff, from the same se and df as p */
  lo: number;
  hi: number;
  components: RunComponents;
}

export function runComponents(sides: readonly RunSide[]): RunComponents {
  const n = sides[0]?.runs[0]?.length ?? 0;
  for (const s of sides) for (const r of s.runs) if (r.length !== n) throw new Error('runComponents: every run needs the same instances, in the same order');
  const runVar = sides.map((s) => (s.runs.length >= 2 ? meanVar(s.runs.map(mean)).var : null));
  let num = 0;
  let pooledDf = 0;
  sides.forEach((s, k) => {
    if (runVar[k] === null) return;
    num += runVar[k]! * (s.runs.length - 1);
    pooledDf += s.runs.length - 1;
  });
  // d_i = Σ_k sign_k · (side k's mean on instance i); its variance over instances is σ_inst² plus each side's
  // within-instance spread across seeds divided by its runs, which is subtracted (method of moments).
  let instanceVar = 0;
  if (n >= 2) {
    const d = new Float64Array(n);
    let within = 0;
    for (const s of sides) {
      let v = 0;
      for (let i = 0; i < n; i++) {
        const at = meanVar(s.runs.map((r) => r[i]));
        d[i] += s.sign * at.mean;
        v += at.var;
      }
      if (s.runs.length >= 2) within += v / n / s.runs.length;
    }
    instanceVar = Math.max(0, meanVar(d).var - within);
  }
  return { runs: sides.map((s) => s.runs.length), runVar, pooledRunVar: pooledDf ? num / pooledDf : null, pooledDf, instanceVar, instances: n };
}

/** Var(Δ̂) and its Satterthwaite df with `runs[k]` seeds on side k, the run variance pooled over the sides. */
function varianceAt(c: RunComponents, runs: readonly number[]): { v: number; df: number } | null {
  if (c.pooledRunVar === null) return null;
  const parts: { v: number; df: number }[] = [];
  // the df a test with these seeds would have: for the test at hand the runs', for a plan the planned ones
  parts.push({
    v: c.pooledRunVar * runs.reduce((a, r) => a + 1 / r, 0),
    df: Math.max(
      1,
      runs.reduce((a, r) => a + r - 1, 0),
    ),
  });
  if (c.instanceVar > 0) parts.push({ v: c.instanceVar / c.instances, df: c.instances - 1 });
  const v = parts.reduce((a, p) => a + p.v, 0);
  const den = parts.reduce((a, p) => a + (p.v * p.v) / p.df, 0);
  return { v, df: den > 0 ? (v * v) / den : Infinity };
}

/**
 * The gate: Δ̂ over t with Satterthwaite df, two-sided. Null when a side has fewer than 2 runs (its seed variance is
 * unknown), or when the runs show no variance at all (identical rates and no interaction: nothing to test against).
 */
export function runLevelTest(sides: readonly RunSide[], level = 0.95): RunLevelTest | null {
  if (!sides.length || sides.some((s) => s.runs.length < 2)) return null;
  const c = runComponents(sides);
  const diff = sides.reduce((a, s) => a + s.sign * mean(s.runs.map(mean)), 0);
  const at = varianceAt(
    c,
    sides.map((s) => s.runs.length),
  );
  if (!at || !(at.v > 0)) return null;
  const se = Math.sqrt(at.v);
  const t = diff / se;
  const p = tTwoSided(t, at.df);
  const half = tQuantile(1 - (1 - level) / 2, at.df) * se;
  return { diff, se, df: at.df, t, p, lo: diff - half, hi: diff + half, components: c };
}

/**
 * The smallest true |Δ| the gate detects with `power` at level `alpha` with `runs[k]` seeds on side k (these instances):
 * (t_{1−α/2, df} + t_{power, df})·SE. Null when no side has 2 runs to estimate the seed variance from.
 */
export function runLevelMde(c: RunComponents, runs: readonly number[], alpha: number, power = 0.8): number | null {
  return mdeAt(varianceAt(c, runs), alpha, power);
}

/** (t_{1−α/2, df} + t_{power, df})·√v of a variance and its df; null without a positive variance. */
export function mdeAt(at: { v: number; df: number } | null, alpha: number, power = 0.8): number | null {
  if (!at || !(at.v > 0)) return null;
  const df = Number.isFinite(at.df) ? at.df : 1e6;
  return (tQuantile(1 - alpha / 2, df) + tQuantile(power, df)) * Math.sqrt(at.v);
}

/**
 * The fewest n (from 2 up to `max`) whose MDE is at most |diff|; null when none is, or the MDE is unknown: the seeds a
 * run-level design needs, or the warm starts a design over starts needs.
 */
export function fewestReaching(diff: number, mde: (n: number) => number | null, max = 1000): number | null {
  if (!(Math.abs(diff) > 0)) return null;
  for (let n = 2; n <= max; n++) {
    const m = mde(n);
    if (m === null) return null;
    if (m <= Math.abs(diff)) return n;
  }
  return null;
}

/**
 * The fewest seeds per side (every side the same, up to `max`) at which the MDE is at most |diff|; null when none is
 * (the interaction σ_inst²/n sets a floor that seeds cannot lower: more instances are needed) or the seed variance is
 * unknown.
 */
export function runsNeeded(c: RunComponents, diff: number, alpha: number, power = 0.8, max = 1000): number | null {
  return fewestReaching(
    diff,
    (s) =>
      runLevelMde(
        c,
        c.runs.map(() => s),
        alpha,
        power,
      ),
    max,
  );
}
