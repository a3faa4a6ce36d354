// Adam on the webgpu backend: one WGSL dispatch per parameter that writes the first moment, the second moment and the
// parameter where they are, on the engine's own bind group (webgpu_own.ts), with β, 1 − β, the bias corrections, ε and
// the learning rate as uniforms. The op sequence (optim.ts applyOps) was about 13 kernels and 7 uploaded scalar tensors
// per parameter; a tfjs program, which writes one new tensor and reads its inputs read-only, took three (m, v, then p,
// each a new tensor the variable then took). The arithmetic is the op sequence's, in its order.
//
// Writing in place is right only where nothing else holds the buffer: tfjs shares one buffer between tensors made by
// clone or reshape (its refCount). Where p, m or v shares its buffer, the update is written to new tensors that the
// variables take (assign), and what shared the old buffers keeps the old values.
import * as tf from '@tensorflow/tfjs';
import type { AdamScalars } from './fused';
import { bufferHolders, dispatchOwn, packUniforms } from './webgpu_own';
import { registerProgramKernel } from './webgpu_program';

const KERNEL = 'ClAdamWebgpu';
const THREADS = 128;
/** workgroups along x before a dispatch uses y (WebGPU's maxComputeWorkgroupsPerDimension default) */
const MAX_X = 65535;

const CODE = `
struct U { n : i32, nx : i32, p0 : i32, p1 : i32, b1 : f32, c1 : f32, b2 : f32, c2 : f32, d1 : f32, d2 : f32, eps : f32, lr : f32 };
@group(0) @binding(0) var<storage, read_write> p : array<f32>;
@group(0) @binding(1) var<storage, read_write> m : array<f32>;
@group(0) @binding(2) var<storage, read_write> v : array<f32>;
@group(0) @binding(3) var<storage, read> g : array<f32>;
@group(0) @binding(4) var<uniform> u : U;
@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) li : u32) {
  let i = (i32(wg.y) * u.nx + i32(wg.x)) * ${THREADS} + i32(li);
  if (i >= u.n) { return; }
  let m1 = m[i] * u.b1 + g[i] * u.c1;
  let v1 = v[i] * u.b2 + (g[i] * g[i]) * u.c2;
  m[i] = m1;
  v[i] = v1;
  p[i] = p[i] - ((m1 / u.d1) / (sqrt(v1 / u.d2) + u.eps)) * u.lr;
}`;

let registered = false;

/** Registers the Adam kernel with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuAdam(): void {
  if (registered) return;
  registered = true;
  // a tfjs kernel returns a tensor: p itself, as Reshape returns its input (one more holder of its buffer)
  registerProgramKernel<AdamScalars>(KERNEL, (inputs, backend, a) => {
    const { p, m, v, g } = inputs;
    const n = p.shape.reduce((x, d) => x * d, 1);
    const groups = Math.ceil(n / THREADS);
    const nx = Math.min(groups, MAX_X);
    dispatchOwn(backend, {
      key: 'cl_adam',
      code: CODE,
      bindings: [p, m, v, g],
      writes: [0, 1, 2],
      uniforms: packUniforms([{ i32: [n, nx, 0, 0] }, { f32: [a.b1, a.c1, a.b2, a.c2, a.d1, a.d2, a.eps, a.lr] }]),
      workgroups: [nx, Math.ceil(groups / nx), 1],
    });
    (backend as unknown as { incRef(id: object): void }).incRef(p.dataId);
    return { dataId: p.dataId, shape: p.shape, dtype: p.dtype };
  });
}

/** One Adam update of p with gradient g and moments m, v, on webgpu, in place; false on any other backend. */
export function adamWebgpu(p: tf.Variable, g: tf.Tensor, m: tf.Variable, v: tf.Variable, s: AdamScalars): boolean {
  if (tf.getBackend() !== 'webgpu' || [p, g, m, v].some((t) => t.dtype !== 'float32')) return false;
  tf.tidy(() => {
    // a buffer another tensor holds is first copied into one of the variable's own (the copy made here is discarded)
    for (const t of [p, m, v]) if (bufferHolders(t) > 1) t.assign(tf.add(t, 0));
    tf.engine().runKernel(KERNEL, { p, m, v, g }, s as unknown as tf.NamedAttrMap);
  });
  return true;
}
