// Backend selection (design.md#protocol). `auto`: WebGPU on a hardware adapter (webgpu.ts; a software adapter such as Mesa's
// llvmpipe is never auto-picked), else tfjs-node-gpu if it loads and sees a GPU, else tfjs-node, else wasm-blas
// (the wasm backend with its products on OpenBLAS, kernels/blas.ts), else wasm, else cpu. The native packages are optional and never bundled: their install scripts download libtensorflow,
// so most machines (and VS Code's own runtime, whose Node ABI differs) will not have them. They are loaded with
// a require made by createRequire, which esbuild leaves alone (it only follows literal `require(...)` calls),
// so they resolve at run time from node_modules above the bundle or from NODE_PATH.
import * as tf from '@tensorflow/tfjs';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { UserError } from '../core/errors';
import { blasBuiltinReason, blasThreads, loadBlas, setBlasProducts } from './kernels/blas';
import { PATCHED_WASM_KERNELS } from './kernels/wasm_kernels';
import { backendCaps, tableFor, useOps } from './ops';
import { describeAdapter, probeAdapter, probeAdapterIsolated, type AdapterInfo } from './webgpu';

export type BackendPreference = 'auto' | 'webgpu' | 'tensorflow' | 'wasm-blas' | 'wasm' | 'cpu';

export interface BackendChoice {
  /** webgpu | tensorflow | wasm-blas | wasm | cpu (wasm-blas is tfjs's wasm backend with BatchMatMul on OpenBLAS) */
  backend: string;
  /** why this one, e.g. "tfjs-node-gpu not installed; tfjs-node not installed; wasm SIMD" */
  reason: string;
}

/** What run.json records about the backend. */
export interface BackendInfo extends BackendChoice {
  /** the npm package that provides it */
  package: string;
  tfjs_version: string;
  /** tensorflow backend: whether TensorFlow placed ops on a GPU */
  gpu?: boolean;
  /** wasm backend: SIMD binary in use */
  simd?: boolean;
  /** wasm backend: kernels replaced or added by wasm_kernels.ts */
  patched_kernels?: string[];
  /** wasm-blas: the BLAS library's own description (openblas_get_config) and its thread count */
  blas?: string;
  blas_threads?: number;
  /** webgpu: the adapter tfjs runs on (vendor, architecture, description, limits) */
  adapter?: AdapterInfo;
}

const NODE_GPU = '@tensorflow/tfjs-node-gpu';
const NODE_CPU = '@tensorflow/tfjs-node';
const WASM_FILE = 'tfjs-backend-wasm-simd.wasm';

const requireHere = createRequire(__filename);
let current: BackendInfo | null = null;
let nativePackage: string | null = null;
let wasmPathsSet = false;

type Attempt = { ok: true; gpu: boolean } | { ok: false; why: string };

function shortName(pkg: string): string {
  return pkg.replace('@tensorflow/', '');
}

/**
 * Loads a native tfjs-node package. Both register a backend named 'tensorflow', so only the first one loaded
 * in a process can be used; later calls report on that one.
 */
function loadNative(pkg: string): Attempt {
  if (nativePackage && nativePackage !== pkg) return { ok: false, why: `${shortName(pkg)} not tried (${shortName(nativePackage)} already loaded)` };
  try {
    requireHere.resolve(pkg);
  } catch {
    return { ok: false, why: `${shortName(pkg)} not installed` };
  }
  try {
    requireHere(pkg);
  } catch (e) {
    const msg = e instanceof Error ? e.message.split('\n')[0] : String(e);
    return { ok: false, why: `${shortName(pkg)} failed to load (${msg})` };
  }
  nativePackage = pkg;
  if (!tf.findBackendFactory('tensorflow')) {
    return { ok: false, why: `${shortName(pkg)} loaded but registered no 'tensorflow' backend (version mismatch with @tensorflow/tfjs ${tf.version_core}?)` };
  }
  return { ok: true, gpu: false };
}

async function useTensorflow(): Promise<Attempt> {
  let ok: boolean;
  try {
    ok = await tf.setBackend('tensorflow');
  } catch (e) {
    return { ok: false, why: `tensorflow backend failed to start (${e instanceof Error ? e.message : String(e)})` };
  }
  if (!ok) return { ok: false, why: 'tensorflow backend failed to start' };
  await tf.ready();
  // NodeJSKernelBackend.isUsingGpuDevice: TensorFlow found a CUDA device at start-up.
  const gpu = Boolean((tf.backend() as unknown as { isUsingGpuDevice?: boolean }).isUsingGpuDevice);
  return { ok: true, gpu };
}

function wasmDir(): string {
  // Bundled engine: esbuild.mjs copies the .wasm binaries next to dist/engine/*.js. From source (tsx), use the
  // package's own dist folder. The prefix must end with a separator: the backend appends the file name.
  if (existsSync(join(__dirname, WASM_FILE))) return __dirname + '/';
  return dirname(requireHere.resolve('@tensorflow/tfjs-backend-wasm')) + '/';
}

async function useWasm(): Promise<Attempt & { simd?: boolean }> {
  try {
    // the table's kernels before the backend starts: tfjs runs each registered kernel's setup as it initialises
    tableFor('wasm').register?.();
    if (!wasmPathsSet) {
      setWasmPaths(wasmDir());
      wasmPathsSet = true;
    }
    if (!(await tf.setBackend('wasm'))) return { ok: false, why: 'wasm backend failed to start' };
    await tf.ready();
  } catch (e) {
    return { ok: false, why: `wasm backend failed to start (${e instanceof Error ? e.message : String(e)})` };
  }
  const simd = Boolean(await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'));
  return { ok: true, gpu: false, simd };
}

/**
 * WebGPU through Dawn: the adapter first (a software one is refused unless asked for by name), then tfjs-backend-webgpu,
 * imported here for the first time so that it sees navigator.gpu and registers.
 */
async function useWebgpu(
  pref: BackendPreference,
  log?: (m: string) => void,
): Promise<{ ok: true; info: AdapterInfo; note: string } | { ok: false; why: string }> {
  if (pref === 'auto') {
    // Asked in a child first: Dawn loads into the engine only where auto would take its adapter (probeAdapterIsolated).
    const first = probeAdapterIsolated();
    if (!first.ok) return first;
    if (first.info.software) return { ok: false, why: `webgpu adapter ${describeAdapter(first.info)} is a CPU rasteriser, not picked by auto` };
  }
  const probe = await probeAdapter();
  if (!probe.ok) return probe;
  const name = describeAdapter(probe.info);
  if (probe.info.software && pref === 'auto') return { ok: false, why: `webgpu adapter ${name} is a CPU rasteriser, not picked by auto` };
  try {
    await import('@tensorflow/tfjs-backend-webgpu');
  } catch (e) {
    return { ok: false, why: `@tensorflow/tfjs-backend-webgpu not loadable (${e instanceof Error ? e.message.split('\n')[0] : String(e)})` };
  }
  if (!tf.findBackendFactory('webgpu')) return { ok: false, why: 'tfjs-backend-webgpu registered no backend (navigator.gpu was not set before it loaded)' };
  try {
    if (!(await tf.setBackend('webgpu'))) return { ok: false, why: `webgpu backend failed to start on ${name}` };
    await tf.ready();
    tableFor('webgpu').register?.();
  } catch (e) {
    return { ok: false, why: `webgpu backend failed to start on ${name} (${e instanceof Error ? e.message : String(e)})` };
  }
  let note = `webgpu on ${name}`;
  if (probe.info.software) {
    note += ': a software adapter, chosen because backend webgpu was asked for (it runs on the CPU, slower than wasm-blas: for testing)';
    log?.(`warning: ${note}`);
  }
  return { ok: true, info: probe.info, note };
}

async function useCpu(): Promise<boolean> {
  if (!(await tf.setBackend('cpu'))) return false;
  await tf.ready();
  return true;
}

/**
 * Makes `info` the process's backend and says so in one line: the backend and why it was chosen (the last of the
 * reasons; the ones passed over stay in run.json's backend_reason). A second line only where a faster backend is one
 * install away.
 */
function record(info: BackendInfo, log?: (m: string) => void, hint?: string): BackendChoice {
  current = info;
  // the backend's fused ops, chosen here once (ops/index.ts)
  useOps(info.backend);
  log?.(`backend ${info.backend}: ${info.reason.split('; ').pop()}`);
  if (hint) log?.(hint);
  return { backend: info.backend, reason: info.reason };
}

/** OpenBLAS missing (not the addon, which npm run build compiles): the package that makes auto pick wasm-blas. */
export function blasHint(why: string): string | undefined {
  if (!/no usable OpenBLAS library/.test(why)) return undefined;
  const install = process.platform === 'linux' ? 'apt-get install libopenblas0-pthread (Debian, Ubuntu)' : 'install OpenBLAS';
  return `faster: ${install}, and backend auto runs its products on OpenBLAS`;
}

const INSTALL_HINT =
  `Install it next to the engine: \`npm install ${NODE_CPU}@${tf.version_core}\` (or ${NODE_GPU}@${tf.version_core} with ` +
  'CUDA), in the folder that holds node_modules for the engine, or in a folder on NODE_PATH. Its install script ' +
  "downloads libtensorflow, so it needs internet access and a system Node (VS Code's built-in runtime cannot load " +
  'native addons built for it; set creditLens.nodePath). Or use backend: auto / wasm.';

/**
 * Selects and initialises the TensorFlow.js backend. Safe to call again (e.g. bench switches between wasm and
 * cpu); the native package, once loaded, stays the 'tensorflow' backend of the process.
 */
export async function initBackend(pref: BackendPreference, log?: (m: string) => void): Promise<BackendChoice> {
  const why: string[] = [];
  setBlasProducts(false);
  if (pref === 'auto' || pref === 'webgpu') {
    const g = await useWebgpu(pref, log);
    if (g.ok) {
      why.push(g.note);
      const pkg = '@tensorflow/tfjs-backend-webgpu';
      return record({ backend: 'webgpu', reason: why.join('; '), package: pkg, tfjs_version: tf.version_core, gpu: !g.info.software, adapter: g.info }, log);
    }
    if (pref === 'webgpu') {
      throw new UserError(
        `backend: webgpu is not available here: ${g.why}. It needs the optional npm packages webgpu and @tensorflow/tfjs-backend-webgpu ` +
          '(installed by npm ci where Dawn has binaries: linux-x64/arm64, darwin, win32) and a GPU driver Dawn accepts. Or use backend: auto.',
      );
    }
    why.push(g.why);
  }
  if (pref === 'auto' || pref === 'tensorflow') {
    for (const pkg of [NODE_GPU, NODE_CPU]) {
      const loaded = loadNative(pkg);
      if (!loaded.ok) {
        why.push(loaded.why);
        continue;
      }
      const started = await useTensorflow();
      if (!started.ok) {
        why.push(started.why);
        continue;
      }
      const name = shortName(pkg);
      if (pkg === NODE_GPU && !started.gpu) {
        // tfjs-node-gpu without a visible GPU runs TensorFlow's CPU kernels, the same as tfjs-node would; and
        // tfjs-node could not be loaded next to it anyway (same backend name).
        why.push(`${name} loaded but sees no GPU, using its TensorFlow CPU kernels`);
      } else {
        why.push(pkg === NODE_GPU ? `${name} with GPU` : `${name} (TensorFlow CPU)`);
      }
      return record({ backend: 'tensorflow', reason: why.join('; '), package: pkg, tfjs_version: tf.version_core, gpu: started.gpu }, log);
    }
    if (pref === 'tensorflow') {
      throw new UserError(`backend: tensorflow needs ${NODE_CPU} or ${NODE_GPU} (${why.join('; ')}). ${INSTALL_HINT}`);
    }
  }
  if (pref === 'auto' || pref === 'wasm-blas' || pref === 'wasm') {
    const w = await useWasm();
    if (w.ok) {
      const wasm = { package: '@tensorflow/tfjs-backend-wasm', tfjs_version: tf.version_core, simd: w.simd, patched_kernels: [...PATCHED_WASM_KERNELS] };
      if (pref !== 'wasm') {
        let blas: string | null = null;
        try {
          blas = loadBlas();
        } catch (e) {
          const msg = e instanceof Error ? e.message : String(e);
          if (pref === 'wasm-blas') throw new UserError(`backend: wasm-blas needs the native addon: ${msg}. Or use backend: wasm.`);
          why.push(`wasm-blas unavailable: ${msg}`);
        }
        if (blas !== null) {
          setBlasProducts(true);
          const builtin = blasBuiltinReason();
          if (builtin) why.push(`OpenBLAS not used: ${builtin}`);
          why.push(`wasm SIMD with products on ${builtin ? `the ${blas}` : blas.split(' ').slice(0, 2).join(' ')}`);
          return record(
            { backend: 'wasm-blas', reason: why.join('; '), ...wasm, blas, blas_threads: blasThreads() },
            log,
            pref === 'auto' && builtin ? blasHint(builtin) : undefined,
          );
        }
      }
      why.push(w.simd ? 'wasm SIMD' : 'wasm (no SIMD support in this runtime)');
      return record({ backend: 'wasm', reason: why.join('; '), ...wasm }, log, pref === 'auto' ? blasHint(why.join('; ')) : undefined);
    }
    if (pref !== 'auto') throw new Error(w.why);
    why.push(w.why);
  }
  if (!(await useCpu())) throw new Error(`cpu backend failed to start${why.length ? ` (${why.join('; ')})` : ''}`);
  why.push(pref === 'cpu' ? 'cpu requested' : 'plain JavaScript cpu backend');
  return record({ backend: 'cpu', reason: why.join('; '), package: '@tensorflow/tfjs-backend-cpu', tfjs_version: tf.version_core }, log);
}

/** Whether the backend in use reads a tensor synchronously (dataSync): its capabilities say (ops/ops.ts BackendCaps). */
export function readsSync(): boolean {
  return backendCaps().syncReads;
}

/** The backend chosen by the last initBackend call, for run.json; null before any. */
export function backendInfo(): BackendInfo | null {
  return current ? { ...current, patched_kernels: current.patched_kernels?.slice(), ...(current.adapter ? { adapter: { ...current.adapter } } : {}) } : null;
}
