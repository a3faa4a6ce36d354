// WebGPU in the engine process: Dawn's Node bindings (the `webgpu` npm package's prebuilt dawn.node, an optional
// dependency) give `navigator.gpu`, and @tensorflow/tfjs-backend-webgpu (bundled; it registers its backend when it is
// first imported, and only if navigator.gpu exists by then) runs tfjs on the adapter.
//
// dawn.node is loaded directly with a require made by createRequire (the package's own index.js is an ES module that
// only picks the file by platform): first from next to the bundle (`dawn/<platform>-<arch>/dawn.node`, where
// esbuild.mjs copies it so the .vsix carries it), then from node_modules.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** What run.json records about the adapter (GPUAdapterInfo's fields, plus the limits a model's tensors must fit). */
export interface AdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** a CPU / software rasteriser (Mesa's llvmpipe, SwiftShader, WARP): never picked by backend auto */
  software: boolean;
  /** the largest single GPU buffer, and the largest one a kernel can bind: every tensor must fit the second */
  max_buffer_size: number;
  max_storage_buffer_binding_size: number;
  /** where dawn.node was loaded from */
  dawn: string;
  /** the optional WebGPU features the adapter offers (shader-f16, subgroups, …): what wider types could use */
  features?: string[];
  /** Dawn's toggles the engine's device was made with (CREDIT_LENS_DAWN_TOGGLES), where any */
  toggles?: string;
}

export type AdapterProbe = { ok: true; info: AdapterInfo } | { ok: false; why: string };

interface DawnModule {
  create(flags: string[]): GpuLike;
  globals: Record<string, unknown>;
}
interface GpuLike {
  requestAdapter(opts?: { powerPreference?: string }): Promise<AdapterLike | null>;
}
interface AdapterLike {
  info?: { vendor?: string; architecture?: string; device?: string; description?: string; isFallbackAdapter?: boolean };
  isFallbackAdapter?: boolean;
  limits: { maxBufferSize: number; maxStorageBufferBindingSize: number };
  features?: Iterable<string>;
}

const requireHere = createRequire(__filename);
const PLATFORM_DIR = `${process.platform}-${process.platform === 'darwin' ? 'universal' : process.arch}`;
let loaded: { dawn: DawnModule; path: string } | null = null;
let probed: AdapterProbe | null = null;

const NO_ADAPTER = 'webgpu: Dawn found no adapter (no Vulkan, Metal or D3D12 driver it accepts; on Linux, Mesa ≥ 23 or a GPU vendor driver with libvulkan1)';

/** Adapters that are a CPU in disguise: their names, where the architecture field does not say 'software'. */
const SOFTWARE_NAMES = /llvmpipe|lavapipe|swiftshader|softpipe|microsoft basic render|\bwarp\b/i;

/** dawn.node's path: the bundle's copy (the .vsix), else the `webgpu` package's; null with the places looked. */
export function dawnPath(): { path: string } | { path: null; looked: string[] } {
  const looked: string[] = [];
  const bundled = join(__dirname, 'dawn', PLATFORM_DIR, 'dawn.node');
  looked.push(bundled);
  if (existsSync(bundled)) return { path: bundled };
  try {
    const pkg = dirname(requireHere.resolve('webgpu/package.json'));
    const p = join(pkg, 'dist', PLATFORM_DIR, 'dawn.node');
    looked.push(p);
    if (existsSync(p)) return { path: p };
  } catch {
    looked.push('node_modules/webgpu (not installed)');
  }
  return { path: null, looked };
}

function loadDawn(): { ok: true } | { ok: false; why: string } {
  if (loaded) return { ok: true };
  const where = dawnPath();
  if (where.path === null) return { ok: false, why: `webgpu: no Dawn binary for ${PLATFORM_DIR} (looked in ${where.looked.join(', ')})` };
  try {
    const dawn = requireHere(where.path) as DawnModule;
    // tfjs-backend-webgpu reads GPUBufferUsage, GPUMapMode and GPUShaderStage as globals, as in a browser
    Object.assign(globalThis, dawn.globals);
    loaded = { dawn, path: where.path };
    return { ok: true };
  } catch (e) {
    return { ok: false, why: `webgpu: ${where.path} failed to load (${e instanceof Error ? e.message.split('\n')[0] : String(e)})` };
  }
}

/**
 * Loads Dawn once and asks it for the high-performance adapter: its description, whether it is software, its limits.
 * Sets navigator.gpu for tfjs-backend-webgpu. Later calls answer from the first.
 */
export async function probeAdapter(): Promise<AdapterProbe> {
  if (probed) return probed;
  const l = loadDawn();
  if (!l.ok) return (probed = l);
  // Dawn's toggles for every device of this process, for measuring what they are worth (bench/device.ts dawn_toggles):
  // skip_validation and disable_robustness drop per-call checks that a correct program does not need
  const toggles = dawnToggles();
  const gpu = loaded!.dawn.create(toggles ? [`enable-dawn-features=${toggles}`] : []);
  const nav = ((globalThis as unknown as { navigator?: Record<string, unknown> }).navigator ??= {});
  if (!('gpu' in nav) || !nav.gpu) {
    try {
      nav.gpu = gpu;
    } catch {
      Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true });
    }
  }
  let adapter: AdapterLike | null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    return (probed = { ok: false, why: `webgpu: requestAdapter failed (${e instanceof Error ? e.message : String(e)})` });
  }
  if (!adapter) return (probed = { ok: false, why: NO_ADAPTER });
  return (probed = { ok: true, info: { ...adapterInfo(adapter, loaded!.path), ...(toggles ? { toggles } : {}) } });
}

/** CREDIT_LENS_DAWN_TOGGLES: Dawn toggles by name, comma-separated (letters, digits and underscores only). */
function dawnToggles(): string | null {
  const v = process.env.CREDIT_LENS_DAWN_TOGGLES?.trim();
  if (!v) return null;
  if (!/^[a-z0-9_]+(,[a-z0-9_]+)*$/.test(v))
    throw new Error(`CREDIT_LENS_DAWN_TOGGLES=${v}: expected Dawn toggle names, comma-separated (e.g. skip_validation,disable_robustness)`);
  return v;
}

/** What an adapter says of itself, and whether it is a CPU in disguise. */
function adapterInfo(adapter: Pick<AdapterLike, 'info' | 'isFallbackAdapter' | 'limits' | 'features'>, dawn: string): AdapterInfo {
  const a = adapter.info ?? {};
  const description = a.description || a.device || '';
  const architecture = a.architecture ?? '';
  const software =
    architecture === 'software' || Boolean(adapter.isFallbackAdapter ?? a.isFallbackAdapter) || SOFTWARE_NAMES.test(`${description} ${a.device ?? ''}`);
  return {
    vendor: a.vendor ?? '',
    architecture,
    device: a.device ?? '',
    description,
    software,
    max_buffer_size: adapter.limits.maxBufferSize,
    max_storage_buffer_binding_size: adapter.limits.maxStorageBufferBindingSize,
    dawn,
    features: [...(adapter.features ?? [])].sort(),
  };
}

/** The child's script: load dawn.node, ask for the adapter, print what it says of itself as one JSON line. */
const PROBE_SCRIPT = `
const dawn = require(process.argv[1]);
const gpu = dawn.create([]);
const done = (x) => { process.stdout.write(JSON.stringify(x) + '\\n', () => process.exit(0)); };
gpu.requestAdapter({ powerPreference: 'high-performance' }).then((a) => {
  if (!a) return done({ adapter: null });
  const i = a.info || {};
  done({ adapter: { info: { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    isFallbackAdapter: i.isFallbackAdapter }, isFallbackAdapter: a.isFallbackAdapter, features: [...(a.features || [])],
    limits: { maxBufferSize: a.limits.maxBufferSize, maxStorageBufferBindingSize: a.limits.maxStorageBufferBindingSize } } });
}, (e) => done({ error: String(e && e.message || e) }));
`;
let isolated: AdapterProbe | null = null;

/**
 * The adapter as probeAdapter sees it, asked in a child process. Dawn writes its own messages straight to the process's
 * stderr from C++ (a missing Vulkan driver with its source path, limits it lowers on a software adapter), where no
 * JavaScript can catch them. `auto` asks here first and loads Dawn into the engine only for a hardware adapter, so the
 * first run on a machine without a GPU prints nothing of Dawn's.
 */
export function probeAdapterIsolated(): AdapterProbe {
  const where = dawnPath();
  if (where.path === null) return { ok: false, why: `webgpu: no Dawn binary for ${PLATFORM_DIR} (looked in ${where.looked.join(', ')})` };
  if (isolated) return isolated;
  const r = spawnSync(process.execPath, ['-e', PROBE_SCRIPT, where.path], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
  });
  const stderr = (r.stderr ?? '').trim();
  const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  let answer: { adapter?: Parameters<typeof adapterInfo>[0] | null; error?: string } | null = null;
  try {
    answer = line ? JSON.parse(line) : null;
  } catch {
    answer = null;
  }
  if (!answer) {
    const how = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
    return (isolated = { ok: false, why: `webgpu: probing the adapter failed (${how}${stderr ? `: ${stderr.split('\n')[0]}` : ''})` });
  }
  if (answer.error) return (isolated = { ok: false, why: `webgpu: requestAdapter failed (${answer.error})` });
  if (!answer.adapter) return (isolated = { ok: false, why: NO_ADAPTER });
  return (isolated = { ok: true, info: adapterInfo(answer.adapter, where.path) });
}

/** What the adapter offers only behind Dawn's allow_unsafe_apis: features, and the subgroup-matrix shapes. */
export interface UnsafeFeatures {
  /** features offered with unsafe APIs allowed and not without (chromium-experimental-subgroup-matrix, …) */
  features: string[];
  /** GPUAdapterInfo.subgroupMatrixConfigs: the cooperative-matrix shapes and types, where the feature is offered */
  subgroup_matrix_configs: unknown[];
}

const UNSAFE_SCRIPT = `
const dawn = require(process.argv[1]);
const done = (x) => { process.stdout.write(JSON.stringify(x) + '\\n', () => process.exit(0)); };
const ask = (flags) => dawn.create(flags).requestAdapter({ powerPreference: 'high-performance' });
Promise.all([ask([]), ask(['enable-dawn-features=allow_unsafe_apis'])]).then(([safe, unsafe]) => {
  if (!safe || !unsafe) return done({ error: 'no adapter' });
  const had = new Set(safe.features);
  const cfgs = (unsafe.info && unsafe.info.subgroupMatrixConfigs) || [];
  done({ features: [...unsafe.features].filter((f) => !had.has(f)).sort(),
    subgroup_matrix_configs: [...cfgs].map((c) => ({ componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K })) });
}, (e) => done({ error: String(e && e.message || e) }));
`;

/**
 * The features the adapter offers only with Dawn's allow_unsafe_apis (the subgroup-matrix feature is one), asked in a
 * child process so that the engine's own Dawn stays safe: what a lent card offers, for the device bench's report.
 */
export function probeUnsafeFeatures(): UnsafeFeatures | { error: string } {
  const where = dawnPath();
  if (where.path === null) return { error: 'no Dawn binary' };
  const r = spawnSync(process.execPath, ['-e', UNSAFE_SCRIPT, where.path], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
  });
  const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line) as UnsafeFeatures | { error: string };
  } catch {
    return { error: `the probe printed no answer (${r.error ? r.error.message : `exit ${r.status}`})` };
  }
}

/** "llvmpipe: Mesa 25.0.7 (software)": the adapter in one line, for logs and reasons. */
export function describeAdapter(info: AdapterInfo): string {
  const name = info.description || [info.vendor, info.device].filter(Boolean).join(' ') || 'unnamed adapter';
  return `${name} (${info.software ? 'software' : info.architecture || info.vendor || 'hardware'})`;
}
