// The embedding and LM head stored in blocks of the vocabulary (vocab_blocks.ts), forced small here on the cpu
// backend: the model must be the same function with the same gradients as the unsplit one. The expected values are
// the unsplit model's own, whose forward, scores and gradients other tests check against PyTorch. A block gathers and
// multiplies the same floats in the same order, so logits and scores are equal bit for bit. Gradients are equal up to
// one reassociation: ∂L/∂h through the LM head, Σ_v ∂L/∂z_v·W_v, is summed block by block and then over the blocks,
// which moves the last bits (measured: at most 2e-8 on entries of 0.2); 1e-6 relative per parameter holds that and
// fails on any wrong block (an off-by-one id is an error of order 1).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/engine/model/backend';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { Adam } from '../../../src/engine/model/optim';
import { baseName, blockRanges, joinHost, splitHost, vocabBlockWidth } from '../../../src/engine/model/vocab_blocks';
import { makeRng } from '../../../src/engine/core/rng';
import { relErr, smallModelConfig } from '../fixtures';

const GRAD_TOL = 1e-6;

const V = 40;
// 40 = 16 + 16 + 8: three blocks, the last one shorter
const BLOCK = 16;

function config(tie: boolean): ModelConfig {
  return smallModelConfig({ tieEmbeddings: tie, maxSeqLen: 16 });
}

test('host split and join: [d, V] by columns and [V, d] by rows round-trip; the block width fits the binding limit', () => {
  const rng = makeRng(3);
  const data = Float32Array.from({ length: 5 * 11 }, () => rng());
  const { starts, widths } = blockRanges(11, 4);
  assert.deepEqual(starts, [0, 4, 8]);
  assert.deepEqual(widths, [4, 4, 3]);
  const cols = splitHost(data, [5, 11], 1, starts, widths);
  // column block 1 of row 2 is data[2·11 + 4 .. 2·11 + 8)
  assert.deepEqual(Array.from(cols[1].subarray(2 * 4, 3 * 4)), Array.from(data.subarray(2 * 11 + 4, 2 * 11 + 8)));
  assert.deepEqual(joinHost(cols, [5, 11], 1, starts, widths), data);
  const rowsSplit = splitHost(data, [11, 5], 0, starts, widths);
  assert.deepEqual(rowsSplit[2], data.subarray(8 * 5));
  assert.deepEqual(joinHost(rowsSplit, [11, 5], 0, starts, widths), data);
  // Qwen2.5-0.5B on a 128 MiB binding (lavapipe): 896 floats a row → 37,449 rows a block, 5 blocks for 151,936
  // 37,449 columns fit; an even width, so that a block packs two columns a word in 16 bits
  assert.equal(vocabBlockWidth(151936, 896, 128 * 2 ** 20), 37448);
  assert.equal(blockRanges(151936, 37448).starts.length, 5);
  assert.equal(vocabBlockWidth(151936, 896, Infinity), 151936);
  assert.equal(baseName('model.embed_tokens.weight#2'), 'model.embed_tokens.weight');
});

for (const tie of [true, false]) {
  test(`${tie ? 'tied' : 'untied'} embeddings in 3 vocabulary blocks: logits and scores equal the unsplit model's bit for bit, gradients and an Adam step to ${GRAD_TOL}, the optimizer state round-trips`, async () => {
    await initBackend('cpu');
    const cfg = config(tie);
    const whole = Transformer.init(cfg, 11);
    const split = Transformer.init(cfg, 11, { vocabBlock: BLOCK });
    try {
      assert.equal(whole.vocabBlocks, 1);
      assert.equal(split.vocabBlocks, 3);
      const names = [...split.params.keys()].filter((n) => n.includes('#'));
      assert.deepEqual(
        names,
        tie
          ? ['model.embed_tokens.weight#0', 'model.embed_tokens.weight#1', 'model.embed_tokens.weight#2']
          : [
              'model.embed_tokens.weight#0',
              'model.embed_tokens.weight#1',
              'model.embed_tokens.weight#2',
              'lm_head.weight#0',
              'lm_head.weight#1',
              'lm_head.weight#2',
            ],
      );
      // the same seed draws the same network: the split happens after the values are drawn
      assert.deepEqual(await split.readWeights(), await whole.readWeights());

      const B = 2,
        T = 10;
      const rng = makeRng(5);
      // ids from every block, the blocks' edges included
      const ids = Int32Array.from({ length: B * T }, (_, i) => [0, 15, 16, 31, 32, 39][i % 6] ?? Math.floor(rng() * V));
      const mask = Float32Array.from({ length: B * T }, (_, i) => (i < 3 ? 0 : 1));
      const targets = Int32Array.from({ length: B * T }, (_, i) => (i * 7) % V);
      const weightsOf = Float32Array.from({ length: B * T }, () => rng() * 2 - 1);

      const logits = (m: Transformer) =>
        tf.tidy(() =>
          m
            .forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(mask, [B, T]))
            .logits.dataSync()
            .slice(),
        );
      assert.deepEqual(logits(split), logits(whole));

      const scores = async (m: Transformer) => {
        const idsT = tf.tensor2d(ids, [B, T], 'int32');
        const maskT = tf.tensor2d(mask, [B, T]);
        // budget 8: sub-blocks of 8 inside each stored block, the scorer's own blocking on top of the storage's
        const r = await m.scoreTokens(idsT, maskT, { from: 2, count: 8 }, targets.subarray(0, B * 8), 1, { budget: 8 });
        tf.dispose([idsT, maskT]);
        return r;
      };
      const [sw, ss] = [await scores(whole), await scores(split)];
      assert.deepEqual(ss.logp, sw.logp);
      assert.deepEqual(ss.entropy, sw.entropy);
      assert.deepEqual(ss.probSq, sw.probSq);

      const grads = (m: Transformer) => {
        const byVar = new Map([...m.params].map(([n, v]) => [v.name, n]));
        const { grads: g, value } = tf.variableGrads(() => {
          const { logits: z } = m.forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(mask, [B, T]));
          const picked = m.tokenLogprob(z.reshape([B * T, V]) as tf.Tensor2D, tf.tensor1d(targets, 'int32'));
          return tf.mean(tf.mul(picked, tf.tensor1d(weightsOf))) as tf.Scalar;
        }, [...m.params.values()]);
        value.dispose();
        return new Map(Object.entries(g).map(([k, t]) => [byVar.get(k)!, t]));
      };
      const gw = grads(whole);
      const gs = grads(split);
      for (const [name, g] of gw) {
        if (!name.endsWith('embed_tokens.weight') && name !== 'lm_head.weight') {
          const e = relErr(gs.get(name)!.dataSync(), g.dataSync());
          assert.ok(e <= GRAD_TOL, `${name}: relative error ${e}`);
          continue;
        }
        const axis = tie || name === 'lm_head.weight' ? 1 : 0;
        const shape = g.shape as [number, number];
        const { starts, widths } = blockRanges(V, BLOCK);
        const joined = joinHost(
          starts.map((_, i) => gs.get(`${name}#${i}`)!.dataSync() as Float32Array),
          shape,
          axis,
          starts,
          widths,
        );
        assert.ok(joined.some((v) => v !== 0));
        const e = relErr(joined, g.dataSync());
        assert.ok(e <= GRAD_TOL, `${name}: relative error ${e}`);
      }

      // one Adam step each: the same weights after, and the state saved under the weights' own names
      const optW = new Adam(1e-2);
      const optS = new Adam(1e-2);
      optW.apply(whole.trainable, Object.fromEntries([...whole.trainable].map(([n]) => [n, gw.get(n)!])) as Record<string, tf.Tensor>);
      optS.apply(split.trainable, Object.fromEntries([...split.trainable].map(([n]) => [n, gs.get(n)!])) as Record<string, tf.Tensor>);
      tf.dispose([...gw.values(), ...gs.values()]);
      const [ws, ww] = [await split.readWeights(), await whole.readWeights()];
      // the blocked weights (the others' first Adam step is lr·sign(g), which turns a k bias's rounding-noise gradient,
      // ~1e-10, into steps that differ by lr; their gradients and Adam moments are compared above and below)
      for (const [name, t] of Object.entries(ww).filter(([n]) => n === 'model.embed_tokens.weight' || n === 'lm_head.weight')) {
        assert.deepEqual(ws[name].shape, t.shape);
        const e = relErr(ws[name].data, t.data);
        assert.ok(e <= GRAD_TOL, `${name} after a step: relative error ${e}`);
      }
      const saved = split.joinOptimizerState(await optS.exportState());
      const savedW = await optW.exportState();
      assert.deepEqual(Object.keys(saved).sort(), Object.keys(savedW).sort());
      for (const [k, a] of Object.entries(savedW)) {
        assert.deepEqual(saved[k].shape, a.shape, k);
        assert.ok(relErr(saved[k].data, a.data) <= GRAD_TOL, k);
      }
      // a checkpoint written by either resumes on the other: the state splits back into this model's blocks
      const back = split.splitOptimizerState(saved);
      assert.deepEqual(back, await optS.exportState());
      assert.deepEqual(whole.splitOptimizerState(saved), saved);
      optW.dispose();
      optS.dispose();

      // model.freeze_embeddings freezes every block
      split.setTrainable({ freezeEmbeddings: true, lastLayers: null });
      assert.ok(![...split.trainable.keys()].some((n) => n.includes('#')));
    } finally {
      whole.dispose();
      split.dispose();
    }
  });
}
