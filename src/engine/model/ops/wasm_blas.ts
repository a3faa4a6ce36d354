// The wasm-blas backend's ops: tfjs-backend-wasm with its products on OpenBLAS and the fused kernels in native code
// (native/, kernels/native.ts), forward and backward: RMSNorm, SwiGLU, the attention heads with RoPE, a token's log-prob
// and the decode step. (Attention over a sequence is the composition here: see WASM_BLAS_ALTERNATIVES.) Their values differ from the ops' in float rounding, which is why
// plain wasm keeps its own table and its bits.
import { DECODE_ATTENTION_NATIVE, decodeAttention } from '../kernels/decode_attention';
import { attention, qkvHeads, rmsNormNative, rmsNormNativeInfer, SWIGLU_NATIVE, SWIGLU_NATIVE_GRAD, tokenLogprob } from '../kernels/native';
import { hasSimd } from '../kernels/simd';
import { adamInPlace } from '../kernels/fused';
import { HOST_CAPS, type BackendOps } from './ops';
import { fusedSwiglu } from './wasm';
import { registerWasmKernels } from '../kernels/wasm_kernels';

/**
 * Native ops the bench measures but the table does not run (bench/PROFILE.md says why): src/engine/bench/ops_tiers.ts times each
 * against the table, so the decision can be re-measured on another host.
 */
export const WASM_BLAS_ALTERNATIVES: BackendOps['ops'] = { attention: { run: attention } };

export function wasmBlasOps(): BackendOps {
  const { swiglu, swigluInfer } = fusedSwiglu(SWIGLU_NATIVE, SWIGLU_NATIVE_GRAD);
  // The native SwiGLU takes any even width; it has kept the SIMD route's limits (a multiple of 4, a SIMD runtime) so
  // that the sizes that run it, and their bits, stay those of earlier runs.
  const swigluFits = ({ dFf }: { dFf: number }) => dFf % 4 === 0 && hasSimd();
  return {
    name: 'wasm-blas',
    caps: HOST_CAPS,
    register: registerWasmKernels,
    adamStep: adamInPlace,
    ops: {
      rmsNorm: { run: rmsNormNative },
      rmsNormInfer: { run: rmsNormNativeInfer },
      swiglu: { run: swiglu, supports: swigluFits },
      swigluInfer: { run: swigluInfer, supports: swigluFits },
      heads: { run: qkvHeads },
      // attention over a sequence runs as the composition (tfjs's batched products on OpenBLAS): 2.8× faster in the
      // step on this host than the native kernel (bench/PROFILE.md), which WASM_BLAS_ALTERNATIVES keeps
      tokenLogprob: { run: tokenLogprob },
      // the decode kernel scores 4 keys at a time; the in-place cache exists where WebAssembly SIMD does
      decodeAttention: {
        run: (qkv, k, v, m, attrs) => decodeAttention(qkv, k, v, m, attrs, DECODE_ATTENTION_NATIVE),
        supports: ({ headDim }) => headDim % 4 === 0 && hasSimd(),
      },
    },
  };
}
