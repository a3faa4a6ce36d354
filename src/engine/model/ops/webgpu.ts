// The webgpu backend's ops (tfjs-backend-webgpu on a Dawn adapter): the compositions run as tfjs's own WGSL kernels,
// except where this table has a fused kernel of ours.
import type { BackendOps } from './ops';

export function webgpuOps(): BackendOps {
  return { name: 'webgpu', ops: {} };
}
