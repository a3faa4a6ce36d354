// Checkpoints (design.md#run-directory, contract): `<run>/checkpoints/step-000025/` holds model.safetensors,
// head.safetensors (the attribution head, when there is one), optimizer.safetensors and meta.json.
// A checkpoint is written into `step-000025.tmp-<pid>/`, flushed to disk and renamed into place, so a
// folder named `step-NNNNNN` is always complete; a crash mid-save leaves only a `.tmp-*` folder, which
// every reader ignores and the next save of a live process removes.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { isUserError, UserError } from '../core/errors';
import { processAlive } from './run_lock';
import { renameWithRetry, writeFileAtomic } from '../core/files';
import { readSafetensors, writeSafetensors, type StTensor } from '../model/safetensors';

export type TensorMap = Record<string, StTensor>;

export interface CheckpointParts {
  model: TensorMap;
  /** The attribution strategy's head (design.md#semantics: "The head is saved in checkpoints"). */
  head?: TensorMap;
  /**
   * model.lora's adapters (PEFT names and layout: lora_A [r, in], lora_B [out, r]); `model` then holds the merged
   * weights W + (α/r)·B·A, the policy every reader (eval, probe, import --model) runs, and a resume rebuilds the
   * adapters on the base model from these.
   */
  adapters?: TensorMap;
  /** `state` holds the optimizer's slot tensors (e.g. Adam's first and second moments), by name. */
  optimizer: { name: string; step: number; state: TensorMap };
  /** Phase, RNG state, config hash, metrics so far…: anything JSON can hold. */
  meta: Record<string, unknown>;
}

export interface LoadedCheckpoint extends CheckpointParts {
  step: number;
  dir: string;
}

export interface CheckpointEntry {
  step: number;
  dir: string;
}

const FORMAT = 'credit-lens-checkpoint';
const VERSION = 1;
const MODEL = 'model.safetensors';

/** The file of a checkpoint that holds the policy's weights. */
export function checkpointModelFile(dir: string): string {
  return join(dir, MODEL);
}
const HEAD = 'head.safetensors';
const ADAPTERS = 'adapters.safetensors';
const OPTIMIZER = 'optimizer.safetensors';
const META = 'meta.json';
const FINAL_NAME = /^step-(\d+)$/;
const LEFTOVER_NAME = /^step-\d+\.(?:tmp|old)-(\d+)$/;

export function checkpointsRoot(runDir: string): string {
  return join(runDir, 'checkpoints');
}

export function checkpointDir(runDir: string, step: number): string {
  return join(checkpointsRoot(runDir), `step-${String(step).padStart(6, '0')}`);
}

function namesIn(root: string): string[] {
  try {
    return readdirSync(root);
  } catch {
    return [];
  }
}

function listIn(root: string, names = namesIn(root)): CheckpointEntry[] {
  const out: CheckpointEntry[] = [];
  for (const n of names) {
    const m = FINAL_NAME.exec(n);
    if (m) out.push({ step: Number(m[1]), dir: join(root, n) });
  }
  return out.sort((a, b) => a.step - b.step);
}

/**
 * Finishes a replacement that a kill interrupted. Replacing `step-N` renames it to `step-N.old-<pid>`, then the complete
 * `step-N.tmp-<pid>` to `step-N`; a writer killed between the two renames leaves no `step-N` at all. For a dead
 * writer's pair: the new one takes the name when it is complete (its meta.json is written last), else the old one
 * goes back. Without this, the leftovers were dropped as litter and the checkpoint was lost. `names`: the folder's
 * entries as just read; returns whether it renamed anything (the listing is then stale).
 */
function recoverInterruptedSwaps(root: string, names: string[]): boolean {
  let renamed = false;
  for (const n of names) {
    const m = /^(step-\d+)\.old-(\d+)$/.exec(n);
    if (!m || Number(m[2]) === process.pid || processAlive(Number(m[2]))) continue;
    const final = join(root, m[1]);
    const old = join(root, n);
    if (existsSync(final)) continue; // the swap finished; the old copy is litter that prune drops
    const fresh = join(root, `${m[1]}.tmp-${m[2]}`);
    if (existsSync(join(fresh, META))) {
      renameWithRetry(fresh, final);
      rmSync(old, { recursive: true, force: true });
    } else {
      renameWithRetry(old, final);
    }
    renamed = true;
  }
  return renamed;
}

/** The run's complete checkpoints, oldest first (an interrupted replacement is finished first; `.tmp-*` folders are not). */
export function listCheckpoints(runDir: string): CheckpointEntry[] {
  const root = checkpointsRoot(runDir);
  const names = namesIn(root);
  return recoverInterruptedSwaps(root, names) ? listIn(root) : listIn(root, names);
}

/** The newest complete checkpoint's folder, or null when the run has none. */
export function latestCheckpoint(runDir: string): string | null {
  const all = listCheckpoints(runDir);
  return all.length ? all[all.length - 1].dir : null;
}

/** Flush a file or folder to disk. Windows cannot open folders for fsync; NTFS journals the rename anyway. */
function fsyncPath(path: string, isDir: boolean): void {
  let fd: number;
  try {
    fd = openSync(path, isDir ? 'r' : 'r+');
  } catch (e) {
    if (isDir) return;
    throw e;
  }
  try {
    fsyncSync(fd);
  } catch (e) {
    if (!isDir) throw e;
  } finally {
    closeSync(fd);
  }
}

function checkTensors(what: string, tensors: TensorMap): void {
  for (const [name, t] of Object.entries(tensors)) {
    const count = t.shape.reduce((a, d) => a * d, 1);
    if (count !== t.data.length) throw new Error(`checkpoint ${what} tensor ${name}: shape [${t.shape}] holds ${count} values but data has ${t.data.length}`);
  }
}

/**
 * Save a checkpoint for `step` and return its folder. Keeps the newest `keep` checkpoints (default 3) and
 * deletes older ones; saving a step that already has a checkpoint (a stop request right after a periodic
 * save, a resumed run) replaces it.
 */
export function saveCheckpoint(runDir: string, step: number, parts: CheckpointParts, opts: { keep?: number } = {}): string {
  const keep = opts.keep ?? 3;
  if (!Number.isInteger(step) || step < 0) throw new Error(`checkpoint step must be a non-negative integer, got ${step}`);
  if (!(keep >= 1)) throw new Error(`checkpoint keep must be at least 1, got ${keep}`);
  checkTensors('model', parts.model);
  if (parts.head) checkTensors('head', parts.head);
  if (parts.adapters) checkTensors('adapters', parts.adapters);
  checkTensors('optimizer', parts.optimizer.state);

  const root = checkpointsRoot(runDir);
  mkdirSync(root, { recursive: true });
  const final = checkpointDir(runDir, step);
  const tmp = `${final}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  try {
    const files: Record<string, number> = {};
    const put = (name: string, tensors: TensorMap) => {
      const p = join(tmp, name);
      writeSafetensors(p, tensors);
      fsyncPath(p, false);
      files[name] = statSync(p).size;
    };
    put(MODEL, parts.model);
    if (parts.head) put(HEAD, parts.head);
    if (parts.adapters) put(ADAPTERS, parts.adapters);
    put(OPTIMIZER, parts.optimizer.state);
    // File sizes let the loader tell a truncated file from an intact one before parsing it.
    const meta = {
      format: FORMAT,
      version: VERSION,
      step,
      saved_at: new Date().toISOString(),
      files,
      optimizer: { name: parts.optimizer.name, step: parts.optimizer.step },
      meta: parts.meta,
    };
    writeFileAtomic(join(tmp, META), JSON.stringify(meta, null, 2) + '\n', { fsync: true });
    fsyncPath(tmp, true);

    if (existsSync(final)) {
      // rename(2) cannot replace a non-empty folder: move the old one aside, then drop it.
      const old = `${final}.old-${process.pid}`;
      rmSync(old, { recursive: true, force: true });
      renameWithRetry(final, old);
      renameWithRetry(tmp, final);
      rmSync(old, { recursive: true, force: true });
    } else {
      renameWithRetry(tmp, final);
    }
    fsyncPath(root, true);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  prune(root, keep);
  return final;
}

function prune(root: string, keep: number): void {
  recoverInterruptedSwaps(root, namesIn(root));
  // Step 0 is the end of the SFT warm start: the branching point other runs start from (model.init_checkpoint)
  // and what GRPO's gain is measured against, so it is never pruned.
  const all = listIn(root).filter((c) => c.step !== 0);
  for (const c of all.slice(0, Math.max(0, all.length - keep))) rmSync(c.dir, { recursive: true, force: true });
  for (const n of readdirSync(root)) {
    const m = LEFTOVER_NAME.exec(n);
    // Another live process may be mid-save into its own tmp folder; only a dead writer's leftovers go.
    if (m && Number(m[1]) !== process.pid && !processAlive(Number(m[1]))) rmSync(join(root, n), { recursive: true, force: true });
  }
}

/**
 * Load a checkpoint folder. A damaged one (missing file, truncated safetensors, unreadable meta.json) is
 * a UserError naming the folder, what is wrong, and the previous checkpoint of the same run, if any.
 */
export function loadCheckpoint(dir: string): LoadedCheckpoint {
  const corrupted = (what: string): UserError => {
    const m = FINAL_NAME.exec(basename(dir));
    const earlier = m ? listIn(dirname(dir)).filter((c) => c.step < Number(m[1])) : [];
    const advice = earlier.length
      ? ` The previous checkpoint ${earlier[earlier.length - 1].dir} may be intact: resume from it instead.`
      : ' There is no earlier checkpoint in this run.';
    return new UserError(`checkpoint ${dir} is corrupted: ${what}.${advice}`);
  };

  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw new UserError(`checkpoint ${dir} does not exist or is not a folder`);

  let text: string;
  try {
    text = readFileSync(join(dir, META), 'utf8');
  } catch {
    throw corrupted(`${META} is missing`);
  }
  let meta: Record<string, unknown>;
  try {
    meta = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw corrupted(`${META} is not valid JSON (${(e as Error).message})`);
  }
  if (typeof meta !== 'object' || meta === null || meta.format !== FORMAT) throw corrupted(`${META} is not a Credit Lens checkpoint record`);
  const opt = meta.optimizer as { name?: unknown; step?: unknown } | undefined;
  const files = meta.files as Record<string, unknown> | undefined;
  if (
    typeof meta.step !== 'number' ||
    typeof opt?.name !== 'string' ||
    typeof opt.step !== 'number' ||
    typeof files !== 'object' ||
    files === null ||
    typeof meta.meta !== 'object' ||
    meta.meta === null
  ) {
    throw corrupted(`${META} lacks step, optimizer {name, step}, files or meta`);
  }
  if (!(MODEL in files) || !(OPTIMIZER in files)) throw corrupted(`${META} does not list ${MODEL} and ${OPTIMIZER}`);

  const load = (name: string): TensorMap => {
    const p = join(dir, name);
    let size: number;
    try {
      size = statSync(p).size;
    } catch {
      throw corrupted(`${name} is missing`);
    }
    if (size !== files[name]) throw corrupted(`${name} is ${size} bytes but was saved with ${files[name]} (truncated or overwritten)`);
    try {
      return readSafetensors(p).tensors;
    } catch (e) {
      if (isUserError(e)) throw corrupted(`${name} cannot be read (${e.message})`);
      throw e;
    }
  };

  return {
    step: meta.step,
    dir,
    model: load(MODEL),
    ...(HEAD in files ? { head: load(HEAD) } : {}),
    ...(ADAPTERS in files ? { adapters: load(ADAPTERS) } : {}),
    optimizer: { name: opt.name, step: opt.step, state: load(OPTIMIZER) },
    meta: meta.meta as Record<string, unknown>,
  };
}

/**
 * The newest checkpoint that loads, newest first, with the ones skipped on the way and why. A checkpoint damaged
 * after it was written (a bad disk, a bad copy, an edited file) must not strand the run: resume falls back to the
 * previous good one and says so. Throws only when none loads, naming each checkpoint and its fault.
 */
export function loadLatestGoodCheckpoint(runDir: string): { checkpoint: LoadedCheckpoint; skipped: { dir: string; reason: string }[] } | null {
  const all = listCheckpoints(runDir);
  if (!all.length) return null;
  const skipped: { dir: string; reason: string }[] = [];
  for (const c of [...all].reverse()) {
    try {
      return { checkpoint: loadCheckpoint(c.dir), skipped };
    } catch (e) {
      if (!isUserError(e)) throw e;
      skipped.push({ dir: c.dir, reason: e.message });
    }
  }
  throw new UserError(`${runDir}: no checkpoint can be loaded:\n${skipped.map((s) => `  ${s.reason}`).join('\n')}`);
}
