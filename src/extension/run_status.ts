// A run's status as the extension sees it: run.json's (DESIGN §5) plus the states only a live engine
// process has. Pure, so the tree, the sweep table and the run manager ask the same two questions the same way.
import type { RunStatus } from '../protocol/index';

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
