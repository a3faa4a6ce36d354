// Step tables read off the extension host's main thread: one worker thread (table_worker.ts) reads and
// checks the Arrow files, and a read that takes longer than a time limit ends the worker and fails with a message
// naming the file, instead of freezing the host. Requests queue on the host and go to the one worker one at a time, so
// the limit times the read itself; a new worker starts on demand.
// No vscode import, so the unit tests drive it against real tables.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { EpisodeColumns, TokenColumnsRead } from '../engine/rundir/arrow_tables';
import { stepFile } from '../engine/rundir/rundir';

export interface TableRequest {
  id: number;
  kind: 'step' | 'episodes';
  runDir: string;
  step: number;
}

export type TableReply = { id: number; ok: true; episodes: EpisodeColumns; tokens?: TokenColumnsRead } | { id: number; ok: false; error: string };

interface Pending {
  req: TableRequest;
  resolve: (r: TableReply & { ok: true }) => void;
  reject: (e: Error) => void;
}

export class TableReader {
  private worker: Worker | null = null;
  /** Reads wait here, on the host, and go to the worker one at a time: the time limit is the read's, not its wait's. */
  private readonly queue: Pending[] = [];
  private inflight: (Pending & { timer: NodeJS.Timeout }) | null = null;
  private next = 1;

  /**
   * @param workerPath the bundled worker (dist/extension/table_worker.js)
   * @param timeoutMs how long one read may take, from when the worker is given it, before the worker is ended and the
   *   read fails (reads queued behind a slow one do not spend their limit waiting)
   */
  constructor(
    private readonly workerPath = join(__dirname, 'table_worker.js'),
    private readonly timeoutMs = 30_000,
  ) {}

  /** A step's token and episode tables. */
  async step(runDir: string, step: number): Promise<{ tokens: TokenColumnsRead; episodes: EpisodeColumns }> {
    const r = await this.request('step', runDir, step);
    return { tokens: r.tokens!, episodes: r.episodes };
  }

  /** A step's episode table. */
  async episodes(runDir: string, step: number): Promise<EpisodeColumns> {
    return (await this.request('episodes', runDir, step)).episodes;
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    if (!existsSync(this.workerPath)) throw new Error(`the table reader ${this.workerPath} is missing: rebuild the extension (npm run build)`);
    const w = new Worker(this.workerPath);
    w.on('message', (m: TableReply) => {
      const p = this.inflight;
      if (this.worker !== w || !p || p.req.id !== m.id) return;
      this.settle(m.ok ? null : new Error(m.error), m);
    });
    // A crash of the worker (out of memory on a hostile file) fails what it was reading; the next read starts anew.
    const fail = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      this.settle(new Error(why));
    };
    w.on('error', (e) => fail(`reading a step table failed: ${e.message}`));
    w.on('exit', (code) => fail(`the table reader stopped (exit ${code})`));
    w.unref();
    this.worker = w;
    return w;
  }

  /** Ends the read in flight (with its reply, or an error) and gives the worker the next one. */
  private settle(error: Error | null, reply?: TableReply): void {
    const p = this.inflight;
    this.inflight = null;
    if (p) {
      clearTimeout(p.timer);
      if (error) p.reject(error);
      else p.resolve(reply as TableReply & { ok: true });
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
      const file = stepFile(p.req.runDir, p.req.kind === 'step' ? 'tokens' : 'episodes', p.req.step);
      // The worker may be stuck in that file: end it; the reads queued behind it go to a new one.
      this.worker = null;
      void w.terminate();
      this.settle(new Error(`reading ${file} took longer than ${this.timeoutMs / 1000} s and was stopped; the file may be damaged`));
    }, this.timeoutMs);
    this.inflight = { ...p, timer };
    w.postMessage(p.req);
  }

  private request(kind: TableRequest['kind'], runDir: string, step: number): Promise<TableReply & { ok: true }> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req: { id: this.next++, kind, runDir, step }, resolve, reject });
      this.pump();
    });
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
