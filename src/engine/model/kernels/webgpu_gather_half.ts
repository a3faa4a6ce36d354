// gather(W, ids, axis) for a frozen weight in 16 bits (half.ts): the embedding's lookup where model.torch_dtype stores
// the vocabulary-sized weights so. One thread per output value unpacks its word's half: rows of W [V, d] (axis 0) or
// columns of a tied W [d, V] (axis 1). No gradient: only frozen weights are stored this way, and ids have none.
import * as tf from '@tensorflow/tfjs';
import { halfAttrs, unpackWgsl, type HalfFormat, type HalfWeight } from '../half';
import { flatProgram, registerProgramKernel, runProgram } from './webgpu_program';

const KERNEL = 'ClGatherHalfWebgpu';
const THREADS = 128;

interface Attrs {
  format: HalfFormat;
  axis: 0 | 1;
  rows: number;
  cols: number;
  /** the window's first column and the packed rows' length in values (half.ts halfWindow) */
  from: number;
  stride: number;
}

let registered = false;

/** Registers the kernel with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuGatherHalf(): void {
  if (registered) return;
  registered = true;
  registerProgramKernel<Attrs>(KERNEL, ({ w, ids }, backend, a) => {
    const n = ids.shape[0];
    // axis 0: out [n, cols] = W[ids[i], c]; axis 1: out [rows, n] = W[r, ids[j]]
    const outputShape = a.axis === 0 ? [n, a.cols] : [a.rows, n];
    const program = flatProgram({
      inputs: ['w', 'ids'],
      outputShape,
      key: `cl_gather_half_${a.format}_${a.axis}`,
      uniforms: 'rows : i32, cols : i32, n : i32, stride : i32, start : i32,',
      threads: THREADS,
      code: `
        ${unpackWgsl(a.format)}
        fn main(index : i32) {
          if (index < uniforms.size) {
            var r : i32;
            var c : i32;
            if (${a.axis} == 0) {
              r = ids[index / uniforms.cols];
              c = index % uniforms.cols;
            } else {
              r = index / uniforms.n;
              c = ids[index % uniforms.n];
            }
            let flat = r * uniforms.stride + uniforms.start + c;
            let v = unpackW(w[flat / 2]);
            setOutputAtIndex(index, select(v.x, v.y, (flat % 2) == 1));
          }
        }`,
    });
    return runProgram(
      backend,
      program,
      [w, ids],
      [a.rows, a.cols, n, a.stride, a.from].map((v) => ({ type: 'int32' as const, data: [v] })),
    );
  });
}

/** gather(W, ids, axis) of a 16-bit weight, in float32: [ids, cols] for axis 0, [rows, ids] for axis 1. */
export function gatherHalfWebgpu(w: HalfWeight, ids: tf.Tensor1D, axis: 0 | 1): tf.Tensor2D {
  return tf.engine().runKernel(KERNEL, { w: w.packed, ids }, { ...halfAttrs(w), axis } as unknown as tf.NamedAttrMap) as tf.Tensor2D;
}
