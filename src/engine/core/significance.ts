// Inference for comparisons (DESIGN §10). Pure numbers in and out, so the CLI, the JSON, the sweep summary,
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
import { makeRng } from './rng';

export interface Interval {
  mean: number;
  lo: number;
  hi: number;
  n: number;
  /** t interval's half width; NaN with one value */ half: number;
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
