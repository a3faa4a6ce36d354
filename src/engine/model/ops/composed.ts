// The plain tfjs compositions of the model's fused ops: what every backend runs for an op its table lacks (ops.ts).
import * as tf from '@tensorflow/tfjs';
import { readHalfSync, type HalfWeight } from '../half';
import type { HeadDims, ModelOps } from './ops';

/** y = x·cos + swap(x)·sin over the last axis, swap exchanging its halves (rotate_half with its sign folded into sin). */
export type Rotate = (x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) => tf.Tensor;
/** x [B, n, T, hd] split on the head axis into parts of the given numbers of heads. */
export type SplitHeads = (x: tf.Tensor4D, sizes: number[]) => tf.Tensor4D[];

/** [x2, x1] as one gather of the last axis: the cpu backend splits and concatenates a non-leading axis element by element, ~10× slower than its gather. */
export const gatherRotate: Rotate = (x, cos, sin) => {
  const hd = x.shape[x.rank - 1],
    half = hd / 2;
  const swap = tf.tensor1d(
    Int32Array.from({ length: hd }, (_, i) => (i + half) % hd),
    'int32',
  );
  return tf.add(tf.mul(x, cos), tf.mul(tf.gather(x, swap, x.rank - 1), sin));
};

/** tf.split on the head axis: a plain copy of contiguous runs on wasm and TensorFlow. */
export const splitOnHeads: SplitHeads = (x, sizes) => tf.split(x, sizes, 1) as tf.Tensor4D[];

/**
 * x [B, n, T, hd] → x·cos + rotate_half(x)·sin (HF `apply_rotary_pos_emb`). With sin sign-folded, y_i = x_i·c_i +
 * x_p(i)·s_i where p swaps the halves, so ∂L/∂x_j = dy_j·c_j + dy_p(j)·s_p(j) and s_p(j) = −s_j: the gradient is the
 * same rotation of dy with −sin. One custom op instead of autodiff through a split and a concat.
 */
export function rope(x: tf.Tensor4D, cos: tf.Tensor4D, sin: tf.Tensor4D, rotate: Rotate): tf.Tensor4D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [v, save] = args as [tf.Tensor4D, tf.GradSaveFunc];
    save([cos, sin]);
    return {
      value: rotate(v, cos, sin) as tf.Tensor4D,
      gradFunc: (dy: tf.Tensor4D, [c, s]: tf.Tensor[]) => rotate(dy, c, tf.neg(s)),
    };
  });
  return op(x);
}

/**
 * heads() as ops: one transpose puts every head in [B, head, T, hd] order, then splits and the RoPE op, with the
 * backend's rotation and split.
 */
export function composedHeads(rotate: Rotate, split: SplitHeads): ModelOps['heads'] {
  return (qkv: tf.Tensor2D, cos: tf.Tensor4D, sin: tf.Tensor4D, { B, T, nHeads: H, nKvHeads: Hkv, headDim: hd }: HeadDims) => {
    const heads = tf.transpose(qkv.reshape([B, T, H + 2 * Hkv, hd]), [0, 2, 1, 3]) as tf.Tensor4D;
    const [qk, v] = split(heads, [H + Hkv, Hkv]);
    return [...split(rope(qk, cos, sin, rotate), [H, Hkv]), v];
  };
}

function rmsNorm(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  const ms = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, eps))), w) as tf.Tensor2D;
}

function swiglu(gu: tf.Tensor2D): tf.Tensor2D {
  // [N, 2, F] → [2, N, F]: the halves become contiguous blocks, which every backend splits fast (the cpu backend splits
  // a non-leading axis element by element, ~9× slower than this transpose)
  const N = gu.shape[0],
    F = gu.shape[1] / 2;
  const [gate, up] = tf.split(tf.transpose(gu.reshape([N, 2, F]), [1, 0, 2]), 2, 0).map((t) => t.reshape([N, F]));
  return tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as tf.Tensor2D;
}

function attention(q: tf.Tensor4D, k: tf.Tensor4D, v: tf.Tensor4D, mask: tf.Tensor4D): { context: tf.Tensor2D; probs: tf.Tensor4D } {
  const [B, H, T, hd] = q.shape,
    [, Hkv, Tk] = k.shape;
  const rep = H / Hkv;
  // GQA without copying k/v: query heads hkv·rep … hkv·rep+rep−1 share kv head hkv (HF repeat_kv order), so
  // [B,H,T,hd] viewed as [B,Hkv,rep·T,hd] lines every query row up with its kv head.
  const scores = tf.matMul(q.reshape([B, Hkv, rep * T, hd]), k, false, true).reshape([B, H, T, Tk]) as tf.Tensor4D;
  const probs = tf.softmax(tf.add(scores, mask)) as tf.Tensor4D;
  const ctx = tf.matMul(probs.reshape([B, Hkv, rep * T, Tk]) as tf.Tensor4D, v); // [B,Hkv,rep·T,hd]
  return { context: tf.transpose(ctx.reshape([B, H, T, hd]), [0, 2, 1, 3]).reshape([B * T, H * hd]) as tf.Tensor2D, probs };
}

/** Log-softmax, then each target's log-prob with one flat gather (its gradient is UnsortedSegmentSum, registered on wasm). */
function tokenLogprob(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D {
  const [N, V] = logits.shape;
  const lsm = tf.logSoftmax(logits);
  const flatIdx = tf.tidy(() => tf.range(0, N, 1, 'int32').mul(tf.scalar(V, 'int32')).add(targets));
  return tf.gather(lsm.reshape([N * V]), flatIdx) as tf.Tensor1D;
}

/** The product, then the add: a residual's or a bias's (the same bits in either order, addition being commutative). */
function matMulAdd(a: tf.Tensor2D, w: tf.Tensor2D, add: tf.Tensor): tf.Tensor2D {
  return tf.add(tf.matMul(a, w), add);
}

/**
 * The product with W's values read to float32 on the host: the reference the webgpu kernel is checked against, on a
 * backend that reads synchronously (host backends store frozen weights rounded in float32 instead: BackendCaps.halfWeights).
 */
function matMulHalf(a: tf.Tensor2D, w: HalfWeight, add: tf.Tensor | null): tf.Tensor2D {
  return tf.tidy(() => {
    const y = tf.matMul(a, tf.tensor2d(readHalfSync(w), [w.rows, w.cols]));
    return (add ? tf.add(y, add) : y) as tf.Tensor2D;
  });
}

/** The gather from W's values read to float32 on the host (the reference for webgpu's kernel, as matMulHalf's). */
function gatherHalf(w: HalfWeight, ids: tf.Tensor1D, axis: 0 | 1): tf.Tensor2D {
  return tf.tidy(() => tf.gather(tf.tensor2d(readHalfSync(w), [w.rows, w.cols]), ids, axis) as tf.Tensor2D);
}

export const COMPOSED: ModelOps = {
  rmsNorm,
  rmsNormInfer: rmsNorm,
  swiglu,
  swigluInfer: swiglu,
  heads: composedHeads(gatherRotate, splitOnHeads),
  attention,
  tokenLogprob,
  matMulAdd,
  matMulHalf,
  gatherHalf,
  decodeAttention: null,
  sampleRows: null,
};
