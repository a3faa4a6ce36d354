// What a metric sink is: somewhere a run's metrics go beside metrics.jsonl, which stays the record. One file per sink
// under sinks/ and one entry in sinks/catalog.ts, as transformers' INTEGRATION_TO_CALLBACK makes each `report_to` value
// a callback: the entry declares its `logging.<key>` setting, and RunTrackers opens every sink whose setting asks for it.
import type { z } from 'zod';
import type { MetricsRow } from '../../protocol';
import type { TokenColumnsForHistograms } from './tags';
import type { MlflowRunRef } from './mlflow';

/** How a run ended, in MLflow's words (the only sink with a status today; the others close). */
export type RunEndStatus = 'FINISHED' | 'FAILED' | 'KILLED';

export interface MetricSink {
  /** One metrics.jsonl row, as it is appended (wall time in seconds). */
  metrics(row: MetricsRow, wallTime: number): void;
  /** A logged step's token columns (TensorBoard draws them as histograms). */
  tokens?(step: number, cols: TokenColumnsForHistograms, wallTime: number): void;
  /** A file for the sink's artifact store (run.json, the analysis summary). */
  artifact?(name: string, body: string): void;
  /** The run's end: its status set after what is queued (a bounded wait), and every file closed. */
  end(status: RunEndStatus): Promise<void>;
  /** Files closed at once, without a status (a crash path, an export). */
  close(): void;
}

/** What a sink is opened with: the run, and where it resumes from. */
export interface SinkContext {
  runDir: string;
  runName: string;
  /** the run's config (no secrets), for sinks that record parameters */
  config?: unknown;
  /**
   * A resumed run: the phase and last step its checkpoint holds, so a sink can drop what came after it, and how many
   * metrics rows the abandoned trajectory had logged after that checkpoint (0: the run stopped at its checkpoint).
   */
  resume?: { phase: 'sft' | 'grpo'; step: number; abandonedRows?: number } | null;
  /** the MLflow run a resumed run goes on logging to, and the hook that records a new one in run.json */
  mlflowRun?: MlflowRunRef | null;
  onMlflowRun?: (ref: MlflowRunRef) => void;
  log: (level: 'info' | 'warn', message: string) => void;
}

export interface SinkSpec<K extends string = string, S extends z.ZodType = z.ZodType> {
  /** its setting, `logging.<key>` */
  readonly key: K;
  /** the setting's schema, with its default and its description (the config hover shows it) */
  readonly schema: S;
  /** The sink for this run, or null where the setting leaves it off. */
  open(setting: z.output<S>, ctx: SinkContext): MetricSink | null;
}
