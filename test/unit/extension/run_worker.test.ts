// Browse Rollouts' worker keeps a run's tables in memory between queries; a table rewritten under the same step number
// (a restart, a resume that set steps aside) must be read afresh, so its key is the tables' identity on disk (size,
// mtime, inode: tablesIdentity), not their step numbers. Driven through the bundled worker the extension ships.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { allocTokenColumns, writeEpisodeTable, writeTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile, tablesIdentity } from '../../../src/engine/rundir/rundir';
import { QueryClient } from '../../../src/extension/worker_client';
import { DEFAULT_QUERY } from '../../../src/protocol/browse_view';

const WORKER = resolve(__dirname, '../../../dist/extension/run_worker.js');

/** Step 1 with `rewards.length` episodes of 2 tokens each. */
function writeStep(dir: string, rewards: number[]): void {
  const n = rewards.length * 2;
  const cols = allocTokenColumns(n);
  for (let k = 0; k < n; k++) {
    cols.step[k] = 1;
    cols.episode[k] = k >> 1;
    cols.position[k] = k & 1;
    cols.token[k] = 'a';
    cols.section[k] = 'other';
    cols.token_type[k] = 'filler';
  }
  writeTokenTable(stepFile(dir, 'tokens', 1), { ...cols, attribution: null, importance: null, is_weight: null, clipped: null, grad_norm: null });
  const m = rewards.length;
  writeEpisodeTable(stepFile(dir, 'episodes', 1), {
    step: new Int32Array(m).fill(1),
    episode: Int32Array.from(rewards, (_, i) => i),
    prompt_idx: new Int32Array(m),
    prompt: rewards.map(() => 'p'),
    completion: rewards.map(() => 'aa'),
    reward: Float32Array.from(rewards),
    reward_format: new Float32Array(m),
    reward_answer: new Float32Array(m),
    success: rewards.map((r) => r > 0),
    advantage: new Float32Array(m),
    length: new Int32Array(m).fill(2),
    oracle_span: rewards.map(() => null),
  });
}

test('a step table rewritten under the same step number is read afresh, not served from the old index', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-query-worker-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const sub of ['tokens', 'episodes']) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, 'config.yaml'), 'name: w\n');
  writeStep(dir, [1, 0]);
  const client = new QueryClient(WORKER);
  try {
    const before = tablesIdentity(dir);
    const first = await client.query(dir, { ...DEFAULT_QUERY });
    assert.equal(first.total, 2);
    // the same step, rewritten by a restart: three episodes now
    writeStep(dir, [0, 0, 1]);
    assert.notEqual(tablesIdentity(dir), before, 'the identity sees the rewrite');
    const second = await client.query(dir, { ...DEFAULT_QUERY });
    assert.equal(second.total, 3, 'the rewritten table, not the cached one');
  } finally {
    client.dispose();
  }
});

test('one worker serves the heatmap and Browse Rollouts: step reads and queries through one client, answered in order', { timeout: 60_000 }, async (t) => {
  const { TableReader, WorkerClient } = await import('../../../src/extension/worker_client');
  const dir = mkdtempSync(join(tmpdir(), 'cl-run-worker-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const sub of ['tokens', 'episodes']) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, 'config.yaml'), 'name: w\n');
  writeStep(dir, [1, 0]);
  const shared = new WorkerClient(WORKER);
  const tables = new TableReader(shared);
  const queries = new QueryClient(shared);
  try {
    const [step, result, eps] = await Promise.all([tables.step(dir, 1), queries.query(dir, { ...DEFAULT_QUERY }), tables.episodes(dir, 1)]);
    assert.equal(step.episodes.reward.length, 2);
    assert.equal(step.tokens.step.length, step.tokens.episode.length);
    assert.equal(result.total, 2);
    assert.deepEqual([...eps.reward], [...step.episodes.reward]);
  } finally {
    shared.dispose();
  }
});
