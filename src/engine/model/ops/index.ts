// The ops table of the running backend: chosen once, by model/backend.ts when it starts a backend (useOps), and read
// by the model for its sizes (modelOps). ops.ts says what an op is; cpu.ts, wasm.ts and wasm_blas.ts what each backend has.
import { COMPOSED } from './composed';
import { CPU_OPS } from './cpu';
import { HOST_CAPS, resolveOps, type AdamStep, type BackendCaps, type BackendOps, type ModelOps, type OpDims } from './ops';
import { wasmOps } from './wasm';
import { wasmBlasOps } from './wasm_blas';
import { webgpuOps } from './webgpu';

export type { AdamScalars, AdamStep, BackendCaps, BackendOps, DecodeAttentionAttrs, HeadDims, ModelOps, OpDims } from './ops';

/** TensorFlow's own kernels (tfjs-node) implement none of ours: it runs the compositions. */
const TENSORFLOW_OPS: BackendOps = { name: 'tensorflow', caps: HOST_CAPS, ops: {} };

let table: BackendOps = { name: 'none', caps: HOST_CAPS, ops: {} };
const resolved = new Map<string, ModelOps>();

/** The table of a backend as initBackend names it (tensorflow | wasm-blas | wasm | cpu). */
export function tableFor(backend: string): BackendOps {
  switch (backend) {
    case 'wasm-blas':
      return wasmBlasOps();
    case 'wasm':
      return wasmOps();
    case 'cpu':
      return CPU_OPS;
    case 'tensorflow':
      return TENSORFLOW_OPS;
    case 'webgpu':
      return webgpuOps();
    default:
      throw new Error(`no ops table for backend ${backend}`);
  }
}

/** Makes `backend`'s table the one models run on (initBackend calls it once per backend it starts). */
export function useOps(backend: string): void {
  table = tableFor(backend);
  resolved.clear();
}

/** Runs models on `t` in place of the backend's own table, until the next useOps: the per-op tier bench (src/engine/bench/ops_tiers.ts). */
export function useOpsTable(t: BackendOps): void {
  table = t;
  resolved.clear();
}

/** The capabilities of the backend in use (BackendOps.caps). */
export function backendCaps(): BackendCaps {
  return table.caps;
}

/** Whether the backend in use keeps the model's constant tables on the device (BackendCaps.keepTables). */
export function keepsTables(): boolean {
  return table.caps.keepTables;
}

/** Adam's fused update on the backend in use; false where it has none or cannot run it (the optimizer then runs ops). */
export function adamStep(...args: Parameters<AdamStep>): boolean {
  return table.adamStep?.(...args) ?? false;
}

/** The most bytes of one tensor a kernel of the backend in use can bind (BackendCaps.maxBindingBytes). */
export function maxBindingBytes(): number {
  return table.caps.maxBindingBytes;
}

/** The name of the table in use (run.json records it with the backend; tests check which table runs). */
export function opsName(): string {
  return table.name;
}

/**
 * The ops a model of these sizes runs on the current backend, resolved once per size. The key names every field of
 * OpDims (KEYED below fails to compile when a field is added without it); it is built on every decode step, so it is
 * a template, not a walk over the object.
 */
export function modelOps(d: OpDims): ModelOps {
  const key = `${d.headDim},${d.dFf}`;
  let ops = resolved.get(key);
  if (!ops) resolved.set(key, (ops = resolveOps(table, COMPOSED, d)));
  return ops;
}

/** Every OpDims field is in modelOps' key: a field added to OpDims and not to the key is a compile error here. */
type KeyedFields = 'headDim' | 'dFf';
const KEYED: Record<Exclude<keyof OpDims, KeyedFields>, never> & Record<KeyedFields, true> = { headDim: true, dFf: true };
void KEYED;
