// The worker thread that reads runs for the extension host (worker_client.ts): a step's Arrow tables for the heatmap,
// and Browse Rollouts' queries, answered from a RolloutIndex that it loads once and keeps while the run's step tables
// stay the same on disk (tablesIdentity). Columns come back as transferred typed arrays (no copy) and plain string
// arrays. No vscode here: a worker cannot reach the API.
import { parentPort } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { joinProbeColumns, readProbeTable, readStepTables } from '../engine/rundir/arrow_tables';
import { probeFitsTokens } from '../engine/rundir/probe_record';
import { stepFile, tablesIdentity } from '../engine/rundir/rundir';
import { answer, exportRows } from '../engine/query/browse';
import { loadRollouts, type RolloutIndex } from '../engine/query/rollouts';
import type { RunReply, RunRequest } from './worker_client';

function transferables(o: object): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  const visit = (v: unknown) => {
    if (ArrayBuffer.isView(v) && v.buffer instanceof ArrayBuffer && !out.includes(v.buffer)) out.push(v.buffer);
    else if (v && typeof v === 'object' && !Array.isArray(v)) for (const x of Object.values(v)) visit(x);
  };
  visit(o);
  return out;
}

/** A step's tables, with a probe's Monte Carlo values as the tokens' mc_* columns where it was made on this table. */
function stepTables(runDir: string, step: number, withTokens: boolean): RunReply {
  const { tokens, episodes } = readStepTables(runDir, step, { tokens: withTokens });
  const probe = stepFile(runDir, 'probes', step);
  // (a table rewritten since the probe is painted without another trajectory's δ)
  if (tokens && existsSync(probe) && probeFitsTokens(runDir, step, stepFile(runDir, 'tokens', step))) joinProbeColumns(tokens, readProbeTable(probe));
  return { id: 0, ok: true, episodes, tokens };
}

let cached: { runDir: string; key: string; index: RolloutIndex; loadMs: number } | null = null;

/** The run's index, loaded again when any step table changed on disk: appended, probed, or rewritten in place. */
function index(runDir: string): { index: RolloutIndex; loadMs: number } {
  const key = tablesIdentity(runDir);
  if (cached && cached.runDir === runDir && cached.key === key) return cached;
  cached = null;
  const t0 = performance.now();
  const idx = loadRollouts(runDir);
  cached = { runDir, key, index: idx, loadMs: performance.now() - t0 };
  return cached;
}

function reply(req: RunRequest): RunReply {
  switch (req.kind) {
    case 'step':
    case 'episodes':
      return { ...stepTables(req.runDir, req.step, req.kind === 'step'), id: req.id };
    case 'query': {
      const { index: idx, loadMs } = index(req.runDir);
      return { id: req.id, ok: true, result: answer(idx, req.query, loadMs) };
    }
    case 'export':
      return { id: req.id, ok: true, text: exportRows(index(req.runDir).index, req.query, req.what, req.format) };
  }
}

parentPort?.on('message', (req: RunRequest) => {
  let r: RunReply;
  try {
    r = reply(req);
  } catch (e) {
    r = { id: req.id, ok: false, error: (e as Error).message };
  }
  parentPort!.postMessage(r, r.ok ? transferables(r) : []);
});
