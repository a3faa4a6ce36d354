// The record a sweep run from the command line (`credit-lens sweep`, local executor) keeps on disk, so that the
// extension can open its summary like one it started itself: `<output_dir>/sweep-<ts>/sweep.json`. The engine
// writes it (src/engine/sweep/run_sweep.ts) as each run starts and ends; the extension reads it
// (src/extension/sweeps.ts). A Slurm sweep's record is `<output_dir>/sweep-<ts>/slurm/sweep.json` (./slurm.ts).

/** What a sweep row shows for a run: its strategy and the knobs that name it (the strategy's own knob included). */
export interface SweepRunDescription {
  strategy: string;
  params: Record<string, string | number | boolean | null>;
}

export interface LocalSweepTaskJson extends SweepRunDescription {
  index: number;
  name: string;
  overrides: Record<string, unknown>;
  /** null until the run starts */
  run_dir: string | null;
  /** set when the run did not train: skipped after a stop, or failed before its run directory existed */
  outcome?: 'skipped' | 'failed';
  error?: string;
}

export interface LocalSweepJson {
  kind: 'credit-lens-sweep';
  version: 1;
  executor: 'local';
  sweep_dir: string;
  /** the config file, absolute */
  config: string;
  /** the sweep's name: the config's `name` */
  name: string;
  created: string;
  /** `--set` arguments the sweep was started with */
  sets: string[];
  /** the process training the sweep, while it runs (pid on host); null once it has ended */
  pid: number | null;
  host: string;
  tasks: LocalSweepTaskJson[];
}

export const LOCAL_SWEEP_JSON = 'sweep.json';

export function isLocalSweepJson(x: unknown): x is LocalSweepJson {
  const o = x as Partial<LocalSweepJson> | null;
  return !!o && o.kind === 'credit-lens-sweep' && o.version === 1 && typeof o.sweep_dir === 'string' && Array.isArray(o.tasks);
}
