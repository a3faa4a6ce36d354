import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { hfConfigToModelConfig, loadHfModel } from '../../../src/engine/model/hf';
import { Transformer } from '../../../src/engine/model/model';
import { readSafetensors, writeSafetensors } from '../../../src/engine/model/safetensors';
import { QWEN_TOK, qwenBase, randomWeights, referenceLogits, writeCheckpoint, type HfCfg } from './hf_reference';
import { isUserError } from '../../../src/engine/core/errors';

// The test writes tiny random checkpoints in the real HF layout and checks the loaded model's logits against a
// float64 forward written below straight from the HF Qwen2/Llama formulas (plain loops, no tf).

function logitsOf(m: Transformer, ids: number[]): number[][] {
  const idT = tf.tensor2d(ids, [1, ids.length], 'int32');
  const mask = tf.ones([1, ids.length]) as tf.Tensor2D;
  const { logits } = m.forward(idT, mask);
  const out = (logits.arraySync() as number[][][])[0];
  tf.dispose([idT, mask, logits]);
  return out;
}

function maxDiff(a: number[][], b: number[][]): number {
  let m = 0;
  a.forEach((r, t) => r.forEach((v, i) => (m = Math.max(m, Math.abs(v - b[t][i])))));
  return m;
}

const cases: { name: string; cfg: HfCfg; dtype: 'F32' | 'F16' | 'BF16'; sharded: boolean }[] = [
  { name: 'Qwen2, BF16, sharded, tied, GQA 4/2', cfg: qwenBase, dtype: 'BF16', sharded: true },
  { name: 'Qwen2, F16, single file, head_dim 8 ≠ d/H, one kv head', cfg: { ...qwenBase, head_dim: 8, num_key_value_heads: 1 }, dtype: 'F16', sharded: false },
  {
    // model_type only, no architectures; llama3 rope scaling with a tiny original context so that both the
    // divided (wavelength 628 > 16) and the interpolated (4 ≤ 6.28 ≤ 16) frequency bands occur
    name: 'Llama, F32, untied, llama3 rope scaling, no bias',
    cfg: {
      ...qwenBase,
      architectures: undefined,
      tie_word_embeddings: false,
      model_type: 'llama',
      num_key_value_heads: 2,
      hidden_size: 8,
      num_attention_heads: 2,
      rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
    },
    dtype: 'F32',
    sharded: false,
  },
];

for (const [ci, tc] of cases.entries()) {
  test(`loadHfModel matches the float64 HF reference: ${tc.name}`, async () => {
    await tf.setBackend('cpu');
    const root = mkdtempSync(join(tmpdir(), 'cl-hf-'));
    try {
      const w = randomWeights(tc.cfg, 100 + ci);
      writeCheckpoint(root, tc.cfg, w, tc.dtype, tc.sharded);
      const { model, tokenizer, cfg } = loadHfModel(root);
      assert.equal(cfg.arch, tc.cfg.model_type);
      assert.equal(cfg.tieEmbeddings, tc.cfg.tie_word_embeddings);
      const ids = tokenizer.encodePrompt('Using 3, 5: make 8. <think>');
      assert.ok(ids.length >= 8);
      const ref = referenceLogits(tc.cfg, w, ids);
      const got = logitsOf(model, ids);
      const diff = maxDiff(got, ref);
      assert.ok(diff < 1e-4, `max |Δlogit| = ${diff}`);
      // logits of size O(1) that vary with the context, so a 1e-4 agreement is not vacuous
      const last = ref[ids.length - 1];
      const spread = last.reduce((a, b) => Math.max(a, b)) - last.reduce((a, b) => Math.min(a, b));
      assert.ok(spread > 1, `logit spread ${spread}`);
      assert.ok(maxDiff([ref[1]], [ref[2]]) > 0.1);
      model.dispose();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test('exportWeights → writeSafetensors → readSafetensors → fromWeights gives identical logits', async () => {
  await tf.setBackend('cpu');
  const root = mkdtempSync(join(tmpdir(), 'cl-hf-'));
  try {
    const c = { ...qwenBase, vocab_size: 300 };
    const m = Transformer.fromWeights(hfConfigToModelConfig(c), randomWeights(c, 7));
    writeSafetensors(join(root, 'model.safetensors'), m.exportWeights());
    const m2 = Transformer.fromWeights(m.cfg, readSafetensors(join(root, 'model.safetensors')).tensors);
    const ids = [5, 17, 250, 3, 99];
    assert.deepEqual(logitsOf(m2, ids), logitsOf(m, ids));
    m.dispose();
    m2.dispose();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('loadHfModel: clear errors for what is missing or unsupported', async () => {
  await tf.setBackend('cpu');
  const root = mkdtempSync(join(tmpdir(), 'cl-hf-'));
  const fails = (dir: string, re: RegExp) =>
    assert.throws(
      () => loadHfModel(dir),
      (e: unknown) => isUserError(e) && re.test((e as Error).message),
      re.source,
    );
  try {
    fails(join(root, 'nope'), /cannot read model directory .*expected a Hugging Face model directory/);
    fails(root, /no config\.json in/);
    writeFileSync(join(root, 'config.json'), JSON.stringify({ architectures: ['GPT2LMHeadModel'], model_type: 'gpt2' }));
    fails(root, /unsupported model .*GPT2LMHeadModel.*supported: Qwen2ForCausalLM, LlamaForCausalLM/);
    writeFileSync(join(root, 'config.json'), JSON.stringify({ ...qwenBase, rope_scaling: { rope_type: 'yarn', factor: 4 } }));
    fails(root, /rope_scaling type "yarn" is not supported/);
    writeFileSync(join(root, 'config.json'), JSON.stringify(qwenBase));
    fails(root, /no tokenizer\.json/);
    copyFileSync(join(QWEN_TOK, 'tokenizer.json'), join(root, 'tokenizer.json'));
    copyFileSync(join(QWEN_TOK, 'tokenizer_config.json'), join(root, 'tokenizer_config.json'));
    writeFileSync(join(root, 'pytorch_model.bin'), '');
    fails(root, /no model\.safetensors .*only safetensors weights can be read/);
    writeFileSync(join(root, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'model.norm.weight': 'model-00001-of-00001.safetensors' } }));
    fails(root, /lists shard model-00001-of-00001\.safetensors, which is not in/);
    writeFileSync(join(root, 'config.json'), JSON.stringify({ ...qwenBase, vocab_size: 1000 }));
    fails(root, /151669 ids but config\.json has vocab_size 1000/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
