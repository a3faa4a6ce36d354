// The worker thread that answers Browse Rollouts' queries: it loads a run's tables into a RolloutIndex once,
// keeps it while the run's step tables stay the same on disk (tablesIdentity), and answers each query from memory. Loading a million token rows
// and every query run here, never on the extension host's main thread. No vscode here.
import { parentPort } from 'node:worker_threads';
import { answer, exportRows } from '../engine/query/browse';
import { loadRollouts, type RolloutIndex } from '../engine/query/rollouts';
import { tablesIdentity } from '../engine/rundir/rundir';
import type { QueryReply, QueryRequest } from './query_client';

let cached: { runDir: string; key: string; index: RolloutIndex; loadMs: number } | null = null;

function index(runDir: string): { index: RolloutIndex; loadMs: number } {
  // stale when any step table changed on disk: appended, probed, or rewritten under the same step number
  const key = tablesIdentity(runDir);
  if (cached && cached.runDir === runDir && cached.key === key) return cached;
  cached = null;
  const t0 = performance.now();
  const idx = loadRollouts(runDir);
  cached = { runDir, key, index: idx, loadMs: performance.now() - t0 };
  return cached;
}

parentPort?.on('message', (req: QueryRequest) => {
  let reply: QueryReply;
  try {
    const { index: idx, loadMs } = index(req.runDir);
    reply =
      req.kind === 'query'
        ? { id: req.id, ok: true, result: answer(idx, req.query, loadMs) }
        : { id: req.id, ok: true, text: exportRows(idx, req.query, req.what, req.format) };
  } catch (e) {
    reply = { id: req.id, ok: false, error: (e as Error).message };
  }
  parentPort!.postMessage(reply);
});
