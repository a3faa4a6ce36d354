// grpo.gradient_accumulation_steps (peak memory): an update over micro-batches must be the update over the
// whole batch. The reference is the same step run in one pass (gradient_accumulation_steps: 1), from the same seed and
// the same rollouts, on the cpu backend; the loss, the gradient norm, the credit the strategy gave and the updated
// parameters must agree up to float32 summation order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { sevensConfig } from '../fixtures';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { loadConfig } from '../../../src/engine/config/config';
import { initBackend } from '../../../src/engine/model/backend';
import { Adam } from '../../../src/engine/model/optim';
import { buildSession } from '../../../src/engine/session/session';
import { getStrategy, strategyNames } from '../../../src/engine/credit';
import { DEFAULT_CREDIT_PARAMS, type CreditBatch } from '../../../src/engine/credit/types';
import { makeRng } from '../../../src/engine/core/rng';
import type { Section } from '../../../src/protocol';
import { accumulateGrads, concatRows, microBatchRanges } from '../../../src/engine/train/micro_batch';
import { grpoStep } from '../../../src/engine/train/grpo_step';
import { creditParams } from '../../../src/engine/credit/types';

/** The sevens task (every group's rewards differ), 2 PPO epochs so that the second epoch's first pass runs too. */
const config = (dir: string) =>
  sevensConfig(dir, {
    name: 'accum',
    seed: 3,
    backend: 'cpu',
    grpo: '{ steps: 1, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, lr: 0.01, epochs_per_step: 2, eval_every: 1 }',
  });

test('microBatchRanges: near-equal consecutive slices covering every row once, capped at one row each', () => {
  assert.deepEqual(microBatchRanges(8, 1), [[0, 8]]);
  assert.deepEqual(microBatchRanges(8, 3), [
    [0, 2],
    [2, 5],
    [5, 8],
  ]);
  assert.deepEqual(microBatchRanges(128, 4), [
    [0, 32],
    [32, 64],
    [64, 96],
    [96, 128],
  ]);
  assert.deepEqual(microBatchRanges(3, 8), [
    [0, 1],
    [1, 2],
    [2, 3],
  ]);
});

test("concatRows joins per-row arrays in order; accumulateGrads sums each slice's gradient into the whole one", async () => {
  assert.deepEqual(concatRows([{ answerAttention: [[1], [2]] }, { answerAttention: [[3]] }]), { answerAttention: [[1], [2], [3]] });
  await initBackend('cpu');
  // loss(W) = Σ_rows x_r·W·y_r: the gradient is Σ_r x_rᵀ y_r, computed here per slice and whole.
  const x = tf.tensor2d([
    [1, 2],
    [3, -1],
    [0.5, 4],
    [-2, 1],
    [1, 1],
  ]);
  const y = tf.tensor2d([
    [1, 0, 2],
    [0, 1, 1],
    [3, 1, 0],
    [1, -1, 1],
    [2, 2, 2],
  ]);
  const W = tf.variable(
    tf.tensor2d([
      [0.1, 0.2, 0.3],
      [0.4, 0.5, 0.6],
    ]),
    true,
    'accW',
  );
  const loss = (a: number, b: number) => () =>
    x
      .slice([a, 0], [b - a, -1])
      .matMul(W)
      .mul(y.slice([a, 0], [b - a, -1]))
      .sum() as tf.Scalar;
  const whole = tf.variableGrads(loss(0, 5), [W]);
  const sliced = await accumulateGrads(microBatchRanges(5, 3), async (a, b) => {
    const r = tf.variableGrads(loss(a, b), [W]);
    r.value.dispose();
    return r.grads;
  });
  // Σ_r x_rᵀ y_r by hand: row 0 [1,2]ᵀ[1,0,2] … row 4 [1,1]ᵀ[2,2,2]
  const hand = [
    [1 + 0 + 1.5 - 2 + 2, 0 + 3 + 0.5 + 2 + 2, 2 + 3 + 0 - 2 + 2],
    [2 + 0 + 12 + 1 + 2, 0 - 1 + 4 - 1 + 2, 4 - 1 + 0 + 1 + 2],
  ];
  assert.deepEqual(whole.grads.accW.arraySync(), hand);
  assert.deepEqual(sliced.accW.arraySync(), hand);
  tf.dispose([x, y, W, whole.value, ...Object.values(whole.grads), ...Object.values(sliced)]);
});

// Relative to the larger of |b| and 1e-9: at ratio 1 the clipped loss is −Σ c·Â over mean-zero advantages, which can
// cancel to rounding (±1e-17) on a batch whose completions share a length; the gradient norm keeps the check strict.
const rel = (a: number, b: number) => Math.abs(a - b) / Math.max(1e-9, Math.abs(b));

for (const strategy of [
  'none',
  'attention_credit',
  'inverse_logprob',
  'entropy_weighted',
  'entropy_mask',
  'outcome_conditional',
  'attribution',
  'ktae',
  'otb',
  'reward_decomposition',
] as const) {
  test(`one GRPO step over 3 micro-batches equals the step over the whole batch (${strategy}: ${getStrategy(strategy).rowLocal ? 'row-local, one pass' : 'two passes'}, cpu)`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-accum-'));
    try {
      const cfg = config(dir);
      const run = async (steps: number) => {
        const { config } = loadConfig(cfg, [`credit.strategy=${strategy}`, `grpo.gradient_accumulation_steps=${steps}`]);
        const s = await buildSession(config);
        const opt = new Adam(config.grpo.lr);
        // the attribution head (init_std 0.5, so that its weights are far from uniform) trains in every micro-batch's pass
        const head = getStrategy(strategy).createHead?.(s.modelCfg.dModel, 7, { ...creditParams(config.credit), init_std: 0.5 }) ?? null;
        const r = await grpoStep({ session: s, optimizer: opt, step: 1, head });
        const params = new Map([...s.model.params, ...(head?.params ?? [])].map(([n, v]) => [n, Float32Array.from(v.dataSync())]));
        opt.dispose();
        head?.dispose();
        s.model.dispose();
        return { r, params };
      };
      const whole = await run(1);
      const micro = await run(3);
      assert.equal(whole.r.episodes.length, 8);
      assert.deepEqual(
        micro.r.episodes.map((e) => e.text),
        whole.r.episodes.map((e) => e.text),
        'same rollouts',
      );
      assert.ok(whole.r.row.grad_norm! > 0, 'a zero gradient would make the comparison vacuous');
      assert.ok(rel(micro.r.row.loss!, whole.r.row.loss!) < 1e-5, `loss ${micro.r.row.loss} vs ${whole.r.row.loss}`);
      assert.ok(rel(micro.r.row.grad_norm!, whole.r.row.grad_norm!) < 1e-5, `grad_norm ${micro.r.row.grad_norm} vs ${whole.r.row.grad_norm}`);
      if (strategy === 'attribution') {
        assert.ok(
          whole.r.tok.weights.some((row) => row.some((w) => Math.abs(w - 1) > 0.05)),
          'a near-uniform head would make the comparison vacuous',
        );
        assert.ok(micro.r.tok.attribution, 'the attribution column is logged under micro-batches');
      }
      for (const key of ['logprobs', 'weights', 'effAdv'] as const) {
        whole.r.tok[key].forEach((row, i) =>
          row.forEach((v, t) => assert.ok(Math.abs(micro.r.tok[key][i][t] - v) < 1e-5, `${key}[${i}][${t}] ${micro.r.tok[key][i][t]} vs ${v}`)),
        );
      }
      for (const [name, w] of whole.params) {
        // the head's bias shifts every z_t of a row alike, which the softmax ignores: its exact gradient is 0, its float one
        // rounding noise that Adam scales to ±lr, differently per summation order
        if (name === 'attribution_head.bias') continue;
        const m = micro.params.get(name)!;
        let d = 0,
          n = 0;
        for (let i = 0; i < w.length; i++) {
          d += (m[i] - w[i]) ** 2;
          n += w[i] ** 2;
        }
        assert.ok(Math.sqrt(d / n) < 1e-5, `${name} after the update: relative difference ${Math.sqrt(d / n)}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('every strategy that declares rowLocal gives each row of a slice what it gives that row in the whole batch', () => {
  // A random batch of 12 episodes of different lengths, with answer sections, entropies, log-probs and answer attention;
  // each row-local strategy's weights and effective advantages on slices [0, 5), [5, 12) must be the whole batch's rows.
  const rng = makeRng(41);
  const B = 12,
    T = 10;
  const mask = Array.from({ length: B }, (_, i) => Array.from({ length: T }, (_, t) => (t < 4 + (i % 7) ? 1 : 0)));
  const batch: CreditBatch = {
    logprobs: mask.map((row) => row.map(() => -3 * rng())),
    // rows 0–4 less uncertain than rows 5–11, so a batch-level statistic (entropy_mask's percentile) moves with the slice
    entropies: mask.map((row, i) => row.map(() => (i < 5 ? 0 : 1.5) + 0.5 * rng())),
    sections: mask.map((row) => row.map((_, t): Section => (t >= 2 && t < 4 ? 'answer' : 'think'))),
    mask,
    answerAttention: mask.map((row) => row.map(() => rng())),
    // what a strategy that sets Â in prepare() (ktae, otb, reward_decomposition, mc_value, gtpo's paper form) reads
    tokenAdvantages: mask.map((row) => row.map(() => rng() - 0.5)),
    tokenWeights: mask.map((row) => row.map(() => rng())),
  };
  const adv = Array.from({ length: B }, () => rng() * 2 - 1);
  const slice = (a: number, b: number): CreditBatch => ({
    logprobs: batch.logprobs.slice(a, b),
    entropies: batch.entropies.slice(a, b),
    sections: batch.sections.slice(a, b),
    mask: mask.slice(a, b),
    answerAttention: batch.answerAttention!.slice(a, b),
    tokenAdvantages: batch.tokenAdvantages!.slice(a, b),
    tokenWeights: batch.tokenWeights!.slice(a, b),
  });
  const credit = (name: string, cb: CreditBatch, advRows: number[]) => {
    const s = getStrategy(name);
    const w = s.weights(cb, DEFAULT_CREDIT_PARAMS);
    return s.effectiveAdvantages ? s.effectiveAdvantages(cb, advRows, DEFAULT_CREDIT_PARAMS) : w.map((row, i) => row.map((x) => x * advRows[i]));
  };
  const agrees = (name: string) => {
    const whole = credit(name, batch, adv);
    const parts = [...credit(name, slice(0, 5), adv.slice(0, 5)), ...credit(name, slice(5, 12), adv.slice(5, 12))];
    return whole.every((row, i) => row.every((v, t) => Math.abs(parts[i][t] - v) < 1e-12));
  };
  const local = strategyNames().filter((n) => getStrategy(n).rowLocal);
  assert.deepEqual(local.sort(), [
    'attention_credit',
    'attribution',
    'entropy_weighted',
    'gtpo',
    'inverse_logprob',
    'ktae',
    'mc_value',
    'none',
    'otb',
    'reward_decomposition',
  ]);
  for (const name of local) assert.ok(agrees(name), `${name} declares rowLocal but a slice changes its credit`);
  // The check can fail: entropy_mask's percentile is over the whole batch, so its slices disagree.
  assert.equal(agrees('entropy_mask'), false);
});
