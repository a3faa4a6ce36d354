// Token rows out of order: every reader assumes an episode's tokens are one contiguous run of rows, positions
// ascending, as our writer lays them out. A table written otherwise (here: episode 0's last two tokens after episode 1)
// is put in that order by orderTokenRows (rundir/arrow_tables.ts), so Browse Rollouts sees the whole episode
// rather than its first chunk; two rows of one token are a corrupted table, refused with the file and the token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allocTokenColumns, orderTokenRows, readTokenTable, writeEpisodeTable, writeTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { loadRollouts } from '../../../src/engine/query/rollouts';
import { isUserError } from '../../../src/engine/core/errors';

// (episode, position, token, contribution) in the order the rows are written: episode 0 is split in two chunks
const ROWS: [number, number, string, number][] = [
  [0, 0, '1', -0.1],
  [0, 1, '+', -0.2],
  [1, 0, ' so', 0.4],
  [1, 1, '<answer>', 0],
  [1, 2, '5', 0.2],
  [0, 2, '2', -0.3],
  [0, 3, '=3', -0.6],
];

function run(rows: [number, number, string, number][]): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-row-order-'));
  for (const sub of ['tokens', 'episodes']) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, 'config.yaml'), 'name: q\ngrpo:\n  max_new_tokens: 8\n');
  const cols = allocTokenColumns(rows.length);
  rows.forEach(([e, p, t, c], k) => {
    cols.step[k] = 1;
    cols.episode[k] = e;
    cols.prompt_idx[k] = 3;
    cols.position[k] = p;
    cols.token[k] = t;
    cols.weight[k] = 1;
    cols.contribution[k] = c;
    cols.section[k] = 'think';
    cols.token_type[k] = 'filler';
  });
  writeTokenTable(stepFile(dir, 'tokens', 1), { ...cols, attribution: null, importance: null, is_weight: null, clipped: null, grad_norm: null });
  writeEpisodeTable(stepFile(dir, 'episodes', 1), {
    step: Int32Array.of(1, 1),
    episode: Int32Array.of(0, 1),
    prompt_idx: Int32Array.of(3, 3),
    prompt: ['p3', 'p3'],
    completion: ['1+2=3', ' so<answer>5'],
    reward: Float32Array.of(1, 0),
    reward_format: Float32Array.of(0, 0),
    reward_answer: Float32Array.of(1, 0),
    success: [true, false],
    advantage: Float32Array.of(0.7, -0.7),
    length: Int32Array.of(4, 3),
    oracle_span: [null, null],
  });
  return dir;
}

test('orderTokenRows puts rows written out of order into (step, episode, position) order, every column alike', () => {
  const path = stepFile(run(ROWS), 'tokens', 1);
  const t = orderTokenRows(readTokenTable(path), [path]);
  assert.deepEqual([...t.episode], [0, 0, 0, 0, 1, 1, 1]);
  assert.deepEqual([...t.position], [0, 1, 2, 3, 0, 1, 2]);
  assert.deepEqual(t.token, ['1', '+', '2', '=3', ' so', '<answer>', '5']);
  assert.deepEqual(
    [...t.contribution].map((x) => Math.round(x * 10) / 10),
    [-0.1, -0.2, -0.3, -0.6, 0.4, 0, 0.2],
  );
});

test('Browse Rollouts sees an episode whose rows are split in two chunks whole: its length, mean |c| and text', () => {
  const idx = loadRollouts(run(ROWS));
  const rows = idx.filter();
  const ep0 = idx.row(rows[0]);
  assert.equal(ep0.length, 4, 'all four tokens, not the first chunk of two');
  // mean |c| over 0.1, 0.2, 0.3, 0.6 = 0.3
  assert.ok(Math.abs(ep0.mean_abs_c - 0.3) < 1e-6, String(ep0.mean_abs_c));
  const hit = idx.search('2=3', rows, { plain: true });
  assert.equal(hit.total, 1);
  assert.deepEqual([hit.hits[0].episode, hit.hits[0].position], [0, 2], 'the match starts in the token "2" at position 2');
});

test('two rows of one (step, episode, position) are a corrupted table, refused with the file and the token', () => {
  const dup = [...ROWS.slice(0, 6), [0, 2, '2', -0.3] as [number, number, string, number]];
  assert.throws(
    () => loadRollouts(run(dup)),
    (e: Error) => isUserError(e) && /tokens: corrupted: two rows of step 1, episode 0, position 2/.test(e.message),
  );
});

test("one step's reader (the heatmap's worker, the probe) gets the same order, and refuses the same corruption", async () => {
  const { readStepTables } = await import('../../../src/engine/rundir/arrow_tables');
  const dir = run(ROWS);
  const { tokens, episodes } = readStepTables(dir, 1);
  assert.deepEqual([...tokens!.episode], [0, 0, 0, 0, 1, 1, 1]);
  assert.deepEqual(tokens!.token.slice(0, 4).join(''), episodes.completion[0]);
  assert.equal(readStepTables(dir, 1, { tokens: false }).tokens, undefined);
  const twice = run([...ROWS, [1, 2, '5', 0.2]]);
  assert.throws(
    () => readStepTables(twice, 1),
    (e: Error) => isUserError(e) && /corrupted: two rows of step 1, episode 1, position 2/.test(e.message),
  );
});
