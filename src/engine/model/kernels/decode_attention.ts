// Decode attention on an in-place KV cache: one kernel per layer writes the step's keys/values and attends.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { nativeCall } from './blas';
import { Info, KernelArgs, WasmBackend, at32, heapF32, runKernel } from './heap';
import { checkDecodeInputs, type DecodeAttentionAttrs } from '../ops/ops';
import { simdLoops } from './simd';

// ---- Decode attention ----------------------------------------------------------------------------------
//
// One decode step attends one query per (row, head) to ≤ a few hundred cached keys. As batched matMuls these
// are products of a [1, hd] row by a [hd, T] block: 2·B·H tiny products per layer, which neither the stock loop
// (~0.5 GMAC/s on them) nor a per-product XNNPACK call (~2.5 µs each) handles well, and the cache grows by a
// concat that copies all of it every step. The kernel below keeps a preallocated cache that it writes in place,
// and computes scores and context with the SIMD loops above (8–9 GMAC/s); softmax is the stock kernel.

export const DECODE_ATTENTION = 'CreditLensDecodeAttention';
/** The same step in one native call: rotation, cache writes and attention (wasm-blas; native/ decodeStep). */
export const DECODE_ATTENTION_NATIVE = 'CreditLensDecodeAttentionNative';

export type { DecodeAttentionAttrs } from '../ops/ops';

/**
 * One decode step of attention for every row, with the KV cache written IN PLACE: `keys` [B, Hkv, hd, cap]
 * (transposed), `values` [B, Hkv, cap, hd] and `keyMask` [B, cap] (1 = real token) receive the new token at
 * `pos` (its rotated key, its value, mask 1). qkv [B, (H + 2·Hkv)·hd] is the fused projection of the new token
 * (q | k | v heads). Returns softmax(q·Kᵀ + mask)·V as [B, H·hd], heads side by side like HF's merged context.
 * Mutating inputs is outside tfjs's model of immutable tensors: the caller must own those three tensors
 * exclusively (model.ts's in-place KvCache does).
 */
export function decodeAttention(
  qkv: tf.Tensor2D,
  keys: tf.Tensor4D,
  values: tf.Tensor4D,
  keyMask: tf.Tensor2D,
  attrs: DecodeAttentionAttrs,
  kernel: typeof DECODE_ATTENTION | typeof DECODE_ATTENTION_NATIVE,
): tf.Tensor2D {
  // `kernel`: the SIMD loops (plain wasm) or the native step (wasm-blas), by the backend's ops table (ops/)
  return tf.engine().runKernel(kernel, { qkv, keys, values, keyMask }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor2D;
}

export function decodeAttentionKernel(args: KernelArgs): Info {
  return decodeStep(args, false);
}

export function decodeAttentionNativeKernel(args: KernelArgs): Info {
  return decodeStep(args, true);
}

function decodeStep(args: KernelArgs, native: boolean): Info {
  const be = args.backend as WasmBackend;
  const { qkv, keys, values, keyMask } = args.inputs as { qkv: Info; keys: Info; values: Info; keyMask: Info };
  const { pos, nHeads: H, nKvHeads: Hkv, headDim: hd, scale, cos, sin } = args.attrs as unknown as DecodeAttentionAttrs;
  const B = qkv.shape[0],
    cap = checkDecodeInputs(DECODE_ATTENTION, { qkv, keys, values, keyMask }, args.attrs as unknown as DecodeAttentionAttrs),
    rep = H / Hkv,
    half = hd / 2;
  if (hd % 4 !== 0 || cap % 4 !== 0 || !(pos >= 0 && pos < cap) || !Number.isInteger(rep)) {
    throw new Error(`${DECODE_ATTENTION}: needs headDim and capacity multiples of 4 and pos < capacity (hd ${hd}, capacity ${cap}, pos ${pos})`);
  }
  const out = be.makeOutput([B, H * hd], 'float32');
  // RoPE: x·cos + roll(x)·sin, roll(x) = [x2, x1] (the sign of rotate_half is folded into sin); q's tables scaled
  const qc = Float32Array.from(cos, (c) => c * scale),
    qs = Float32Array.from(sin, (v) => v * scale);
  if (native) {
    // the whole step in one native call: rotate, write the cache, attend (native/ decodeStep)
    const tabs = be.makeOutput([4, hd], 'float32');
    const tp = at32(be, tabs),
      f = heapF32(be);
    [qc, qs, cos, sin].forEach((t, i) => f.set(t, tp + i * hd));
    try {
      nativeCall(be, 'decodeStep', {
        qkv: at32(be, qkv),
        tabs: tp,
        keys: at32(be, keys),
        values: at32(be, values),
        mask: at32(be, keyMask),
        out: at32(be, out),
        B,
        H,
        Hkv,
        hd,
        cap,
        pos,
      });
    } catch (e) {
      be.disposeData(out.dataId);
      throw e;
    } finally {
      be.disposeData(tabs.dataId);
    }
    return out;
  }
  // Keys past pos are masked (mask 0 → −1e9, exp → exactly 0), so scoring up to the next multiple of 4 is exact.
  const n = Math.min(cap, Math.ceil((pos + 1) / 4) * 4);
  const q = be.makeOutput([B, H, hd], 'float32');
  const scores = be.makeOutput([B * H, n], 'float32');
  let probs: Info | null = null;
  try {
    const f = heapF32(be);
    const src = at32(be, qkv),
      kp = at32(be, keys),
      vp = at32(be, values),
      mp = at32(be, keyMask),
      qp = at32(be, q);
    const row = (H + 2 * Hkv) * hd;
    for (let b = 0; b < B; b++) {
      const base = src + b * row;
      f[mp + b * cap + pos] = 1;
      for (let h = 0; h < H; h++) {
        const x = base + h * hd,
          o = qp + (b * H + h) * hd;
        for (let i = 0; i < half; i++) f[o + i] = f[x + i] * qc[i] + f[x + half + i] * qs[i];
        for (let i = half; i < hd; i++) f[o + i] = f[x + i] * qc[i] + f[x - half + i] * qs[i];
      }
      for (let g = 0; g < Hkv; g++) {
        const x = base + (H + g) * hd,
          o = kp + (b * Hkv + g) * hd * cap + pos;
        for (let i = 0; i < half; i++) f[o + i * cap] = f[x + i] * cos[i] + f[x + half + i] * sin[i];
        for (let i = half; i < hd; i++) f[o + i * cap] = f[x + i] * cos[i] + f[x - half + i] * sin[i];
        const v = base + (H + Hkv + g) * hd,
          ov = vp + ((b * Hkv + g) * cap + pos) * hd;
        for (let i = 0; i < hd; i++) f[ov + i] = f[v + i];
      }
    }
    const loops = simdLoops(be);
    const sp = at32(be, scores);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = b * Hkv + Math.floor(h / rep);
        loops.scores(4 * (qp + (b * H + h) * hd), 4 * (kp + g * hd * cap), 4 * (mp + b * cap), 4 * (sp + (b * H + h) * n), hd, 4 * cap, n);
      }
    }
    probs = runKernel('Softmax', { inputs: { logits: scores }, backend: be, attrs: { dim: 1 } });
    const pp = at32(be, probs),
      op = at32(be, out);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = b * Hkv + Math.floor(h / rep);
        loops.context(4 * (pp + (b * H + h) * n), 4 * (vp + g * cap * hd), 4 * (op + (b * H + h) * hd), n, hd);
      }
    }
  } finally {
    be.disposeData(q.dataId);
    be.disposeData(scores.dataId);
    if (probs) be.disposeData(probs.dataId);
  }
  return out;
}
