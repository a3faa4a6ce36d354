// A token's log-prob under the policy, log softmax(z)[target], and its gradient, as one native kernel each way
// (native/blas.c; backend wasm-blas).
//
// As ops, log-softmax + gather is a max, a subtract, an exp, a sum, a log and a subtract over [N, V] logits, a gather,
// and backward a scatter of the gather's gradient, an exp, a sum, a multiply and a subtract: about 30 ms of the small
// model's train step (bench/PROFILE.md). Here forward is one pass over the logits that keeps only the row's log-sum-exp
// [N], and backward one pass that writes dy·(onehot − softmax). The exp is Cephes' expf (about 1 ulp), so values
// differ from the ops' in float rounding: that is why it runs on wasm-blas only, and plain wasm keeps its bits.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { blasProducts, nativeLogprob, nativeLogprobGrad } from './blas';
import { Info, KernelArgs, WasmBackend, at32, heap32, sizeOf } from './heap';

export const TOKEN_LOGPROB = 'CreditLensTokenLogprob';
export const TOKEN_LOGPROB_GRAD = 'CreditLensTokenLogprobGrad';

/** Whether tokenLogprob runs here: the wasm-blas backend (the addon loaded, its products on). */
export function hasTokenLogprobKernel(): boolean {
  return tf.getBackend() === 'wasm' && blasProducts() && !!tf.getKernel(TOKEN_LOGPROB, 'wasm');
}

/** logits [N, V], targets [N] (int32) → log softmax(logits)[n, targets[n]] [N], differentiable in logits. */
export function tokenLogprob(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [z, save] = args as [tf.Tensor2D, tf.GradSaveFunc];
    const [logp, lse] = tf.engine().runKernel(TOKEN_LOGPROB, { logits: z, targets }) as unknown as tf.Tensor1D[];
    save([z, lse]);
    return {
      value: logp,
      gradFunc: (dy: tf.Tensor1D, [zz, l]: tf.Tensor[]) =>
        tf.engine().runKernel(TOKEN_LOGPROB_GRAD, { logits: zz, targets, lse: l, dy }) as tf.Tensor2D,
    };
  });
  return op(logits);
}

/** [N, V] and N from the inputs, after checking dtypes, shapes and that every target is a vocabulary index. */
function checked(be: WasmBackend, logits: Info, targets: Info, ...rows: (Info | undefined)[]): [number, number] {
  const [N, V] = logits.shape;
  const ok = logits.shape.length === 2 && logits.dtype === 'float32' && targets.dtype === 'int32' && sizeOf(targets.shape) === N
    && rows.every((r) => !r || (r.dtype === 'float32' && sizeOf(r.shape) === N));
  if (!ok) throw new Error(`${TOKEN_LOGPROB}: logits [${logits.shape}] (float32) and targets [${targets.shape}] (int32) do not fit`);
  const heap = heap32(be), tp = at32(be, targets);
  for (let n = 0; n < N; n++) {
    const t = heap[tp + n];
    if (t < 0 || t >= V) throw new Error(`${TOKEN_LOGPROB}: target ${t} at row ${n} is outside the vocabulary [0, ${V})`);
  }
  return [N, V];
}

export function tokenLogprobKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { logits, targets } = args.inputs as { logits: Info; targets: Info };
  const [N, V] = checked(be, logits, targets);
  const logp = be.makeOutput([N], 'float32');
  const lse = be.makeOutput([N], 'float32');
  nativeLogprob(be, at32(be, logits), at32(be, targets), N, V, at32(be, logp), at32(be, lse));
  return [logp, lse];
}

export function tokenLogprobGradKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { logits, targets, lse, dy } = args.inputs as { logits: Info; targets: Info; lse: Info; dy: Info };
  const [N, V] = checked(be, logits, targets, lse, dy);
  const out = be.makeOutput([N, V], 'float32');
  nativeLogprobGrad(be, at32(be, logits), at32(be, targets), at32(be, lse), at32(be, dy), at32(be, out), N, V);
  return out;
}
