import { test } from 'node:test';
import assert from 'node:assert/strict';
import { advantages, policyLossAndGrad, type LossAgg } from '../../../src/engine/train/grpo';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

test('group advantages: sample std (N−1) + 1e-4, as TRL and GRPO-Zero', () => {
  // Group [1,0,0,0]: mean 0.25; sample var = (0.75² + 3·0.25²)/3 = 0.25 → std 0.5.
  // A = 0.75/0.5001 = 1.49970006, −0.25/0.5001 = −0.49990002.
  // Group [0.5 ×4]: std 0 → A = 0/(0+1e-4) = 0 (a zero-advantage group).
  const a = advantages([1, 0, 0, 0, 0.5, 0.5, 0.5, 0.5], 4, 'group');
  close(a[0], 0.75 / 0.5001);
  for (const i of [1, 2, 3]) close(a[i], -0.25 / 0.5001);
  for (const i of [4, 5, 6, 7]) assert.equal(a[i], 0);
});

test('batch advantages: the group mean, divided by the whole batch\'s std (TRL\'s scale_rewards="batch")', () => {
  // Batch [1,0,0,0,1,1,0,0] in groups of 4: group means 0.25 and 0.5. Batch std: mean 3/8, Σ(r−mean)² =
  // 3·0.625² + 5·0.375² = 1.875, std = sqrt(1.875/7) = 0.5175491695; divisor 0.5176491695.
  // A = (r − mean_g)/divisor: group 1: 0.75/d = 1.4488577287, −0.25/d = −0.4829525762; group 2: 0.5/d = 0.9659051525.
  // (The old form, batch mean and batch std, gave 1.2073814406 for the first: TRL's centring is per group.)
  const a = advantages([1, 0, 0, 0, 1, 1, 0, 0], 4, 'batch');
  close(a[0], 0.75 / 0.5176491695, 1e-9);
  close(a[1], -0.25 / 0.5176491695, 1e-9);
  close(a[4], 0.5 / 0.5176491695, 1e-9);
  close(a[6], -0.5 / 0.5176491695, 1e-9);
  close(a[0], 1.4488577287, 1e-9);
});

test('none advantages subtract the group mean only', () => {
  assert.deepEqual(advantages([1, 0, 0, 0], 4, 'none'), [0.75, -0.25, -0.25, -0.25]);
  // One-episode groups have mean r, so every advantage is 0.
  assert.deepEqual(advantages([3, 5], 1, 'none'), [0, 0]);
});

test('advantages reject a batch that is not whole groups', () => {
  assert.throws(() => advantages([1, 2, 3], 2, 'group'), /groups of 2/);
});

// Fixture: three episodes, max_new_tokens 4, clip [0.8, 1.2].
// ep0: ℓ = [−1, −0.5, −2], ℓ_old = [−1.1, −0.5, −1], Â = 1
//   t0: ρ = e^0.1 = 1.1051709181 in range → L = −1.1051709181
//   t1: ρ = 1 → L = −1
//   t2: ρ = e^−1 = 0.3678794412; Â > 0 so min(ρÂ, 0.8Â) = ρÂ (unclipped) → L = −0.3678794412, gradient flows
// ep1: ℓ = [−0.3, −0.7, pad], ℓ_old = [−0.3, −1.0, pad], Â = −2
//   t0: ρ = 1 → L = 2; t1: ρ = e^0.3 = 1.3498588076; min(−2.6997176152, −2.4) = −2.6997 (unclipped) → L = 2.6997176152
// ep2: ℓ = [−0.2], ℓ_old = [−0.5], Â = 0.5: ρ = 1.3498588076; min(0.6749294, 1.2·0.5 = 0.6) = 0.6 clipped → L = −0.6, no gradient
const fixture = {
  logprobs: [
    [-1, -0.5, -2],
    [-0.3, -0.7, 0],
    [-0.2, 0, 0],
  ],
  oldLogprobs: [
    [-1.1, -0.5, -1],
    [-0.3, -1.0, 0],
    [-0.5, 0, 0],
  ],
  advantages: [
    [1, 1, 1],
    [-2, -2, 0],
    [0.5, 0, 0],
  ],
  mask: [
    [1, 1, 1],
    [1, 1, 0],
    [1, 0, 0],
  ],
};
const tokLoss = [[-1.1051709180756477, -1, -0.36787944117144233], [2, 2.6997176151520064], [-0.6]];
const opts = { clipEps: 0.2, clipEpsHigh: 0.2, klBeta: 0, maxNewTokens: 4 };

test('loss_agg token_mean: Σ m·loss / Σ m', () => {
  const r = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean' });
  close(r.loss, tokLoss.flat().reduce((a, b) => a + b) / 6, 1e-12);
  // dL/dℓ = −ρÂ/6 on unclipped tokens, 0 on the clipped one and on padding.
  close(r.grad[0][0], -1.1051709180756477 / 6, 1e-12);
  close(r.grad[1][1], (1.3498588075760032 * 2) / 6, 1e-12);
  assert.equal(r.grad[2][0], 0);
  assert.equal(r.grad[1][2], 0);
  close(r.clipFrac, 1 / 6, 1e-12);
});

test('loss_agg seq_mean_token_mean: mean over episodes of per-episode token means', () => {
  const r = policyLossAndGrad(fixture, { ...opts, lossAgg: 'seq_mean_token_mean' });
  const per = tokLoss.map((row) => row.reduce((a, b) => a + b) / row.length);
  close(r.loss, (per[0] + per[1] + per[2]) / 3, 1e-12);
});

test('loss_agg seq_mean_token_sum_norm: Σ m·loss / (episodes · max_new_tokens)', () => {
  const r = policyLossAndGrad(fixture, { ...opts, lossAgg: 'seq_mean_token_sum_norm' });
  close(r.loss, tokLoss.flat().reduce((a, b) => a + b) / (3 * 4), 1e-12);
});

test('k3 KL term: exp(ℓref−ℓ) − (ℓref−ℓ) − 1', () => {
  // One token, ρ = 1, Â = 0 → surrogate 0; ℓ = −1, ℓref = −1.5: d = −0.5, k = e^−0.5 + 0.5 − 1 = 0.1065306597.
  // loss = β·k with β = 0.1 → 0.01065306597; dL/dℓ = β(1 − e^d) = 0.1·(1 − 0.6065306597) = 0.03934693403.
  const r = policyLossAndGrad(
    { logprobs: [[-1]], oldLogprobs: [[-1]], refLogprobs: [[-1.5]], advantages: [[0]], mask: [[1]] },
    { ...opts, klBeta: 0.1, lossAgg: 'token_mean' },
  );
  close(r.loss, 0.01065306597126334, 1e-12);
  close(r.grad[0][0], 0.03934693402873666, 1e-12);
  close(r.kl, 0.1065306597126334, 1e-12);
});

test('policyLossAndGrad gradient matches central finite differences (every loss_agg, with KL)', () => {
  const x = {
    ...fixture,
    refLogprobs: [
      [-0.9, -0.6, -1.8],
      [-0.4, -0.6, 0],
      [-0.3, 0, 0],
    ],
  };
  for (const lossAgg of ['token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm'] as LossAgg[]) {
    const o = { ...opts, klBeta: 0.05, lossAgg };
    const r = policyLossAndGrad(x, o);
    const h = 1e-6;
    for (let i = 0; i < 3; i++) {
      for (let t = 0; t < 3; t++) {
        if (!x.mask[i][t]) continue;
        const plus = structuredClone(x.logprobs);
        const minus = structuredClone(x.logprobs);
        plus[i][t] += h;
        minus[i][t] -= h;
        const fd = (policyLossAndGrad({ ...x, logprobs: plus }, o).loss - policyLossAndGrad({ ...x, logprobs: minus }, o).loss) / (2 * h);
        close(r.grad[i][t], fd, 1e-7);
      }
    }
  }
});

test('DAPO asymmetric clip: clip_eps_high widens only the upper bound', () => {
  // ρ = e^0.25 = 1.2840254167, Â = 1: with clip_eps_high 0.28 the bound is 1.28 → clipped to 1.28, L = −1.28;
  // with 0.3 the ratio is inside → L = −1.2840254167.
  const x = { logprobs: [[-0.75]], oldLogprobs: [[-1]], advantages: [[1]], mask: [[1]] };
  close(policyLossAndGrad(x, { ...opts, clipEpsHigh: 0.28, lossAgg: 'token_mean' }).loss, -1.28, 1e-12);
  close(policyLossAndGrad(x, { ...opts, clipEpsHigh: 0.3, lossAgg: 'token_mean' }).loss, -Math.exp(0.25), 1e-12);
});
