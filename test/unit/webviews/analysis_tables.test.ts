// The credit-analysis view's tables from an analyze report. The report is written by hand (a small one,
// values exact in binary), so each cell's expected value is read off it or worked out in a comment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AnalyzeReport, SectionWeightStats, TokenTypeStats } from '../../../src/protocol/analysis';
import {
  allTables,
  appendixBTable,
  binLabel,
  evalTestCell,
  positionBinTable,
  showToken,
  topTokenTable,
  typeByPositionTable,
  weightTable,
} from '../../../src/webviews/analysis_tables';
import { toCsv } from '../../../src/webviews/csv';

const types = (count: number, share: number, abs: number): TokenTypeStats => ({
  count,
  share,
  mean_abs_contribution: abs,
  mean_contribution: -abs / 2,
  mean_logprob: -1,
  mean_grad_norm: abs / 5,
});
const weights = (count: number, mean: number): SectionWeightStats => ({
  count,
  mean,
  std: 0.5,
  min: 0,
  p10: 0.25,
  p50: mean,
  p90: 1.5,
  max: 2,
  mean_abs_effective_advantage: 0.75,
  mean_abs_contribution: 0.5,
});

const REPORT: AnalyzeReport = {
  version: 1,
  meta: {
    run_dir: '/runs/a',
    contribution: 'episode',
    run_id: 'a',
    name: 'a',
    strategy: 'outcome_conditional',
    strategy_param: { name: 'think_discount', value: 0.5 },
    steps: { requested_from: null, requested_to: null, from: 1, to: 4, count: 4 },
    episodes: 32,
    tokens: 1000,
    eval_success: { before_grpo: 0, final: 0.25, final_step: 4 },
    training: { steps: 4, success_rate: 0.125, reward_mean: 0.5 },
    reasoning_regex: '^[0-9]+$',
    reasoning_regex_is_default: false,
    filler_mean_abs_contribution: 0.75,
    reasoning_mean_abs_contribution: 0.5,
    filler_reasoning_ratio: 1.5,
  },
  contribution: { count: 1000, mean: -0.125, std: 1, mean_abs: 0.625, min: -4, max: 3 },
  position_t_stats: {
    positions: 8,
    frac_abs_t_gt_3: 0.25,
    frac_abs_t_lt_1_5: 0.5,
    mean_abs_t: 2,
    excluded_n_lt_2: 1,
    excluded_zero_std: 0,
    note: 'n',
    by_position: [],
  },
  relative_position: [
    { bin: 0, lo: 0, hi: 0.1, count: 100, mean_contribution: -0.5, std_contribution: 1, mean_abs_contribution: 0.75, mean_logprob: -2 },
    { bin: 1, lo: 0.1, hi: 0.2, count: 90, mean_contribution: null, std_contribution: null, mean_abs_contribution: null, mean_logprob: null },
  ],
  reward_sign: {
    positive: { episodes: 12, tokens: 400, mean_contribution: -0.5, mean_abs_contribution: 0.5 },
    zero: { episodes: 4, tokens: 100, mean_contribution: 0, mean_abs_contribution: 0 },
    negative: { episodes: 16, tokens: 500, mean_contribution: 0.25, mean_abs_contribution: 0.75 },
  },
  token_types: { filler: types(600, 0.6, 0.75), reasoning: types(400, 0.4, 0.5) },
  token_types_by_position: [
    { bin: 0, lo: 0, hi: 0.2, filler: types(150, 0.75, 0.75), reasoning: types(50, 0.25, 0.5) },
    { bin: 1, lo: 0.2, hi: 0.4, filler: types(0, 0, 0), reasoning: types(200, 1, 0.25) },
  ],
  top_tokens: {
    filler: {
      by_total_abs_contribution: [
        { token_id: 7, token: ' so', count: 30, total_abs_contribution: 24, mean_contribution: -0.5, mean_abs_contribution: 0.8, mean_logprob: -0.25 },
      ],
      by_count: [],
    },
    reasoning: { by_total_abs_contribution: [], by_count: [] },
  },
  weights: {
    strategy: 'outcome_conditional',
    sections: {
      think: weights(700, 0.5),
      answer: weights(200, 1),
      other: {
        ...weights(0, 0),
        mean: null,
        std: null,
        min: null,
        p10: null,
        p50: null,
        p90: null,
        max: null,
        mean_abs_effective_advantage: null,
        mean_abs_contribution: null,
      },
    },
  },
  notes: [],
};

test('position bins: one row per bin with its range, nulls kept for an empty statistic', () => {
  const t = positionBinTable(REPORT);
  assert.deepEqual(t.header, ['bin', 'position / length', 'tokens', 'mean c', 'std c', 'mean |c|', 'mean log-prob']);
  assert.deepEqual(t.rows, [
    [0, '0–0.1', 100, -0.5, 1, 0.75, -2],
    [1, '0.1–0.2', 90, null, null, null, null],
  ]);
  assert.equal(binLabel(0.2, 0.4), '0.2–0.4');
});

test('token type × position: the per-bin filler ÷ reasoning |c| ratio', () => {
  const t = typeByPositionTable(REPORT);
  // bin 0: 0.75 / 0.5 = 1.5; bin 1: 0 / 0.25 = 0.
  assert.deepEqual(
    t.rows.map((r) => r[7]),
    [1.5, 0],
  );
  // grad norm: abs / 5 of each type's fixture
  assert.deepEqual(t.rows[0], ['0–0.2', 150, 0.75, 0.75, 50, 0.25, 0.5, 1.5, 0.15, 0.1]);
  assert.deepEqual(t.percentColumns, [2, 5]);
});

test('weights: a row per section, an empty section all null', () => {
  const t = weightTable(REPORT);
  assert.equal(t.title, 'Weights per section (outcome_conditional)');
  assert.deepEqual(
    t.rows.map((r) => r[0]),
    ['think', 'answer', 'other'],
  );
  assert.deepEqual(t.rows[1], ['answer', 200, 1, 0.5, 0, 0.25, 1, 1.5, 2, 0.75, 0.5]);
  assert.deepEqual(t.rows[2].slice(2), [null, null, null, null, null, null, null, null, null]);
});

test('top tokens show whitespace; Appendix B only with a baseline', () => {
  assert.deepEqual(topTokenTable(REPORT, 'filler', 'by_total_abs_contribution').rows, [['·so', 7, 30, 24, -0.5, 0.8, -0.25]]);
  assert.deepEqual(['\n', '  ', ' 1 2', ''].map(showToken), ['⏎', '··', '·1 2', '∅']);
  assert.equal(appendixBTable(REPORT), null);
  const row = (label: string, ev: number, f: number, r: number) => ({
    run_id: label,
    name: label,
    label,
    strategy: label,
    eval_success: ev,
    eval_step: 4,
    filler_mean_abs_contribution: f,
    reasoning_mean_abs_contribution: r,
    filler_reasoning_ratio: f / r,
  });
  const withB: AnalyzeReport = {
    ...REPORT,
    appendix_b: {
      baseline: row('none', 0.125, 1, 0.5),
      run: row('oc', 0.25, 0.75, 0.5),
      delta: { eval_success: 0.125, filler_mean_abs_contribution: -0.25, reasoning_mean_abs_contribution: 0, filler_reasoning_ratio: -0.5 },
    },
  };
  const t = appendixBTable(withB)!;
  // baseline ratio 1 / 0.5 = 2, run 0.75 / 0.5 = 1.5, delta −0.5 as the report says.
  assert.deepEqual(t.rows.slice(0, 3), [
    ['baseline', 'none', 0.125, 1, 0.5, 2],
    ['this run', 'oc', 0.25, 0.75, 0.5, 1.5],
    ['Δ (run − baseline)', '', 0.125, -0.25, 0, -0.5],
  ]);
  // The paired test row: without eval tables the reason; with them the interval and McNemar's p, n.s. when not significant.
  assert.deepEqual(t.rows[3], ['paired test', 'not available: no per-instance eval tables', null, null, null, null]);
  const test = {
    split: 'test' as const,
    step: 30,
    instances: 40,
    diff: 0.025,
    lo: -0.05,
    hi: 0.1,
    b: 1,
    c: 2,
    p: 1,
    p_adjusted: 1,
    alpha: 0.05,
    significant: false,
    mde: 0.0931,
    exploratory: true,
  };
  assert.equal(
    evalTestCell({ ...withB.appendix_b!, eval_test: test }),
    'step 30, 40 test instances: Δ +2.5 pts [-5.0, +10.0], p 1.000 · n.s. · MDE ± 9.3 pp · conditional on these two checkpoints, no verdict on the methods (one seed each)',
  );
  assert.equal(
    evalTestCell({ ...withB.appendix_b!, eval_test: { ...test, p: 1.9e-9, p_adjusted: 1.9e-9, significant: true, mde: null } }),
    'step 30, 40 test instances: Δ +2.5 pts [-5.0, +10.0], p 1.9e-9 · conditional on these two checkpoints, no verdict on the methods (one seed each)',
  );
  assert.equal(allTables(withB).at(-1)!.id, 'appendix_b');
  assert.equal(allTables(REPORT).length, 11);
  // a probed run (analyze --probe): one accuracy table per probed step, after the others
  const est = (mean: number, lo: number, hi: number, n: number) => ({ mean, lo, hi, n });
  const probed: AnalyzeReport = {
    ...REPORT,
    probes: [
      {
        step: 51,
        rollouts: 8,
        positions: 'every',
        run_strategy: 'none',
        episodes: 32,
        prompts: 16,
        uniform_share: est(0.107, 0.105, 0.109, 8),
        accuracy: {
          none: { spearman: { mean: null, lo: null, hi: null, n: 0 }, decisive_share: est(0.105, 0.1, 0.11, 8), sign_agreement: est(0.53, 0.5, 0.57, 8) },
          gtpo: {
            spearman: est(0.28, 0.2, 0.34, 8),
            decisive_share: est(0.22, 0.18, 0.28, 8),
            sign_agreement: est(0.53, 0.5, 0.57, 8),
            spearman_unbiased: est(0.05, -0.02, 0.12, 8),
            placebo: est(0.3, 0.25, 0.35, 8),
            excess: { ...est(-0.1, -0.2, 0, 8), over: 'one_minus_p' },
            lift: est(0.004, 0.001, 0.007, 8),
            lift_excess: { ...est(-0.002, -0.005, 0.001, 8), over: 'one_minus_p' },
            kendall: est(0.04, 0, 0.08, 8),
            sign_test: { agree: 60, units: 100, p: 0.057 },
          },
        },
        baselines: {
          one_minus_p: {
            spearman: est(0.3, 0.2, 0.4, 8),
            decisive_share: est(0.2, 0.1, 0.3, 8),
            sign_agreement: est(0.5, 0.4, 0.6, 8),
            spearman_unbiased: est(0.15, 0.1, 0.2, 8),
            lift: est(0.006, 0.003, 0.009, 8),
          },
        },
        reliability: { half: 0.2, full: 0.333, abs_rank_half: est(0.1, 0, 0.2, 8), units: 400, zero_share: 0.69 },
        warnings: [],
      },
    ],
  };
  const pt = allTables(probed).at(-1)!;
  assert.equal(pt.id, 'probe_51');
  // an older record (no halves) shows its other measures and dashes where the probe kept nothing; the baselines follow
  // the headline first: the lift and its excess over the best baseline, then the attenuated rank score and its placebo
  assert.deepEqual(pt.header.slice(0, 9), ['strategy', 'lift', 'lo', 'hi', 'over best', 'lo', 'hi', 'rank (attenuated)', 'placebo']);
  assert.deepEqual(pt.rows, [
    ["none (the run's)", null, null, null, null, null, null, null, null, 0.105, null, null, 8],
    ['gtpo', 0.004, 0.001, 0.007, -0.002, -0.005, 0.001, 0.05, 0.3, 0.22, 0.04, 0.057, 8],
    ['baseline: one_minus_p', 0.006, 0.003, 0.009, null, null, null, 0.15, null, 0.2, null, null, 8],
  ]);
  assert.match(pt.hint, /split-half r 0\.20, for all M 0\.33/);
  assert.match(pt.hint, /uniform credit: 10\.7 %/);
});

test('a table as CSV', () => {
  const t = positionBinTable(REPORT);
  assert.equal(toCsv(t.header, t.rows), 'bin,position / length,tokens,mean c,std c,mean |c|,mean log-prob\n0,0–0.1,100,-0.5,1,0.75,-2\n1,0.1–0.2,90,,,,\n');
});

test('CSV cells that a spreadsheet would run as a formula are kept as text; numbers stay numbers', async () => {
  const { csvField } = await import('../../../src/webviews/csv');
  assert.equal(csvField('=HYPERLINK("http://x","y")'), `"'=HYPERLINK(""http://x"",""y"")"`);
  assert.equal(csvField('+1'), "'+1");
  assert.equal(csvField('-run'), "'-run");
  assert.equal(csvField('@SUM(A1)'), "'@SUM(A1)");
  assert.equal(csvField(-0.5), '-0.5');
  assert.equal(csvField('plain'), 'plain');
});
