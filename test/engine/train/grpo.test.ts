import { test } from 'node:test';
import assert from 'node:assert/strict';
import { advantages } from '../../../src/engine/credit/advantages';
import { policyLossAndGrad, type LossAgg } from '../../../src/engine/train/grpo';
import { POLICY_FIXTURE as fixture, POLICY_FIXTURE_REF as withRef } from '../fixtures';

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
  const x = withRef;
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

// ---- GSPO and CISPO: hand-worked on the fixture above, token_mean (c = 1/6 per token) ----

test('GSPO (importance_sampling_level sequence): one ratio per sequence, exp(mean log ρ), clipped per sequence; gradient through the mean', () => {
  // ep0: log ρ = 0.1, 0, −1 → mean −0.3 → s = e^−0.3 = 0.7408182207; Â = 1: min(sÂ, clip(s)Â) = min(0.7408, 0.8) = s
  //      (unclipped) → each token −0.7408182207
  // ep1: log ρ = 0, 0.3 → s = e^0.15 = 1.1618342427 (inside [0.8, 1.2]); Â = −2 → each token +2.3236684854
  // ep2: s = e^0.3 = 1.3498588076 > 1.2, Â = 0.5 → clipped: −0.6, no gradient
  // loss = (3·(−0.7408182207) + 2·2.3236684854 − 0.6)/6 = 0.3041470514
  // ∂loss/∂ℓ: ep0 each token Σ_t c·(−Â) · s/n = (3·(1/6)·(−1))·0.7408182207/3 = −0.1234697035
  //           ep1 each token (2·(1/6)·2)·1.1618342427/2 = 0.3872780809; ep2: 0
  const r = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean', importanceSamplingLevel: 'sequence' });
  close(r.loss, (3 * -Math.exp(-0.3) + 2 * 2 * Math.exp(0.15) - 0.6) / 6, 1e-12);
  close(r.loss, 0.3041470514, 1e-9);
  for (const g of r.grad[0]) close(g, -0.1234697035, 1e-9);
  close(r.grad[1][0], 0.3872780809, 1e-9);
  close(r.grad[1][1], 0.3872780809, 1e-9);
  assert.equal(r.grad[1][2], 0, 'padding');
  assert.equal(r.grad[2][0], 0, 'a clipped sequence passes no gradient');
  close(r.clipFrac, 1 / 6, 1e-12);
  // on-policy (ρ = 1 everywhere) GSPO and GRPO give the same loss and gradient
  const on = { ...fixture, oldLogprobs: fixture.logprobs };
  const [a, b] = (['token', 'sequence'] as const).map((level) => policyLossAndGrad(on, { ...opts, lossAgg: 'token_mean', importanceSamplingLevel: level }));
  close(a.loss, b.loss, 1e-12);
  a.grad.forEach((row, i) => row.forEach((g, t) => close(g, b.grad[i][t], 1e-12)));
});

test('CISPO (policy_loss cispo): −sg(w)·Â·ℓ, a clipped token keeps a bounded gradient; two_sided (veRL) and top (TRL)', () => {
  // two_sided, w = clip(ρ, 0.8, 1.2):
  //   ep0: ρ = 1.1051709181, 1, 0.3678794412 → w = 1.1051709181, 1, 0.8 (clipped); Â = 1, ℓ = −1, −0.5, −2
  //        terms −wÂℓ = 1.1051709181, 0.5, 1.6; ∂/∂ℓ = −wÂ = −1.1051709181, −1, −0.8
  //   ep1: ρ = 1, 1.3498588076 → w = 1, 1.2 (clipped); Â = −2, ℓ = −0.3, −0.7 → terms −0.6, −1.68; ∂/∂ℓ = 2, 2.4
  //   ep2: ρ = 1.3498588076 → w = 1.2 (clipped); Â = 0.5, ℓ = −0.2 → term 0.12; ∂/∂ℓ = −0.6
  //   loss = (1.1051709181 + 0.5 + 1.6 − 0.6 − 1.68 + 0.12)/6 = 0.1741951530; 3 of 6 tokens clipped
  const two = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean', policyLoss: 'cispo' });
  close(two.loss, 0.174195153, 1e-9);
  const want = [[-1.1051709181, -1, -0.8], [2, 2.4], [-0.6]];
  want.forEach((row, i) => row.forEach((g, t) => close(two.grad[i][t], g / 6, 1e-9)));
  close(two.clipFrac, 0.5, 1e-12);
  // top with an absolute cap of 5 (TRL): no ratio here reaches it, so w = ρ:
  //   terms 1.1051709181, 0.5, 0.7357588823, −0.6, −1.8898023306, 0.1349858808 → loss −0.0138866494/6 = −0.0023144416
  const top = policyLossAndGrad(fixture, { ...opts, clipEpsHigh: 5, lossAgg: 'token_mean', policyLoss: 'cispo', cispoClip: 'top' });
  close(top.loss, -0.0023144416, 1e-9);
  close(top.grad[0][2], -Math.exp(-1) / 6, 1e-12);
  close(top.clipFrac, 0, 1e-12);
  // and capped at 1.3: ep1 t1 and ep2 (ρ = 1.3498588076) take w = 1.3
  const capped = policyLossAndGrad(fixture, { ...opts, clipEpsHigh: 1.3, lossAgg: 'token_mean', policyLoss: 'cispo', cispoClip: 'top' });
  close(capped.grad[1][1], (-1.3 * -2) / 6, 1e-12);
  close(capped.clipFrac, 2 / 6, 1e-12);
});

test('GSPO-token (policy_loss gspo): the sequence ratio and clip on every token, each token keeping its own Â, the gradient through its own log-prob', () => {
  // s as at sequence level: ep0 e^−0.3, ep1 e^0.15, ep2 e^0.3 (clipped: Â = 0.5 > 0 and s > 1.2). The loss is GSPO's when
  // a sequence's tokens share one Â (ep0, ep1: Â the same on each token), so the fixture's loss is 0.3041470514 again.
  // ∂loss/∂ℓ_t = c·(−Â_t)·s: ep0 (1/6)·(−1)·e^−0.3 = −0.1234697035 on each token; ep1 (1/6)·2·e^0.15 = 0.3872780809;
  // ep2 0 (cut). PyTorch's autograd of −min(s̃Â, clip(s̃)Â) with s̃ = s.detach()·exp(ℓ − ℓ.detach()) gives the same.
  const r = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean', policyLoss: 'gspo' });
  close(r.loss, 0.3041470514, 1e-9);
  for (const g of r.grad[0]) close(g, -0.1234697035, 1e-9);
  close(r.grad[1][0], 0.3872780809, 1e-9);
  assert.equal(r.grad[2][0], 0, 'a clipped sequence passes no gradient');
  // with per-token credit the tokens differ: Â = 2, 0, −1 on ep0 → ∂/∂ℓ_t = (1/6)·(−Â_t)·e^−0.3 = −0.2469394, 0, and 0
  // for the third (Â < 0 with s = 0.7408 below 0.8: the clipped branch, so cut), not one value spread over the sequence
  const credit = { ...fixture, advantages: [[2, 0, -1], fixture.advantages[1], fixture.advantages[2]] };
  const g = policyLossAndGrad(credit, { ...opts, lossAgg: 'token_mean', policyLoss: 'gspo' }).grad[0];
  close(g[0], (-2 * Math.exp(-0.3)) / 6, 1e-12);
  assert.deepEqual([Math.abs(g[1]), g[2]], [0, 0]);
  // at sequence level the same terms' ∂/∂s, Σ c·(−Â) over the uncut tokens = −2/6, is spread as ·s/3 on every token
  const seq = policyLossAndGrad(credit, { ...opts, lossAgg: 'token_mean', importanceSamplingLevel: 'sequence' }).grad[0];
  for (const v of seq) close(v, ((-2 / 6) * Math.exp(-0.3)) / 3, 1e-12);
});

test('GSPO and CISPO gradients match central finite differences (every loss_agg, with KL)', () => {
  const x = withRef;
  // CISPO's stop-gradient is on w: its loss is not differentiated through w, so its finite differences hold w fixed
  const variants = [{ importanceSamplingLevel: 'sequence' as const }, { policyLoss: 'cispo' as const, fixedW: true }];
  for (const v of variants)
    for (const lossAgg of ['token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm'] as LossAgg[]) {
      const o = { ...opts, klBeta: 0.05, lossAgg, ...v };
      const r = policyLossAndGrad(x, o);
      const h = 1e-6;
      for (let i = 0; i < 3; i++)
        for (let t = 0; t < 3; t++) {
          if (!x.mask[i][t]) continue;
          const shift = (d: number) => {
            const lp = structuredClone(x.logprobs);
            lp[i][t] += d;
            // holding w fixed = moving the old log-prob with the new one, so ρ (and w) stay as they were
            const old = v.fixedW ? structuredClone(x.oldLogprobs) : x.oldLogprobs;
            if (v.fixedW) old[i][t] += d;
            return policyLossAndGrad({ ...x, logprobs: lp, oldLogprobs: old }, o).loss;
          };
          close(r.grad[i][t], (shift(h) - shift(-h)) / (2 * h), 1e-7);
        }
    }
});

test('GSPO averages per-token credit away even on-policy: each token gets the sequence summed credit ÷ its length', () => {
  // one completion of 3 tokens, on-policy (ρ = 1), token credit Â = 3, 0, −0.6, token_mean c = 1/3:
  // token level: ∂/∂ℓ_t = −c·Â_t = −1, 0, 0.2; sequence level: Σ_t c·(−Â_t) · s/n = (−1 + 0 + 0.2)·1/3 = −0.2667 for each
  const x = { logprobs: [[-1, -2, -0.5]], oldLogprobs: [[-1, -2, -0.5]], advantages: [[3, 0, -0.6]], mask: [[1, 1, 1]] };
  const tok = policyLossAndGrad(x, { ...opts, lossAgg: 'token_mean' });
  const seq = policyLossAndGrad(x, { ...opts, lossAgg: 'token_mean', importanceSamplingLevel: 'sequence' });
  [-1, 0, 0.2].forEach((g, t) => close(tok.grad[0][t], g, 1e-12));
  for (const g of seq.grad[0]) close(g, -0.8 / 3, 1e-12);
  close(tok.loss, seq.loss, 1e-12);
});

test('effective_groups: the share of groups whose rewards are not all equal (hand-counted)', async () => {
  const { effectiveGroups } = await import('../../../src/engine/train/grpo_step');
  // groups of 3: [1,1,1] none, [0,1,0] live, [0.5,0.5,0.5] none, [0,0,0.05] live (a format reward alone still differs)
  close(effectiveGroups([1, 1, 1, 0, 1, 0, 0.5, 0.5, 0.5, 0, 0, 0.05], 3), 0.5, 1e-12);
  close(effectiveGroups([0, 0, 1, 1], 2), 0, 1e-12);
  close(effectiveGroups([0, 1], 2), 1, 1e-12);
});

test("DAPO's soft overlong punishment, veRL's formula, by hand: max 64, buffer 16, penalty 1", async () => {
  const { overlongPenalty } = await import('../../../src/engine/session/reward');
  // expected length 64 − 16 = 48; −(L − 48)/16 · 1, never above 0
  for (const [L, want] of [
    [30, 0],
    [48, 0],
    [52, -0.25],
    [56, -0.5],
    [64, -1],
  ])
    close(overlongPenalty(L, 64, 16, 1), want, 1e-12);
  close(overlongPenalty(60, 64, 16, 0.5), -0.375, 1e-12);
});

test('what the loss did to each token: the weight on its gradient and whether the clip cut it (hand-worked on the fixture)', () => {
  const e = Math.exp;
  // ppo, token level: ρ where the gradient flows, 0 where cut (ep2)
  const ppo = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean' });
  const rows = (m: number[][]) =>
    m.map((r, i) =>
      r.slice(
        0,
        fixture.mask[i].reduce((a, b) => a + b, 0),
      ),
    );
  const near = (got: number[][], want: number[][]) => want.forEach((r, i) => r.forEach((w, t) => close(got[i][t], w, 1e-9)));
  near(rows(ppo.isWeight), [[e(0.1), 1, e(-1)], [1, e(0.3)], [0]]);
  assert.deepEqual(rows(ppo.cut), [[0, 0, 0], [0, 0], [1]]);
  // cispo two-sided: the clipped weight, and clipped where w ≠ ρ
  const cispo = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean', policyLoss: 'cispo' });
  near(rows(cispo.isWeight), [[e(0.1), 1, 0.8], [1, 1.2], [1.2]]);
  assert.deepEqual(rows(cispo.cut), [[0, 0, 1], [0, 1], [1]]);
  // GSPO: the sequence's s on each token (e^−0.3, e^0.15), 0 on the cut sequence
  const gspo = policyLossAndGrad(fixture, { ...opts, lossAgg: 'token_mean', importanceSamplingLevel: 'sequence' });
  near(rows(gspo.isWeight), [[e(-0.3), e(-0.3), e(-0.3)], [e(0.15), e(0.15)], [0]]);
  assert.deepEqual(rows(gspo.cut), [[0, 0, 0], [0, 0], [1]]);
  assert.equal(ppo.isWeight[1][2], 0, 'padding');
});
