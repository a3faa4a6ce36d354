// OpenBLAS products on the wasm backend's heap: backend `wasm-blas` (design.md#protocol).
//
// native/ is a Node-API addon that esbuild.mjs compiles when a C compiler and Node's headers are present. It
// links against nothing but libc and opens OpenBLAS with dlopen, so the engine loads everywhere and uses it only where
// the library is installed (Debian: libopenblas0-pthread). BatchMatMul then calls cblas_sgemm on Float32Array views of
// the WebAssembly memory, with the transpose flags passed through: no copies, no materialised transposes. Everything
// else stays on the wasm kernels. Measured here, OpenBLAS runs the train step's products at 180–200 GFLOP/s on 2
// threads where the wasm SIMD loop reaches 30–49 (bench/PROFILE.md).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { WasmBackend, heapF32 } from './heap';
import { NATIVE_ABI, positional, type NativeArgs, type NativeKernel } from './native_abi';

interface BlasAddon {
  open(path: string): string;
  /** products on the addon's own GEMM (native/builtin_gemm.c); absent in builds before it */
  builtin?(): string;
  threads(n?: number): number;
  gemm(heap: Float32Array, transA: boolean, transB: boolean, M: number, N: number, K: number, offsets: Int32Array): void;
  /** "name:arg,arg,…" per native kernel: the argument names it was built with (native/abi.h) */
  abi(): string[];
  /** the hash of the native/ sources it was compiled from (scripts/native_hash.mjs); absent in builds before it */
  sourceHash?(): string;
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
/** Why OpenBLAS was not used where the built-in GEMM runs the products instead; null with OpenBLAS. */
let builtinBecause: string | null = null;

/** CREDIT_LENS_BLAS=builtin: the built-in GEMM even where OpenBLAS is installed (tests, and the bench's comparison). */
export const BUILTIN_BLAS = 'builtin';

/** Where the addon is: next to the engine bundle (dist/engine), or there from the sources (tests run from src). */
/** CREDIT_LENS_BLAS_ADDON (a blas.node built elsewhere), else the one next to the engine bundle, else dist/'s (tests). */
function addonPath(): string | null {
  const own = process.env.CREDIT_LENS_BLAS_ADDON;
  if (own) return existsSync(own) ? own : null;
  return [join(__dirname, ADDON), resolve(__dirname, '../../../../dist/engine', ADDON)].find(existsSync) ?? null;
}

declare const __CL_NATIVE_SOURCE_HASH__: string | null | undefined;

/**
 * The stamp blas.node must carry: the engine bundle's (the build defines it), or, running from source (tests), the hash
 * of native/ computed as scripts/native_hash.mjs does; null when neither is known (nothing to check against).
 */
export function expectedNativeHash(): string | null {
  if (typeof __CL_NATIVE_SOURCE_HASH__ !== 'undefined') return __CL_NATIVE_SOURCE_HASH__;
  const dir = resolve(__dirname, '../../../../native');
  if (!existsSync(dir)) return null;
  const h = createHash('sha256');
  for (const f of readdirSync(dir)
    .filter((n) => /\.[ch]$/.test(n))
    .sort())
    h.update(`${f}\n`)
      .update(readFileSync(join(dir, f)))
      .update('\n');
  return h.digest('hex').slice(0, 16);
}

/**
 * Why this OpenBLAS must not be used, from its config string, or null. Before 0.3.10 OpenBLAS has races when two
 * threads call it at once (the engine's kernels and OpenBLAS's own workers do); a 64-bit-integer build (USE64BITINT,
 * the "ILP64" interface) reads cblas_sgemm's int arguments as int64 and would multiply garbage.
 */
export function openblasRefusal(config: string): string | null {
  const m = /OpenBLAS\s+(\d+)\.(\d+)\.(\d+)/.exec(config);
  if (m) {
    const [maj, min, pat] = m.slice(1).map(Number);
    if (maj === 0 && (min < 3 || (min === 3 && pat < 10)))
      return `OpenBLAS ${maj}.${min}.${pat} is older than 0.3.10, whose threads race when two callers use it at once`;
  }
  if (/USE64BITINT/.test(config)) return 'a 64-bit-integer (ILP64) build of OpenBLAS: its cblas_sgemm takes int64 sizes';
  return null;
}

/**
 * Loads the addon and opens OpenBLAS once per process. Returns the library's config string (e.g. "OpenBLAS 0.3.21
 * … Cooperlake MAX_THREADS=64"), or throws an Error whose message says why not (the backend then falls back to wasm
 * and run.json's backend_reason says so).
 */
export function loadBlas(): string {
  if (addon) return config;
  if (loadError) throw new Error(loadError);
  const path = addonPath();
  if (!path) {
    loadError = `${ADDON} not built (npm run build compiles native/ when gcc and Node's headers are present)`;
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
  const want = expectedNativeHash();
  const stamp = typeof a.sourceHash === 'function' ? a.sourceHash() : '';
  if (want && stamp !== want) {
    loadError = `${path} was built from other native/ sources than this engine (stamp ${stamp || 'none'}, engine ${want}): a stale build left by a failed rebuild? Rebuild it: npm run build`;
    throw new Error(loadError);
  }
  const mismatch = abiMismatch(typeof a.abi === 'function' ? a.abi() : []);
  if (mismatch) {
    loadError = `${ADDON} was built for other kernel arguments than this engine's (${mismatch}); rebuild it: npm run build`;
    throw new Error(loadError);
  }
  chooseOpenblasCore();
  const forced = process.env.CREDIT_LENS_BLAS === BUILTIN_BLAS;
  const names = forced ? [] : [process.env.CREDIT_LENS_BLAS, ...BLAS_LIBRARIES].filter((n): n is string => !!n);
  const failures: string[] = [];
  for (const name of names) {
    try {
      const c = a.open(name);
      const refused = openblasRefusal(c);
      if (refused) {
        failures.push(`${name}: ${refused}`);
        continue;
      }
      config = c;
      addon = a;
      return config;
    } catch (e) {
      failures.push(`${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  // (forced, the reason says so and no install hint follows: OpenBLAS may well be installed)
  const missing = forced
    ? `CREDIT_LENS_BLAS=${BUILTIN_BLAS}`
    : `no usable OpenBLAS library (${failures.join('; ')}); on Debian: apt-get install libopenblas0-pthread`;
  // Without OpenBLAS the addon's own GEMM runs the products: several times the wasm loop's rate, and the native
  // kernels (attention, log-prob, RMSNorm, SwiGLU) with it.
  if (typeof a.builtin === 'function') {
    config = a.builtin();
    addon = a;
    builtinBecause = missing;
    return config;
  }
  loadError = missing;
  throw new Error(loadError);
}

/** Why the built-in GEMM runs the products (no usable OpenBLAS, or CREDIT_LENS_BLAS=builtin); null with OpenBLAS. */
export function blasBuiltinReason(): string | null {
  return builtinBecause;
}

/**
 * The OpenBLAS core to name for this CPU, from its feature flags (/proc/cpuinfo), or null to leave the choice to
 * OpenBLAS. OpenBLAS 0.3.21 (Debian bookworm) picks its kernels by CPU model number; on a model it does not know (a VM
 * reporting "Intel(R) Xeon(R) Processor", or a newer Xeon) it falls back to Prescott's SSE3 kernels. Measured here:
 * sgemm 1024³ 46 GFLOP/s as Prescott against 176 as SkylakeX, and the reference train step 600 ms against 207 ms.
 */
export function openblasCoreFor(flags: ReadonlySet<string>): string | null {
  if (['avx512f', 'avx512bw', 'avx512dq', 'avx512vl', 'avx512cd'].every((f) => flags.has(f))) return 'SkylakeX';
  if (flags.has('avx2') && flags.has('fma')) return 'Haswell';
  return null;
}

/**
 * Sets OPENBLAS_CORETYPE from the CPU's flags unless the user set it, before OpenBLAS is opened (it reads it once, when
 * loaded); children (the bench's PyTorch reference) inherit it, so both sides run the same kernels. Returns the core
 * named, or null.
 */
export function chooseOpenblasCore(): string | null {
  if (process.env.OPENBLAS_CORETYPE) return null;
  let flags: Set<string>;
  try {
    const line = /^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (!line) return null;
    flags = new Set(line[1].trim().split(/\s+/));
  } catch {
    return null; // not Linux: OpenBLAS's own detection
  }
  const core = openblasCoreFor(flags);
  if (core) process.env.OPENBLAS_CORETYPE = core;
  return core;
}

/** Calls into the addon since the process started (tests check the route was taken). */
export const blasStats = { calls: 0 };

/** Routes BatchMatMul through OpenBLAS (true) or the wasm loops (false). Needs loadBlas() to have succeeded. */
export function setBlasProducts(on: boolean): void {
  if (on && !addon) loadBlas();
  active = on;
}
export function blasProducts(): boolean {
  return active;
}
/** OpenBLAS's thread count; sets it first when n > 0. */
export function blasThreads(n?: number): number {
  return addon ? addon.threads(n) : 0;
}

/**
 * For each (a, b, c) triple of float offsets into the heap, C[M,N] = op(A)·op(B), op = transpose when the flag is set;
 * A is stored [M,K] (or [K,M] transposed), B [K,N] (or [N,K]). All triples run in one call into the addon.
 */
export function blasGemm(be: WasmBackend, transA: boolean, transB: boolean, M: number, N: number, K: number, offsets: Int32Array): void {
  blasStats.calls++;
  addon!.gemm(heapF32(be), transA, transB, M, N, K, offsets);
}

/** Runs a native kernel on the backend's heap with its arguments by name (native_abi.ts; kernels/native.ts checks shapes first, the addon checks ranges). */
export function nativeCall<K extends NativeKernel>(be: WasmBackend, kernel: K, args: NativeArgs<K>): void {
  if (!addon) throw new Error('native kernels need the wasm-blas backend (blas.node loaded)');
  (addon[kernel] as (heap: Float32Array, ...a: number[]) => void)(heapF32(be), ...positional(kernel, args));
}

/** Where the addon's kernel arguments (its abi()) differ from native_abi.ts, or null when they agree. */
export function abiMismatch(built: string[]): string | null {
  const have = new Map(built.map((e) => [e.slice(0, e.indexOf(':')), e.slice(e.indexOf(':') + 1)]));
  const diffs: string[] = [];
  for (const [name, args] of Object.entries(NATIVE_ABI)) {
    const got = have.get(name);
    if (got === undefined) diffs.push(`${name}: missing`);
    else if (got !== args.join(',')) diffs.push(`${name}: built (${got}), engine (${args.join(',')})`);
    have.delete(name);
  }
  for (const name of have.keys()) diffs.push(`${name}: not in the engine`);
  return diffs.length ? diffs.join('; ') : null;
}
