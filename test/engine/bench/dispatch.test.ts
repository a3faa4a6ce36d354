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
