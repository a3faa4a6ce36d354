// gtpo, two forms (credit.gtpo.form):
// - seed (default): seed doc 002's strategy 1 (GTPO-style entropy weighting), w_t = H_t / mean over the episode's valid
//   tokens of H, so the mean weight is 1 and a token's share of the credit is its share of the episode's entropy (linear,
//   where entropy_weighted is a softmax). An episode whose valid tokens all have zero entropy keeps w = 1.
// - gtpo: the paper's form (Tan et al., arXiv 2508.04349, "GTPO and GRPO-S"), entropy-shaped token rewards with
//   successful and failed sequences treated apart. Per group, at position t, with O+_t / O−_t the successful / failed
//   sequences still generating at t (d_t, h_t of them):
//     success i: r̃_{i,t} = α₁·r_i + α₂·d_t·H_{i,t} / Σ_{k∈O+_t} H_{k,t}
//     failure j: r̃_{j,t} = −α₁ − α₂·h_t·(1/H_{j,t}) / Σ_{k∈O−_t} (1/H_{k,t})
//   and each set's shaped rewards are standardised over its own tokens in the group, Â = (r̃ − mean)/(std + 1e-4) (sample
//   std), so a confident failure token is penalised most and an uncertain success token rewarded most. α₁ = 1, α₂ = 0.1
//   as the ports use; entropy_clip [lo, hi] clips H first (the ports' [0.2, 0.28]; null: no clip). Success is the task's.
//   What the separate standardisation (the paper's Eq. 6, as the ports read it) implies, said here because it surprises:
//   Â sums to 0 over a group's successful tokens, so about half of a correct answer's tokens are pushed down (the
//   lower-entropy ones) and the outcome itself carries no signal beyond which set a token is in. One departure, named: a
//   group whose rollouts are all correct or all wrong gets Â = 0. The paper trains on DAPO's dynamically sampled batches,
//   where such groups never reach the loss; standardising one set alone would give its tokens |Â| up to about 6 from
//   entropy differences only.
import {
  preparedRows,
  scaledAdvantages,
  validMask,
  type CreditStrategy,
  type EpisodeView,
  type PrepareContext,
  type Prepared,
  tokenAdvantageBatch,
} from './types';

export function gtpoSeedWeights(entropies: number[], mask: number[]): number[] {
  let sum = 0;
  let n = 0;
  for (let t = 0; t < mask.length; t++)
    if (mask[t]) {
      sum += entropies[t];
      n++;
    }
  const mean = n ? sum / n : 0;
  return mask.map((m, t) => (m ? (mean > 0 ? entropies[t] / mean : 1) : 0));
}

export interface GtpoSeq {
  success: boolean;
  reward: number;
  entropies: number[];
}

/** The paper form's Â per token of one group's sequences. */
export function gtpoPaperAdvantages(group: GtpoSeq[], p: { alpha1: number; alpha2: number; entropyClip: [number, number] | null }): number[][] {
  const H = group.map((s) => s.entropies.map((h) => (p.entropyClip ? Math.min(p.entropyClip[1], Math.max(p.entropyClip[0], h)) : h)));
  const T = Math.max(0, ...group.map((s) => s.entropies.length));
  const shaped = group.map((s) => new Array<number>(s.entropies.length).fill(0));
  for (let t = 0; t < T; t++) {
    const alive = group.map((s, i) => i).filter((i) => t < group[i].entropies.length);
    const pos = alive.filter((i) => group[i].success);
    const neg = alive.filter((i) => !group[i].success);
    const sumH = pos.reduce((a, i) => a + H[i][t], 0);
    const sumInv = neg.reduce((a, i) => a + 1 / Math.max(H[i][t], 1e-8), 0);
    for (const i of pos) shaped[i][t] = p.alpha1 * group[i].reward + (sumH > 0 ? (p.alpha2 * pos.length * H[i][t]) / sumH : p.alpha2);
    for (const j of neg) shaped[j][t] = -p.alpha1 - (p.alpha2 * neg.length * (1 / Math.max(H[j][t], 1e-8))) / sumInv;
  }
  const out = group.map((s) => new Array<number>(s.entropies.length).fill(0));
  if (group.every((s) => s.success) || group.every((s) => !s.success)) return out;
  for (const success of [true, false]) {
    const members = group.map((_, i) => i).filter((i) => group[i].success === success);
    const vals = members.flatMap((i) => shaped[i]);
    if (!vals.length) continue;
    const mean = vals.reduce((a, b) => a + b, 0) / vals.length;
    const std = vals.length > 1 ? Math.sqrt(vals.reduce((a, v) => a + (v - mean) ** 2, 0) / (vals.length - 1)) : 0;
    for (const i of members) out[i] = shaped[i].map((v) => (v - mean) / (std + 1e-4));
  }
  return out;
}

async function prepare(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared> {
  const g = ctx.cfg.credit.gtpo;
  if (g.form === 'seed') return {};
  const groups = new Map<number, EpisodeView[]>();
  for (const e of episodes) groups.set(e.group, [...(groups.get(e.group) ?? []), e]);
  const adv: number[][] = new Array(episodes.length);
  for (const members of groups.values()) {
    const a = gtpoPaperAdvantages(
      members.map((e) => ({ success: e.success, reward: e.reward.total, entropies: e.entropies })),
      { alpha1: g.alpha1, alpha2: g.alpha2, entropyClip: g.entropy_clip as [number, number] | null },
    );
    members.forEach((e, k) => (adv[e.index] = a[k]));
  }
  return { batch: tokenAdvantageBatch(adv, episodes) };
}

export const gtpo: CreditStrategy = {
  name: 'gtpo',
  rowLocal: true,

  prepare,
  weights: (batch) => (batch.tokenWeights ? preparedRows(batch, 'tokenWeights') : validMask(batch).map((row, i) => gtpoSeedWeights(batch.entropies[i], row))),
  effectiveAdvantages: (batch, adv, params) =>
    batch.tokenAdvantages ? preparedRows(batch, 'tokenAdvantages') : scaledAdvantages(batch, adv, gtpo.weights(batch, params)),
};
