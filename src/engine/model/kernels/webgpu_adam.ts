// Adam on the webgpu backend in three WGSL kernels per parameter (first moment, second moment, the parameter) with
// β, 1 − β, the bias corrections, ε and the learning rate as uniforms. The op sequence (optim.ts applyOps) was the
// largest item of the train step's profile: about 13 kernels and 7 uploaded scalar tensors per parameter (tfjs makes
// a tensor of every number it multiplies by), a third of the step's kernels and nearly all its uploads. A kernel
// cannot read a buffer it writes, so each writes a new tensor that the variable then takes (assign moves the buffer, no
// copy). The arithmetic is the op sequence's, in its order.
import * as tf from '@tensorflow/tfjs';
import type { AdamScalars } from './fused';
import { flatProgram, runProgram, type Program } from './webgpu_program';

const MOMENT = 'ClAdamMomentWebgpu';
const PARAM = 'ClAdamParamWebgpu';
const THREADS = 128;

function flat(n: number, inputs: string[], key: string, uniforms: string, body: string): Program {
  return flatProgram({ inputs, outputShape: [n], key, uniforms, threads: THREADS, code: `fn main(index : i32) { if (index < uniforms.size) { ${body} } }` });
}

let registered = false;

/** Registers the two Adam kernels with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuAdam(): void {
  if (registered) return;
  registered = true;
  // m' = m·β + g·(1 − β), or with `square` v' = v·β + (g·g)·(1 − β)
  tf.registerKernel({
    kernelName: MOMENT,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { s, g } = inputs as { s: tf.TensorInfo; g: tf.TensorInfo };
      const { beta, oneMinus, square } = attrs as unknown as { beta: number; oneMinus: number; square: boolean };
      const n = s.shape.reduce((a, d) => a * d, 1);
      const gx = square ? 'g[index] * g[index]' : 'g[index]';
      const p = flat(
        n,
        ['s', 'g'],
        `cl_adam_moment_${square ? 2 : 1}`,
        'beta : f32, oneMinus : f32,',
        `setOutputAtIndex(index, s[index] * uniforms.beta + (${gx}) * uniforms.oneMinus);`,
      );
      return runProgram(
        backend,
        p,
        [s, g],
        [
          { type: 'float32', data: [beta] },
          { type: 'float32', data: [oneMinus] },
        ],
      );
    },
  });
  // p' = p − ((m / d1) / (sqrt(v / d2) + ε))·lr
  tf.registerKernel({
    kernelName: PARAM,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { p, m, v } = inputs as { p: tf.TensorInfo; m: tf.TensorInfo; v: tf.TensorInfo };
      const a = attrs as unknown as { d1: number; d2: number; eps: number; lr: number };
      const n = p.shape.reduce((x, d) => x * d, 1);
      const prog = flat(
        n,
        ['p', 'm', 'v'],
        'cl_adam_param',
        'd1 : f32, d2 : f32, eps : f32, lr : f32,',
        'setOutputAtIndex(index, p[index] - ((m[index] / uniforms.d1) / (sqrt(v[index] / uniforms.d2) + uniforms.eps)) * uniforms.lr);',
      );
      return runProgram(
        backend,
        prog,
        [p, m, v],
        [
          { type: 'float32', data: [a.d1] },
          { type: 'float32', data: [a.d2] },
          { type: 'float32', data: [a.eps] },
          { type: 'float32', data: [a.lr] },
        ],
      );
    },
  });
}

/** One Adam update of p with gradient g and moments m, v, on webgpu; false on any other backend. */
export function adamWebgpu(p: tf.Variable, g: tf.Tensor, m: tf.Variable, v: tf.Variable, s: AdamScalars): boolean {
  if (tf.getBackend() !== 'webgpu' || [p, g, m, v].some((t) => t.dtype !== 'float32')) return false;
  tf.tidy(() => {
    const m1 = tf.engine().runKernel(MOMENT, { s: m, g }, { beta: s.b1, oneMinus: s.c1, square: false } as unknown as tf.NamedAttrMap) as tf.Tensor;
    const v1 = tf.engine().runKernel(MOMENT, { s: v, g }, { beta: s.b2, oneMinus: s.c2, square: true } as unknown as tf.NamedAttrMap) as tf.Tensor;
    const p1 = tf.engine().runKernel(PARAM, { p, m: m1, v: v1 }, { d1: s.d1, d2: s.d2, eps: s.eps, lr: s.lr } as unknown as tf.NamedAttrMap) as tf.Tensor;
    m.assign(m1.reshape(m.shape));
    v.assign(v1.reshape(v.shape));
    p.assign(p1.reshape(p.shape));
  });
  return true;
}
