// A helper thread on the second core for large products: the product is cut into chunks that both threads claim
// from opposite ends of a shared counter. The worker runs blockedGemm from its source text, so everything it
// calls is passed in as a parameter.
import '@tensorflow/tfjs-backend-wasm';

import { WasmBackend, heapF32 } from './heap';
import { HELPER_MAX_PAGES, SimdLoops, blockedGemm, gemmBlocks, gemmScratch, simdGemm, simdModule } from './simd';

// ---- A helper thread for large products ------------------------------------------------------------------
//
// The backend's memory cannot be shared (tfjs ships its threaded binary for browsers only), so a large product
// is cut into chunks of C's rows (or columns) and shared with a worker thread that runs the same SIMD loop on
// copies of its operands in a shared memory. The worker may take chunks from the back half only — the half whose
// operands were copied — claiming downwards while this thread claims upwards from the front, in place; whatever
// the worker has not claimed when this thread gets there, this thread computes itself. So a worker that the OS
// does not schedule (the machine is busy) costs only the copies, and a running one halves the time. The copies
// cost O(M·K + K·N + M·N) against O(M·K·N)/2 saved (see PARALLEL_MIN_MACS). PyTorch's reference uses both cores
// as well.

export interface Helper {
  worker: import('node:worker_threads').Worker;
  memory: WebAssembly.Memory;
  /** the job, see HELPER_SOURCE; [0] is the state: 0 idle, 1 job posted, 2 exit */
  ctrl: Int32Array;
  failed: boolean;
}
let helper: Helper | null | undefined;
/**
 * The share of recent products' chunks the worker computed (moving average). On a busy machine the worker may
 * hardly run, and then the copies are pure cost: below HELPER_MIN_SHARE the next HELPER_BACKOFF products stay on
 * this thread before the worker is tried again.
 */
let helperShare = 0.5,
  helperSkip = 0;
export const HELPER_MIN_SHARE = 0.15,
  HELPER_BACKOFF = 64;
export const helperStats = { products: 0, chunks: 0, workerChunks: 0, byRows: 0, uneven: 0 };
/**
 * Products shared with the helper thread so far (of them split by rows), their chunks, how many of those the
 * worker computed, and in how many products the worker did part of its half (this thread took the rest).
 */
export function helperThreadStats(): typeof helperStats {
  return { ...helperStats };
}
/**
 * Products of at least this many multiply-adds are shared. Measured on the reference model (2 idle cores): every
 * dense product of a training step (≥ 2²⁴ at batch·seq 2048) gets 1.6–1.9× faster; the decode step's (≤ 2²³ at 64
 * rows) got slower overall, the copies and the wake-up eating the halved compute.
 */
export const PARALLEL_MIN_MACS = 1 << 24;
let parallelMinMacs = PARALLEL_MIN_MACS;
/** Bench / test hook: products of at least this many multiply-adds are shared with the helper thread. */
export function setParallelMinMacs(n: number): void {
  parallelMinMacs = n;
}
let sequenced = 0;
/**
 * Test hook: with n > 0 the worker takes at most n chunks and this thread starts only once it is done, so which
 * chunks come back from the worker is deterministic; 0 restores the race.
 */
export function setHelperSequenced(n: number): void {
  sequenced = n;
}

// ctrl layout (Int32): 0 state, 1 claims (next chunk from the front | end of the unclaimed range << 16),
// 2 by rows (1) or columns (0), 3 chunk count, 4 chunk unit (rows or columns), 5 first chunk the worker may take,
// 6–8 a, b, c (float offsets of the copies), 9–11 M, K, N of the copy (its own rows or columns), 12 scratch,
// 13–14 blocks K, N, 15 error flag, 16 most chunks the worker may take (0: no limit; a test hook).
export const CTRL_WORDS = 17;

/** [start, end) of chunk i of `count` chunks of `unit` over `size`; the last one takes the remainder. */
export function chunkBounds(i: number, count: number, unit: number, size: number): number[] {
  return [i * unit, i === count - 1 ? size : (i + 1) * unit];
}

/**
 * Claims the next unclaimed chunk from the front (this thread: floor 0) or from the back (the worker: not below
 * `floor`, the first chunk it has copies for); −1 when there is none for the caller.
 */
export function claimChunk(ctrl: Int32Array, fromBack: boolean, floor: number): number {
  for (;;) {
    const cur = Atomics.load(ctrl, 1);
    const lo = cur & 0xffff,
      hi = cur >>> 16;
    if (lo >= hi || (fromBack && hi - 1 < floor)) return -1;
    const next = fromBack ? lo | ((hi - 1) << 16) : (lo + 1) | (hi << 16);
    if (Atomics.compareExchange(ctrl, 1, cur, next) === cur) return fromBack ? hi - 1 : lo;
  }
}

/** The worker's side of one job: claim chunks from the back (not below ctrl[5]) and compute them on the copies. */
export function helperJob(
  gemm: SimdLoops['gemm'],
  heap: Int32Array,
  ctrl: Int32Array,
  blocked: typeof blockedGemm,
  claim: typeof claimChunk,
  bounds: typeof chunkBounds,
): void {
  const byRows = ctrl[2] === 1,
    count = ctrl[3],
    unit = ctrl[4],
    first = ctrl[5];
  const a = ctrl[6],
    b = ctrl[7],
    c = ctrl[8],
    M = ctrl[9],
    K = ctrl[10],
    N = ctrl[11],
    scratch = ctrl[12];
  const origin = first * unit,
    limit = ctrl[16];
  for (let n = 1, i = claim(ctrl, true, first); i >= 0; n++, i = limit > 0 && n > limit ? -1 : claim(ctrl, true, first)) {
    // M (rows) or N (columns) is what the copies hold, from `origin` on
    const [s0, s1] = bounds(i, count, unit, byRows ? M + origin : N + origin);
    const o0 = s0 - origin,
      len = s1 - s0;
    if (byRows) blocked(gemm, heap, a + o0 * K, b, c + o0 * N, len, K, N, K, N, N, scratch, ctrl[13], ctrl[14]);
    else blocked(gemm, heap, a, b + o0, c + o0, M, K, len, K, N, N, scratch, ctrl[13], ctrl[14]);
  }
}

const HELPER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const { memory, ctrl, bytes } = workerData;
const c = new Int32Array(ctrl);
const blockedGemm = ${blockedGemm.toString()};
const claimChunk = ${claimChunk.toString()};
const chunkBounds = ${chunkBounds.toString()};
const helperJob = ${helperJob.toString()};
const gemm = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { memory } }).exports.gemm;
parentPort.postMessage('ready');
for (;;) {
  Atomics.wait(c, 0, 0);
  if (c[0] === 2) break;
  try {
    helperJob(gemm, new Int32Array(memory.buffer), c, blockedGemm, claimChunk, chunkBounds);
  } catch (e) {
    c[15] = 1;
  }
  Atomics.store(c, 0, 0);
  Atomics.notify(c, 0);
}
`;

/** The helper thread, started on first use; null where threads or shared memory are unavailable. */
export function getHelper(): Helper | null {
  if (helper !== undefined) return helper?.failed ? null : helper;
  helper = null;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Worker } = require('node:worker_threads') as typeof import('node:worker_threads');
    const memory = new WebAssembly.Memory({ initial: 16, maximum: HELPER_MAX_PAGES, shared: true });
    const ctrl = new Int32Array(new SharedArrayBuffer(CTRL_WORDS * 4));
    const worker = new Worker(HELPER_SOURCE, { eval: true, workerData: { memory, ctrl: ctrl.buffer, bytes: simdModule(true) } });
    // the worker must not keep the process alive, nor take it down: on any error products stay on this thread
    worker.unref();
    const h: Helper = { worker, memory, ctrl, failed: false };
    worker.on('error', () => {
      h.failed = true;
    });
    worker.on('exit', () => {
      h.failed = true;
    });
    helper = h;
  } catch {
    helper = null;
  }
  return helper;
}

/** Grows the helper's memory to hold `floats` floats; false if it cannot. */
export function helperSpace(h: Helper, floats: number): boolean {
  const have = h.memory.buffer.byteLength,
    need = floats * 4;
  if (need <= have) return true;
  const pages = Math.ceil((need - have) / 65536);
  if (have / 65536 + pages > HELPER_MAX_PAGES) return false;
  h.memory.grow(pages);
  return true;
}

/**
 * C = A·B (contiguous [M, K], [K, N], [M, N] at float offsets of the backend heap), shared with the helper thread
 * in chunks of rows of C, or of columns when that copies less. Returns false (nothing done) when the helper is
 * unavailable or the product too small or too large to share.
 */
export function parallelGemm(be: WasmBackend, a: number, b: number, c: number, M: number, K: number, N: number): boolean {
  if (M * K * N < parallelMinMacs) return false;
  if (helperSkip > 0) {
    helperSkip--;
    return false;
  }
  const h = getHelper();
  if (!h || h.failed || Atomics.load(h.ctrl, 0) !== 0) return false;
  // 16 chunks, tiles whole (4 rows, 8 columns): the worker may take the back half
  const rowCopy = (M / 2) * K + K * N + (M / 2) * N,
    colCopy = M * K + (K * N) / 2 + (M * N) / 2;
  const byRows = rowCopy <= colCopy;
  const size = byRows ? M : N,
    tile = byRows ? 4 : 8;
  const unit = Math.max(tile, Math.floor(size / 16 / tile) * tile);
  const count = Math.min(Math.floor(size / unit), 0xffff);
  if (count < 2) return false;
  const first = count >> 1,
    origin = first * unit;
  const [hm, hn] = byRows ? [M - origin, N] : [M, N - origin];
  const aSize = hm * K,
    bSize = K * hn,
    cSize = hm * hn,
    scratchSize = gemmScratch(K, hn);
  if (!helperSpace(h, aSize + bSize + cSize + scratchSize)) return false;
  const src = heapF32(be),
    dst = new Float32Array(h.memory.buffer);
  const ha = 0,
    hb = aSize,
    hc = aSize + bSize,
    hs = aSize + bSize + cSize;
  if (byRows) {
    dst.set(src.subarray(a + origin * K, a + M * K), ha);
    dst.set(src.subarray(b, b + K * N), hb);
  } else {
    dst.set(src.subarray(a, a + M * K), ha);
    for (let k = 0; k < K; k++) dst.set(src.subarray(b + k * N + origin, b + (k + 1) * N), hb + k * hn);
  }
  const ctrl = h.ctrl;
  ctrl.set([count << 16, byRows ? 1 : 0, count, unit, first, ha, hb, hc, hm, K, hn, hs, gemmBlocks().k, gemmBlocks().n, 0, sequenced], 1);
  Atomics.store(ctrl, 0, 1);
  Atomics.notify(ctrl, 0);
  if (sequenced > 0) while (Atomics.load(ctrl, 0) === 1) Atomics.wait(ctrl, 0, 1);
  try {
    for (let i = claimChunk(ctrl, false, 0); i >= 0; i = claimChunk(ctrl, false, 0)) {
      const [s0, s1] = chunkBounds(i, count, unit, size);
      if (byRows) simdGemm(be, a + s0 * K, b, c + s0 * N, s1 - s0, K, N);
      else simdGemm(be, a, b + s0, c + s0, M, K, s1 - s0, K, N, N);
    }
  } finally {
    while (Atomics.load(ctrl, 0) === 1) Atomics.wait(ctrl, 0, 1);
  }
  if (ctrl[15] !== 0) throw new Error('the product helper thread failed');
  // the worker's chunks are those above the final end of the claimed range
  const done = Math.max(Atomics.load(ctrl, 1) >>> 16, first);
  helperStats.products++;
  helperStats.chunks += count;
  helperStats.workerChunks += count - done;
  if (byRows) helperStats.byRows++;
  if (done > first && done < count) helperStats.uneven++;
  helperShare = 0.8 * helperShare + 0.2 * ((count - done) / count);
  if (helperShare < HELPER_MIN_SHARE) {
    helperSkip = HELPER_BACKOFF;
    helperShare = 0.5;
  }
  if (done < count) {
    const from = done * unit - origin;
    const out = heapF32(be),
      res = new Float32Array(h.memory.buffer);
    if (byRows) out.set(res.subarray(hc + from * N, hc + cSize), c + (origin + from) * N);
    else for (let m = 0; m < M; m++) out.set(res.subarray(hc + m * hn + from, hc + (m + 1) * hn), c + m * N + origin + from);
  }
  return true;
}

/** C = A·B for contiguous operands: shared with the helper thread when large, else on this thread. */
export function product(be: WasmBackend, a: number, b: number, c: number, M: number, K: number, N: number): void {
  if (!parallelGemm(be, a, b, c, M, K, N)) simdGemm(be, a, b, c, M, K, N);
}

// The C++ entry point of BatchMatMul, wrapped once per wasm module. Taken lazily inside the kernel (not in
// a setupFunc) so that registering after the backend was initialised works too.
