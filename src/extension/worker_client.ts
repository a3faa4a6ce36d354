// The extension host's worker for reading runs (run_worker.ts, one program): the heatmap's step tables and Browse
// Rollouts' queries over a run's tables held in memory. The extension starts it twice (ctx.ts), so that a burst of step
// reads and a query do not wait on each other. Reading a long run's tables on the host's main thread would freeze every
// extension while it runs, and a damaged file must never be able to.
//
// One timeout rule for every request: requests queue on the host and go to the worker one at a time, and a request's
// time limit counts from when the worker takes it (its own work, not its wait). A request past its limit ends the
// worker and fails with the message its sender gave; the requests queued behind it go to a new worker. A worker that
// dies fails the request it had. TableReader and QueryClient are the two typed views of it. No vscode import: the unit
// tests drive it against real tables.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { BrowseQuery, BrowseResult } from '../protocol/browse_view';
import type { EpisodeColumns, TokenColumnsRead } from '../engine/rundir/arrow_tables';
import { stepFile } from '../engine/rundir/rundir';

/** What the worker is asked (run_worker.ts answers each kind). */
export type RunRequest =
  | { id: number; kind: 'step' | 'episodes'; runDir: string; step: number }
  | { id: number; kind: 'query'; runDir: string; query: BrowseQuery }
  | { id: number; kind: 'export'; runDir: string; query: BrowseQuery; what: 'episodes' | 'tokens'; format: 'csv' | 'jsonl' };

export type RunReply =
  | { id: number; ok: true; episodes?: EpisodeColumns; tokens?: TokenColumnsRead; result?: BrowseResult; text?: string }
  | { id: number; ok: false; error: string };

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Ok = RunReply & { ok: true };

interface Job {
  req: RunRequest;
  /** how long the worker may take over it */
  ms: number;
  /** the error when it takes longer */
  late: string;
  resolve: (r: Ok) => void;
  reject: (e: Error) => void;
}

export class WorkerClient {
  private worker: Worker | null = null;
  private readonly queue: Job[] = [];
  private inflight: (Job & { timer: NodeJS.Timeout }) | null = null;
  private next = 1;

  /** @param workerPath the bundled worker (dist/extension/run_worker.js), or a stand-in in tests */
  constructor(private readonly workerPath = join(__dirname, 'run_worker.js')) {}

  /** Sends `req` once the requests before it are answered; rejects with `late` if the worker takes longer than `ms`. */
  request(req: DistributiveOmit<RunRequest, 'id'>, ms: number, late: string): Promise<Ok> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req: { ...req, id: this.next++ } as RunRequest, ms, late, resolve, reject });
      this.pump();
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    if (!existsSync(this.workerPath)) throw new Error(`the run reader ${this.workerPath} is missing: rebuild the extension (npm run build)`);
    const w = new Worker(this.workerPath);
    w.on('message', (m: RunReply) => {
      const p = this.inflight;
      if (this.worker !== w || !p || p.req.id !== m.id) return;
      this.settle(m.ok ? null : new Error(m.error), m);
    });
    // A crash of the worker (out of memory on a hostile file) fails what it was doing; the next request starts anew.
    const fail = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      this.settle(new Error(why));
    };
    w.on('error', (e) => fail(`reading the run failed: ${e.message}`));
    w.on('exit', (code) => fail(`the run reader stopped (exit ${code})`));
    w.unref();
    this.worker = w;
    return w;
  }

  /** Ends the request in flight (with its reply, or an error) and gives the worker the next one. */
  private settle(error: Error | null, reply?: RunReply): void {
    const p = this.inflight;
    this.inflight = null;
    if (p) {
      clearTimeout(p.timer);
      if (error) p.reject(error);
      else p.resolve(reply as Ok);
    }
    this.pump();
  }

  private pump(): void {
    if (this.inflight) return;
    const p = this.queue.shift();
    if (!p) return;
    let w: Worker;
    try {
      w = this.start();
    } catch (e) {
      p.reject(e as Error);
      return this.pump();
    }
    const timer = setTimeout(() => {
      if (this.inflight?.req.id !== p.req.id) return;
      // The worker may be stuck in that file: end it; the requests queued behind it go to a new one.
      this.worker = null;
      void w.terminate();
      this.settle(new Error(p.late));
    }, p.ms);
    this.inflight = { ...p, timer };
    w.postMessage(p.req);
  }

  dispose(): void {
    const waiting = [...(this.inflight ? [this.inflight] : []), ...this.queue.splice(0)];
    if (this.inflight) clearTimeout(this.inflight.timer);
    this.inflight = null;
    for (const p of waiting) p.reject(new Error('the extension is shutting down'));
    void this.worker?.terminate();
    this.worker = null;
  }
}

/** A typed view of a worker client with its own time limit; given a path (tests' stand-ins), it starts its own client. */
abstract class WorkerView {
  readonly client: WorkerClient;
  constructor(
    worker: WorkerClient | string | undefined,
    protected readonly timeoutMs: number,
  ) {
    this.client = worker instanceof WorkerClient ? worker : new WorkerClient(worker);
  }

  dispose(): void {
    this.client.dispose();
  }
}

/** Step tables: a read that takes longer than its limit fails naming the file, which may be damaged. */
export class TableReader extends WorkerView {
  constructor(worker?: WorkerClient | string, timeoutMs = 30_000) {
    super(worker, timeoutMs);
  }

  /** A step's token and episode tables. */
  async step(runDir: string, step: number): Promise<{ tokens: TokenColumnsRead; episodes: EpisodeColumns }> {
    const r = await this.read('step', runDir, step);
    return { tokens: r.tokens!, episodes: r.episodes! };
  }

  /** A step's episode table. */
  async episodes(runDir: string, step: number): Promise<EpisodeColumns> {
    return (await this.read('episodes', runDir, step)).episodes!;
  }

  private read(kind: 'step' | 'episodes', runDir: string, step: number): Promise<Ok> {
    const file = stepFile(runDir, kind === 'step' ? 'tokens' : 'episodes', step);
    return this.client.request(
      { kind, runDir, step },
      this.timeoutMs,
      `reading ${file} took longer than ${this.timeoutMs / 1000} s and was stopped; the file may be damaged`,
    );
  }
}

/** Browse Rollouts' queries and exports; the worker keeps the run's index loaded between them. */
export class QueryClient extends WorkerView {
  constructor(worker?: WorkerClient | string, timeoutMs = 120_000) {
    super(worker, timeoutMs);
  }

  async query(runDir: string, query: BrowseQuery): Promise<BrowseResult> {
    return (await this.client.request({ kind: 'query', runDir, query }, this.timeoutMs, this.late())).result!;
  }

  async exportRows(runDir: string, query: BrowseQuery, what: 'episodes' | 'tokens', format: 'csv' | 'jsonl'): Promise<string> {
    return (await this.client.request({ kind: 'export', runDir, query, what, format }, this.timeoutMs, this.late())).text!;
  }

  private late(): string {
    return `the query took longer than ${this.timeoutMs / 1000} s and was stopped`;
  }
}
