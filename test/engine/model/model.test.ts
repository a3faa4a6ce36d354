import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { Transformer, type ModelConfig, ropeInvFreq } from '../../../src/engine/model/model';
import { isUserError } from '../../../src/engine/core/errors';

// The exact HF math (layer formulas, GQA, RoPE) is checked against an independent float64 forward in
// hf.test.ts; these tests check the invariances the trainer and sampler rely on.

const qwenCfg: ModelConfig = {
  vocabSize: 23,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dFf: 24,
  maxSeqLen: 32,
  ropeTheta: 10000,
  rmsEps: 1e-6,
  tieEmbeddings: true,
  qkvBias: true,
  arch: 'qwen2',
};
const llamaCfg: ModelConfig = { ...qwenCfg, tieEmbeddings: false, qkvBias: false, nKvHeads: 4, arch: 'llama' };

async function setup() {
  await tf.setBackend('cpu');
}

/** A model with weights large enough (std 0.3) that attention is far from uniform, so masking errors show. */
function sharpModel(cfg: ModelConfig, seed: number): Transformer {
  const base = Transformer.init(cfg, seed);
  const w = base.exportWeights();
  base.dispose();
  let s = seed * 7919 + 1;
  for (const [name, t] of Object.entries(w)) {
    if (name.includes('norm')) continue;
    for (let i = 0; i < t.data.length; i++) {
      s = (s * 1103515245 + 12345) % 2147483648;
      t.data[i] = (s / 2147483648 - 0.5) * 1.0;
    }
  }
  return Transformer.fromWeights(cfg, w);
}

function run(m: Transformer, rows: number[][], pad: number[]): number[][][] {
  const T = rows[0].length;
  const ids = tf.tensor2d(rows.flat(), [rows.length, T], 'int32');
  const mask = tf.tensor2d(
    rows.flatMap((r, b) => r.map((_, t) => (t < pad[b] ? 0 : 1))),
    [rows.length, T],
  );
  const { logits } = m.forward(ids, mask);
  const out = logits.arraySync() as number[][][];
  tf.dispose([ids, mask, logits]);
  return out;
}

function maxAbsDiff(a: number[], b: number[]): number {
  assert.equal(a.length, b.length);
  return Math.max(...a.map((v, i) => Math.abs(v - b[i])));
}

test('init is deterministic in the seed', async () => {
  await setup();
  const a = Transformer.init(qwenCfg, 5);
  const b = Transformer.init(qwenCfg, 5);
  const c = Transformer.init(qwenCfg, 6);
  const name = 'model.layers.1.mlp.gate_up_proj.weight';
  assert.deepEqual(a.params.get(name)!.dataSync(), b.params.get(name)!.dataSync());
  assert.notDeepEqual(a.params.get(name)!.dataSync(), c.params.get(name)!.dataSync());
  // std 0.02 for projections, 0.02/√(2·nLayers) = 0.01 for o_proj/down_proj (GPT-2 residual scaling)
  const std = (x: Float32Array) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length);
  const big = Transformer.init({ ...qwenCfg, dModel: 64, dFf: 256 }, 1);
  const bigW = big.exportWeights();
  assert.ok(Math.abs(std(bigW['model.layers.0.mlp.up_proj.weight'].data) - 0.02) < 0.001);
  assert.ok(Math.abs(std(bigW['model.layers.0.mlp.down_proj.weight'].data) - 0.01) < 0.0005);
  assert.deepEqual(Array.from(a.params.get('model.norm.weight')!.dataSync()), new Array(16).fill(1));
  [a, b, c, big].forEach((m) => m.dispose());
});

test('fused q/k/v and gate/up parameters hold the HF projections side by side', async () => {
  await setup();
  const m = sharpModel(qwenCfg, 12);
  const w = m.exportWeights();
  // stored [in, out] with columns q | k | v: qkv[i][c] is q_proj[c][i] for c < 16, k_proj[c − 16][i] for the
  // next 8 (2 kv heads × hd 4), v_proj[c − 24][i] after that
  const qkv = m.params.get('model.layers.1.self_attn.qkv_proj.weight')!;
  assert.deepEqual(qkv.shape, [16, 32]);
  const s = qkv.arraySync() as number[][];
  const hf = (n: string, r: number, c: number) => w[`model.layers.1.self_attn.${n}`].data[r * 16 + c];
  for (let i = 0; i < 16; i++) {
    for (let c = 0; c < 16; c++) assert.equal(s[i][c], hf('q_proj.weight', c, i));
    for (let c = 0; c < 8; c++) assert.equal(s[i][16 + c], hf('k_proj.weight', c, i));
    for (let c = 0; c < 8; c++) assert.equal(s[i][24 + c], hf('v_proj.weight', c, i));
  }
  const bias = m.params.get('model.layers.1.self_attn.qkv_proj.bias')!.dataSync();
  assert.deepEqual(Array.from(bias), [
    ...w['model.layers.1.self_attn.q_proj.bias'].data,
    ...w['model.layers.1.self_attn.k_proj.bias'].data,
    ...w['model.layers.1.self_attn.v_proj.bias'].data,
  ]);
  const gu = m.params.get('model.layers.0.mlp.gate_up_proj.weight')!.arraySync() as number[][];
  assert.deepEqual([gu.length, gu[0].length], [16, 48]);
  for (let i = 0; i < 16; i++)
    for (let c = 0; c < 24; c++) {
      assert.equal(gu[i][c], w['model.layers.0.mlp.gate_proj.weight'].data[c * 16 + i]);
      assert.equal(gu[i][24 + c], w['model.layers.0.mlp.up_proj.weight'].data[c * 16 + i]);
    }
  assert.ok(!m.params.has('model.layers.0.self_attn.q_proj.weight'));
  m.dispose();
});

test('left padding with key masking gives the unpadded logits (GQA + bias, and llama)', async () => {
  await setup();
  for (const cfg of [qwenCfg, llamaCfg]) {
    const m = sharpModel(cfg, 3);
    const seqA = [4, 9, 1, 17, 5, 3];
    const seqB = [8, 2, 11];
    const alone = run(m, [seqB], [0])[0];
    const padded = run(m, [seqA, [0, 0, 0, ...seqB]], [0, 3]);
    for (let t = 0; t < 3; t++) assert.ok(maxAbsDiff(padded[1][t + 3], alone[t]) < 1e-4, `${cfg.arch} position ${t}`);
    // a different pad id must not matter either
    const padded2 = run(m, [[22, 22, 22, ...seqB]], [3]);
    assert.ok(maxAbsDiff(padded2[0][5], alone[2]) < 1e-4);
    // and the padded row's presence does not change the other row
    assert.ok(maxAbsDiff(padded[0][5], run(m, [seqA], [0])[0][5]) < 1e-4);
    // sanity: attention is sharp enough that the context matters (else the test above could not fail)
    assert.ok(maxAbsDiff(run(m, [[9, 9, 8, 2, 11]], [0])[0][4], alone[2]) > 1e-2);
    m.dispose();
  }
});

test('prefill + decodeStep reproduce the full forward logits (with padding and row selection)', async () => {
  await setup();
  for (const cfg of [qwenCfg, llamaCfg]) {
    const m = sharpModel(cfg, 4);
    const rows = [
      [0, 0, 5, 6, 7],
      [1, 2, 3, 4, 5],
      [0, 0, 0, 9, 10],
    ];
    const pad = [2, 0, 3];
    const next = [
      [12, 13, 14],
      [15, 16, 17],
      [18, 19, 20],
    ];
    const full = run(
      m,
      rows.map((r, i) => [...r, ...next[i]]),
      pad,
    );
    const ids = tf.tensor2d(rows.flat(), [3, 5], 'int32');
    const mask = tf.tensor2d(
      rows.flatMap((r, b) => r.map((_, t) => (t < pad[b] ? 0 : 1))),
      [3, 5],
    );
    let { logits, cache } = m.prefill(ids, mask);
    tf.dispose([ids, mask]);
    let live = [0, 1, 2];
    for (let s = 0; s < 3; s++) {
      const got = logits.arraySync() as number[][];
      live.forEach((row, r) => assert.ok(maxAbsDiff(got[r], full[row][4 + s]) < 1e-4, `${cfg.arch} row ${row} step ${s}`));
      logits.dispose();
      if (s === 1) {
        // drop row 1 mid-way, as the sampler does for finished sequences
        cache = m.keepCacheRows(cache, [0, 2]);
        live = [0, 2];
      }
      ({ logits, cache } = m.decodeStep(
        cache,
        live.map((row) => next[row][s]),
      ));
    }
    logits.dispose();
    m.disposeCache(cache);
    m.dispose();
  }
});

test('logitsFrom, hidden and attention outputs', async () => {
  await setup();
  const m = sharpModel(qwenCfg, 9);
  const ids = tf.tensor2d(
    [
      [0, 0, 3, 4, 5],
      [6, 7, 8, 9, 10],
    ],
    [2, 5],
    'int32',
  );
  const mask = tf.tensor2d(
    [
      [0, 0, 1, 1, 1],
      [1, 1, 1, 1, 1],
    ],
    [2, 5],
  );
  const full = m.forward(ids, mask, { returnHidden: true, returnAttention: true });
  const part = m.forward(ids, mask, { logitsFrom: 3 });
  assert.deepEqual(part.logits.shape, [2, 2, 23]);
  assert.ok(tf.max(tf.abs(tf.sub(part.logits, full.logits.slice([0, 3, 0], [2, 2, 23])))).dataSync()[0] < 1e-5);
  assert.deepEqual(full.hidden!.shape, [2, 5, 16]);
  const att = full.attention!.arraySync() as number[][][][];
  assert.deepEqual(full.attention!.shape, [2, 4, 5, 5]);
  for (let b = 0; b < 2; b++)
    for (let h = 0; h < 4; h++)
      for (let i = 0; i < 5; i++) {
        if (b === 0 && i < 2) continue; // padded query rows are garbage by design
        const row = att[b][h][i];
        assert.ok(Math.abs(row.reduce((s, v) => s + v, 0) - 1) < 1e-5);
        for (let j = 0; j < 5; j++) if (j > i || (b === 0 && j < 2)) assert.equal(row[j], 0, `future/padded key b${b} h${h} i${i} j${j}`);
      }
  // hidden is RMS-normed with unit weights: mean square ≈ 1 per position (formula: x·rsqrt(mean(x²)+eps))
  const hid = full.hidden!.arraySync() as number[][][];
  assert.ok(Math.abs(hid[1][2].reduce((s, v) => s + v * v, 0) / 16 - 1) < 1e-3);
  tf.dispose([ids, mask, full.logits, full.hidden!, full.attention!, part.logits]);
  m.dispose();
});

test('no tensors leak across forward / prefill / decode', async () => {
  await setup();
  const m = Transformer.init(qwenCfg, 1);
  const ids = tf.tensor2d(
    [
      [1, 2, 3],
      [0, 4, 5],
    ],
    [2, 3],
    'int32',
  );
  const mask = tf.tensor2d(
    [
      [1, 1, 1],
      [0, 1, 1],
    ],
    [2, 3],
  );
  const once = () => {
    const r = m.forward(ids, mask, { returnHidden: true, returnAttention: true });
    tf.dispose([r.logits, r.hidden!, r.attention!]);
    let { logits, cache } = m.prefill(ids, mask);
    logits.dispose();
    ({ logits, cache } = m.decodeStep(cache, [6, 7]));
    logits.dispose();
    cache = m.keepCacheRows(cache, [1]);
    m.disposeCache(cache);
  };
  once();
  const before = tf.memory().numTensors;
  for (let i = 0; i < 3; i++) once();
  assert.equal(tf.memory().numTensors, before);
  tf.dispose([ids, mask]);
  const withModel = tf.memory().numTensors;
  m.dispose();
  assert.equal(tf.memory().numTensors, withModel - m.params.size);
});

test('every parameter gets a finite, non-zero gradient (tied and untied)', async () => {
  await setup();
  for (const cfg of [qwenCfg, llamaCfg]) {
    const m = sharpModel(cfg, 2);
    const ids = tf.tensor2d(
      [
        [0, 3, 4, 5],
        [6, 7, 8, 9],
      ],
      [2, 4],
      'int32',
    );
    const mask = tf.tensor2d(
      [
        [0, 1, 1, 1],
        [1, 1, 1, 1],
      ],
      [2, 4],
    );
    const { value, grads } = tf.variableGrads(() => {
      const { logits } = m.forward(ids, mask);
      return tf
        .mean(
          tf.mul(
            tf.logSoftmax(logits),
            tf.oneHot(
              tf.tensor2d(
                [
                  [1, 2, 3, 4],
                  [5, 6, 7, 8],
                ],
                [2, 4],
                'int32',
              ),
              23,
            ),
          ),
        )
        .neg() as tf.Scalar;
    }, [...m.params.values()]);
    assert.ok(Number.isFinite(value.dataSync()[0]));
    assert.equal(Object.keys(grads).length, m.params.size);
    for (const [name, v] of m.params) {
      const g = grads[v.name].dataSync();
      assert.ok(g.every(Number.isFinite), `${name} finite`);
      assert.ok(
        g.some((x) => x !== 0),
        `${name} has gradient`,
      );
    }
    tf.dispose([ids, mask, value, ...Object.values(grads)]);
    m.dispose();
  }
});

test('exportWeights → fromWeights round trip; HF layout and clear errors', async () => {
  await setup();
  const m = sharpModel(llamaCfg, 8);
  const w = m.exportWeights();
  assert.deepEqual(w['model.layers.0.self_attn.q_proj.weight'].shape, [16, 16]);
  assert.deepEqual(w['model.layers.0.mlp.down_proj.weight'].shape, [16, 24]); // HF Linear: [out, in]
  assert.deepEqual(w['lm_head.weight'].shape, [23, 16]);
  const m2 = Transformer.fromWeights(llamaCfg, w);
  assert.deepEqual(run(m2, [[1, 2, 3]], [0]), run(m, [[1, 2, 3]], [0]));

  const expectUserError = (f: () => unknown, re: RegExp) => assert.throws(f, (e: unknown) => isUserError(e) && re.test((e as Error).message));
  const missing = { ...w };
  delete missing['model.layers.1.mlp.gate_proj.weight'];
  expectUserError(() => Transformer.fromWeights(llamaCfg, missing), /missing tensor model\.layers\.1\.mlp\.gate_proj\.weight \(expected shape \[24, 16\]\)/);
  const bad = { ...w, 'model.norm.weight': { shape: [15], data: new Float32Array(15) } };
  expectUserError(() => Transformer.fromWeights(llamaCfg, bad), /model\.norm\.weight has shape \[15\].*expected \[16\]/);
  const extra = { ...w, 'model.layers.0.self_attn.q_norm.weight': { shape: [4], data: new Float32Array(4) } };
  expectUserError(() => Transformer.fromWeights(llamaCfg, extra), /q_norm/);
  expectUserError(() => Transformer.init({ ...llamaCfg, nKvHeads: 3 }, 1), /multiple of n_kv_heads/);
  expectUserError(() => Transformer.init({ ...llamaCfg, dModel: 18 }, 1), /divisible by n_heads/);
  [m, m2].forEach((x) => x.dispose());
});

test('RoPE inverse frequencies, with llama3 scaling', () => {
  // theta^(−2i/hd): hd = 4, theta = 10000 → [1, 10000^(−1/2) = 0.01]
  const base = ropeInvFreq({ ...qwenCfg, dModel: 8, nHeads: 2 });
  assert.deepEqual(
    Array.from(base).map((v) => +v.toPrecision(12)),
    [1, 0.01],
  );
  // llama3 (factor 8, low 1, high 4, original context 8192): wavelengths above 8192/1 are divided by 8, those
  // below 8192/4 = 2048 kept, those between interpolated with s = (8192/wavelen − 1)/(4 − 1).
  const scaling = { type: 'llama3' as const, factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 };
  // hd = 6, theta 1e6 → [1, 0.01, 1e-4], wavelengths 2π·[1, 100, 10000] ≈ [6.3, 628, 62832]: kept, kept, /8
  const l3a = ropeInvFreq({ ...qwenCfg, dModel: 12, nHeads: 2, ropeTheta: 1e6, ropeScaling: scaling });
  assert.deepEqual(
    Array.from(l3a).map((v) => +v.toPrecision(12)),
    [1, 0.01, 1.25e-5],
  );
  // hd = 4, theta 1e6 → [1, 0.001]; 2π·1000 ≈ 6283 is in the band: s = (8192/6283.19 − 1)/3 = 0.1012658,
  // inv = (1 − s)·0.001/8 + s·0.001 = 0.000213608 (python: 0.00021360754402756864)
  const l3b = ropeInvFreq({ ...qwenCfg, dModel: 8, nHeads: 2, ropeTheta: 1e6, ropeScaling: scaling });
  assert.equal(l3b[0], 1);
  assert.ok(Math.abs(l3b[1] - 0.00021360754402756864) < 1e-15);
});

test('scoreTokens: log-probs and entropies in blocks of rows and vocabulary equal the whole log-softmax, and a long completion over a large vocabulary never holds its logits', async () => {
  const { completionLogprobs, policyBatch } = await import('../../../src/engine/session/rollout');
  await setup();
  const cfg: ModelConfig = { ...qwenCfg, vocabSize: 97, maxSeqLen: 64 };
  // sharp weights: confident rows (entropy near 0) and flat ones both occur
  const m = sharpModel(cfg, 3);
  const pb = policyBatch(
    [
      [1, 5, 9],
      [1, 7],
    ],
    [
      [11, 12, 13, 14],
      [20, 21],
    ],
    0,
  );
  const C = pb.completionLen;
  const ref = tf.tidy(() => {
    const o = completionLogprobs(m, pb, 0.7, { entropy: true });
    return { lp: o.logp.dataSync().slice(), ent: o.entropy!.dataSync().slice() };
  });
  // Σ p² of each scored position, in float64 from the whole logits (the gradient norm's input)
  const refSq = tf.tidy(() => {
    const { logits } = m.forward(pb.ids, pb.keyMask, { logitsFrom: pb.promptLen - 1 });
    const rows = (logits.arraySync() as number[][][]).flatMap((r) => r.slice(0, C));
    return rows.map((z) => {
      const s = z.map((x) => x / 0.7);
      const mx = Math.max(...s);
      const e = s.map((x) => Math.exp(x - mx));
      const tot = e.reduce((a, b) => a + b, 0);
      return e.reduce((a, b) => a + (b / tot) ** 2, 0);
    });
  });
  // the top 5 of each scored position and the target's rank (what a server's top_logprobs and vLLM's rank give), in
  // float64 from the whole logits: sorted descending, ties to the lower id
  const targets = pb.targets.dataSync() as Int32Array;
  const refTop = tf.tidy(() => {
    const { logits } = m.forward(pb.ids, pb.keyMask, { logitsFrom: pb.promptLen - 1 });
    const rows = (logits.arraySync() as number[][][]).flatMap((r) => r.slice(0, C));
    return rows.map((z, n) => {
      const s = z.map((x) => x / 0.7);
      const mx = Math.max(...s);
      const lse = mx + Math.log(s.reduce((a, x) => a + Math.exp(x - mx), 0));
      const order = s.map((_, i) => i).sort((a, b) => s[b] - s[a] || a - b);
      return { ids: order.slice(0, 5), logp: order.slice(0, 5).map((i) => s[i] - lse), rank: 1 + s.filter((x) => x > s[targets[n]]).length };
    });
  });
  // budgets from one logit per block (97 vocabulary blocks of one row each) to everything at once
  for (const budget of [1, 10, 97, 300, 1 << 20]) {
    const s = await m.scoreTokens(pb.ids, pb.keyMask, { from: pb.promptLen - 1, count: C }, targets, 0.7, { budget, topK: 5, rank: true });
    for (let i = 0; i < ref.lp.length; i++) {
      assert.ok(Math.abs(s.logp[i] - ref.lp[i]) < 2e-5, `budget ${budget}: logp[${i}] ${s.logp[i]} vs ${ref.lp[i]}`);
      assert.ok(Math.abs(s.entropy[i] - ref.ent[i]) < 2e-5, `budget ${budget}: entropy[${i}] ${s.entropy[i]} vs ${ref.ent[i]}`);
      assert.ok(Math.abs(s.probSq[i] - refSq[i]) < 2e-6, `budget ${budget}: Σp²[${i}] ${s.probSq[i]} vs ${refSq[i]}`);
      assert.deepEqual([...s.top!.ids.slice(i * 5, i * 5 + 5)], refTop[i].ids, `budget ${budget}: top 5 of position ${i}`);
      for (let j = 0; j < 5; j++) assert.ok(Math.abs(s.top!.logp[i * 5 + j] - refTop[i].logp[j]) < 2e-5);
      assert.equal(s.top!.rank[i], refTop[i].rank, `budget ${budget}: rank of the target at ${i}`);
    }
  }
  pb.dispose();
  m.dispose();

  // 250 completion tokens × a 60,000-token vocabulary: 15 M logits (60 MB) whole. The whole log-softmax (the old
  // scoring) peaks at several times that; in blocks of 256 K floats the peak is the weights and a few blocks.
  const big = Transformer.init({ ...cfg, nLayers: 1, vocabSize: 60_000, maxSeqLen: 300 }, 4);
  const ids = Array.from({ length: 250 }, (_, i) => 3 + ((i * 7919) % 59_990));
  const pb2 = policyBatch([[1, 2]], [ids], 0);
  // (tf.profile returns one object that the next profile overwrites: read each peak at once)
  const blockedPeak = (
    await tf.profile(async () => {
      const r = await big.scoreTokens(pb2.ids, pb2.keyMask, { from: pb2.promptLen - 1, count: pb2.completionLen }, pb2.targets.dataSync() as Int32Array, 1, {
        budget: 1 << 18,
      });
      assert.ok(r.logp.every(Number.isFinite) && r.entropy.every((h) => h >= 0 && h <= Math.log(60_000) + 1e-3));
    })
  ).peakBytes;
  const wholePeak = (await tf.profile(() => tf.tidy(() => void completionLogprobs(big, pb2, 1, { entropy: true })))).peakBytes;
  assert.ok(wholePeak > 120e6, `the whole log-softmax peaks at ${(wholePeak / 1e6).toFixed(0)} MB`);
  assert.ok(blockedPeak < 20e6, `in blocks: peak ${(blockedPeak / 1e6).toFixed(1)} MB`);
  pb2.dispose();
  big.dispose();
});
