// The run lock: one engine trains a run directory at a time. The holder writes `<run>/.lock` (pid, host, a token) and
// touches it every LOCK_HEARTBEAT_MS while it lives; a lock whose pid is gone on this host, or whose heartbeat is older
// than LOCK_STALE_MS on any host, is stale, and the next engine takes it over atomically and resumes. The run
// directory's files are rundir.ts's; this file is only who may write them.
import { closeSync, openSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { sleepSync } from '../core/files';

export const RUN_LOCK = '.lock';

export interface LockHolder {
  pid: number;
  host: string;
  started: string;
  /** tells two holders with one pid apart (containers on one host number their processes alike) */
  token?: string;
}

/** The holder refreshes its lock's mtime this often while it lives (a timer, and between steps). */
export const LOCK_HEARTBEAT_MS = 30_000;
/**
 * A lock whose heartbeat is older than this is stale whatever its host: its holder was killed (SIGKILL, out of memory, a
 * lost node) or its host renamed. Generous against a holder that blocks its event loop for a long step.
 */
export const LOCK_STALE_MS = 10 * 60_000;
/** A take-over marker older than this belongs to a taker that died mid-take-over (a live one holds it for milliseconds). */
const TAKEOVER_STALE_MS = 30_000;

export interface RunLockOptions {
  host?: string;
  heartbeatMs?: number;
  staleMs?: number;
  /** the lock file, relative to the run directory: `.lock` for training, `probes/step-N.lock` for a step's probe */
  file?: string;
  /** what its holder is doing, for the refusal (default "run is already running") */
  doing?: string;
}

/** The run is locked by another live engine (a caller that may wait, such as a shared warm start, tells it apart). */
export class RunLockedError extends UserError {
  constructor(
    message: string,
    hint?: string,
    /** the holder, as its lock file names it, and how long ago it last beat */
    readonly holder?: LockHolder,
    readonly heartbeatAgeMs?: number,
  ) {
    super(message, hint);
  }
}

/** Whether a process with this pid exists on this host (EPERM: it exists, owned by someone else). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readLock(path: string): { holder: LockHolder | null; text: string; ageMs: number } | null {
  try {
    const text = readFileSync(path, 'utf8');
    const ageMs = Date.now() - statSync(path).mtimeMs;
    let holder: LockHolder | null = null;
    try {
      const h = JSON.parse(text) as LockHolder;
      if (typeof h?.pid === 'number' && typeof h.host === 'string') holder = h;
    } catch {
      /* torn, or being written */
    }
    return { holder, text, ageMs };
  } catch {
    return null; // gone
  }
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;

/**
 * One engine per run directory: two resumes (two windows, two shells, a requeued Slurm task and a leftover one)
 * would interleave metrics rows and overwrite each other's checkpoints. The lock is `<run>/.lock`, created with
 * O_EXCL and holding {pid, host, started, token}; its holder touches it every `heartbeatMs` while it lives. A lock is
 * stale when its heartbeat is older than `staleMs` whatever its host (a holder killed on another node, a renamed host,
 * a container whose pid numbers repeat), or at once when its pid is gone on this host. A stale lock is taken over
 * atomically: the taker first creates `.lock.takeover` with O_EXCL, re-reads the lock, and only if it is the same stale
 * lock renames its own over it; every other taker finds the marker, waits, and then sees the new live lock. Returns
 * release().
 */
export function acquireRunLock(runDir: string, opts: RunLockOptions | string = {}): () => void {
  const o = typeof opts === 'string' ? { host: opts } : opts;
  const host = o.host ?? hostname();
  const heartbeatMs = o.heartbeatMs ?? LOCK_HEARTBEAT_MS;
  const staleMs = o.staleMs ?? LOCK_STALE_MS;
  const path = join(runDir, o.file ?? RUN_LOCK);
  const me: LockHolder = { pid: process.pid, host, started: new Date().toISOString(), token: randomBytes(8).toString('hex') };
  const mine = JSON.stringify(me) + '\n';
  const held = (): (() => void) => {
    const beat = () => {
      try {
        const t = new Date();
        utimesSync(path, t, t);
      } catch {
        /* released, or the folder is gone */
      }
    };
    const timer = setInterval(beat, heartbeatMs);
    timer.unref();
    return () => {
      clearInterval(timer);
      if (readLock(path)?.holder?.token === me.token) rmSync(path, { force: true });
    };
  };
  const deadline = Date.now() + 10_000;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, mine, { flag: 'wx' });
      return held();
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new UserError(`cannot lock ${runDir} (${(e as NodeJS.ErrnoException).code}): is the run directory writable?`);
    }
    if (Date.now() > deadline) throw new UserError(`cannot lock ${runDir}: another engine keeps taking the lock`);
    const cur = readLock(path);
    if (!cur) continue; // released a moment ago: create it
    const h = cur.holder;
    if (h?.token === me.token) return held(); // our take-over, just done
    if (!h) {
      // Being written right now by another engine, or torn by a crash: give it a moment before calling it stale.
      if (cur.ageMs < 2000) {
        sleepSync(50);
        continue;
      }
    } else if (cur.ageMs <= staleMs) {
      const here = h.host === host;
      const gone = here && !processAlive(h.pid);
      if (!gone) {
        const hint = `it is taken over once its heartbeat (last ${seconds(cur.ageMs)} ago) is ${seconds(staleMs)} old; if that process is gone and you cannot wait, delete ${path}`;
        throw new RunLockedError(`${o.doing ?? 'run is already running'} (pid ${h.pid}${here ? '' : ` on ${h.host}`}): ${runDir}`, hint, h, cur.ageMs);
      }
    }
    takeOver(path, cur.text, mine);
    sleepSync(attempt < 5 ? 20 : 100);
  }
}

/** Replaces the stale lock whose text is `stale` by `mine`, if this process wins the take-over marker; else nothing. */
function takeOver(path: string, stale: string, mine: string): void {
  const marker = `${path}.takeover`;
  try {
    closeSync(openSync(marker, 'wx'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    // Another taker is at work; one that died mid-take-over leaves a marker that ages out.
    try {
      if (Date.now() - statSync(marker).mtimeMs > TAKEOVER_STALE_MS) rmSync(marker, { force: true });
    } catch {
      /* gone already */
    }
    return;
  }
  try {
    const now = readLock(path);
    if (now && now.text === stale) {
      const tmp = `${path}.tmp-${process.pid}`;
      writeFileSync(tmp, mine);
      renameSync(tmp, path);
    }
  } finally {
    rmSync(marker, { force: true });
  }
}
