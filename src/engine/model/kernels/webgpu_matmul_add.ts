// a·w + add on webgpu in one dispatch: tfjs's fused product adds its `bias` in the epilogue of the WGSL matmul, and a
// bias of the output's full shape is the residual stream. Under a gradient tape the gradient is written out here, as the
// composition's: tfjs's own fused gradient reduces the bias over the batch axis it adds ([1, N, n]), a Sum dispatch per
// residual where the add's gradient is the upstream gradient itself.
import * as tf from '@tensorflow/tfjs';

const fused = (a: tf.Tensor2D, w: tf.Tensor2D, add: tf.Tensor) => tf.fused.matMul({ a, b: w, bias: add }) as tf.Tensor2D;

export function matMulAddWebgpu(a: tf.Tensor2D, w: tf.Tensor2D, add: tf.Tensor): tf.Tensor2D {
  if (!tf.engine().isTapeOn()) return fused(a, w, add);
  const rank = add.rank;
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [x, y, z, save] = args as [tf.Tensor2D, tf.Tensor2D, tf.Tensor, tf.GradSaveFunc];
    save([x, y]);
    return {
      value: fused(x, y, z),
      // tf.matMul's gradient, and the add's: the upstream gradient, summed over the rows for a bias
      gradFunc: (dy: tf.Tensor2D, [xs, ys]: tf.Tensor[]) => [
        tf.matMul(dy, ys as tf.Tensor2D, false, true),
        tf.matMul(xs as tf.Tensor2D, dy, true, false),
        rank === 1 ? tf.sum(dy, 0) : dy,
      ],
    };
  });
  return op(a, w, add) as tf.Tensor2D;
}
