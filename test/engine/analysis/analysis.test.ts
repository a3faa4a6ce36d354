// Seed doc 002's credit analysis (src/engine/analysis/analysis.ts) on hand-made token tables whose every statistic is
// worked out in the comments, plus one real tiny run. Values are binary fractions, exact in float32.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evalFile, writeEvalTable } from '../../../src/engine/rundir/eval_table';
import { analyzeRun as analyzeWith, compareRuns, type AnalyzeOptions } from '../../../src/engine/analysis/analysis';
import { cmdAnalyze } from '../../../src/engine/cli/data_commands';
import { writeSyntheticRun } from '../../../src/engine/analysis/synthetic';
import { analysisToMarkdown } from '../../../src/engine/analysis/markdown';
import { readTokenTables, writeEpisodeTable, writeTokenTable, type TokenColumns, type TokenType } from '../../../src/engine/rundir/arrow_tables';
import { isUserError } from '../../../src/engine/core/errors';
import { stepFile, writeRunInfo } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import type { Section } from '../../../src/protocol';
import type { CreditAnalysis } from '../../../src/protocol/analysis';
import { tinyConfig } from '../fixtures';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-analysis-'));
/**
 * The hand-worked tables below are over the weighted contribution c = Â·ℓ (the fixture's weights are not 1); the
 * default, seed doc 002's c = A·ℓ, has its own test ("seed doc 002's definitions").
 */
const analyzeRun = (dir: string, o: AnalyzeOptions = {}) => analyzeWith(dir, { contribution: 'weighted', ...o });
const close = (a: number | null, b: number, msg?: string) => {
  assert.ok(a !== null && Math.abs(a - b) < 1e-9, `${msg ?? ''} ${a} ≉ ${b}`);
};

interface Row {
  step: number;
  episode: number;
  position: number;
  id: number;
  token: string;
  type: TokenType;
  section: Section;
  lp: number;
  adv: number;
  w: number;
}

/** Token columns from rows: Â = A·w and c = Â·ℓ as the trainer logs them (design.md#semantics). */
function tokenColumns(rows: Row[]): TokenColumns {
  const n = rows.length;
  const f = (g: (r: Row) => number) => Float32Array.from(rows, g);
  return {
    step: Int32Array.from(rows, (r) => r.step),
    episode: Int32Array.from(rows, (r) => r.episode),
    prompt_idx: new Int32Array(n),
    position: Int32Array.from(rows, (r) => r.position),
    token_id: Int32Array.from(rows, (r) => r.id),
    token: rows.map((r) => r.token),
    logprob: f((r) => r.lp),
    entropy: new Float32Array(n),
    advantage: f((r) => r.adv),
    weight: f((r) => r.w),
    effective_advantage: f((r) => r.adv * r.w),
    contribution: f((r) => r.adv * r.w * r.lp),
    // grad_norm = 2·|c|, so its per-type means are twice the hand-worked mean |c| (weighted c)
    grad_norm: f((r) => 2 * Math.abs(r.adv * r.w * r.lp)),
    attribution: null,
    importance: null,
    section: rows.map((r) => r.section),
    token_type: rows.map((r) => r.type),
    reward: f((r) => (r.adv > 0 ? 1 : 0)),
  };
}

/** A run directory with the given rows split into step tables, plus run.json, config.yaml and metrics.jsonl. */
function makeRun(rows: Row[], o: { strategy?: string; credit?: string; metrics?: object[]; name?: string } = {}): string {
  const dir = tmp();
  for (const sub of ['tokens', 'episodes', 'checkpoints']) mkdirSync(join(dir, sub));
  const strategy = o.strategy ?? 'outcome_conditional';
  writeRunInfo(dir, {
    id: `${o.name ?? 'fixture'}-20260101-000000`,
    name: o.name ?? 'fixture',
    status: 'completed',
    started: '2026-01-01T00:00:00Z',
    ended: null,
    backend: 'cpu',
    engine_version: '0',
    strategy,
  });
  writeFileSync(
    join(dir, 'config.yaml'),
    `name: ${o.name ?? 'fixture'}\ncredit:\n  strategy: ${strategy}\n${o.credit ?? '  think_discount: 0.5\n  epsilon: 0.1\n'}`,
  );
  writeFileSync(join(dir, 'metrics.jsonl'), (o.metrics ?? []).map((m) => JSON.stringify(m) + '\n').join(''));
  for (const step of [...new Set(rows.map((r) => r.step))]) {
    const mine = rows.filter((r) => r.step === step);
    writeTokenTable(stepFile(dir, 'tokens', step), tokenColumns(mine));
    const eps = [...new Set(mine.map((r) => r.episode))];
    writeEpisodeTable(stepFile(dir, 'episodes', step), {
      step: Int32Array.from(eps, () => step),
      episode: Int32Array.from(eps),
      prompt_idx: new Int32Array(eps.length),
      prompt: eps.map(() => 'p'),
      completion: eps.map(() => 'c'),
      reward: Float32Array.from(eps, (e) => (mine.find((r) => r.episode === e)!.adv > 0 ? 1 : 0)),
      reward_format: new Float32Array(eps.length),
      reward_answer: new Float32Array(eps.length),
      success: eps.map((e) => mine.find((r) => r.episode === e)!.adv > 0),
      advantage: Float32Array.from(eps, (e) => mine.find((r) => r.episode === e)!.adv),
      length: Int32Array.from(eps, (e) => mine.filter((r) => r.episode === e).length),
      oracle_span: eps.map(() => null),
    });
  }
  return dir;
}

const row = (
  step: number,
  episode: number,
  position: number,
  id: number,
  token: string,
  type: TokenType,
  section: Section,
  lp: number,
  adv: number,
  w: number,
): Row => ({ step, episode, position, id, token, type, section, lp, adv, w });

// The main fixture: an outcome_conditional-like run (w = 0.5 in think, 1 in answer; two w = 0 tokens for variety).
//   step 1, episode 0: A = +1, length 3
//     p0 ' go' (10) think  w .5  ℓ -1     c = .5·-1    = -0.5    filler
//     p1 '3'   (3)  think  w .5  ℓ -0.5   c = .5·-.5   = -0.25   reasoning
//     p2 '<answer>' (20) answer w 0 ℓ -0.25 c = 0               filler
//   step 1, episode 1: A = -1, length 4
//     p0 ' go' (10) think  w .5  ℓ -2     c = -.5·-2   = 1       filler
//     p1 '3'   (3)  think  w .5  ℓ -1     c = -.5·-1   = 0.5     reasoning
//     p2 '+'   (4)  think  w 0   ℓ -0.5   c = 0                 reasoning
//     p3 '<answer>' (20) answer w 1 ℓ -0.25 c = -1·-.25 = 0.25   filler
//   step 2, episode 0: A = +0.5, length 1
//     p0 'x'   (30) other  w 1   ℓ -0.5   c = .5·-.5   = -0.25   filler
const MAIN: Row[] = [
  row(1, 0, 0, 10, ' go', 'filler', 'think', -1, 1, 0.5),
  row(1, 0, 1, 3, '3', 'reasoning', 'think', -0.5, 1, 0.5),
  row(1, 0, 2, 20, '<answer>', 'filler', 'answer', -0.25, 1, 0),
  row(1, 1, 0, 10, ' go', 'filler', 'think', -2, -1, 0.5),
  row(1, 1, 1, 3, '3', 'reasoning', 'think', -1, -1, 0.5),
  row(1, 1, 2, 4, '+', 'reasoning', 'think', -0.5, -1, 0),
  row(1, 1, 3, 20, '<answer>', 'filler', 'answer', -0.25, -1, 1),
  row(2, 0, 0, 30, 'x', 'filler', 'other', -0.5, 0.5, 1),
];
const MAIN_METRICS = [
  { step: 1, phase: 'sft', loss: 1 },
  { step: 0, phase: 'eval', eval_success: 0.125 },
  { step: 1, phase: 'grpo', reward_mean: 0.5, success_rate: 0.5 },
  { step: 2, phase: 'grpo', reward_mean: 0.75, success_rate: 0, eval_success: 0.25 },
];

test('contribution statistics, relative-position bins and reward sign of the hand-made run', () => {
  const a = analyzeRun(makeRun(MAIN, { metrics: MAIN_METRICS }));
  // c = [-0.5, -0.25, 0, 1, 0.5, 0, 0.25, -0.25]: Σc = 0.75 → mean 0.09375; Σ|c| = 2.75 → 0.34375.
  // Σc² = 1.6875, minus 8·mean² = 0.0703125 → squared deviations 1.6171875; sample std √(1.6171875/7).
  const c = a.contribution;
  assert.equal(c.count, 8);
  close(c.mean, 0.09375);
  close(c.std, Math.sqrt(1.6171875 / 7));
  close(c.mean_abs, 0.34375);
  assert.equal(c.min, -0.5);
  assert.equal(c.max, 1);
  assert.equal(a.meta.tokens, 8);
  assert.equal(a.meta.episodes, 3);

  // bin = floor(10·p/len): len 3 → p0:0, p1:3, p2:6; len 4 → 0, 2, 5, 7; len 1 → 0.
  const rb = a.relative_position;
  assert.equal(rb.length, 10);
  assert.deepEqual(
    rb.map((b) => b.count),
    [3, 0, 1, 1, 0, 1, 1, 1, 0, 0],
  );
  // bin 0: c = -0.5, 1, -0.25 → mean 1/12; deviations -7/12, 11/12, -4/12 → ssd 186/144, std √(93/144)
  close(rb[0].mean_contribution, 1 / 12);
  close(rb[0].std_contribution, Math.sqrt(93) / 12);
  close(rb[0].mean_abs_contribution, 1.75 / 3);
  close(rb[0].mean_logprob, -3.5 / 3); // ℓ = -1, -2, -0.5
  // bin 2 holds ep1 p1 alone: c 0.5, ℓ -1, one value → std null
  close(rb[2].mean_contribution, 0.5);
  assert.equal(rb[2].std_contribution, null);
  close(rb[7].mean_abs_contribution, 0.25); // ep1 p3
  assert.equal(rb[1].mean_contribution, null); // empty bin
  assert.equal(rb[9].lo, 0.9);

  // A > 0: s1e0 (3 rows) and s2e0 (1 row): c = -0.5, -0.25, 0, -0.25 → mean -0.25, mean |c| 0.25.
  // A < 0: s1e1 (A = −1): c = 1, 0.5, 0, 0.25 → mean 0.4375 = mean |c|. No episode has A = 0.
  assert.deepEqual(a.reward_sign.positive, { episodes: 2, tokens: 4, mean_contribution: -0.25, mean_abs_contribution: 0.25 });
  assert.deepEqual(a.reward_sign.negative, { episodes: 1, tokens: 4, mean_contribution: 0.4375, mean_abs_contribution: 0.4375 });
  assert.deepEqual(a.reward_sign.zero, { episodes: 0, tokens: 0, mean_contribution: null, mean_abs_contribution: null });
});

test('reward sign: A > 0, A = 0 (a group of equal rewards) and A < 0 are three buckets, by hand', () => {
  // ep0 A = +1: c = 1·−1 = −1, 1·−0.5 = −0.5; ep1 A = 0: c = 0, 0, 0; ep2 A = −0.5: c = −0.5·−2 = 1.
  const a = analyzeRun(
    makeRun(
      [
        row(1, 0, 0, 10, ' so', 'filler', 'think', -1, 1, 1),
        row(1, 0, 1, 3, '3', 'reasoning', 'think', -0.5, 1, 1),
        row(1, 1, 0, 10, ' so', 'filler', 'think', -1, 0, 1),
        row(1, 1, 1, 3, '3', 'reasoning', 'think', -3, 0, 1),
        row(1, 1, 2, 3, '3', 'reasoning', 'think', -2, 0, 1),
        row(1, 2, 0, 10, ' so', 'filler', 'think', -2, -0.5, 1),
      ],
      { strategy: 'none', name: 'sign' },
    ),
  );
  assert.deepEqual(a.reward_sign.positive, { episodes: 1, tokens: 2, mean_contribution: -0.75, mean_abs_contribution: 0.75 });
  assert.deepEqual(a.reward_sign.zero, { episodes: 1, tokens: 3, mean_contribution: 0, mean_abs_contribution: 0 });
  assert.deepEqual(a.reward_sign.negative, { episodes: 1, tokens: 1, mean_contribution: 1, mean_abs_contribution: 1 });
  assert.match(analysisToMarkdown(a), /Zero \(A = 0\) \| 1 \| 3 /);
});

test('token types overall and by position, top tokens, and the ratio, from the logged token_type column', () => {
  const a = analyzeRun(makeRun(MAIN, { metrics: MAIN_METRICS }));
  // filler rows: ' go'(-0.5, ℓ-1), '<answer>'(0, -0.25), ' go'(1, -2), '<answer>'(0.25, -0.25), 'x'(-0.25, -0.5)
  //   count 5, share 5/8, mean |c| 2/5 = 0.4, mean c 0.5/5 = 0.1, mean ℓ -4/5
  // reasoning rows: '3'(-0.25, -0.5), '3'(0.5, -1), '+'(0, -0.5): count 3, mean |c| 0.75/3, mean c 0.25/3, mean ℓ -2/3
  const f = a.token_types.filler,
    r = a.token_types.reasoning;
  assert.equal(f.count, 5);
  close(f.share, 0.625);
  close(f.mean_abs_contribution, 0.4);
  close(f.mean_contribution, 0.1);
  close(f.mean_logprob, -0.8);
  assert.equal(r.count, 3);
  close(r.share, 0.375);
  close(r.mean_abs_contribution, 0.25);
  close(r.mean_contribution, 0.25 / 3);
  close(r.mean_logprob, -2 / 3);
  close(a.meta.filler_reasoning_ratio, 0.4 / 0.25);
  close(a.meta.filler_mean_abs_contribution, 0.4);
  close(a.meta.reasoning_mean_abs_contribution, 0.25);

  // 5 bins, floor(5·p/len): len 3 → 0, 1, 3; len 4 → 0, 1, 2, 3; len 1 → 0
  //   bin 0: filler ' go', ' go', 'x' (|c| .5, 1, .25; ℓ -1, -2, -.5)   bin 1: reasoning '3', '3' (|c| .25, .5; ℓ -.5, -1)
  //   bin 2: reasoning '+' (0; -.5)   bin 3: filler '<answer>' ×2 (|c| 0, .25; ℓ -.25 ×2)   bin 4: empty
  const tb = a.token_types_by_position;
  assert.equal(tb.length, 5);
  assert.deepEqual(
    tb.map((b) => [b.filler.count, b.reasoning.count]),
    [
      [3, 0],
      [0, 2],
      [0, 1],
      [2, 0],
      [0, 0],
    ],
  );
  close(tb[0].filler.mean_abs_contribution, 1.75 / 3);
  close(tb[0].filler.mean_logprob, -3.5 / 3);
  close(tb[0].filler.share, 1);
  assert.equal(tb[0].reasoning.mean_abs_contribution, null);
  close(tb[1].reasoning.mean_abs_contribution, 0.375);
  close(tb[1].reasoning.mean_logprob, -0.75);
  close(tb[3].filler.mean_abs_contribution, 0.125);
  assert.equal(tb[4].filler.share, null);

  // filler tokens: ' go' count 2, Σ|c| 1.5, mean c 0.25, mean ℓ -1.5; '<answer>' count 2, Σ|c| .25, mean c .125, ℓ -.25;
  //   'x' count 1, Σ|c| .25. By Σ|c|: ' go', then the 0.25 tie broken by count: '<answer>' (2) before 'x' (1).
  //   By count: ' go' and '<answer>' tie at 2, broken by Σ|c|: ' go' first.
  const ft = a.top_tokens.filler;
  assert.deepEqual(
    ft.by_total_abs_contribution.map((t) => t.token),
    [' go', '<answer>', 'x'],
  );
  assert.deepEqual(
    ft.by_count.map((t) => t.token),
    [' go', '<answer>', 'x'],
  );
  assert.deepEqual(ft.by_total_abs_contribution[0], {
    token_id: 10,
    token: ' go',
    count: 2,
    total_abs_contribution: 1.5,
    mean_contribution: 0.25,
    mean_abs_contribution: 0.75,
    mean_logprob: -1.5,
  });
  assert.deepEqual(ft.by_total_abs_contribution[1], {
    token_id: 20,
    token: '<answer>',
    count: 2,
    total_abs_contribution: 0.25,
    mean_contribution: 0.125,
    mean_abs_contribution: 0.125,
    mean_logprob: -0.25,
  });
  // reasoning tokens: '3' count 2, Σ|c| .75, mean c .125, ℓ -.75; '+' count 1, Σ|c| 0
  assert.deepEqual(
    a.top_tokens.reasoning.by_total_abs_contribution.map((t) => [t.token, t.count, t.total_abs_contribution]),
    [
      ['3', 2, 0.75],
      ['+', 1, 0],
    ],
  );
  close(a.top_tokens.reasoning.by_count[0].mean_contribution, 0.125);
});

test('weights per section: count, mean, sample std, min, numpy-style percentiles, max, mean |Â| and |c|', () => {
  const a = analyzeRun(makeRun(MAIN, { metrics: MAIN_METRICS }));
  assert.equal(a.weights.strategy, 'outcome_conditional');
  // think: w = .5, .5, .5, .5, 0 → mean .4; deviations .1 ×4, -.4 → ssd .2, std √(.2/4)
  //   sorted [0, .5, .5, .5, .5]: p10 h = 4·.1 = .4 → 0 + .4·(.5 − 0) = .2; p50 h = 2 → .5; p90 h = 3.6 → .5
  //   |Â| = .5 ×4, 0 → .4; |c| = .5, .25, 1, .5, 0 → 2.25/5
  const t = a.weights.sections.think;
  assert.equal(t.count, 5);
  close(t.mean, 0.4);
  close(t.std, Math.sqrt(0.05));
  assert.equal(t.min, 0);
  close(t.p10, 0.2);
  close(t.p50, 0.5);
  close(t.p90, 0.5);
  assert.equal(t.max, 0.5);
  close(t.mean_abs_effective_advantage, 0.4);
  close(t.mean_abs_contribution, 0.45);
  // answer: w = 0, 1 → mean .5, std √(.5), sorted [0, 1]: p10 h = .1 → .1, p50 .5, p90 .9; |Â| = 0, 1 → .5; |c| = 0, .25
  const an = a.weights.sections.answer;
  assert.deepEqual([an.count, an.min, an.max], [2, 0, 1]);
  close(an.std, Math.sqrt(0.5));
  close(an.p10, 0.1);
  close(an.p50, 0.5);
  close(an.p90, 0.9);
  close(an.mean_abs_contribution, 0.125);
  // other: one token, w 1, Â .5 → std null, every percentile 1
  const o = a.weights.sections.other;
  assert.deepEqual([o.count, o.mean, o.std, o.p10, o.p50, o.p90, o.mean_abs_effective_advantage], [1, 1, null, 1, 1, 1, 0.5]);
});

test('section weight percentiles agree with a sort-based numpy formula on 1000 random weights', () => {
  // 1000 weights in think (one episode of 1000 tokens); the reference sorts and interpolates as numpy does.
  let s = 12345;
  const rand = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const rows: Row[] = Array.from({ length: 1000 }, (_, p) => row(1, 0, p, 1, 'a', 'filler', 'think', -0.5, 1, Math.fround(rand() * 3)));
  // a few exact repeats, as entropy_mask's 0/1 weights make
  for (let p = 0; p < 100; p++) rows[p * 7].w = 1;
  const a = analyzeRun(makeRun(rows));
  const sorted = rows.map((r) => Math.fround(r.w)).sort((x, y) => x - y);
  const ref = (q: number) => {
    const h = ((sorted.length - 1) * q) / 100;
    const k = Math.floor(h);
    return sorted[k] + (h - k) * ((sorted[k + 1] ?? sorted[k]) - sorted[k]);
  };
  const t = a.weights.sections.think;
  close(t.p10, ref(10), 'p10');
  close(t.p50, ref(50), 'p50');
  close(t.p90, ref(90), 'p90');
  assert.equal(t.min, sorted[0]);
  assert.equal(t.max, sorted[999]);
});

test('t-statistics per position: |t| > 3, < 1.5, boundaries, and the positions left out', () => {
  // Two rewarded episodes (A = 1, w = 1, so c = ℓ). With n = 2, t = mean/(sd/√2) = (a + b)/|a − b|.
  //   p0: -1, -1.25  → t = -2.25/0.25 = -9      (> 3)
  //   p1: -0.5, -1   → t = -1.5/0.5   = -3      (exactly 3: neither > 3 nor < 1.5)
  //   p2: -0.25, -2  → t = -2.25/1.75 = -9/7    (< 1.5)
  //   p3: -0.5, -0.5 → std 0, left out
  //   p4: only episode 1 reaches it → n = 1, left out
  const c0 = [-1, -0.5, -0.25, -0.5];
  const c1 = [-1.25, -1, -2, -0.5, -0.75];
  const rows = [...c0.map((c, p) => row(1, 0, p, 1, 'a', 'filler', 'think', c, 1, 1)), ...c1.map((c, p) => row(1, 1, p, 1, 'a', 'filler', 'think', c, 1, 1))];
  const t = analyzeRun(makeRun(rows)).position_t_stats;
  assert.equal(t.positions, 3);
  close(t.frac_abs_t_gt_3, 1 / 3);
  close(t.frac_abs_t_lt_1_5, 1 / 3);
  close(t.mean_abs_t, (9 + 3 + 9 / 7) / 3); // = 31/7
  assert.equal(t.excluded_n_lt_2, 1);
  assert.equal(t.excluded_zero_std, 1);
  assert.match(t.note, /3 of 5 positions/);
  assert.match(t.note, /1 reached by fewer than 2 episodes/);
  assert.match(t.note, /std 0/);
  assert.equal(t.by_position.length, 5);
  close(t.by_position[0].t, -9);
  close(t.by_position[1].t, -3);
  close(t.by_position[2].t, -9 / 7);
  assert.deepEqual([t.by_position[3].t, t.by_position[4].t, t.by_position[4].n], [null, null, 1]);
});

test('a step range analyses only its steps; eval success and training rates follow the range', () => {
  const dir = makeRun(MAIN, { metrics: MAIN_METRICS });
  const all = analyzeRun(dir);
  assert.deepEqual(all.meta.steps, { requested_from: null, requested_to: null, from: 1, to: 2, count: 2 });
  // eval: the phase-'eval' row (step 0) is before GRPO; the last eval is at step 2
  assert.deepEqual(all.meta.eval_success, { before_grpo: 0.125, final: 0.25, final_step: 2 });
  // training: mean over grpo steps 1, 2 of success_rate (.5, 0) and reward_mean (.5, .75)
  assert.deepEqual(all.meta.training, { steps: 2, success_rate: 0.25, reward_mean: 0.625 });

  const early = analyzeRun(dir, { toStep: 1 });
  // step 1 only: Σc = 0.75 − (−0.25) = 1 over 7 rows
  assert.equal(early.meta.tokens, 7);
  assert.equal(early.meta.episodes, 2);
  close(early.contribution.mean, 1 / 7);
  assert.deepEqual(early.meta.steps, { requested_from: null, requested_to: 1, from: 1, to: 1, count: 1 });
  // no eval at a step in 1..1 other than the pre-GRPO one at step 0
  assert.deepEqual(early.meta.eval_success, { before_grpo: 0.125, final: 0.125, final_step: 0 });
  assert.deepEqual(early.meta.training, { steps: 1, success_rate: 0.5, reward_mean: 0.5 });

  const late = analyzeRun(dir, { fromStep: 2 });
  assert.equal(late.meta.tokens, 1);
  assert.equal(late.contribution.mean, -0.25);
  assert.equal(late.token_types.reasoning.count, 0);
  assert.equal(late.meta.filler_reasoning_ratio, null); // no reasoning tokens → no ratio
  assert.equal(late.meta.strategy_param?.value, 0.5);
});

test('a custom reasoning regex re-classifies tokens from their (trimmed) text', () => {
  const dir = makeRun(MAIN);
  // digits only: '+' becomes filler. reasoning = '3' ×2 (|c| .25, .5; ℓ -.5, -1); filler = 6 rows, Σ|c| 2.75 − .75 = 2
  const a = analyzeRun(dir, { reasoningRegex: '^[0-9]+$' });
  assert.equal(a.token_types.reasoning.count, 2);
  close(a.token_types.reasoning.mean_abs_contribution, 0.375);
  assert.equal(a.token_types.filler.count, 6);
  close(a.token_types.filler.mean_abs_contribution, 2 / 6);
  assert.equal(a.meta.reasoning_regex, '^[0-9]+$');
  assert.equal(a.meta.reasoning_regex_is_default, false);
  assert.ok(a.notes.some((n) => n.includes('custom regex')));
  // by count: ' go' 2 and '<answer>' 2 (Σ|c| 1.5 > .25), then 'x' 1 (Σ|c| .25) before '+' 1 (Σ|c| 0)
  assert.deepEqual(
    a.top_tokens.filler.by_count.map((t) => t.token),
    [' go', '<answer>', 'x', '+'],
  );
  // The text is trimmed before matching: ' go' counts as "go".
  const g = analyzeRun(dir, { reasoningRegex: '^go$' });
  assert.deepEqual(
    g.top_tokens.reasoning.by_count.map((t) => [t.token, t.count]),
    [[' go', 2]],
  );
  // The default regex reproduces the logged column.
  const d = analyzeRun(dir, { reasoningRegex: '^[0-9+\\-*/=().×÷]+$' });
  assert.deepEqual(d.token_types, analyzeRun(dir).token_types);
});

test('rows with a non-finite value are left out with a note; ids outside a dense vocabulary still group', () => {
  const rows = [
    row(1, 0, 0, -1, 'a', 'filler', 'think', -1, 1, 1),
    row(1, 0, 1, 5_000_000, 'b', 'filler', 'think', -0.5, 1, 1),
    row(1, 0, 2, -1, 'a', 'filler', 'think', -0.25, 1, 1),
    row(1, 0, 3, 7, 'c', 'filler', 'think', NaN, 1, 1),
  ];
  const a = analyzeRun(makeRun(rows));
  assert.equal(a.meta.tokens, 3);
  assert.equal(a.contribution.count, 3);
  close(a.contribution.mean, -1.75 / 3);
  assert.ok(a.notes.some((n) => n.startsWith('1 of 4 token rows')));
  // relative position keeps the logged episode length (4): p0 → 0, p1 → floor(10/4) = 2, p2 → 5
  assert.deepEqual(
    a.relative_position.map((b) => b.count),
    [1, 0, 1, 0, 0, 1, 0, 0, 0, 0],
  );
  assert.deepEqual(
    a.top_tokens.filler.by_count.map((t) => [t.token_id, t.count]),
    [
      [-1, 2],
      [5_000_000, 1],
    ],
  );
});

test('topK caps every top-token list', () => {
  const a = analyzeRun(makeRun(MAIN), { topK: 1 });
  assert.deepEqual(
    a.top_tokens.filler.by_count.map((t) => t.token),
    [' go'],
  );
  assert.deepEqual(
    a.top_tokens.reasoning.by_total_abs_contribution.map((t) => t.token),
    ['3'],
  );
});

function userError(f: () => unknown, re: RegExp): void {
  assert.throws(f, (e: unknown) => isUserError(e) && re.test((e as Error).message));
}

test('user errors: not a run directory, no token tables, bad regex, empty step range', () => {
  const dir = makeRun(MAIN);
  userError(() => analyzeRun(join(dir, 'nope')), /no such run directory/);
  userError(() => analyzeRun(join(dir, 'config.yaml')), /is not a directory/);
  userError(() => analyzeRun(tmp()), /not a run directory/);
  const empty = tmp();
  writeRunInfo(empty, { id: 'e', name: 'e', status: 'running', started: '', ended: null, backend: 'cpu', engine_version: '0' });
  userError(() => analyzeRun(empty), /no token tables/);
  userError(() => analyzeRun(dir, { reasoningRegex: '[0-9' }), /not a valid regular expression/);
  userError(() => analyzeRun(dir, { fromStep: 3 }), /no token tables in steps 3–…: .* logged steps 1–2/);
  userError(() => analyzeRun(dir, { fromStep: 2, toStep: 1 }), /empty step range/);
  userError(() => analyzeRun(dir, { topK: 0 }), /--top-k/);
});

test('compareRuns gives seed doc 002 Appendix B: eval, filler |c|, reasoning |c|, ratio and the deltas', () => {
  // run: MAIN (filler .4, reasoning .25, ratio 1.6, final eval .25 at step 2)
  // baseline: MAIN with every weight 1 and strategy none, and its own metrics (final eval .5 at step 2):
  //   c = A·ℓ: ' go' -1, '3' -0.5, '<answer>' -0.25 | ' go' 2, '3' 1, '+' 0.5, '<answer>' 0.25 | 'x' -0.25
  //   filler |c| = (1 + .25 + 2 + .25 + .25)/5 = 0.75; reasoning |c| = (.5 + 1 + .5)/3 = 2/3; ratio 1.125
  const run = analyzeRun(makeRun(MAIN, { metrics: MAIN_METRICS }));
  const base = analyzeRun(
    makeRun(
      MAIN.map((r) => ({ ...r, w: 1 })),
      {
        strategy: 'none',
        credit: '',
        name: 'base',
        metrics: [
          { step: 0, phase: 'eval', eval_success: 0 },
          { step: 2, phase: 'grpo', eval_success: 0.5 },
        ],
      },
    ),
  );
  const cmp = compareRuns(run, base);
  assert.equal(cmp.run.label, 'outcome_conditional (think_discount 0.5)');
  assert.equal(cmp.baseline.label, 'none');
  assert.deepEqual([cmp.run.eval_success, cmp.run.eval_step, cmp.baseline.eval_success], [0.25, 2, 0.5]);
  close(cmp.baseline.filler_mean_abs_contribution, 0.75);
  close(cmp.baseline.reasoning_mean_abs_contribution, 2 / 3);
  close(cmp.baseline.filler_reasoning_ratio, 1.125);
  close(cmp.delta.eval_success, 0.25 - 0.5);
  close(cmp.delta.filler_mean_abs_contribution, 0.4 - 0.75);
  close(cmp.delta.reasoning_mean_abs_contribution, 0.25 - 2 / 3);
  close(cmp.delta.filler_reasoning_ratio, 1.6 - 1.125);

  const md = analysisToMarkdown(run, cmp);
  assert.match(md, /## Mitigation summary \(the GRPO credit-assignment analysis, Appendix B\)/);
  assert.match(md, /\| Baseline: none \| base \| 50% @ 2 \| 0\.750 \| 0\.667 \| 1\.13× \|/);
  assert.match(md, /\| outcome_conditional \(think_discount 0\.5\) \| fixture \| 25% @ 2 \| 0\.400 \| 0\.250 \| 1\.60× \|/);
  assert.match(md, /\| Δ \(run − baseline\) \|  \| −25 pts \| −0\.350 \| −0\.417 \| \+0\.48× \|/);
});

test('Markdown lays out every table of seed doc 002', () => {
  const md = analysisToMarkdown(analyzeRun(makeRun(MAIN, { metrics: MAIN_METRICS })));
  for (const h of [
    '## Contribution statistics',
    '## T-statistics per position',
    '## Position analysis',
    '## By reward sign',
    '## Token types',
    '## Token types by position',
    '### Filler, by total |c|',
    '### Reasoning, by count',
    '## Weights per section (strategy: outcome_conditional)',
  ]) {
    assert.ok(md.includes(h), h);
  }
  assert.match(md, /\| Mean contribution \| 0\.094 \|/); // 0.09375
  assert.match(md, /\| Filler \| 5 \| 62\.5% \| 0\.400 \| 0\.800 \| 0\.100 \| -0\.800 \|/);
  // grad norm beside |c|: filler 2 × 0.400, reasoning 2 × 0.250
  assert.match(md, /\| Reasoning \| 3 \| 37\.5% \| 0\.250 \| 0\.500 \|/);
  assert.match(md, /instead of \|c\|, filler gets 60% MORE than reasoning \(ratio 1\.60×\)/);
  assert.match(md, /\| `"<answer>"` \| 20 \| 2 \| 0\.250 \|/);
  assert.match(md, /Filler gets 60% MORE gradient magnitude than reasoning \(ratio 1\.60×\)/);
  assert.match(md, /Eval success: 12\.5% before GRPO → 25\.0% at step 2/);
});

test("Appendix B carries the paired test on eval success from both runs' per-instance eval tables, by hand", () => {
  const run = makeRun(MAIN, { metrics: MAIN_METRICS });
  const base = makeRun(
    MAIN.map((r) => ({ ...r, w: 1 })),
    { strategy: 'none', credit: '', name: 'base' },
  );
  // Without eval tables: no test, and the reason.
  const none = compareRuns(analyzeRun(run), analyzeRun(base));
  assert.equal(none.eval_test, null);
  assert.match(none.eval_test_note!, /no per-instance eval tables/);
  assert.match(analysisToMarkdown(analyzeRun(run), none), /Paired test on eval success: not available/);
  // 40 test instances: the baseline solves 0–9, the run 0–19. b = 0 (only the baseline), c = 10 (only the run): the
  // exact test (one seed per side: McNemar's) p = 2·2^−10 = 0.001953; Δ = +25 pts. A family of one: p_adj = p.
  const evalOf = (dir: string, solved: number, step = 2) =>
    writeEvalTable(evalFile(dir, step), {
      instance_id: Array.from({ length: 40 }, (_, i) => `t${i}`),
      split: Array(40).fill('test'),
      success: Array.from({ length: 40 }, (_, i) => i < solved),
      reward: Float32Array.from({ length: 40 }, (_, i) => (i < solved ? 1 : 0)),
      completion: Array(40).fill(''),
    });
  evalOf(base, 10);
  evalOf(run, 20);
  const cmp = compareRuns(analyzeRun(run), analyzeRun(base));
  const t = cmp.eval_test!;
  assert.deepEqual([t.instances, t.b, t.c, t.significant, t.split, t.step, t.exploratory], [40, 0, 10, true, 'test', 2, true]);
  assert.ok(Math.abs(t.p - 2 * 2 ** -10) < 1e-12, String(t.p));
  assert.equal(t.p_adjusted, t.p);
  assert.ok(Math.abs(t.diff - 0.25) < 1e-12 && t.lo > 0.05 && t.hi <= 0.45, JSON.stringify(t));
  assert.match(
    analysisToMarkdown(analyzeRun(run), cmp),
    /at step 2, the same 40 test instances: \*\*Δ \+25\.0 pts, 95 % bootstrap CI over instances \[\+\d+\.\d, \+\d+\.\d\]\*\*; exact test p = 0\.002 .*MDE ± \d+\.\d pp\. Conditional on these two checkpoints/,
  );
  // A one-instance difference is n.s.
  evalOf(run, 11);
  const ns = compareRuns(analyzeRun(run), analyzeRun(base));
  assert.equal(ns.eval_test!.significant, false);
  assert.match(analysisToMarkdown(analyzeRun(run), ns), /exact test p = 1\.000 .* — n\.s\. at α = 0\.05/);

  // --to-step: the table shows the eval at step 2, so the test is at step 2 too, not at the runs' last eval (step 4,
  // where the run solves nothing the baseline does not).
  evalOf(run, 20);
  evalOf(base, 20, 4);
  evalOf(run, 20, 4);
  const later = [...MAIN_METRICS, { step: 4, phase: 'grpo', reward_mean: 0.75, success_rate: 0, eval_success: 0.5 }];
  const run4 = makeRun(MAIN, { metrics: later });
  const base4 = makeRun(
    MAIN.map((r) => ({ ...r, w: 1 })),
    { strategy: 'none', credit: '', name: 'base', metrics: later },
  );
  for (const [d, solved] of [
    [base4, 10],
    [run4, 20],
  ] as const) {
    evalOf(d, solved);
    evalOf(d, 20, 4);
  }
  const at2 = compareRuns(analyzeRun(run4, { toStep: 3 }), analyzeRun(base4, { toStep: 3 })).eval_test!;
  assert.deepEqual([at2.step, at2.c, at2.significant], [2, 10, true]);
  const at4 = compareRuns(analyzeRun(run4), analyzeRun(base4)).eval_test!;
  assert.deepEqual([at4.step, at4.b, at4.c, at4.significant], [4, 0, 0, false]);
});

test('cmdAnalyze writes JSON or Markdown by the --out extension and adds the baseline comparison', async () => {
  const run = makeRun(MAIN, { metrics: MAIN_METRICS });
  const base = makeRun(
    MAIN.map((r) => ({ ...r, w: 1 })),
    { strategy: 'none', credit: '' },
  );
  const out = tmp();
  assert.equal(await cmdAnalyze([run, '--out', join(out, 'a.json'), '--to-step', '1', '--baseline', base]), 0);
  const j = JSON.parse(readFileSync(join(out, 'a.json'), 'utf8')) as CreditAnalysis & { appendix_b?: { baseline: { label: string } } };
  assert.equal(j.meta.steps.to, 1);
  assert.equal(j.meta.tokens, 7);
  assert.equal(j.appendix_b?.baseline.label, 'none');
  assert.equal(await cmdAnalyze([run, `--out=${join(out, 'a.md')}`, '--reasoning-regex', '^[0-9]+$']), 0);
  const md = readFileSync(join(out, 'a.md'), 'utf8');
  assert.match(md, /^# Credit analysis: fixture/);
  assert.match(md, /\(custom\)/);
  await assert.rejects(cmdAnalyze([run, '--bogus']), (e: unknown) => isUserError(e) && /unknown option --bogus/.test((e as Error).message));
  await assert.rejects(cmdAnalyze([]), /analyze needs a run directory/);
  // several run directories are for pooled probes only
  await assert.rejects(cmdAnalyze([run, base]), /several with --probe/);
  await assert.rejects(cmdAnalyze([run, '--from-step', 'x']), /--from-step: got "x"; expected an integer ≥ 0/);
  await assert.rejects(cmdAnalyze([run, '--from-step']), /needs a value/);
});

test('the synthetic benchmark run analyses consistently (10k rows)', () => {
  const dir = tmp();
  writeSyntheticRun(dir, 10_000);
  const a = analyzeRun(dir);
  assert.equal(a.meta.tokens, 10_000);
  assert.equal(readTokenTables(dir).step.length, 10_000);
  assertConsistent(a);
});

/** Tables that partition the same rows must add up; shares sum to 1. */
function assertConsistent(a: CreditAnalysis): void {
  const n = a.meta.tokens;
  const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
  assert.equal(a.contribution.count, n);
  assert.equal(sum(a.relative_position.map((b) => b.count)), n);
  const sg = a.reward_sign;
  assert.equal(sg.positive.tokens + sg.zero.tokens + sg.negative.tokens, n);
  assert.equal(sg.positive.episodes + sg.zero.episodes + sg.negative.episodes, a.meta.episodes);
  assert.equal(a.token_types.filler.count + a.token_types.reasoning.count, n);
  close(a.token_types.filler.share! + a.token_types.reasoning.share!, 1);
  assert.equal(sum(a.token_types_by_position.map((b) => b.filler.count + b.reasoning.count)), n);
  for (const b of a.token_types_by_position) if (b.filler.count + b.reasoning.count > 0) close(b.filler.share! + b.reasoning.share!, 1);
  assert.equal(sum(Object.values(a.weights.sections).map((s) => s.count)), n);
  assert.equal(sum(a.position_t_stats.by_position.map((p) => p.n)), n);
  assert.equal(a.position_t_stats.positions + a.position_t_stats.excluded_n_lt_2 + a.position_t_stats.excluded_zero_std, a.position_t_stats.by_position.length);
  // mean |c| overall is the count-weighted mean of the per-type means
  close(
    a.contribution.mean_abs!,
    ((a.token_types.filler.mean_abs_contribution ?? 0) * a.token_types.filler.count +
      (a.token_types.reasoning.mean_abs_contribution ?? 0) * a.token_types.reasoning.count) /
      n,
  );
  for (const type of ['filler', 'reasoning'] as const) {
    for (const t of a.top_tokens[type].by_count) close(t.mean_abs_contribution, t.total_abs_contribution / t.count);
  }
  // JSON carries no NaN (it would print as null and hide a bug)
  assert.ok(!JSON.stringify(a, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? 'NONFINITE' : v)).includes('NONFINITE'));
}

test('a real tiny countdown run: every table present and consistent', async () => {
  const dir = tmp();
  const r = await train({ configPath: tinyConfig(dir, 'countdown') });
  const a = analyzeRun(r.runDir);
  assert.equal(a.meta.strategy, 'none');
  assert.deepEqual([a.meta.steps.from, a.meta.steps.to, a.meta.steps.count], [1, 3, 3]);
  // 3 steps × 2 prompts × 4 rollouts
  assert.equal(a.meta.episodes, 24);
  assert.ok(a.meta.tokens > 0);
  assert.notEqual(a.meta.eval_success.before_grpo, null);
  assert.equal(a.meta.eval_success.final_step, 3);
  assert.equal(a.meta.training.steps, 3);
  assertConsistent(a);
  // strategy none: w = 1 everywhere, so every section's weights are exactly 1
  for (const s of Object.values(a.weights.sections))
    if (s.count > 0) assert.deepEqual([s.min, s.p10, s.p50, s.p90, s.max, s.std], [1, 1, 1, 1, 1, s.count > 1 ? 0 : null]);
  // Rewarded episodes push c ≤ 0 (seed doc 002's sign check), the others c ≥ 0.
  if (a.reward_sign.positive.tokens) assert.ok(a.reward_sign.positive.mean_contribution! <= 0);
  if (a.reward_sign.negative.tokens) assert.ok(a.reward_sign.negative.mean_contribution! >= 0);
  // A = 0 gives c = Â·ℓ = 0 under every strategy that scales A (all but cal): its tokens' mean |c| is 0.
  if (a.reward_sign.zero.tokens) assert.equal(a.reward_sign.zero.mean_abs_contribution, 0);
  const md = analysisToMarkdown(a);
  assert.match(md, /## Token types by position/);
});

test("seed doc 002's definitions by default: c = A·ℓ without the weights, and punctuation alone is filler", async () => {
  const { tokenType } = await import('../../../src/engine/tasks/sections');
  // seed doc 002 counts punctuation as filler: a sentence-final "." or a bare parenthesis; a number with one stays reasoning
  for (const [t, want] of [
    ['.', 'filler'],
    [' .', 'filler'],
    ['(', 'filler'],
    [').', 'filler'],
    ['3.', 'reasoning'],
    ['(4', 'reasoning'],
    [' -', 'reasoning'],
    ['=', 'reasoning'],
    ['12', 'reasoning'],
    [' so', 'filler'],
  ] as const)
    assert.equal(tokenType(t), want, JSON.stringify(t));
  // The MAIN fixture with one more token, a sentence-final "." (id 5) of step 2 with ℓ −0.5 and A +0.5 (logged as
  // reasoning by an older engine): by A·ℓ, filler |c| = (|1·−1| + |1·−0.25| + |−1·−2| + |−1·−0.25| + |0.5·−0.5| +
  // |0.5·−0.5|)/6 = (1 + 0.25 + 2 + 0.25 + 0.25 + 0.25)/6 = 2/3; reasoning |c| = (0.5 + 1 + 0.5)/3 = 2/3.
  const rows = [...MAIN, row(2, 0, 1, 5, '.', 'reasoning', 'other', -0.5, 0.5, 1)];
  const a = analyzeWith(makeRun(rows, { metrics: MAIN_METRICS }));
  assert.equal(a.meta.contribution, 'episode');
  assert.equal(a.token_types.filler.count, 6, 'the "." is filler whatever the logged column says');
  close(a.token_types.filler.mean_abs_contribution, 2 / 3, 'filler |A·ℓ|');
  close(a.token_types.reasoning.mean_abs_contribution, 2 / 3, 'reasoning |A·ℓ|');
  // The weighted view of the same run: Â·ℓ, the logged column (w = 0.5 in think, 0 on two tokens).
  const w = analyzeWith(makeRun(rows, { metrics: MAIN_METRICS }), { contribution: 'weighted' });
  assert.equal(w.meta.contribution, 'weighted');
  // filler Â·ℓ: 0.5, 0, 1, 0.25, 0.25, 0.25 → 2.25/6 = 0.375; reasoning: 0.25, 0.5, 0 → 0.25
  close(w.token_types.filler.mean_abs_contribution, 0.375, 'filler |Â·ℓ|');
  close(w.token_types.reasoning.mean_abs_contribution, 0.25, 'reasoning |Â·ℓ|');
  assert.match(analysisToMarkdown(a), /c = A × log-prob, the episode's advantage \(the GRPO credit-assignment analysis's contribution/);
  assert.match(analysisToMarkdown(w), /c = Â × log-prob, the strategy's weighted advantage/);
});
