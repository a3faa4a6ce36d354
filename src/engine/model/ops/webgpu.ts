// The webgpu backend's ops (tfjs-backend-webgpu on a Dawn adapter): the compositions run as tfjs's own WGSL kernels,
// except where this table has an op of ours. What the profile of a train step showed (bench/size.ts profileWebgpu):
// every host tensor a pass meets is an upload, so the model's constant tables stay on the device (keepTables), and
// RMSNorm has its gradient written out, because tfjs's Mean gradient builds a tensor of ones on the host
// ([rows, d], uploaded once per norm per step). A token's log-prob runs as two WGSL kernels (kernels/webgpu_logprob.ts):
// the fusion wasm-blas has natively, and without the float atomics of tfjs's gather gradient; attention's scores, mask
// and softmax as one kernel each way (kernels/webgpu_attention.ts).
import * as tf from '@tensorflow/tfjs';
import { attentionWebgpu, registerWebgpuAttention } from '../kernels/webgpu_attention';
import { registerWebgpuLogprob, tokenLogprobWebgpu } from '../kernels/webgpu_logprob';
import { adamWebgpu, registerWebgpuAdam } from '../kernels/webgpu_adam';
import type { BackendOps } from './ops';

/**
 * y = x·r·w with r = (mean(x²) + ε)^(−½), and its gradient in closed form: with g = dy·w,
 * dx = r·g − x·r³·mean(g·x) (the mean over the row), dw = Σ_rows dy·x·r. Every tensor stays on the device.
 */
export function rmsNormOnDevice(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [xx, ww, save] = args as [tf.Tensor2D, tf.Tensor1D, tf.GradSaveFunc];
    const r = tf.rsqrt(tf.add(tf.mean(tf.square(xx), -1, true), eps));
    save([xx, ww, r]);
    return {
      value: tf.mul(tf.mul(xx, r), ww) as tf.Tensor2D,
      gradFunc: (dy: tf.Tensor2D, [xs, ws, rs]: tf.Tensor[]) => {
        const g = tf.mul(dy, ws);
        const dx = tf.sub(tf.mul(g, rs), tf.mul(tf.mul(xs, tf.pow(rs, 3)), tf.mean(tf.mul(g, xs), -1, true)));
        const dw = tf.sum(tf.mul(tf.mul(dy, xs), rs), 0);
        return [dx, dw];
      },
    };
  });
  return op(x, w);
}

/**
 * The binding limit the device was granted (tfjs-backend-webgpu asks the adapter for its largest); WebGPU's default
 * of 128 MiB where the backend exposes no device.
 */
function grantedBindingBytes(): number {
  const device = (tf.findBackend('webgpu') as unknown as { device?: { limits?: { maxStorageBufferBindingSize?: number } } } | null)?.device;
  return device?.limits?.maxStorageBufferBindingSize ?? 128 * 2 ** 20;
}

export function webgpuOps(): BackendOps {
  return {
    name: 'webgpu',
    caps: { syncReads: false, keepTables: true, maxBindingBytes: grantedBindingBytes() },
    register: () => {
      registerWebgpuLogprob();
      registerWebgpuAttention();
      registerWebgpuAdam();
    },
    adamStep: adamWebgpu,
    ops: { rmsNorm: { run: rmsNormOnDevice }, tokenLogprob: { run: tokenLogprobWebgpu }, attention: { run: attentionWebgpu } },
  };
}
