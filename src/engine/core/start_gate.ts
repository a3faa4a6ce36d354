// The run-level gate when runs share SFT warm starts (`sweep.warm_starts`). Runs from one warm start are not
// independent draws of "a training run of method A": they share the policy GRPO starts from, and a method can suit one
// start and not another (the mitigation runs showed a start × method interaction of about 4 standard errors). Pooling
// their runs as if each had its own start tests "is A better from *these* starts", and the review's simulation rejected
// 16–29 % of nulls at α 0.05 that way. So, with K ≥ 2 shared starts crossed with the methods, the unit is the start:
//
//   Δ_s = the contrast within start s (each side's mean over its runs from s),  Δ̂ = mean_s Δ_s,
//   Var(Δ̂) = Var_s(Δ_s)/K + σ̂_inst²/n,
//
// where Var_s(Δ_s) holds the interaction, the run-to-run variance and the instances' residual noise at once (no model of
// how they add is needed), and σ̂_inst² is the method × instance interaction common to every start (it cancels within
// the Δ_s, so it is added back: the claim is for new instances too). Student's t with Satterthwaite's df from K − 1 and
// n − 1. This is the "test over starts" form; with 3 starts it has 2 df and little power, which is the honest price of
// generalising over starts (start_gate.test.ts holds its size with and without the interaction).
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import { mean, meanVar } from './stats';
import { fewestReaching, mdeAt, tTwoSided, type RunSide } from './significance';

/** The runs of one warm start, by side (the same sides, in the same order and sign, in every stratum). */
export interface StartStratum {
  start: string;
  sides: readonly RunSide[];
}

export interface StartComponents {
  /** warm starts (strata) */
  starts: number;
  /** the contrast within each start */
  startDiffs: number[];
  /** Var_s(Δ_s): the start × method interaction, the runs' variance and residual noise, as the starts show them */
  startVar: number;
  /** the method × instance interaction per instance (method of moments, clamped at 0) */
  instanceVar: number;
  instances: number;
}

export interface StartLevelTest {
  diff: number;
  se: number;
  df: number;
  t: number;
  p: number;
  lo: number;
  hi: number;
  components: StartComponents;
}

function contrast(sides: readonly RunSide[]): number {
  return sides.reduce((a, s) => a + s.sign * mean(s.runs.map(mean)), 0);
}

export function startComponents(strata: readonly StartStratum[]): StartComponents {
  const n = strata[0]?.sides[0]?.runs[0]?.length ?? 0;
  for (const st of strata)
    for (const s of st.sides)
      for (const r of s.runs) if (r.length !== n) throw new Error('startComponents: every run needs the same instances, in the same order');
  const K = strata.length;
  const startDiffs = strata.map((st) => contrast(st.sides));
  const startVar = K >= 2 ? meanVar(startDiffs).var : NaN;
  // d̄_i: the contrast on instance i averaged over the starts; its variance over instances is σ_inst² plus each cell's
  // within-instance spread across its runs, divided by its runs and by K² (subtracted, as runComponents does)
  let instanceVar = 0;
  if (n >= 2) {
    const d = new Float64Array(n);
    let within = 0;
    for (const st of strata)
      for (const s of st.sides) {
        let v = 0;
        for (let i = 0; i < n; i++) {
          const at = meanVar(s.runs.map((r) => r[i]));
          d[i] += (s.sign * at.mean) / K;
          v += at.var;
        }
        if (s.runs.length >= 2) within += v / n / s.runs.length / (K * K);
      }
    instanceVar = Math.max(0, meanVar(d).var - within);
  }
  return { starts: K, startDiffs, startVar, instanceVar, instances: n };
}

/** Var(Δ̂) and Satterthwaite's df with `starts` starts (the starts at hand, or a planned number). */
function startVarianceAt(c: StartComponents, starts: number): { v: number; df: number } | null {
  if (starts < 2 || !Number.isFinite(c.startVar)) return null;
  const parts = [{ v: c.startVar / starts, df: starts - 1 }];
  if (c.instanceVar > 0) parts.push({ v: c.instanceVar / c.instances, df: c.instances - 1 });
  const v = parts.reduce((a, p) => a + p.v, 0);
  const den = parts.reduce((a, p) => a + (p.v * p.v) / p.df, 0);
  return { v, df: den > 0 ? (v * v) / den : Infinity };
}

/**
 * The gate over warm starts. Null with fewer than 2 starts, a start missing a side, or no variance at all. Each start
 * weighs the same, however many runs it holds (a start is the unit).
 */
export function startLevelTest(strata: readonly StartStratum[], level = 0.95): StartLevelTest | null {
  if (strata.length < 2 || strata.some((st) => st.sides.some((s) => s.runs.length < 1))) return null;
  const c = startComponents(strata);
  const diff = mean(c.startDiffs);
  const at = startVarianceAt(c, c.starts);
  if (!at || !(at.v > 0)) return null;
  const se = Math.sqrt(at.v);
  const t = diff / se;
  const p = tTwoSided(t, at.df);
  const half = tQuantile(1 - (1 - level) / 2, at.df) * se;
  return { diff, se, df: at.df, t, p, lo: diff - half, hi: diff + half, components: c };
}

/** The smallest true |Δ| detected with `power` at level `alpha` with `starts` starts (each with today's runs). */
export function startLevelMde(c: StartComponents, starts: number, alpha: number, power = 0.8): number | null {
  return mdeAt(startVarianceAt(c, starts), alpha, power);
}

/** The fewest warm starts (each with as many runs as today's) at which the MDE is at most |diff|; null when none up to `max`. */
export function startsNeeded(c: StartComponents, diff: number, alpha: number, power = 0.8, max = 1000): number | null {
  return fewestReaching(diff, (k) => startLevelMde(c, k, alpha, power), max);
}
