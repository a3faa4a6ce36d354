// The rollout query engine on hand-built tables, every expected answer worked out by hand from the rows below.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allocTokenColumns, writeEpisodeTable, writeProbeTable, writeTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { loadRollouts } from '../../../src/engine/query/rollouts';
import { parseWhere } from '../../../src/engine/query/expr';
import { isUserError } from '../../../src/engine/core/errors';

// step 1: prompt 7 → episodes 0 (correct, reward 1.1) and 1 (wrong, 0.1); prompt 9 → episodes 2 and 3 (both no answer, 0)
// step 2: prompt 7 → episodes 0 (truncated: 6 tokens = max_new_tokens, no </answer>) and 1 (correct)
interface Ep {
  prompt: number;
  tokens: string[];
  reward: number;
  success: boolean;
  adv: number;
  c: number[];
  h: number[];
}
const STEPS: Record<number, Ep[]> = {
  1: [
    {
      prompt: 7,
      tokens: ['1', '+', '2', '<answer>', '3', '</answer>'],
      reward: 1.1,
      success: true,
      adv: 0.5,
      c: [-0.1, -0.2, -0.3, 0, -0.4, 0],
      h: [1, 2, 3, 0.5, 0.1, 0],
    },
    { prompt: 7, tokens: [' Wait', ' 1', '<answer>', '4', '</answer>'], reward: 0.1, success: false, adv: -0.5, c: [0.6, 0.2, 0, 0.2, 0], h: [4, 1, 0, 1, 0] },
    { prompt: 9, tokens: [' so', ' Wait'], reward: 0, success: false, adv: 0, c: [0, 0], h: [1, 3] },
    { prompt: 9, tokens: [' hm'], reward: 0, success: false, adv: 0, c: [0], h: [2] },
  ],
  2: [
    { prompt: 7, tokens: ['1', '1', '1', '1', '1', '1'], reward: 0, success: false, adv: -0.55, c: [0.1, 0.1, 0.1, 0.1, 0.1, 0.1], h: [1, 1, 1, 1, 1, 1] },
    { prompt: 7, tokens: ['<answer>', '3', '</answer>'], reward: 1.1, success: true, adv: 0.55, c: [0, -0.3, 0], h: [0, 0.3, 0] },
  ],
};

function fixture(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-query-'));
  for (const sub of ['tokens', 'episodes', 'probes']) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, 'config.yaml'), 'name: q\ngrpo:\n  max_new_tokens: 6\n');
  for (const [s, eps] of Object.entries(STEPS)) {
    const step = Number(s);
    const n = eps.reduce((a, e) => a + e.tokens.length, 0);
    const cols = allocTokenColumns(n);
    let k = 0;
    eps.forEach((e, i) =>
      e.tokens.forEach((t, p) => {
        cols.step[k] = step;
        cols.episode[k] = i;
        cols.prompt_idx[k] = e.prompt;
        cols.position[k] = p;
        cols.token[k] = t;
        cols.entropy[k] = e.h[p];
        cols.advantage[k] = e.adv;
        cols.weight[k] = 1;
        cols.effective_advantage[k] = e.adv;
        cols.contribution[k] = e.c[p];
        cols.section[k] = 'think';
        cols.token_type[k] = /\d/.test(t) ? 'reasoning' : 'filler';
        cols.reward[k] = e.reward;
        k++;
      }),
    );
    writeTokenTable(stepFile(dir, 'tokens', step), { ...cols, attribution: null, importance: null, is_weight: null, clipped: null, grad_norm: null });
    writeEpisodeTable(stepFile(dir, 'episodes', step), {
      step: new Int32Array(eps.length).fill(step),
      episode: Int32Array.from(eps, (_, i) => i),
      prompt_idx: Int32Array.from(eps, (e) => e.prompt),
      prompt: eps.map((e) => `p${e.prompt}`),
      completion: eps.map((e) => e.tokens.join('')),
      reward: Float32Array.from(eps, (e) => e.reward),
      reward_format: Float32Array.from(eps, () => 0),
      reward_answer: Float32Array.from(eps, (e) => (e.success ? 1 : 0)),
      success: eps.map((e) => e.success),
      advantage: Float32Array.from(eps, (e) => e.adv),
      length: Int32Array.from(eps, (e) => e.tokens.length),
      oracle_span: eps.map(() => null),
    });
  }
  // step 1's episode 1 probed: V = 0.5, 0.25, 0.25, 0.25, 0.1, 0.1 → δ of ' Wait' = −0.25
  writeProbeTable(stepFile(dir, 'probes', 1), {
    episode: Int32Array.of(1, 1, 1, 1, 1, 1),
    position: Int32Array.of(0, 1, 2, 3, 4, 5),
    value: Float32Array.of(0.5, 0.25, 0.25, 0.25, 0.1, 0.1),
    value_se: new Float32Array(6),
    rollouts: Int32Array.of(8, 8, 8, 8, 8, 0),
    delta: Float32Array.of(-0.25, 0, 0, -0.15, 0, NaN),
  });
  return dir;
}

const dir = fixture();
const idx = loadRollouts(dir);
const keys = (rows: Int32Array) => [...rows].map((i) => `${idx.step[i]}:${idx.episode[i]}`);

test('episode features: status, zero-variance groups, mean |c| and max entropy', () => {
  assert.equal(idx.episodes, 6);
  assert.deepEqual(
    [...idx.filter()].map((i) => idx.row(i).status),
    ['correct', 'wrong', 'no_answer', 'no_answer', 'truncated', 'correct'],
  );
  // prompt 9 at step 1: rewards 0 and 0 → zero variance; the others differ
  assert.deepEqual(keys(idx.filter('zero_var')), ['1:2', '1:3']);
  // step 1 episode 1: |c| 0.6 + 0.2 + 0 + 0.2 + 0 over 5 tokens = 0.2; max entropy 4
  const r = idx.row(1);
  assert.ok(Math.abs(r.mean_abs_c - 0.2) < 1e-7);
  assert.equal(r.max_entropy, 4);
});

test('filters: comparisons, ranges, booleans, and/or/not with parentheses', () => {
  assert.deepEqual(keys(idx.filter('status = wrong')), ['1:1']);
  assert.deepEqual(keys(idx.filter('status != correct and step in 2:2')), ['2:0']);
  assert.deepEqual(keys(idx.filter('reward >= 1 or truncated')), ['1:0', '2:0', '2:1']);
  assert.deepEqual(keys(idx.filter('not (success or zero_var)')), ['1:1', '2:0']);
  assert.deepEqual(keys(idx.filter('length < 3 and advantage = 0')), ['1:2', '1:3']);
  assert.deepEqual(keys(idx.filter("status = 'no_answer' and prompt = 9 and episode > 2")), ['1:3']);
  assert.deepEqual(keys(idx.filter('success = false and max_entropy > 3.5')), ['1:1']);
  assert.equal(idx.filter('reward > 5').length, 0, 'an empty result is an empty list');
  // sorting: -mean_abs_c descending; ties keep table order
  assert.deepEqual(keys(idx.sort(idx.filter(), '-mean_abs_c')), ['1:1', '1:0', '2:0', '2:1', '1:2', '1:3']);
});

test('a bad expression names the character, the part and what is allowed', () => {
  const cases: [string, RegExp][] = [
    ['reward <', /at character 9 \(the end\): reward is a number: expected a number after </],
    ['rewrd > 1', /at character 1 \("rewrd > 1"\): unknown field "rewrd"; the fields are .*reward/],
    ['status = lost', /status is one of correct, wrong, truncated, no_answer, not "lost"/],
    ['status < wrong', /status is text: compare it with = or !=/],
    ['(reward > 1', /expected "\)"/],
    ['reward > 1 reward', /expected "and", "or" or the end/],
    ['step in 3', /expected ":" between the range's ends/],
    ['', /the expression is empty/],
    ['reward ! 1', /"!" alone is not an operator/],
  ];
  for (const [src, re] of cases)
    assert.throws(
      () => parseWhere(src, idx.fields),
      (e: unknown) => isUserError(e) && re.test(e.message),
      src,
    );
  assert.throws(
    () => idx.sort(idx.filter(), 'status'),
    (e: unknown) => isUserError(e) && /not a number field/.test(e.message),
  );
});

test('search: plain and regex, with the token each hit starts in, its context, and regex edge cases', () => {
  const all = idx.filter();
  const wait = idx.search('Wait', all, { plain: true });
  assert.equal(wait.total, 2);
  assert.deepEqual(
    wait.hits.map((h) => [h.step, h.episode, h.position, h.match]),
    [
      [1, 1, 0, 'Wait'],
      [1, 2, 1, 'Wait'],
    ],
  );
  assert.equal(wait.hits[1].before, ' so ');
  // a regex across tokens: "<answer>" then a digit; the hit starts in the <answer> token
  const ans = idx.search('<answer>\\d', all);
  assert.deepEqual(
    ans.hits.map((h) => [h.step, h.episode, h.position]),
    [
      [1, 0, 3],
      [1, 1, 2],
      [2, 1, 0],
    ],
  );
  // plain text with regex characters is taken literally; the regex form of "1+" matches runs of 1s
  assert.equal(idx.search('1+', all, { plain: true }).total, 1);
  // as a regex, "1+" is a run of 1s: the "1" of "1+2", the "1" of " 1" and "111111" once
  assert.equal(idx.search('1+', all).total, 3);
  assert.equal(idx.search('wait', all, { plain: true, ignoreCase: true }).total, 2);
  assert.equal(idx.search('wait', all, { plain: true }).total, 0);
  // filtered rows only; a limit keeps the total
  assert.equal(idx.search('Wait', idx.filter('zero_var'), { plain: true }).total, 1);
  assert.equal(idx.search('\\d', all, { limit: 2 }).hits.length, 2);
  assert.throws(
    () => idx.search('(', all),
    (e: unknown) => isUserError(e) && /not a regular expression/.test(e.message),
  );
  assert.throws(
    () => idx.search('x*', all),
    (e: unknown) => isUserError(e) && /matches the empty string/.test(e.message),
  );
});

test('aggregation by token string: counts, means with 95 % t intervals, MC δ where probed, type filter', () => {
  const agg = idx.aggregateTokens(idx.filter());
  const one = agg.find((g) => g.token === '1')!;
  // "1" occurs once in step 1 episode 0 (|c| 0.1) and 6 times in step 2 episode 0 (|c| 0.1 each): mean 0.1, sd 0
  assert.equal(one.count, 7);
  assert.ok(Math.abs(one.abs_contribution.mean! - 0.1) < 1e-7 && Math.abs(one.abs_contribution.hi! - one.abs_contribution.lo!) < 1e-6);
  // Â of "1": 0.5 once, −0.55 six times: mean (0.5 − 3.3)/7 = −0.4
  assert.ok(Math.abs(one.effective_advantage.mean! + 0.4) < 1e-6);
  // " Wait": |c| 0.6 and 0: mean 0.3, sd 0.4243, t(1) 12.706 → half width 12.706·0.4243/√2 = 3.8118
  const wait = agg.find((g) => g.token === ' Wait')!;
  assert.equal(wait.count, 2);
  assert.ok(Math.abs(wait.abs_contribution.mean! - 0.3) < 1e-6);
  assert.ok(Math.abs(wait.abs_contribution.hi! - 0.3 - 3.8118) < 1e-3);
  // MC δ only where probed: " Wait" of step 1 episode 1 (−0.25); its other occurrence was not probed
  assert.equal(wait.mc_delta.n, 1);
  assert.ok(Math.abs(wait.mc_delta.mean! + 0.25) < 1e-7);
  assert.equal(wait.grad_norm.n, 0, 'no grad_norm column: no value');
  // sorted by count; the token-type filter keeps reasoning tokens only
  assert.equal(agg[0].token, '1');
  assert.ok(idx.aggregateTokens(idx.filter(), { tokenType: 'reasoning' }).every((g) => /\d/.test(g.token)));
  assert.deepEqual(idx.aggregateTokens(idx.filter('reward > 5')), []);
});

test('group by step and prompt; a group; histograms', () => {
  const bySteps = idx.groupBy(idx.filter(), 'step');
  // step 1: groups {7: 1.1, 0.1} live and {9: 0, 0} dead → 1/2; step 2: one live group
  assert.deepEqual(
    bySteps.map((s) => [s.key, s.episodes, s.effective_groups]),
    [
      [1, 4, 0.5],
      [2, 2, 1],
    ],
  );
  const byPrompt = idx.groupBy(idx.filter(), 'prompt');
  // prompt 7: rewards 1.1, 0.1, 0, 1.1 → mean 0.575, success 2/4
  assert.ok(Math.abs(byPrompt[0].reward_mean - 0.575) < 1e-6 && byPrompt[0].success_rate === 0.5);
  assert.deepEqual(keys(idx.group(1, 9)), ['1:2', '1:3']);
  const h = idx.histogram(Float32Array.of(0, 0.5, 1, 1, NaN), 2);
  assert.deepEqual(h, { lo: 0, hi: 1, counts: [1, 3] });
  assert.equal(idx.tokenValues(idx.filter('step = 2'), 'entropy').length, 9);
});

test("Browse Rollouts' answers: each tab from one query, and the exports", async () => {
  const { answer, exportRows } = await import('../../../src/engine/query/browse');
  const { DEFAULT_QUERY } = await import('../../../src/protocol/browse_view');
  const q = (p: object) => answer(idx, { ...DEFAULT_QUERY, ...p }, 0);
  const wrongFirst = q({ where: 'not success', sort: '-reward' });
  assert.equal(wrongFirst.total, 4);
  assert.deepEqual(
    wrongFirst.episodes.map((e) => e.reward),
    [Math.fround(0.1), 0, 0, 0],
  );
  assert.equal(q({ where: 'rewrd > 1' }).error?.includes('unknown field "rewrd"'), true, 'a bad filter comes back as the error');
  const g = q({ tab: 'group', group: { step: 1, prompt: 7 } }).group!;
  // the group's scale is the 98th percentile of |c| (with this few tokens the largest: 0.6, ' Wait' of episode 1)
  assert.equal(g.members.length, 2);
  assert.ok(Math.abs(g.scale - 0.6) < 1e-7);
  assert.deepEqual(
    g.members[1].tokens.map((t) => t.text),
    STEPS[1][1].tokens,
  );
  const p = q({ tab: 'prompt', prompt: 7 }).prompt!;
  assert.deepEqual(
    p.steps.map((s) => [s.step, s.members.length]),
    [
      [1, 2],
      [2, 2],
    ],
  );
  const h = q({ tab: 'histograms' });
  assert.equal(h.histograms!.length, 7);
  assert.deepEqual(
    h.steps!.map((s) => [s.step, s.effective_groups]),
    [
      [1, 0.5],
      [2, 1],
    ],
  );
  const tokens = q({ tab: 'tokens', tokenSort: '-abs_contribution' }).tokens!;
  // the largest mean |c| first: "3" (0.4 and 0.3: 0.35), then " Wait" (0.6 and 0: 0.3)
  assert.deepEqual(
    tokens.slice(0, 2).map((t) => t.token),
    ['3', ' Wait'],
  );
  // exports: every filtered episode with its completion; the aggregate with each mean's interval
  const csv = exportRows(idx, { ...DEFAULT_QUERY, where: 'status = wrong' }, 'episodes', 'csv');
  assert.equal(csv.split('\n')[0], 'step,episode,prompt,reward,advantage,length,status,zero_var,mean_abs_c,max_entropy,completion');
  assert.match(csv.split('\n')[1], /^1,1,7,0\.1.*, Wait 1<answer>4<\/answer>$/);
  const jsonl = exportRows(idx, DEFAULT_QUERY, 'tokens', 'jsonl').trim().split('\n');
  assert.equal(JSON.parse(jsonl[0]).token, '1');
  assert.match(exportRows(idx, DEFAULT_QUERY, 'tokens', 'csv').split('\n')[0], /^token,count,effective_advantage_mean,effective_advantage_lo/);
});

test("a prompt's gist is its text without the template every prompt of the run shares", async () => {
  const { promptGists } = await import('../../../src/engine/query/rollouts');
  const { countdownPrompt } = await import('../../../src/engine/tasks/countdown');
  // Countdown's prompts differ only in the numbers and the target: the gist is that sentence, cut at spaces.
  const a = countdownPrompt([3, 7], 21, 'tinyzero');
  const b = countdownPrompt([4, 5, 6], 9, 'tinyzero');
  const g = promptGists([a, b, a]);
  assert.equal(g.size, 2);
  assert.equal(g.get(a), '…[3, 7], create an equation that equals 21.…');
  assert.equal(g.get(b), '…[4, 5, 6], create an equation that equals 9.…');
  // One prompt only: its beginning, shortened to the limit, newlines as ⏎.
  assert.equal(promptGists(['solve\nx + 1 = 2 please'], 12).get('solve\nx + 1 = 2 please'), 'solve ⏎ x +…');
  // The fixture's prompts "p7" and "p9" share "p": nothing to cut at a space, so the whole text shows.
  assert.deepEqual(idx.row(0).prompt_text, 'p7');
});

test('round histogram bins: 1, 2, 2.5 or 5 × 10^k wide, integers at least 1, the maximum in a bin of its own', async () => {
  const { niceStep } = await import('../../../src/engine/query/rollouts');
  assert.deepEqual([0.0137, 0.3, 0.6, 2.2, 4, 7, 30].map(niceStep), [0.02, 0.5, 1, 2.5, 5, 10, 50]);
  // |c| in [0, 0.97], ~20 bins: 0.97/20 = 0.0485 → width 0.05, edges 0, 0.05, …, 1.0 (0.97 in [0.95, 1.0)): 20 bins.
  const h = idx.niceHistogram(Float32Array.of(0, 0.2, 0.97));
  assert.equal(h.lo, 0);
  assert.ok(Math.abs(h.hi - 1) < 1e-12 && h.counts.length === 20, JSON.stringify(h));
  assert.deepEqual([h.counts[0], h.counts[4], h.counts[19]], [1, 1, 1]);
  // lengths 12 … 24: integers, 12/20 = 0.6 → width 1; 24 gets [24, 25): 13 bins of one length each.
  const len = idx.niceHistogram(Int32Array.of(12, 13, 24, 24));
  assert.deepEqual([len.lo, len.hi, len.counts.length, len.counts[0], len.counts[12]], [12, 25, 13, 1, 2]);
  // advantages −1, 0.25, 1 over ~4 bins: 2/4 = 0.5 wide from −1: [−1, −0.5) … [1, 1.5), the maximum 1 in its own.
  assert.deepEqual(idx.niceHistogram(Float32Array.of(-1, 0.25, 1), 4), { lo: -1, hi: 1.5, counts: [1, 0, 1, 0, 1] });
  // −1, 0, 1 are integers: bins of 1 from −1.
  assert.deepEqual(idx.niceHistogram(Float32Array.of(-1, 0, 1), 4), { lo: -1, hi: 2, counts: [1, 1, 1] });
});

test('Browse Rollouts: an expanded episode comes with its whole prompt and completion; histograms leave A = 0 out unless asked', async () => {
  const { answer } = await import('../../../src/engine/query/browse');
  const { DEFAULT_QUERY } = await import('../../../src/protocol/browse_view');
  const q = (p: object) => answer(idx, { ...DEFAULT_QUERY, ...p }, 0);
  const d = q({ expanded: { step: 1, episode: 1 } }).detail!;
  assert.deepEqual([d.episode.step, d.episode.episode, d.prompt, d.completion], [1, 1, 'p7', ' Wait 1<answer>4</answer>']);
  assert.equal(q({ expanded: { step: 9, episode: 0 } }).detail, null);
  // Step 1's prompt 9 has A = 0 in both episodes (3 tokens): without them 6 episodes − 2 = 4 advantages are counted.
  const total = (h: { counts: number[] }) => h.counts.reduce((a, b) => a + b, 0);
  const moved = q({ tab: 'histograms' }).histograms!;
  const all = q({ tab: 'histograms', histZeroA: true }).histograms!;
  assert.equal(moved[1].name, 'advantage (A ≠ 0)');
  assert.equal(all[1].name, 'advantage');
  assert.deepEqual([total(moved[1]), total(all[1])], [4, 6]);
  // filler tokens: ' Wait' ×2 (one in a wrong A ≠ 0 episode, one in prompt 9's), ' so', ' hm', '<answer>' ×2, '</answer>' ×2 …
  assert.equal(total(all[3]) - total(moved[3]), 3, "prompt 9's three tokens (' so', ' Wait', ' hm') are the A = 0 ones");
});
