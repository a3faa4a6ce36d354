import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tokenWeights } from '../../../src/engine/credit';
import { attributionMetrics, maskedScaledSoftmax } from '../../../src/engine/credit/attribution';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { loadCheckpoint, latestCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { metricsWithoutTiming, train } from '../../../src/engine/train/train';
import { sevensConfig, stopAtStep, tinyConfig } from '../fixtures';
import { initBackend } from '../../../src/engine/model/backend';

const close = (a: number, b: number, tol = 1e-6) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

test('attribution weights: n·softmax(z) over valid tokens; a uniform head is plain GRPO', () => {
  // z = [0, ln 3]: softmax = [1/4, 3/4], n = 2 → [0.5, 1.5]; the padding token gets 0.
  const w = tokenWeights(
    'attribution',
    {},
    {
      logprobs: [
        [-1, -1, -1],
        [-1, -1, -1],
      ],
      entropies: [
        [0, 0, 0],
        [0, 0, 0],
      ],
      sections: [
        ['think', 'think', 'answer'],
        ['think', 'answer', 'other'],
      ],
      mask: [
        [1, 1, 0],
        [1, 1, 1],
      ],
      attributionLogits: [
        [0, Math.log(3), 9],
        [0.3, 0.3, 0.3],
      ],
    },
  );
  close(w[0][0], 0.5);
  close(w[0][1], 1.5);
  assert.equal(w[0][2], 0);
  w[1].forEach((x) => close(x, 1));
});

test('the tensor weights used for the gradient equal the library weights', async () => {
  await initBackend('cpu');
  const z = [
    [0.2, -1, 0.7, 3],
    [1, 2, 3, 4],
  ];
  const mask = [
    [1, 1, 1, 0],
    [1, 0, 0, 0],
  ];
  const wt = tf.tidy(() => maskedScaledSoftmax(tf.tensor2d(z), tf.tensor2d(mask)).arraySync());
  const wl = tokenWeights('attribution', {}, { logprobs: z, entropies: z, sections: z.map((r) => r.map(() => 'think' as const)), mask, attributionLogits: z });
  wt.flat().forEach((x, i) => close(x, wl.flat()[i], 1e-6));
});

test('attribution metrics: uniform α over 4 tokens has entropy ln 4, std 0', () => {
  const m = attributionMetrics([[0.25, 0.25, 0.25, 0.25]], [[1, 1, 1, 1]]);
  close(m['attribution/attribution_entropy'], Math.log(4));
  close(m['attribution/attribution_max'], 0.25);
  close(m['attribution/attribution_min'], 0.25);
  close(m['attribution/attribution_std'], 0);
});

test('an attribution run trains the head, logs α, checkpoints the head and resumes it exactly', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-attr-'));
  // A longer SFT than the other fixtures so rewards vary within groups (A ≠ 0) and the head gets a gradient.
  const cfg = tinyConfig(dir, 'countdown', 'credit: { strategy: attribution }\n');
  const { controller: ctl, reporter } = stopAtStep(2);
  const sets = ['sft.steps=80', 'sft.lr=5e-3'];
  const stopped = await train({ configPath: cfg, controller: ctl, reporter, sets });
  const ck = loadCheckpoint(latestCheckpoint(stopped.runDir)!);
  assert.ok(ck.head && ck.head['attribution_head.weight'], 'head.safetensors in the checkpoint');
  const resumed = await train({ resume: stopped.runDir });
  assert.ok(
    readMetrics(stopped.runDir).some((r) => r.phase === 'grpo' && (r.reward_std ?? 0) > 0),
    'rewards vary',
  );
  const full = await train({ configPath: cfg, sets });
  const rows = readMetrics(full.runDir).filter((r) => r.phase === 'grpo');
  for (const k of ['attribution_entropy', 'attribution_max', 'attribution_min', 'attribution_std']) {
    assert.equal(typeof rows[0][`attribution/${k}`], 'number', k);
  }
  assert.deepEqual(readMetrics(resumed.runDir).map(metricsWithoutTiming), readMetrics(full.runDir).map(metricsWithoutTiming));
  const tok = readTokenTable(join(full.runDir, 'tokens', 'step-000003.arrow'));
  assert.ok(tok.attribution, 'attribution column filled');
  // α sums to 1 over each episode's tokens; weight = n·α.
  const sums = new Map<number, number>();
  const counts = new Map<number, number>();
  for (let i = 0; i < tok.episode.length; i++) {
    sums.set(tok.episode[i], (sums.get(tok.episode[i]) ?? 0) + tok.attribution![i]);
    counts.set(tok.episode[i], (counts.get(tok.episode[i]) ?? 0) + 1);
  }
  for (const v of sums.values()) close(v, 1, 1e-4);
  for (let i = 0; i < tok.episode.length; i++) close(tok.weight[i], counts.get(tok.episode[i])! * tok.attribution![i], 1e-4);
  // The head moved away from its N(0, 0.01²) init through the policy loss.
  const ck2 = loadCheckpoint(latestCheckpoint(full.runDir)!);
  const init = ck.head!['attribution_head.weight'].data;
  const after = ck2.head!['attribution_head.weight'].data;
  assert.ok(after.some((x, i) => x !== init[i]));
});

test('with epochs_per_step 2 the log keeps the weights that trained the policy on policy (epoch 0), and the drift after', { timeout: 120_000 }, async () => {
  // Step 1 of a 2-epoch run and of a 1-epoch run share everything up to the end of epoch 0 (same seed, same SFT, same
  // rollouts, the same head), so epoch 0's weights — what the log must hold — are the same bits in both. The head
  // learns during epoch 0, so the 2-epoch run's second-epoch weights differ: logging those (the old behaviour) fails.
  const dir = mkdtempSync(join(tmpdir(), 'cl-attr-epochs-'));
  // The sevens task: every group's rewards differ, so advantages (and the head's gradient) are never all zero.
  const cfg = sevensConfig(dir, { name: 'e', seed: 3, backend: 'wasm', grpo: '{ steps: 1, prompts_per_step: 2, group_size: 4, max_new_tokens: 8 }' });
  const sets = ['credit.strategy=attribution', 'sft.steps=1'];
  const one = await train({ configPath: cfg, sets: [...sets, 'name=e1'] });
  const two = await train({ configPath: cfg, sets: [...sets, 'grpo.epochs_per_step=2', 'name=e2'] });
  const a = readTokenTable(join(one.runDir, 'tokens', 'step-000001.arrow'));
  const b = readTokenTable(join(two.runDir, 'tokens', 'step-000001.arrow'));
  assert.ok(a.weight.length > 0);
  assert.deepEqual(b.weight, a.weight, "the 2-epoch run logs epoch 0's weights");
  assert.deepEqual(b.attribution, a.attribution);
  assert.deepEqual(b.logprob, a.logprob);
  const drift = readMetrics(two.runDir).find((r) => r.phase === 'grpo' && r.step === 1)!['attribution/epoch_drift'];
  assert.ok(typeof drift === 'number' && drift > 0, `the head moved in epoch 0, so epoch 1's weights differ: drift ${drift}`);
  assert.equal(readMetrics(one.runDir).find((r) => r.phase === 'grpo' && r.step === 1)!['attribution/epoch_drift'], undefined);
});
