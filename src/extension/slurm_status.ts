// How a Slurm sweep's task reads in the tree and the summary (pure: no vscode, unit-tested).
import { SLURM_ACTIVE_STATES, type SlurmTaskStatus } from '../protocol/slurm';
import type { SweepRow } from '../protocol/sweep_view';

export function slurmTaskActive(t: SlurmTaskStatus): boolean {
  return (
    (t.slurm_state !== null && (SLURM_ACTIVE_STATES as readonly string[]).includes(t.slurm_state)) || (t.slurm_state === null && t.run_status === 'running')
  );
}

/**
 * A Slurm sweep row's status: the run's own once its engine has written run.json (unless Slurm holds the task again,
 * e.g. requeued), else Slurm's view: pending and configuring are "queued", a task that ended without a run is
 * failed (out of memory, node failure, a path the job cannot see) or cancelled.
 */
export function slurmRowStatus(task: SlurmTaskStatus | null, runStatus: string | null, cancelled: boolean): SweepRow['status'] {
  const state = task?.slurm_state ?? null;
  const waiting = state === 'PENDING' || state === 'CONFIGURING' || state === 'REQUEUED' || state === 'REQUEUE_HOLD';
  if (runStatus && !waiting) {
    if (runStatus === 'running' && state !== null && !(SLURM_ACTIVE_STATES as readonly string[]).includes(state)) return 'failed';
    return runStatus as SweepRow['status'];
  }
  if (state === null) return cancelled ? 'cancelled' : 'queued';
  if (waiting) return 'queued';
  if (state === 'RUNNING' || state === 'COMPLETING') return 'running';
  if (state === 'CANCELLED' || cancelled) return 'cancelled';
  return 'failed';
}
