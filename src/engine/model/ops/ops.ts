// The fused ops the transformer calls, one table per backend, chosen once when the backend starts (ggml's
// supports_op): model.ts and rollout.ts call `modelOps(dims)` and never ask which backend runs.
//
// A backend's table (cpu.ts, wasm.ts, wasm_blas.ts) holds the ops it implements, each with the shapes it supports;
// any op a table lacks, or whose shape it does not support, runs as the plain tfjs composition (composed.ts), in one
// place: resolveOps below. A new backend (webgpu) is one more table and one line in tableFor.
import type * as tf from '@tensorflow/tfjs';
import type { AdamScalars } from '../kernels/fused';
import type { HalfWeight } from '../half';

export type { AdamScalars } from '../kernels/fused';

/** The model sizes an op's support can depend on (the SIMD loops want multiples of 4 or 8). */
export interface OpDims {
  headDim: number;
  dFf: number;
}

export interface HeadDims {
  B: number;
  T: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
}

export interface DecodeAttentionAttrs {
  /** the new token's position: where its key and value are written */
  pos: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  /** applied to the rotated q (1/√headDim) */
  scale: number;
  /** RoPE row of `pos`: cos, and sin with rotate_half's sign folded in (−sin for the first half) */
  cos: Float32Array;
  sin: Float32Array;
}

/**
 * The decode step's inputs as every backend's decodeAttention lays them out (qkv [B, (H + 2·Hkv)·hd], keys
 * [B, Hkv, hd, cap], values [B, Hkv, cap, hd], keyMask [B, cap], float32): the cache's capacity, or an error naming the
 * kernel and the input that differs.
 */
export function checkDecodeInputs(kernel: string, t: Record<'qkv' | 'keys' | 'values' | 'keyMask', tf.TensorInfo>, a: DecodeAttentionAttrs): number {
  const { nHeads: H, nKvHeads: Hkv, headDim: hd } = a;
  const B = t.qkv.shape[0];
  const cap = t.keyMask.shape[1];
  const want: [keyof typeof t, number[]][] = [
    ['qkv', [B, (H + 2 * Hkv) * hd]],
    ['keys', [B, Hkv, hd, cap]],
    ['values', [B, Hkv, cap, hd]],
    ['keyMask', [B, cap]],
  ];
  for (const [what, shape] of want) {
    const x = t[what];
    if (x.dtype !== 'float32' || x.shape.length !== shape.length || x.shape.some((d, i) => d !== shape[i]))
      throw new Error(`${kernel}: ${what} has shape [${x.shape}] (${x.dtype}), expected float32 [${shape}]`);
  }
  return cap;
}

/** The sampler's record per row and step (sampleRows): id, log-prob, reported log-prob, entropy, Σ p². */
export const SAMPLE_RECORD_FIELDS = 5;

/** One draw per row on the device (sampleRows): which row of the record to write, and how to sample. */
export interface SampleRowsAttrs {
  step: number;
  temperature: number;
  topP: number;
  greedy: boolean;
  /** report the log-prob at temperature 1 (vLLM's default) beside the draw's */
  rawLogprobs: boolean;
}

export interface ModelOps {
  /** x [N, d] · rsqrt(mean(x²) + eps) · w, differentiable in x and w */
  rmsNorm(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D;
  /** rmsNorm's value where no gradient is taken (the decode step): nothing kept for a backward pass */
  rmsNormInfer(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D;
  /** SiLU(gate)·up of the fused gate | up projection [N, 2F] → [N, F], differentiable */
  swiglu(gu: tf.Tensor2D): tf.Tensor2D;
  /** swiglu's value without a gradient scope (the decode step) */
  swigluInfer(gu: tf.Tensor2D): tf.Tensor2D;
  /**
   * The fused projection [B·T, (H + 2·Hkv)·hd] as head-major q [B, H, T, hd], k and v [B, Hkv, T, hd], q and k rotated
   * by the RoPE tables cos / sin [1, H + Hkv, T, hd] (sin sign-folded, 1/√hd folded into q's rows).
   */
  heads(qkv: tf.Tensor2D, cos: tf.Tensor4D, sin: tf.Tensor4D, dims: HeadDims): tf.Tensor4D[];
  /**
   * softmax(q·kᵀ + mask)·v for q [B, H, T, hd], k and v [B, Hkv, Tk, hd], the additive mask [B, 1, T, Tk]: the context
   * with the heads merged [B·T, H·hd], and the probabilities [B, H, T, Tk] (for reading: attention credit).
   */
  attention(q: tf.Tensor4D, k: tf.Tensor4D, v: tf.Tensor4D, mask: tf.Tensor4D): { context: tf.Tensor2D; probs: tf.Tensor4D };
  /**
   * a·w + add for a [N, k], w [k, n] and add [N, n] (the residual stream) or [n] (a bias), differentiable: one kernel
   * where the backend adds in its product's epilogue
   */
  matMulAdd(a: tf.Tensor2D, w: tf.Tensor2D, add: tf.Tensor): tf.Tensor2D;
  /**
   * a [N, k] · W [k, n] (+ add: [N, n] or [n]) with W a frozen weight in 16 bits (half.ts), accumulated in float32:
   * differentiable in a and add, W having no gradient
   */
  matMulHalf(a: tf.Tensor2D, w: HalfWeight, add: tf.Tensor | null): tf.Tensor2D;
  /** gather(W, ids, axis) of a frozen weight in 16 bits, in float32 ([ids, cols] or [rows, ids]): the embedding's lookup */
  gatherHalf(w: HalfWeight, ids: tf.Tensor1D, axis: 0 | 1): tf.Tensor2D;
  /** log softmax(logits)[n, targets[n]] for logits [N, V], targets [N] (int32): [N], differentiable in logits */
  tokenLogprob(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D;
  /**
   * One decode step's attention on a preallocated KV cache written in place (keys [B, Hkv, hd, cap] transposed, values
   * [B, Hkv, cap, hd], keyMask [B, cap]); null where the backend has none, and the cache then grows by concatenation.
   */
  decodeAttention: ((qkv: tf.Tensor2D, keys: tf.Tensor4D, values: tf.Tensor4D, keyMask: tf.Tensor2D, attrs: DecodeAttentionAttrs) => tf.Tensor2D) | null;
  /**
   * The sampler's draw on the device: one token per row of logits [R, V] with the uniform draws[step] ([K, R]); writes
   * record[step] ([K, R, 5]: id, log-prob, reported log-prob, entropy, Σ p²) in place and returns the ids [R] (int32),
   * which the next decode step embeds without a read. null where the host samples (sampler.ts reads every step's logits).
   */
  sampleRows: ((logits: tf.Tensor2D, draws: tf.Tensor2D, record: tf.Tensor3D, attrs: SampleRowsAttrs) => tf.Tensor1D) | null;
}

/** One op of a backend's table: its implementation and, where it has limits, the sizes it supports. */
export interface OpEntry<F> {
  run: F;
  supports?: (d: OpDims) => boolean;
}

/** What the engine must know of a backend beside its ops. */
export interface BackendCaps {
  /**
   * It reads a tensor synchronously (dataSync). tfjs-backend-webgpu reads synchronously only through a browser's
   * OffscreenCanvas, which Node lacks: there every read is awaited, and the GRPO step reads ahead of its taped pass.
   */
  syncReads: boolean;
  /**
   * Keep the model's RoPE tables and causal masks of the last few shapes on the device (a GPU backend uploads each host
   * tensor it meets; on wasm and cpu a new one is a copy in the same memory, so they are made per pass)
   */
  keepTables: boolean;
  /**
   * The most bytes of one tensor a kernel can bind: WebGPU's maxStorageBufferBindingSize as the device granted it;
   * unbounded on host backends. Larger vocabulary-sized weights are stored in blocks (vocab_blocks.ts).
   */
  maxBindingBytes: number;
  /**
   * The sampler drops finished rows from the KV cache once they are this fraction of its rows. 0 on host backends, where
   * a row's compute is what it costs; a GPU pays a dispatch per layer and tensor for the copy whatever the rows, and
   * a few idle rows in a decode step cost it nothing it would notice.
   */
  dropFinishedAt: number;
  /**
   * model.torch_dtype float16 / bfloat16 stores frozen weights packed in 16 bits (half.ts), for its matMulHalf kernel.
   * A host backend has none: it rounds them to the format and keeps float32, which gives the same numbers in float32's
   * memory.
   */
  halfWeights: boolean;
}

/** Adam's update of one parameter in place (m, v and p written where they are); false where it cannot run. */
export type AdamStep = (p: tf.Variable, g: tf.Tensor, m: tf.Variable, v: tf.Variable, s: AdamScalars) => boolean;

/**
 * A backend, as ggml describes a device: its name, its capabilities, its ops (the rest is composed.ts's), and Adam's
 * fused update where it has one (the optimizer runs the tfjs ops otherwise).
 */
export interface BackendOps {
  name: string;
  caps: BackendCaps;
  /**
   * Registers the backend's own tfjs kernels (idempotent): its ops and Adam step run them. initBackend calls it once the
   * backend's package is loaded, before anything runs; the one way a kernel is registered.
   */
  register?(): void;
  adamStep?: AdamStep;
  ops: { [K in keyof ModelOps]?: OpEntry<NonNullable<ModelOps[K]>> };
}

/** A CPU-side backend's capabilities: synchronous reads, constant tables made per pass. */
export const HOST_CAPS: BackendCaps = { syncReads: true, keepTables: false, maxBindingBytes: Infinity, dropFinishedAt: 0, halfWeights: false };

/**
 * The ops a model of these sizes runs with `table`: the table's op where it has one that supports the sizes, the
 * composition otherwise. The one place where a missing op falls back.
 */
export function resolveOps(table: BackendOps, composed: ModelOps, d: OpDims): ModelOps {
  const out = { ...composed };
  for (const [name, entry] of Object.entries(table.ops) as [keyof ModelOps, OpEntry<never>][]) {
    if (entry && (!entry.supports || entry.supports(d))) (out as Record<keyof ModelOps, unknown>)[name] = entry.run;
  }
  return out;
}
