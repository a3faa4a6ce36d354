// Fused RoPE and SwiGLU kernels (with SwiGLU's gradient) on the SIMD loops, RMSNorm for decoding, and Adam's update in place.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { Info, KernelArgs, WasmBackend, at32, f32Bits, heapF32, sizeOf } from './heap';
import { hasSimd, simdLoops } from './simd';

// ---- RoPE ------------------------------------------------------------------------------------------------
//
// x·cos + rotate_half(x)·sin as stock ops is a split, a concat, two multiplies and an add over [B, n, T, hd], and
// as much again in the backward pass (a concat for the split, slices for the concat); one SIMD pass does it.

export const ROPE = 'CreditLensRope';

/**
 * y = x·cos + swap(x)·sin, swap exchanging the halves of the last axis (HF's rotate_half with its sign folded
 * into sin). x [..., hd]; cos and sin hold a whole number of x's trailing [rows, hd] blocks' worth of rows and
 * repeat over x's leading dims (e.g. x [B, n, T, hd], tables [1, n, T, hd]). No gradient of its own: model.ts
 * wraps it (the gradient is the same rotation with −sin).
 */
export function ropeRotate<T extends tf.Tensor>(x: T, cos: tf.Tensor, sin: tf.Tensor): T {
  return tf.engine().runKernel(ROPE, { x, cos, sin }) as T;
}

export function ropeKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { x, cos, sin } = args.inputs as { x: Info; cos: Info; sin: Info };
  const hd = x.shape[x.shape.length - 1];
  const rows = sizeOf(x.shape) / hd,
    tableRows = sizeOf(cos.shape) / hd;
  if (x.dtype !== 'float32' || hd % 8 !== 0 || sizeOf(sin.shape) !== sizeOf(cos.shape) || cos.shape[cos.shape.length - 1] !== hd || rows % tableRows !== 0) {
    throw new Error(`${ROPE}: x [${x.shape}] and tables [${cos.shape}] / [${sin.shape}] do not fit (head dim a multiple of 8, tables repeating over x)`);
  }
  const out = be.makeOutput(x.shape, 'float32');
  const loops = simdLoops(be);
  const xp = at32(be, x),
    cp = at32(be, cos),
    sp = at32(be, sin),
    op = at32(be, out);
  for (let r = 0; r < rows; r += tableRows) loops.rope(4 * (xp + r * hd), 4 * cp, 4 * sp, 4 * (op + r * hd), tableRows, hd / 2);
  return out;
}

// ---- SwiGLU ----------------------------------------------------------------------------------------------
//
// SiLU(gate)·up from the fused gate | up projection: as ops, a split, a sigmoid and two multiplies forward, and
// backward eight elementwise ops plus a concat for the split. Here one SIMD pass each way, with the sigmoid of
// the gate half computed inline (sigmoidCode) and kept for the backward pass.

export const SWIGLU = 'CreditLensSwiGLU';
export const SWIGLU_GRAD = 'CreditLensSwiGLUGrad';

/**
 * gu [N, 2F] (gate | up) → SiLU(gate)·up [N, F], and σ(gate) [N, F] for swigluGrad. `kernel` is SWIGLU (the SIMD
 * loops) or native.ts's SWIGLU_NATIVE (wasm-blas).
 */
export function swiglu(gu: tf.Tensor2D, kernel = SWIGLU): { act: tf.Tensor2D; sig: tf.Tensor2D } {
  const [act, sig] = tf.engine().runKernel(kernel, { gu }) as unknown as tf.Tensor2D[];
  return { act, sig };
}

/** The gradient of swiglu with respect to gu, [N, 2F], for the upstream gradient dy [N, F]; the kernel of the same route. */
export function swigluGrad(gu: tf.Tensor2D, sig: tf.Tensor2D, dy: tf.Tensor2D, kernel = SWIGLU_GRAD): tf.Tensor2D {
  return tf.engine().runKernel(kernel, { gu, sig, dy }) as tf.Tensor2D;
}

/** The two loops of a SwiGLU kernel pair, over heap element offsets: the SIMD loops here, the native ones in native.ts. */
export interface SwigluLoops {
  /** the forward kernel's name, for errors */
  name: string;
  /** 2F must be a multiple of this */
  multiple: number;
  forward(be: WasmBackend, gu: number, out: number, sig: number, N: number, F: number): void;
  backward(be: WasmBackend, gu: number, sig: number, dy: number, out: number, N: number, F: number): void;
}

/** The forward and backward kernels of SwiGLU around `loops`: shapes checked, outputs made, one loop call each. */
export function swigluKernels(loops: SwigluLoops): [(args: KernelArgs) => Info[], (args: KernelArgs) => Info] {
  const shapes = (gu: Info, sig?: Info, dy?: Info): [number, number] => {
    const [N, F2] = gu.shape;
    const half = (t?: Info) => !t || (t.dtype === 'float32' && t.shape.length === 2 && t.shape[0] === N && t.shape[1] === F2 / 2);
    if (!(gu.shape.length === 2 && F2 % loops.multiple === 0 && gu.dtype === 'float32' && half(sig) && half(dy))) {
      const rest = `${sig ? `, sigmoid [${sig.shape}]` : ''}${dy ? `, dy [${dy.shape}]` : ''}`;
      throw new Error(`${loops.name}: gu [${gu.shape}] (gate | up)${rest} do not fit`);
    }
    return [N, F2 / 2];
  };
  const forward = (args: KernelArgs): Info[] => {
    const be = args.backend as WasmBackend;
    const { gu } = args.inputs as { gu: Info };
    const [N, F] = shapes(gu);
    const out = be.makeOutput([N, F], 'float32');
    const sig = be.makeOutput([N, F], 'float32');
    loops.forward(be, at32(be, gu), at32(be, out), at32(be, sig), N, F);
    return [out, sig];
  };
  const backward = (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { gu, sig, dy } = args.inputs as { gu: Info; sig: Info; dy: Info };
    const [N, F] = shapes(gu, sig, dy);
    const out = be.makeOutput([N, 2 * F], 'float32');
    loops.backward(be, at32(be, gu), at32(be, sig), at32(be, dy), at32(be, out), N, F);
    return out;
  };
  return [forward, backward];
}

export const [swigluKernel, swigluGradKernel] = swigluKernels({
  name: SWIGLU,
  multiple: 8, // the SIMD loops take F in fours
  forward: (be, gu, out, sig, N, F) => simdLoops(be).swiglu(4 * gu, 4 * out, 4 * sig, N, F),
  backward: (be, gu, sig, dy, out, N, F) => simdLoops(be).swigluGrad(4 * gu, 4 * sig, 4 * dy, 4 * out, N, F),
});

// ---- RMSNorm (inference) ---------------------------------------------------------------------------------
//
// x·rsqrt(mean(x²) + eps)·w as stock ops is six kernels (square, mean, add, rsqrt, two multiplies). A decode step
// normalises a few rows five times over, where launching those kernels costs more than the arithmetic: one pass
// here, summing in float64. No gradient: model.ts uses it where nothing is recorded (the KV-cache decode step).

export const RMS_NORM = 'CreditLensRmsNorm';

/** x [N, d] · rsqrt(mean over d of x² + eps) · w [d]; forward only. */
export function rmsNormInfer(x: tf.Tensor2D, w: tf.Tensor, eps: number): tf.Tensor2D {
  return tf.engine().runKernel(RMS_NORM, { x, w }, { eps } as unknown as tf.NamedAttrMap) as tf.Tensor2D;
}

export function rmsNormKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { x, w } = args.inputs as { x: Info; w: Info };
  const eps = Number((args.attrs as { eps?: number } | undefined)?.eps);
  const d = x.shape[x.shape.length - 1];
  if (x.dtype !== 'float32' || w.dtype !== 'float32' || sizeOf(w.shape) !== d || !Number.isFinite(eps)) {
    throw new Error(`${RMS_NORM}: x [${x.shape}] and w [${w.shape}] do not fit (float32, w as long as x's last axis), eps ${eps}`);
  }
  const out = be.makeOutput(x.shape, 'float32');
  const heap = heapF32(be);
  const xp = at32(be, x),
    wp = at32(be, w),
    op = at32(be, out);
  const rows = sizeOf(x.shape) / d;
  for (let r = 0; r < rows; r++) {
    const o = r * d;
    let ss = 0;
    for (let i = 0; i < d; i++) {
      const v = heap[xp + o + i];
      ss += v * v;
    }
    const inv = 1 / Math.sqrt(Math.fround(ss / d) + eps);
    for (let i = 0; i < d; i++) heap[op + o + i] = heap[xp + o + i] * inv * heap[wp + i];
  }
  return out;
}

// ---- Adam, in place --------------------------------------------------------------------------------------
//
// The op sequence of one Adam update is twelve kernels per parameter (src/engine/model/optim.ts); here it is one SIMD
// pass that rewrites the parameter and both moments where they lie. Not a kernel: tfjs kernels make new outputs, and
// the point is to make none. So it runs only on buffers nothing else shares (the backend's refCount of 1; a clone or a
// reshape of a parameter shares its buffer and would see the change), and optim.ts takes the op sequence otherwise.
// Caches keyed on a tensor's id (XNNPACK's packed weights) are dropped after each update.

/** Adam's scalars, each rounded to float32 as tfjs rounds a number it makes a tensor of. */
export interface AdamScalars {
  b1: number;
  c1: number;
  b2: number;
  c2: number;
  d1: number;
  d2: number;
  eps: number;
  lr: number;
}

/**
 * p, m, v ← one Adam update for gradient g, in place on the wasm heap: m·b1 + g·c1, v·b2 + g²·c2, p − (m/d1) / (√(v/d2)
 * + eps)·lr, with every intermediate rounded to float32 where the op sequence's kernels round it (the same bits).
 * False, with nothing changed, where it cannot run: not the wasm backend with SIMD, not float32, or p, m or v shared.
 */
export function adamInPlace(p: tf.Tensor, g: tf.Tensor, m: tf.Tensor, v: tf.Tensor, s: AdamScalars): boolean {
  if (tf.getBackend() !== 'wasm' || !hasSimd()) return false;
  const be = tf.backend() as unknown as WasmBackend & { refCount(dataId: object): number };
  const n = p.size;
  if ([p, g, m, v].some((t) => t.dtype !== 'float32' || t.size !== n) || [p, m, v].some((t) => be.refCount(t.dataId) !== 1)) return false;
  const [pp, gp, mp, vp] = [p, g, m, v].map((t) => at32(be, t));
  const n4 = n & ~3;
  if (n4) {
    simdLoops(be).adam(
      4 * pp,
      4 * gp,
      4 * mp,
      4 * vp,
      n4,
      f32Bits(s.b1),
      f32Bits(s.c1),
      f32Bits(s.b2),
      f32Bits(s.c2),
      f32Bits(s.d1),
      f32Bits(s.d2),
      f32Bits(s.eps),
      f32Bits(s.lr),
    );
  }
  // The last n mod 4 in float64 rounded to float32 after each operation: the same bits as float32 arithmetic (an
  // exact sum, product, quotient or root of floats rounded once from float64 is the correctly rounded float result).
  const heap = heapF32(be),
    f = Math.fround;
  for (let i = n4; i < n; i++) {
    const gi = heap[gp + i];
    const m1 = f(f(heap[mp + i] * s.b1) + f(gi * s.c1));
    const v1 = f(f(heap[vp + i] * s.b2) + f(f(gi * gi) * s.c2));
    heap[mp + i] = m1;
    heap[vp + i] = v1;
    heap[pp + i] = heap[pp + i] - f(f(f(m1 / s.d1) / f(f(Math.sqrt(f(v1 / s.d2))) + s.eps)) * s.lr);
  }
  // XNNPACK caches a product's packed right operand on the tensor's id (kernels/matmul.ts, fastProduct), assuming
  // tensors never change. Re-registering the id runs the backend's disposal callbacks, which drop that packing; the
  // memory stays where it is.
  const rec = be.dataIdMap.get(p.dataId) as { id: number; memoryOffset: number };
  be.wasm.tfjs.disposeData(rec.id);
  be.wasm.tfjs.registerTensor(rec.id, n, rec.memoryOffset);
  return true;
}
