// model.torch_dtype: the frozen projections in 16 bits. On webgpu (lavapipe here) they are packed two values a word
// and multiplied by matMulHalf's kernel; on cpu they are rounded in place and multiplied in float32. Both must compute
// the same model: the logits, the adapters' gradients and greedy decoding agree to float32's summation noise, which
// is far below what the rounding itself moves (the float32 model is the control that the rounding took effect).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/engine/model/backend';
import { Transformer, type StoredFrozen, type WeightTensor } from '../../../src/engine/model/model';
import { generate } from '../../../src/engine/model/sampler';
import { makeRng, randNormal } from '../../../src/engine/core/rng';
import { roundTo, type HalfFormat } from '../../../src/engine/model/half';
import { relErr, smallModelConfig } from '../fixtures';

const CFG = smallModelConfig({ maxSeqLen: 24 });
// per layer q|k|v [32, 64], o [32, 32], gate|up [32, 128], down [64, 32]; and the tied embedding [32, 40]
const FROZEN_VALUES =
  CFG.nLayers * CFG.dModel * ((CFG.nHeads + 2 * CFG.nKvHeads) * (CFG.dModel / CFG.nHeads) + CFG.dModel + 3 * CFG.dFf) + CFG.dModel * CFG.vocabSize;

interface Seen {
  logits: Float32Array;
  grads: Map<string, Float32Array>;
  tokens: number[][];
  base: Record<string, WeightTensor>;
  stored: StoredFrozen | null;
  /** scoreTokens of the completions (blocked over the vocabulary), log-probs, entropies, top 3 and ranks */
  scores: number[][];
  /** bytes the backend's memory shrank by when the weights were stored */
  saved: number;
}

async function run(backend: 'cpu' | 'webgpu', format: HalfFormat | null): Promise<Seen> {
  await initBackend(backend);
  // the embedding in 5 vocabulary blocks of 8, as a small binding limit stores it: each block packs on its own
  const m = Transformer.init(CFG, 11, { vocabBlock: 8 });
  m.enableLora({ r: 4 }, 5);
  // B starts at zero (PEFT): set it, so that the adapters change the output and A's gradient is not zero
  const rng = makeRng(9);
  for (const [n, v] of m.trainable)
    if (n.endsWith('lora_B.weight'))
      v.assign(
        tf.tensor(
          Float32Array.from({ length: v.size }, () => 0.05 * randNormal(rng)),
          v.shape,
        ),
      );
  const before = tf.memory().numBytes;
  const stored = format ? await m.storeFrozen(format) : null;
  const saved = before - tf.memory().numBytes;
  try {
    // two rows, the second left-padded
    const ids = tf.tensor2d([3, 7, 1, 9, 12, 5, 0, 0, 4, 8, 2, 6], [2, 6], 'int32');
    const mask = tf.tensor2d([1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1], [2, 6]);
    const logitsT = m.forward(ids, mask).logits;
    const logits = Float32Array.from(await logitsT.data());
    const wr = makeRng(3);
    const R = tf.tensor(
      Float32Array.from({ length: logitsT.size }, () => randNormal(wr)),
      logitsT.shape,
    );
    logitsT.dispose();
    const names = [...m.trainable.keys()];
    const { grads, value } = tf.variableGrads(() => tf.sum(tf.mul(m.forward(ids, mask).logits, R)) as tf.Scalar, [...m.trainable.values()]);
    const byName = new Map<string, Float32Array>();
    const vars = [...m.trainable.values()];
    for (const [i, n] of names.entries()) byName.set(n, Float32Array.from(await grads[vars[i].name].data()));
    tf.dispose([R, value, ...Object.values(grads)]);
    const out = await generate(
      m,
      [
        [1, 2, 3],
        [4, 5],
      ],
      { maxNewTokens: 8, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(1) },
    );
    // scoring a slice of the vocabulary at a time (a budget of 6 columns, inside the blocks of 8), with top 3 and ranks
    const sc = await m.scoreTokens(ids, mask, { from: 2, count: 3 }, Int32Array.from([1, 9, 12, 2, 6, 39]), 0.7, { budget: 6, topK: 3, rank: true });
    const scores = [Array.from(sc.logp), Array.from(sc.entropy), Array.from(sc.top!.logp), Array.from(sc.top!.ids), Array.from(sc.top!.rank)];
    const view = m.baseView();
    const base = await view.readWeights();
    view.dispose();
    tf.dispose([ids, mask]);
    return { logits, grads: byName, tokens: out.map((s) => s.ids), base, stored, saved, scores };
  } finally {
    m.dispose();
  }
}

for (const format of ['float16', 'bfloat16'] as const) {
  test(
    `LoRA on a ${format} base: webgpu's packed weights compute cpu's rounded model (logits, gradients, greedy decoding, blocked scoring), in half the bytes`,
    { timeout: 120_000 },
    async (t) => {
      const f32 = await run('cpu', null);
      const cpu = await run('cpu', format);
      try {
        await initBackend('webgpu');
      } catch {
        t.skip('webgpu is not available here');
        return;
      }
      const gpu = await run('webgpu', format);
      // under LoRA every projection of both layers and the embedding are frozen: packed on webgpu, rounded on cpu
      assert.deepEqual(gpu.stored, { weights: 4 * CFG.nLayers + 1, packed: FROZEN_VALUES, rounded: 0 });
      assert.deepEqual(cpu.stored, { weights: 4 * CFG.nLayers + 1, packed: 0, rounded: FROZEN_VALUES });
      assert.equal(gpu.saved, 2 * FROZEN_VALUES, 'two bytes saved per frozen value on webgpu');
      assert.equal(cpu.saved, 0, 'cpu keeps float32');
      // the weights read back are the rounded ones, bit for bit, on both backends
      for (const [name, w] of Object.entries(f32.base)) {
        const want = /proj\.weight$|embed_tokens/.test(name) ? roundTo(format, w.data) : w.data;
        assert.deepEqual(gpu.base[name].data, want, `${name} on webgpu`);
        assert.deepEqual(cpu.base[name].data, want, `${name} on cpu`);
      }
      const noise = relErr(gpu.logits, cpu.logits);
      const rounding = relErr(cpu.logits, f32.logits);
      assert.ok(noise < 1e-5, `logits: webgpu vs cpu ${noise}`);
      assert.ok(rounding > 20 * noise, `the rounding moves the logits (${rounding}) well beyond the backends' difference (${noise})`);
      for (const [name, g] of cpu.grads) {
        assert.ok(
          g.some((v) => v !== 0),
          `${name}: a zero gradient would make the check vacuous`,
        );
        const e = relErr(gpu.grads.get(name)!, g);
        assert.ok(e < 1e-4, `${name}: gradient off by ${e}`);
      }
      assert.deepEqual(
        cpu.tokens.map((ids) => ids.length),
        [8, 8],
      );
      assert.deepEqual(gpu.tokens, cpu.tokens, 'greedy decoding through the KV cache');
      console.log('DBG', relErr(gpu.scores[0], f32.scores[0]), relErr(cpu.scores[0], f32.scores[0]), gpu.scores[0], cpu.scores[0], f32.scores[0]);
      // scoring: log-probs, entropies and the top lists' log-probs to float32's noise; the same ids and ranks
      for (const k of [0, 1, 2]) assert.ok(relErr(gpu.scores[k], cpu.scores[k]) < 1e-5, `scores ${k}: ${relErr(gpu.scores[k], cpu.scores[k])}`);
      assert.deepEqual(gpu.scores.slice(3), cpu.scores.slice(3), 'top ids and ranks');
      assert.ok(relErr(cpu.scores[0], f32.scores[0]) > 0, 'the rounding moves the scores');
      console.log('DBG', relErr(gpu.scores[0], f32.scores[0]), relErr(cpu.scores[0], f32.scores[0]), gpu.scores[0], cpu.scores[0], f32.scores[0]);
      // scoring: log-probs, entropies and the top lists' log-probs to float32's noise; the same ids and ranks
      for (const k of [0, 1, 2]) assert.ok(relErr(gpu.scores[k], cpu.scores[k]) < 1e-5, `scores ${k}: ${relErr(gpu.scores[k], cpu.scores[k])}`);
      assert.deepEqual(gpu.scores.slice(3), cpu.scores.slice(3), 'top ids and ranks');
      assert.ok(relErr(cpu.scores[0], f32.scores[0]) > 0, 'the rounding moves the scores');
    },
  );
}
