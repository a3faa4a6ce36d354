// Where a run's metrics go beside metrics.jsonl: TensorBoard event files in the run directory (logging.tensorboard) and
// an MLflow tracking server (logging.mlflow). The trainer and the importer feed them the same rows and token columns.
import { join } from 'node:path';
import type { MetricsRow } from '../../protocol';
import { MlflowTracker, flattenParams, type MlflowRunRef, type MlflowSettings, type MlflowStatus } from './mlflow';
import { HISTOGRAM_COLUMNS, rowScalars, type TokenColumnsForHistograms } from './tags';
import { EventFileWriter, histogramOf, type Histogram } from './tensorboard';

export const TENSORBOARD_DIR = 'tensorboard';
/**
 * The SFT warm start's events go to their own folder, which TensorBoard shows as a run of its own: its steps restart at
 * 1 under the GRPO steps, and TensorBoard drops the points of any step that goes back (it reads them as a restart),
 * and a resume's purge marker acts on every tag of a folder.
 */
const TENSORBOARD_SFT_DIR = join(TENSORBOARD_DIR, 'sft');

export interface TrackerOptions {
  runDir: string;
  runName: string;
  logging: { tensorboard: boolean; mlflow?: MlflowSettings | null };
  /** the run's config (no secrets), sent to MLflow as params */
  config?: unknown;
  /**
   * A resumed run: the phase and last step its checkpoint holds. TensorBoard is told to drop the abandoned steps after it
   * (a SessionLog START in the new file), and MLflow logging goes on in the MLflow run it names.
   */
  resume?: { phase: 'sft' | 'grpo'; step: number } | null;
  mlflowRun?: MlflowRunRef | null;
  onMlflowRun?: (ref: MlflowRunRef) => void;
  log: (level: 'info' | 'warn', message: string) => void;
}

export class RunTrackers {
  private readonly main: EventFileWriter | null;
  private readonly sft: EventFileWriter | null;
  readonly mlflow: MlflowTracker | null;

  constructor(o: TrackerOptions) {
    const r = o.resume;
    if (o.logging.tensorboard) {
      // GRPO step c's checkpoint keeps steps ≤ c; a checkpoint in the warm start (or at GRPO step 0, before the first
      // eval) keeps nothing of the GRPO folder
      this.main = new EventFileWriter(join(o.runDir, TENSORBOARD_DIR), r ? (r.phase === 'grpo' && r.step > 0 ? r.step + 1 : 0) : null);
      this.sft = new EventFileWriter(join(o.runDir, TENSORBOARD_SFT_DIR), r?.phase === 'sft' ? r.step + 1 : null);
    } else {
      this.main = this.sft = null;
    }
    this.mlflow = o.logging.mlflow
      ? new MlflowTracker(o.logging.mlflow, {
          runName: o.runName,
          runDir: o.runDir,
          existing: o.mlflowRun,
          params: o.mlflowRun ? {} : flattenParams(o.config ?? {}),
          log: o.log,
          onRun: o.onMlflowRun,
        })
      : null;
  }

  /** One metrics.jsonl row, as it is appended. */
  metrics(row: MetricsRow, wallTime = Date.now() / 1000): void {
    const scalars = rowScalars(row);
    (row.phase === 'sft' ? this.sft : this.main)?.add(row.step, scalars, [], wallTime);
    this.mlflow?.logMetrics(scalars.map(([key, value]) => ({ key, value, step: row.step, timestamp: Math.round(wallTime * 1000) })));
  }

  /** A logged step's token columns, as TensorBoard histograms under tokens/ (MLflow has no histograms). */
  tokens(step: number, cols: TokenColumnsForHistograms, wallTime = Date.now() / 1000): void {
    if (!this.main) return;
    this.main.add(step, [], tokenHistograms(cols), wallTime);
  }

  /** A file for MLflow's artifact store (run.json, the analysis summary). */
  artifact(name: string, body: string): void {
    this.mlflow?.logArtifact(name, body);
  }

  /** The run's end: the MLflow run's status set after what is queued (a bounded wait), and the event files closed. */
  async end(status: MlflowStatus): Promise<void> {
    this.close();
    await this.mlflow?.end(status);
  }

  close(): void {
    this.main?.close();
    this.sft?.close();
  }
}

function tokenHistograms(cols: TokenColumnsForHistograms): [string, Histogram][] {
  const out: [string, Histogram][] = [];
  for (const name of HISTOGRAM_COLUMNS) {
    const v = cols[name];
    const h = v ? histogramOf(v) : null;
    if (h) out.push([`tokens/${name}`, h]);
  }
  return out;
}
