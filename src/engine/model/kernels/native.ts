// Fused kernels in native code (native/), on the wasm-blas backend only: a token's log-prob, RMSNorm, attention
// over a whole sequence, the attention heads with RoPE and SwiGLU, each forward and backward. Their values
// differ from the ops' in float rounding (a different exp, sums in float64, fused multiply-adds where the compiler
// contracts), which is why plain wasm keeps the ops and its bits.
//
// ---- a token's log-prob --------------------------------------------------------------------------------------------
//
// log softmax(z)[target]: as ops, log-softmax + gather is a max, a subtract, an exp, a sum, a log and a subtract over [N, V] logits, a gather,
// and backward a scatter of the gather's gradient, an exp, a sum, a multiply and a subtract: about 30 ms of the small
// model's train step (bench/PROFILE.md). Here forward is one pass over the logits that keeps only the row's log-sum-exp
// [N], and backward one pass that writes dy·(onehot − softmax). The exp is Cephes' expf (about 1 ulp), so values
// differ from the ops' in float rounding.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { nativeCall } from './blas';
import type { HeadDims } from '../ops/ops';
import { swigluKernels } from './fused';
import { Info, KernelArgs, WasmBackend, at32, f32Bits, heap32, sizeOf } from './heap';

export const TOKEN_LOGPROB = 'CreditLensTokenLogprob';
export const TOKEN_LOGPROB_GRAD = 'CreditLensTokenLogprobGrad';

/** logits [N, V], targets [N] (int32) → log softmax(logits)[n, targets[n]] [N], differentiable in logits. */
export function tokenLogprob(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [z, save] = args as [tf.Tensor2D, tf.GradSaveFunc];
    const [logp, lse] = tf.engine().runKernel(TOKEN_LOGPROB, { logits: z, targets }) as unknown as tf.Tensor1D[];
    save([z, lse]);
    return {
      value: logp,
      gradFunc: (dy: tf.Tensor1D, [zz, l]: tf.Tensor[]) => tf.engine().runKernel(TOKEN_LOGPROB_GRAD, { logits: zz, targets, lse: l, dy }) as tf.Tensor2D,
    };
  });
  return op(logits);
}

/**
 * [N, V] from the inputs, after checking dtypes and shapes and that every target is a vocabulary index. The backward
 * pass checks again: it can be run on its own (runKernel), and a target out of range would write outside its row.
 */
function checked(be: WasmBackend, logits: Info, targets: Info, ...rows: Info[]): [number, number] {
  const [N, V] = logits.shape;
  const ok =
    logits.shape.length === 2 &&
    logits.dtype === 'float32' &&
    targets.dtype === 'int32' &&
    sizeOf(targets.shape) === N &&
    rows.every((r) => r.dtype === 'float32' && sizeOf(r.shape) === N);
  if (!ok) throw new Error(`${TOKEN_LOGPROB}: logits [${logits.shape}] (float32) and targets [${targets.shape}] (int32) do not fit`);
  const heap = heap32(be),
    tp = at32(be, targets);
  for (let n = 0; n < N; n++) {
    const t = heap[tp + n];
    if (t < 0 || t >= V) throw new Error(`${TOKEN_LOGPROB}: target ${t} at row ${n} is outside the vocabulary [0, ${V})`);
  }
  return [N, V];
}

export function tokenLogprobKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { logits, targets } = args.inputs as { logits: Info; targets: Info };
  const [N, V] = checked(be, logits, targets);
  const logp = be.makeOutput([N], 'float32');
  const lse = be.makeOutput([N], 'float32');
  nativeCall(be, 'logprob', { logits: at32(be, logits), targets: at32(be, targets), N, V, logp: at32(be, logp), lse: at32(be, lse) });
  return [logp, lse];
}

export function tokenLogprobGradKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { logits, targets, lse, dy } = args.inputs as { logits: Info; targets: Info; lse: Info; dy: Info };
  const [N, V] = checked(be, logits, targets, lse, dy);
  const out = be.makeOutput([N, V], 'float32');
  nativeCall(be, 'logprobGrad', { logits: at32(be, logits), targets: at32(be, targets), lse: at32(be, lse), dy: at32(be, dy), out: at32(be, out), N, V });
  return out;
}

// ---- RMSNorm ------------------------------------------------------------------------------------------------------
//
// x·rsqrt(mean(x²) + eps)·w: as ops six kernels forward and about a dozen backward, at every norm of the model (2·L + 1).
// Forward keeps 1/rms per row [N] for the backward pass, which writes dx and dw in one pass.

export const RMS_NORM_TRAIN = 'CreditLensRmsNormTrain';
export const RMS_NORM_GRAD = 'CreditLensRmsNormGrad';

/** x [N, d] · rsqrt(mean over d of x² + eps) · w [d], differentiable in x and w. */
export function rmsNormNative(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  const attrs = { eps } as unknown as tf.NamedAttrMap;
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [xx, ww, save] = args as [tf.Tensor2D, tf.Tensor1D, tf.GradSaveFunc];
    const [y, rinv] = tf.engine().runKernel(RMS_NORM_TRAIN, { x: xx, w: ww }, attrs) as unknown as tf.Tensor[];
    save([xx, ww, rinv]);
    return {
      value: y as tf.Tensor2D,
      gradFunc: (dy: tf.Tensor2D, [sx, sw, sr]: tf.Tensor[]) => tf.engine().runKernel(RMS_NORM_GRAD, { x: sx, w: sw, rinv: sr, dy }) as unknown as tf.Tensor[],
    };
  });
  return op(x, w);
}

/** rmsNormNative's value without a gradient scope (the decode step): 1/rms is dropped at once. */
export function rmsNormNativeInfer(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  const [y, rinv] = tf.engine().runKernel(RMS_NORM_TRAIN, { x, w }, { eps } as unknown as tf.NamedAttrMap) as unknown as tf.Tensor[];
  rinv.dispose();
  return y as tf.Tensor2D;
}

function normShapes(x: Info, w: Info, ...same: Info[]): [number, number] {
  const d = x.shape[x.shape.length - 1];
  const N = sizeOf(x.shape) / d;
  if (
    x.dtype !== 'float32' ||
    w.dtype !== 'float32' ||
    sizeOf(w.shape) !== d ||
    same.some((t) => t.dtype !== 'float32' || sizeOf(t.shape) !== sizeOf(x.shape))
  ) {
    throw new Error(`${RMS_NORM_TRAIN}: x [${x.shape}] and w [${w.shape}] do not fit (float32, w as long as x's last axis)`);
  }
  return [N, d];
}

export function rmsNormTrainKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { x, w } = args.inputs as { x: Info; w: Info };
  const eps = Number((args.attrs as { eps?: number } | undefined)?.eps);
  if (!Number.isFinite(eps)) throw new Error(`${RMS_NORM_TRAIN}: eps ${eps}`);
  const [N, d] = normShapes(x, w);
  const y = be.makeOutput(x.shape, 'float32');
  const rinv = be.makeOutput([N], 'float32');
  nativeCall(be, 'rmsnorm', { x: at32(be, x), w: at32(be, w), y: at32(be, y), rinv: at32(be, rinv), N, d, epsBits: f32Bits(eps) });
  return [y, rinv];
}

export function rmsNormGradKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { x, w, rinv, dy } = args.inputs as { x: Info; w: Info; rinv: Info; dy: Info };
  const [N, d] = normShapes(x, w, dy);
  if (sizeOf(rinv.shape) !== N) throw new Error(`${RMS_NORM_GRAD}: 1/rms [${rinv.shape}] for ${N} rows`);
  const dx = be.makeOutput(x.shape, 'float32');
  const dw = be.makeOutput(w.shape, 'float32');
  nativeCall(be, 'rmsnormGrad', { x: at32(be, x), w: at32(be, w), rinv: at32(be, rinv), dy: at32(be, dy), dx: at32(be, dx), dw: at32(be, dw), N, d });
  return [dx, dw];
}

// ---- attention over a whole sequence (the training forward and the prefill) ------------------------------------------
//
// softmax(q·kᵀ + mask)·v with the heads merged: as ops a batched product, the masked softmax, a second product and the
// transpose that merges the heads, and backward four products, the softmax gradient and the inverse transpose. Here one
// native call each way per layer (native/, Attention): each (batch element, kv head) runs its products and its
// softmax while its scores are in cache, and the context is written in the merged layout the output projection reads.

export const ATTENTION = 'CreditLensAttention';
export const ATTENTION_GRAD = 'CreditLensAttentionGrad';

/**
 * q [B, H, T, hd] (1/√hd folded in), k and v [B, Hkv, Tk, hd], the additive mask [B, 1, T, Tk] → the context
 * [B·T, H·hd] (head h at columns h·hd…, GQA: query head h reads kv head h / (H / Hkv)), differentiable in q, k and v,
 * and the attention probabilities [B, H, T, Tk]. The probabilities are for reading (attention credit): no gradient
 * flows back through them.
 */
export function attention(q: tf.Tensor4D, k: tf.Tensor4D, v: tf.Tensor4D, mask: tf.Tensor4D): { context: tf.Tensor2D; probs: tf.Tensor4D } {
  let probs: tf.Tensor4D | undefined;
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [qq, kk, vv, save] = args as [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D, tf.GradSaveFunc];
    const [context, p] = tf.engine().runKernel(ATTENTION, { q: qq, k: kk, v: vv, mask }) as unknown as [tf.Tensor2D, tf.Tensor4D];
    // kept past customGrad's scope, which disposes what the op does not return; a clone in the caller's scope below
    probs = tf.keep(p);
    save([qq, kk, vv, p]);
    return {
      value: context,
      gradFunc: (dy: tf.Tensor2D, [sq, sk, sv, sp]: tf.Tensor[]) =>
        tf.engine().runKernel(ATTENTION_GRAD, { q: sq, k: sk, v: sv, probs: sp, dy }) as unknown as tf.Tensor[],
    };
  });
  const context = op(q, k, v) as tf.Tensor2D;
  const kept = probs!;
  const visible = kept.clone(); // shares the data; tracked (and disposed) like any tensor the caller makes
  kept.dispose();
  return { context, probs: visible };
}

/** [B, H, Hkv, T, Tk, hd] of attention's operands, after checking they fit together. */
function attentionDims(
  name: string,
  q: Info,
  k: Info,
  v: Info,
  last: Info,
  lastShape: (B: number, H: number, T: number, Tk: number, hd: number) => number[],
): number[] {
  const [B, H, T, hd] = q.shape,
    [, Hkv, Tk] = k.shape;
  const same = (t: Info, s: number[]) => t.dtype === 'float32' && t.shape.length === s.length && t.shape.every((n, i) => n === s[i]);
  const fits =
    q.shape.length === 4 &&
    same(q, [B, H, T, hd]) &&
    same(k, [B, Hkv, Tk, hd]) &&
    same(v, [B, Hkv, Tk, hd]) &&
    Hkv > 0 &&
    H % Hkv === 0 &&
    same(last, lastShape(B, H, T, Tk, hd));
  if (!fits) {
    throw new Error(
      `${name}: q [${q.shape}], k [${k.shape}], v [${v.shape}] and [${last.shape}] do not fit ` +
        `(q [B, H, T, hd], k and v [B, Hkv, Tk, hd] with H a multiple of Hkv, then [${lastShape(B, H, T, Tk, hd)}])`,
    );
  }
  return [B, H, Hkv, T, Tk, hd];
}

export function attentionKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { q, k, v, mask } = args.inputs as { q: Info; k: Info; v: Info; mask: Info };
  const [B, H, Hkv, T, Tk, hd] = attentionDims(ATTENTION, q, k, v, mask, (B, _H, T, Tk) => [B, 1, T, Tk]);
  const context = be.makeOutput([B * T, H * hd], 'float32');
  const probs = be.makeOutput([B, H, T, Tk], 'float32');
  nativeCall(be, 'attention', {
    q: at32(be, q),
    k: at32(be, k),
    v: at32(be, v),
    mask: at32(be, mask),
    p: at32(be, probs),
    o: at32(be, context),
    B,
    H,
    Hkv,
    T,
    Tk,
    hd,
  });
  return [context, probs];
}

export function attentionGradKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { q, k, v, probs, dy } = args.inputs as { q: Info; k: Info; v: Info; probs: Info; dy: Info };
  const [B, H, Hkv, T, Tk, hd] = attentionDims(ATTENTION_GRAD, q, k, v, probs, (B, H, T, Tk) => [B, H, T, Tk]);
  if (dy.dtype !== 'float32' || sizeOf(dy.shape) !== B * T * H * hd) throw new Error(`${ATTENTION_GRAD}: dy [${dy.shape}] for a context [${B * T}, ${H * hd}]`);
  const dq = be.makeOutput(q.shape, 'float32');
  const dk = be.makeOutput(k.shape, 'float32');
  const dv = be.makeOutput(v.shape, 'float32');
  nativeCall(be, 'attentionGrad', {
    q: at32(be, q),
    k: at32(be, k),
    v: at32(be, v),
    p: at32(be, probs),
    dO: at32(be, dy),
    dq: at32(be, dq),
    dk: at32(be, dk),
    dv: at32(be, dv),
    B,
    H,
    Hkv,
    T,
    Tk,
    hd,
  });
  return [dq, dk, dv];
}

// ---- the attention heads of the fused projection, with RoPE -----------------------------------------------------------
//
// [B·T, (H + 2·Hkv)·hd] → q [B, H, T, hd], k and v [B, Hkv, T, hd], q and k rotated: as ops a transpose, two splits and the
// RoPE kernel, and backward the RoPE kernel, two concats and a transpose; here one pass each way that moves every row once.

export const QKV_HEADS = 'CreditLensQkvHeads';
export const QKV_HEADS_GRAD = 'CreditLensQkvHeadsGrad';

/**
 * The fused projection qkv [B·T, (H + 2·Hkv)·hd] as head-major q, k, v, with q and k rotated by the RoPE tables
 * cos / sin [1, H + Hkv, T, hd] (Model.ropeTables: sin sign-folded, 1/√hd folded into q's rows). Differentiable in qkv.
 */
export function qkvHeads(qkv: tf.Tensor2D, cos: tf.Tensor4D, sin: tf.Tensor4D, dims: HeadDims): [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D] {
  const attrs = { ...dims } as unknown as tf.NamedAttrMap;
  // runKernelFunc rather than customGrad: three outputs, each with its own upstream gradient (zeros where unused)
  const engine = tf.engine() as unknown as {
    runKernelFunc(p: {
      forwardFunc: (backend: unknown, save: tf.GradSaveFunc) => tf.Tensor[];
      backwardsFunc: (dys: tf.Tensor[], saved: tf.Tensor[]) => { qkv: () => tf.Tensor };
      inputs: { qkv: tf.Tensor };
    }): tf.Tensor[];
  };
  return engine.runKernelFunc({
    forwardFunc: (_, save) => {
      save([cos, sin]);
      return tf.engine().runKernel(QKV_HEADS, { qkv, cos, sin }, attrs) as unknown as tf.Tensor[];
    },
    backwardsFunc: ([dq, dk, dv], [c, s]) => ({
      qkv: () => tf.engine().runKernel(QKV_HEADS_GRAD, { dq, dk, dv, cos: c, sin: s }, attrs) as tf.Tensor,
    }),
    inputs: { qkv },
  }) as [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D];
}

function headShapes(name: string, attrs: unknown, width: Info, tables: Info[], parts: Info[]): number[] {
  const { B, T, nHeads: H, nKvHeads: Hkv, headDim: hd } = attrs as HeadDims;
  const W = (H + 2 * Hkv) * hd;
  const fits =
    [B, T, H, Hkv, hd].every((n) => Number.isInteger(n) && n > 0) &&
    hd % 2 === 0 &&
    width.dtype === 'float32' &&
    sizeOf(width.shape) === B * T * W &&
    width.shape[width.shape.length - 1] === W &&
    tables.every((t) => t.dtype === 'float32' && sizeOf(t.shape) === (H + Hkv) * T * hd) &&
    parts.every((p, i) => p.dtype === 'float32' && sizeOf(p.shape) === B * (i === 0 ? H : Hkv) * T * hd);
  if (!fits) {
    const shapes = [width, ...tables, ...parts].map((t) => `[${t.shape}]`).join(', ');
    throw new Error(`${name}: ${shapes} do not fit B ${B}, T ${T}, ${H} heads, ${Hkv} kv heads of ${hd} (even)`);
  }
  return [B, T, H, Hkv, hd];
}

export function qkvHeadsKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { qkv, cos, sin } = args.inputs as { qkv: Info; cos: Info; sin: Info };
  const [B, T, H, Hkv, hd] = headShapes(QKV_HEADS, args.attrs, qkv, [cos, sin], []);
  const q = be.makeOutput([B, H, T, hd], 'float32');
  const k = be.makeOutput([B, Hkv, T, hd], 'float32');
  const v = be.makeOutput([B, Hkv, T, hd], 'float32');
  nativeCall(be, 'qkvHeads', { qkv: at32(be, qkv), cos: at32(be, cos), sin: at32(be, sin), q: at32(be, q), k: at32(be, k), v: at32(be, v), B, T, H, Hkv, hd });
  return [q, k, v];
}

export function qkvHeadsGradKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { dq, dk, dv, cos, sin } = args.inputs as { dq: Info; dk: Info; dv: Info; cos: Info; sin: Info };
  const { B, T, nHeads: H, nKvHeads: Hkv, headDim: hd } = args.attrs as unknown as HeadDims;
  const dx = be.makeOutput([B * T, (H + 2 * Hkv) * hd], 'float32');
  headShapes(QKV_HEADS_GRAD, args.attrs, dx, [cos, sin], [dq, dk, dv]);
  nativeCall(be, 'qkvHeadsGrad', {
    dq: at32(be, dq),
    dk: at32(be, dk),
    dv: at32(be, dv),
    cos: at32(be, cos),
    sin: at32(be, sin),
    dqkv: at32(be, dx),
    B,
    T,
    H,
    Hkv,
    hd,
  });
  return dx;
}

// ---- SwiGLU -----------------------------------------------------------------------------------------------------------
//
// SiLU(gate)·up of the fused gate | up projection, as the SIMD loops do it (fused.ts) but with 8-wide AVX2 vectors and
// Cephes' exp for the sigmoid: about 3× the SIMD loop's rate on the small model's [2048, 2048].

export const SWIGLU_NATIVE = 'CreditLensSwiGLUNative';
export const SWIGLU_NATIVE_GRAD = 'CreditLensSwiGLUNativeGrad';

/** The kernel pair for fused.ts's swiglu / swigluGrad with kernel SWIGLU_NATIVE / SWIGLU_NATIVE_GRAD: any even width. */
export const [swigluNativeKernel, swigluNativeGradKernel] = swigluKernels({
  name: SWIGLU_NATIVE,
  multiple: 2,
  forward: (be, gu, out, sig, N, F) => nativeCall(be, 'swiglu', { gu, out, sig, N, F }),
  backward: (be, gu, sig, dy, out, N, F) => nativeCall(be, 'swigluGrad', { gu, sig, dy, out, N, F }),
});

/** The kernels above by name, for wasm_kernels.ts to register. */
export const NATIVE_KERNELS: [string, (args: KernelArgs) => Info | Info[]][] = [
  [TOKEN_LOGPROB, tokenLogprobKernel],
  [TOKEN_LOGPROB_GRAD, tokenLogprobGradKernel],
  [RMS_NORM_TRAIN, rmsNormTrainKernel],
  [RMS_NORM_GRAD, rmsNormGradKernel],
  [ATTENTION, attentionKernel],
  [ATTENTION_GRAD, attentionGradKernel],
  [QKV_HEADS, qkvHeadsKernel],
  [QKV_HEADS_GRAD, qkvHeadsGradKernel],
  [SWIGLU_NATIVE, swigluNativeKernel],
  [SWIGLU_NATIVE_GRAD, swigluNativeGradKernel],
];
