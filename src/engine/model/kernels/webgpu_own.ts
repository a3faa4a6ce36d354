// A dispatch of ours on tfjs-backend-webgpu's device, queue and compute pass, with our own bind group. tfjs's programs
// bind one output read_write and every input read-only, so a kernel that writes into buffers it is handed (the decode
// step's KV cache, written in place; the sampler's record and next ids) cannot be one of them. This records such a
// kernel into the same compute pass tfjs records into, in order with its work, and keeps the backend's bookkeeping as
// recordAndSubmit does: the bound tensors are marked as owned by the queue (so a dispose waits for the submit), the
// uniform buffer goes back to the pool after it, and the pass is submitted every WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE
// dispatches. Pipelines are compiled once per key.
import * as tf from '@tensorflow/tfjs';

// The few WebGPU objects used here, structurally (the engine's types are Node's, without the DOM's GPU ones).
type GPUBuffer = object;
interface GPUComputePipeline {
  getBindGroupLayout(i: number): object;
}
interface GPUComputePassEncoder {
  setPipeline(p: GPUComputePipeline): void;
  setBindGroup(i: number, g: object): void;
  dispatchWorkgroups(x: number, y?: number, z?: number): void;
}
interface GPUCommandEncoder {
  beginComputePass(d: object): GPUComputePassEncoder;
}
interface GPUQueue {
  writeBuffer(b: GPUBuffer, offset: number, data: ArrayBuffer, dataOffset: number, size: number): void;
}
type GPUBindGroupEntry = { binding: number; resource: { buffer: GPUBuffer; size?: number } };
interface GPUDevice {
  createComputePipeline(d: { layout: 'auto'; compute: { module: object; entryPoint: string } }): GPUComputePipeline;
  createShaderModule(d: { code: string }): object;
  createBindGroup(d: { layout: object; entries: GPUBindGroupEntry[] }): object;
}
/** The globals Dawn's module set (model/webgpu.ts): buffer usages and the buffer class. */
const gpuGlobals = () => globalThis as unknown as { GPUBufferUsage: { COPY_DST: number; UNIFORM: number }; GPUBuffer: new () => object };

/** The parts of tfjs-backend-webgpu 4.22's WebGPUBackend this file uses (its fields are not exported types). */
interface WebgpuInternals {
  device: GPUDevice;
  queue: GPUQueue;
  commandEncoder: GPUCommandEncoder | null;
  computePassEncoder: GPUComputePassEncoder | null;
  dispatchCountInPass: number;
  commandQueueOwnedIds: WeakSet<object>;
  uniformPendingDisposal: GPUBuffer[];
  bufferManager: { acquireBuffer(size: number, usage: number): GPUBuffer };
  tensorMap: { get(dataId: object): { resource: unknown; values: unknown; refCount: number } | undefined };
  uploadToGPU(dataId: object): void;
  makeTensorInfo(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  ensureCommandEncoderReady(): void;
  endComputePassEncoder(): void;
  submitQueue(): void;
}

const pipelines = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

function internals(backend: unknown): WebgpuInternals {
  const be = backend as WebgpuInternals;
  if (!be?.device || typeof be.ensureCommandEncoderReady !== 'function') throw new Error('webgpu_own: not the webgpu backend');
  return be;
}

/**
 * How many tensors hold t's buffer (tfjs shares one between tensors made by clone or reshape): a kernel may write it in
 * place only where this is 1.
 */
export function bufferHolders(t: tf.TensorInfo): number {
  return internals(tf.backend()).tensorMap.get(t.dataId)?.refCount ?? 1;
}

/** A new tensor's buffer on the device, for a kernel of ours to write (makeTensorInfo plus its allocation). */
export function newOutput(backend: unknown, shape: number[], dtype: 'float32' | 'int32' = 'float32'): tf.TensorInfo {
  const be = internals(backend);
  const t = be.makeTensorInfo(shape, dtype);
  be.uploadToGPU(t.dataId);
  return t;
}

/**
 * Records one dispatch of `code` (WGSL whose bindings are the tensors in order, then the uniform buffer) with `workgroups`
 * workgroups. `writes` are the indices of the bindings it writes. `key` names the compiled pipeline (it must change
 * whenever `code` does).
 */
export function dispatchOwn(
  backend: unknown,
  o: { key: string; code: string; bindings: tf.TensorInfo[]; writes: number[]; uniforms: ArrayBuffer; workgroups: [number, number, number] },
): void {
  const be = internals(backend);
  const device = be.device;
  let byKey = pipelines.get(device);
  if (!byKey) pipelines.set(device, (byKey = new Map()));
  let pipeline = byKey.get(o.key);
  if (!pipeline) {
    pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: o.code }), entryPoint: 'main' } });
    byKey.set(o.key, pipeline);
  }
  const entries: GPUBindGroupEntry[] = o.bindings.map((b, i) => {
    be.uploadToGPU(b.dataId);
    const data = be.tensorMap.get(b.dataId);
    // the backend keeps a tensor's values on the host once read, and answers later reads from them: a buffer written
    // here must be read anew
    if (data && o.writes.includes(i)) data.values = null;
    const resource = data?.resource;
    if (!(resource instanceof gpuGlobals().GPUBuffer)) throw new Error(`webgpu_own ${o.key}: binding ${i} is not a buffer`);
    return { binding: i, resource: { buffer: resource as GPUBuffer } };
  });
  // uniform buffers are bound in multiples of 16 bytes
  const size = Math.ceil(o.uniforms.byteLength / 16) * 16;
  const uniform = be.bufferManager.acquireBuffer(size, gpuGlobals().GPUBufferUsage.COPY_DST | gpuGlobals().GPUBufferUsage.UNIFORM);
  be.queue.writeBuffer(uniform, 0, o.uniforms, 0, o.uniforms.byteLength);
  be.uniformPendingDisposal.push(uniform);
  entries.push({ binding: o.bindings.length, resource: { buffer: uniform, size } });
  const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
  for (const b of o.bindings) be.commandQueueOwnedIds.add(b.dataId);
  be.ensureCommandEncoderReady();
  if (!be.computePassEncoder) be.computePassEncoder = be.commandEncoder!.beginComputePass({});
  be.computePassEncoder.setPipeline(pipeline);
  be.computePassEncoder.setBindGroup(0, bindGroup);
  be.computePassEncoder.dispatchWorkgroups(...o.workgroups);
  be.dispatchCountInPass++;
  if ((tf.env().get('WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE') as number) <= be.dispatchCountInPass) {
    be.endComputePassEncoder();
    be.submitQueue();
  }
}

/** A uniform block from 32-bit fields in order: integers as i32, the rest as f32 (WGSL's scalars pack at 4 bytes). */
export function packUniforms(fields: { i32?: number[]; f32?: ArrayLike<number> }[]): ArrayBuffer {
  const n = fields.reduce((a, f) => a + (f.i32?.length ?? 0) + (f.f32?.length ?? 0), 0);
  const buf = new ArrayBuffer(Math.ceil((n * 4) / 16) * 16);
  const i32 = new Int32Array(buf);
  const f32 = new Float32Array(buf);
  let at = 0;
  for (const f of fields) {
    if (f.i32) for (const v of f.i32) i32[at++] = v;
    if (f.f32) for (let i = 0; i < f.f32.length; i++) f32[at++] = f.f32[i];
  }
  return buf;
}
