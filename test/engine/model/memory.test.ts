// The training-memory estimate (model/memory.ts) against numbers worked out by hand from its stated formula, and the
// check that stops a run before step 1 (before the weights are even read) when it cannot fit the backend.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hfConfigToModelConfig } from '../../../src/engine/model/hf';
import { backendCapacity, checkFits, estimateTrainingMemory, isHalfable, paramCount, WASM_HEAP_BYTES } from '../../../src/engine/model/memory';
import { QWEN25_05B_CONFIG } from '../../../src/engine/model/shaped_checkpoint';
import { isUserError } from '../../../src/engine/core/errors';
import { train } from '../../../src/engine/train/train';
import { readRunInfo } from '../../../src/engine/rundir/rundir';
import { qwen05bFolder } from './qwen05b';

const QWEN = hfConfigToModelConfig(QWEN25_05B_CONFIG);

test('0.5B: 494,032,768 parameters; weights, gradients, Adam and activations by hand', () => {
  // embed 151936·896 = 136,134,656; per layer: q 896·896 + 896, k and v 128·896 + 128 each, o 896·896, MLP 3·4864·896,
  // two norms 2·896 = 14,912,384; ×24 = 357,897,216; final norm 896 → 494,032,768
  assert.equal(paramCount(QWEN), 494_032_768);
  const e = estimateTrainingMemory(QWEN, { rows: 8, promptLen: 32, completionLen: 128, klReference: true });
  const part = (n: string) => e.parts.find((p) => p.name === n)!.bytes;
  assert.equal(part('weights'), 4 * 494_032_768);
  assert.equal(part('gradients'), 8 * 494_032_768);
  assert.equal(part('adam'), 8 * 494_032_768);
  assert.equal(part('reference'), 4 * 494_032_768);
  // per layer and token: 7·896 + 2·(14 + 4)·64 + 16·64 + 2·14·64 + 2·14·160 + 5·4864 = 40,192 floats, twice (forward
  // outputs and their gradients); 8 rows × 160 tokens × 24 layers → 2,469,396,480; the head: 8·128 completion tokens ×
  // 4·151,936 = 622,329,856; × 4 bytes
  assert.equal(part('activations'), 4 * (2_469_396_480 + 622_329_856));
  assert.equal(e.total, 24 * 494_032_768 + 4 * (2_469_396_480 + 622_329_856));
  // LoRA r 8 on every projection adds per layer and token 2·3·8 + 2·1152 (q|k|v), 2·8 + 2·896 (o), 2·2·8 + 2·9728
  // (gate|up), 2·8 + 2·896 (down) = 25,456 floats; 1 row × 96 tokens, 64 completion tokens:
  // 2·96·24·(38,400 + 25,456) + 64·4·151,936 = 294,248,448 + 38,895,616 floats
  const lora = estimateTrainingMemory(QWEN, {
    rows: 1,
    promptLen: 32,
    completionLen: 64,
    klReference: true,
    lora: { r: 8 },
    adapterParams: 4_399_104,
    trainableParams: 4_399_104,
  });
  assert.equal(lora.parts.find((p) => p.name === 'activations')!.bytes, 4 * (294_248_448 + 38_895_616));
  assert.equal(lora.parts.find((p) => p.name === 'reference')!.bytes, 0, 'the KL reference is the frozen base');
  assert.deepEqual(e.largestTensor, { name: 'the logits of a micro-batch', bytes: 4 * 8 * 128 * 151_936 });
  const one = estimateTrainingMemory(QWEN, { rows: 1, promptLen: 32, completionLen: 16, klReference: false });
  // the embedding (136,134,656 floats) is stored by vocabulary blocks where a binding is smaller, so it is not the
  // tensor that must fit one buffer: a layer's fused gate | up projection is, 896 × 2·4,864 floats
  assert.deepEqual(one.largestTensor, { name: 'model.layers.0.mlp.gate_up_proj.weight', bytes: 4 * 896 * 2 * 4864 });
});

test('checkFits: the wasm heap (4 GiB) and a GPU adapter’s buffer limit, each with the numbers and what to do', () => {
  const e = estimateTrainingMemory(QWEN, { rows: 8, promptLen: 32, completionLen: 128, klReference: false });
  const wasm = backendCapacity({ backend: 'wasm-blas' });
  assert.equal(wasm.total, WASM_HEAP_BYTES);
  assert.throws(
    () => checkFits(e, wasm, 'wasm-blas', '8 rows × 160 tokens per micro-batch'),
    (err: unknown) =>
      isUserError(err) &&
      /^this run needs 22\.25 GB of wasm heap \(weights 1\.98 GB, gradients 3\.95 GB, Adam's moments 3\.95 GB, activations 12\.37 GB; 8 rows × 160 tokens per micro-batch\), the wasm-blas backend holds 4\.29 GB: use backend webgpu on a GPU, model\.lora/.test(
        (err as Error).message,
      ),
  );
  const lavapipe = {
    max_buffer_size: 2 ** 32 - 1,
    max_storage_buffer_binding_size: 2 ** 27,
    description: 'llvmpipe',
    vendor: 'mesa',
    architecture: 'software',
    device: '',
    software: true,
    dawn: '',
  };
  // one row of 96 tokens fits lavapipe's 128 MiB bindings (the embedding in vocabulary blocks); 8 rows' logits do not
  const small = estimateTrainingMemory(QWEN, { rows: 1, promptLen: 32, completionLen: 64, klReference: false });
  checkFits(small, backendCapacity({ backend: 'webgpu', adapter: lavapipe }), 'webgpu', '');
  assert.throws(
    () => checkFits(e, backendCapacity({ backend: 'webgpu', adapter: lavapipe }), 'webgpu', ''),
    (err: unknown) =>
      isUserError(err) &&
      /the logits of a micro-batch, needs 0\.62 GB in one buffer; the llvmpipe adapter's buffers hold at most 0\.13 GB each/.test((err as Error).message),
  );
  // a small model fits everywhere
  const tiny = estimateTrainingMemory(
    { ...QWEN, vocabSize: 64, dModel: 32, nLayers: 1, nHeads: 2, nKvHeads: 1, dFf: 64 },
    { rows: 8, promptLen: 8, completionLen: 16, klReference: true },
  );
  checkFits(tiny, wasm, 'wasm', '');
});

test('a GRPO run of the 0.5B folder on wasm-blas stops before step 1, before reading the weights, with the numbers; its run directory says why', async () => {
  const { dir: model } = qwen05bFolder();
  const dir = mkdtempSync(join(tmpdir(), 'cl-05b-fit-'));
  try {
    const cfg = join(dir, 'big.credit.yaml');
    writeFileSync(
      cfg,
      `name: big\nbackend: wasm-blas\nmodel: { source: hf, path: ${model} }\ntask: { name: countdown }\nsft: { steps: 0 }\ngrpo: { steps: 1, prompts_per_step: 4, group_size: 4, max_new_tokens: 64 }\n`,
    );
    const t0 = performance.now();
    const msg =
      /^this run needs \d+\.\d\d GB of wasm heap \(weights 1\.98 GB, gradients 3\.95 GB, Adam's moments 3\.95 GB, activations [\d.]+ GB; 16 rows × \d+ tokens per micro-batch\), the wasm-blas backend holds 4\.29 GB/;
    await assert.rejects(train({ configPath: cfg }), (e: unknown) => isUserError(e) && msg.test((e as Error).message));
    assert.ok(performance.now() - t0 < 20_000, 'refused before the 988 MB of weights were read');
    const runs = readdirSync(join(dir, 'runs'));
    assert.equal(runs.length, 1);
    const info = readRunInfo(join(dir, 'runs', runs[0]))!;
    assert.equal(info.status, 'failed');
    assert.match(info.error ?? '', msg);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('0.5B with model.torch_dtype in 16 bits: the frozen weights at 2 bytes, in the policy and the KL reference', () => {
  // per layer the four stored projections hold 896·(896 + 2·128) + 896·896 + 3·4864·896 = 14,909,440 values (the
  // norms and the q|k|v bias are not projections); ×24 = 357,826,560; the tied embedding 151,936·896 = 136,134,656
  // (an even vocabulary packs), 493,961,216 in all: every weight but the norms and biases
  const half = paramCount(QWEN, (n) => isHalfable(QWEN, n));
  assert.equal(half, 357_826_560 + 136_134_656);
  assert.equal(isHalfable({ ...QWEN, vocabSize: 151_937 }, 'model.embed_tokens.weight'), false, 'an odd vocabulary does not pack');
  const shape = { rows: 1, promptLen: 32, completionLen: 64, klReference: true };
  const f32 = estimateTrainingMemory(QWEN, shape);
  const est = estimateTrainingMemory(QWEN, { ...shape, halfParams: { policy: 0, reference: half } });
  const part = (e: ReturnType<typeof estimateTrainingMemory>, n: string) => e.parts.find((p) => p.name === n)!.bytes;
  // full fine-tuning: every policy weight trains (float32); the reference's are 2 bytes each
  assert.equal(part(est, 'weights'), part(f32, 'weights'));
  assert.equal(part(est, 'reference'), 4 * 494_032_768 - 2 * half);
  assert.equal(f32.total - est.total, 2 * half);
  // LoRA: the base at 2 bytes, and no reference copy (the base is it)
  const lora = { ...shape, adapterParams: 4_399_104, trainableParams: 4_399_104, lora: { r: 8 } };
  const loraHalf = estimateTrainingMemory(QWEN, { ...lora, halfParams: { policy: half, reference: half } });
  assert.equal(part(loraHalf, 'weights'), 4 * 494_032_768 - 2 * half);
  assert.equal(part(loraHalf, 'reference'), 0);
});
