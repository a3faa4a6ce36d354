// The engine's one set of summary statistics. Sample (N − 1) spread throughout, as torch.std and TRL use.

export function mean(xs: ArrayLike<number>): number {
  const n = xs.length;
  if (n === 0) return 0;
  let s = 0;
  for (let i = 0; i < n; i++) s += xs[i];
  return s / n;
}

/** Mean and sample variance (N − 1); equal values have exactly zero variance (no 1e-34 from rounding). */
export function meanVar(xs: ArrayLike<number>): { mean: number; var: number } {
  const n = xs.length;
  if (n === 0) return { mean: 0, var: 0 };
  let same = true;
  for (let i = 1; i < n && same; i++) same = xs[i] === xs[0];
  // Eight 0.1s sum to a mean that is not exactly 0.1; a group without information must not look usable.
  if (same) return { mean: xs[0], var: 0 };
  const m = mean(xs);
  if (n < 2) return { mean: m, var: 0 };
  let v = 0;
  for (let i = 0; i < n; i++) v += (xs[i] - m) ** 2;
  return { mean: m, var: v / (n - 1) };
}

/** Mean and sample std (N − 1); std is 0 for a single element. */
export function meanStd(xs: ArrayLike<number>): { mean: number; std: number } {
  const { mean: m, var: v } = meanVar(xs);
  return { mean: m, std: Math.sqrt(v) };
}

/** The q-th percentile (0–100) with linear interpolation between ranks, numpy.percentile's default; Infinity when empty. */
export function percentileLinear(values: number[], q: number): number {
  if (values.length === 0) return Infinity;
  const v = [...values].sort((a, b) => a - b);
  const pos = (q / 100) * (v.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

/** The median: the 50th percentile, the mean of the two middle values of an even count. */
export function median(xs: number[]): number {
  return percentileLinear(xs, 50);
}
