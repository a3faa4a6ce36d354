// The filler/reasoning |contribution| ratio for the sweep table comes from the engine's own analysis
// (seed 002's token-type table, `meta.filler_reasoning_ratio` of `credit-lens analyze`), never from a
// re-implementation here. Each ended run is analysed once per end time, in the background.
import type { CompareReport } from '../protocol/compare';
import type { RunInfo } from '../protocol/index';
import type { EngineCli } from './engine_cli';
import { isTraining } from './run_status';

/** At most this many analyses at once: a sweep summary of 36 ended runs must not start 36 engines. */
const MAX_PARALLEL = 2;

export class AnalysisRunner {
  private readonly results = new Map<string, number | null>();
  private readonly pending = new Set<string>();
  private readonly aborts = new AbortController();
  private readonly queue: (() => Promise<void>)[] = [];
  private running = 0;

  private readonly listeners = new Set<() => void>();

  constructor(private readonly cli: EngineCli, private readonly onResultFn: () => void, private readonly warn: (msg: string) => void) {}

  /** Called, besides the constructor's callback, whenever an analysis or a comparison finishes. */
  subscribe(fn: () => void): { dispose(): void } {
    this.listeners.add(fn);
    return { dispose: () => this.listeners.delete(fn) };
  }

  private onResult(): void {
    this.onResultFn();
    for (const fn of this.listeners) fn();
  }

  /** The ratio for an ended run: null when unknown; the first call starts the analysis and onResult fires when it is done. */
  ratio(runDir: string, info: RunInfo | null): number | null {
    if (!info || isTraining(info.status)) return null;
    const key = `${runDir}\n${info.ended ?? ''}`;
    if (this.results.has(key)) return this.results.get(key)!;
    if (!this.pending.has(key)) {
      this.pending.add(key);
      this.queue.push(() => this.cli.analyze(runDir, { signal: this.aborts.signal }).then(
        ({ report }) => report.meta.filler_reasoning_ratio,
        (e: Error) => {
          if (e.name !== 'CancelledError') this.warn(`analyze ${runDir}: ${e.message}`);
          return null;
        },
      ).then((v) => {
        this.pending.delete(key);
        this.results.set(key, v);
        if (!this.aborts.signal.aborted) this.onResult();
      }));
      this.pump();
    }
    return null;
  }

  private readonly comparisons = new Map<string, CompareReport | string>();

  /**
   * `credit-lens compare` of ended runs grouped by seed against the baseline's: the report, an error message, or
   * null while it runs (onResult fires when it is done). `stamp` changes when any run ends again (its end times).
   */
  comparison(baselineDirs: string[], otherDirs: string[], stamp: string): CompareReport | string | null {
    const key = JSON.stringify([baselineDirs, otherDirs, stamp]);
    if (this.comparisons.has(key)) return this.comparisons.get(key)!;
    if (!this.pending.has(key)) {
      this.pending.add(key);
      this.queue.push(() => this.cli.compare(baselineDirs, otherDirs, { signal: this.aborts.signal }).then(
        (r) => r as CompareReport | string,
        (e: Error) => {
          if (e.name !== 'CancelledError') this.warn(`compare: ${e.message}`);
          return e.message;
        },
      ).then((v) => {
        this.pending.delete(key);
        this.comparisons.set(key, v);
        if (!this.aborts.signal.aborted) this.onResult();
      }));
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

  dispose(): void {
    this.aborts.abort();
  }
}
