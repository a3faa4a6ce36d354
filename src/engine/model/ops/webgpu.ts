// The webgpu backend's ops (tfjs-backend-webgpu on a Dawn adapter): the compositions run as tfjs's own WGSL kernels,
// except where this table has an op of ours. What the profile of a train step showed (bench/size.ts profileWebgpu):
// every host tensor a pass meets is an upload, so the model's constant tables stay on the device (keepTables), and
// RMSNorm had its gradient written out, because tfjs's Mean gradient builds a tensor of ones on the host
// ([rows, d], uploaded once per norm per step), and is now WGSL kernels of ours (kernels/webgpu_norm.ts: 2 dispatches each
// way where the composition took about 15), as are SwiGLU's element-wise chain (kernels/webgpu_swiglu.ts) and the heads' split and RoPE (kernels/webgpu_heads.ts). A token's log-prob runs as two WGSL kernels (kernels/webgpu_logprob.ts):
// the fusion wasm-blas has natively, and without the float atomics of tfjs's gather gradient; attention's scores, mask
// and softmax as one kernel each way (kernels/webgpu_attention.ts).
import * as tf from '@tensorflow/tfjs';
import { attentionWebgpu, registerWebgpuAttention } from '../kernels/webgpu_attention';
import { registerWebgpuLogprob, tokenLogprobWebgpu } from '../kernels/webgpu_logprob';
import { adamWebgpu, registerWebgpuAdam } from '../kernels/webgpu_adam';
import { registerWebgpuNorm, rmsNormInferWebgpu, rmsNormWebgpu } from '../kernels/webgpu_norm';
import { registerWebgpuSwiglu, swigluInferWebgpu, swigluWebgpu } from '../kernels/webgpu_swiglu';
import { headsWebgpu, registerWebgpuHeads } from '../kernels/webgpu_heads';
import { decodeAttentionWebgpu, registerWebgpuDecode } from '../kernels/webgpu_decode';
import { matMulAddWebgpu } from '../kernels/webgpu_matmul_add';
import { registerWebgpuSample, sampleRowsWebgpu } from '../kernels/webgpu_sample';
import { matMulHalfWebgpu, registerWebgpuMatMulHalf } from '../kernels/webgpu_matmul_half';
import { gatherHalfWebgpu, registerWebgpuGatherHalf } from '../kernels/webgpu_gather_half';
import type { BackendOps } from './ops';

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
    caps: { syncReads: false, keepTables: true, maxBindingBytes: grantedBindingBytes(), dropFinishedAt: 0.25, halfWeights: true },
    register: () => {
      registerWebgpuLogprob();
      registerWebgpuAttention();
      registerWebgpuAdam();
      registerWebgpuNorm();
      registerWebgpuSwiglu();
      registerWebgpuHeads();
      registerWebgpuDecode();
      registerWebgpuSample();
      registerWebgpuMatMulHalf();
      registerWebgpuGatherHalf();
    },
    adamStep: adamWebgpu,
    ops: {
      rmsNorm: { run: rmsNormWebgpu },
      rmsNormInfer: { run: rmsNormInferWebgpu },
      swiglu: { run: swigluWebgpu },
      swigluInfer: { run: swigluInferWebgpu },
      heads: { run: headsWebgpu },
      tokenLogprob: { run: tokenLogprobWebgpu },
      matMulAdd: { run: matMulAddWebgpu },
      matMulHalf: { run: matMulHalfWebgpu },
      gatherHalf: { run: gatherHalfWebgpu },
      sampleRows: { run: sampleRowsWebgpu },
      attention: { run: attentionWebgpu },
      // the uniform block holds four RoPE rows of hd floats
      decodeAttention: { run: decodeAttentionWebgpu, supports: (d) => d.headDim % 4 === 0 && d.headDim <= 1024 },
    },
  };
}
