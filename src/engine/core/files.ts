// Whole-file writes that a concurrent reader never sees half done: through a temporary file and a rename. The run
// directory, checkpoints, caches and model files all write this way, so it sits below every one of them.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { UserError } from './errors';

export function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** A wait of `ms`, cut short by `signal`; its abort listener goes with it (a follow or a client waits for hours). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * rename(2) replaces the target atomically on POSIX. On Windows it fails with EPERM/EACCES/EBUSY while
 * another process (the extension reading run.json, a virus scanner) has the target open, so retry briefly.
 */
export function renameWithRetry(from: string, to: string): void {
  for (let attempt = 0; ; attempt++) {
    try {
      renameSync(from, to);
      return;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const transient = process.platform === 'win32' && (code === 'EPERM' || code === 'EACCES' || code === 'EBUSY');
      if (!transient || attempt >= 10) throw e;
      sleepSync(10 * (attempt + 1));
    }
  }
}

/**
 * Write `data` to `path` through `path.tmp-<pid>` + rename. With `fsync`, the bytes reach the disk before
 * the rename, so even a power cut leaves the old file or the complete new one (used for checkpoints).
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, opts: { fsync?: boolean } = {}): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    const fd = openSync(tmp, 'w');
    try {
      writeFileSync(fd, data);
      if (opts.fsync) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameWithRetry(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw diskFullError(e, path);
  }
}

/**
 * A write that failed for want of space, as the user should read it: which file, and that what was written before is
 * intact (every whole-file write goes through a temporary file, so the previous checkpoint survives). Other errors pass
 * through unchanged.
 */
export function diskFullError(e: unknown, path: string): unknown {
  if (isDiskFull(e)) return new UserError(`disk full while writing ${path}`, 'free some space, then resume the run: its last checkpoint is intact');
  return e;
}

/** The error of a write that found no space (or no quota) left. */
export function isDiskFull(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

const hashes = new Map<string, { identity: string; hash: string }>();

/**
 * The sha256 of a file's bytes, hex; null where it cannot be read. Remembered by the file's identity (size, mtime,
 * inode), so a reader that asks again for a file that has not changed (every heatmap read of a probed step) pays a
 * stat, not a read of the whole file.
 */
export function sha256File(path: string): string | null {
  try {
    const st = statSync(path);
    const identity = `${st.size}:${st.mtimeMs}:${st.ino}`;
    const known = hashes.get(path);
    if (known?.identity === identity) return known.hash;
    const hash = createHash('sha256').update(readFileSync(path)).digest('hex');
    hashes.set(path, { identity, hash });
    return hash;
  } catch {
    return null;
  }
}
