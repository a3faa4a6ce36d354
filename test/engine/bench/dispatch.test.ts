// The dispatch counter (bench/dispatch.ts) on lavapipe, against work whose launches are known: an Add of two tensors
// already on the device is one dispatch and no upload; a Reshape is a view and dispatches nothing; a fresh tensor is one
// upload of its bytes; reading a result is one download; and every wrapper is put back after the call.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/engine/model/backend';
import { probeAdapter } from '../../../src/engine/model/webgpu';
import { countDispatches } from '../../../src/engine/bench/dispatch';

test('countDispatches: real launches by kernel, uploads, downloads and submits, timed without tf.profile', async () => {
  const probe = await probeAdapter();
  assert.ok(probe.ok, `no WebGPU adapter (.ci/run installs lavapipe): ${probe.ok ? '' : probe.why}`);
  await initBackend('webgpu');
  const a = tf.tensor1d(Array.from({ length: 4096 }, (_, i) => i));
  const b = tf.tensor1d(Array.from({ length: 4096 }, (_, i) => 2 * i));
  // on the device before the count: the first use uploads them
  tf.add(a, b).dispose();
  const onDevice = await countDispatches(async () => {
    const c = tf.add(a, b);
    const r = tf.reshape(c, [64, 64]);
    r.dispose();
    c.dispose();
  });
  assert.equal(onDevice.dispatches, 1, JSON.stringify(onDevice));
  assert.deepEqual(onDevice.by_kernel.Add, { calls: 1, dispatches: 1 });
  assert.deepEqual(onDevice.by_kernel.Reshape, { calls: 1, dispatches: 0 }, 'a view launches nothing');
  assert.equal(onDevice.uploads.count, 0);
  assert.equal(onDevice.kernels, 2);
  assert.ok(onDevice.submits >= 1, 'the count ends with its work submitted');
  // a fresh tensor is uploaded once (16 KiB of float32), and reading the sum back is one download
  const fresh = await countDispatches(async () => {
    const d = tf.tensor1d(Array.from({ length: 4096 }, () => 1));
    const s = tf.add(a, d);
    const v = await s.data();
    assert.equal(v[10], 11);
    d.dispose();
    s.dispose();
  });
  assert.equal(fresh.uploads.count, 1);
  assert.ok(Math.abs(fresh.uploads.mb - 16 / 1024) < 1e-9, String(fresh.uploads.mb));
  assert.equal(fresh.downloads.count, 1);
  assert.equal(fresh.dispatches, 1);
  assert.ok(fresh.ms > 0);
  // the wrappers are gone: work after the count is not counted anywhere
  const before = fresh.dispatches;
  tf.add(a, b).dispose();
  assert.equal(fresh.dispatches, before);
  a.dispose();
  b.dispose();
});

test('the fused webgpu ops dispatch what their kernels say, where the compositions dispatch several times as many', async () => {
  await initBackend('webgpu');
  const { tableFor } = await import('../../../src/engine/model/ops');
  const { COMPOSED } = await import('../../../src/engine/model/ops/composed');
  const ops = tableFor('webgpu').ops;
  const N = 24;
  const d = 32;
  const x = tf.randomNormal([N, d]) as tf.Tensor2D;
  const w = tf.randomNormal([d]) as tf.Tensor1D;
  const gu = tf.randomNormal([N, 2 * d]) as tf.Tensor2D;
  const dims = { B: 2, T: 12, nHeads: 2, nKvHeads: 1, headDim: 8 };
  const qkv = tf.randomNormal([N, 4 * 8]) as tf.Tensor2D;
  const cos = tf.randomNormal([1, 3, 12, 8]) as tf.Tensor4D;
  const sin = tf.randomNormal([1, 3, 12, 8]) as tf.Tensor4D;
  // forward, and forward + backward of Σ op(x) (the loss's own Sum and its gradient's fill are the same in both)
  const forward = (f: () => tf.Tensor | tf.Tensor[]) => countDispatches(async () => tf.dispose(f()));
  const both = (f: (v: tf.Tensor) => tf.Tensor | tf.Tensor[], at: tf.Tensor) =>
    countDispatches(async () => tf.dispose(tf.grad((v: tf.Tensor) => tf.addN([f(v)].flat().map((o) => tf.sum(o))) as tf.Scalar)(at)));
  const cases = [
    { name: 'rmsNorm', fused: () => ops.rmsNorm!.run(x, w, 1e-6), composed: () => COMPOSED.rmsNorm(x, w, 1e-6), own: 1 },
    { name: 'swiglu', fused: () => ops.swiglu!.run(gu), composed: () => COMPOSED.swiglu(gu), own: 1 },
    { name: 'heads', fused: () => ops.heads!.run(qkv, cos, sin, dims), composed: () => COMPOSED.heads(qkv, cos, sin, dims), own: 3 },
  ];
  for (const c of cases) {
    const f = await forward(c.fused);
    const k = await forward(c.composed);
    assert.equal(f.dispatches, c.own, `${c.name} forward: ${JSON.stringify(f.by_kernel)}`);
    assert.ok(k.dispatches >= 3 * c.own, `${c.name}: the composition dispatches ${k.dispatches}`);
  }
  // with the gradient, exactly: the loss adds a Sum per output (and, for the heads, one AddN of the three); the rest is
  // the kernels: RMSNorm r, y, dx and dw (4 + 1); SwiGLU forward and backward (2 + 1); the heads' three parts, their
  // three gradients and the tape's two adds of them (8 + 4). The compositions: 20, 17 and 20 here.
  const at = (name: string) => (name === 'rmsNorm' ? x : name === 'swiglu' ? gu : qkv);
  const run = (name: string, table: typeof COMPOSED | typeof ops) => (v: tf.Tensor) =>
    name === 'rmsNorm'
      ? (table === COMPOSED ? COMPOSED.rmsNorm : ops.rmsNorm!.run)(v as tf.Tensor2D, w, 1e-6)
      : name === 'swiglu'
        ? (table === COMPOSED ? COMPOSED.swiglu : ops.swiglu!.run)(v as tf.Tensor2D)
        : (table === COMPOSED ? COMPOSED.heads : ops.heads!.run)(v as tf.Tensor2D, cos, sin, dims);
  const seen: string[] = [];
  for (const name of ['rmsNorm', 'swiglu', 'heads']) {
    const f = await both(run(name, ops), at(name));
    const k = await both(run(name, COMPOSED), at(name));
    seen.push(`${name}: ${f.dispatches} against ${k.dispatches}`);
    assert.equal(f.dispatches, { rmsNorm: 5, swiglu: 3, heads: 12 }[name], `${name} with its gradient: ${JSON.stringify(f.by_kernel)}`);
    assert.ok(f.dispatches < k.dispatches, `${name} with its gradient: ${f.dispatches} fused against ${k.dispatches} composed`);
  }
  console.log(seen.join('; '));
  tf.dispose([x, w, gu, qkv, cos, sin]);
});
