// OpenBLAS products on the wasm backend's heap: backend `wasm-blas` (DESIGN §7).
//
// native/blas.c is a Node-API addon that esbuild.mjs compiles when a C compiler and Node's headers are present. It
// links against nothing but libc and opens OpenBLAS with dlopen, so the engine loads everywhere and uses it only where
// the library is installed (Debian: libopenblas0-pthread). BatchMatMul then calls cblas_sgemm on Float32Array views of
// the WebAssembly memory, with the transpose flags passed through: no copies, no materialised transposes. Everything
// else stays on the wasm kernels. Measured here, OpenBLAS runs the train step's products at 180–200 GFLOP/s on 2
// threads where the wasm SIMD loop reaches 30–49 (bench/PROFILE.md).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { WasmBackend, heapF32 } from './heap';

interface BlasAddon {
  open(path: string): string;
  threads(n?: number): number;
  gemm(heap: Float32Array, transA: boolean, transB: boolean, M: number, N: number, K: number, offsets: Int32Array): void;
  /** The native kernels (kernels/native.ts): heap, then int32 element offsets, sizes and float bits. */
  [kernel: string]: unknown;
}

/** Library names tried in order; CREDIT_LENS_BLAS (a path or soname) goes first when set. */
export const BLAS_LIBRARIES = ['libopenblas.so.0', 'libopenblas.so', 'libopenblas.dylib'];
const ADDON = 'blas.node';

let addon: BlasAddon | null = null;
let loadError: string | null = null;
let config = '';
let active = false;

/** Where the addon is: next to the engine bundle (dist/engine), or there from the sources (tests run from src). */
function addonPath(): string | null {
  return [join(__dirname, ADDON), resolve(__dirname, '../../../../dist/engine', ADDON)].find(existsSync) ?? null;
}

/**
 * Loads the addon and opens OpenBLAS once per process. Returns the library's config string (e.g. "OpenBLAS 0.3.21
 * … Cooperlake MAX_THREADS=64"), or throws an Error whose message says why not.
 */
export function loadBlas(): string {
  if (addon) return config;
  if (loadError) throw new Error(loadError);
  const path = addonPath();
  if (!path) {
    loadError = `${ADDON} not built (npm run build compiles native/blas.c when gcc and Node's headers are present)`;
    throw new Error(loadError);
  }
  let a: BlasAddon;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    a = require(path) as BlasAddon;
  } catch (e) {
    loadError = `${ADDON} failed to load (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`;
    throw new Error(loadError);
  }
  const names = [process.env.CREDIT_LENS_BLAS, ...BLAS_LIBRARIES].filter((n): n is string => !!n);
  const failures: string[] = [];
  for (const name of names) {
    try {
      config = a.open(name);
      addon = a;
      return config;
    } catch (e) {
      failures.push(`${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  loadError = `no OpenBLAS library could be opened (${failures.join('; ')}); on Debian: apt-get install libopenblas0-pthread`;
  throw new Error(loadError);
}

/** Calls into the addon since the process started (tests check the route was taken). */
export const blasStats = { calls: 0 };

let timing: Map<string, { calls: number; ms: number }> | null = null;
/** Bench hook: time every product by shape (M×N×K, transposes, batch) from now on; returns the table so far. */
export function blasTiming(on: boolean): Map<string, { calls: number; ms: number }> | null {
  const t = timing;
  timing = on ? new Map() : null;
  return t;
}

/** Routes BatchMatMul through OpenBLAS (true) or the wasm loops (false). Needs loadBlas() to have succeeded. */
export function setBlasProducts(on: boolean): void {
  if (on && !addon) loadBlas();
  active = on;
}
export function blasProducts(): boolean { return active; }
/** OpenBLAS's thread count; sets it first when n > 0. */
export function blasThreads(n?: number): number { return addon ? addon.threads(n) : 0; }

/**
 * For each (a, b, c) triple of float offsets into the heap, C[M,N] = op(A)·op(B), op = transpose when the flag is set;
 * A is stored [M,K] (or [K,M] transposed), B [K,N] (or [N,K]). All triples run in one call into the addon.
 */
export function blasGemm(be: WasmBackend, transA: boolean, transB: boolean, M: number, N: number, K: number,
  offsets: Int32Array): void {
  blasStats.calls++;
  if (!timing) {
    addon!.gemm(heapF32(be), transA, transB, M, N, K, offsets);
    return;
  }
  const t0 = performance.now();
  addon!.gemm(heapF32(be), transA, transB, M, N, K, offsets);
  const key = `${M}×${N}×${K}${transA ? ' Aᵀ' : ''}${transB ? ' Bᵀ' : ''} ×${offsets.length / 3}`;
  const e = timing.get(key) ?? { calls: 0, ms: 0 };
  e.calls++;
  e.ms += performance.now() - t0;
  timing.set(key, e);
}

/** Names of the addon's native kernels (native/blas.c), each called as (heap, ...int32 arguments). */
export type NativeKernel = 'logprob' | 'logprobGrad' | 'rmsnorm' | 'rmsnormGrad' | 'attention' | 'attentionGrad' | 'qkvHeads' | 'qkvHeadsGrad' | 'swiglu'
  | 'swigluGrad' | 'decodeStep';

/** Runs a native kernel on the backend's heap (kernels/native.ts checks shapes first; the addon checks ranges). */
export function nativeCall(be: WasmBackend, kernel: NativeKernel, ...ints: number[]): void {
  if (!addon) throw new Error('native kernels need the wasm-blas backend (blas.node loaded)');
  (addon[kernel] as (heap: Float32Array, ...a: number[]) => void)(heapF32(be), ...ints);
}
