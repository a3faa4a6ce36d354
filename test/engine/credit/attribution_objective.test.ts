// The attribution head's objectives (credit.attribution.objective), on free logits z (one per token)
// so that each objective's optimum can be reached and read off. Expected numbers are worked by hand in the comments
// (and the softmax ones checked with Python's math module).
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { headObjective, maskedScaledSoftmax, type HeadObjective } from '../../../src/engine/credit/attribution';
import { policyLossAndGrad } from '../../../src/engine/train/grpo';

before(async () => {
  await tf.setBackend('cpu');
});

/** Gradient descent on z for one episode of three tokens; returns α = w / n at the end. */
function optimise(objective: HeadObjective, A: number, logprobs: number[], steps = 3000, lr = 0.5, entropyCoef = 0.5): number[] {
  const z = tf.variable(tf.zeros([1, logprobs.length]));
  const mask = tf.ones([1, logprobs.length]) as tf.Tensor2D;
  const adv = tf.tensor2d([[A]]);
  const n = logprobs.length;
  const c = [logprobs.map(() => 1 / n)]; // token_mean over one episode
  const opt = tf.train.sgd(lr);
  for (let s = 0; s < steps; s++) {
    opt.minimize(() =>
      headObjective({
        w: maskedScaledSoftmax(z as unknown as tf.Tensor2D, mask),
        mask,
        adv,
        logprobs: [logprobs],
        c,
        gradAdv: [logprobs.map(() => 0)],
        objective,
        entropyCoef,
      }),
    );
  }
  const alpha = [...maskedScaledSoftmax(z as unknown as tf.Tensor2D, mask).dataSync()].map((w) => w / n);
  z.dispose();
  return alpha;
}

test('contribution_entropy: the optimum is α = softmax(A·ℓ / entropy_coef), a tempered distribution', () => {
  // ℓ = (−0.1, −1.0, −2.3), entropy_coef 0.5. A = +1: A·ℓ/λ = (−0.2, −2, −4.6) → softmax (0.849202, 0.140372, 0.010426).
  const pos = optimise('contribution_entropy', 1, [-0.1, -1.0, -2.3]);
  [0.849202, 0.140372, 0.010426].forEach((e, i) => assert.ok(Math.abs(pos[i] - e) < 2e-3, `A>0 α${i} = ${pos[i]}, expected ${e}`));
  // A = −1: (0.2, 2, 4.6) → softmax (0.011299, 0.068357, 0.920343): a failed episode blames its least likely token.
  const neg = optimise('contribution_entropy', -1, [-0.1, -1.0, -2.3]);
  [0.011299, 0.068357, 0.920343].forEach((e, i) => assert.ok(Math.abs(neg[i] - e) < 2e-3, `A<0 α${i} = ${neg[i]}, expected ${e}`));
});

test('contribution alone heads for a one-hot α (its optimum is a vertex of the simplex)', () => {
  const a = optimise('contribution', 1, [-0.1, -1.0, -2.3], 3000, 5);
  assert.ok(a[0] > 0.99, `α = ${a}`);
});

test('ppo: exactly zero head gradient on-policy (ρ = 1); off-policy the hand-worked gradient', () => {
  // One episode, two tokens, z = 0 → α = (½, ½), w = (1, 1); A = 1; token_mean c = (½, ½); clip_eps 0.2.
  const grad = (oldLp: number[]) => {
    const lp = [-1, -2];
    const info = policyLossAndGrad(
      { logprobs: [lp], oldLogprobs: [oldLp], advantages: [[1, 1]], mask: [[1, 1]] },
      { clipEps: 0.2, clipEpsHigh: 0.2, klBeta: 0, lossAgg: 'token_mean', maxNewTokens: 2 },
    );
    const z = tf.variable(tf.zeros([1, 2]));
    const mask = tf.ones([1, 2]) as tf.Tensor2D;
    const g = tf.grad((zz: tf.Tensor) =>
      headObjective({
        w: maskedScaledSoftmax(zz as tf.Tensor2D, mask),
        mask,
        adv: tf.tensor2d([[1]]),
        logprobs: [lp],
        c: [[0.5, 0.5]],
        gradAdv: info.gradAdv,
        objective: 'ppo',
        entropyCoef: 0,
      }),
    )(z);
    return [...g.dataSync()];
  };
  assert.deepEqual(
    grad([-1, -2]).map((x) => Math.abs(x)),
    [0, 0],
    'ρ = 1',
  );
  // ρ = (1.1, 0.9) (ℓ_old = ℓ − ln ρ): dLoss/dÂ = −c·ρ = (−0.55, −0.45). d/dz_k Σ_t w_t·A·g_t = n·α_k·(g_k − Σ_t α_t g_t)
  // = 2·½·(g_k + 0.5) = (−0.05, +0.05): descent raises z_0, the token whose ratio grew with a positive advantage.
  const g = grad([-1 - Math.log(1.1), -2 - Math.log(0.9)]);
  assert.ok(Math.abs(g[0] + 0.05) < 1e-6 && Math.abs(g[1] - 0.05) < 1e-6, String(g));
});
