import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { generate, logSoftmaxRows, nucleus, rowStats } from '../../../src/engine/model/sampler';
import { makeRng } from '../../../src/engine/core/rng';
import { isUserError } from '../../../src/engine/core/errors';

const cfg: ModelConfig = {
  vocabSize: 23,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dFf: 32,
  maxSeqLen: 40,
  ropeTheta: 10000,
  rmsEps: 1e-6,
  tieEmbeddings: false,
  qkvBias: true,
  arch: 'qwen2',
};

/** Weights of std ≈ 0.3 so the next-token distributions are far from uniform and depend on the context. */
function sharpModel(seed: number, edit?: (w: Record<string, { shape: number[]; data: Float32Array }>) => void): Transformer {
  const base = Transformer.init(cfg, seed);
  const w = base.exportWeights();
  base.dispose();
  const rng = makeRng(seed);
  for (const [name, t] of Object.entries(w)) if (!name.includes('norm')) for (let i = 0; i < t.data.length; i++) t.data[i] = rng() - 0.5;
  edit?.(w);
  return Transformer.fromWeights(cfg, w);
}

/** log_softmax(logits / temperature) of one unpadded row at every position, from a fresh full forward. */
function fullLogprobs(m: Transformer, seq: number[], temperature: number): number[][] {
  const ids = tf.tensor2d(seq, [1, seq.length], 'int32');
  const mask = tf.ones([1, seq.length]) as tf.Tensor2D;
  const { logits } = m.forward(ids, mask);
  const lp = tf.logSoftmax(tf.div(logits, temperature));
  const out = (lp.arraySync() as number[][][])[0];
  tf.dispose([ids, mask, logits, lp]);
  return out;
}

const prompts = [
  [3, 4, 5, 6, 7],
  [8, 9],
  [10, 11, 12],
];
const base = { maxNewTokens: 8, temperature: 1, topP: 1, eosId: -1 };

test('greedy with the KV cache equals greedy by re-running the full forward', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(1);
  const got = await generate(m, prompts, { ...base, greedy: true, rng: makeRng(0) });
  for (let b = 0; b < prompts.length; b++) {
    const seq = [...prompts[b]];
    for (let s = 0; s < 8; s++) {
      const lp = fullLogprobs(m, seq, 1).at(-1)!;
      seq.push(lp.indexOf(Math.max(...lp)));
    }
    assert.deepEqual(got[b].ids, seq.slice(prompts[b].length), `row ${b}`);
    assert.equal(got[b].stopped, 'length');
  }
  // the rows did not all collapse to one token (else the comparison above would be weak)
  assert.ok(new Set(got.flatMap((g) => g.ids)).size > 3);
  m.dispose();
});

test('returned logprobs and entropies equal a fresh full forward (temperature 0.7, top-p 0.9)', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(2);
  const got = await generate(m, prompts, { ...base, temperature: 0.7, topP: 0.9, rng: makeRng(11) });
  for (let b = 0; b < prompts.length; b++) {
    const P = prompts[b].length;
    const lp = fullLogprobs(m, [...prompts[b], ...got[b].ids], 0.7);
    got[b].ids.forEach((id, t) => {
      const row = lp[P - 1 + t];
      assert.ok(Math.abs(got[b].logprobs[t] - row[id]) < 1e-4, `logprob row ${b} token ${t}`);
      const h = -row.reduce((s, l) => s + Math.exp(l) * l, 0);
      assert.ok(Math.abs(got[b].entropies[t] - h) < 1e-4, `entropy row ${b} token ${t}`);
    });
  }
  m.dispose();
});

test('entropy of a uniform policy is log V and its logprob is −log V', async () => {
  await tf.setBackend('cpu');
  // lm_head = 0 → all logits 0 → uniform over V = 23 tokens: H = log 23 = 3.135494, logprob = −3.135494
  const m = sharpModel(3, (w) => w['lm_head.weight'].data.fill(0));
  const got = await generate(m, [[1, 2]], { ...base, maxNewTokens: 3, temperature: 0.5, rng: makeRng(1) });
  for (const h of got[0].entropies) assert.ok(Math.abs(h - Math.log(23)) < 1e-5);
  for (const l of got[0].logprobs) assert.ok(Math.abs(l + Math.log(23)) < 1e-5);
  m.dispose();
});

test('seeded sampling is reproducible; a tiny top-p is greedy', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(4);
  const a = await generate(m, prompts, { ...base, temperature: 1.3, rng: makeRng(7) });
  const b = await generate(m, prompts, { ...base, temperature: 1.3, rng: makeRng(7) });
  const c = await generate(m, prompts, { ...base, temperature: 1.3, rng: makeRng(8) });
  assert.deepEqual(a, b);
  assert.notDeepEqual(
    a.map((s) => s.ids),
    c.map((s) => s.ids),
  );
  const greedy = await generate(m, prompts, { ...base, greedy: true, rng: makeRng(0) });
  const tiny = await generate(m, prompts, { ...base, topP: 1e-6, rng: makeRng(5) });
  assert.deepEqual(
    tiny.map((s) => s.ids),
    greedy.map((s) => s.ids),
  );
  m.dispose();
});

test('EOS is kept as the last token and stops its row; stopAfter stops on the decoded text', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(5);
  const free = await generate(m, prompts, { ...base, greedy: true, rng: makeRng(0) });
  const eosId = free[0].ids[2];
  const withEos = await generate(m, prompts, { ...base, greedy: true, eosId: [99, eosId], rng: makeRng(0) });
  free.forEach((f, b) => {
    const k = f.ids.indexOf(eosId);
    if (k < 0) {
      assert.deepEqual(withEos[b], f);
    } else {
      // greedy is deterministic, so the row is the free row cut right after its first EOS
      assert.deepEqual(withEos[b].ids, f.ids.slice(0, k + 1));
      assert.deepEqual(withEos[b].logprobs, f.logprobs.slice(0, k + 1));
      assert.equal(withEos[b].stopped, 'eos');
    }
  });
  assert.equal(withEos[0].stopped, 'eos');

  const decode = (ids: number[]) => ids.map((i) => String.fromCharCode(97 + i)).join('');
  const stop = decode(free[1].ids.slice(1, 3));
  const stopped = await generate(m, prompts, { ...base, greedy: true, stopAfter: ['nope', stop], decode, rng: makeRng(0) });
  free.forEach((f, b) => {
    const text = decode(f.ids);
    const at = text.indexOf(stop);
    if (at < 0) assert.equal(stopped[b].stopped, 'length');
    else {
      assert.equal(stopped[b].stopped, 'stop');
      assert.equal(decode(stopped[b].ids), text.slice(0, at + stop.length)); // one char per token here
    }
  });
  assert.equal(stopped[1].stopped, 'stop');
  m.dispose();
});

test('batching is invisible: each row equals its own single-row generation', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(6);
  const eosId = 4;
  const batch = await generate(m, prompts, { ...base, greedy: true, eosId, rng: makeRng(0) });
  for (const [b, p] of prompts.entries()) {
    const alone = (await generate(m, [p], { ...base, greedy: true, eosId, rng: makeRng(0) }))[0];
    assert.deepEqual(batch[b].ids, alone.ids);
    batch[b].logprobs.forEach((l, t) => assert.ok(Math.abs(l - alone.logprobs[t]) < 1e-5));
  }
  m.dispose();
});

test('no tensor leaks, and prompt + max_new_tokens must fit max_seq_len', async () => {
  await tf.setBackend('cpu');
  const m = sharpModel(7);
  await generate(m, prompts, { ...base, eosId: 3, rng: makeRng(1) });
  const before = tf.memory().numTensors;
  await generate(m, prompts, { ...base, eosId: 3, topP: 0.8, rng: makeRng(2) });
  await generate(m, prompts, { ...base, greedy: true, rng: makeRng(2) });
  assert.equal(tf.memory().numTensors, before);
  // longest prompt 5 + 36 = 41 > 40
  await assert.rejects(
    () => generate(m, prompts, { ...base, maxNewTokens: 36, rng: makeRng(1) }),
    (e: unknown) => isUserError(e) && /5 tokens\) \+ max_new_tokens \(36\) = 41 exceeds the model's max_seq_len \(40\)/.test((e as Error).message),
  );
  assert.equal(tf.memory().numTensors, before);
  m.dispose();
});

test('nucleus picks by the cumulative mass; row entropy (hand-computed)', () => {
  const lp = Float32Array.from([0.5, 0.3, 0.15, 0.05].map(Math.log));
  // top_p 0.7: the nucleus is {0, 1} (0.5 < 0.7 ≤ 0.8), renormalised: token 0 for u < 0.5/0.8 = 0.625
  assert.equal(nucleus(lp, 0.7, 0.6), 0);
  assert.equal(nucleus(lp, 0.7, 0.65), 1);
  assert.equal(nucleus(lp, 0.7, 0.999), 1);
  // top_p 0.85: {0, 1, 2} with mass 0.95; u = 0.9 → target 0.855 > 0.8 → token 2
  assert.equal(nucleus(lp, 0.85, 0.9), 2);
  // entropy: −(0.5 ln 0.5 + 0.3 ln 0.3 + 0.15 ln 0.15 + 0.05 ln 0.05) = 1.142120 (python: 1.1421200429883351)
  const { entropy, mass } = rowStats(lp);
  assert.ok(Math.abs(entropy - 1.14212004) < 1e-6);
  assert.ok(Math.abs(mass - 1) < 1e-6);
  // a flat distribution over 2000 tokens (p = 5e-4 < the first threshold 1e-3) goes through the exact fallback:
  // top_p 0.5 keeps the first 1000 ids (ties by id), so u → 0.999 picks id 999
  const flat = new Float32Array(2000).fill(Math.log(1 / 2000));
  assert.equal(nucleus(flat, 0.5, 0.999), 999);
  assert.equal(nucleus(flat, 0.5, 0), 0);
});

test("logSoftmaxRows (the sampler's host-side log-softmax): hand-computed rows and tf.logSoftmax on cpu", async () => {
  // [0, ln 3] → p = [1/4, 3/4]; at temperature 2 the logits halve: [0, ln 3 / 2] → p ∝ [1, √3].
  const got = logSoftmaxRows(Float32Array.from([0, Math.log(3), 0, Math.log(3)]), 2, 1);
  assert.ok(Math.abs(got[0] - Math.log(1 / 4)) < 1e-7 && Math.abs(got[1] - Math.log(3 / 4)) < 1e-7, String(got));
  const hot = logSoftmaxRows(Float32Array.from([0, Math.log(3)]), 2, 2);
  assert.ok(Math.abs(hot[0] - Math.log(1 / (1 + Math.sqrt(3)))) < 1e-7 && Math.abs(hot[1] - Math.log(Math.sqrt(3) / (1 + Math.sqrt(3)))) < 1e-7);
  await tf.setBackend('cpu');
  const rng = makeRng(9);
  const x = Float32Array.from({ length: 5 * 37 }, () => 20 * (rng() - 0.5));
  for (const T of [1, 0.7]) {
    const want = tf.tidy(() => tf.logSoftmax(tf.tensor2d(x, [5, 37]).div(T)).dataSync());
    const mine = logSoftmaxRows(x, 37, T);
    mine.forEach((v, i) => assert.ok(Math.abs(v - want[i]) < 2e-5, `T=${T} [${i}] ${v} vs ${want[i]}`));
  }
});
