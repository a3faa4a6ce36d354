// Step tables read off the extension host's main thread (issue 11): one worker thread (table_worker.ts) reads and
// checks the Arrow files, and a read that takes longer than a time limit ends the worker and fails with a message
// naming the file, instead of freezing the host. Requests queue on the one worker; a new worker starts on demand.
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
  resolve: (r: TableReply & { ok: true }) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class TableReader {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private next = 1;

  /**
   * @param workerPath the bundled worker (dist/extension/table_worker.js)
   * @param timeoutMs how long one read may take before the worker is ended and the read fails
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
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearTimeout(p.timer);
      if (m.ok) p.resolve(m);
      else p.reject(new Error(m.error));
    });
    // A crash of the worker (out of memory on a hostile file) fails what it was reading; the next read starts anew.
    const fail = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        p.reject(new Error(why));
        this.pending.delete(id);
      }
    };
    w.on('error', (e) => fail(`reading a step table failed: ${e.message}`));
    w.on('exit', (code) => fail(`the table reader stopped (exit ${code})`));
    w.unref();
    this.worker = w;
    return w;
  }

  private request(kind: TableRequest['kind'], runDir: string, step: number): Promise<TableReply & { ok: true }> {
    return new Promise((resolve, reject) => {
      let w: Worker;
      try {
        w = this.start();
      } catch (e) {
        return reject(e);
      }
      const id = this.next++;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        const file = stepFile(runDir, kind === 'step' ? 'tokens' : 'episodes', step);
        reject(new Error(`reading ${file} took longer than ${this.timeoutMs / 1000} s and was stopped; the file may be damaged`));
        // The worker may be stuck in that file: end it, and fail whatever else waited on it.
        if (this.worker === w) {
          this.worker = null;
          for (const [other, p] of this.pending) {
            clearTimeout(p.timer);
            p.reject(new Error('the table reader was restarted'));
            this.pending.delete(other);
          }
          void w.terminate();
        }
      }, this.timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      w.postMessage({ id, kind, runDir, step } satisfies TableRequest);
    });
  }

  dispose(): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error('the extension is shutting down'));
    }
    this.pending.clear();
    void this.worker?.terminate();
    this.worker = null;
  }
}
