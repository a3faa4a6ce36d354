// Adam's in-place update (one SIMD pass per parameter on the wasm backend) against the op sequence it replaces, bit
// for bit, and its first step against a value worked out by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/engine/model/backend';
import { Adam } from '../../../src/engine/model/optim';
import { setSimdProducts } from '../../../src/engine/model/kernels/wasm_kernels';
import { makeRng, randNormal } from '../../../src/engine/core/rng';

/** Values over many magnitudes, with exact zeros and subnormal-range entries, so every rounding path is exercised. */
function values(seed: number, n: number): Float32Array {
  const rng = makeRng(seed);
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const k = i % 7;
    a[i] = k === 0 ? 0 : randNormal(rng) * 10 ** (k === 1 ? -38 : k === 2 ? 4 : k === 3 ? -6 : 0);
  }
  return a;
}

/** Runs `steps` Adam updates of two parameters from fixed values; returns the parameters and moments as bytes. */
async function run(inPlace: boolean, steps: number): Promise<{ params: Float32Array[]; state: Float32Array[]; kept: boolean }> {
  const params = new Map<string, tf.Variable>([
    ['w', tf.tidy(() => tf.variable(tf.tensor2d(values(1, 6 * 35), [6, 35]), true, `w${inPlace}`))],
    ['b', tf.tidy(() => tf.variable(tf.tensor1d(values(2, 35)), true, `b${inPlace}`))],
  ]);
  const opt = new Adam(3e-3);
  opt.inPlace = inPlace;
  const ids = [...params.values()].map((p) => p.dataId);
  for (let s = 0; s < steps; s++) {
    const grads = { w: tf.tensor2d(values(10 + s, 6 * 35), [6, 35]), b: tf.tensor1d(values(20 + s, 35)) };
    opt.apply(params, grads);
    tf.dispose(Object.values(grads));
  }
  const kept = [...params.values()].every((p, i) => p.dataId === ids[i]);
  const out = { params: [...params.values()].map((p) => p.dataSync() as Float32Array), state: Object.values(await opt.exportState()).map((a) => a.data), kept };
  opt.dispose();
  for (const p of params.values()) p.dispose();
  return out;
}

for (const backend of ['wasm', 'cpu'] as const) {
  test(`Adam in place gives the op sequence's bits (${backend})`, async () => {
    await initBackend(backend);
    const before = tf.memory().numTensors;
    const ops = await run(false, 6);
    const fused = await run(true, 6);
    assert.equal(ops.kept, false, 'the op sequence assigns new buffers');
    // wasm: the in-place update keeps each parameter's buffer (the route was taken); cpu has only the op sequence.
    assert.equal(fused.kept, backend === 'wasm');
    for (const [i, p] of ops.params.entries())
      assert.deepEqual(new Uint32Array(fused.params[i].buffer.slice(0)), new Uint32Array(p.buffer.slice(0)), `parameter ${i}`);
    assert.equal(fused.state.length, 4);
    for (const [i, m] of ops.state.entries())
      assert.deepEqual(new Uint32Array(fused.state[i].buffer.slice(0)), new Uint32Array(m.buffer.slice(0)), `moment ${i}`);
    assert.equal(tf.memory().numTensors, before, 'no tensor leaks');
  });

  test(`Adam leaves a tensor that shares a parameter's buffer alone (${backend})`, async () => {
    await initBackend(backend);
    const p = tf.variable(tf.tensor1d([1, 2, 3]), true, `shared-${backend}`);
    const view = p.clone(); // shares p's buffer on both backends
    const opt = new Adam(0.1);
    const g = tf.tensor1d([1, -1, 0.5]);
    opt.apply(new Map([['p', p]]), { p: g });
    assert.deepEqual([...view.dataSync()], [1, 2, 3]);
    // First step by hand: m̂ = g, v̂ = g², so p − lr·g / (|g| + eps) = p − 0.1·sign(g) (eps 1e-8 is below float32's resolution here).
    assert.deepEqual(
      [...p.dataSync()].map((x) => Math.round(x * 1e6) / 1e6),
      [0.9, 2.1, 2.9],
    );
    tf.dispose([p, view, g]);
    opt.dispose();
  });
}

test('Adam: two steps against values worked out by hand in float64', async () => {
  await initBackend('wasm');
  // β1 0.9, β2 0.999, lr 0.01, eps 1e-8; g = 2 then −1 on p0 = 0.5:
  // step 1: m = 0.2, v = 0.004, m̂ = 2, v̂ = 4, p1 = 0.5 − 0.01·2/(2 + 1e-8)
  // step 2: m = 0.9·0.2 − 0.1 = 0.08, v = 0.999·0.004 + 0.001 = 0.004996, m̂ = 0.08/0.19, v̂ = 0.004996/0.001999
  const m2 = 0.08 / (1 - 0.9 ** 2),
    v2 = 0.004996 / (1 - 0.999 ** 2);
  const p1 = 0.5 - (0.01 * 2) / (2 + 1e-8);
  const want = p1 - (0.01 * m2) / (Math.sqrt(v2) + 1e-8);
  const p = tf.variable(tf.tensor1d([0.5]), true, 'hand');
  const opt = new Adam(0.01);
  for (const gv of [2, -1]) {
    const g = tf.tensor1d([gv]);
    opt.apply(new Map([['p', p]]), { p: g });
    g.dispose();
  }
  assert.ok(Math.abs(p.dataSync()[0] - want) < 1e-7, `${p.dataSync()[0]} vs ${want}`);
  p.dispose();
  opt.dispose();
});

test("Adam in place drops XNNPACK's packing of the parameter (a product after the update uses the new weights)", async () => {
  await initBackend('wasm');
  setSimdProducts(false); // products on XNNPACK, which caches the packed right operand on the tensor's id
  try {
    const rng = makeRng(9);
    const x = tf.tensor2d(
      Float32Array.from({ length: 8 * 16 }, () => randNormal(rng)),
      [8, 16],
    );
    const w = tf.tidy(() =>
      tf.variable(
        tf.tensor2d(
          Float32Array.from({ length: 16 * 12 }, () => randNormal(rng)),
          [16, 12],
        ),
        true,
        'xnn-w',
      ),
    );
    const opt = new Adam(0.5);
    tf.matMul(x, w).dispose(); // packs w
    const g = tf.onesLike(w);
    const id = w.dataId;
    opt.apply(new Map([['w', w]]), { w: g });
    assert.equal(w.dataId, id, 'updated in place');
    const got = tf.matMul(x, w).dataSync();
    // float64 product with the updated weights, read back
    const xv = x.dataSync(),
      wv = w.dataSync();
    for (let i = 0; i < 8; i++)
      for (let j = 0; j < 12; j++) {
        let s = 0;
        for (let k = 0; k < 16; k++) s += xv[i * 16 + k] * wv[k * 12 + j];
        assert.ok(Math.abs(got[i * 12 + j] - s) < 1e-4, `[${i}, ${j}]: ${got[i * 12 + j]} vs ${s}`);
      }
    tf.dispose([x, w, g]);
    opt.dispose();
  } finally {
    setSimdProducts(true);
  }
});
