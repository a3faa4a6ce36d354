// GRPO math on plain arrays (DESIGN §4, §6). Training calls these same functions: the model's per-token
// log-probs are read out, the loss and dLoss/dlogprob are computed here, and the gradient is pushed back
// through the network as sum(logprob ⊙ stopgrad(dLoss/dlogprob)) — so a test of these functions tests training.

export type ScaleRewards = 'group' | 'batch' | 'none';
export type LossAgg = 'token_mean' | 'seq_mean_token_mean' | 'seq_mean_token_sum_norm';

export { meanStd } from '../core/stats';
import { meanStd } from '../core/stats';

/**
 * Episode advantages. Rewards are laid out group after group (groupSize consecutive episodes share a prompt).
 * group: (r − mean_g)/(std_g + 1e-4) as GRPO-Zero and TRL; batch: the same with the whole batch's mean and std
 * (DESIGN §4 contract); none: r − mean_g (Dr. GRPO's unscaled form).
 */
export function advantages(rewards: number[], groupSize: number, scale: ScaleRewards): number[] {
  if (groupSize < 1 || rewards.length % groupSize !== 0) {
    throw new Error(`advantages: ${rewards.length} rewards do not split into groups of ${groupSize}`);
  }
  const out = new Array<number>(rewards.length);
  if (scale === 'batch') {
    const { mean, std } = meanStd(rewards);
    for (let i = 0; i < rewards.length; i++) out[i] = (rewards[i] - mean) / (std + 1e-4);
    return out;
  }
  for (let g = 0; g < rewards.length; g += groupSize) {
    const { mean, std } = meanStd(rewards.slice(g, g + groupSize));
    for (let i = g; i < g + groupSize; i++) {
      out[i] = scale === 'group' ? (rewards[i] - mean) / (std + 1e-4) : rewards[i] - mean;
    }
  }
  return out;
}

export interface PolicyLossInput {
  logprobs: number[][];
  oldLogprobs: number[][];
  refLogprobs?: number[][];
  /** effective advantage Â per token */
  advantages: number[][];
  mask: number[][];
}

export interface PolicyLossOptions {
  clipEps: number;
  clipEpsHigh: number;
  klBeta: number;
  lossAgg: LossAgg;
  maxNewTokens: number;
}

export interface PolicyLossResult {
  loss: number;
  /** dLoss/dlogprobs */
  grad: number[][];
  /** fraction of valid tokens whose clipped branch was taken (zero gradient) */
  clipFrac: number;
  /** mean k3 KL over valid tokens (0 without reference) */
  kl: number;
}

/** Per-token aggregation coefficients c such that loss = Σ c·loss_tok (DESIGN §4 "Aggregation"). */
export function aggregationWeights(mask: number[][], lossAgg: LossAgg, maxNewTokens: number): number[][] {
  const B = mask.length;
  if (lossAgg === 'token_mean') {
    let total = 0;
    for (const row of mask) for (const m of row) total += m;
    const c = total > 0 ? 1 / total : 0;
    return mask.map((row) => row.map((m) => m * c));
  }
  if (lossAgg === 'seq_mean_token_mean') {
    return mask.map((row) => {
      const n = row.reduce((a, m) => a + m, 0);
      return row.map((m) => (n > 0 ? m / (B * n) : 0));
    });
  }
  return mask.map((row) => row.map((m) => m / (B * maxNewTokens)));
}

export function policyLossAndGrad(x: PolicyLossInput, opts: PolicyLossOptions): PolicyLossResult {
  const c = aggregationWeights(x.mask, opts.lossAgg, opts.maxNewTokens);
  const lo = 1 - opts.clipEps;
  const hi = 1 + opts.clipEpsHigh;
  let loss = 0;
  let clipped = 0;
  let valid = 0;
  let klSum = 0;
  const grad: number[][] = [];
  for (let i = 0; i < x.logprobs.length; i++) {
    const gRow = new Array<number>(x.logprobs[i].length).fill(0);
    for (let t = 0; t < x.logprobs[i].length; t++) {
      const m = x.mask[i][t];
      if (!m) continue;
      valid++;
      const l = x.logprobs[i][t];
      const A = x.advantages[i][t];
      const ratio = Math.exp(l - x.oldLogprobs[i][t]);
      const clippedRatio = Math.min(Math.max(ratio, lo), hi);
      const unclippedTerm = ratio * A;
      const clippedTerm = clippedRatio * A;
      // −min(ρÂ, clip(ρ)Â): the unclipped branch carries the gradient unless the clipped one is strictly smaller.
      const takeClipped = clippedTerm < unclippedTerm;
      let tokLoss = -(takeClipped ? clippedTerm : unclippedTerm);
      let dl = takeClipped ? (ratio < lo || ratio > hi ? 0 : -ratio * A) : -ratio * A;
      if (takeClipped && (ratio < lo || ratio > hi)) clipped++;
      if (opts.klBeta > 0 && x.refLogprobs) {
        const d = x.refLogprobs[i][t] - l;
        const k = Math.exp(d) - d - 1; // k3 estimator (Schulman), ≥ 0
        klSum += k;
        tokLoss += opts.klBeta * k;
        dl += opts.klBeta * (1 - Math.exp(d));
      }
      loss += c[i][t] * tokLoss;
      gRow[t] = c[i][t] * dl;
    }
    grad.push(gRow);
  }
  return { loss, grad, clipFrac: valid ? clipped / valid : 0, kl: valid ? klSum / valid : 0 };
}
