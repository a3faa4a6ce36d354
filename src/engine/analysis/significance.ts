// Inference for comparisons (DESIGN §10): a 95 % t interval over seeds, McNemar's exact test on paired per-instance
// successes, and a seeded paired bootstrap. Pure numbers in and out, so the CLI, the sweep summary and Compare Runs
// print the same figures. No library on npm covers these three without pulling a large dependency; each is a few
// lines from its textbook definition, and the tests check them against published table values.

import { makeRng } from '../core/rng';

/** ln Γ(x), Lanczos (g = 7, n = 9), |error| < 1e-13 for x > 0. */
function lnGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012,
    9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  x -= 1;
  let a = c[0];
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += c[i] / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Continued fraction of the regularised incomplete beta (modified Lentz). */
function betacf(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return h;
}

/** I_x(a, b). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  return x < (a + 1) / (a + b + 2) ? (front * betacf(a, b, x)) / a : 1 - (front * betacf(b, a, 1 - x)) / b;
}

/** P(T ≤ t) for Student's t with `df` degrees of freedom. */
export function studentTCdf(t: number, df: number): number {
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** The p-quantile of Student's t (bisection on the CDF to 1e-12). */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1) || !(df > 0)) return NaN;
  if (p === 0.5) return 0;
  let lo = -1e6;
  let hi = 1e6;
  for (let i = 0; i < 200 && hi - lo > 1e-12 * Math.max(1, Math.abs(hi)); i++) {
    const mid = (lo + hi) / 2;
    if (studentTCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

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
  const half = studentTQuantile(1 - (1 - level) / 2, n - 1) * (sd / Math.sqrt(n));
  return { mean, lo: mean - half, hi: mean + half, n, half };
}

export interface McNemar {
  /** pairs where only the baseline succeeded */
  b: number;
  /** pairs where only the other run succeeded */
  c: number;
  n: number;
  /** two-sided exact p-value: 2·P(X ≤ min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1 */
  p: number;
}

/** McNemar's exact test on paired binary outcomes [baseline, other], e.g. per (seed, instance) success. */
export function mcnemarExact(pairs: readonly (readonly [boolean, boolean])[]): McNemar {
  let b = 0;
  let c = 0;
  for (const [x, y] of pairs) {
    if (x && !y) b++;
    else if (!x && y) c++;
  }
  const n = b + c;
  if (n === 0) return { b, c, n: pairs.length, p: 1 };
  const k = Math.min(b, c);
  // Σ_{i ≤ k} C(n, i) / 2^n in log space (n can be thousands).
  const lnC = (i: number) => lnGamma(n + 1) - lnGamma(i + 1) - lnGamma(n - i + 1) - n * Math.LN2;
  let tail = 0;
  for (let i = 0; i <= k; i++) tail += Math.exp(lnC(i));
  return { b, c, n: pairs.length, p: Math.min(1, 2 * tail) };
}

export interface Bootstrap {
  diff: number;
  lo: number;
  hi: number;
  /** two-sided: 2·min(share ≤ 0, share ≥ 0) of resampled differences */ p: number;
  resamples: number;
}

/**
 * Paired bootstrap of mean(other − baseline) over instances: resample instance indices with replacement,
 * percentile interval at `level`. Seeded, so the same inputs print the same interval.
 */
export function pairedBootstrap(
  baseline: readonly number[],
  other: readonly number[],
  opts: { resamples?: number; seed?: number; level?: number } = {},
): Bootstrap {
  if (baseline.length !== other.length) throw new Error('pairedBootstrap: the two runs must be measured on the same instances');
  const n = baseline.length;
  const resamples = opts.resamples ?? 10_000;
  const level = opts.level ?? 0.95;
  const d = other.map((v, i) => v - baseline[i]);
  const diff = n ? d.reduce((a, x) => a + x, 0) / n : NaN;
  if (n === 0) return { diff, lo: NaN, hi: NaN, p: 1, resamples };
  const rand = makeRng(opts.seed ?? 1);
  const stats = new Float64Array(resamples);
  let le = 0;
  let ge = 0;
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += d[Math.floor(rand() * n)];
    const m = s / n;
    stats[r] = m;
    if (m <= 0) le++;
    if (m >= 0) ge++;
  }
  stats.sort();
  const q = (p: number) => stats[Math.min(resamples - 1, Math.max(0, Math.floor(p * resamples)))];
  return { diff, lo: q((1 - level) / 2), hi: q(1 - (1 - level) / 2), p: Math.min(1, (2 * Math.min(le, ge)) / resamples), resamples };
}
