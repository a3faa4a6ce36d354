// Seed 000: a learned attribution head. z = v·h + b on the final hidden state h that predicted token t
// (detached when detach_hidden), α = softmax_t z over the episode's valid tokens, w = n_i·α — so a uniform head
// (v ≈ 0 at init, std 0.01) is plain GRPO. The head trains through the policy loss (dLoss/dÂ flows into w).
import * as tf from '@tensorflow/tfjs';
import { randNormal, makeRng } from '../core/rng';
import { scaledSoftmax, validMask, type CreditHead, type CreditStrategy } from './types';

class AttributionHead implements CreditHead {
  readonly params: Map<string, tf.Variable>;
  constructor(dModel: number, seed: number, initStd: number) {
    const rng = makeRng(seed);
    const v = Float32Array.from({ length: dModel }, () => randNormal(rng) * initStd);
    this.params = new Map([
      ['attribution_head.weight', tf.variable(tf.tensor2d(v, [dModel, 1]), true, 'attribution_head.weight')],
      ['attribution_head.bias', tf.variable(tf.zeros([1]), true, 'attribution_head.bias')],
    ]);
  }
  logits(hidden: tf.Tensor3D): tf.Tensor2D {
    const [B, C, d] = hidden.shape;
    return hidden.reshape([B * C, d]).matMul(this.params.get('attribution_head.weight')!).add(this.params.get('attribution_head.bias')!).reshape([B, C]);
  }
  dispose(): void {
    for (const v of this.params.values()) v.dispose();
  }
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

/** Seed 000's monitoring metrics, averaged over episodes: entropy, max, min and std of α. */
export function attributionMetrics(alpha: number[][], mask: number[][]): Record<string, number> {
  let ent = 0, mx = 0, mn = 0, sd = 0, k = 0;
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
  // Library form: given the head's logits z, the weights training uses (n_i·softmax over valid tokens).
  weights: (batch) => {
    const mask = validMask(batch);
    return mask.map((row, i) => scaledSoftmax(batch.attributionLogits?.[i] ?? row.map(() => 0), row, 1));
  },
  createHead: (dModel, seed, p) => new AttributionHead(dModel, seed, p.init_std),
  // Seed 000's monitoring metrics of α = w / n_i.
  stepMetrics: (weights, mask) => attributionMetrics(weights.map((row, i) => {
    const n = mask[i].reduce((a, b) => a + b, 0);
    return row.map((w) => (n ? w / n : 0));
  }), mask),
};
