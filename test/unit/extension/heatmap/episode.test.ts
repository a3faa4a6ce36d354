import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  readEpisodeTable,
  readTokenTable,
  writeEpisodeTable,
  writeTokenTable,
  type EpisodeColumns,
  type TokenColumns,
} from '../../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../../src/engine/rundir/rundir';
import type { Section } from '../../../../src/protocol/index';
import {
  buildHeatmapEpisode,
  findSamePrompt,
  lineStarts,
  neighbour,
  positionOf,
  rebuildOffsets,
  StepTables,
  tokenAt,
  valueRangeOfEpisode,
} from '../../../../src/extension/heatmap/episode';

/** A step's tables as the extension's table worker hands them over. */
const readStep = (dir: string, step: number) =>
  new StepTables(dir, step, readTokenTable(stepFile(dir, 'tokens', step)), readEpisodeTable(stepFile(dir, 'episodes', step)));

test('offsets are rebuilt by concatenating token texts in row order; UTF-16 lengths, zero-width tokens kept', () => {
  // 'a' [0,1), 'bc' [1,3), '' [3,3), 'é' [3,4), '😀' [4,6): the emoji is a surrogate pair, 2 code units.
  const { text, starts, ends } = rebuildOffsets(['a', 'bc', '', 'é', '😀'], [0, 1, 2, 3, 4]);
  assert.equal(text, 'abcé😀');
  assert.deepEqual(Array.from(starts), [0, 1, 3, 3, 4]);
  assert.deepEqual(Array.from(ends), [1, 3, 3, 4, 6]);
  // The rows say which tokens and in which order.
  const r = rebuildOffsets(['x', 'yy', 'z'], [2, 0, 1]);
  assert.equal(r.text, 'zxyy');
  assert.deepEqual(Array.from(r.starts), [0, 1, 2]);
});

test('the token at an offset: binary search over the ranges; a zero-width token is never hit', () => {
  const { starts, ends } = rebuildOffsets(['a', 'bc', '', 'é', '😀'], [0, 1, 2, 3, 4]);
  assert.equal(tokenAt(starts, ends, 0), 0);
  assert.equal(tokenAt(starts, ends, 1), 1);
  assert.equal(tokenAt(starts, ends, 2), 1);
  assert.equal(tokenAt(starts, ends, 3), 3, "offset 3 is 'é', not the empty token that starts there too");
  assert.equal(tokenAt(starts, ends, 4), 4);
  assert.equal(tokenAt(starts, ends, 5), 4, 'the second code unit of the emoji');
  assert.equal(tokenAt(starts, ends, 6), -1);
  assert.equal(tokenAt(starts, ends, -1), -1);
});

test('line starts and (line, character) of an offset', () => {
  const ls = lineStarts('ab\ncd\n');
  assert.deepEqual(ls, [0, 3, 6]);
  assert.deepEqual(positionOf(ls, 2), [0, 2]);
  assert.deepEqual(positionOf(ls, 3), [1, 0]);
  assert.deepEqual(positionOf(ls, 4), [1, 1]);
  assert.deepEqual(positionOf(ls, 6), [2, 0]);
});

interface Ep {
  prompt: string;
  tokens: string[];
  completion?: string;
  reward: number;
  advantage: number;
  episode?: number;
}

/** A step written with the engine's own writers: token values are chosen so every row is recognisable. */
function writeStep(runDir: string, step: number, eps: Ep[], opts: { attribution?: boolean; reverseRows?: boolean; untrained?: number } = {}): void {
  mkdirSync(join(runDir, 'tokens'), { recursive: true });
  mkdirSync(join(runDir, 'episodes'), { recursive: true });
  const rows: { e: number; p: number; tok: string }[] = [];
  eps.forEach((ep, i) => ep.tokens.forEach((tok, p) => rows.push({ e: ep.episode ?? i, p, tok })));
  if (opts.reverseRows) rows.reverse();
  const n = rows.length;
  const f = (fn: (r: { e: number; p: number }, k: number) => number) => Float32Array.from(rows, (r, k) => fn(r, k));
  const cols: TokenColumns = {
    step: new Int32Array(n).fill(step),
    episode: Int32Array.from(rows, (r) => r.e),
    prompt_idx: new Int32Array(n),
    position: Int32Array.from(rows, (r) => r.p),
    token_id: Int32Array.from(rows, (r) => 100 * r.e + r.p),
    token: rows.map((r) => r.tok),
    logprob: f((r) => -0.5 * (r.p + 1)),
    entropy: f((r) => r.p),
    advantage: f((r) => eps.find((x, i) => (x.episode ?? i) === r.e)!.advantage),
    // opts.untrained: that episode's tokens got weight 0 (masked by the strategy)
    weight: f((r) => (r.e === opts.untrained ? 0 : 1)),
    effective_advantage: f((r) => eps.find((x, i) => (x.episode ?? i) === r.e)!.advantage),
    contribution: f((r) => eps.find((x, i) => (x.episode ?? i) === r.e)!.advantage * -0.5 * (r.p + 1)),
    attribution: opts.attribution ? f((r) => 0.1 * (r.p + 1)) : null,
    importance: null,
    section: rows.map(() => 'think' as Section),
    token_type: rows.map(() => 'reasoning' as const),
    reward: new Float32Array(n),
  };
  writeTokenTable(stepFile(runDir, 'tokens', step), cols);
  const episodes: EpisodeColumns = {
    step: new Int32Array(eps.length).fill(step),
    episode: Int32Array.from(eps, (e, i) => e.episode ?? i),
    prompt_idx: new Int32Array(eps.length),
    prompt: eps.map((e) => e.prompt),
    completion: eps.map((e) => e.completion ?? e.tokens.join('')),
    reward: Float32Array.from(eps, (e) => e.reward),
    reward_format: Float32Array.from(eps, () => 0.1),
    reward_answer: Float32Array.from(eps, (e) => (e.reward >= 1 ? 1 : 0)),
    success: eps.map((e) => e.reward >= 1),
    advantage: Float32Array.from(eps, (e) => e.advantage),
    length: Int32Array.from(eps, (e) => e.tokens.length),
    oracle_span: eps.map(() => null),
  };
  writeEpisodeTable(stepFile(runDir, 'episodes', step), episodes);
}

function tmpRun(): string {
  return mkdtempSync(join(tmpdir(), 'credit-lens-heatmap-'));
}

test('an episode view: rows in position order whatever the file order, header, prompt then completion, token ranges', () => {
  const dir = tmpRun();
  try {
    writeStep(
      dir,
      3,
      [
        { prompt: '1 2 -> 3\n<think>', tokens: ['1', '+', '2', '</think>\n', '<answer>', '3', '</answer>'], reward: 1.1, advantage: 0.5 },
        { prompt: '1 2 -> 3\n<think>', tokens: ['no'], reward: 0.1, advantage: -0.5 },
      ],
      { reverseRows: true },
    );
    const tables = readStep(dir, 3);
    const v = buildHeatmapEpisode(tables, { runDir: dir, step: 3, episode: 0 }, { runName: 'run-a', strategy: 'none' });
    // Rows were written last-to-first: episode 0's 7 tokens are rows 7…1 (row 0 is episode 1's token).
    assert.deepEqual(Array.from(v.rows), [7, 6, 5, 4, 3, 2, 1]);
    assert.deepEqual(
      Array.from(v.rows, (r) => tables.tokens.position[r]),
      [0, 1, 2, 3, 4, 5, 6],
    );
    assert.ok(v.textMatches);
    assert.equal(v.header, 'run-a · step 3 · episode 0 · reward 1.100 (format 0.100, answer 1.000) ✓ solved · advantage +0.500 · strategy none · 7 tokens');
    assert.equal(v.promptOffset, v.header.length + 2);
    assert.equal(v.text.slice(v.promptOffset, v.completionOffset), '1 2 -> 3\n<think>');
    assert.equal(v.text.slice(v.completionOffset), '1+2</think>\n<answer>3</answer>');
    // Token 3 '</think>\n' spans [3, 12) of the completion; in the document it ends a line.
    assert.equal(v.text.slice(v.completionOffset + v.starts[3], v.completionOffset + v.ends[3]), '</think>\n');
    const [line, ch] = positionOf(v.lineStarts, v.completionOffset + v.starts[5]);
    // Lines: 0 header, 1 blank, 2 '1 2 -> 3', 3 '<think>1+2</think>', 4 '<answer>3</answer>': '3' is at (4, 8).
    assert.deepEqual([line, ch], [4, 8]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a completion that is not the concatenation of its tokens: the tokens are shown, and the header says so', () => {
  const dir = tmpRun();
  try {
    writeStep(dir, 1, [{ prompt: 'p', tokens: ['ab', 'c'], completion: 'abX', reward: 0, advantage: -1 }]);
    const v = buildHeatmapEpisode(readStep(dir, 1), { runDir: dir, step: 1, episode: 0 }, { runName: 'r', strategy: 's' });
    assert.equal(v.textMatches, false);
    assert.equal(v.text.slice(v.completionOffset), 'abc');
    assert.match(v.header, /advantage −1\.000 .*⚠ the logged completion differs from its tokens/);
    const paired = buildHeatmapEpisode(
      readStep(dir, 1),
      { runDir: dir, step: 1, episode: 0 },
      {
        runName: 'r',
        strategy: 's',
        pair: { runDir: '/x/other', runName: 'other', step: 2, episode: 5 },
      },
    );
    assert.match(paired.header, / · same colour scale as other step 2 episode 5/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('per-step ranges and the metrics a step has: a null column is not offered', () => {
  const dir = tmpRun();
  try {
    const eps: Ep[] = [
      { prompt: 'p', tokens: ['a', 'b'], reward: 1, advantage: 2 },
      { prompt: 'p', tokens: ['c', 'd', 'e'], reward: 0, advantage: -1 },
    ];
    writeStep(dir, 1, eps);
    writeStep(dir, 2, eps, { attribution: true });
    const t1 = readStep(dir, 1);
    assert.deepEqual(t1.available(), ['effective_advantage', 'contribution', 'entropy', 'logprob', 'weight']);
    assert.deepEqual(readStep(dir, 2).available(), ['effective_advantage', 'contribution', 'entropy', 'attribution', 'logprob', 'weight']);
    // contribution = A·(−0.5·(p+1)): episode 0: 2·−0.5 = −1, 2·−1 = −2; episode 1: −1·(−0.5, −1, −1.5) = 0.5, 1, 1.5.
    assert.deepEqual(t1.stepRange('contribution'), { min: -2, max: 1.5 });
    assert.deepEqual(valueRangeOfEpisode(t1, 1, 'contribution'), { min: 0.5, max: 1.5 });
    assert.equal(valueRangeOfEpisode(t1, 1, 'attribution'), null);
    // Tokens that did not train (weight 0: episode 0 masked) stay out of every range, of the step and of the episode:
    // the step's entropy range is episode 1's positions 0…2, not 0…1 joined with them.
    writeStep(dir, 3, eps, { untrained: 0 });
    const t3 = readStep(dir, 3);
    assert.deepEqual(
      [...t3.trainedRows()].map((r) => t3.tokens.episode[r]),
      [1, 1, 1],
    );
    assert.deepEqual(t3.stepRange('contribution'), { min: 0.5, max: 1.5 });
    assert.equal(valueRangeOfEpisode(t3, 0, 'entropy'), null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the same prompt in another run: nearest step (earlier on a tie), the same episode number, else the closest reward', async () => {
  const dir = tmpRun();
  try {
    const P = '4 5 -> 9\n<think>';
    const read = async (d: string, st: number) => readEpisodeTable(stepFile(d, 'episodes', st));
    writeStep(dir, 1, [{ prompt: P, tokens: ['x'], reward: 0, advantage: 0 }]);
    writeStep(dir, 2, [
      { prompt: 'other', tokens: ['x'], reward: 0, advantage: 0 },
      { prompt: P, tokens: ['y'], reward: 0, advantage: 0, episode: 3 },
    ]);
    writeStep(dir, 4, [
      { prompt: P, tokens: ['a'], reward: 0.1, advantage: 0 },
      { prompt: P, tokens: ['b'], reward: 1.1, advantage: 0 },
    ]);
    // From step 3, steps 2 and 4 are both 1 away: step 2 wins the tie, and its only episode of P is #3.
    assert.deepEqual(await findSamePrompt(dir, P, 3, 0, 0, read), { runDir: dir, step: 2, episode: 3 });
    // Step 4 itself: episode 1 has the prompt, so it is the one.
    assert.deepEqual(await findSamePrompt(dir, P, 4, 1, 0, read), { runDir: dir, step: 4, episode: 1 });
    // Episode 7 is not there: of #0 (reward 0.1) and #1 (1.1), #1 is closer to 0.9.
    assert.deepEqual(await findSamePrompt(dir, P, 4, 7, 0.9, read), { runDir: dir, step: 4, episode: 1 });
    assert.deepEqual(await findSamePrompt(dir, P, 4, 7, 0.2, read), { runDir: dir, step: 4, episode: 0 });
    assert.equal(await findSamePrompt(dir, 'never seen', 4, 0, 0, read), null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('navigation: episodes in order running on into the next step, steps keeping the episode number', async () => {
  const eps: Record<number, number[]> = { 1: [0, 1, 2], 2: [0, 1], 4: [] };
  const steps = [1, 2, 4];
  const at = (step: number, episode: number) => ({ runDir: 'r', step, episode });
  const go = (step: number, episode: number, move: Parameters<typeof neighbour>[1]) => neighbour(at(step, episode), move, steps, async (s) => eps[s] ?? []);
  assert.deepEqual(await go(1, 0, 'nextEpisode'), at(1, 1));
  assert.deepEqual(await go(1, 2, 'nextEpisode'), at(2, 0));
  assert.deepEqual(await go(2, 0, 'previousEpisode'), at(1, 2));
  assert.equal(await go(1, 0, 'previousEpisode'), null);
  assert.equal(await go(2, 1, 'nextEpisode'), null, 'step 4 logged no episode');
  assert.deepEqual(await go(1, 1, 'nextStep'), at(2, 1));
  assert.deepEqual(await go(1, 2, 'nextStep'), at(2, 1), 'step 2 has no episode 2: its last one');
  assert.deepEqual(await go(2, 1, 'previousStep'), at(1, 1));
  assert.equal(await go(1, 0, 'previousStep'), null);
  assert.equal(await go(2, 0, 'nextStep'), null);
  assert.equal(await go(3, 0, 'nextStep'), null, 'a step that is not logged');
});
