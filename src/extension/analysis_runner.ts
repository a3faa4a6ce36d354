// The filler/reasoning |contribution| ratio for the sweep table comes from the engine's own analysis
// (seed doc 002's token-type table, `meta.filler_reasoning_ratio` of `credit-lens analyze`), never from a
// re-implementation here. Each ended run is analysed once per end time, in the background.
import { runGroup, type CompareReport } from '../protocol/compare';
import type { RunInfo } from '../protocol/index';
import type { EngineCli } from './engine_cli';
import { isTraining } from './run_status';

/** At most this many analyses at once: a sweep summary of 36 ended runs must not start 36 engines. */
const MAX_PARALLEL = 2;

/** A run as compareGroups sees it: `ready` when it has ended and can be compared. */
export interface GroupRun {
  dir: string;
  name: string;
  strategy: string | null;
  ready: boolean;
}

export interface GroupComparison {
  groups: string[];
  baseline: string | null;
  report: CompareReport | null;
  /** single: one configuration only; waiting: no ready run of the baseline or of another group; running; failed; done */
  state: 'single' | 'waiting' | 'running' | 'failed' | 'done';
  /** ready runs */
  ready: number;
  error?: string;
}

export class AnalysisRunner {
  private readonly results = new Map<string, number | null>();
  private readonly pending = new Set<string>();
  private readonly aborts = new AbortController();
  private readonly queue: (() => Promise<void>)[] = [];
  private running = 0;

  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly cli: EngineCli,
    private readonly onResultFn: () => void,
    private readonly warn: (msg: string) => void,
  ) {}

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
    return this.cached(this.results, `${runDir}\n${info.ended ?? ''}`, (signal) =>
      this.cli.analyze(runDir, { signal }).then(
        ({ report }) => report.meta.filler_reasoning_ratio,
        (e: Error) => {
          if (e.name !== 'CancelledError') this.warn(`analyze ${runDir}: ${e.message}`);
          return null;
        },
      ),
    );
  }

  private readonly comparisons = new Map<string, CompareReport | string>();

  /**
   * `credit-lens compare` of ended runs grouped by seed against the baseline's: the report, an error message, or
   * null while it runs (onResult fires when it is done). `stamp` changes when any run ends again (its end times).
   */
  comparison(baselineDirs: string[], otherDirs: string[], stamp: string, step?: number): CompareReport | string | null {
    return this.cached(this.comparisons, JSON.stringify([baselineDirs, otherDirs, stamp, step ?? null]), (signal) =>
      this.cli.compare(baselineDirs, otherDirs, { signal, step }).then(
        (r): CompareReport | string => r,
        (e: Error) => {
          if (e.name !== 'CancelledError') this.warn(`compare: ${e.message}`);
          return e.message;
        },
      ),
    );
  }

  /**
   * Runs grouped by configuration (runGroup: the name without `-seedN`), every other group tested against the
   * baseline group — `preferred` when it is one of them, else plain GRPO's (strategy none), else the first run's —
   * over the runs that are `ready` (ended), at `step` when given, else each run's last eval (or the latest step all
   * evaluated). What the sweep summary and Compare Runs show; each words its own notes.
   */
  compareGroups(runs: GroupRun[], preferred: string | null, stamp: string, step?: number): GroupComparison {
    const groups = [...new Set(runs.map((r) => runGroup(r.name)))];
    if (groups.length < 2) return { groups, baseline: groups[0] ?? null, report: null, state: 'single', ready: 0 };
    const baseline = preferred && groups.includes(preferred) ? preferred : runGroup((runs.find((r) => r.strategy === 'none') ?? runs[0]).name);
    const ready = runs.filter((r) => r.ready);
    const base = ready.filter((r) => runGroup(r.name) === baseline).map((r) => r.dir);
    const others = ready.filter((r) => runGroup(r.name) !== baseline).map((r) => r.dir);
    const out = { groups, baseline, ready: ready.length };
    if (!base.length || !others.length) return { ...out, report: null, state: 'waiting' };
    const r = this.comparison(base, others, stamp, step);
    if (r === null) return { ...out, report: null, state: 'running' };
    if (typeof r === 'string') return { ...out, report: null, state: 'failed', error: r };
    return { ...out, report: r, state: 'done' };
  }

  /** A background job's value by key: cached once done, started (at most MAX_PARALLEL at once) on the first ask. */
  private cached<T>(results: Map<string, T>, key: string, job: (signal: AbortSignal) => Promise<T>): T | null {
    if (results.has(key)) return results.get(key)!;
    if (!this.pending.has(key)) {
      this.pending.add(key);
      this.queue.push(() =>
        job(this.aborts.signal).then((v) => {
          this.pending.delete(key);
          results.set(key, v);
          if (!this.aborts.signal.aborted) this.onResult();
        }),
      );
      this.pump();
    }
    return null;
  }

  private pump(): void {
    while (this.running < MAX_PARALLEL && this.queue.length) {
      const job = this.queue.shift()!;
      this.running++;
      void job().finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  dispose(): void {
    this.aborts.abort();
  }
}
