// The Slurm executor's files and answers, shared by the engine (which writes and prints them) and the extension
// (which reads them): `<sweep>/slurm/sweep.json` and `credit-lens slurm status --json`. Types, and the one list of
// the states in which a task is still alive, which both sides test against.
import type { SweepRunDescription } from './sweep_record';

export interface SlurmTaskJson extends Partial<SweepRunDescription> {
  index: number;
  name: string;
  config: string;
  run_dir: string;
  overrides: Record<string, unknown>;
}

/** `<output_dir>/sweep-<ts>/slurm/sweep.json`, and what `credit-lens sweep --executor slurm --json` prints. */
export interface SlurmSweepJson {
  kind: 'credit-lens-slurm-sweep';
  version: 1;
  sweep_dir: string;
  config: string;
  created: string;
  job_id: string | null;
  script: string;
  tasks: SlurmTaskJson[];
  /** tasks cancelled through `credit-lens slurm cancel`: a pending array task that is cancelled leaves no record in Slurm */
  cancelled?: number[];
}

export interface SlurmTaskStatus {
  index: number;
  name: string;
  run_dir: string;
  /** `<job>_<task>` */
  slurm_job: string | null;
  /** squeue / scontrol JobState: PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, … */
  slurm_state: string | null;
  /** the pending reason (Priority, Resources, BeginTime, JobArrayTaskLimit, …) */
  slurm_reason: string | null;
  /** run.json's status, once the run directory exists */
  run_status: string | null;
  /** what a person should read: the run's status once it has one, else Slurm's state, with a failure's cause */
  summary: string;
}

/** `credit-lens slurm status <sweep-dir> --json` */
export interface SlurmStatusJson {
  job_id: string | null;
  sweep_dir: string;
  tasks: SlurmTaskStatus[];
  /** why Slurm could not be asked (squeue or scontrol failed, not "job gone"); the tasks' Slurm states are then unknown */
  slurm_error: string | null;
}

/** Slurm states in which a task still waits or runs. */
export const SLURM_ACTIVE_STATES = [
  'PENDING',
  'CONFIGURING',
  'RUNNING',
  'COMPLETING',
  'REQUEUED',
  'RESIZING',
  'SUSPENDED',
  'REQUEUE_HOLD',
  'REQUEUE_FED',
] as const;
