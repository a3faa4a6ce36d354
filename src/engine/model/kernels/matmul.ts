// BatchMatMul on the wasm backend: every transposed or batched case routed onto a fast product (the SIMD loop, the
// helper thread, or XNNPACK's 2-D path), instead of tfjs-backend-wasm's naive loop.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { BYTES_F32, Info, KernelArgs, MatMulFn, WasmBackend, WasmModule, at32, runKernel, shapeBytes, sizeOf } from './heap';
import { blasGemm, blasProducts } from './blas';
import { product } from './helper_thread';
import { hasSimd } from './simd';

export const matMulFns = new WeakMap<WasmModule, MatMulFn>();
export function wasmMatMul(be: WasmBackend): MatMulFn {
  let fn = matMulFns.get(be.wasm);
  if (!fn) {
    fn = be.wasm.cwrap('BatchMatMul', null, ['number', 'array', 'number', 'number', 'array', 'number', 'number', 'number', 'number']) as MatMulFn;
    matMulFns.set(be.wasm, fn);
  }
  return fn;
}

// The C++ side finds tensors by integer id (register_tensor(id, size, pointer)). Registering an id for a
// range inside an existing buffer gives a zero-copy view; dispose_data on it frees nothing (the JS side
// owns the memory) but does run the disposal callbacks, which drop XNNPACK operators cached on that id.
export function registerView(be: WasmBackend, ptr: number, size: number): number {
  const id = be.dataIdNextNumber++;
  be.wasm.tfjs.registerTensor(id, size, ptr);
  return id;
}

// XNNPACK's fully-connected operator packs `b` once and the backend caches it on b's tensor id, which pays
// off when the same weights multiply many inputs (sampling). The cache key ignores b's shape, so a tensor
// reused as `b` under another [K, N] would silently reuse stale packing; we remember the K each tensor was
// first used with and use a fresh view id otherwise.
export const packedK = new WeakMap<object, number>();

/** out[M,N] = a[M,K] · b[K,N] for row-major float32 blocks given as heap pointers, on the XNNPACK path. */
export function fastProduct(
  be: WasmBackend,
  aPtr: number,
  bPtr: number,
  outPtr: number,
  M: number,
  K: number,
  N: number,
  bWhole?: { dataId: object; id: number },
): void {
  const aId = registerView(be, aPtr, M * K);
  const outId = registerView(be, outPtr, M * N);
  let bId: number;
  let bView = true;
  if (bWhole && (packedK.get(bWhole.dataId) ?? K) === K) {
    packedK.set(bWhole.dataId, K);
    bId = bWhole.id;
    bView = false;
  } else {
    bId = registerView(be, bPtr, K * N);
  }
  try {
    wasmMatMul(be)(aId, shapeBytes([1, M, K]), 3, bId, shapeBytes([1, K, N]), 3, false, false, outId);
  } finally {
    be.wasm.tfjs.disposeData(aId);
    be.wasm.tfjs.disposeData(outId);
    if (bView) be.wasm.tfjs.disposeData(bId);
  }
}

/** For each flat index of the broadcast batch shape, the flat batch index into an operand's batch shape. */
export function batchIndex(outBatch: number[], batch: number[]): Int32Array {
  const n = sizeOf(outBatch);
  const idx = new Int32Array(n);
  const offset = outBatch.length - batch.length;
  const strides: number[] = new Array(batch.length);
  for (let s = 1, d = batch.length - 1; d >= 0; d--) {
    strides[d] = batch[d] === 1 ? 0 : s;
    s *= batch[d];
  }
  for (let i = 0; i < n; i++) {
    let rem = i,
      j = 0;
    for (let d = outBatch.length - 1; d >= 0; d--) {
      const c = rem % outBatch[d];
      rem = (rem - c) / outBatch[d];
      if (d >= offset) j += c * strides[d - offset];
    }
    idx[i] = j;
  }
  return idx;
}

/** [batch, rows, cols] → [batch, cols, rows] as a new tensor, through whichever Transpose is registered. */
export function transposeLast2(be: WasmBackend, x: Info, batch: number, rows: number, cols: number): Info {
  return runKernel('Transpose', {
    inputs: { x: { dataId: x.dataId, shape: [batch, rows, cols], dtype: x.dtype } },
    backend: be,
    attrs: { perm: [0, 2, 1] },
  });
}

// Below this many multiply-adds per batch element, the stock kernel's scalar loop beats the per-product
// overhead of the XNNPACK route (three view registrations and an operator creation, ~2.5 µs); the two cross
// between 2048 and 4096 (src/engine/bench/kernels.ts, thresholds).
let smallProductMacs = 4096;
/** Bench hook: change the threshold under which batched products stay on the stock kernel. */
export function setSmallProductMacs(n: number): void {
  smallProductMacs = n;
}

let strategy: 'auto' | 'direct' | 'swapped' = 'auto';
/** Bench hook: force the direct or the swapped form of transposed products. */
export function setMatMulStrategy(s: 'auto' | 'direct' | 'swapped'): void {
  strategy = s;
}

let simdProducts = true;
/** Bench hook: route products through the SIMD loop (default) or through XNNPACK / the stock loop. */
export function setSimdProducts(on: boolean): void {
  simdProducts = on;
}

/**
 * BatchMatMul on the SIMD loop: transposed operands are materialised (SIMD transposes cost ~0.3 ns/element) in
 * whichever of C = op(A)·op(B) and Cᵀ = op(B)ᵀ·op(A)ᵀ moves fewer floats. Unlike XNNPACK it packs nothing (a
 * fresh right operand — every gradient product — costs XNNPACK a copy into its layout, ~30% of a weight-gradient
 * product) and has no per-product setup, so a batch of 128 attention-sized products costs 128 loop calls.
 * Returns null when the loop's tile (4 rows × 8 columns) does not fit either form.
 */
export function simdBatchMatMul(
  be: WasmBackend,
  a: Info,
  b: Info,
  tA: boolean,
  tB: boolean,
  M: number,
  K: number,
  N: number,
  aBatch: number[],
  bBatch: number[],
  outBatch: number[],
): Info | null {
  const batch = sizeOf(outBatch),
    batchA = sizeOf(aBatch),
    batchB = sizeOf(bBatch);
  // a right operand shared by every batch element: one product over all of A's rows
  const sharedB = batchB === 1;
  const rowsA = sharedB ? batch * M : M;
  const canDirect = rowsA >= 4 && N >= 8;
  const canSwap = !sharedB && N >= 4 && M >= 8;
  const direct = (tA ? M * K * batchA : 0) + (tB ? N * K * batchB : 0);
  const swapped = (tB ? 0 : N * K * batchB) + (tA ? 0 : M * K * batchA) + M * N * batch;
  const swap = strategy === 'auto' ? canSwap && (!canDirect || swapped < direct) : strategy === 'swapped' && canSwap;
  if (!swap && !canDirect) return null;
  const outShape = [...outBatch, M, N];
  // direct: left [., M, K] · right [., K, N]; swapped: left [., N, K] · right [., K, M], then one transpose
  const [P, Q] = swap ? [N, M] : [M, N];
  const left = swap ? (tB ? b : transposeLast2(be, b, batchB, K, N)) : tA ? transposeLast2(be, a, batchA, K, M) : a;
  const right = swap ? (tA ? a : transposeLast2(be, a, batchA, M, K)) : tB ? transposeLast2(be, b, batchB, N, K) : b;
  const [leftBatch, rightBatch] = swap ? [bBatch, aBatch] : [aBatch, bBatch];
  const out = be.makeOutput(swap ? [...outBatch, N, M] : outShape, 'float32');
  try {
    const lp = at32(be, left),
      rp = at32(be, right),
      op = at32(be, out);
    if (sharedB && !swap) {
      product(be, lp, rp, op, batch * M, K, N);
    } else {
      const il = batchIndex(outBatch, leftBatch),
        ir = batchIndex(outBatch, rightBatch);
      for (let i = 0; i < batch; i++) product(be, lp + il[i] * P * K, rp + ir[i] * K * Q, op + i * P * Q, P, K, Q);
    }
    if (!swap) return out;
    return { ...transposeLast2(be, out, batch, N, M), shape: outShape };
  } finally {
    if (left !== a && left !== b) be.disposeData(left.dataId);
    if (right !== a && right !== b) be.disposeData(right.dataId);
    if (swap) be.disposeData(out.dataId);
  }
}

/**
 * BatchMatMul on OpenBLAS (backend wasm-blas): cblas_sgemm on the operands where they lie, transposes passed as flags.
 * A right operand shared by every batch element makes one product over all of A's rows (when A is not transposed, its
 * batch elements are consecutive rows); otherwise one sgemm per batch element, all in one call into the addon.
 */
export function blasBatchMatMul(
  be: WasmBackend,
  a: Info,
  b: Info,
  tA: boolean,
  tB: boolean,
  M: number,
  K: number,
  N: number,
  aBatch: number[],
  bBatch: number[],
  outBatch: number[],
): Info {
  const batch = sizeOf(outBatch);
  const out = be.makeOutput([...outBatch, M, N], 'float32');
  const ap = at32(be, a),
    bp = at32(be, b),
    cp = at32(be, out);
  if (sizeOf(bBatch) === 1 && sizeOf(aBatch) === batch && !tA) {
    blasGemm(be, false, tB, batch * M, N, K, Int32Array.of(ap, bp, cp));
    return out;
  }
  const il = batchIndex(outBatch, aBatch),
    ir = batchIndex(outBatch, bBatch);
  const offsets = new Int32Array(3 * batch);
  for (let i = 0; i < batch; i++) {
    offsets[3 * i] = ap + il[i] * M * K;
    offsets[3 * i + 1] = bp + ir[i] * K * N;
    offsets[3 * i + 2] = cp + i * M * N;
  }
  blasGemm(be, tA, tB, M, N, K, offsets);
  return out;
}

export function batchMatMul(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { a, b } = args.inputs as { a: Info; b: Info };
    const transposeA = Boolean(args.attrs?.transposeA);
    const transposeB = Boolean(args.attrs?.transposeB);
    if (a.dtype !== 'float32' || b.dtype !== 'float32') {
      throw new Error('BatchMatMul for non non-float32 tensors not yet supported.');
    }
    const aRank = a.shape.length,
      bRank = b.shape.length;
    const M = transposeA ? a.shape[aRank - 1] : a.shape[aRank - 2];
    const K = transposeA ? a.shape[aRank - 2] : a.shape[aRank - 1];
    const kB = transposeB ? b.shape[bRank - 1] : b.shape[bRank - 2];
    const N = transposeB ? b.shape[bRank - 2] : b.shape[bRank - 1];
    if (K !== kB) {
      throw new Error(
        `Error in matMul: inner shapes (${K}) and (${kB}) of Tensors with shapes ${a.shape} and ` +
          `${b.shape} and transposeA=${transposeA} and transposeB=${transposeB} must match.`,
      );
    }
    const aBatch = a.shape.slice(0, -2),
      bBatch = b.shape.slice(0, -2);
    const outBatch = tf.backend_util.assertAndGetBroadcastShape(aBatch, bBatch);
    const batch = sizeOf(outBatch),
      batchA = sizeOf(aBatch),
      batchB = sizeOf(bBatch);
    const outShape = [...outBatch, M, N];

    if (M * N > 0 && batch > 0 && K > 0 && blasProducts()) {
      return blasBatchMatMul(be, a, b, transposeA, transposeB, M, K, N, aBatch, bBatch, outBatch);
    }
    if (M * N > 0 && batch > 0 && K > 0 && hasSimd() && simdProducts) {
      const out = simdBatchMatMul(be, a, b, transposeA, transposeB, M, K, N, aBatch, bBatch, outBatch);
      if (out) return out;
    }

    // Tiny products with equal batch shapes: the stock loop is correct there and cheaper than our setup.
    const sameBatch = aBatch.length === bBatch.length && aBatch.every((d, i) => d === bBatch[i]);
    if (sameBatch && batch > 1 && M * K * N < smallProductMacs) {
      const out = original(args as Parameters<tf.KernelFunc>[0]) as Info;
      return { ...out, shape: outShape };
    }

    if (M * N === 0 || batch === 0) return be.makeOutput(outShape, 'float32');
    if (K === 0) {
      const out = be.makeOutput(outShape, 'float32');
      be.typedArrayFromHeap(out).fill(0);
      return out;
    }

    // XNNPACK wants both operands row-major and untransposed, so transposes are materialised. Either
    // C = op(A)·op(B) directly, or Cᵀ = op(B)ᵀ·op(A)ᵀ followed by one transpose of C. The cost model counts
    // the floats transposed plus a quarter of those packed as XNNPACK weights (the right operand); with that
    // weight it picks the faster form for every training shape that src/engine/bench/kernels.ts times both ways. The
    // swapped form wins for Aᵀ·B with M > N (the down-projection gradient hᵀ·dy) and for x·Eᵀ with few rows
    // and a large E (9× for [8,128]·[4096,128]ᵀ).
    const PACK = 0.25;
    const direct = (transposeA ? M * K : 0) + (transposeB ? N * K : 0) + PACK * K * N;
    const swapped = (transposeB ? 0 : N * K) + (transposeA ? 0 : M * K) + M * N + PACK * K * M;
    // A shared `b` turns the direct form into one big product, which beats any per-batch loop.
    const swap = strategy === 'auto' ? swapped < direct && !(batchB === 1 && batchA > 1) : strategy === 'swapped' && !(batchB === 1 && batchA > 1);
    if (!swap) {
      const left = transposeA ? transposeLast2(be, a, batchA, K, M) : a;
      const right = transposeB ? transposeLast2(be, b, batchB, N, K) : b;
      const out = be.makeOutput(outShape, 'float32');
      try {
        productInto(be, left, aBatch, right, bBatch, outBatch, out, M, K, N, !transposeB);
      } finally {
        if (left !== a) be.disposeData(left.dataId);
        if (right !== b) be.disposeData(right.dataId);
      }
      return out;
    }
    const left = transposeB ? b : transposeLast2(be, b, batchB, K, N);
    const right = transposeA ? a : transposeLast2(be, a, batchA, M, K);
    const outT = be.makeOutput([...outBatch, N, M], 'float32');
    try {
      productInto(be, left, bBatch, right, aBatch, outBatch, outT, N, K, M, transposeA);
      return { ...transposeLast2(be, outT, batch, N, M), shape: outShape };
    } finally {
      if (left !== b) be.disposeData(left.dataId);
      if (right !== a) be.disposeData(right.dataId);
      be.disposeData(outT.dataId);
    }
  };
}

/**
 * out[i] = left[ia(i)] · right[ib(i)] for every element i of the broadcast batch, where left holds
 * [P, K] blocks and right [K, Q] blocks, row-major. `rightIsInput` says `right` is a caller's tensor (not a
 * temporary), whose packed form XNNPACK may cache.
 */
export function productInto(
  be: WasmBackend,
  left: Info,
  leftBatch: number[],
  right: Info,
  rightBatch: number[],
  outBatch: number[],
  out: Info,
  P: number,
  K: number,
  Q: number,
  rightIsInput: boolean,
): void {
  const lRec = be.dataIdMap.get(left.dataId),
    rRec = be.dataIdMap.get(right.dataId);
  const outPtr = be.dataIdMap.get(out.dataId).memoryOffset;
  const batch = sizeOf(outBatch);
  if (sizeOf(rightBatch) === 1) {
    // One right operand for every batch element (dense layers, shared weights): a single [batch·P, K]·[K, Q]
    // product, since the batches of `left` are contiguous rows.
    fastProduct(be, lRec.memoryOffset, rRec.memoryOffset, outPtr, batch * P, K, Q, rightIsInput ? { dataId: right.dataId, id: rRec.id } : undefined);
    return;
  }
  const il = batchIndex(outBatch, leftBatch),
    ir = batchIndex(outBatch, rightBatch);
  for (let i = 0; i < batch; i++) {
    fastProduct(be, lRec.memoryOffset + il[i] * P * K * BYTES_F32, rRec.memoryOffset + ir[i] * K * Q * BYTES_F32, outPtr + i * P * Q * BYTES_F32, P, K, Q);
  }
}

// TF's definition: out[s, ...] = Σ_{i : ids[i] = s} x[i, ...] over the leading dims covered by segmentIds;
// ids outside [0, numSegments) are dropped. One pass over x, so the embedding gradient costs O(N·d) plus
// zeroing the [vocab, d] output, instead of one masked reduction per segment.
