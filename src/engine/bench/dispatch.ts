// What a piece of work costs the webgpu backend, counted where the cost is paid and timed without tf.profile (which
// submits and maps a buffer after every kernel, so any time taken inside it is inflated):
// - dispatches: calls of GPUComputePassEncoder.dispatchWorkgroups, the real kernel launches (a Reshape launches none);
// - submits: GPUQueue.submit calls (tfjs-backend-webgpu submits every WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE dispatches);
// - uploads and downloads: the backend's uploadToGPU of host data and its getBufferData reads, with their bytes;
// - by kernel: each tf kernel called (its name as the engine registers it, e.g. BatchMatMul, Add, the engine's own
//   CausalAttention) with its calls and the dispatches made inside it; a kernel forwarded to the CPU
//   (WEBGPU_CPU_FORWARD) or a view (Reshape) shows calls and no dispatch;
// - wall time: the work, a final submit and the queue's onSubmittedWorkDone, nothing else.
// The counts are the same on any adapter, so lavapipe here measures what an H200 would dispatch.
import * as tf from '@tensorflow/tfjs';

export interface KernelCount {
  calls: number;
  dispatches: number;
}

export interface DispatchCount {
  dispatches: number;
  submits: number;
  /** tf kernels run (each engine.runKernel), whether they dispatched or not */
  kernels: number;
  uploads: { count: number; mb: number };
  downloads: { count: number; mb: number };
  /** dispatches and calls by tf kernel name, the largest dispatch count first */
  by_kernel: Record<string, KernelCount>;
  ms: number;
}

interface GpuLike {
  createCommandEncoder(): { beginComputePass(d?: object): { end(): void }; finish(): unknown };
  queue: { submit(b: unknown[]): void; onSubmittedWorkDone(): Promise<void> };
}

interface WebgpuBackendLike {
  device: GpuLike;
  commandEncoder: unknown;
  tensorMap: { get(id: unknown): { values?: unknown; resource?: unknown; shape: number[] } | undefined };
  uploadToGPU(id: unknown): void;
  getBufferData(buf: { size: number }): Promise<ArrayBuffer>;
  submitQueue(): void;
  endComputePassEncoder(): void;
}

interface EngineLike {
  runKernelFunc(p: { kernelName?: string }): unknown;
}

interface Tally {
  byKernel: Map<string, KernelCount>;
  dispatches: number;
  submits: number;
  kernels: number;
  up: { count: number; bytes: number };
  down: { count: number; bytes: number };
}

/**
 * Wraps the backend where its costs are paid, counting into a new tally: the compute pass's dispatchWorkgroups (on its
 * prototype, reached through a pass that records nothing), the queue's submit, the engine's runKernelFunc (the kernel
 * name a launch is attributed to) and the backend's upload and read paths. `restore` puts every one back.
 */
function installCounters(be: WebgpuBackendLike, engine: EngineLike): { tally: Tally; restore(): void } {
  const probeEncoder = be.device.createCommandEncoder();
  const probePass = probeEncoder.beginComputePass();
  const passProto = Object.getPrototypeOf(probePass) as { dispatchWorkgroups(...a: number[]): void };
  probePass.end();
  probeEncoder.finish();
  const queueProto = Object.getPrototypeOf(be.device.queue) as { submit(b: unknown[]): void };
  const tally: Tally = { byKernel: new Map(), dispatches: 0, submits: 0, kernels: 0, up: { count: 0, bytes: 0 }, down: { count: 0, bytes: 0 } };
  const entry = (name: string) => {
    let e = tally.byKernel.get(name);
    if (!e) tally.byKernel.set(name, (e = { calls: 0, dispatches: 0 }));
    return e;
  };
  const stack: string[] = [];
  const dispatch = passProto.dispatchWorkgroups;
  const submit = queueProto.submit;
  const runKernelFunc = engine.runKernelFunc;
  const upload = be.uploadToGPU;
  const getData = be.getBufferData;
  passProto.dispatchWorkgroups = function (this: unknown, ...a: number[]) {
    tally.dispatches++;
    entry(stack.at(-1) ?? '(outside a kernel)').dispatches++;
    return dispatch.apply(this, a);
  };
  queueProto.submit = function (this: unknown, b: unknown[]) {
    tally.submits++;
    return submit.call(this, b);
  };
  engine.runKernelFunc = function (this: EngineLike, p: { kernelName?: string }) {
    const name = p.kernelName ?? '(custom op)';
    tally.kernels++;
    entry(name).calls++;
    stack.push(name);
    try {
      return runKernelFunc.call(this, p);
    } finally {
      stack.pop();
    }
  };
  be.uploadToGPU = function (this: WebgpuBackendLike, id: unknown) {
    const t = be.tensorMap.get(id);
    if (t && t.values && t.resource == null) {
      tally.up.count++;
      tally.up.bytes += 4 * t.shape.reduce((a, d) => a * d, 1);
    }
    return upload.call(this, id);
  };
  be.getBufferData = function (this: WebgpuBackendLike, buf: { size: number }) {
    tally.down.count++;
    tally.down.bytes += buf.size;
    return getData.call(this, buf);
  };
  return {
    tally,
    restore() {
      passProto.dispatchWorkgroups = dispatch;
      queueProto.submit = submit;
      engine.runKernelFunc = runKernelFunc;
      be.uploadToGPU = upload;
      be.getBufferData = getData;
    },
  };
}

/** Runs `fn` on the webgpu backend with every dispatch, submit, upload and download counted, each wrapper put back after. */
export async function countDispatches(fn: () => Promise<void>): Promise<DispatchCount> {
  const be = tf.backend() as unknown as WebgpuBackendLike;
  if (typeof be.submitQueue !== 'function' || !be.device) throw new Error('countDispatches: the active backend is not webgpu');
  // what the backend has recorded and not submitted: its open pass ended, then submitted (as its own reads do)
  const flush = () => {
    if (!be.commandEncoder) return;
    be.endComputePassEncoder();
    be.submitQueue();
  };
  // anything queued before the call is the caller's, not the work's
  flush();
  await be.device.queue.onSubmittedWorkDone();
  const { tally, restore } = installCounters(be, tf.engine() as unknown as EngineLike);
  try {
    const t0 = performance.now();
    await fn();
    flush();
    await be.device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0;
    return {
      dispatches: tally.dispatches,
      submits: tally.submits,
      kernels: tally.kernels,
      uploads: { count: tally.up.count, mb: tally.up.bytes / 2 ** 20 },
      downloads: { count: tally.down.count, mb: tally.down.bytes / 2 ** 20 },
      by_kernel: byDispatches([...tally.byKernel]),
      ms,
    };
  } finally {
    restore();
  }
}

/** Kernel counts as a record, the most dispatches first (then the most calls). */
function byDispatches(entries: [string, KernelCount][]): Record<string, KernelCount> {
  return Object.fromEntries(entries.sort(([, a], [, b]) => b.dispatches - a.dispatches || b.calls - a.calls));
}

/** The first `n` kernels of a count by dispatches, as "BatchMatMul 412, Add 380, …" for a log line. */
export function topKernels(c: DispatchCount, n = 8): string {
  return Object.entries(c.by_kernel)
    .slice(0, n)
    .map(([k, v]) => `${k} ${v.dispatches}`)
    .join(', ');
}

/**
 * One decode step's count: sampling `n + 1` new tokens minus sampling `n` (after the same prefill), by kernel too, so the
 * prompt's prefill cancels and what is left is what each further token costs.
 */
export async function decodeStepCount(run: (newTokens: number) => Promise<void>, n = 2): Promise<DispatchCount> {
  await run(n); // shaders compiled, buffers pooled: the counts below are steady state
  const a = await countDispatches(() => run(n));
  const b = await countDispatches(() => run(n + 1));
  const by: [string, KernelCount][] = Object.entries(b.by_kernel).map(([k, v]) => {
    const was = a.by_kernel[k] ?? { calls: 0, dispatches: 0 };
    return [k, { calls: v.calls - was.calls, dispatches: v.dispatches - was.dispatches }];
  });
  const less = (x: { count: number; mb: number }, y: { count: number; mb: number }) => ({ count: x.count - y.count, mb: x.mb - y.mb });
  return {
    dispatches: b.dispatches - a.dispatches,
    submits: b.submits - a.submits,
    kernels: b.kernels - a.kernels,
    uploads: less(b.uploads, a.uploads),
    downloads: less(b.downloads, a.downloads),
    by_kernel: byDispatches(by.filter(([, d]) => d.calls || d.dispatches)),
    ms: b.ms - a.ms,
  };
}
