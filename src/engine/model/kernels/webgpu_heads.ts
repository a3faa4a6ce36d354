// The attention heads of the fused q | k | v projection, rotated by RoPE, as WGSL kernels for the webgpu backend. The
// composition (ops/composed.ts composedHeads) transposes [B·T, (H + 2·Hkv)·hd] to head-major order, splits it twice
// and rotates q and k with a gather, two multiplies and an add, and the gradient runs that chain backward with a
// negated sin: about 10 dispatches each way per layer pass. Here, with p(i) = (i + hd/2) mod hd (rotate_half, the sign
// folded into sin, 1/√hd folded into q's rows of the tables):
//   forward   q, k and v, each one thread per output element: out[b, h, t, i] = x_i·cos_i + x_p(i)·sin_i read from
//             the projection's row (v: the element itself): 3 dispatches
//   backward  each part's d qkv, one thread per element of the projection (0 outside the part's heads), the same rotation
//             with −sin: dx_i = dy_i·cos_i − dy_p(i)·sin_i; the tape adds the three: 3 + 2 dispatches
// (tf.customGrad takes one output, so each part is its own op.) ops_tables.test.ts checks both against the composition
// on cpu.
import * as tf from '@tensorflow/tfjs';
import type { HeadDims } from '../ops/ops';
import { flatProgram, registerProgramKernel, runProgram, type Uniform } from './webgpu_program';

const PART = 'ClHeadsPartWebgpu';
const GRAD = 'ClHeadsGradWebgpu';
const THREADS = 128;
const UNIFORMS = 't : i32, hd : i32, heads : i32, all : i32, first : i32, table : i32, rotate : i32, tableHeads : i32,';

/** One part (q, k or v) of the heads: `count` heads from head `first` of the projection, rotated by table rows from `table`. */
const partProgram = (B: number, count: number, T: number, hd: number) =>
  flatProgram({
    inputs: ['x', 'c', 's'],
    outputShape: [B, count, T, hd],
    key: 'cl_heads_part',
    uniforms: UNIFORMS,
    threads: THREADS,
    code: `
      fn main(index : i32) {
        if (index < uniforms.size) {
          let T = uniforms.t;
          let hd = uniforms.hd;
          let i = index % hd;
          let t = (index / hd) % T;
          let h = (index / (hd * T)) % uniforms.heads;
          let b = index / (hd * T * uniforms.heads);
          let src = ((b * T + t) * uniforms.all + uniforms.first + h) * hd;
          if (uniforms.rotate == 0) {
            setOutputAtIndex(index, x[src + i]);
          } else {
            let tab = ((uniforms.table + h) * T + t) * hd;
            let p = (i + hd / 2) % hd;
            setOutputAtIndex(index, x[src + i] * c[tab + i] + x[src + p] * s[tab + i]);
          }
        }
      }`,
  });

/** One part's gradient by the whole projection [N, all·hd]: its heads' elements rotated back, 0 elsewhere. */
const gradProgram = (N: number, width: number) =>
  flatProgram({
    inputs: ['dy', 'c', 's'],
    outputShape: [N, width],
    key: 'cl_heads_grad',
    uniforms: UNIFORMS,
    threads: THREADS,
    code: `
      fn main(index : i32) {
        if (index < uniforms.size) {
          let T = uniforms.t;
          let hd = uniforms.hd;
          let i = index % hd;
          let hh = (index / hd) % uniforms.all;
          let n = index / (hd * uniforms.all);
          let h = hh - uniforms.first;
          if (h < 0 || h >= uniforms.heads) {
            setOutputAtIndex(index, 0.0);
          } else {
            let b = n / T;
            let t = n - b * T;
            let at = ((b * uniforms.heads + h) * T + t) * hd;
            if (uniforms.rotate == 0) {
              setOutputAtIndex(index, dy[at + i]);
            } else {
              let tab = ((uniforms.table + h) * T + t) * hd;
              let p = (i + hd / 2) % hd;
              setOutputAtIndex(index, dy[at + i] * c[tab + i] - dy[at + p] * s[tab + i]);
            }
          }
        }
      }`,
  });

const int = (v: number): Uniform => ({ type: 'int32', data: [v] });

interface PartAttrs {
  B: number;
  T: number;
  hd: number;
  count: number;
  all: number;
  first: number;
  table: number;
  rotate: number;
}

const partUniforms = (a: PartAttrs, tableHeads: number) => [a.T, a.hd, a.count, a.all, a.first, a.table, a.rotate, tableHeads].map(int);

let registered = false;

/** Registers both kernels with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuHeads(): void {
  if (registered) return;
  registered = true;
  registerProgramKernel<PartAttrs>(PART, ({ x, c, s }, backend, a) =>
    runProgram(backend, partProgram(a.B, a.count, a.T, a.hd), [x, c, s], partUniforms(a, c.shape[1])),
  );
  registerProgramKernel<PartAttrs>(GRAD, ({ dy, c, s }, backend, a) =>
    runProgram(backend, gradProgram(a.B * a.T, a.all * a.hd), [dy, c, s], partUniforms(a, c.shape[1])),
  );
}

/** heads(): q [B, H, T, hd], k and v [B, Hkv, T, hd] from the fused projection, q and k rotated; differentiable in qkv. */
export function headsWebgpu(qkv: tf.Tensor2D, cos: tf.Tensor4D, sin: tf.Tensor4D, { B, T, nHeads: H, nKvHeads: Hkv, headDim: hd }: HeadDims): tf.Tensor4D[] {
  const all = H + 2 * Hkv;
  const part = (count: number, first: number, rotate: boolean) => {
    const attrs: PartAttrs = { B, T, hd, count, all, first, table: first, rotate: rotate ? 1 : 0 };
    const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [x, save] = args as [tf.Tensor2D, tf.GradSaveFunc];
      // the tables are no input of this op, and the forward scope would dispose them before the backward pass
      save([cos, sin]);
      return {
        value: tf.engine().runKernel(PART, { x, c: cos, s: sin }, attrs as never) as tf.Tensor4D,
        gradFunc: (dy: tf.Tensor4D, [c, s]: tf.Tensor[]) => tf.engine().runKernel(GRAD, { dy, c, s }, attrs as never) as tf.Tensor2D,
      };
    });
    return op(qkv);
  };
  return [part(H, 0, true), part(Hkv, H, true), part(Hkv, H + Hkv, false)];
}
