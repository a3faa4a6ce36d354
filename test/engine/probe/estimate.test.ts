// The Monte Carlo estimator on a policy whose values are known in closed form. A transformer whose token embeddings
// are all equal and whose attention and MLP outputs are zero gives the same next-token distribution softmax(z) at every
// position, whatever the context: tokens are i.i.d. The reward is 1 when the completion holds an "a". With p(a) = 0.2,
// p(b) = 0.5, p(EOS) = 0.3 and r tokens left, an "a" comes before EOS or the budget with probability
// Σ_{k<r} 0.5^k · 0.2 = 0.4·(1 − 0.5^r), so V_t = 1 if the prefix holds an "a", else 0.4·(1 − 0.5^(L − t)).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import {
  estimateEpisode,
  meanSe,
  parsePositions,
  PROBE_MAX_ROLLOUTS,
  probePositions,
  probeRowsPerBatch,
  type ProbeEpisode,
} from '../../../src/engine/model/prefix_values';
import type { Tokenizer } from '../../../src/engine/core/types';
import { isUserError } from '../../../src/engine/core/errors';

// ids: 0 pad, 1 EOS, 2 "a", 3 "b", 4 "q" (prompt)
const V = 5;
const P = { a: 0.2, b: 0.5, eos: 0.3 };
const L = 6;
const cfg: ModelConfig = {
  vocabSize: V,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  nKvHeads: 1,
  dFf: 8,
  maxSeqLen: 16,
  ropeTheta: 10000,
  rmsEps: 1e-6,
  tieEmbeddings: false,
  qkvBias: true,
  arch: 'qwen2',
};

function iidModel(): Transformer {
  const base = Transformer.init(cfg, 1);
  const w = base.exportWeights();
  base.dispose();
  for (const [name, t] of Object.entries(w)) {
    if (name.includes('norm')) continue;
    if (name === 'lm_head.weight') continue;
    if (name === 'model.embed_tokens.weight') {
      // every token the same embedding: e = (1, 0, …, 0)
      t.data.fill(0);
      for (let v = 0; v < V; v++) t.data[v * cfg.dModel] = 1;
    } else t.data.fill(0);
  }
  // rmsNorm(e) = (√d, 0, …) (norm weights 1): logits = √d · lm_head row 0; set it to log p / √d
  const lm = w['lm_head.weight'];
  lm.data.fill(0);
  const logp = [-Infinity, Math.log(P.eos), Math.log(P.a), Math.log(P.b), -Infinity];
  const rowMajorVd = lm.shape[0] === V; // HF stores [V, d]
  for (let v = 0; v < V; v++) {
    const x = Number.isFinite(logp[v]) ? logp[v] / Math.sqrt(cfg.dModel) : -1e4;
    lm.data[rowMajorVd ? v * cfg.dModel : v] = x;
  }
  return Transformer.fromWeights(cfg, w);
}

const CH = ['', '', 'a', 'b', 'q'];
const tokenizer = { decode: (ids: number[]) => ids.map((i) => CH[i]).join(''), eosId: 1 } as unknown as Tokenizer;
const reward = (text: string) => (text.includes('a') ? 1 : 0);
const exact = (prefix: number[], t: number) => (prefix.slice(0, t).includes(2) ? 1 : 0.4 * (1 - 0.5 ** (L - t)));

test('the i.i.d. model samples with the probabilities the closed form assumes', async () => {
  await tf.setBackend('cpu');
  const m = iidModel();
  const { logits } = m.forward(tf.tensor2d([[4, 3, 2, 3]], [1, 4], 'int32'), tf.ones([1, 4]) as tf.Tensor2D);
  const p = tf.softmax(logits).arraySync() as number[][][];
  for (const row of p[0]) {
    assert.ok(Math.abs(row[2] - P.a) < 1e-5 && Math.abs(row[3] - P.b) < 1e-5 && Math.abs(row[1] - P.eos) < 1e-5, JSON.stringify(row));
  }
  m.dispose();
});

test('V_t and δ_t match the closed form within their standard errors, with 95 % intervals covering it about 95 % of the time', async () => {
  await tf.setBackend('cpu');
  const m = iidModel();
  // a completion "b b a b b EOS": V jumps to 1 at the "a" (δ_2 = 1 − 0.4·(1 − 0.5⁴) = 0.625)
  const ep: ProbeEpisode = { episode: 0, example: { id: 0, prompt: 'q' }, promptIds: [4], ids: [3, 3, 2, 3, 3, 1], reward: 1 };
  const positions = probePositions(6, { kind: 'every' }, []);
  let covered = 0;
  let checks = 0;
  const seeds = 40;
  for (let seed = 1; seed <= seeds; seed++) {
    const rows = (await estimateEpisode(m, tokenizer, ep, positions, {
      rollouts: 64,
      temperature: 1,
      topP: 1,
      maxNewTokens: L,
      seed,
      step: 1,
      reward,
    }))!;
    assert.equal(rows.length, 7);
    // V_n is the episode's own reward, not sampled
    // (known exactly: each half's variance as an estimate is 0)
    assert.deepEqual(rows[6], { episode: 0, position: 6, value: 1, valueSe: 0, rollouts: 0, valueA: 1, valueB: 1, varA: 0, varB: 0 });
    // the two halves of the M continuations (⌊M/2⌋ and the rest) average back to V
    for (const r of rows.slice(0, 6)) {
      const h = Math.floor(r.rollouts / 2);
      assert.ok(Math.abs((h * r.valueA! + (r.rollouts - h) * r.valueB!) / r.rollouts - r.value) < 1e-12, `halves of position ${r.position}`);
      // binary rewards: a half's s²/m is m/(m − 1)·V̂(1 − V̂)/m = V̂(1 − V̂)/(m − 1)
      const m = h;
      assert.ok(Math.abs(r.varA! - (r.valueA! * (1 - r.valueA!)) / (m - 1)) < 1e-12, `half A's variance at ${r.position}`);
    }
    for (const r of rows.slice(0, 6)) {
      const want = exact(ep.ids, r.position);
      if (want === 1) {
        assert.equal(r.value, 1, 'after the "a" every continuation is rewarded');
        continue;
      }
      checks++;
      if (Math.abs(r.value - want) <= 1.96 * Math.max(r.valueSe, 1e-9)) covered++;
      // far outside: 5 standard errors of the true Bernoulli sd
      assert.ok(Math.abs(r.value - want) < 5 * Math.sqrt((want * (1 - want)) / 64), `seed ${seed} t ${r.position}: ${r.value} vs ${want}`);
    }
    const delta2 = rows[3].value - rows[2].value;
    assert.ok(Math.abs(delta2 - (1 - exact(ep.ids, 2))) < 5 * Math.sqrt((exact(ep.ids, 2) * (1 - exact(ep.ids, 2))) / 64), `δ_2 ${delta2}`);
  }
  // 3 uncertain positions (t = 0, 1, 2) × 40 seeds; nominal 95 %, the plug-in se makes it a little lower
  const rate = covered / checks;
  assert.ok(rate > 0.85 && rate <= 1, `coverage ${rate} over ${checks} intervals`);
  m.dispose();
});

test('a probe is reproducible, and a position draws the same continuations whatever else shares its batch', async () => {
  await tf.setBackend('cpu');
  const m = iidModel();
  const ep: ProbeEpisode = { episode: 3, example: { id: 0, prompt: 'q' }, promptIds: [4], ids: [3, 3, 3, 3, 1], reward: 0 };
  const o = { rollouts: 16, temperature: 1, topP: 1, maxNewTokens: L, seed: 5, step: 7, reward };
  const all = (await estimateEpisode(m, tokenizer, ep, [0, 1, 2, 3, 4, 5], o))!;
  assert.deepEqual(await estimateEpisode(m, tokenizer, ep, [0, 1, 2, 3, 4, 5], o), all);
  // one row per generate() call instead of all in one
  const single = (await estimateEpisode(m, tokenizer, ep, [0, 1, 2, 3, 4, 5], { ...o, rowsPerBatch: 16 }))!;
  assert.deepEqual(single, all);
  const some = (await estimateEpisode(m, tokenizer, ep, [2, 5], o))!;
  assert.deepEqual(some, [all[2], all[5]]);
  // another seed, another draw
  assert.notDeepEqual(await estimateEpisode(m, tokenizer, ep, [0, 1, 2, 3, 4, 5], { ...o, seed: 6 }), all);
  // a stop request before a batch leaves the episode unfinished
  assert.equal(await estimateEpisode(m, tokenizer, ep, [0, 1], { ...o, stopped: () => true }), null);
  m.dispose();
});

test("a position's M continuations in parts of at most rowsPerBatch rows give the same values; M is bounded", async () => {
  await tf.setBackend('cpu');
  const m = iidModel();
  const ep: ProbeEpisode = { episode: 3, example: { id: 0, prompt: 'q' }, promptIds: [4], ids: [3, 3, 3, 3, 1], reward: 0 };
  const o = { rollouts: 16, temperature: 1, topP: 1, maxNewTokens: L, seed: 5, step: 7, reward };
  const all = (await estimateEpisode(m, tokenizer, ep, [0, 1, 2, 3, 4, 5], o))!;
  // 16 continuations of each position in calls of 5, 5, 5 and 1 rows: continuation m draws from its own stream
  let calls = 0;
  const parts = (await estimateEpisode(m, tokenizer, ep, [0, 1, 2, 3, 4, 5], { ...o, rowsPerBatch: 5, onRows: () => calls++ }))!;
  assert.deepEqual(parts, all);
  assert.equal(calls, 5 * 4, '5 open positions × 4 parts');
  // the default batch follows the KV cache's size: 256 rows of this tiny model, 1 of a model whose rows are huge
  assert.equal(probeRowsPerBatch(cfg, 16), 256);
  assert.equal(probeRowsPerBatch({ ...cfg, nLayers: 24, nKvHeads: 2, nHeads: 14, dModel: 896 }, 1 << 20), 1);
  await assert.rejects(
    estimateEpisode(m, tokenizer, ep, [0], { ...o, rollouts: PROBE_MAX_ROLLOUTS + 1 }),
    (e: unknown) =>
      isUserError(e) && new RegExp(`--rollouts: got ${PROBE_MAX_ROLLOUTS + 1}; expected an integer from 2 to ${PROBE_MAX_ROLLOUTS}`).test((e as Error).message),
  );
  m.dispose();
});

test('positions: every, segments and cutpoints, always with 0 and n; bad specs name what is allowed', () => {
  assert.deepEqual(probePositions(4, parsePositions('every'), []), [0, 1, 2, 3, 4]);
  assert.deepEqual(probePositions(7, parsePositions('segments:3'), []), [0, 3, 6, 7]);
  // π = 0.9, 0.05, 0.6, 0.2: tokens 1 and 3 are below τ = 0.3, probed before and after
  assert.deepEqual(probePositions(4, parsePositions('cutpoints:0.3'), [0.9, 0.05, 0.6, 0.2].map(Math.log)), [0, 1, 2, 3, 4]);
  assert.deepEqual(probePositions(4, parsePositions('cutpoints:0.1'), [0.9, 0.05, 0.6, 0.2].map(Math.log)), [0, 1, 2, 4]);
  for (const bad of ['all', 'segments:0', 'segments:1.5', 'cutpoints:1', 'cutpoints:x']) {
    assert.throws(
      () => parsePositions(bad),
      (e: unknown) => isUserError(e) && e.message.includes(JSON.stringify(bad)) && e.message.includes('segments:S'),
    );
  }
  // standard error: sample sd / √M (hand: 0,1,1,1 → mean 0.75, sd² = 0.25, se = 0.25)
  assert.deepEqual(meanSe([0, 1, 1, 1]), { mean: 0.75, se: 0.25 });
});

test("generate's stop ends a batch between decode steps, and a stop that never fires changes nothing", async () => {
  await tf.setBackend('cpu');
  const { generate, SamplingStopped } = await import('../../../src/engine/model/sampler');
  const { makeRng } = await import('../../../src/engine/core/rng');
  const m = Transformer.init({ ...cfg, maxSeqLen: 40 }, 3);
  // an EOS id the model never draws (outside the vocabulary), so every row runs to its budget of 32 tokens
  const opts = { maxNewTokens: 32, temperature: 1, topP: 1, eosId: 99 };
  const plain = await generate(m, [[4, 3]], { ...opts, rng: makeRng(5), repeat: 4 });
  let asked = 0;
  const never = await generate(m, [[4, 3]], { ...opts, rng: makeRng(5), repeat: 4, stop: () => (asked++, false) });
  assert.deepEqual(never, plain, 'the same draws');
  assert.equal(asked, 8, 'asked every 4th of 32 decode steps');
  // a stop that fires on its second look: sampling ends 8 decode steps in, long before the budget
  let looks = 0;
  await assert.rejects(generate(m, [[4, 3]], { ...opts, rng: makeRng(5), repeat: 4, stop: () => ++looks >= 2 }), (e) => e instanceof SamplingStopped);
  assert.equal(looks, 2);
  // the probe's estimate returns null (stopped) from inside its one batch
  let calls = 0;
  const ep: ProbeEpisode = { episode: 0, example: { id: 0, prompt: 'q' }, promptIds: [4], ids: Array(20).fill(3), reward: 0 };
  const tok = { decode: () => '', eosId: 99 } as unknown as Tokenizer;
  const got = await estimateEpisode(m, tok, ep, [0], {
    rollouts: 64,
    temperature: 1,
    topP: 1,
    maxNewTokens: 32,
    seed: 1,
    step: 1,
    reward,
    stopped: () => ++calls > 2,
  });
  assert.equal(got, null);
  assert.equal(calls, 3, 'twice before the batch, then once inside generate');
  m.dispose();
});
