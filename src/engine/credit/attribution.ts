// Seed doc 000: a learned attribution head. z = v·h + b on the final hidden state h that predicted token t
// (detached when detach_hidden), α = softmax_t z over the episode's valid tokens, w = n_i·α — so a uniform head
// (v ≈ 0 at init, std 0.01) is plain GRPO. The head trains through the policy loss (dLoss/dÂ flows into w).
import * as tf from '@tensorflow/tfjs';
import { randNormal, makeRng } from '../core/rng';
import { alphaOf, scaledSoftmax, validMask, type CreditHead, type CreditParams, type CreditStrategy, type HeadStepInput, type ModelOutputs } from './types';

class AttributionHead implements CreditHead {
  readonly params: Map<string, tf.Variable>;
  constructor(
    dModel: number,
    seed: number,
    private readonly p: CreditParams,
  ) {
    const rng = makeRng(seed);
    const v = Float32Array.from({ length: dModel }, () => randNormal(rng) * p.init_std);
    // the initial values are tensors of their own beside the variables, and would outlive the head: freed once copied
    const w0 = tf.tensor2d(v, [dModel, 1]);
    const b0 = tf.zeros([1]);
    this.params = new Map([
      ['attribution_head.weight', tf.variable(w0, true, 'attribution_head.weight')],
      ['attribution_head.bias', tf.variable(b0, true, 'attribution_head.bias')],
    ]);
    tf.dispose([w0, b0]);
  }
  logits(hidden: tf.Tensor3D): tf.Tensor2D {
    const [B, C, d] = hidden.shape;
    return hidden
      .reshape([B * C, d])
      .matMul(this.params.get('attribution_head.weight')!)
      .add(this.params.get('attribution_head.bias')!)
      .reshape([B, C]);
  }
  weigh(out: ModelOutputs, mask: tf.Tensor2D): tf.Tensor2D {
    if (!out.hidden) throw new Error('attribution: the training pass returned no hidden states (catalog needs.hidden)');
    // Detached: the hidden states pass forward unchanged and no gradient reaches the trunk through the head.
    const h = this.p.detach_hidden ? stopGradient(out.hidden) : out.hidden;
    return maskedScaledSoftmax(this.logits(h), mask);
  }
  async read(out: ModelOutputs): Promise<{ attributionLogits: number[][] }> {
    if (!out.hidden) throw new Error('attribution: the pass returned no hidden states (catalog needs.hidden)');
    // in a scope: the reshapes and the product are tensors too, and the first reshape holds the hidden states' buffer
    // ([B, C, d], megabytes a micro-batch) for as long as it lives
    const hidden = out.hidden;
    const z = tf.tidy(() => this.logits(hidden));
    try {
      return { attributionLogits: (await z.array()) as number[][] };
    } finally {
      z.dispose();
    }
  }
  objective(x: HeadStepInput): tf.Scalar {
    return headObjective({ ...x, objective: this.p.objective, entropyCoef: this.p.entropy_coef });
  }
  dispose(): void {
    for (const v of this.params.values()) v.dispose();
  }
}

/** x's values with a zero gradient (torch's detach), without copying them off the device. */
function stopGradient<T extends tf.Tensor>(x: T): T {
  return tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const v = args[0] as T;
    return { value: tf.clone(v), gradFunc: (dy: tf.Tensor) => tf.zerosLike(dy) };
  })(x) as T;
}

/** Differentiable n_i·softmax_t(z) over valid tokens (mask 1), the tensor twin of `scaledSoftmax`. */
export function maskedScaledSoftmax(z: tf.Tensor2D, mask: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const neg = tf.scalar(-1e9);
    const zm = tf.where(mask.greater(0), z, neg.broadcastTo(z.shape));
    const e = zm.sub(zm.max(1, true)).exp().mul(mask);
    const n = mask.sum(1, true);
    return e.div(e.sum(1, true).add(1e-30)).mul(n) as tf.Tensor2D;
  });
}

export type HeadObjective = 'contribution' | 'contribution_entropy' | 'ppo';

export interface HeadObjectiveInput {
  /** w = n_i·softmax(z) over valid tokens [B, C], differentiable in the head's parameters */
  w: tf.Tensor2D;
  mask: tf.Tensor2D;
  /** A_i per episode [B, 1] */
  adv: tf.Tensor2D;
  /** ℓ, detached [B][C] */
  logprobs: number[][];
  /** the loss's aggregation coefficients c [B][C] (loss = Σ c·loss_tok) */
  c: number[][];
  /** dLoss/dÂ per token from the policy loss (grpo.ts gradAdv): for ppo */
  gradAdv: number[][];
  objective: HeadObjective;
  entropyCoef: number;
}

/**
 * A surrogate whose gradient w.r.t. the head's parameters is the chosen objective's (credit.attribution.objective; the
 * catalog documents each and its optimum). The head's weights enter the policy loss only through Â = A·w, so:
 *   contribution:          Σ c·w·A·(−ℓ)                        = −Σ c·Â·ℓ
 *   contribution_entropy:  the same − entropy_coef·Σ_i s_i·H(α_i), s_i = Σ_t c_it (c is constant within an episode, so
 *                          per episode the optimum is α ∝ exp(A·ℓ / entropy_coef))
 *   ppo:                   Σ w·A·dLoss/dÂ                      (zero at ρ = 1: dLoss/dÂ = −c, constant, and Σ_t w_t = n_i)
 */
export function headObjective(x: HeadObjectiveInput): tf.Scalar {
  return tf.tidy(() => {
    if (x.objective === 'ppo') return x.w.mul(x.adv).mul(tf.tensor2d(x.gradAdv)).sum() as tf.Scalar;
    const negC = x.c.map((row, i) => row.map((ci, t) => -ci * x.logprobs[i][t]));
    let j = x.w.mul(x.adv).mul(tf.tensor2d(negC)).sum() as tf.Scalar;
    if (x.objective === 'contribution_entropy') {
      const n = x.mask.sum(1, true);
      const alpha = x.w.div(n.maximum(1));
      // α·log(α + 1e-30): 0 at α = 0 (padding, masked out anyway, and underflowed tokens), differentiable everywhere.
      const h = alpha.mul(alpha.add(1e-30).log()).mul(x.mask).sum(1).neg(); // [B]
      const s = tf.tensor1d(x.c.map((row) => row.reduce((a, b) => a + b, 0)));
      j = j.sub(h.mul(s).sum().mul(x.entropyCoef)) as tf.Scalar;
    }
    return j;
  });
}

/** Seed doc 000's monitoring metrics, averaged over episodes: entropy, max, min and std of α. */
export function attributionMetrics(alpha: number[][], mask: number[][]): Record<string, number> {
  let ent = 0,
    mx = 0,
    mn = 0,
    sd = 0,
    k = 0;
  alpha.forEach((row, i) => {
    const a = row.filter((_, t) => mask[i][t]);
    if (!a.length) return;
    k++;
    ent += -a.reduce((s, x) => s + (x > 0 ? x * Math.log(x) : 0), 0);
    mx += Math.max(...a);
    mn += Math.min(...a);
    const m = a.reduce((s, x) => s + x, 0) / a.length;
    sd += Math.sqrt(a.reduce((s, x) => s + (x - m) ** 2, 0) / a.length);
  });
  const d = k || 1;
  return {
    'attribution/attribution_entropy': ent / d,
    'attribution/attribution_max': mx / d,
    'attribution/attribution_min': mn / d,
    'attribution/attribution_std': sd / d,
  };
}

export const attribution: CreditStrategy = {
  name: 'attribution',
  // w of episode i is a softmax over episode i's own tokens: micro-batches weigh alone, each in its own taped pass
  rowLocal: true,
  // Library form: given the head's logits z, the weights training uses (n_i·softmax over valid tokens).
  weights: (batch) => {
    const mask = validMask(batch);
    return mask.map((row, i) => scaledSoftmax(batch.attributionLogits?.[i] ?? row.map(() => 0), row, 1));
  },
  createHead: (dModel, seed, p) => new AttributionHead(dModel, seed, p),
  // Seed doc 000's monitoring metrics of α = w / n_i.
  stepMetrics: (weights, mask) => attributionMetrics(alphaOf(weights, mask), mask),
};
