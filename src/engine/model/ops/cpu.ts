// The cpu backend's ops: the compositions, but for the head split. The cpu backend slices a non-leading axis element
// by element (~0.3 µs each); transposing the head axis to the front and back costs ~10× less than that.
import * as tf from '@tensorflow/tfjs';
import { composedHeads, gatherRotate, type SplitHeads } from './composed';
import { HOST_CAPS, type BackendOps } from './ops';

const splitLeading: SplitHeads = (x, sizes) => tf.split(tf.transpose(x, [1, 0, 2, 3]), sizes, 0).map((p) => tf.transpose(p, [1, 0, 2, 3]) as tf.Tensor4D);

export const CPU_OPS: BackendOps = { name: 'cpu', caps: HOST_CAPS, ops: { heads: { run: composedHeads(gatherRotate, splitLeading) } } };
