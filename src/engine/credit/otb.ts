// veRL's Optimal Token Baseline (`algorithm.adv_estimator: optimal_token_baseline`, verl core_algos.py, volcengine/verl/docs/algo/otb.md):
// a baseline per position instead of per group. For sequence i of a group and its token t,
//   W_{i,t} = Σ_{j≤t} (1 − 2π_{i,j} + Σ_v π_{i,j,v}²)     (the "realized energy": the logit-gradient proxy, summed)
//   B_t     = Σ_k r_k·W_{k,t} / (Σ_k W_{k,t} + 1e-8)       over the group's sequences still alive at t
//   Â_{i,t} = r_i − B_t
// with r the outcome reward (the return-to-go of an outcome-only task). As in veRL, the rewards are not scaled by the
// group's std (grpo.scale_rewards does not apply), and with handle_zero_tail the longest sequence's tokens past the
// second-longest one get baseline 0 (alone at those positions, the baseline would be its own reward and Â 0).
// π and Σπ² are the sampler's, at the sampling temperature (the old policy veRL reads them from).
import { PREPARED_CREDIT, tokenAdvantageBatch, type CreditStrategy, type EpisodeView, type PrepareContext, type Prepared } from './types';

export interface OtbInput {
  reward: number;
  logprobs: number[];
  probSq: number[];
}

/** Â per token of one group's sequences. */
export function otbAdvantages(group: OtbInput[], handleZeroTail: boolean, epsilon = 1e-8): number[][] {
  const W = group.map((s) => {
    let acc = 0;
    return s.logprobs.map((lp, t) => (acc += 1 - 2 * Math.exp(lp) + s.probSq[t]));
  });
  const lengths = group.map((s) => s.logprobs.length);
  const T = Math.max(0, ...lengths);
  const B = new Float64Array(T);
  for (let t = 0; t < T; t++) {
    let num = 0;
    let den = 0;
    group.forEach((s, k) => {
      if (t >= lengths[k]) return;
      num += s.reward * W[k][t];
      den += W[k][t];
    });
    B[t] = num / (den + epsilon);
  }
  // a lone longest sequence past the second-longest: baseline 0 there
  let tailOf = -1;
  let tailFrom = T;
  if (handleZeroTail && group.length > 1) {
    const sorted = [...lengths].sort((a, b) => a - b);
    const max = sorted[sorted.length - 1];
    const second = sorted[sorted.length - 2];
    if (max > second && lengths.filter((l) => l === max).length === 1) {
      tailOf = lengths.indexOf(max);
      tailFrom = second;
    }
  }
  return group.map((s, i) => s.logprobs.map((_, t) => s.reward - (i === tailOf && t >= tailFrom ? 0 : B[t])));
}

async function prepare(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared> {
  const missing = episodes.find((e) => !e.probSq);
  if (missing) throw new Error('otb needs Σπ² of every token (the sampler records it; an imported run needs --model to score it)');
  const groups = new Map<number, EpisodeView[]>();
  for (const e of episodes) groups.set(e.group, [...(groups.get(e.group) ?? []), e]);
  const adv: number[][] = new Array(episodes.length);
  const zeroTail = ctx.cfg.credit.otb.handle_zero_tail;
  for (const members of groups.values()) {
    const a = otbAdvantages(
      members.map((e) => ({ reward: e.reward.total, logprobs: e.logprobs, probSq: e.probSq! })),
      zeroTail,
    );
    members.forEach((e, k) => (adv[e.index] = a[k]));
  }
  return { batch: tokenAdvantageBatch(adv, episodes) };
}

export const otb: CreditStrategy = { name: 'otb', rowLocal: true, prepare, ...PREPARED_CREDIT };
