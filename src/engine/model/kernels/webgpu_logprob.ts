// A token's log-prob as two WGSL kernels for the webgpu backend, the fusion wasm-blas has in native code (native.ts):
//   forward   one workgroup per row of the logits [N, V]: the row's max and Σ exp(z − max) by tree reductions in
//             workgroup memory, then log p(target) = z[target] − lse and lse itself ([N, 2])
//   backward  one thread per logit: dz = dy·(1[v = target] − exp(z − lse))
// in place of tfjs's composition (max, subtract, exp, sum, log, subtract, a flat gather, and in the backward pass a
// dense UnsortedSegmentSum whose float atomics add in no fixed order). Both kernels read each logit once or twice and
// add in a fixed order: the same bits on every run on one adapter.
import * as tf from '@tensorflow/tfjs';
import { flatProgram, runProgram, workgroupReductions, type Program } from './webgpu_program';

const FWD = 'ClTokenLogprobWebgpu';
const BWD = 'ClTokenLogprobGradWebgpu';
const ROW_THREADS = 256;
const ELEM_THREADS = 128;

function forwardProgram(N: number): Program {
  return flatProgram({
    inputs: ['z', 't'],
    outputShape: [N, 2],
    key: 'cl_token_logprob_fwd',
    uniforms: 'vocab : i32,',
    threads: ROW_THREADS,
    workgroups: N,
    code: `
      ${workgroupReductions(ROW_THREADS)}
      fn main(index : i32) {
        let row = index / ${ROW_THREADS};
        let lane = i32(localId.x);
        let V = uniforms.vocab;
        let base = row * V;
        var m = -3.402823e38;
        for (var v = lane; v < V; v = v + ${ROW_THREADS}) { m = max(m, z[base + v]); }
        let mx = reduceMax(m, lane);
        var acc = 0.0;
        for (var v = lane; v < V; v = v + ${ROW_THREADS}) { acc = acc + exp(z[base + v] - mx); }
        let total = reduceSum(acc, lane);
        if (lane == 0) {
          let lse = mx + log(total);
          setOutputAtIndex(row * 2, z[base + t[row]] - lse);
          setOutputAtIndex(row * 2 + 1, lse);
        }
      }`,
  });
}

function backwardProgram(N: number, V: number): Program {
  return flatProgram({
    inputs: ['dy', 'z', 't', 'stats'],
    outputShape: [N, V],
    key: 'cl_token_logprob_bwd',
    uniforms: 'vocab : i32,',
    threads: ELEM_THREADS,
    code: `
      fn main(index : i32) {
        if (index < uniforms.size) {
          let row = index / uniforms.vocab;
          let v = index - row * uniforms.vocab;
          var g = -exp(z[index] - stats[row * 2 + 1]);
          if (v == t[row]) { g = g + 1.0; }
          setOutputAtIndex(index, dy[row] * g);
        }
      }`,
  });
}

let registered = false;

/** Registers both kernels with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuLogprob(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: FWD,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend }) => {
      const { z, t } = inputs as { z: tf.TensorInfo; t: tf.TensorInfo };
      const [N, V] = z.shape;
      return runProgram(backend, forwardProgram(N), [z, t], [{ type: 'int32', data: [V] }]);
    },
  });
  tf.registerKernel({
    kernelName: BWD,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend }) => {
      const { dy, z, t, stats } = inputs as { dy: tf.TensorInfo; z: tf.TensorInfo; t: tf.TensorInfo; stats: tf.TensorInfo };
      const [N, V] = z.shape;
      return runProgram(backend, backwardProgram(N, V), [dy, z, t, stats], [{ type: 'int32', data: [V] }]);
    },
  });
}

/** log softmax(logits)[n, targets[n]] for logits [N, V] and int32 targets [N], differentiable in the logits: the two kernels. */
export function tokenLogprobWebgpu(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [z, save] = args as [tf.Tensor2D, tf.GradSaveFunc];
    const stats = tf.engine().runKernel(FWD, { z, t: targets }) as tf.Tensor2D;
    // the targets too: they are no input of this op, and the forward scope would dispose them before the backward pass
    save([z, stats, targets]);
    const N = z.shape[0];
    return {
      value: tf.reshape(tf.slice(stats, [0, 0], [N, 1]), [N]) as tf.Tensor1D,
      gradFunc: (dy: tf.Tensor1D, [zs, st, ts]: tf.Tensor[]) => tf.engine().runKernel(BWD, { dy, z: zs, t: ts, stats: st }) as tf.Tensor2D,
    };
  });
  return op(logits);
}
