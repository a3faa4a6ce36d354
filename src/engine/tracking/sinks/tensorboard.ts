// TensorBoard event files in the run directory (logging.tensorboard): scalars as they come, and the token table's
// columns as histograms under tokens/.
import { join } from 'node:path';
import { bool } from '../../core/fields';
import type { MetricSink, SinkContext, SinkSpec } from '../sink';
import { HISTOGRAM_COLUMNS, rowScalars, type TokenColumnsForHistograms } from '../tags';
import { EventFileWriter, histogramOf, type Histogram } from '../tensorboard';

export const TENSORBOARD_DIR = 'tensorboard';
/**
 * The SFT warm start's events go to their own folder, which TensorBoard shows as a run of its own: its steps restart at
 * 1 under the GRPO steps, and TensorBoard drops the points of any step that goes back (it reads them as a restart),
 * and a resume's purge marker acts on every tag of a folder.
 */
const TENSORBOARD_SFT_DIR = join(TENSORBOARD_DIR, 'sft');

class TensorBoardSink implements MetricSink {
  private readonly main: EventFileWriter;
  private readonly sft: EventFileWriter;

  constructor(ctx: SinkContext) {
    const r = ctx.resume;
    // GRPO step c's checkpoint keeps steps ≤ c; a checkpoint in the warm start (or at GRPO step 0, before the first
    // eval) keeps nothing of the GRPO folder
    this.main = new EventFileWriter(join(ctx.runDir, TENSORBOARD_DIR), r ? (r.phase === 'grpo' && r.step > 0 ? r.step + 1 : 0) : null);
    this.sft = new EventFileWriter(join(ctx.runDir, TENSORBOARD_SFT_DIR), r?.phase === 'sft' ? r.step + 1 : null);
  }

  metrics(row: Parameters<MetricSink['metrics']>[0], wallTime: number): void {
    (row.phase === 'sft' ? this.sft : this.main).add(row.step, rowScalars(row), [], wallTime);
  }

  tokens(step: number, cols: TokenColumnsForHistograms, wallTime: number): void {
    this.main.add(step, [], tokenHistograms(cols), wallTime);
  }

  async end(): Promise<void> {
    this.close();
  }

  close(): void {
    this.main.close();
    this.sft.close();
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

export const tensorboardSink = {
  key: 'tensorboard',
  schema: bool(
    'Write TensorBoard event files to <run>/tensorboard/ as the run goes (scalars grouped as train/, eval/, credit/, sft/ ' +
      "and each strategy's own, histograms of the token table under tokens/): tensorboard --logdir <output_dir> shows it " +
      'live, and wandb sync --sync-tensorboard uploads it (an addition to design.md#config).',
  ).default(true),
  open: (on: boolean, ctx: SinkContext): MetricSink | null => (on ? new TensorBoardSink(ctx) : null),
} as const satisfies SinkSpec;
