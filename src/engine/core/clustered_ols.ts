// Least squares with standard errors that resample nothing and assume nothing within a cluster: the sandwich
// (X'X)⁻¹ (Σ_g X_g' u_g u_g' X_g) (X'X)⁻¹ · G/(G − 1), t on G − 1 degrees of freedom. A probe's tokens are not
// independent (the tokens of one prompt share its continuations' policy and its answer), so the prompt is the cluster.
// Group fixed effects (an episode's) are absorbed by demeaning within the group first (Frisch–Waugh–Lovell): the
// coefficients and residuals are those of the regression with a dummy per group, and when every group lies within one
// cluster (an episode within its prompt) so is the sandwich, which is why G/(G − 1) is the only small-sample factor.
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import { tTwoSided } from './significance';

export interface ClusteredCoefficient {
  estimate: number;
  se: number;
  /** two-sided, t on clusters − 1 df */
  p: number;
  lo: number;
  hi: number;
  df: number;
}

export interface ClusteredFit {
  coefficients: ClusteredCoefficient[];
  rows: number;
  clusters: number;
}

/** The inverse of a small symmetric positive definite matrix (Gauss–Jordan with partial pivoting); null when singular. */
export function invert(a: readonly (readonly number[])[]): number[][] | null {
  const k = a.length;
  const m = a.map((row, i) => [...row, ...Array.from({ length: k }, (_, j) => (i === j ? 1 : 0))]);
  const scale = Math.max(1e-300, ...a.map((row, i) => Math.abs(row[i])));
  for (let c = 0; c < k; c++) {
    let piv = c;
    for (let r = c + 1; r < k; r++) if (Math.abs(m[r][c]) > Math.abs(m[piv][c])) piv = r;
    // relative to the diagonal's scale: a column that is another's combination leaves a pivot of rounding error
    if (Math.abs(m[piv][c]) < 1e-10 * scale) return null;
    [m[c], m[piv]] = [m[piv], m[c]];
    const d = m[c][c];
    for (let j = 0; j < 2 * k; j++) m[c][j] /= d;
    for (let r = 0; r < k; r++) {
      if (r === c || m[r][c] === 0) continue;
      const f = m[r][c];
      for (let j = 0; j < 2 * k; j++) m[r][j] -= f * m[c][j];
    }
  }
  return m.map((row) => row.slice(k));
}

/** Subtract each group's mean from y and from every column of x (absorbs a fixed effect per group). */
export function demeanWithin(y: readonly number[], x: readonly (readonly number[])[], groups: readonly number[]): { y: number[]; x: number[][] } {
  const k = x[0]?.length ?? 0;
  const sums = new Map<number, { n: number; y: number; x: number[] }>();
  y.forEach((v, i) => {
    let s = sums.get(groups[i]);
    if (!s) sums.set(groups[i], (s = { n: 0, y: 0, x: new Array<number>(k).fill(0) }));
    s.n++;
    s.y += v;
    for (let j = 0; j < k; j++) s.x[j] += x[i][j];
  });
  return {
    y: y.map((v, i) => v - sums.get(groups[i])!.y / sums.get(groups[i])!.n),
    x: x.map((row, i) => row.map((v, j) => v - sums.get(groups[i])!.x[j] / sums.get(groups[i])!.n)),
  };
}

/**
 * OLS of y on the columns of x (no intercept is added: pass a column of ones, or absorb groups with demeanWithin), with
 * cluster-robust standard errors. null when X'X is singular or there are fewer than 2 clusters.
 */
export function clusteredOls(y: readonly number[], x: readonly (readonly number[])[], clusters: readonly number[], level = 0.95): ClusteredFit | null {
  const n = y.length;
  const k = x[0]?.length ?? 0;
  const ids = [...new Set(clusters)];
  const g = ids.length;
  if (n === 0 || k === 0 || g < 2) return null;
  const xtx = Array.from({ length: k }, () => new Array<number>(k).fill(0));
  const xty = new Array<number>(k).fill(0);
  for (let i = 0; i < n; i++)
    for (let a = 0; a < k; a++) {
      xty[a] += x[i][a] * y[i];
      for (let b = 0; b < k; b++) xtx[a][b] += x[i][a] * x[i][b];
    }
  const inv = invert(xtx);
  if (!inv) return null;
  const beta = inv.map((row) => row.reduce((s, v, j) => s + v * xty[j], 0));
  // the meat: per cluster the score s_g = X_g' u_g, summed as outer products
  const score = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    const u = y[i] - x[i].reduce((s, v, j) => s + v * beta[j], 0);
    let s = score.get(clusters[i]);
    if (!s) score.set(clusters[i], (s = new Array<number>(k).fill(0)));
    for (let a = 0; a < k; a++) s[a] += x[i][a] * u;
  }
  const meat = Array.from({ length: k }, () => new Array<number>(k).fill(0));
  for (const s of score.values()) for (let a = 0; a < k; a++) for (let b = 0; b < k; b++) meat[a][b] += s[a] * s[b];
  const df = g - 1;
  const q = tQuantile(1 - (1 - level) / 2, df);
  const coefficients = beta.map((b, a) => {
    let v = 0;
    for (let i = 0; i < k; i++) for (let j = 0; j < k; j++) v += inv[a][i] * meat[i][j] * inv[j][a];
    const se = Math.sqrt(Math.max(0, v) * (g / (g - 1)));
    const t = se > 0 ? b / se : b === 0 ? 0 : Infinity;
    return { estimate: b, se, p: tTwoSided(t, df), lo: b - q * se, hi: b + q * se, df };
  });
  return { coefficients, rows: n, clusters: g };
}
