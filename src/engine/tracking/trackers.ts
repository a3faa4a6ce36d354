// Where a run's metrics go beside metrics.jsonl: every sink of sinks/catalog.ts whose `logging.<key>` setting asks for
// it (TensorBoard event files, an MLflow server). The trainer, the importer and `export tensorboard` feed them the same
// rows and token columns through this one list.
import type { MetricsRow } from '../../protocol';
import { METRIC_SINKS } from './sinks/catalog';
import type { MetricSink, RunEndStatus, SinkContext, SinkSpec } from './sink';
import type { TokenColumnsForHistograms } from './tags';

export { TENSORBOARD_DIR } from './sinks/tensorboard';

export interface TrackerOptions extends SinkContext {
  /** the run's logging section: each sink reads its own key (absent: the sink's default) */
  logging: Readonly<Record<string, unknown>>;
}

export class RunTrackers {
  private readonly sinks: MetricSink[];

  constructor(o: TrackerOptions) {
    this.sinks = (METRIC_SINKS as readonly SinkSpec[]).flatMap((spec) => {
      // a caller that names only some keys (an import: tensorboard) gets the others' defaults, which are off
      const sink = spec.open(spec.schema.parse(o.logging[spec.key]), o);
      return sink ? [sink] : [];
    });
  }

  /** Whether any sink keeps artifacts: the trainer then builds them (the credit analysis costs a pass over the tables). */
  get keepsArtifacts(): boolean {
    return this.sinks.some((s) => s.artifact);
  }

  /** One metrics.jsonl row, as it is appended. */
  metrics(row: MetricsRow, wallTime = Date.now() / 1000): void {
    for (const s of this.sinks) s.metrics(row, wallTime);
  }

  /** A logged step's token columns. */
  tokens(step: number, cols: TokenColumnsForHistograms, wallTime = Date.now() / 1000): void {
    for (const s of this.sinks) s.tokens?.(step, cols, wallTime);
  }

  /** A file for the sinks that keep artifacts (run.json, the analysis summary). */
  artifact(name: string, body: string): void {
    for (const s of this.sinks) s.artifact?.(name, body);
  }

  /** The run's end, in every sink at once (each wait is bounded). */
  async end(status: RunEndStatus): Promise<void> {
    await Promise.all(this.sinks.map((s) => s.end(status)));
  }

  close(): void {
    for (const s of this.sinks) s.close();
  }
}
