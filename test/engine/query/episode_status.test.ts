// The episode table records what the trainer knew of each completion: whether it stopped at max_new_tokens, and its
// answer status. Browse Rollouts takes those as written; only a table without them (an older engine, an import that does
// not know) falls back to inferring them from the text and the config's max_new_tokens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allocTokenColumns, readEpisodeTable, writeEpisodeTable, writeTokenTable, type EpisodeColumns } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { loadRollouts } from '../../../src/engine/query/rollouts';
import { answerStatus } from '../../../src/engine/tasks/sections';

// three episodes of 4 tokens, max_new_tokens 4: every one reaches the cap
const TEXTS = ['<answer>7</answer>', '<answer>8', 'so 3+4'];
function episodes(extra: Partial<EpisodeColumns>): EpisodeColumns {
  return {
    step: Int32Array.of(1, 1, 1),
    episode: Int32Array.of(0, 1, 2),
    prompt_idx: Int32Array.of(0, 0, 0),
    prompt: ['p', 'p', 'p'],
    completion: TEXTS,
    reward: Float32Array.of(0, 0, 0),
    reward_format: Float32Array.of(0, 0, 0),
    reward_answer: Float32Array.of(0, 0, 0),
    success: [false, false, false],
    advantage: Float32Array.of(0, 0, 0),
    length: Int32Array.of(4, 4, 4),
    oracle_span: [null, null, null],
    ...extra,
  };
}

function run(extra: Partial<EpisodeColumns>): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-status-'));
  for (const sub of ['tokens', 'episodes']) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, 'config.yaml'), 'name: s\ngrpo:\n  max_new_tokens: 4\n');
  const cols = allocTokenColumns(12);
  for (let k = 0; k < 12; k++) {
    cols.step[k] = 1;
    cols.episode[k] = Math.floor(k / 4);
    cols.position[k] = k % 4;
    cols.token[k] = 'x';
    cols.section[k] = 'other';
    cols.token_type[k] = 'filler';
  }
  writeTokenTable(stepFile(dir, 'tokens', 1), { ...cols, attribution: null, importance: null, is_weight: null, clipped: null, grad_norm: null });
  writeEpisodeTable(stepFile(dir, 'episodes', 1), episodes(extra));
  return dir;
}

test('truncated and status round-trip through the episode table, nulls included; a table without them reads as nulls', () => {
  const written = run({ truncated: [false, true, null], status: ['wrong', 'truncated', null] });
  const back = readEpisodeTable(stepFile(written, 'episodes', 1));
  assert.deepEqual(back.truncated, [false, true, null]);
  assert.deepEqual(back.status, ['wrong', 'truncated', null]);
  const old = readEpisodeTable(stepFile(run({}), 'episodes', 1));
  assert.deepEqual(old.truncated, [null, null, null]);
  assert.deepEqual(old.status, [null, null, null]);
});

test('Browse Rollouts takes the recorded status, and infers it only where none was recorded', () => {
  // Recorded: episode 0 closed its answer but the sampler stopped it at the cap (truncated, yet its text looks complete);
  // episode 1 was not truncated though it reached 4 tokens; episode 2 has nothing recorded: inferred from the text.
  const idx = loadRollouts(run({ truncated: [true, false, null], status: ['truncated', 'wrong', null] }));
  const rows = idx.filter();
  assert.deepEqual(
    [...rows].map((i) => idx.row(i).status),
    ['truncated', 'wrong', 'truncated'],
  );
  // Nothing recorded at all (an older engine): inferred as before: 4 tokens = max_new_tokens without </answer> is truncated.
  const old = loadRollouts(run({}));
  assert.deepEqual(
    [...old.filter()].map((i) => old.row(i).status),
    ['wrong', 'truncated', 'truncated'],
  );
});

test('answerStatus: success first, then truncated, then whether an answer tag exists', () => {
  assert.equal(answerStatus('<answer>1</answer>', true, true), 'correct');
  assert.equal(answerStatus('<answer>1', false, true), 'truncated');
  assert.equal(answerStatus('so', false, false), 'no_answer');
  assert.equal(answerStatus('<answer>2</answer>', false, false), 'wrong');
});

test('a training run records every episode: truncated as the sampler stopped it, and the status that follows', { timeout: 120_000 }, async (t) => {
  const { train } = await import('../../../src/engine/train/train');
  const { tinyConfig } = await import('../fixtures');
  const dir = mkdtempSync(join(tmpdir(), 'cl-status-run-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=1', 'grpo.max_new_tokens=12'] });
  assert.equal(r.status, 'completed');
  const eps = readEpisodeTable(stepFile(r.runDir, 'episodes', 1));
  assert.equal(eps.status!.length, eps.step.length);
  eps.status!.forEach((s, i) => {
    assert.equal(typeof eps.truncated![i], 'boolean', `episode ${i} has truncated recorded`);
    // the sampler stops at max_new_tokens: a truncated completion has exactly that many tokens
    if (eps.truncated![i]) assert.equal(eps.length[i], 12);
    assert.equal(s, answerStatus(eps.completion[i], eps.success[i], eps.truncated![i]!));
  });
});
