// LoRA (model.lora, model/lora.ts). The expected values come from two computations that do not share the adapter code:
// the merged weights W + (α/r)·B·A run as a plain model, and the chain rule from the merged weight's gradient
// (dL/dA = s·dL/dW·Bᵀ, dL/dB = s·Aᵀ·dL/dW in the [in, out] layout), whose full-weight gradient is the one
// backend.test.ts checks against the cpu backend. Then runs: only the adapters move, checkpoints hold the merged
// weights and the adapters, and a stopped LoRA run resumes to the uninterrupted run's numbers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/engine/model/backend';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { loraParamCount } from '../../../src/engine/model/lora';
import { makeRng } from '../../../src/engine/core/rng';
import { train } from '../../../src/engine/train/train';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { latestCheckpoint, loadCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { readSafetensors } from '../../../src/engine/model/safetensors';
import { relErr, smallModelConfig, stopAtStep, tinyConfig } from '../fixtures';

const cfg: ModelConfig = smallModelConfig({ dFf: 48 });
const B = 2,
  T = 7;
const rng = makeRng(4);
const ids = Int32Array.from({ length: B * T }, () => Math.floor(rng() * 40));
const mask = new Float32Array(B * T).fill(1);
const pick = Int32Array.from({ length: B * T }, () => Math.floor(rng() * 40));
const wts = Float32Array.from({ length: B * T }, () => rng() * 2 - 1);

function loss(m: Transformer): tf.Scalar {
  const { logits } = m.forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(mask, [B, T]));
  return tf.mean(tf.mul(m.tokenLogprob(logits.reshape([B * T, 40]) as tf.Tensor2D, tf.tensor1d(pick, 'int32')), tf.tensor1d(wts))) as tf.Scalar;
}

test('adapter count by hand; fresh adapters change nothing; trained ones equal the merged weights run as a plain model', async () => {
  await initBackend('cpu');
  // per layer, r·(in + out) for q (32+32), k and v (32+16 each), o (32+32), gate and up (32+48 each), down (48+32)
  assert.equal(loraParamCount(cfg, { r: 4 }), 2 * 4 * (64 + 48 + 48 + 64 + 80 + 80 + 80));
  assert.equal(loraParamCount(cfg, { r: 4, targets: ['q_proj', 'v_proj'] }), 2 * 4 * (64 + 48));
  const base = Transformer.init(cfg, 3);
  const before = tf.tidy(() => loss(base).dataSync()[0]);
  base.enableLora({ r: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'] }, 9);
  assert.equal(
    tf.tidy(() => loss(base).dataSync()[0]),
    before,
    'B = 0: the adapters add nothing',
  );
  assert.deepEqual(
    [...base.trainable.keys()].filter((k) => k.includes('layers.0.')),
    [
      'model.layers.0.self_attn.q_proj.lora_A.weight',
      'model.layers.0.self_attn.q_proj.lora_B.weight',
      'model.layers.0.self_attn.v_proj.lora_A.weight',
      'model.layers.0.self_attn.v_proj.lora_B.weight',
      'model.layers.0.self_attn.o_proj.lora_A.weight',
      'model.layers.0.self_attn.o_proj.lora_B.weight',
      'model.layers.0.mlp.up_proj.lora_A.weight',
      'model.layers.0.mlp.up_proj.lora_B.weight',
      'model.layers.0.mlp.down_proj.lora_A.weight',
      'model.layers.0.mlp.down_proj.lora_B.weight',
    ],
  );
  // give every B random values, as training would
  for (const [n, v] of base.trainable) if (n.includes('lora_B')) v.assign(tf.randomNormal(v.shape, 0, 0.3, 'float32', 5));
  const merged = Transformer.fromWeights(cfg, await base.readWeights());
  const a = tf.tidy(() => base.forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(mask, [B, T])).logits.dataSync());
  const b = tf.tidy(() => merged.forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(mask, [B, T])).logits.dataSync());
  assert.ok(relErr(a, b) < 1e-5, `LoRA forward vs merged weights: ${relErr(a, b)}`);
  // the adapters' gradients from the merged weight's: dL/dA = s·G·Bᵀ, dL/dB = s·Aᵀ·G, G = dL/dW [in, out], s = 8/4
  const gMerged = tf.variableGrads(() => loss(merged), [...merged.params.values()]).grads;
  const byVarMerged = new Map([...merged.params].map(([n, v]) => [v.name, n]));
  const G = new Map(Object.entries(gMerged).map(([k, t]) => [byVarMerged.get(k)!, t]));
  const gLora = tf.variableGrads(() => loss(base), [...base.trainable.values()]).grads;
  const byVarLora = new Map([...base.trainable].map(([n, v]) => [v.name, n]));
  const L = new Map(Object.entries(gLora).map(([k, t]) => [byVarLora.get(k)!, t]));
  const s = 2;
  // o_proj of layer 1: its own stored weight [in, out]
  const A = base.trainable.get('model.layers.1.self_attn.o_proj.lora_A.weight')!;
  const Bm = base.trainable.get('model.layers.1.self_attn.o_proj.lora_B.weight')!;
  const Go = G.get('model.layers.1.self_attn.o_proj.weight')!;
  const wantA = tf.matMul(Go, Bm, false, true).mul(s).dataSync();
  const wantB = tf.matMul(A, Go, true, false).mul(s).dataSync();
  assert.ok(relErr(L.get('model.layers.1.self_attn.o_proj.lora_A.weight')!.dataSync(), wantA) < 1e-4);
  assert.ok(relErr(L.get('model.layers.1.self_attn.o_proj.lora_B.weight')!.dataSync(), wantB) < 1e-4);
  // v_proj of layer 0: its block of the fused q|k|v weight (columns 32..47 of 64 are k, 48..63 v)
  const Gqkv = G.get('model.layers.0.self_attn.qkv_proj.weight')!;
  const Gv = tf.slice(Gqkv, [0, 48], [32, 16]);
  const Av = base.trainable.get('model.layers.0.self_attn.v_proj.lora_A.weight')!;
  const Bv = base.trainable.get('model.layers.0.self_attn.v_proj.lora_B.weight')!;
  assert.ok(relErr(L.get('model.layers.0.self_attn.v_proj.lora_A.weight')!.dataSync(), tf.matMul(Gv, Bv, false, true).mul(s).dataSync()) < 1e-4);
  assert.ok(relErr(L.get('model.layers.0.self_attn.v_proj.lora_B.weight')!.dataSync(), tf.matMul(Av, Gv, true, false).mul(s).dataSync()) < 1e-4);
  // up_proj: the second half of gate|up
  const Gup = tf.slice(G.get('model.layers.0.mlp.gate_up_proj.weight')!, [0, 48], [32, 48]);
  const Bu = base.trainable.get('model.layers.0.mlp.up_proj.lora_B.weight')!;
  assert.ok(relErr(L.get('model.layers.0.mlp.up_proj.lora_A.weight')!.dataSync(), tf.matMul(Gup, Bu, false, true).mul(s).dataSync()) < 1e-4);
  // the base view is the model without its adapters, sharing the weights
  const view = base.baseView();
  assert.equal(
    tf.tidy(() => loss(view).dataSync()[0]),
    before,
  );
  view.dispose();
  assert.ok(tf.tidy(() => loss(base).dataSync()[0]) !== before, 'disposing the view left the model usable');
  merged.dispose();
  base.dispose();
});

test('a LoRA GRPO run: only the adapters train, checkpoints hold adapters and merged weights, and a stopped run resumes to the uninterrupted one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-lora-'));
  const config = tinyConfig(dir, 'countdown');
  const sets = ['model.lora={r: 4, targets: [q_proj, v_proj, down_proj]}', 'sft.steps=4', 'sft.lr=1e-2', 'grpo.lr=1e-2', 'grpo.kl_beta=0.05'];
  const stopped = await train({ configPath: config, sets, ...stopAtStep(2) });
  assert.equal(stopped.status, 'stopped');
  const ck = latestCheckpoint(stopped.runDir)!;
  assert.ok(existsSync(join(ck, 'adapters.safetensors')));
  const loaded = loadCheckpoint(ck);
  assert.ok(Object.keys(loaded.adapters!).every((k) => /lora_[AB]\.weight$/.test(k)));
  assert.ok(
    Object.keys(loaded.optimizer.state).every((k) => /lora_[AB]\.weight$/.test(k)),
    'Adam holds moments for the adapters only',
  );
  const resumed = await train({ resume: stopped.runDir });
  assert.equal(resumed.status, 'completed');
  const full = await train({ configPath: config, sets });
  const strip = (m: Record<string, unknown>) => Object.fromEntries(Object.entries(m).filter(([k]) => !/time|per_s|seconds/.test(k)));
  assert.deepEqual(readMetrics(resumed.runDir).map(strip), readMetrics(full.runDir).map(strip), 'resumed = uninterrupted');
  // only the adapters moved: the merged weights minus (α/r)·B·A give back the initial base, which SFT did not change either
  const end = loadCheckpoint(latestCheckpoint(full.runDir)!);
  const start = loadCheckpoint(join(full.runDir, 'checkpoints', 'step-000000'));
  const s = 2; // alpha defaults to 2·r
  for (const [module, hf] of [
    ['model.layers.0.self_attn.o_proj', 'model.layers.0.self_attn.o_proj.weight'],
    ['model.layers.0.mlp.gate_proj', 'model.layers.0.mlp.gate_proj.weight'],
  ] as const) {
    // not targeted: identical bits at the start and the end
    assert.deepEqual(Array.from(end.model[hf].data), Array.from(start.model[hf].data), module);
  }
  const q = 'model.layers.0.self_attn.q_proj';
  const unmerge = (c: typeof end) => {
    const A = c.adapters![`${q}.lora_A.weight`],
      Bq = c.adapters![`${q}.lora_B.weight`];
    const [r, inDim] = A.shape,
      outDim = Bq.shape[0];
    const w = Float32Array.from(c.model[`${q}.weight`].data);
    for (let o = 0; o < outDim; o++)
      for (let i = 0; i < inDim; i++) {
        let acc = 0;
        for (let k = 0; k < r; k++) acc += Bq.data[o * r + k] * A.data[k * inDim + i];
        w[o * inDim + i] -= s * acc;
      }
    return w;
  };
  const w0 = unmerge(start),
    w1 = unmerge(end);
  assert.ok(relErr(w1, w0) < 1e-5, `q_proj's base moved: ${relErr(w1, w0)}`);
  const adaptersMoved = relErr(end.adapters![`${q}.lora_B.weight`].data, start.adapters![`${q}.lora_B.weight`].data);
  assert.ok(adaptersMoved > 1e-3, 'GRPO trained the adapters');
  // the safetensors files are readable as PEFT names them
  assert.ok(readSafetensors(join(latestCheckpoint(full.runDir)!, 'adapters.safetensors')).tensors[`${q}.lora_A.weight`]);
});

test('model.freeze_embeddings and model.trainable_layers: which weights train', async () => {
  await initBackend('cpu');
  const m = Transformer.init({ ...cfg, tieEmbeddings: false }, 1);
  m.setTrainable({ lastLayers: 1 });
  assert.deepEqual(
    [...m.trainable.keys()].filter((k) => !k.startsWith('model.layers.1.')),
    ['model.norm.weight', 'lm_head.weight'],
  );
  assert.ok([...m.trainable.keys()].some((k) => k.startsWith('model.layers.1.')));
  m.setTrainable({ freezeEmbeddings: true });
  assert.equal(m.trainable.size, m.params.size - 2, 'all but the embedding and the untied lm head');
  m.dispose();
});
