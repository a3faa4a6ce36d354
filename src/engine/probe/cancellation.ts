// The cancellation hypothesis (arXiv 2605.08666): GRPO's update, though it gives every token of an episode one
// advantage, raises the tokens worth more and lowers those worth less, because their gradients interfere. Tested on
// the update's realized credit (log π_new − log π_old per token, logging.realized_credit): within an episode's sign,
// do the tokens the update boosted carry more Monte Carlo credit δ̂ than those it suppressed?
//
// That raw difference has a mechanical part. |δ_t| ≤ (1 − π(y_t))·R_max: only an uncertain token can carry much value,
// and in an episode that ended well the uncertain tokens' δ̂ lean positive. An update that moves each token by its
// uncertainty alone, knowing nothing of value, then "sorts tokens by value". So the report carries:
// - the raw within-sign differences (within_positive, within_negative), as before;
// - the control: the same split where "boosted" means what a credit knowing only 1 − π would boost, the tokens whose
//   1 − π is above their episode's mean where A > 0 (below it where A < 0: A·(1 − π_t − mean 1 − π) > 0);
// - the controlled test (stratified_positive, stratified_negative): the coefficient of [realized > 0] in a regression of
//   δ̂ on it with a fixed effect per episode (the comparison stays within an episode, as the raw one does) and per
//   quintile of 1 − π (within the units of that sign), and 1 − π itself as a covariate (a slope within the strata),
//   with standard errors clustered by prompt. It compares boosted and suppressed tokens of one episode and of like
//   uncertainty. A dependence of δ̂ on 1 − π that is linear, or a step between quintiles, is removed whole; a curve
//   within a quintile would leave a remainder.
import type { CancellationReport, ClusteredEstimate, Estimate } from '../../protocol/analysis';
import { clusteredOls, demeanWithin } from '../core/clustered_ols';
import { percentileLinear } from '../core/stats';
import { clusteredMean } from './clustered_mean';
import type { ProbedEpisode } from './accuracy';

/** Strata of 1 − π for the controlled test: quintiles. */
export const UNCERTAINTY_STRATA = 5;

interface Unit {
  t: number;
  delta: number;
}

/** Per-token δ̂ of an episode's units, token by token (a unit's δ̂ on its first token; --positions every: one each). */
function tokenDeltas(ep: ProbedEpisode): Unit[] {
  const out: Unit[] = [];
  for (let k = 0; k + 1 < ep.positions.length; k++)
    if (ep.positions[k + 1] === ep.positions[k] + 1) out.push({ t: ep.positions[k], delta: ep.values[k + 1] - ep.values[k] });
  return out;
}

/** Mean δ̂ of the tokens where `sign(t)` > 0 minus where it is < 0; null when either side is empty. */
function splitDiff(units: Unit[], sign: (t: number) => number): number | null {
  let up = 0;
  let nUp = 0;
  let down = 0;
  let nDown = 0;
  for (const u of units) {
    const s = sign(u.t);
    if (s > 0) {
      up += u.delta;
      nUp++;
    } else if (s < 0) {
      down += u.delta;
      nDown++;
    }
  }
  return nUp && nDown ? up / nUp - down / nDown : null;
}

const uncertainty = (ep: ProbedEpisode, t: number) => 1 - Math.exp(ep.logprobs![t]);

/** What a credit that knows only 1 − π would do to token t: A·(1 − π_t − the episode's mean 1 − π). */
function controlSign(ep: ProbedEpisode): (t: number) => number {
  const n = ep.logprobs!.length;
  let m = 0;
  for (let t = 0; t < n; t++) m += uncertainty(ep, t);
  m /= n;
  return (t) => Math.sign(ep.advantage ?? 0) * (uncertainty(ep, t) - m);
}

/**
 * The coefficient of [realized > 0] on δ̂, within episodes of sign `sign`, within quintiles of 1 − π and beside 1 − π's
 * slope, clustered by
 * prompt; null where it cannot be estimated (no logprobs, fewer than 2 prompts, or boosted and suppressed tokens never
 * share an episode and a stratum).
 */
export function stratifiedEffect(per: readonly { e: ProbedEpisode; units: Unit[] }[], sign: number): ClusteredEstimate | null {
  const rows: { y: number; boosted: number; u: number; episode: number; prompt: number }[] = [];
  per.forEach(({ e, units }, i) => {
    if (Math.sign(e.advantage ?? 0) !== sign || !e.logprobs) return;
    for (const u of units) {
      const r = e.realized![u.t];
      if (r === 0 || !Number.isFinite(r)) continue;
      rows.push({ y: u.delta, boosted: r > 0 ? 1 : 0, u: uncertainty(e, u.t), episode: i, prompt: e.prompt });
    }
  });
  if (rows.length < 3) return null;
  const us = rows.map((r) => r.u);
  const cuts = Array.from({ length: UNCERTAINTY_STRATA - 1 }, (_, q) => percentileLinear(us, (100 * (q + 1)) / UNCERTAINTY_STRATA));
  const stratum = (u: number) => cuts.filter((c) => u > c).length;
  // a dummy for every stratum that holds a unit, but the lowest such (the reference)
  const used = [...new Set(rows.map((r) => stratum(r.u)))].sort((a, b) => a - b).slice(1);
  const x = rows.map((r) => [r.boosted, r.u, ...used.map((s) => (stratum(r.u) === s ? 1 : 0))]);
  const d = demeanWithin(
    rows.map((r) => r.y),
    x,
    rows.map((r) => r.episode),
  );
  // a stratum dummy that is constant within every episode is absorbed by the episodes' effects: drop it, or X'X is singular
  const keep = [0, 1, ...used.map((_, j) => j + 2).filter((j) => d.x.some((row) => Math.abs(row[j]) > 1e-12))];
  if (!d.x.some((row) => Math.abs(row[0]) > 1e-12)) return null;
  const fit = clusteredOls(
    d.y,
    d.x.map((row) => keep.map((j) => row[j])),
    rows.map((r) => r.prompt),
  );
  if (!fit) return null;
  const b = fit.coefficients[0];
  return { mean: b.estimate, lo: b.lo, hi: b.hi, n: fit.rows, p: b.p, prompts: fit.clusters };
}

/**
 * The cancellation test and its 1 − π controls, over the probed episodes; null without a realized column. "Over all"
 * and the split by Â's sign pool each prompt's episodes (Â's sign differs between episodes, not within).
 */
export function cancellation(episodes: readonly ProbedEpisode[]): CancellationReport | null {
  if (!episodes.length || episodes.some((e) => !e.realized)) return null;
  const prompts = episodes.map((e) => e.prompt);
  const per = episodes.map((e) => ({ e, units: tokenDeltas(e) }));
  const within = (sign: number, by: (e: ProbedEpisode) => ((t: number) => number) | null): Estimate =>
    clusteredMean(
      per.map(({ e, units }) => {
        const s = Math.sign(e.advantage ?? 0) === sign ? by(e) : null;
        return s ? splitDiff(units, s) : null;
      }),
      prompts,
    );
  const realized = (e: ProbedEpisode) => (t: number) => e.realized![t];
  const control = (e: ProbedEpisode) => (e.logprobs ? controlSign(e) : null);
  // over all: each prompt's tokens pooled, one value per prompt
  const byPrompt = new Map<number, { realized: number; adv: number; delta: number }[]>();
  for (const { e, units } of per) {
    let rows = byPrompt.get(e.prompt);
    if (!rows) byPrompt.set(e.prompt, (rows = []));
    for (const u of units) rows.push({ realized: e.realized![u.t], adv: e.ownAdv?.[u.t] ?? 0, delta: u.delta });
  }
  const pooled = (key: 'realized' | 'adv') => {
    const keys = [...byPrompt.keys()];
    return clusteredMean(
      keys.map((p) => {
        const rows = byPrompt.get(p)!;
        return splitDiff(
          rows.map((r, t) => ({ t, delta: r.delta })),
          (t) => rows[t][key],
        );
      }),
      keys,
    );
  };
  const hasLogprobs = episodes.every((e) => e.logprobs);
  return {
    within_positive: within(1, realized),
    within_negative: within(-1, realized),
    realized: pooled('realized'),
    advantage: pooled('adv'),
    ...(hasLogprobs
      ? {
          control_positive: within(1, control),
          control_negative: within(-1, control),
          stratified_positive: stratifiedEffect(per, 1),
          stratified_negative: stratifiedEffect(per, -1),
        }
      : {}),
  };
}
