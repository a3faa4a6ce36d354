// Browse Rollouts' queries, answered by a worker thread (query_worker.ts) that holds the run's tables in memory: the
// host posts a query and gets the result, and a query that takes longer than the time limit ends the worker (a new one
// starts, and loads again, on the next query) instead of freezing the host. One query in flight; a newer one for the
// same panel supersedes the older (its answer is dropped). No vscode import.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { BrowseQuery, BrowseResult } from '../protocol/browse_view';

export type QueryRequest =
  | { id: number; kind: 'query'; runDir: string; query: BrowseQuery }
  | { id: number; kind: 'export'; runDir: string; query: BrowseQuery; what: 'episodes' | 'tokens'; format: 'csv' | 'jsonl' };

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export type QueryReply = { id: number; ok: true; result?: BrowseResult; text?: string } | { id: number; ok: false; error: string };

export class QueryClient {
  private worker: Worker | null = null;
  private next = 1;
  private readonly pending = new Map<number, { resolve: (r: QueryReply & { ok: true }) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

  constructor(
    private readonly workerPath = join(__dirname, 'query_worker.js'),
    private readonly timeoutMs = 120_000,
  ) {}

  query(runDir: string, query: BrowseQuery): Promise<BrowseResult> {
    return this.request({ kind: 'query', runDir, query }).then((r) => r.result!);
  }

  exportRows(runDir: string, query: BrowseQuery, what: 'episodes' | 'tokens', format: 'csv' | 'jsonl'): Promise<string> {
    return this.request({ kind: 'export', runDir, query, what, format }).then((r) => r.text!);
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    if (!existsSync(this.workerPath)) throw new Error(`the query worker ${this.workerPath} is missing: rebuild the extension (npm run build)`);
    const w = new Worker(this.workerPath);
    w.on('message', (m: QueryReply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearTimeout(p.timer);
      if (m.ok) p.resolve(m);
      else p.reject(new Error(m.error));
    });
    const fail = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        p.reject(new Error(why));
        this.pending.delete(id);
      }
    };
    w.on('error', (e) => fail(`the query failed: ${e.message}`));
    w.on('exit', (code) => fail(`the query worker stopped (exit ${code})`));
    w.unref();
    this.worker = w;
    return w;
  }

  private request(req: DistributiveOmit<QueryRequest, 'id'>): Promise<QueryReply & { ok: true }> {
    return new Promise((resolve, reject) => {
      let w: Worker;
      try {
        w = this.start();
      } catch (e) {
        reject(e as Error);
        return;
      }
      const id = this.next++;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the query took longer than ${this.timeoutMs / 1000} s and was stopped`));
        void w.terminate();
      }, this.timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      w.postMessage({ ...req, id } as QueryRequest);
    });
  }

  dispose(): void {
    void this.worker?.terminate();
    this.worker = null;
  }
}
