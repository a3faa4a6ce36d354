// Credit accuracy: how well a strategy's per-token effective advantages Â put credit where the Monte Carlo
// values say it belongs. Pure numbers in and out.
//
// The unit of comparison is the stretch between two consecutive probed positions a < b of an episode: its Monte Carlo
// credit is δ = V_b − V_a, its credit under a strategy Â = Σ_{a ≤ t < b} Â_t. With --positions every each unit is one
// token and δ is δ_t = V_{t+1} − V_t; segments and cutpoints give longer units, scored the same way. Per episode:
// - spearman: the rank correlation of |Â| and |δ| over its units (average ranks for ties); undefined, and left out,
//   when either side is constant (uniform credit ranks nothing) or the episode has fewer than 3 units;
// - decisive_share: the share of the episode's Σ|Â| that falls on its top 10 % units by |δ| (⌈U/10⌉ units, ties to the
//   earlier unit); uniform credit would put (tokens in those units)/n there, reported as uniform_share; both undefined when
//   Σ|Â| = 0 (an episode whose advantage is 0);
// - sign_agreement: Σ|δ|·[Â·δ > 0] / Σ|δ| over its units (Â = 0 does not agree); undefined when Σ|δ| = 0 or Σ|Â| = 0
//   (an episode of a group whose rewards were all equal gets no credit at all under any strategy: nothing to score).
// Episodes are averaged with a 95 % cluster-bootstrap interval that resamples prompts, each with all of its episodes.
import type { AccuracyReport, Estimate, StrategyAccuracy } from '../../protocol/analysis';
import { clusterBootstrap } from '../core/significance';

export type { AccuracyReport, Estimate, StrategyAccuracy };

export interface ProbedEpisode {
  /** the prompt: the cluster */
  prompt: number;
  /** completion length n */
  n: number;
  /** probed positions, ascending, with their values V */
  positions: number[];
  values: number[];
}

export interface EpisodeScores {
  spearman: number | null;
  decisive_share: number | null;
  uniform_share: number | null;
  sign_agreement: number | null;
}

/** Average ranks (1-based), ties sharing the mean of their ranks. */
export function ranks(xs: readonly number[]): number[] {
  const order = xs.map((_, i) => i).sort((a, b) => xs[a] - xs[b]);
  const r = new Array<number>(xs.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && xs[order[j + 1]] === xs[order[i]]) j++;
    for (let k = i; k <= j; k++) r[order[k]] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return r;
}

/** Spearman's ρ: Pearson's correlation of the average ranks; null when either side is constant. */
export function spearman(x: readonly number[], y: readonly number[]): number | null {
  const rx = ranks(x);
  const ry = ranks(y);
  const n = x.length;
  const mx = rx.reduce((a, b) => a + b, 0) / n;
  const my = ry.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) ** 2;
    syy += (ry[i] - my) ** 2;
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : null;
}

/** The three measures of one episode for one strategy's Â (one value per completion token). */
export function episodeScores(ep: ProbedEpisode, effAdv: readonly number[]): EpisodeScores {
  const units: { delta: number; adv: number; len: number }[] = [];
  for (let k = 0; k + 1 < ep.positions.length; k++) {
    const a = ep.positions[k];
    const b = ep.positions[k + 1];
    let adv = 0;
    for (let t = a; t < b; t++) adv += effAdv[t];
    units.push({ delta: ep.values[k + 1] - ep.values[k], adv, len: b - a });
  }
  const absD = units.map((u) => Math.abs(u.delta));
  const absA = units.map((u) => Math.abs(u.adv));
  const rho = units.length >= 3 ? spearman(absA, absD) : null;
  const sumA = absA.reduce((a, b) => a + b, 0);
  const k = Math.ceil(units.length / 10);
  const top = units
    .map((_, i) => i)
    .sort((i, j) => absD[j] - absD[i] || i - j)
    .slice(0, k);
  const decisive = sumA > 0 && units.length > 0 ? top.reduce((a, i) => a + absA[i], 0) / sumA : null;
  const uniform = sumA > 0 && units.length > 0 && ep.n > 0 ? top.reduce((a, i) => a + units[i].len, 0) / ep.n : null;
  const sumD = absD.reduce((a, b) => a + b, 0);
  const sign = sumD > 0 && sumA > 0 ? units.reduce((a, u, i) => a + (u.adv * u.delta > 0 ? absD[i] : 0), 0) / sumD : null;
  return { spearman: rho, decisive_share: decisive, uniform_share: uniform, sign_agreement: sign };
}

/** Mean over episodes with the prompt-clustered bootstrap interval; `values[i]` null where undefined. */
export function clusteredMean(values: readonly (number | null)[], prompts: readonly number[], seed = 1): Estimate {
  const byPrompt = new Map<number, number[]>();
  let n = 0;
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) return;
    n++;
    const row = byPrompt.get(prompts[i]) ?? [];
    row.push(v);
    byPrompt.set(prompts[i], row);
  });
  if (n === 0) return { mean: null, lo: null, hi: null, n };
  const b = clusterBootstrap({ d: [...byPrompt.values()], b: 0, c: 0, pairs: n, seeds: 1 }, { seed });
  // one prompt: resampling prompts cannot show any spread, so no interval
  const single = byPrompt.size < 2;
  return { mean: b.diff, lo: single ? null : b.lo, hi: single ? null : b.hi, n };
}

/** Every strategy's accuracy over the probed episodes; `effAdv[name][i]` is episode i's Â under that strategy. */
export function creditAccuracy(episodes: readonly ProbedEpisode[], effAdv: Record<string, readonly (readonly number[])[]>): AccuracyReport {
  const prompts = episodes.map((e) => e.prompt);
  const accuracy: Record<string, StrategyAccuracy> = {};
  let uniform: (number | null)[] = [];
  for (const [name, rows] of Object.entries(effAdv)) {
    const scores = episodes.map((e, i) => episodeScores(e, rows[i]));
    accuracy[name] = {
      spearman: clusteredMean(
        scores.map((s) => s.spearman),
        prompts,
      ),
      decisive_share: clusteredMean(
        scores.map((s) => s.decisive_share),
        prompts,
      ),
      sign_agreement: clusteredMean(
        scores.map((s) => s.sign_agreement),
        prompts,
      ),
    };
    uniform = scores.map((s) => s.uniform_share);
  }
  return { accuracy, uniform_share: clusteredMean(uniform, prompts), episodes: episodes.length, prompts: new Set(prompts).size };
}
