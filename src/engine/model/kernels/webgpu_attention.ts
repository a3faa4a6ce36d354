// Attention's row-wise part as two WGSL kernels for the webgpu backend, the fusion wasm-blas has in native code:
//   forward   one workgroup per query row (b, h, i): the scores q·kⱼ (q arrives scaled: the RoPE tables fold 1/√hd
//             into it), the additive mask, and the softmax, by tree reductions in workgroup memory, written as the
//             probabilities P [B, H, T, Tk]; the scores themselves are never stored
//   backward  one workgroup per row: dS = P ⊙ (dP − Σⱼ dPⱼ·Pⱼ)
// in place of tfjs's product, add and softmax (and the softmax's gradient: product, sum, subtract, product). The
// products around them (P·V, and dP, dQ, dK, dV) stay tfjs's tiled matMul. Grouped-query attention: query head h reads
// kv head ⌊h / (H / Hkv)⌋ (HF repeat_kv order).
import * as tf from '@tensorflow/tfjs';
import { flatProgram, runProgram, workgroupReductions, type Program } from './webgpu_program';

const FWD = 'ClAttentionProbsWebgpu';
const BWD = 'ClSoftmaxGradWebgpu';
const THREADS = 64;

function probsProgram(B: number, H: number, T: number, Tk: number): Program {
  return flatProgram({
    inputs: ['q', 'k', 'mask'],
    outputShape: [B, H, T, Tk],
    key: 'cl_attention_probs',
    uniforms: 'heads : i32, kvHeads : i32, queries : i32, keys : i32, headDim : i32,',
    threads: THREADS,
    workgroups: B * H * T,
    code: `
      ${workgroupReductions(THREADS)}
      fn main(index : i32) {
        let row = index / ${THREADS};
        let lane = i32(localId.x);
        let T = uniforms.queries;
        let Tk = uniforms.keys;
        let hd = uniforms.headDim;
        let i = row % T;
        let h = (row / T) % uniforms.heads;
        let b = row / (T * uniforms.heads);
        let kvh = h / (uniforms.heads / uniforms.kvHeads);
        let qBase = row * hd;
        let kBase = (b * uniforms.kvHeads + kvh) * Tk * hd;
        let mBase = (b * T + i) * Tk;
        let oBase = row * Tk;
        var m = -3.402823e38;
        for (var j = lane; j < Tk; j = j + ${THREADS}) {
          var s = 0.0;
          for (var c = 0; c < hd; c = c + 1) { s = s + q[qBase + c] * k[kBase + j * hd + c]; }
          s = s + mask[mBase + j];
          setOutputAtIndex(oBase + j, s);
          m = max(m, s);
        }
        let mx = reduceMax(m, lane);
        var acc = 0.0;
        for (var j = lane; j < Tk; j = j + ${THREADS}) {
          let e = exp(result[oBase + j] - mx);
          setOutputAtIndex(oBase + j, e);
          acc = acc + e;
        }
        let total = reduceSum(acc, lane);
        for (var j = lane; j < Tk; j = j + ${THREADS}) {
          setOutputAtIndex(oBase + j, result[oBase + j] / total);
        }
      }`,
  });
}

function softmaxGradProgram(rows: number, Tk: number): Program {
  return flatProgram({
    inputs: ['p', 'dp'],
    outputShape: [rows, Tk],
    key: 'cl_softmax_grad',
    uniforms: 'keys : i32,',
    threads: THREADS,
    workgroups: rows,
    code: `
      ${workgroupReductions(THREADS)}
      fn main(index : i32) {
        let row = index / ${THREADS};
        let lane = i32(localId.x);
        let Tk = uniforms.keys;
        let base = row * Tk;
        var acc = 0.0;
        for (var j = lane; j < Tk; j = j + ${THREADS}) { acc = acc + dp[base + j] * p[base + j]; }
        let d = reduceSum(acc, lane);
        for (var j = lane; j < Tk; j = j + ${THREADS}) {
          setOutputAtIndex(base + j, p[base + j] * (dp[base + j] - d));
        }
      }`,
  });
}

let registered = false;

/** Registers the attention kernels with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuAttention(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: FWD,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend }) => {
      const { q, k, mask } = inputs as { q: tf.TensorInfo; k: tf.TensorInfo; mask: tf.TensorInfo };
      const [B, H, T, hd] = q.shape;
      const [, Hkv, Tk] = k.shape;
      return runProgram(
        backend,
        probsProgram(B, H, T, Tk),
        [q, k, mask],
        [
          { type: 'int32', data: [H] },
          { type: 'int32', data: [Hkv] },
          { type: 'int32', data: [T] },
          { type: 'int32', data: [Tk] },
          { type: 'int32', data: [hd] },
        ],
      );
    },
  });
  tf.registerKernel({
    kernelName: BWD,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend }) => {
      const { p, dp } = inputs as { p: tf.TensorInfo; dp: tf.TensorInfo };
      const Tk = p.shape[p.shape.length - 1];
      const rows = p.shape.reduce((a, d) => a * d, 1) / Tk;
      return runProgram(backend, softmaxGradProgram(rows, Tk), [p, dp], [{ type: 'int32', data: [Tk] }]);
    },
  });
}

/**
 * softmax(q·kᵀ + mask)·v for q [B, H, T, hd] (scaled), k and v [B, Hkv, Tk, hd], the additive mask [B, 1, T, Tk]: the
 * context [B·T, H·hd] and the probabilities [B, H, T, Tk], as ModelOps.attention; the probabilities by the two kernels.
 */
export function attentionWebgpu(q: tf.Tensor4D, k: tf.Tensor4D, v: tf.Tensor4D, mask: tf.Tensor4D): { context: tf.Tensor2D; probs: tf.Tensor4D } {
  const [B, H, T, hd] = q.shape;
  const [, Hkv, Tk] = k.shape;
  const rep = H / Hkv;
  const probsOf = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [qq, kk, save] = args as [tf.Tensor4D, tf.Tensor4D, tf.GradSaveFunc];
    const p = tf.engine().runKernel(FWD, { q: qq, k: kk, mask }) as tf.Tensor4D;
    save([qq, kk, p]);
    return {
      value: p,
      gradFunc: (dp: tf.Tensor4D, [qs, ks, ps]: tf.Tensor[]) => {
        const ds = (tf.engine().runKernel(BWD, { p: ps, dp }) as tf.Tensor4D).reshape([B, Hkv, rep * T, Tk]) as tf.Tensor4D;
        // dq = dS·k, dk = dSᵀ·q, with the query heads of a kv head lined up as in the composition
        const dq = tf.matMul(ds, ks).reshape([B, H, T, hd]);
        const dk = tf.matMul(ds, qs.reshape([B, Hkv, rep * T, hd]), true, false);
        return [dq, dk];
      },
    };
  });
  const probs = probsOf(q, k) as tf.Tensor4D;
  const ctx = tf.matMul(probs.reshape([B, Hkv, rep * T, Tk]) as tf.Tensor4D, v);
  return { context: tf.transpose(ctx.reshape([B, H, T, hd]), [0, 2, 1, 3]).reshape([B * T, H * hd]) as tf.Tensor2D, probs };
}
