// GRPO math on plain arrays (design.md#semantics, #library-api). Training calls these same functions: the model's per-token
// log-probs are read out, the loss and dLoss/dlogprob are computed here, and the gradient is pushed back
// through the network as sum(logprob ⊙ stopgrad(dLoss/dlogprob)) — so a test of these functions tests training.

import { lossSpec, type PolicyLoss } from '../losses/catalog';
import type { TokenTermInput } from '../losses/types';
import type { CispoClip } from '../losses/cispo';

export type { PolicyLoss } from '../losses/catalog';
export type { CispoClip } from '../losses/cispo';
export type LossAgg = 'token_mean' | 'seq_mean_token_mean' | 'seq_mean_token_sum_norm';
/** token: one ratio per token; sequence: GSPO's s_i = exp(mean_t log ρ_{i,t}), one per sequence (TRL's key). */
export type ImportanceSamplingLevel = 'token' | 'sequence';

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
  /**
   * The aggregation coefficients c of these rows when they are a slice of a larger batch (a micro-batch): c depends on
   * the whole batch's mask (token_mean divides by all its tokens), so the caller takes them from aggregationWeights on
   * the whole batch. Default: aggregationWeights of x.mask.
   */
  aggregation?: number[][];
  /** the loss variant (losses/catalog.ts); default ppo */
  policyLoss?: PolicyLoss;
  /** default token */
  importanceSamplingLevel?: ImportanceSamplingLevel;
  /** the variant's own options by their grpo key (cispo_clip) */
  lossOptions?: Record<string, unknown>;
  /** CISPO's weight (grpo.cispo_clip), the same as lossOptions.cispo_clip; default two_sided */
  cispoClip?: CispoClip;
}

export interface PolicyLossResult {
  loss: number;
  /** dLoss/dlogprobs */
  grad: number[][];
  /** dLoss/dÂ per token: −c·ρ on the unclipped branch, −c·clip(ρ) on the clipped one (a credit head's gradient) */
  gradAdv: number[][];
  /** fraction of valid tokens whose clipped branch was taken (zero gradient) */
  clipFrac: number;
  /** mean k3 KL over valid tokens (0 without reference) */
  kl: number;
  /** per token: the importance weight that multiplied its gradient (ρ, the sequence's s, CISPO's w; 0 where cut) */
  isWeight: number[][];
  /** per token: 1 where the clip cut its gradient (ppo) or bounded its weight (cispo), else 0 */
  cut: number[][];
}

/** Per-token aggregation coefficients c such that loss = Σ c·loss_tok (design.md#semantics "Aggregation"). */
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

/**
 * The policy loss of a batch and its gradients. The per-token term is the variant's (losses/); the loop, the
 * aggregation, the KL term and GSPO's sequence-level ratio are the same for every variant and live here once.
 */
export function policyLossAndGrad(x: PolicyLossInput, opts: PolicyLossOptions): PolicyLossResult {
  const c = opts.aggregation ?? aggregationWeights(x.mask, opts.lossAgg, opts.maxNewTokens);
  const spec = lossSpec(opts.policyLoss ?? 'ppo');
  if (!spec) throw new Error(`policyLossAndGrad: no policy loss ${opts.policyLoss}`);
  const sequence = opts.importanceSamplingLevel === 'sequence';
  // GSPO-token: the sequence's ratio on every token, its gradient through the token's own log-prob (∂s_{i,t}/∂ℓ_t = s)
  const tokenSeq = spec.ratioLevel === 'sequence_token';
  if (sequence && !spec.sequence) throw new Error(`policyLossAndGrad: ${spec.name} has token-level ratios only (importanceSamplingLevel token)`);
  const options = { ...(opts.cispoClip !== undefined && { cispo_clip: opts.cispoClip }), ...opts.lossOptions };
  // one input object, its per-token fields rewritten: no allocation per token on the hot path
  const input: TokenTermInput = { ratio: 1, logprob: 0, advantage: 0, lo: 1 - opts.clipEps, hi: 1 + opts.clipEpsHigh, clipEpsHigh: opts.clipEpsHigh, options };
  let loss = 0;
  let clipped = 0;
  let valid = 0;
  let klSum = 0;
  const grad: number[][] = [];
  const gradAdv: number[][] = [];
  const isWeight: number[][] = [];
  const cutRows: number[][] = [];
  for (let i = 0; i < x.logprobs.length; i++) {
    const T = x.logprobs[i].length;
    const gRow = new Array<number>(T).fill(0);
    const aRow = new Array<number>(T).fill(0);
    const wRow = new Array<number>(T).fill(0);
    const cRow = new Array<number>(T).fill(0);
    // GSPO: one ratio for the sequence, s = exp(mean over its tokens of log ρ); ds/dℓ_u = s/n for each of its tokens (at
    // sequence level; GSPO-token's detached form passes s to each token's own log-prob instead)
    let seqRatio = 1;
    let n = 0;
    if (sequence || tokenSeq) {
      let sum = 0;
      for (let t = 0; t < T; t++) {
        if (!x.mask[i][t]) continue;
        sum += x.logprobs[i][t] - x.oldLogprobs[i][t];
        n++;
      }
      seqRatio = n ? Math.exp(sum / n) : 1;
    }
    let seqGrad = 0; // Σ_t c_t·∂(token t's term)/∂s, spread over the sequence's tokens as ·s/n
    for (let t = 0; t < T; t++) {
      if (!x.mask[i][t]) continue;
      valid++;
      const l = x.logprobs[i][t];
      const ratio = sequence || tokenSeq ? seqRatio : Math.exp(l - x.oldLogprobs[i][t]);
      input.ratio = ratio;
      input.logprob = l;
      input.advantage = x.advantages[i][t];
      const term = spec.term(input);
      let tokLoss = term.loss;
      let dl: number;
      if (sequence) {
        seqGrad += c[i][t] * term.dRatio;
        dl = 0;
      } else if (tokenSeq) dl = term.dRatio * seqRatio;
      else dl = term.dLogprob;
      if (term.cut) {
        clipped++;
        cRow[t] = 1;
      }
      wRow[t] = term.isWeight;
      aRow[t] = c[i][t] * term.dAdvantage;
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
    if (sequence && n) for (let t = 0; t < T; t++) if (x.mask[i][t]) gRow[t] += (seqGrad * seqRatio) / n;
    grad.push(gRow);
    gradAdv.push(aRow);
    isWeight.push(wRow);
    cutRows.push(cRow);
  }
  return { loss, grad, gradAdv, clipFrac: valid ? clipped / valid : 0, kl: valid ? klSum / valid : 0, isWeight, cut: cutRows };
}
