// Kernels that make the wasm backend of @tensorflow/tfjs-backend-wasm 4.22 fit for training.
//
// Measured on Node 20 (src/engine/bench/kernels.ts prints the figures), the stock backend has these problems in a
// training step:
// - it has no UnsortedSegmentSum kernel, so the gradient of tf.gather (embedding lookups) throws;
// - its BatchMatMul reaches XNNPACK's fully-connected operator (~40 GFLOP/s) only when neither side is
//   transposed and the batch is 1; everything else runs a scalar triple loop at 1.5–3.5 GFLOP/s. Gradients
//   of matMul are transposed products and attention is batched, so a step spent ~90% of its time there.
//   That loop also reads past `b` when only `a` is batched and computes only the first batch when only `b`
//   is, so broadcast batches come out wrong;
// - Transpose of rank 5+ allocates per element (~50 ns/element) and its rank-2 loop thrashes the cache on
//   large power-of-two shapes; Sum over a leading axis goes through that transpose; Slice and SplitV copy
//   the whole input out of the heap before taking a piece; Gather of rows or columns runs at ~25 ns/element.
// The replacements keep the stock kernels' values (exactly for data movement; products and sums only up to
// float rounding, from a different summation order) and route the work onto fast paths.
//
// The fast paths are mostly our own WebAssembly SIMD loops (a small module built below, run on the backend's
// memory): a 4×8-tile product that needs no packing and no per-product setup (~45 GFLOP/s, where XNNPACK's
// 41 GFLOP/s shrink to ~28 for a fresh right operand, i.e. every gradient product), 4×4-block transposes,
// float64-accumulated column sums. Large products are shared with a helper thread (the second core).
// Kernels that stock tfjs does not have serve model.ts: decode attention on an in-place KV cache, RoPE, and
// SwiGLU with its gradient; on wasm-blas, native kernels (native.ts): a token's log-prob, RMSNorm, attention over a sequence,
// the attention heads with RoPE, SwiGLU.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { cast, concat, gatherV2, identity, slice, splitV, sum, transpose, unsortedSegmentSum } from './data_ops';
import { DECODE_ATTENTION, DECODE_ATTENTION_NATIVE, decodeAttentionKernel, decodeAttentionNativeKernel } from './decode_attention';
import { RMS_NORM, ROPE, SWIGLU, SWIGLU_GRAD, rmsNormKernel, ropeKernel, swigluGradKernel, swigluKernel } from './fused';
import { Info, KernelArgs } from './heap';
import { NATIVE_KERNELS } from './native';
import { batchMatMul } from './matmul';

export { canonicalTranspose, setSimdTransposeMin, setTiledTransposeMin } from './data_ops';
export { DECODE_ATTENTION, DECODE_ATTENTION_NATIVE, type DecodeAttentionAttrs, decodeAttention } from './decode_attention';
export { RMS_NORM, ROPE, SWIGLU, SWIGLU_GRAD, rmsNormInfer, ropeRotate, swiglu, swigluGrad } from './fused';
export {
  ATTENTION,
  ATTENTION_GRAD,
  QKV_HEADS,
  QKV_HEADS_GRAD,
  RMS_NORM_GRAD,
  RMS_NORM_TRAIN,
  SWIGLU_NATIVE,
  SWIGLU_NATIVE_GRAD,
  TOKEN_LOGPROB,
  TOKEN_LOGPROB_GRAD,
  attention,
  qkvHeads,
  rmsNormNative,
  rmsNormNativeInfer,
  tokenLogprob,
} from './native';
export { PARALLEL_MIN_MACS, helperThreadStats, setHelperSequenced, setParallelMinMacs } from './helper_thread';
export { setMatMulStrategy, setSimdProducts, setSmallProductMacs } from './matmul';
export { setGemmBlocks } from './simd';

interface Replacement {
  kernelName: string;
  make: (original: tf.KernelFunc) => tf.KernelFunc;
}
const REPLACEMENTS: Replacement[] = [
  { kernelName: 'BatchMatMul', make: (o) => batchMatMul(o) as unknown as tf.KernelFunc },
  { kernelName: 'Transpose', make: (o) => transpose(o) as unknown as tf.KernelFunc },
  { kernelName: 'Slice', make: (o) => slice(o) as unknown as tf.KernelFunc },
  { kernelName: 'SplitV', make: (o) => splitV(o) as unknown as tf.KernelFunc },
  { kernelName: 'Concat', make: (o) => concat(o) as unknown as tf.KernelFunc },
  { kernelName: 'GatherV2', make: (o) => gatherV2(o) as unknown as tf.KernelFunc },
  { kernelName: 'Sum', make: (o) => sum(o) as unknown as tf.KernelFunc },
  { kernelName: 'Identity', make: (o) => identity(o) as unknown as tf.KernelFunc },
  { kernelName: 'Cast', make: (o) => cast(o) as unknown as tf.KernelFunc },
];

/** The kernels this module adds to the wasm backend, by name (tfjs-backend-wasm has none of them, or no UnsortedSegmentSum). */
const ADDED: [string, (args: KernelArgs) => Info | Info[]][] = [
  ['UnsortedSegmentSum', unsortedSegmentSum as unknown as (args: KernelArgs) => Info],
  [DECODE_ATTENTION, decodeAttentionKernel],
  [DECODE_ATTENTION_NATIVE, decodeAttentionNativeKernel],
  [ROPE, ropeKernel],
  [SWIGLU, swigluKernel],
  [SWIGLU_GRAD, swigluGradKernel],
  [RMS_NORM, rmsNormKernel],
  ...NATIVE_KERNELS,
];

/** Kernel names this module replaces or adds on the wasm backend (recorded in run.json). */
export const PATCHED_WASM_KERNELS: readonly string[] = [...REPLACEMENTS.map((r) => r.kernelName), ...ADDED.map(([name]) => name)];

let registered = false;
const originals = new Map<string, tf.KernelConfig>();

/**
 * Registers the kernels above for the 'wasm' backend. Idempotent. Call after importing
 * '@tensorflow/tfjs-backend-wasm' (which registers the stock kernels) and before tf.setBackend('wasm').
 */
export function registerWasmKernels(): void {
  if (registered) return;
  for (const r of REPLACEMENTS) {
    const stock = tf.getKernel(r.kernelName, 'wasm');
    if (!stock) throw new Error(`wasm backend has no ${r.kernelName} kernel to replace`);
    originals.set(r.kernelName, stock);
    tf.unregisterKernel(r.kernelName, 'wasm');
    // Keep the stock setupFunc: our fallbacks call the stock kernelFunc, which needs its cwrap.
    tf.registerKernel({ ...stock, kernelFunc: r.make(stock.kernelFunc) });
  }
  for (const [kernelName, f] of ADDED) {
    if (!tf.getKernel(kernelName, 'wasm')) tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: f as unknown as tf.KernelFunc });
  }
  registered = true;
}

/**
 * Puts the stock kernels back (src/engine/bench/kernels.ts compares both). UnsortedSegmentSum and the fused kernels (decode
 * attention, RoPE, SwiGLU) stay: stock has none of them.
 */
export function unregisterWasmKernels(): void {
  if (!registered) return;
  for (const [name, stock] of originals) {
    tf.unregisterKernel(name, 'wasm');
    tf.registerKernel(stock);
  }
  originals.clear();
  registered = false;
}
