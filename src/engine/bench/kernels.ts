// Micro-benchmark of the wasm kernels in src/engine/model/kernels/ against the stock ones of
// @tensorflow/tfjs-backend-wasm, run by hand: `node --import tsx src/engine/bench/kernels.ts [--quick]`.
// Prints GFLOP/s for the products of a training step (dense layers at B·T = 2048, d = 128; attention at
// B·H = 128, T = 64, head dim 32, and their gradients), the other kernels we replaced, and ms per step of
// the reference model (2 layers, d 128, 4 heads, d_ff 512, vocab 64, seq 64, batch 32, Adam) on wasm with
// and without our kernels and on cpu. The machine has 2 shared cores: figures are the best of several runs.
// `--only matmul|others|thresholds|step` runs one section.
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../model/backend';
import { REFERENCE } from './bench';
import { Transformer } from '../model/model';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { makeRng } from '../core/rng';
import {
  helperThreadStats,
  PARALLEL_MIN_MACS,
  registerWasmKernels,
  setMatMulStrategy,
  setParallelMinMacs,
  setSimdProducts,
  setSimdTransposeMin,
  setSmallProductMacs,
  setTiledTransposeMin,
  unregisterWasmKernels,
} from '../model/kernels/wasm_kernels';

const quick = process.argv.includes('--quick');
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : null;
const want = (section: string) => only === null || only === section;

/** Best-of-reps milliseconds per call of f (each rep runs f for ~budget ms). */
function timeMs(f: () => void, budget = quick ? 30 : 80, reps = quick ? 3 : 6): number {
  f();
  f();
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    let n = 0;
    const t0 = performance.now();
    do {
      f();
      n++;
    } while (performance.now() - t0 < budget);
    best = Math.min(best, (performance.now() - t0) / n);
  }
  return best;
}

const pad = (s: string, n: number) => s.padEnd(n);
const num = (x: number, d = 1) => x.toFixed(d).padStart(7);

function stock(): void {
  unregisterWasmKernels();
}
function ours(): void {
  registerWasmKernels();
  setMatMulStrategy('auto');
}

interface MatCase {
  name: string;
  a: number[];
  b: number[];
  ta: boolean;
  tb: boolean;
}

function matmulCases(): MatCase[] {
  const cases: MatCase[] = [];
  for (const out of [128, 512, 64]) {
    cases.push({ name: `x@W      [2048,128]@[128,${out}]`, a: [2048, 128], b: [128, out], ta: false, tb: false });
    cases.push({ name: `dy@Wᵀ    [2048,${out}]@[128,${out}]ᵀ`, a: [2048, out], b: [128, out], ta: false, tb: true });
    cases.push({ name: `xᵀ@dy    [2048,128]ᵀ@[2048,${out}]`, a: [2048, 128], b: [2048, out], ta: true, tb: false });
  }
  cases.push({ name: 'hᵀ@dy    [2048,512]ᵀ@[2048,128]', a: [2048, 512], b: [2048, 128], ta: true, tb: false });
  const BH = 128,
    T = 64,
    hd = 32;
  cases.push({ name: `q@kᵀ     [${BH},${T},${hd}]@[${BH},${T},${hd}]ᵀ`, a: [BH, T, hd], b: [BH, T, hd], ta: false, tb: true });
  cases.push({ name: `p@v      [${BH},${T},${T}]@[${BH},${T},${hd}]`, a: [BH, T, T], b: [BH, T, hd], ta: false, tb: false });
  cases.push({ name: `dp=dy@vᵀ [${BH},${T},${hd}]@[${BH},${T},${hd}]ᵀ`, a: [BH, T, hd], b: [BH, T, hd], ta: false, tb: true });
  cases.push({ name: `dv=pᵀ@dy [${BH},${T},${T}]ᵀ@[${BH},${T},${hd}]`, a: [BH, T, T], b: [BH, T, hd], ta: true, tb: false });
  cases.push({ name: `dq=ds@k  [${BH},${T},${T}]@[${BH},${T},${hd}]`, a: [BH, T, T], b: [BH, T, hd], ta: false, tb: false });
  cases.push({ name: `dk=dsᵀ@q [${BH},${T},${T}]ᵀ@[${BH},${T},${hd}]`, a: [BH, T, T], b: [BH, T, hd], ta: true, tb: false });
  cases.push({ name: 'GQA q@kᵀ [32,2,128,32]@[32,2,32,64]', a: [32, 2, 128, 32], b: [32, 2, 32, 64], ta: false, tb: false });
  return cases;
}

function flopsOf(c: MatCase): number {
  const ar = c.a.length;
  const M = c.ta ? c.a[ar - 1] : c.a[ar - 2],
    K = c.ta ? c.a[ar - 2] : c.a[ar - 1];
  const N = c.tb ? c.b[c.b.length - 2] : c.b[c.b.length - 1];
  return 2 * c.a.slice(0, -2).reduce((p, d) => p * d, 1) * M * K * N;
}

function benchMatMul(): void {
  console.log('\n== BatchMatMul, GFLOP/s (b is a fresh tensor each call, as in training; its copy time is subtracted)');
  console.log('   stock: the stock kernel; xnnpack: our routing onto XNNPACK (runtimes without SIMD); simd: our SIMD');
  console.log('   product on this thread; +helper: large products shared with the helper thread (2 cores)');
  console.log(`${pad('product', 40)} ${['stock', 'xnnpack', 'simd', '+helper'].map((h) => h.padStart(8)).join('')}   direct / swapped (simd, ms)`);
  for (const c of matmulCases()) {
    const a = tf.randomNormal(c.a),
      b0 = tf.randomNormal(c.b);
    const copy = timeMs(() =>
      tf.tidy(() => {
        tf.add(b0, 0);
      }),
    );
    const run = () =>
      tf.tidy(() => {
        tf.matMul(a, tf.add(b0, 0), c.ta, c.tb);
      });
    const time = (budget?: number, reps?: number) => Math.max(timeMs(run, budget, reps) - copy, 1e-6);
    stock();
    const tStock = time(quick ? 60 : 150, quick ? 2 : 3);
    ours();
    setSimdProducts(false);
    const tXnn = time();
    setSimdProducts(true);
    setParallelMinMacs(Infinity);
    const tSimd = time();
    let forms = '';
    if (c.ta || c.tb) {
      setMatMulStrategy('direct');
      const d = time();
      setMatMulStrategy('swapped');
      const s = time();
      setMatMulStrategy('auto');
      forms = `${d.toFixed(2)} / ${s.toFixed(2)}`;
    }
    setParallelMinMacs(PARALLEL_MIN_MACS);
    const tPar = time();
    const f = flopsOf(c) / 1e6;
    console.log(`${pad(c.name, 40)} ${[tStock, tXnn, tSimd, tPar].map((t) => num(f / t).padStart(8)).join('')}   ${forms}`);
    tf.dispose([a, b0]);
  }
  const h = helperThreadStats();
  console.log(`helper thread: ${h.products} products shared, the worker computed ${h.workerChunks} of their ${h.chunks} chunks`);
}

function benchOthers(): void {
  console.log('\n== Other kernels, ms per call');
  console.log(`${pad('kernel', 52)} ${'stock'.padStart(8)} ${'ours'.padStart(8)}`);
  const rng = makeRng(1);
  const ids = tf.tensor1d(
    Int32Array.from({ length: 2048 }, () => Math.floor(rng() * 64)),
    'int32',
  );
  const x = tf.randomNormal([2048, 128]),
    e = tf.randomNormal([128, 64]),
    big = tf.randomNormal([2048, 512]);
  const q = tf.randomNormal([32, 64, 4, 32]),
    h1 = tf.randomNormal([32, 64, 4, 16]),
    h2 = tf.randomNormal([32, 64, 4, 16]);
  const five = tf.randomNormal([32, 64, 2, 2, 32]);
  // the call in a tidy with no result kept: everything it makes is freed
  const tidied = (f: () => unknown) => () => {
    tf.tidy(() => {
      f();
    });
  };
  const cases: [string, () => void][] = [
    ['Sum axis 0 of [2048,128] (bias / norm grads)', tidied(() => tf.sum(x, 0))],
    ['GatherV2 [128,64] axis 1 × 2048 ids (tied embedding)', tidied(() => tf.gather(e, ids, 1))],
    ['Concat 2×[32,64,4,16] axis 3 (RoPE halves)', tidied(() => tf.concat([h1, h2], 3))],
    ['SplitV [32,64,4,32] in 2 on axis 3', tidied(() => tf.split(q, 2, 3))],
    ['Slice half of [32,64,4,32] on axis 3', tidied(() => tf.slice(q, [0, 0, 0, 0], [32, 64, 4, 16]))],
    ['Transpose [2048,512] 2-D', tidied(() => tf.transpose(big))],
    ['Transpose [32,64,4,32] perm 0,2,1,3', tidied(() => tf.transpose(q, [0, 2, 1, 3]))],
    ['Transpose [32,64,2,2,32] perm 0,2,3,1,4 (GQA, 5-D)', tidied(() => tf.transpose(five, [0, 2, 3, 1, 4]))],
    ['Transpose [32,64,2,2,32] perm 4,3,2,1,0 (5-D)', tidied(() => tf.transpose(five, [4, 3, 2, 1, 0]))],
  ];
  for (const [name, f] of cases) {
    stock();
    const s = timeMs(f);
    ours();
    const o = timeMs(f);
    console.log(`${pad(name, 52)} ${num(s, 3)} ${num(o, 3)}`);
  }
  // Stock has no UnsortedSegmentSum at all: the gradient of tf.gather throws without ours.
  const V = 151936,
    table = tf.variable(tf.zeros([V, 128]));
  const vocabIds = tf.tensor1d(
    Int32Array.from({ length: 2048 }, () => Math.floor(rng() * V)),
    'int32',
  );
  const g = () =>
    tf.tidy(() => {
      tf.grad((p: tf.Tensor) => tf.sum(tf.gather(p, vocabIds)))(table);
    });
  console.log(`${pad(`gather gradient, [${V},128] table × 2048 ids`, 52)} ${'throws'.padStart(8)} ${num(timeMs(g, 100, 2), 3)}`);
  tf.dispose([ids, x, e, big, q, h1, h2, five, table, vocabIds]);
}

// The size thresholds of the wasm kernels (kernels/matmul.ts, kernels/data_ops.ts, kernels/helper_thread.ts): without SIMD, batched products below smallProductMacs stay on the stock
// loop and transposes of at least tiledTransposeMin elements per matrix use the tiled JS loop; with SIMD,
// transposes of at least simdTransposeMin elements use the SIMD loop, and products of at least parallelMinMacs
// multiply-adds are shared with the helper thread.
function benchThresholds(): void {
  ours();
  benchBatchedProducts();
  benchTransposes();
  benchThreadedProducts();
}

function benchBatchedProducts(): void {
  console.log('\n== Batched products (128 of them): µs per product, stock loop vs XNNPACK route vs SIMD loop');
  for (const [M, K, N] of [
    [8, 8, 8],
    [12, 8, 12],
    [16, 8, 16],
    [16, 16, 16],
    [24, 16, 24],
    [32, 32, 32],
    [64, 32, 64],
  ]) {
    const a = tf.randomNormal([128, M, K]),
      b = tf.randomNormal([128, K, N]);
    const run = () =>
      tf.tidy(() => {
        tf.matMul(a, b);
      });
    setSimdProducts(false);
    setSmallProductMacs(Infinity);
    const s = (timeMs(run) * 1000) / 128;
    setSmallProductMacs(0);
    const x = (timeMs(run) * 1000) / 128;
    setSmallProductMacs(4096);
    setSimdProducts(true);
    const v = (timeMs(run) * 1000) / 128;
    console.log(`${pad(`${M}×${K}×${N} (${M * K * N} MACs)`, 24)} stock ${num(s, 2)}   xnnpack ${num(x, 2)}   simd ${num(v, 2)}`);
    tf.dispose([a, b]);
  }
}

function benchTransposes(): void {
  console.log('\n== Transpose of the last two dims: ms, stock loop vs tiled JS vs SIMD 4×4 blocks');
  for (const shape of [
    [16, 16],
    [64, 64],
    [128, 128],
    [2048, 64],
    [2048, 128],
    [128, 2048],
    [2048, 512],
    [128, 64, 32],
    [128, 64, 64],
    [8, 256, 256],
  ]) {
    const x = tf.randomNormal(shape);
    const perm = shape.length === 2 ? [1, 0] : [0, 2, 1];
    const run = () =>
      tf.tidy(() => {
        tf.transpose(x, perm);
      });
    setSimdTransposeMin(Infinity);
    setTiledTransposeMin(Infinity);
    const s = timeMs(run);
    setTiledTransposeMin(0);
    const j = timeMs(run);
    setTiledTransposeMin(16384);
    setSimdTransposeMin(0);
    const v = timeMs(run);
    setSimdTransposeMin(256);
    console.log(`${pad(`[${shape}]`, 24)} stock ${num(s, 3)}   tiled ${num(j, 3)}   simd ${num(v, 3)}`);
    x.dispose();
  }
}

function benchThreadedProducts(): void {
  console.log('\n== Products on one thread vs shared with the helper thread: ms');
  for (const [M, K, N] of [
    [64, 32, 64],
    [64, 128, 128],
    [64, 128, 512],
    [64, 128, 1024],
    [256, 128, 256],
    [2048, 128, 512],
  ]) {
    const a = tf.randomNormal([M, K]),
      b = tf.randomNormal([K, N]);
    const run = () =>
      tf.tidy(() => {
        tf.matMul(a, b);
      });
    setParallelMinMacs(Infinity);
    const one = timeMs(run);
    setParallelMinMacs(0);
    const two = timeMs(run);
    setParallelMinMacs(PARALLEL_MIN_MACS);
    console.log(`${pad(`${M}×${K}×${N} (${M * K * N} MACs)`, 28)} one ${num(one, 3)}   shared ${num(two, 3)}`);
    tf.dispose([a, b]);
  }
}

// The reference config of the issue: the bench's own (src/engine/bench/bench.ts).

/** One policy-gradient-like step: forward, log-softmax of the targets, backward, clip, Adam. Median ms. */
async function trainStepMs(iters: number, warmup: number): Promise<number> {
  const B = 32,
    T = 64,
    V = REFERENCE.vocabSize;
  const model = Transformer.init(REFERENCE, 1);
  const rng = makeRng(2);
  const tokens = Int32Array.from({ length: B * T }, () => 3 + Math.floor(rng() * (V - 3)));
  const ids = tf.tensor2d(tokens, [B, T], 'int32');
  const mask = tf.ones([B, T]) as tf.Tensor2D;
  // logits at position t predict token t + 1: flat indices into the [B, T−1, V] log-softmax
  const flat = tf.tensor1d(
    Int32Array.from({ length: B * (T - 1) }, (_, i) => {
      const b = Math.floor(i / (T - 1)),
        t = i % (T - 1);
      return i * V + tokens[b * T + t + 1];
    }),
    'int32',
  );
  const adv = tf.tensor1d(Float32Array.from({ length: B * (T - 1) }, () => rng() * 2 - 1));
  const opt = new Adam(1e-4);
  const byVar = new Map([...model.params].map(([n, v]) => [v.name, n]));
  const times: number[] = [];
  for (let i = 0; i < warmup + iters; i++) {
    const t0 = performance.now();
    const { grads } = tf.variableGrads(() => {
      const { logits } = model.forward(ids, mask);
      const lsm = tf.logSoftmax(logits.slice([0, 0, 0], [B, T - 1, V]));
      return tf.neg(tf.mean(tf.mul(tf.gather(lsm.reshape([-1]), flat), adv))) as tf.Scalar;
    }, [...model.params.values()]);
    const named = Object.fromEntries(Object.entries(grads).map(([k, g]) => [byVar.get(k)!, g]));
    const { grads: clipped } = await clipByGlobalNorm(named, 1.0);
    opt.apply(model.params, clipped);
    tf.dispose(Object.values(clipped));
    tf.dispose(Object.values(grads));
    if (i >= warmup) times.push(performance.now() - t0);
  }
  opt.dispose();
  model.dispose();
  tf.dispose([ids, mask, flat, adv]);
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

async function main(): Promise<void> {
  const choice = await initBackend('wasm');
  console.log(`backend: ${choice.reason}; tfjs ${tf.version_core}; node ${process.version}`);
  if (want('matmul')) benchMatMul();
  if (want('others')) benchOthers();
  if (want('thresholds')) benchThresholds();
  if (!want('step')) return;
  console.log('\n== Training step, reference config (2 layers, d 128, 4 heads, d_ff 512, vocab 64, seq 64, batch 32, Adam)');
  ours();
  const withOurs = await trainStepMs(quick ? 2 : 5, 2);
  console.log(`wasm + our kernels      ${num(withOurs)} ms/step`);
  stock();
  const withStock = await trainStepMs(quick ? 1 : 2, 1);
  console.log(`wasm, stock kernels     ${num(withStock)} ms/step (plus our UnsortedSegmentSum, without which it throws)`);
  ours();
  await initBackend('cpu');
  const cpu = await trainStepMs(quick ? 1 : 2, 1);
  console.log(`cpu                     ${num(cpu)} ms/step`);
  console.log(`speedup of our kernels: ${(withStock / withOurs).toFixed(1)}× over stock wasm, ${(cpu / withOurs).toFixed(1)}× over cpu`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
