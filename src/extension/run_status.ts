// A run's status as the extension sees it: run.json's (design.md#run-directory) plus the states only a live engine
// process has. Pure, so the tree, the sweep table and the run manager ask the same two questions the same way.
import { resolve } from 'node:path';
import { WARM_START_DIR, type RunInfo, type RunStatus } from '../protocol/index';

export type LiveStatus = 'queued' | 'starting' | 'running' | 'stopping' | RunStatus | 'cancelled';

const ENDED: ReadonlySet<string> = new Set<LiveStatus>(['completed', 'failed', 'stopped', 'cancelled']);
const TRAINING: ReadonlySet<string> = new Set<LiveStatus>(['starting', 'running', 'stopping']);

/** Nothing more will happen to the run. */
export const isEnded = (s: LiveStatus): boolean => ENDED.has(s);

/**
 * An engine process holds the run: it counts against `maxConcurrentRuns` and its files still change.
 * run.json's `running` is one of these; the caller decides whether that engine is still alive (engineAlive).
 */
export const isTraining = (s: LiveStatus | null | undefined): boolean => s != null && TRAINING.has(s);

/** "started 27 Nov 14:02 · ended 14:05 · took 3 min 12 s", in local time (a hover); a running run says how long so far. */
export function timesOf(started: string, ended: string | null | undefined, running: boolean, now = Date.now()): string {
  const t0 = Date.parse(started);
  if (!Number.isFinite(t0)) return `started ${started}`;
  const t1 = ended ? Date.parse(ended) : NaN;
  const day = (t: number) => new Date(t).toLocaleDateString(undefined, { day: 'numeric', month: 'short' });
  const time = (t: number) => new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const span = (ms: number) => {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  };
  const start = `started ${day(t0)} ${time(t0)}`;
  if (!Number.isFinite(t1)) return running ? `${start} · running for ${span(now - t0)}` : start;
  return `${start} · ended ${day(t1) === day(t0) ? '' : `${day(t1)} `}${time(t1)} · took ${span(t1 - t0)}`;
}

/** "27 Nov 14:02": when a run started, in local time, for the end of its tree row (its label is its short name). */
export function startedShort(started: string): string {
  const t = Date.parse(started);
  if (!Number.isFinite(t)) return '';
  const d = new Date(t);
  return `${d.toLocaleDateString(undefined, { day: 'numeric', month: 'short' })} ${d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })}`;
}

/**
 * A shared SFT warm start is no experiment of its own: it goes under the config whose runs start from it (the first
 * such, by run.json's warm_start), marked to be shown as "shared warm start", and its own group goes if that leaves it
 * empty and no config file holds it.
 */
export function placeWarmStarts<R extends { runDir: string | null; info: RunInfo | null; warmStart?: boolean }>(
  groups: Map<string, { key: string; configPath: string | null; runs: R[] }>,
): void {
  for (const g of [...groups.values()]) {
    for (const w of g.runs.filter((r) => r.runDir && WARM_START_DIR.test(r.runDir))) {
      w.warmStart = true;
      const users = [...groups.values()].find((h) => h.runs.some((r) => r.info?.warm_start && resolve(r.info.warm_start) === resolve(w.runDir!)));
      if (!users || users === g) continue;
      g.runs.splice(g.runs.indexOf(w), 1);
      users.runs.push(w);
      if (!g.runs.length && !g.configPath) groups.delete(g.key);
    }
  }
}
