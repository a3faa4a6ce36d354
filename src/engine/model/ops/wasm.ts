// The wasm backend's ops (tfjs-backend-wasm with our kernels, kernels/): the SIMD loops for RoPE, SwiGLU and the
// decode step, one pass for RMSNorm where no gradient is taken. Each SIMD op needs a runtime with WebAssembly SIMD.
import * as tf from '@tensorflow/tfjs';
import { DECODE_ATTENTION, decodeAttention } from '../kernels/decode_attention';
import { adamInPlace, ropeRotate, rmsNormInfer, swiglu, swigluGrad, SWIGLU, SWIGLU_GRAD } from '../kernels/fused';
import { hasSimd } from '../kernels/simd';
import { registerWasmKernels } from '../kernels/wasm_kernels';
import { composedHeads, splitOnHeads } from './composed';
import { HOST_CAPS, type BackendOps, type ModelOps } from './ops';

/** swiglu / swigluInfer on a kernel pair (the SIMD loops here, the native ones on wasm-blas): one kernel each way. */
export function fusedSwiglu(fwd: string, bwd: string): Pick<ModelOps, 'swiglu' | 'swigluInfer'> {
  return {
    swiglu: (gu) => {
      const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
        const [v, save] = args as [tf.Tensor2D, tf.GradSaveFunc];
        const { act, sig } = swiglu(v, fwd);
        save([v, sig]);
        return { value: act, gradFunc: (dy: tf.Tensor2D, [g, s]: tf.Tensor[]) => swigluGrad(g as tf.Tensor2D, s as tf.Tensor2D, dy, bwd) };
      });
      return op(gu);
    },
    swigluInfer: (gu) => {
      // no gradient scope in the decode step: σ(gate), kept only for the backward pass, is dropped at once
      const { act, sig } = swiglu(gu, fwd);
      sig.dispose();
      return act;
    },
  };
}

/** The SIMD loops take F, half a head and the head in multiples of 4, 4 and 4 lanes. */
const swigluFits = ({ dFf }: { dFf: number }) => dFf % 4 === 0;

export function wasmOps(): BackendOps {
  const simd = hasSimd();
  const { swiglu: train, swigluInfer: infer } = fusedSwiglu(SWIGLU, SWIGLU_GRAD);
  return {
    name: simd ? 'wasm' : 'wasm (no SIMD)',
    caps: HOST_CAPS,
    // our kernels replace and add to tfjs-backend-wasm's before it starts (kernels/wasm_kernels.ts)
    register: registerWasmKernels,
    adamStep: adamInPlace,
    ops: {
      rmsNormInfer: { run: rmsNormInfer },
      ...(simd
        ? {
            swiglu: { run: train, supports: swigluFits },
            swigluInfer: { run: infer, supports: swigluFits },
            heads: { run: composedHeads(ropeRotate, splitOnHeads), supports: ({ headDim }) => headDim % 8 === 0 },
            decodeAttention: {
              run: (qkv, k, v, m, attrs) => decodeAttention(qkv, k, v, m, attrs, DECODE_ATTENTION),
              supports: ({ headDim }) => headDim % 4 === 0,
            },
          }
        : {}),
    },
  };
}
