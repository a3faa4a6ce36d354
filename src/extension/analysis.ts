// The filler/reasoning |contribution| ratio for the sweep table comes from the engine's own analysis
// (`credit-lens analyze <run> --json`, seed 002's token-type table), never from a re-implementation here.
import type { CreditAnalysis } from '../protocol/analysis';
import type { RunInfo } from '../protocol/index';
import type { EngineCli } from './engine_cli';

/** filler ÷ reasoning mean |c| as the report states it (`meta.filler_reasoning_ratio`, seed 002's headline). */
export function fillerReasoningRatio(analysis: Pick<CreditAnalysis, 'meta'> | null | undefined): number | null {
  const r = analysis?.meta?.filler_reasoning_ratio;
  return typeof r === 'number' && Number.isFinite(r) ? r : null;
}

/** At most this many analyses at once: a sweep summary of 36 ended runs must not start 36 engines. */
const MAX_PARALLEL = 2;

export class AnalysisRunner {
  private readonly results = new Map<string, number | null>();
  private readonly pending = new Set<string>();
  private readonly queue: (() => Promise<void>)[] = [];
  private running = 0;

  constructor(private readonly cli: EngineCli, private readonly onResult: () => void) {}

  /** The ratio for an ended run: null when unknown; the first call queues the analysis and onResult fires when it is done. */
  ratio(runDir: string, info: RunInfo | null): number | null {
    if (!info || info.status === 'running') return null;
    const key = `${runDir}\n${info.ended ?? ''}`;
    if (this.results.has(key)) return this.results.get(key)!;
    if (!this.pending.has(key)) {
      this.pending.add(key);
      this.queue.push(async () => {
        let v: number | null = null;
        try {
          v = fillerReasoningRatio(await this.cli.analyze(runDir));
        } catch {
          v = null; // a run with no token tables has no ratio; the cell shows —
        }
        this.pending.delete(key);
        this.results.set(key, v);
        this.onResult();
      });
      this.pump();
    }
    return null;
  }

  private pump(): void {
    while (this.running < MAX_PARALLEL && this.queue.length) {
      const job = this.queue.shift()!;
      this.running++;
      void job().finally(() => { this.running--; this.pump(); });
    }
  }
}
