// grad_norm: the size of the gradient a token's term Â·log π(a) sends to the logits. Expected values come
// from central finite differences of f(z) = Â·log softmax(z/T)_a in float64, on the logits a real (tiny) model gives
// at each position of a sampled completion; nothing here reuses the formula under test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { generate } from '../../../src/engine/model/sampler';
import { makeRng } from '../../../src/engine/core/rng';
import { gradNorms } from '../../../src/engine/session/token_log';

const cfg: ModelConfig = {
  vocabSize: 19,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dFf: 32,
  maxSeqLen: 32,
  ropeTheta: 10000,
  rmsEps: 1e-6,
  tieEmbeddings: false,
  qkvBias: true,
  arch: 'qwen2',
};

function sharpModel(seed: number): Transformer {
  const base = Transformer.init(cfg, seed);
  const w = base.exportWeights();
  base.dispose();
  const rng = makeRng(seed);
  for (const [name, t] of Object.entries(w)) if (!name.includes('norm')) for (let i = 0; i < t.data.length; i++) t.data[i] = 1.5 * (rng() - 0.5);
  return Transformer.fromWeights(cfg, w);
}

/** f(z) = adv · log softmax(z / T)[a], in float64 */
function f(z: number[], a: number, adv: number, T: number): number {
  const s = z.map((x) => x / T);
  const mx = Math.max(...s);
  const lse = mx + Math.log(s.reduce((acc, x) => acc + Math.exp(x - mx), 0));
  return adv * (s[a] - lse);
}

test('grad_norm equals the norm of the finite-difference gradient of Â·log π(a) with respect to the logits', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(5);
  const T = 0.7;
  const prompt = [2, 3, 4];
  const [seq] = await generate(m, [prompt], { maxNewTokens: 10, temperature: T, topP: 1, eosId: -1, rng: makeRng(9) });
  assert.equal(seq.ids.length, 10);
  // the logits at every position, from one full forward of prompt + completion
  const full = [...prompt, ...seq.ids];
  const logits = tf.tidy(() => {
    const { logits } = m.forward(tf.tensor2d(full, [1, full.length], 'int32'), tf.ones([1, full.length]) as tf.Tensor2D);
    return (logits.arraySync() as number[][][])[0];
  });
  // advantages of both signs and sizes, one per token
  const adv = seq.ids.map((_, t) => (t % 3 === 0 ? -1.3 : 0.4 + 0.1 * t));
  const got = gradNorms([adv], [seq.logprobs], [seq.probSq], T)![0];
  const h = 1e-5;
  let sharp = 0;
  for (let t = 0; t < seq.ids.length; t++) {
    const z = logits[prompt.length - 1 + t];
    const a = seq.ids[t];
    let sq = 0;
    for (let j = 0; j < z.length; j++) {
      const up = z.slice();
      const dn = z.slice();
      up[j] += h;
      dn[j] -= h;
      const g = (f(up, a, adv[t], T) - f(dn, a, adv[t], T)) / (2 * h);
      sq += g * g;
    }
    const want = Math.sqrt(sq);
    if (Math.exp(seq.logprobs[t]) > 0.8) sharp++;
    // the sampler reads float32 logits once and rounds π and Σπ² from them: agreement to ~1e-5 relative
    assert.ok(Math.abs(got[t] - want) <= 1e-4 * want + 1e-7, `token ${t}: grad_norm ${got[t]} vs finite differences ${want}`);
  }
  assert.ok(sharp < seq.ids.length, 'the completion is not all near-certain tokens (the norm would be ~0 everywhere)');
  // a token with Â = 0 gets no gradient; a certain token (π = 1, Σπ² = 1) none either
  assert.deepEqual(gradNorms([[0]], [[-0.5]], [[0.4]], 1), [[0]]);
  assert.ok(gradNorms([[2]], [[0]], [[1]], 1)![0][0] < 1e-12);
  // without the full distribution (an import without a model) there is no column
  assert.equal(gradNorms([[1]], [[-1]], [undefined], 1), undefined);
  m.dispose();
});
