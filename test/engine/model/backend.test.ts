// The wasm backend with our kernels must give the cpu backend's values and gradients. The cpu backend is an
// independent implementation (plain JavaScript kernels in @tensorflow/tfjs-backend-cpu); where it is itself
// wrong (general batch broadcasting in BatchMatMul) the reference is a float64 loop written here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as tf from '@tensorflow/tfjs';
import { backendInfo, blasHint, initBackend } from '../../../src/engine/model/backend';
import { isUserError } from '../../../src/engine/core/errors';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { makeRng, randNormal, type Rng } from '../../../src/engine/core/rng';
import {
  canonicalTranspose,
  DECODE_ATTENTION,
  DECODE_ATTENTION_NATIVE,
  helperThreadStats,
  PARALLEL_MIN_MACS,
  ropeRotate,
  setHelperSequenced,
  setParallelMinMacs,
  setSimdProducts,
  setSimdTransposeMin,
  swiglu,
  swigluGrad,
} from '../../../src/engine/model/kernels/wasm_kernels';
import { generate } from '../../../src/engine/model/sampler';
import { blasProducts, blasStats, blasThreads } from '../../../src/engine/model/kernels/blas';
import { relErr, smallModelConfig } from '../fixtures';

const TOL = 1e-5;

function randArray(rng: Rng, n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = randNormal(rng);
  return a;
}

function assertClose(got: ArrayLike<number>, want: ArrayLike<number>, what: string, tol = TOL): void {
  const e = relErr(got, want);
  assert.ok(e <= tol, `${what}: relative error ${e.toExponential(2)} > ${tol}`);
}

/** f in a tensor scope: every tensor it makes is disposed; it returns plain values. */
function scoped<T>(f: () => T): T {
  tf.engine().startScope();
  try {
    return f();
  } finally {
    tf.engine().endScope();
  }
}

/** Runs f on the cpu and on the wasm backend (or wasm-blas); f returns plain arrays (read inside, tensors disposed). */
async function onBoth<T>(f: () => T, wasmBackend: 'wasm' | 'wasm-blas' = 'wasm'): Promise<{ cpu: T; wasm: T }> {
  await initBackend('cpu');
  const cpu = scoped(f);
  await initBackend(wasmBackend);
  const wasm = scoped(f);
  return { cpu, wasm };
}

function readAll(ts: tf.Tensor[]): Float32Array[] {
  return ts.map((t) => Float32Array.from(t.dataSync()));
}

/** Reference batched product in float64 with numpy-style broadcasting of the batch dims. */
function refMatMul(a: Float32Array, aShape: number[], b: Float32Array, bShape: number[], ta: boolean, tb: boolean) {
  const ar = aShape.length,
    br = bShape.length;
  const M = ta ? aShape[ar - 1] : aShape[ar - 2],
    K = ta ? aShape[ar - 2] : aShape[ar - 1];
  const N = tb ? bShape[br - 2] : bShape[br - 1];
  const ab = aShape.slice(0, -2),
    bb = bShape.slice(0, -2);
  const rank = Math.max(ab.length, bb.length);
  const pa = [...Array(rank - ab.length).fill(1), ...ab],
    pb = [...Array(rank - bb.length).fill(1), ...bb];
  const ob = pa.map((d, i) => Math.max(d, pb[i]));
  const nb = ob.reduce((p, d) => p * d, 1);
  const out = new Float64Array(nb * M * N);
  for (let i = 0; i < nb; i++) {
    let rem = i,
      ia = 0,
      ib = 0,
      sa = 1,
      sb = 1;
    for (let d = rank - 1; d >= 0; d--) {
      const c = rem % ob[d];
      rem = Math.floor(rem / ob[d]);
      ia += (pa[d] === 1 ? 0 : c) * sa;
      sa *= pa[d];
      ib += (pb[d] === 1 ? 0 : c) * sb;
      sb *= pb[d];
    }
    for (let m = 0; m < M; m++)
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let k = 0; k < K; k++) {
          const av = a[ia * M * K + (ta ? k * M + m : m * K + k)];
          const bv = b[ib * K * N + (tb ? n * K + k : k * N + n)];
          s += av * bv;
        }
        out[(i * M + m) * N + n] = s;
      }
  }
  return { out, shape: [...ob, M, N] };
}

test('auto picks wasm-blas here (OpenBLAS installed) and says why; wasm stays plain; tensorflow without tfjs-node is a UserError naming the install', async () => {
  const req = createRequire(__filename);
  const installed = (p: string) => {
    try {
      req.resolve(p);
      return true;
    } catch {
      return false;
    }
  };
  if (installed('@tensorflow/tfjs-node') || installed('@tensorflow/tfjs-node-gpu')) return; // another machine
  // This machine (and CI, which installs libopenblas0-pthread) has OpenBLAS: auto must find it.
  const choice = await initBackend('auto');
  assert.equal(choice.backend, 'wasm-blas');
  assert.equal(tf.getBackend(), 'wasm');
  assert.match(choice.reason, /tfjs-node-gpu not installed; tfjs-node not installed; wasm SIMD with products on OpenBLAS \d/);
  assert.ok(blasProducts());
  const info = backendInfo();
  assert.equal(info?.backend, 'wasm-blas');
  assert.match(info?.blas ?? '', /^OpenBLAS \d+\.\d+/);
  assert.ok((info?.blas_threads ?? 0) >= 1);
  assert.ok(info?.patched_kernels?.includes('BatchMatMul'));
  const plain = await initBackend('wasm');
  assert.equal(plain.backend, 'wasm');
  assert.match(plain.reason, /wasm SIMD$/);
  assert.equal(blasProducts(), false, 'backend: wasm must not route products to OpenBLAS');
  assert.equal(backendInfo()?.blas, undefined);
  await assert.rejects(initBackend('tensorflow'), (e: unknown) => isUserError(e) && /npm install @tensorflow\/tfjs-node@4\.22\.0/.test((e as Error).message));
  assert.deepEqual(await initBackend('cpu'), { backend: 'cpu', reason: 'cpu requested' });
  assert.equal(tf.getBackend(), 'cpu');
  assert.equal(blasProducts(), false);
});

for (const route of ['SIMD loop', 'XNNPACK / stock', 'OpenBLAS'] as const)
  test(`matMul values and gradients: every transpose combination, batch 1 and > 1 (${route})`, async () => {
    const rng = makeRng(11);
    // [M, K, N]: 16·16·16 takes the SIMD loop, or the XNNPACK route; 4·3·5 is below the SIMD tile (4 × 8) in
    // both forms and below the XNNPACK size threshold: stock loop; 40·24·8 has M > N, which takes the swapped
    // Cᵀ = Bᵀ·Aᵀ route for Aᵀ·B.
    const dims = [
      [16, 16, 16],
      [4, 3, 5],
      [40, 24, 8],
      [8, 24, 40],
    ];
    setSimdProducts(route === 'SIMD loop');
    const calls = blasStats.calls;
    try {
      for (const batch of [[], [1], [3], [2, 3]]) {
        for (const [M, K, N] of dims) {
          for (const ta of [false, true])
            for (const tb of [false, true]) {
              const aShape = [...batch, ...(ta ? [K, M] : [M, K])],
                bShape = [...batch, ...(tb ? [N, K] : [K, N])];
              const a = randArray(
                  rng,
                  aShape.reduce((p, d) => p * d, 1),
                ),
                b = randArray(
                  rng,
                  bShape.reduce((p, d) => p * d, 1),
                );
              const w = randArray(
                rng,
                [...batch, M, N].reduce((p, d) => p * d, 1),
              );
              const r = await onBoth(
                () => {
                  const at = tf.tensor(a, aShape),
                    bt = tf.tensor(b, bShape),
                    wt = tf.tensor(w, [...batch, M, N]);
                  const y = tf.matMul(at, bt, ta, tb);
                  const g = tf.grads((x: tf.Tensor, z: tf.Tensor) => tf.sum(tf.mul(tf.matMul(x, z, ta, tb), wt)))([at, bt]);
                  return readAll([y, ...g]);
                },
                route === 'OpenBLAS' ? 'wasm-blas' : 'wasm',
              );
              const what = `batch [${batch}] ${M}x${K}x${N} ta=${ta} tb=${tb}`;
              assertClose(r.wasm[0], r.cpu[0], `${what} value`);
              assertClose(r.wasm[1], r.cpu[1], `${what} grad a`);
              assertClose(r.wasm[2], r.cpu[2], `${what} grad b`);
              // The cpu value itself against float64: guards against both backends sharing a mistake.
              assertClose(r.cpu[0], refMatMul(a, aShape, b, bShape, ta, tb).out, `${what} cpu vs float64`);
            }
        }
      }
      // 4 shapes × 4 batches × 4 transpose pairs, each a product and its two gradient products
      if (route === 'OpenBLAS') assert.ok(blasStats.calls - calls >= 4 * 4 * 4 * 3, 'the products went through OpenBLAS');
      else assert.equal(blasStats.calls, calls, 'backend wasm keeps its products off OpenBLAS');
    } finally {
      setSimdProducts(true);
    }
  });

test('a batch of small OpenBLAS products split over both cores gives the bits of one thread, and a float64 reference', async () => {
  await initBackend('wasm-blas');
  const threads = blasThreads();
  assert.ok(threads >= 2, `OpenBLAS has ${threads} thread(s) here: the split would not run and this test would check nothing`);
  // 9 products (an odd batch: the halves differ) of 20×24×12, every transpose combination
  const rng = makeRng(44);
  const B = 9,
    M = 20,
    N = 24,
    K = 12;
  const a = Float32Array.from({ length: B * M * K }, () => randNormal(rng));
  const b = Float32Array.from({ length: B * K * N }, () => randNormal(rng));
  for (const [ta, tb] of [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ]) {
    const A = tf.tensor3d(a, ta ? [B, K, M] : [B, M, K]),
      Bt = tf.tensor3d(b, tb ? [B, N, K] : [B, K, N]);
    const split = tf.matMul(A, Bt, ta, tb).dataSync().slice();
    blasThreads(1);
    const one = tf.matMul(A, Bt, ta, tb).dataSync().slice();
    blasThreads(threads);
    assert.deepEqual(split, one, `transposeA ${ta}, transposeB ${tb}: the split changed bits`);
    let worst = 0;
    for (let i = 0; i < B; i++) {
      for (let r = 0; r < M; r++) {
        for (let c = 0; c < N; c++) {
          let want = 0;
          for (let k = 0; k < K; k++) want += a[i * M * K + (ta ? k * M + r : r * K + k)] * b[i * K * N + (tb ? c * K + k : k * N + c)];
          worst = Math.max(worst, Math.abs(split[(i * M + r) * N + c] - want) / (1 + Math.abs(want)));
        }
      }
    }
    assert.ok(worst < 1e-5, `transposeA ${ta}, transposeB ${tb}: ${worst}`);
    tf.dispose([A, Bt]);
  }
});

test("a single large OpenBLAS product split in halves over both cores (rows or columns): the same bits every time, one thread's values to rounding, a float64 reference", async () => {
  await initBackend('wasm-blas');
  const threads = blasThreads();
  assert.ok(threads >= 2, `OpenBLAS has ${threads} thread(s) here: the split would not run and this test would check nothing`);
  // Past LARGE_PRODUCT_MACS (2^24) in native/gemm.c, odd sizes so the halves differ: 301×257×263 splits C's rows,
  // 131×301×517 its columns (the larger side is split).
  const rng = makeRng(45);
  for (const [M, K, N] of [
    [301, 257, 263],
    [131, 301, 517],
  ]) {
    assert.ok(M * K * N > 2 ** 24);
    const a = Float32Array.from({ length: M * K }, () => randNormal(rng));
    const b = Float32Array.from({ length: K * N }, () => randNormal(rng));
    for (const [ta, tb] of [
      [false, false],
      [true, false],
      [false, true],
      [true, true],
    ]) {
      const A = tf.tensor2d(a, ta ? [K, M] : [M, K]),
        Bt = tf.tensor2d(b, tb ? [N, K] : [K, N]);
      const split = tf.matMul(A, Bt, ta, tb).dataSync().slice();
      const again = tf.matMul(A, Bt, ta, tb).dataSync().slice();
      blasThreads(1);
      const one = tf.matMul(A, Bt, ta, tb).dataSync().slice();
      blasThreads(threads);
      // The halves are fixed by the shape: a seeded run repeats its bits. Bit-equality with one thread holds on Intel's
      // OpenBLAS kernels but not on AMD Zen's (0.3.21), whose rounding depends on the product's M and N (native/gemm.c).
      assert.deepEqual(split, again, `${M}×${K}×${N} transposeA ${ta}, transposeB ${tb}: the split is not deterministic`);
      assertClose(split, Array.from(one), `${M}×${K}×${N} transposeA ${ta}, transposeB ${tb} vs one thread`);
      const want = refMatMul(a, ta ? [K, M] : [M, K], b, tb ? [N, K] : [K, N], ta, tb).out;
      assertClose(split, want, `${M}×${K}×${N} transposeA ${ta}, transposeB ${tb} vs float64`);
      tf.dispose([A, Bt]);
    }
  }
});

test('SIMD products: blocks over K and N, rows copied off power-of-two strides, ragged tiles (float64 reference)', async () => {
  const rng = makeRng(17);
  await initBackend('wasm');
  // [M, K, N, tA, tB]. 8·600·256: K in blocks of 256 accumulated into C, B rows 256 floats apart (copied to a
  // padded stride). 37·300·70: ragged tiles, so K stays one block and the last tiles shift back. 130·40·520:
  // N blocks 256 + 264 (a last block narrower than a tile joins the previous one). 4·5·8: one tile.
  const cases: [number, number, number, boolean, boolean][] = [
    [8, 600, 256, false, false],
    [8, 600, 256, true, false],
    [37, 300, 70, false, true],
    [130, 40, 520, false, false],
    [4, 5, 8, false, false],
    [9, 7, 5, true, true],
  ];
  for (const [M, K, N, ta, tb] of cases) {
    const aShape = ta ? [K, M] : [M, K],
      bShape = tb ? [N, K] : [K, N];
    const a = randArray(rng, M * K),
      b = randArray(rng, K * N);
    const y = tf.matMul(tf.tensor(a, aShape), tf.tensor(b, bShape), ta, tb);
    assertClose(y.dataSync(), refMatMul(a, aShape, b, bShape, ta, tb).out, `${M}x${K}x${N} ta=${ta} tb=${tb}`);
    tf.dispose(y);
  }
});

test('products shared with the helper thread (by rows, by columns, ragged) match a float64 reference', async () => {
  const rng = makeRng(19);
  await initBackend('wasm');
  setParallelMinMacs(1);
  try {
    // [M, K, N]: the first two split by rows (copying half of A and all of B is less than all of A and half of
    // B), the last two by columns; the second and fourth end in a chunk wider than the others (14 rows, 38
    // columns).
    const cases: [number, number, number][] = [
      [256, 128, 256],
      [254, 128, 250],
      [40, 200, 400],
      [40, 200, 398],
    ];
    const inputs = cases.map(([M, K, N]) => [randArray(rng, M * K), randArray(rng, K * N)]);
    const want = cases.map(([M, K, N], i) => refMatMul(inputs[i][0], [M, K], inputs[i][1], [K, N], false, false).out);
    const run = (what: string) =>
      cases.forEach(([M, K, N], i) => {
        const y = tf.matMul(tf.tensor2d(inputs[i][0], [M, K]), tf.tensor2d(inputs[i][1], [K, N]));
        assertClose(y.dataSync(), want[i], `${M}x${K}x${N} ${what}`);
        tf.dispose(y);
      });
    // Sequenced: the worker computes its last 1, 3 or 100 (all) chunks and this thread the rest, so its results
    // are copied back from every kind of offset. Its half is the last ⌈count/2⌉ of `count` chunks of ⌊size/16⌋
    // rows or columns, rounded down to whole tiles (4 rows, 8 columns): 256 rows → 16 of 16, 254 → 21 of 12,
    // 400 and 398 columns → 16 of 24; halves 8, 11, 8, 8.
    const halves = [8, 11, 8, 8];
    for (const n of [1, 3, 100]) {
      setHelperSequenced(n);
      const s0 = helperThreadStats();
      run(`worker takes ${n}`);
      const s1 = helperThreadStats();
      assert.equal(s1.products - s0.products, 4, 'every product went through the helper');
      assert.equal(s1.byRows - s0.byRows, 2);
      assert.equal(
        s1.workerChunks - s0.workerChunks,
        halves.reduce((t, h) => t + Math.min(n, h), 0),
        `the worker took ${n} chunks of each product`,
      );
    }
    // and racing, as in use
    setHelperSequenced(0);
    for (let round = 0; round < 5; round++) run(`race ${round}`);
  } finally {
    setParallelMinMacs(PARALLEL_MIN_MACS);
    setHelperSequenced(0);
  }
});

for (const backend of ['wasm', 'wasm-blas'] as const)
  test(`matMul with broadcast batch dims matches a float64 reference on ${backend} (the stock wasm kernel does not)`, async () => {
    // tfjs has no gradient for broadcast batches (its BatchMatMul grad does not reduce over them), so values only.
    const rng = makeRng(12);
    await initBackend(backend);
    const cases: [number[], number[], boolean, boolean][] = [
      [[1, 16, 16], [3, 16, 16], false, false], // stock wasm: computes batch 0 only
      [[3, 16, 16], [1, 16, 16], false, true], // stock wasm: reads past b
      [[3, 16, 16], [16, 16], true, false],
      [[16, 16], [3, 16, 16], true, true],
      [[2, 1, 16, 16], [3, 16, 16], false, false], // out batch [2, 3]: the cpu backend gets this one wrong too
      [[2, 1, 4, 3], [1, 3, 3, 5], false, false],
    ];
    for (const [aShape, bShape, ta, tb] of cases) {
      const a = randArray(
          rng,
          aShape.reduce((p, d) => p * d, 1),
        ),
        b = randArray(
          rng,
          bShape.reduce((p, d) => p * d, 1),
        );
      const ref = refMatMul(a, aShape, b, bShape, ta, tb);
      const y = tf.matMul(tf.tensor(a, aShape), tf.tensor(b, bShape), ta, tb);
      assert.deepEqual(y.shape, ref.shape);
      assertClose(y.dataSync(), ref.out, `[${aShape}]·[${bShape}] ta=${ta} tb=${tb}`);
      tf.dispose(y);
    }
  });

test('gather gradient (embedding lookups, axis 0 and 1) and unsortedSegmentSum', async () => {
  const rng = makeRng(13);
  const V = 300,
    d = 24,
    n = 200;
  const ids = Int32Array.from({ length: n }, (_, i) => (i % 7 === 0 ? 5 : Math.floor(rng() * V))); // repeats
  const table = randArray(rng, V * d),
    w = randArray(rng, n * d);
  const r = await onBoth(() => {
    const idx = tf.tensor1d(ids, 'int32'),
      wt = tf.tensor2d(w, [n, d]);
    const g0 = tf.grad((p: tf.Tensor) => tf.sum(tf.mul(tf.gather(p, idx, 0), wt)))(tf.tensor2d(table, [V, d]));
    // axis 1 on the [d, V] layout the model uses for tied embeddings
    const g1 = tf.grad((p: tf.Tensor) => tf.sum(tf.mul(tf.transpose(tf.gather(p, idx, 1)), wt)))(tf.tensor2d(table, [d, V]));
    // ids out of range are dropped (TF semantics); the cpu kernel's per-segment masks drop them too
    const seg = tf.unsortedSegmentSum(tf.tensor2d(w.subarray(0, 6 * d), [6, d]), tf.tensor1d([0, 3, -1, 3, 7, 1], 'int32'), 4);
    return readAll([g0, g1, seg]);
  });
  assertClose(r.wasm[0], r.cpu[0], 'gather axis 0 grad');
  assertClose(r.wasm[1], r.cpu[1], 'gather axis 1 grad');
  assertClose(r.wasm[2], r.cpu[2], 'unsortedSegmentSum');
  // Row 3 of the segment sum is input rows 1 + 3 (ids [0,3,-1,3,7,1]): checked by hand against the inputs.
  for (let j = 0; j < d; j++) assert.ok(Math.abs(r.wasm[2][3 * d + j] - (w[d + j] + w[3 * d + j])) < 1e-6);
  // Row 5 was only ever hit by id 5 at i = 0, 7, 14, …: its gradient is the sum of those rows of w.
  for (let j = 0; j < d; j++) {
    let s = 0;
    for (let i = 0; i < n; i++) if (ids[i] === 5) s += w[i * d + j];
    assert.ok(Math.abs(r.wasm[0][5 * d + j] - s) < 1e-4);
  }
});

test('sum over any axes, gather, concat and split match the cpu backend', async () => {
  const rng = makeRng(16);
  const sums: [number[], number | number[], boolean][] = [
    [[300, 70], 0, false], // bias / norm-weight gradient: leading axis
    [[300, 70], 1, true], // innermost: stock kernel
    [[4, 30, 70], [0, 1], false],
    [[4, 30, 70], [0, 2], true],
    [[4, 30, 70], 1, false],
    [[1, 30, 1, 7], [0, 2], false],
    [[1, 1], 0, false],
    [[3, 1, 5, 2], [0, 1, 3], true],
  ];
  const sdata = sums.map(([s]) =>
    randArray(
      rng,
      s.reduce((p, d) => p * d, 1),
    ),
  );
  const gx = randArray(rng, 5 * 40 * 3);
  const gi = Int32Array.from({ length: 17 }, () => Math.floor(rng() * 40));
  const ca = randArray(rng, 2 * 3 * 4 * 16),
    cb = randArray(rng, 2 * 3 * 4 * 40),
    cc = randArray(rng, 2 * 3 * 4 * 1);
  const r = await onBoth(() =>
    readAll([
      ...sums.map(([s, axis, keep], i) => tf.sum(tf.tensor(sdata[i], s), axis, keep)),
      // the gathered axis (40 long) in each position
      ...(
        [
          [40, 5, 3],
          [5, 40, 3],
          [5, 3, 40],
        ] as const
      ).map((shape, axis) => tf.gather(tf.tensor3d(gx, [...shape]), tf.tensor1d(gi, 'int32'), axis)),
      tf.gather(tf.tensor1d(gx), tf.tensor2d(gi.subarray(0, 16), [4, 4], 'int32')),
      tf.concat([tf.tensor4d(ca, [2, 3, 4, 16]), tf.tensor4d(cb, [2, 3, 4, 40]), tf.tensor4d(cc, [2, 3, 4, 1])], 3),
      tf.concat([tf.tensor4d(ca, [2, 3, 4, 16]), tf.tensor4d(ca, [2, 3, 4, 16])], 1),
      ...tf.split(tf.tensor4d(cb, [2, 3, 4, 40]), [8, 32], 3),
      ...tf.split(tf.tensor4d(cb, [2, 3, 4, 40]), 3, 1),
      // int32 and bool data through the same kernels (bool stays on the stock ones)
      tf.slice(tf.tensor2d(gi.subarray(0, 16), [4, 4], 'int32'), [1, 1], [2, 3]),
      tf.concat([tf.tensor1d(gi, 'int32'), tf.tensor1d(gi, 'int32')]),
      tf.transpose(
        tf.tensor3d(
          Int32Array.from({ length: 5 * 40 * 3 }, (_, i) => i),
          [5, 40, 3],
          'int32',
        ),
        [2, 0, 1],
      ),
      tf.gather(tf.tensor2d(gi.subarray(0, 16), [4, 4], 'int32'), tf.tensor1d([3, 0, 3], 'int32')),
      tf.transpose(tf.greater(tf.tensor3d(gx, [5, 40, 3]), 0), [2, 0, 1]),
      tf.slice(tf.greater(tf.tensor3d(gx, [5, 40, 3]), 0), [1, 2, 0], [2, 5, 2]),
    ]),
  );
  // Pure data movement is exact; sums are float64-accumulated on both (wasm: ours, cpu: JS numbers) except
  // the innermost case, which stays on the stock float32 kernel.
  r.cpu.forEach((want, i) => assertClose(r.wasm[i], want, `case ${i}`, i < sums.length ? 1e-6 : 0));
  await initBackend('wasm');
  assert.throws(() => tf.gather(tf.tensor1d([1, 2, 3]), tf.tensor1d([3], 'int32')), /index value 3 is not in \[0, 2\]/);
  // Identity and same-dtype Cast share the data (as on the cpu backend); each stays valid when the other goes.
  const x = tf.tensor1d([1, 2, 3]);
  const y = tf.clone(x),
    z = tf.cast(x, 'float32');
  x.dispose();
  y.dispose();
  assert.deepEqual([...z.dataSync()], [1, 2, 3]);
  z.dispose();
});

test('transpose (rank 2–6, size-1 dims, identity) and slice match the cpu backend', async () => {
  // canonicalTranspose: size-1 dims dropped, axes that stay adjacent merged. [B,T,kv,rep,hd] → [B,kv,rep,T,hd]
  // is the 4-D [B, T, kv·rep, hd] → perm [0,2,1,3].
  assert.deepEqual(canonicalTranspose([2, 5, 3, 4, 6], [0, 2, 3, 1, 4]), { shape: [2, 5, 12, 6], perm: [0, 2, 1, 3] });
  assert.deepEqual(canonicalTranspose([1, 5, 1, 4], [2, 3, 0, 1]), { shape: [5, 4], perm: [1, 0] });
  assert.deepEqual(canonicalTranspose([3, 1, 4], [1, 0, 2]), { shape: [12], perm: [0] });
  const rng = makeRng(14);
  const cases: [number[], number[]][] = [
    [
      [130, 140],
      [1, 0],
    ], // ≥ 16384 elements: tiled JS path when there is no SIMD
    [
      [31, 45],
      [1, 0],
    ], // SIMD 4×4 blocks with ragged rows and columns
    [
      [7, 9],
      [1, 0],
    ], // < 256 elements: stock
    [
      [3, 200, 90],
      [0, 2, 1],
    ],
    [
      [2, 5, 3, 4, 6],
      [0, 2, 3, 1, 4],
    ],
    [
      [2, 5, 3, 4, 6],
      [4, 3, 2, 1, 0],
    ], // rank 5 that does not reduce: JS loop
    [
      [2, 3, 1, 4, 5, 2],
      [5, 0, 4, 2, 1, 3],
    ],
    [
      [3, 1, 4],
      [1, 0, 2],
    ], // identity on the data: shares it
  ];
  const slices: [number[], number[], number[]][] = [
    [
      [6, 7, 8],
      [1, 2, 3],
      [4, 3, 5],
    ],
    [
      [6, 7, 8],
      [2, 0, 0],
      [3, 7, 8],
    ],
    [
      [4, 5, 6, 7, 3],
      [1, 1, 0, 2, 1],
      [2, 3, 6, 4, 2],
    ],
    [[10], [3], [0]],
  ];
  const data = cases.map(([s]) =>
    randArray(
      rng,
      s.reduce((p, d) => p * d, 1),
    ),
  );
  const sdata = slices.map(([s]) =>
    randArray(
      rng,
      s.reduce((p, d) => p * d, 1),
    ),
  );
  const r = await onBoth(() => [
    ...readAll(cases.map(([s, p], i) => tf.transpose(tf.tensor(data[i], s), p))),
    ...readAll(slices.map(([s, b, z], i) => tf.slice(tf.tensor(sdata[i], s), b, z))),
  ]);
  // Pure data movement: equal exactly.
  r.cpu.forEach((want, i) => assert.deepEqual(r.wasm[i], want, `case ${i}`));
  // The same transposes through the JS tiles (the path of runtimes without WebAssembly SIMD).
  setSimdTransposeMin(Infinity);
  try {
    const js = scoped(() => readAll(cases.map(([s, p], i) => tf.transpose(tf.tensor(data[i], s), p))));
    js.forEach((got, i) => assert.deepEqual(got, r.cpu[i], `JS tiles, case ${i}`));
  } finally {
    setSimdTransposeMin(256);
  }
  // The identity case shares its input's data; disposing either leaves the other readable.
  const x = tf.tensor(data[7], [3, 1, 4]);
  const y = tf.transpose(x, [1, 0, 2]);
  x.dispose();
  assert.deepEqual(Float32Array.from(y.dataSync()), data[7]);
  y.dispose();
});

function smallConfig(tie: boolean): ModelConfig {
  return smallModelConfig({ tieEmbeddings: tie });
}

for (const backend of ['wasm', 'wasm-blas'] as const)
  test(`gradients of the whole model on ${backend} equal the cpu backend (per parameter, 1e-5 relative)`, async () => {
    const B = 3,
      T = 12;
    const rng = makeRng(15);
    const ids = Int32Array.from({ length: B * T }, () => Math.floor(rng() * 40));
    // Row 1 is left-padded by 4 positions, as a batch of prompts of different lengths is.
    const keyMask = Float32Array.from({ length: B * T }, (_, i) => (Math.floor(i / T) === 1 && i % T < 4 ? 0 : 1));
    const chosen = Int32Array.from({ length: B * T }, () => Math.floor(rng() * 40));
    const weights = Float32Array.from({ length: B * T }, (_, i) => keyMask[i] * (rng() * 2 - 1));
    for (const tie of [true, false]) {
      await initBackend('cpu');
      const model = Transformer.init(smallConfig(tie), 7);
      const names = [...model.params.keys()];
      const grads = () =>
        scoped(() => {
          const { grads: g } = tf.variableGrads(() => {
            const { logits } = model.forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(keyMask, [B, T]));
            const logp = tf.logSoftmax(logits.reshape([B * T, 40]));
            const picked = tf.sum(tf.mul(logp, tf.oneHot(tf.tensor1d(chosen, 'int32'), 40)), 1);
            return tf.mean(tf.mul(picked, tf.tensor1d(weights))) as tf.Scalar;
          }, [...model.params.values()]);
          const byVar = new Map([...model.params].map(([n, v]) => [v.name, n]));
          return new Map(Object.entries(g).map(([k, t]) => [byVar.get(k)!, Float32Array.from(t.dataSync())]));
        });
      const cpu = grads();
      await initBackend(backend);
      const before = tf.memory().numTensors;
      const wasm = grads();
      assert.equal(tf.memory().numTensors, before, 'no tensors leak from the wasm kernels');
      assert.equal(cpu.size, names.length);
      for (const n of names) {
        const c = cpu.get(n)!;
        assert.ok(
          c.some((v) => v !== 0),
          `${n}: zero cpu gradient would make the comparison vacuous`,
        );
        assertClose(wasm.get(n)!, c, `tie=${tie} ${n}`);
      }
      model.dispose();
    }
  });

test('repeated training-like steps on wasm keep tensor and wasm-memory counts flat', async () => {
  await initBackend('wasm');
  const model = Transformer.init(smallConfig(true), 3);
  const ids = tf.tensor2d(
    Int32Array.from({ length: 24 }, (_, i) => i % 40),
    [2, 12],
    'int32',
  );
  const mask = tf.ones([2, 12]) as tf.Tensor2D;
  const step = () =>
    tf.tidy(() => {
      const { grads } = tf.variableGrads(() => tf.mean(model.forward(ids, mask).logits) as tf.Scalar, [...model.params.values()]);
      tf.dispose(Object.values(grads));
    });
  step();
  const be = tf.backend() as unknown as { numDataIds(): number };
  const tensors = tf.memory().numTensors,
    dataIds = be.numDataIds();
  for (let i = 0; i < 3; i++) step();
  assert.equal(tf.memory().numTensors, tensors);
  assert.equal(be.numDataIds(), dataIds);
  tf.dispose([ids, mask]);
  model.dispose();
});

test('RoPE and SwiGLU kernels: values and the gradients model.ts gives them match autodiff of the ops on cpu', async () => {
  const rng = makeRng(18);
  const [B, n, T, hd] = [2, 3, 5, 16];
  const x = randArray(rng, B * n * T * hd),
    dy = randArray(rng, B * n * T * hd);
  // RoPE tables as model.ts builds them: cos equal on both halves, sin sign-folded ([−sin θ, +sin θ])
  const cos = new Float32Array(n * T * hd),
    sin = new Float32Array(n * T * hd);
  for (let r = 0; r < n * T; r++)
    for (let i = 0; i < hd / 2; i++) {
      const a = (r % T) * (1 + i) * 0.37;
      cos[r * hd + i] = cos[r * hd + hd / 2 + i] = Math.cos(a);
      sin[r * hd + i] = -Math.sin(a);
      sin[r * hd + hd / 2 + i] = Math.sin(a);
    }
  const [N, F] = [7, 12];
  const gu = randArray(rng, N * 2 * F),
    dAct = randArray(rng, N * F);
  const tables = () => [tf.tensor4d(cos, [1, n, T, hd]), tf.tensor4d(sin, [1, n, T, hd])];
  // reference: the plain op formulas and their autodiff, on the cpu backend
  await initBackend('cpu');
  const ref = scoped(() => {
    const [c, s] = tables();
    const rope = (v: tf.Tensor) => {
      const [v1, v2] = tf.split(v, 2, 3);
      return tf.add(tf.mul(v, c), tf.mul(tf.concat([v2, v1], 3), s));
    };
    const act = (v: tf.Tensor) => {
      const [g, u] = tf.split(v, 2, 1);
      return tf.mul(tf.mul(g, tf.sigmoid(g)), u);
    };
    const xt = tf.tensor4d(x, [B, n, T, hd]),
      gt = tf.tensor2d(gu, [N, 2 * F]);
    return readAll([
      rope(xt),
      tf.grad(rope)(xt, tf.tensor4d(dy, [B, n, T, hd])),
      act(gt),
      tf.grad(act)(gt, tf.tensor2d(dAct, [N, F])),
      tf.sigmoid(tf.split(gt, 2, 1)[0]),
    ]);
  });
  await initBackend('wasm');
  const got = scoped(() => {
    const [c, s] = tables();
    const xt = tf.tensor4d(x, [B, n, T, hd]),
      gt = tf.tensor2d(gu, [N, 2 * F]);
    const { act, sig } = swiglu(gt);
    // the gradient of the rotation is the rotation of dy with −sin (model.ts, rope)
    return readAll([ropeRotate(xt, c, s), ropeRotate(tf.tensor4d(dy, [B, n, T, hd]), c, tf.neg(s)), act, swigluGrad(gt, sig, tf.tensor2d(dAct, [N, F])), sig]);
  });
  // the SIMD sigmoid is a polynomial e^x (~1 ulp), not the cpu backend's Math.exp: a few ulps apart
  ['rope', 'rope gradient', 'swiglu', 'swiglu gradient', 'sigmoid'].forEach((what, i) => assertClose(got[i], ref[i], what, 1e-6));
});

/** A model whose head dimension (8) is a multiple of 4, so decoding on wasm takes the in-place kernel. */
function decodeConfig(): ModelConfig {
  return {
    arch: 'qwen2',
    vocabSize: 40,
    dModel: 32,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    dFf: 48,
    maxSeqLen: 40,
    ropeTheta: 10000,
    rmsEps: 1e-6,
    tieEmbeddings: true,
    qkvBias: true,
  };
}

/** Weights of std ≈ 0.3: attention far from uniform, so a wrong key, mask or position shows in the logits. */
function sharpDecodeModel(seed: number): Transformer {
  const base = Transformer.init(decodeConfig(), seed);
  const w = base.exportWeights();
  base.dispose();
  const rng = makeRng(seed);
  for (const [name, t] of Object.entries(w)) if (!name.includes('norm')) for (let i = 0; i < t.data.length; i++) t.data[i] = rng() - 0.5;
  return Transformer.fromWeights(decodeConfig(), w);
}

for (const backend of ['wasm', 'wasm-blas'] as const)
  test(`in-place KV-cache decoding on ${backend} gives the cpu backend's full-forward logits`, async () => {
    // Three left-padded prompts, 14 decode steps: the cache starts with room for 8 positions, so it grows twice
    // (8 → 16 → 32), and row 1 is dropped after step 5 as the sampler drops finished rows.
    const prompts = [
      [0, 0, 5, 6, 7],
      [1, 2, 3, 4, 5],
      [0, 0, 0, 9, 10],
    ];
    const pad = [2, 0, 3];
    const next = prompts.map((_, r) => Array.from({ length: 14 }, (_, j) => (r * 11 + j * 7 + 3) % 40));
    await initBackend('cpu');
    const model = sharpDecodeModel(21);
    const seqs = prompts.map((p, r) => [...p, ...next[r]]);
    const T = seqs[0].length;
    const full = scoped(
      () =>
        model
          .forward(
            tf.tensor2d(seqs.flat(), [3, T], 'int32'),
            tf.tensor2d(
              seqs.flatMap((row, b) => row.map((_, t) => (t < pad[b] ? 0 : 1))),
              [3, T],
            ),
          )
          .logits.arraySync() as number[][][],
    );
    await initBackend(backend);
    const before = tf.memory().numTensors;
    const ids = tf.tensor2d(prompts.flat(), [3, 5], 'int32');
    const mask = tf.tensor2d(
      prompts.flatMap((row, b) => row.map((_, t) => (t < pad[b] ? 0 : 1))),
      [3, 5],
    );
    let { logits, cache } = model.prefill(ids, mask, { capacity: 8 });
    tf.dispose([ids, mask]);
    assert.ok(cache.inPlace, 'wasm with head dim 8 must take the in-place path (else this test checks nothing new)');
    let live = [0, 1, 2];
    let worst = 0;
    for (let s = 0; s <= 14; s++) {
      const got = logits.arraySync() as number[][];
      live.forEach((row, r) => {
        worst = Math.max(worst, relErr(got[r], full[row][4 + s]));
      });
      logits.dispose();
      if (s === 14) break;
      if (s === 5) {
        cache = model.keepCacheRows(cache, [0, 2]);
        live = [0, 2];
      }
      const step = () => {
        ({ logits, cache } = model.decodeStep(
          cache,
          live.map((row) => next[row][s]),
        ));
      };
      if (s > 0) {
        step();
        continue;
      }
      // wasm-blas attends in native code (native/attention.c DecodeStep), plain wasm on the SIMD loops
      const names = (await tf.profile(step)).kernels.map((k) => k.name);
      assert.ok(names.includes(backend === 'wasm' ? DECODE_ATTENTION : DECODE_ATTENTION_NATIVE), names.join(' '));
    }
    assert.ok(worst < 1e-5, `relative logit error ${worst.toExponential(2)}`);
    assert.equal(cache.length, 19);
    assert.deepEqual(cache.keys[0].shape, [2, 2, 8, 32]);
    // positions written so far are real (prompt padding stays 0), the spare capacity is not
    const km = cache.keyMask.arraySync() as number[][];
    assert.deepEqual(km[1].slice(0, 20), [0, 0, 0, ...new Array(16).fill(1), 0]);
    model.disposeCache(cache);
    assert.equal(tf.memory().numTensors, before, 'no tensors leak from prefill / decode / growth / row selection');
    model.dispose();
  });

for (const backend of ['wasm', 'wasm-blas'] as const)
  test(`sampling on ${backend} (in-place cache) reproduces the cpu backend's tokens, logprobs and entropies`, async () => {
    await initBackend('cpu');
    const model = sharpDecodeModel(22);
    const prompts = [
      [3, 4, 5, 6, 7, 8],
      [9, 10],
      [11, 12, 13],
    ];
    const opts = { maxNewTokens: 12, temperature: 0.8, topP: 1, eosId: 39 };
    const cpu = await generate(model, prompts, { ...opts, rng: makeRng(5) });
    await initBackend(backend);
    const wasm = await generate(model, prompts, { ...opts, rng: makeRng(5) });
    for (let r = 0; r < prompts.length; r++) {
      assert.deepEqual(wasm[r].ids, cpu[r].ids, `row ${r}`);
      assert.equal(wasm[r].stopped, cpu[r].stopped);
      wasm[r].logprobs.forEach((lp, i) => assert.ok(Math.abs(lp - cpu[r].logprobs[i]) < 1e-4, `row ${r} logprob ${i}`));
      wasm[r].entropies.forEach((h, i) => assert.ok(Math.abs(h - cpu[r].entropies[i]) < 1e-4, `row ${r} entropy ${i}`));
    }
    assert.ok(new Set(cpu.flatMap((s) => s.ids)).size > 4, 'varied tokens, so agreement is not trivial');
    model.dispose();
  });

test('the first run says its backend in one line, and adds a second only where OpenBLAS is one install away', () => {
  const missing =
    'webgpu adapter llvmpipe (software) is a CPU rasteriser, not picked by auto; wasm-blas unavailable: no usable OpenBLAS library (libopenblas.so.0: cannot open shared object file); on Debian: apt-get install libopenblas0-pthread; wasm SIMD';
  const hint = blasHint(missing);
  assert.ok(hint?.startsWith('faster: '), hint);
  if (process.platform === 'linux') assert.match(hint!, /apt-get install libopenblas0-pthread/);
  // The addon itself missing is not one package away (it needs a compiler): no hint.
  assert.equal(
    blasHint("wasm-blas unavailable: blas.node not built (npm run build compiles native/ when gcc and Node's headers are present); wasm SIMD"),
    undefined,
  );
  assert.equal(blasHint('wasm SIMD with products on OpenBLAS 0.3.21'), undefined);
});
