// SwiGLU's element-wise chain as WGSL kernels for the webgpu backend. The composition (ops/composed.ts) splits the fused
// gate | up projection [N, 2F] with a transpose and a SplitV (3 dispatches), then a sigmoid and two multiplies, and its
// gradient runs the same chain backward: about 12 dispatches per MLP per pass, for arithmetic that reads each element
// once. Here, with gate g = gu[n, j] and up u = gu[n, F + j], s = σ(g):
//   forward   y = g·s·u, one thread per output element: 1 dispatch
//   backward  d gate = dy·u·s·(1 + g·(1 − s)), d up = dy·g·s, one thread per input element: 1 dispatch
// ops_tables.test.ts checks both against the composition on cpu.
import * as tf from '@tensorflow/tfjs';
import { flatProgram, registerProgramKernel, runProgram } from './webgpu_program';

const FWD = 'ClSwigluWebgpu';
const BWD = 'ClSwigluGradWebgpu';
const THREADS = 128;
const SIGMOID = 'fn sig(v : f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }';

const forwardProgram = (N: number, F: number) =>
  flatProgram({
    inputs: ['gu'],
    outputShape: [N, F],
    key: 'cl_swiglu_fwd',
    uniforms: 'f : i32,',
    threads: THREADS,
    code: `
      ${SIGMOID}
      fn main(index : i32) {
        if (index < uniforms.size) {
          let F = uniforms.f;
          let row = index / F;
          let j = index - row * F;
          let g = gu[row * 2 * F + j];
          setOutputAtIndex(index, g * sig(g) * gu[row * 2 * F + F + j]);
        }
      }`,
  });

const backwardProgram = (N: number, F: number) =>
  flatProgram({
    inputs: ['dy', 'gu'],
    outputShape: [N, 2 * F],
    key: 'cl_swiglu_bwd',
    uniforms: 'f : i32,',
    threads: THREADS,
    code: `
      ${SIGMOID}
      fn main(index : i32) {
        if (index < uniforms.size) {
          let F = uniforms.f;
          let row = index / (2 * F);
          let c = index - row * 2 * F;
          let j = select(c - F, c, c < F);
          let g = gu[row * 2 * F + j];
          let s = sig(g);
          let d = dy[row * F + j];
          if (c < F) {
            setOutputAtIndex(index, d * gu[row * 2 * F + F + j] * s * (1.0 + g * (1.0 - s)));
          } else {
            setOutputAtIndex(index, d * g * s);
          }
        }
      }`,
  });

let registered = false;

/** Registers both kernels with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuSwiglu(): void {
  if (registered) return;
  registered = true;
  const half = (gu: tf.TensorInfo) => [{ type: 'int32' as const, data: [gu.shape[1] / 2] }];
  registerProgramKernel(FWD, ({ gu }, backend) => runProgram(backend, forwardProgram(gu.shape[0], gu.shape[1] / 2), [gu], half(gu)));
  registerProgramKernel(BWD, ({ dy, gu }, backend) => runProgram(backend, backwardProgram(gu.shape[0], gu.shape[1] / 2), [dy, gu], half(gu)));
}

/** SiLU(gate)·up of gu [N, 2F] → [N, F], differentiable: 1 dispatch each way. */
export function swigluWebgpu(gu: tf.Tensor2D): tf.Tensor2D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [x, save] = args as [tf.Tensor2D, tf.GradSaveFunc];
    save([x]);
    return {
      value: tf.engine().runKernel(FWD, { gu: x }) as tf.Tensor2D,
      gradFunc: (dy: tf.Tensor2D, [xs]: tf.Tensor[]) => tf.engine().runKernel(BWD, { dy, gu: xs }) as tf.Tensor2D,
    };
  });
  return op(gu);
}

/** swiglu's value with no gradient scope: the forward kernel alone. */
export function swigluInferWebgpu(gu: tf.Tensor2D): tf.Tensor2D {
  return tf.engine().runKernel(FWD, { gu }) as tf.Tensor2D;
}
