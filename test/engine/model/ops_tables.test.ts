// Every entry of every backend's ops table against the plain tfjs composition (ops/composed.ts) run on the cpu backend,
// forward and gradient, from one table of cases, as ggml's test-backend-ops checks each backend's ops against the CPU.
// A table entry without a case here fails the test, so a new op, or an op a backend newly implements, comes with its
// check. The composition on cpu is the reference: the tables' ops exist to be faster, never to compute something else.
//
// decodeAttention and sampleRows are the exceptions: they write in place (the KV cache, the sampler's record) and have no
// composition to compare with (without them the cache grows by concatenation and the host samples). The sampler's tests
// check them end to end (greedy decoding with the cache equals the full forward pass, test/engine/model/sampler.test.ts),
// and test/engine/model/webgpu.test.ts checks webgpu's against float64 and its draws against the exact distribution.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { initBackend, type BackendPreference } from '../../../src/engine/model/backend';
import { COMPOSED } from '../../../src/engine/model/ops/composed';
import { tableFor, type BackendOps, type ModelOps, type OpDims } from '../../../src/engine/model/ops';
import { WASM_BLAS_ALTERNATIVES } from '../../../src/engine/model/ops/wasm_blas';
import { makeRng, randNormal } from '../../../src/engine/core/rng';
import { halfWindow, packHalf, type HalfFormat } from '../../../src/engine/model/half';

/** Sizes every table supports (the SIMD loops want multiples of 4 and 8): 3 query heads over 1 kv head (GQA). */
const D: OpDims = { headDim: 8, dFf: 16 };
const B = 2,
  T = 5,
  H = 3,
  HKV = 1,
  HD = D.headDim,
  N = B * T,
  DM = 12,
  V = 37;

type Arr = { shape: number[]; values: Float32Array | Int32Array; dtype?: 'float32' | 'int32' };

interface Case {
  /** the op's inputs, as host arrays (made on each backend from the same numbers) */
  inputs(rng: () => number): Arr[];
  /** the op on tensors: its outputs to compare (and to differentiate, unless forwardOnly) */
  call(op: NonNullable<ModelOps[keyof ModelOps]>, x: tf.Tensor[]): tf.Tensor[];
  /** which inputs a gradient is taken with respect to (their indices) */
  wrt: number[];
  /** which outputs the gradient flows from (default all): attention's probabilities are for reading, not training */
  trainedOutputs?: number[];
  forwardOnly?: boolean;
  tol: { forward: number; grad: number };
}

const normal = (rng: () => number, shape: number[], scale = 1): Arr => ({
  shape,
  values: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => randNormal(rng) * scale),
});
// an additive causal mask: 0 where key j is visible to query i (j ≤ i), −1e9 elsewhere
const causalMask = (): Arr => ({
  shape: [B, 1, T, T],
  values: Float32Array.from({ length: B * T * T }, (_, k) => (k % T <= Math.floor(k / T) % T ? 0 : -1e9)),
});

const CASES: Record<Exclude<keyof ModelOps, 'decodeAttention' | 'sampleRows'>, Case> = {
  rmsNorm: {
    inputs: (r) => [normal(r, [N, DM]), normal(r, [DM])],
    call: (op, [x, w]) => [(op as ModelOps['rmsNorm'])(x as tf.Tensor2D, w as tf.Tensor1D, 1e-6)],
    wrt: [0, 1],
    tol: { forward: 1e-5, grad: 1e-4 },
  },
  rmsNormInfer: {
    inputs: (r) => [normal(r, [N, DM]), normal(r, [DM])],
    call: (op, [x, w]) => [(op as ModelOps['rmsNormInfer'])(x as tf.Tensor2D, w as tf.Tensor1D, 1e-6)],
    wrt: [],
    forwardOnly: true,
    tol: { forward: 1e-5, grad: 0 },
  },
  swiglu: {
    inputs: (r) => [normal(r, [N, 2 * D.dFf])],
    call: (op, [gu]) => [(op as ModelOps['swiglu'])(gu as tf.Tensor2D)],
    wrt: [0],
    tol: { forward: 1e-5, grad: 1e-4 },
  },
  swigluInfer: {
    inputs: (r) => [normal(r, [N, 2 * D.dFf])],
    call: (op, [gu]) => [(op as ModelOps['swigluInfer'])(gu as tf.Tensor2D)],
    wrt: [],
    forwardOnly: true,
    tol: { forward: 1e-5, grad: 0 },
  },
  heads: {
    // cos and sin as the model builds them: [1, H + Hkv, T, hd], one row per position, 1/√hd folded into the q heads
    inputs: (r) => [normal(r, [N, (H + 2 * HKV) * HD]), normal(r, [1, H + HKV, T, HD], 0.7), normal(r, [1, H + HKV, T, HD], 0.7)],
    call: (op, [qkv, cos, sin]) =>
      (op as ModelOps['heads'])(qkv as tf.Tensor2D, cos as tf.Tensor4D, sin as tf.Tensor4D, { B, T, nHeads: H, nKvHeads: HKV, headDim: HD }),
    wrt: [0],
    tol: { forward: 1e-5, grad: 1e-4 },
  },
  attention: {
    inputs: (r) => [normal(r, [B, H, T, HD]), normal(r, [B, HKV, T, HD]), normal(r, [B, HKV, T, HD]), causalMask()],
    call: (op, [q, k, v, m]) => {
      const { context, probs } = (op as ModelOps['attention'])(q as tf.Tensor4D, k as tf.Tensor4D, v as tf.Tensor4D, m as tf.Tensor4D);
      return [context, probs];
    },
    wrt: [0, 1, 2],
    // the model trains through the context only; probs feed attention_credit's weights, which are constants
    trainedOutputs: [0],
    tol: { forward: 1e-5, grad: 1e-4 },
  },
  matMulAdd: {
    // the residual's form ([N, n]) and, in the second call, a bias's ([n])
    inputs: (r) => [normal(r, [N, DM]), normal(r, [DM, V]), normal(r, [N, V]), normal(r, [V])],
    call: (op, [a, w, res, bias]) => {
      const f = op as ModelOps['matMulAdd'];
      return [f(a as tf.Tensor2D, w as tf.Tensor2D, res), f(a as tf.Tensor2D, w as tf.Tensor2D, bias)];
    },
    wrt: [0, 1, 2, 3],
    tol: { forward: 1e-5, grad: 1e-5 },
  },
  matMulHalf: {
    // W [DM, V + 1] in each format, packed; the reduction (DM = 12) and the columns (38) are not multiples of the
    // kernel's tiles, so its edges are tested. The residual's add with float16, a bias's with bfloat16, none with both
    // formats, and W read transposed (the gradient by a).
    inputs: (r) => {
      const w = normal(r, [DM, V + 1], 0.5).values as Float32Array;
      const packed = (f: HalfFormat): Arr => ({ shape: [DM, (V + 1) / 2], values: packHalf(f, w, DM, V + 1), dtype: 'int32' });
      return [normal(r, [N, DM]), packed('float16'), packed('bfloat16'), normal(r, [N, V + 1]), normal(r, [V + 1])];
    },
    call: (op, [a, w16, wb16, res, bias]) => {
      const f = op as ModelOps['matMulHalf'];
      const half = (packed: tf.Tensor, format: HalfFormat) => ({ packed: packed as tf.Tensor2D, rows: DM, cols: V + 1, format });
      return [
        f(a as tf.Tensor2D, half(w16, 'float16'), res),
        f(a as tf.Tensor2D, half(wb16, 'bfloat16'), bias),
        f(a as tf.Tensor2D, half(w16, 'float16'), null),
        f(a as tf.Tensor2D, half(wb16, 'bfloat16'), null),
        // a window of columns [6, 30) read in place (the LM head's slices when scoring)
        f(a as tf.Tensor2D, halfWindow(half(wb16, 'bfloat16'), 6, 24), null),
        // up to 8 rows, the decode step's kernel: with the residual's add, a bias's, and a window
        f(tf.slice(a as tf.Tensor2D, [0, 0], [3, DM]), half(w16, 'float16'), tf.slice(res, [0, 0], [3, V + 1])),
        f(tf.slice(a as tf.Tensor2D, [2, 0], [8, DM]), half(wb16, 'bfloat16'), bias),
        f(tf.slice(a as tf.Tensor2D, [0, 0], [1, DM]), halfWindow(half(wb16, 'bfloat16'), 6, 24), null),
      ];
    },
    wrt: [0, 3, 4],
    tol: { forward: 1e-5, grad: 1e-5 },
  },
  gatherHalf: {
    // rows of W [V + 1, DM] (an untied embedding) in float16, columns of a tied W [DM, V + 1] in bfloat16, with repeats
    inputs: (r) => {
      const ids: Arr = { shape: [7], values: Int32Array.from([0, V, 3, 3, 17, 1, 30]), dtype: 'int32' };
      const rowsW = normal(r, [V + 1, DM], 0.5).values as Float32Array;
      const colsW = normal(r, [DM, V + 1], 0.5).values as Float32Array;
      return [
        { shape: [V + 1, DM / 2], values: packHalf('float16', rowsW, V + 1, DM), dtype: 'int32' },
        { shape: [DM, (V + 1) / 2], values: packHalf('bfloat16', colsW, DM, V + 1), dtype: 'int32' },
        ids,
        { shape: [4], values: Int32Array.from([0, 31, 3, 17]), dtype: 'int32' },
      ];
    },
    call: (op, [wr, wc, ids, inWindow]) => {
      const f = op as ModelOps['gatherHalf'];
      return [
        f({ packed: wr as tf.Tensor2D, rows: V + 1, cols: DM, format: 'float16' }, ids as tf.Tensor1D, 0),
        f({ packed: wc as tf.Tensor2D, rows: DM, cols: V + 1, format: 'bfloat16' }, ids as tf.Tensor1D, 1),
        // a window of the columns [4, 36): the ids index into it
        f(halfWindow({ packed: wc as tf.Tensor2D, rows: DM, cols: V + 1, format: 'bfloat16' }, 4, 32), inWindow as tf.Tensor1D, 1),
      ];
    },
    wrt: [],
    forwardOnly: true,
    tol: { forward: 0, grad: 0 },
  },
  tokenLogprob: {
    inputs: (r) => [normal(r, [N, V], 2), { shape: [N], values: Float32Array.from({ length: N }, () => Math.floor(r() * V)), dtype: 'int32' }],
    call: (op, [logits, targets]) => [(op as ModelOps['tokenLogprob'])(logits as tf.Tensor2D, targets as tf.Tensor1D)],
    wrt: [0],
    tol: { forward: 1e-5, grad: 1e-5 },
  },
};

interface Result {
  outputs: number[][];
  grads: number[][];
}

/**
 * The op's outputs and, unless forward-only, the gradients of Σ_o Σ out_o·R_o (fixed random weights R; the trained
 * outputs only) by its inputs.
 */
async function evaluate(c: Case, op: NonNullable<ModelOps[keyof ModelOps]>, inputs: Arr[], seed: number): Promise<Result> {
  const xs = inputs.map((a) => (a.dtype === 'int32' ? tf.tensor(Int32Array.from(a.values), a.shape, 'int32') : tf.tensor(a.values, a.shape)));
  try {
    const outs = c.call(op, xs);
    const outputs = await Promise.all(outs.map(async (o) => Array.from((await o.data()) as Float32Array)));
    const rng = makeRng(seed);
    const weights = outs.map((o) =>
      tf.tensor(
        Float32Array.from({ length: o.size }, () => randNormal(rng)),
        o.shape,
      ),
    );
    tf.dispose(outs);
    let grads: number[][] = [];
    if (!c.forwardOnly) {
      const f = (...wrt: tf.Tensor[]) => {
        const all = xs.map((x, i) => (c.wrt.includes(i) ? wrt[c.wrt.indexOf(i)] : x));
        const terms = c.call(op, all).flatMap((o, k) => (!c.trainedOutputs || c.trainedOutputs.includes(k) ? [tf.sum(tf.mul(o, weights[k]))] : []));
        // added in pairs: tfjs-backend-webgpu's AddN binds every input at once, and past the adapter's storage-buffer
        // limit (8 on lavapipe) Dawn rejects the submit, so every kernel recorded with it silently does nothing
        return terms.reduce((x, y) => tf.add(x, y)) as tf.Scalar;
      };
      const g = tf.grads(f)(c.wrt.map((i) => xs[i]));
      grads = await Promise.all(g.map(async (t) => Array.from((await t.data()) as Float32Array)));
      tf.dispose(g);
    }
    tf.dispose(weights);
    return { outputs, grads };
  } finally {
    tf.dispose(xs);
  }
}

/** max |a − b| / (1 + |b|): relative for large values, absolute near zero. */
function worst(a: number[], b: number[]): number {
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i] - b[i]) / (1 + Math.abs(b[i])));
  return w;
}

const TABLES: { backend: BackendPreference; extra?: Partial<Record<keyof ModelOps, unknown>> }[] = [
  { backend: 'cpu' },
  { backend: 'wasm' },
  // the native attention is kept beside the table for the tier bench: checked here too
  { backend: 'wasm-blas', extra: WASM_BLAS_ALTERNATIVES as Partial<Record<keyof ModelOps, unknown>> },
  { backend: 'webgpu' },
];

/**
 * Every entry of `backend`'s table, plus `extra` entries beside it, against the composition on cpu: throws naming the
 * first entry off by more than its tolerance; false where the backend cannot start here.
 */
async function checkTable(backend: BackendPreference, extra?: Partial<Record<keyof ModelOps, unknown>>, own?: BackendOps['ops']): Promise<boolean> {
  const table = own ? { ops: own } : tableFor(backend);
  const entries = [
    ...Object.entries(table.ops).map(([name, e]) => ({ name, entry: e!, label: name })),
    ...Object.entries(extra ?? {}).map(([name, e]) => ({
      name,
      entry: e as { run: unknown; supports?: (d: OpDims) => boolean },
      label: `${name} (alternative)`,
    })),
  ].filter(({ name }) => name !== 'decodeAttention' && name !== 'sampleRows');
  for (const { name } of entries) assert.ok(name in CASES, `ops table ${backend} has ${name}, which has no case here: add one`);
  // the references first, on cpu, from the same host numbers the backend's run gets
  await initBackend('cpu');
  const refs = new Map<string, { inputs: Arr[]; ref: Result }>();
  for (const { name, label } of entries) {
    const c = CASES[name as keyof typeof CASES];
    const inputs = c.inputs(makeRng(label.length * 7919 + 17));
    refs.set(label, { inputs, ref: await evaluate(c, COMPOSED[name as keyof typeof CASES], inputs, 3) });
  }
  try {
    await initBackend(backend);
  } catch {
    return false;
  }
  let checked = 0;
  for (const { name, entry, label } of entries) {
    if (entry.supports && !entry.supports(D)) assert.fail(`${label} on ${backend} does not support the test's sizes ${JSON.stringify(D)}`);
    const c = CASES[name as keyof typeof CASES];
    const { inputs, ref } = refs.get(label)!;
    const got = await evaluate(c, entry.run as NonNullable<ModelOps[keyof ModelOps]>, inputs, 3);
    got.outputs.forEach((o, k) =>
      assert.ok(worst(o, ref.outputs[k]) <= c.tol.forward, `${label} on ${backend}: output ${k} off by ${worst(o, ref.outputs[k])}`),
    );
    got.grads.forEach((g, k) =>
      assert.ok(worst(g, ref.grads[k]) <= c.tol.grad, `${label} on ${backend}: gradient by input ${c.wrt[k]} off by ${worst(g, ref.grads[k])}`),
    );
    checked++;
  }
  assert.equal(checked, entries.length);
  return true;
}

for (const { backend, extra } of TABLES) {
  test(`ops table ${backend}: every entry equals the composition on cpu, forward and gradient`, { timeout: 120_000 }, async (t) => {
    if (!(await checkTable(backend, extra))) t.skip(`${backend} is not available here`);
  });
}

// A backend's new op is one entry in its table: the check above takes it as it is. A toy RMSNorm, the formula written
// out again with tfjs ops, passes; the same with its ε inside the square root's wrong side fails, naming the op.
test('toy op: an entry added to a table is checked like every other, and a wrong one is caught', { timeout: 60_000 }, async () => {
  const rms =
    (eps: (e: number) => number): ModelOps['rmsNorm'] =>
    (x, w, e) =>
      tf.tidy(() => tf.mul(tf.div(x, tf.sqrt(tf.add(tf.mean(tf.square(x), -1, true), eps(e)))), w) as tf.Tensor2D);
  assert.equal(await checkTable('cpu', undefined, { rmsNorm: { run: rms((e) => e) } }), true);
  await assert.rejects(checkTable('cpu', undefined, { rmsNorm: { run: rms(() => 0.5) } }), (e: Error) => /^rmsNorm on cpu: output 0 off by /.test(e.message));
});

test('a backend is one description: its capabilities and Adam step come from its table, and its ops resolve per size', async () => {
  const { readsSync } = await import('../../../src/engine/model/backend');
  const { backendCaps, modelOps } = await import('../../../src/engine/model/ops');
  // dropFinishedAt: a host drops a finished row at once (its compute is its cost), a GPU at a quarter of the cache
  // halfWeights: only a GPU's kernel reads packed 16-bit weights; a host rounds them and keeps float32
  const want: Record<string, { syncReads: boolean; keepTables: boolean; dropFinishedAt: number; halfWeights: boolean; adam: boolean }> = {
    cpu: { syncReads: true, keepTables: false, dropFinishedAt: 0, halfWeights: false, adam: false },
    wasm: { syncReads: true, keepTables: false, dropFinishedAt: 0, halfWeights: false, adam: true },
    'wasm-blas': { syncReads: true, keepTables: false, dropFinishedAt: 0, halfWeights: false, adam: true },
    webgpu: { syncReads: false, keepTables: true, dropFinishedAt: 0.25, halfWeights: true, adam: true },
    tensorflow: { syncReads: true, keepTables: false, dropFinishedAt: 0, halfWeights: false, adam: false },
  };
  for (const [name, w] of Object.entries(want)) {
    const table = tableFor(name);
    const { maxBindingBytes, ...caps } = table.caps;
    assert.deepEqual(caps, { syncReads: w.syncReads, keepTables: w.keepTables, dropFinishedAt: w.dropFinishedAt, halfWeights: w.halfWeights }, name);
    // host backends bind any size; a GPU the size its device granted (WebGPU's default 128 MiB without a device)
    if (name === 'webgpu') assert.ok(Number.isFinite(maxBindingBytes) && maxBindingBytes >= 128 * 2 ** 20, `${name}: ${maxBindingBytes}`);
    else assert.equal(maxBindingBytes, Infinity, name);
    assert.equal(typeof table.adamStep === 'function', w.adam, `${name}: adamStep`);
    // a backend with kernels of its own registers them in one place, its table's register(); initBackend calls it
    assert.equal(typeof table.register === 'function', w.adam, `${name}: register`);
  }
  await initBackend('wasm');
  assert.equal(readsSync(), backendCaps().syncReads);
  // swiglu's SIMD route needs dFf a multiple of 4: two models of one head size but another width resolve apart
  const fits = modelOps({ headDim: 8, dFf: 16 });
  const odd = modelOps({ headDim: 8, dFf: 18 });
  assert.notEqual(fits.swiglu, odd.swiglu);
  assert.equal(odd.swiglu, COMPOSED.swiglu);
  assert.equal(modelOps({ headDim: 8, dFf: 16 }), fits, 'resolved once per size');
});
