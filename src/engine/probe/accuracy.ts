// Credit accuracy: how well a strategy's per-token effective advantages Â put credit where the Monte Carlo
// values say it belongs, and how much of that the probe's own noise could produce. Pure numbers in and out.
//
// The unit of comparison is the stretch between two consecutive probed positions a < b of an episode: its Monte Carlo
// credit is δ = V_b − V_a, its credit under a strategy Â = Σ_{a ≤ t < b} Â_t. With --positions every each unit is one
// token and δ is δ_t = V_{t+1} − V_t; segments and cutpoints give longer units, scored the same way.
//
// The probe's δ̂ is noisy: at M = 8 most are exactly 0, and |δ̂| is biased upward by the noise in proportion to the
// token's uncertainty, which any weight growing with 1 − π or with entropy then "matches". So the probe splits its M
// continuations into two independent halves (δ̂ᴬ, δ̂ᴮ) and scores against what noise cannot fake:
// - lift, the headline: Σ_u p_u·δ̂ᴬ_u·δ̂ᴮ_u with p_u = |Â_u| / Σ|Â| (credit_delta2: the δ² where the credit puts its
//   weight) minus the same with uniform credit's weights (uniform_delta2), per episode. The halves' errors are
//   independent, so E[δ̂ᴬ·δ̂ᴮ] = δ² and, being linear in the products, the score is unbiased for its noise-free value
//   at any M: noise widens its interval and never moves its centre. lift_excess is a strategy's lift minus the best
//   trivial baseline's, episode by episode;
// - spearman_unbiased: the rank correlation of |Â| with δ̂ᴬ·δ̂ᴮ. Its target is noise-free, but ranking against a noisy
//   target attenuates it, by an amount that depends on where a credit puts its weight (a perfect credit scores well
//   below 1 at small M), so it is a secondary column, labelled attenuated;
// - placebo: the same measure against |δ̂ᴬ − δ̂ᴮ|, pure estimation error: a score there is noise's;
// - baselines: trivial credit A·w with w = 1 − π(y_t) (|δ_t| ≤ (1 − π(y_t))·R_max bounds it mechanically), the entropy
//   H_t, or the position t, scored the same way; excess: a strategy's score minus the best baseline's, episode by
//   episode, with its interval;
// - reliability: the split-half correlation of δ̂ᴬ and δ̂ᴮ and its Spearman–Brown value for all M, the ceiling of a
//   correlation; the lift's ceiling is an oracle credit's lift, cross-fitted on the halves (ceiling.ts).
// Per episode, also: spearman of |Â| and |δ̂| (biased, kept for continuity), decisive_share (the share of Σ|Â| on the
// top 10 % units by |δ̂|, ⌈U/10⌉ units, ties to the earlier; uniform_share what uniform credit puts there),
// sign_agreement (Σ|δ̂|·[Â·δ̂ > 0] / Σ|δ̂|), and QVal's Pearson r and Kendall τ-b of the signed Â and δ̂ and a sign test
// over all units. A rank measure is undefined, and left out, when either side is constant or the episode has fewer than
// 3 units. Every row is scored on one episode set: the probed episodes whose advantage A ≠ 0 (an episode of a group whose
// rewards were all equal carries no credit under GRPO; a strategy that still gives it some is not scored on more
// episodes than the others). Episodes are averaged with a 95 % interval over prompts: a cluster bootstrap from 10
// prompts up, a t interval over the prompts' means below that (with a warning: few clusters).
import type { AccuracyReport, Estimate, ProbeReliability, StrategyAccuracy } from '../../protocol/analysis';
import { binomialTwoSided, clusteredSignTest } from './sign_test';
import { mean, meanVar } from '../core/stats';
import { cancellation } from './cancellation';
import { oracleLift } from './ceiling';
import { clusteredMean, definedByPrompt, FEW_PROMPTS } from './clustered_mean';

export type { AccuracyReport, Estimate, StrategyAccuracy };

export interface ProbedEpisode {
  /** the prompt: the cluster */
  prompt: number;
  /** completion length n */
  n: number;
  /** probed positions, ascending, with their values V */
  positions: number[];
  values: number[];
  /** the two independent halves' values at the same positions (absent: a probe that kept none) */
  valuesA?: (number | null)[];
  valuesB?: (number | null)[];
  /** each half's variance of V̂ at the same positions (s²/m; absent: an older probe), for the oracle's ceiling */
  varsA?: (number | null)[];
  varsB?: (number | null)[];
  /** the episode's advantage A under the run (the episode set is A ≠ 0); absent: every episode is scored */
  advantage?: number;
  /** per completion token, for the trivial baselines: the sampled token's log-prob and the entropy */
  logprobs?: number[];
  entropies?: number[];
  /** per completion token: what the step's update did to its log-prob, and the run's own Â (the cancellation test) */
  realized?: number[];
  ownAdv?: number[];
}

export interface EpisodeScores {
  spearman: number | null;
  decisive_share: number | null;
  uniform_share: number | null;
  sign_agreement: number | null;
  spearman_unbiased: number | null;
  placebo: number | null;
  /** Σ p_u·δ̂ᴬ_u·δ̂ᴮ_u with p = |Â|/Σ|Â|, uniform's with p = the unit's tokens / n, and their difference (null: no halves or no Â) */
  credit_delta2: number | null;
  uniform_delta2: number | null;
  lift: number | null;
  pearson: number | null;
  kendall: number | null;
  /** units where Â and δ̂ are both non-zero, and how many of them agree in sign */
  sign_units: number;
  sign_agree: number;
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

/** The product-moment correlation; null when either side is constant. */
function correlation(x: readonly number[], y: readonly number[]): number | null {
  const n = x.length;
  const mx = x.reduce((a, b) => a + b, 0) / n;
  const my = y.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) ** 2;
    syy += (y[i] - my) ** 2;
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : null;
}

/** Spearman's ρ: Pearson's correlation of the average ranks; null when either side is constant. */
export function spearman(x: readonly number[], y: readonly number[]): number | null {
  return correlation(ranks(x), ranks(y));
}

/** Pearson's r; null when either side is constant or there are fewer than 3 values. */
export function pearson(x: readonly number[], y: readonly number[]): number | null {
  return x.length < 3 ? null : correlation(x, y);
}

/** Kendall's τ-b (ties on either side corrected for, as scipy.stats.kendalltau); null when either side is constant. */
export function kendallTauB(x: readonly number[], y: readonly number[]): number | null {
  const n = x.length;
  if (n < 3) return null;
  let concordant = 0;
  let discordant = 0;
  let tieX = 0;
  let tieY = 0;
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++) {
      const dx = Math.sign(x[i] - x[j]);
      const dy = Math.sign(y[i] - y[j]);
      if (dx === 0 && dy === 0) continue;
      if (dx === 0) tieX++;
      else if (dy === 0) tieY++;
      else if (dx === dy) concordant++;
      else discordant++;
    }
  const den = Math.sqrt((concordant + discordant + tieX) * (concordant + discordant + tieY));
  return den > 0 ? (concordant - discordant) / den : null;
}

/** The measures of one episode for one strategy's Â (one value per completion token). */
export function episodeScores(ep: ProbedEpisode, effAdv: readonly number[]): EpisodeScores {
  const units: { delta: number; adv: number; len: number; dA: number | null; dB: number | null }[] = [];
  for (let k = 0; k + 1 < ep.positions.length; k++) {
    const a = ep.positions[k];
    const b = ep.positions[k + 1];
    let adv = 0;
    for (let t = a; t < b; t++) adv += effAdv[t];
    const half = (v: (number | null)[] | undefined) => (v && v[k] !== null && v[k + 1] !== null ? v[k + 1]! - v[k]! : null);
    units.push({ delta: ep.values[k + 1] - ep.values[k], adv, len: b - a, dA: half(ep.valuesA), dB: half(ep.valuesB) });
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
  // the halves: only where every unit has both (a probe that kept them has them everywhere)
  const halves = units.length >= 3 && units.every((u) => u.dA !== null && u.dB !== null);
  const unbiased = halves
    ? spearman(
        absA,
        units.map((u) => u.dA! * u.dB!),
      )
    : null;
  const placebo = halves
    ? spearman(
        absA,
        units.map((u) => Math.abs(u.dA! - u.dB!)),
      )
    : null;
  // the linear score: each unit's δ̂ᴬ·δ̂ᴮ weighed by the credit's share of |Â| and by uniform credit's share of tokens
  const paired = units.length > 0 && units.every((u) => u.dA !== null && u.dB !== null);
  const tokens = units.reduce((a, u) => a + u.len, 0);
  const uniformD2 = paired && tokens > 0 ? units.reduce((a, u) => a + (u.len / tokens) * u.dA! * u.dB!, 0) : null;
  const creditD2 = paired && sumA > 0 ? units.reduce((a, u, i) => a + (absA[i] / sumA) * u.dA! * u.dB!, 0) : null;
  const signedA = units.map((u) => u.adv);
  const signedD = units.map((u) => u.delta);
  let signUnits = 0;
  let signAgree = 0;
  for (const u of units)
    if (u.adv !== 0 && u.delta !== 0) {
      signUnits++;
      if (u.adv * u.delta > 0) signAgree++;
    }
  return {
    spearman: rho,
    decisive_share: decisive,
    uniform_share: uniform,
    sign_agreement: sign,
    spearman_unbiased: unbiased,
    placebo,
    credit_delta2: creditD2,
    uniform_delta2: uniformD2,
    lift: creditD2 === null || uniformD2 === null ? null : creditD2 - uniformD2,
    pearson: pearson(signedA, signedD),
    kendall: kendallTauB(signedA, signedD),
    sign_units: signUnits,
    sign_agree: signAgree,
  };
}

/** The sample standard deviation of the per-prompt means of `values` (null where undefined); null under 2 prompts. */
export function promptSd(values: readonly (number | null)[], prompts: readonly number[]): number | null {
  const means = [...definedByPrompt(values, prompts).values()].map(mean);
  return means.length < 2 ? null : Math.sqrt(meanVar(means).var);
}

/** One row of the report from its per-episode scores. */
function rowOf(scores: EpisodeScores[], prompts: number[]): StrategyAccuracy {
  const est = (f: (s: EpisodeScores) => number | null) => clusteredMean(scores.map(f), prompts);
  const units = scores.reduce((a, s) => a + s.sign_units, 0);
  const agree = scores.reduce((a, s) => a + s.sign_agree, 0);
  return {
    spearman: est((s) => s.spearman),
    decisive_share: est((s) => s.decisive_share),
    sign_agreement: est((s) => s.sign_agreement),
    spearman_unbiased: est((s) => s.spearman_unbiased),
    placebo: est((s) => s.placebo),
    credit_delta2: est((s) => s.credit_delta2),
    lift: est((s) => s.lift),
    pearson: est((s) => s.pearson),
    kendall: est((s) => s.kendall),
    sign_test: { agree, units, p: binomialTwoSided(agree, units), ...clusteredSignTest(scores, prompts) },
  };
}

/** Trivial credit A·w per token: w = 1 − π(y_t), the entropy, or the position t + 1. */
export const BASELINES: Record<string, (ep: ProbedEpisode, t: number) => number | null> = {
  one_minus_p: (ep, t) => (ep.logprobs ? 1 - Math.exp(ep.logprobs[t]) : null),
  entropy: (ep, t) => (ep.entropies ? ep.entropies[t] : null),
  position: (_, t) => t + 1,
};

/** The split-half reliability of δ̂ over the episode set. */
export function reliability(episodes: readonly ProbedEpisode[]): ProbeReliability | null {
  const a: number[] = [];
  const b: number[] = [];
  const absRank: (number | null)[] = [];
  let zeros = 0;
  let all = 0;
  for (const ep of episodes) {
    const dA: number[] = [];
    const dB: number[] = [];
    for (let k = 0; k + 1 < ep.positions.length; k++) {
      all++;
      if (ep.values[k + 1] - ep.values[k] === 0) zeros++;
      const va = ep.valuesA;
      const vb = ep.valuesB;
      if (!va || !vb || va[k] === null || va[k + 1] === null || vb[k] === null || vb[k + 1] === null) continue;
      dA.push(va[k + 1]! - va[k]!);
      dB.push(vb[k + 1]! - vb[k]!);
    }
    a.push(...dA);
    b.push(...dB);
    absRank.push(dA.length >= 3 ? spearman(dA.map(Math.abs), dB.map(Math.abs)) : null);
  }
  if (!a.length) return null;
  const r = pearson(a, b);
  return {
    half: r,
    full: r === null ? null : (2 * r) / (1 + r),
    abs_rank_half: clusteredMean(
      absRank,
      episodes.map((e) => e.prompt),
    ),
    units: a.length,
    zero_share: all ? zeros / all : null,
  };
}

/** Why no episode scores a strategy: what its Â is within each episode (nothing to rank, or nothing to weigh). */
function unscorable(rows: readonly (readonly number[])[]): string {
  let zero = 0;
  let flat = 0;
  let bad = 0;
  for (const r of rows) {
    if (r.some((x) => !Number.isFinite(x))) bad++;
    else if (r.every((x) => x === 0)) zero++;
    else flat++;
  }
  const n = rows.length;
  const of = (k: number) => (k === n ? `all ${n}` : `${k} of the ${n}`);
  const parts = [
    zero ? `0 at every token in ${of(zero)} probed episodes with A ≠ 0` : '',
    flat ? `one value at every token in ${of(flat)}` : '',
    bad ? `not finite in ${of(bad)}` : '',
  ].filter(Boolean);
  return `no probed episode can score it: its Â is ${parts.join('; ')}, so it weighs and ranks no token`;
}

/** A strategy's per-episode `key` minus the best baseline's by that key's mean (null where either is undefined). */
function excessOver(
  scores: EpisodeScores[],
  baselines: Record<string, StrategyAccuracy>,
  basePer: Record<string, EpisodeScores[]>,
  key: 'spearman_unbiased' | 'lift',
): { diffs: (number | null)[]; over: string | null } {
  const mean = (b: StrategyAccuracy) => b[key]?.mean;
  const over =
    Object.entries(baselines)
      .filter(([, b]) => typeof mean(b) === 'number')
      .sort(([, x], [, y]) => mean(y)! - mean(x)!)[0]?.[0] ?? null;
  const diffs = scores.map((s, j) => {
    const base = over ? basePer[over][j][key] : null;
    return s[key] === null || base === null ? null : s[key]! - base;
  });
  return { diffs, over };
}

/**
 * Every strategy's accuracy over the probed episodes whose advantage is not 0 (one set for every row), the trivial
 * baselines' on the same set, each strategy's excess over the best baseline, and the probe's split-half reliability.
 * `effAdv[name][i]` is episode i's Â under that strategy.
 */
export function creditAccuracy(all: readonly ProbedEpisode[], effAdv: Record<string, readonly (readonly number[])[]>): AccuracyReport {
  const keep = all.map((e, i) => i).filter((i) => all[i].advantage === undefined || all[i].advantage !== 0);
  const episodes = keep.map((i) => all[i]);
  const prompts = episodes.map((e) => e.prompt);
  const nPrompts = new Set(prompts).size;
  const scoresOf = (rows: readonly (readonly number[])[]) => keep.map((i, j) => episodeScores(episodes[j], rows[i]));
  const accuracy: Record<string, StrategyAccuracy> = {};
  const perEpisode: Record<string, EpisodeScores[]> = {};
  let uniform: (number | null)[] = [];
  let uniformD2: (number | null)[] = [];
  const left: string[] = [];
  for (const [name, rows] of Object.entries(effAdv)) {
    const scores = scoresOf(rows);
    // a row no episode could score is left out, with the reason, rather than shown as an empty row with n = 0
    if (episodes.length && scores.every((x) => x.spearman === null && x.decisive_share === null)) {
      left.push(`${name}: left out, ${unscorable(keep.map((i) => rows[i]))}`);
      continue;
    }
    perEpisode[name] = scores;
    accuracy[name] = rowOf(scores, prompts);
    uniform = scores.map((s) => s.uniform_share);
    uniformD2 = scores.map((s) => s.uniform_delta2);
  }
  const baselines: Record<string, StrategyAccuracy> = {};
  const basePer: Record<string, EpisodeScores[]> = {};
  for (const [name, w] of Object.entries(BASELINES)) {
    if (episodes.some((e) => e.n > 0 && w(e, 0) === null)) continue;
    const scores = episodes.map((e) =>
      episodeScores(
        e,
        Array.from({ length: e.n }, (_, t) => (e.advantage ?? 1) * (w(e, t) ?? 0)),
      ),
    );
    basePer[name] = scores;
    baselines[name] = rowOf(scores, prompts);
  }
  // each strategy's excess over the best baseline, episode by episode (the same episodes on both sides): by the rank
  // score (secondary, attenuated) and by the lift (the headline, which --plan sizes a probe for; a difference of linear
  // scores stays unbiased)
  for (const [name, scores] of Object.entries(perEpisode)) {
    const rank = excessOver(scores, baselines, basePer, 'spearman_unbiased');
    accuracy[name].excess = { ...clusteredMean(rank.diffs, prompts), over: rank.over, prompt_sd: promptSd(rank.diffs, prompts) };
    const lift = excessOver(scores, baselines, basePer, 'lift');
    accuracy[name].lift_excess = { ...clusteredMean(lift.diffs, prompts), over: lift.over, prompt_sd: promptSd(lift.diffs, prompts) };
  }
  const rel = reliability(episodes);
  const warnings: string[] = [...left];
  if (nPrompts < FEW_PROMPTS)
    warnings.push(
      `${nPrompts} prompt${nPrompts === 1 ? '' : 's'}: the intervals are t intervals over the prompts' means; below ${FEW_PROMPTS} clusters neither they nor a bootstrap can be trusted far`,
    );
  if (!rel) warnings.push('the probe kept no independent halves (an older table): no reliability, placebo or noise-unbiased score; probe again with --replace');
  else if (rel.full !== null && rel.full < 0.5)
    warnings.push(
      `the probe's split-half reliability is ${rel.full.toFixed(2)}: most of δ̂ is noise at this M, and no strategy can correlate with δ̂ beyond √${rel.full.toFixed(2)} = ${Math.sqrt(Math.max(0, rel.full)).toFixed(2)}`,
    );
  return {
    accuracy,
    uniform_share: clusteredMean(uniform, prompts),
    uniform_delta2: clusteredMean(uniformD2, prompts),
    episodes: episodes.length,
    prompts: nPrompts,
    baselines,
    reliability: rel,
    warnings,
    cancellation: cancellation(episodes),
    ...(episodes.some((e) => e.varsA) ? { ceiling: clusteredMean(episodes.map(oracleLift), prompts) } : {}),
  };
}

export { binomialTwoSided, clusteredSignTest } from './sign_test';
