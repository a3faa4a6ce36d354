// The worker thread that reads Arrow step tables for the extension host (table_reader.ts). A token table of a long run
// is tens of megabytes; reading and checking it on the host's main thread would freeze every extension while it
// runs, and a damaged file must never be able to. The columns come back as transferred typed arrays (no copy) and
// plain string arrays. No vscode here: a worker cannot reach the API.
import { parentPort } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { joinProbeColumns, readEpisodeTable, readProbeTable, readTokenTable } from '../engine/rundir/arrow_tables';
import { probeFitsTokens } from '../engine/probe/record';
import { stepFile } from '../engine/rundir/rundir';
import type { TableRequest, TableReply } from './table_reader';

function transferables(o: object): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  const visit = (v: unknown) => {
    if (ArrayBuffer.isView(v) && v.buffer instanceof ArrayBuffer && !out.includes(v.buffer)) out.push(v.buffer);
    else if (v && typeof v === 'object' && !Array.isArray(v)) for (const x of Object.values(v)) visit(x);
  };
  visit(o);
  return out;
}

parentPort?.on('message', (req: TableRequest) => {
  let reply: TableReply;
  try {
    const episodes = readEpisodeTable(stepFile(req.runDir, 'episodes', req.step));
    const tokens = req.kind === 'step' ? readTokenTable(stepFile(req.runDir, 'tokens', req.step)) : undefined;
    // a probed step (`credit-lens probe`): its Monte Carlo values become the tokens' mc_* columns
    const probe = stepFile(req.runDir, 'probes', req.step);
    // (only where it was made on this token table: a table rewritten since is painted without another trajectory's δ)
    if (tokens && existsSync(probe) && probeFitsTokens(req.runDir, req.step, stepFile(req.runDir, 'tokens', req.step)))
      joinProbeColumns(tokens, readProbeTable(probe));
    reply = { id: req.id, ok: true, episodes, tokens };
  } catch (e) {
    reply = { id: req.id, ok: false, error: (e as Error).message };
  }
  parentPort!.postMessage(reply, reply.ok ? transferables(reply) : []);
});
