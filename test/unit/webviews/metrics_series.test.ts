// metrics.jsonl rows → the dashboard's chart data and CSV. Every expected number is worked out by hand in
// the comments from the rows below (values picked to be exact in binary, so no rounding enters).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsRow } from '../../../src/protocol';
import {
  alignChart,
  beforeGrpo,
  CHARTS,
  DEFAULT_VIEW,
  ema,
  emptyState,
  firstVisibleX,
  chartCsv,
  chartsFor,
  EVAL_REWARD_KEY,
  phaseOfX,
  pointsOf,
  upsertRow,
  xOf,
  type ChartSpec,
} from '../../../src/webviews/metrics_series';

const spec = (id: string): ChartSpec => CHARTS.find((c) => c.id === id)!;

// 2 SFT steps, the eval before GRPO, 2 GRPO steps (the second with an inline eval), like train.ts logs them.
const RUN_A: MetricsRow[] = [
  { step: 1, phase: 'sft', loss: 3, grad_norm: 2, tokens_per_s: 1000 },
  { step: 2, phase: 'sft', loss: 2.5, grad_norm: 1.5, tokens_per_s: 1100 },
  { step: 0, phase: 'eval', eval_success: 0.25, reward_mean: 0.375 },
  {
    step: 1,
    phase: 'grpo',
    reward_mean: 0.5,
    reward_std: 0.25,
    success_rate: 0.25,
    effective_groups: 0.5,
    loss: 0.125,
    grad_norm: 0.5,
    kl: 0,
    entropy_mean: 0.75,
    clip_frac: 0,
    response_len: 40,
    tokens_per_s: 15000,
  },
  {
    step: 2,
    phase: 'grpo',
    reward_mean: 0.75,
    reward_std: 0.125,
    success_rate: 0.5,
    effective_groups: 0.75,
    loss: -0.0625,
    grad_norm: 0.25,
    kl: 0,
    entropy_mean: 0.5,
    clip_frac: 0.125,
    response_len: 42,
    tokens_per_s: 16000,
    eval_success: 0.5,
  },
];

test('x positions: SFT step s at s − sftSteps − 1, the pre-GRPO eval at 0, GRPO step k at k', () => {
  // sftSteps 2: SFT 1 → 1−2−1 = −2, SFT 2 → −1.
  assert.equal(xOf({ step: 1, phase: 'sft' }, 2), -2);
  assert.equal(xOf({ step: 2, phase: 'sft' }, 2), -1);
  assert.equal(xOf({ step: 0, phase: 'eval' }, 2), 0);
  assert.equal(xOf({ step: 7, phase: 'grpo' }, 2), 7);
  assert.deepEqual([-3, 0, 4].map(phaseOfX), ['sft', 'eval', 'grpo']);
});

test('rows become points by x; the eval reward is kept apart from the training reward', () => {
  const p = pointsOf(RUN_A, 2);
  assert.deepEqual([...p.keys()], [-2, -1, 0, 1, 2]);
  assert.deepEqual(p.get(0), { eval_success: 0.25, [EVAL_REWARD_KEY]: 0.375 });
  assert.equal(p.get(2)!.eval_success, 0.5);
  // The same row again (live and then from disk) changes nothing; a re-logged row replaces its values.
  upsertRow(p, RUN_A[3], 2);
  assert.equal(p.size, 5);
  upsertRow(p, { step: 1, phase: 'grpo', reward_mean: 0.625 }, 2);
  assert.equal(p.get(1)!.reward_mean, 0.625);
  assert.equal(p.get(1)!.reward_std, 0.25, 'fields the new row lacks stay');
});

test('reward chart: GRPO steps only, with the mean ± std band', () => {
  const a = alignChart(spec('reward'), [{ label: 'A', points: pointsOf(RUN_A, 2) }]);
  assert.deepEqual(a.x, [1, 2]);
  assert.equal(a.columns.length, 1);
  assert.deepEqual(a.columns[0].values, [0.5, 0.75]);
  // 0.5 ∓ 0.25 = 0.25 / 0.75; 0.75 ∓ 0.125 = 0.625 / 0.875.
  assert.deepEqual(a.bands, [{ run: 0, lo: [0.25, 0.625], hi: [0.75, 0.875] }]);
});

test('success chart: train rate on GRPO steps, eval success where it was measured', () => {
  const a = alignChart(spec('success'), [{ label: 'A', points: pointsOf(RUN_A, 2) }]);
  assert.deepEqual(a.x, [0, 1, 2]);
  assert.deepEqual(
    a.columns.map((c) => [c.label, c.style, c.values]),
    [
      ['train', 'line', [null, 0.25, 0.5]],
      ['eval', 'points', [0.25, null, 0.5]],
    ],
  );
});

test('loss chart spans SFT and GRPO with a gap at the eval', () => {
  const a = alignChart(spec('loss'), [{ label: 'A', points: pointsOf(RUN_A, 2) }]);
  assert.deepEqual(a.x, [-2, -1, 1, 2]);
  assert.deepEqual(a.columns[0].values, [3, 2.5, 0.125, -0.0625]);
});

test('comparison: x is the union of both runs, null where a run has no value, series named by run', () => {
  const b: MetricsRow[] = [
    { step: 1, phase: 'grpo', loss: 1, success_rate: 0.125 },
    { step: 3, phase: 'grpo', loss: 2, success_rate: 0.375, eval_success: 0.25 },
  ];
  const runs = [
    { label: 'A', points: pointsOf(RUN_A, 2) },
    { label: 'B', points: pointsOf(b, 0) },
  ];
  const loss = alignChart(spec('loss'), runs);
  // A: −2, −1, 1, 2; B: 1, 3 → union −2, −1, 1, 2, 3.
  assert.deepEqual(loss.x, [-2, -1, 1, 2, 3]);
  assert.deepEqual(
    loss.columns.map((c) => [c.run, c.label, c.values]),
    [
      [0, 'A', [3, 2.5, 0.125, -0.0625, null]],
      [1, 'B', [null, null, 1, null, 2]],
    ],
  );
  const success = alignChart(spec('success'), runs);
  assert.deepEqual(
    success.columns.map((c) => c.label),
    ['A · train', 'A · eval', 'B · train', 'B · eval'],
  );
  assert.deepEqual(success.x, [0, 1, 2, 3]);
  assert.deepEqual(success.columns[3].values, [null, null, null, 0.25]);
  // B logged no reward_std, so only A has a band on the reward chart.
  assert.deepEqual(
    alignChart(spec('reward'), runs).bands.map((x) => x.run),
    [0],
  );
});

test('chartsFor: fixed charts with data, attribution charts, one chart per other namespaced metric', () => {
  const sftOnly = pointsOf(RUN_A.slice(0, 2), 2);
  assert.deepEqual(
    chartsFor([sftOnly]).map((c) => c.id),
    ['loss', 'grad_norm', 'tokens_per_s'],
  );
  const attr = pointsOf(
    [{ step: 1, phase: 'grpo', reward_mean: 1, 'attribution/attribution_entropy': 2.5, 'attribution/attribution_max': 0.5, 'cal/oracle_calls': 3 }],
    0,
  );
  assert.deepEqual(
    chartsFor([attr]).map((c) => c.id),
    ['reward', 'attribution/attribution_entropy', 'attribution/attribution_range', 'cal/oracle_calls'],
  );
  // Every fixed chart has data in RUN_A (kl is all zeros, which is still data).
  assert.deepEqual(
    chartsFor([pointsOf(RUN_A, 2)]).map((c) => c.id),
    CHARTS.map((c) => c.id),
  );
});

test('CSV of a chart: step, phase, one column per series, the band bounds, empty cells for missing values', () => {
  const one = [{ label: 'A', points: pointsOf(RUN_A, 2) }];
  assert.equal(
    chartCsv(spec('reward'), alignChart(spec('reward'), one), ['A']),
    'step,phase,reward,reward_mean - reward_std,reward_mean + reward_std\n' + '1,grpo,0.5,0.25,0.75\n' + '2,grpo,0.75,0.625,0.875\n',
  );
  assert.equal(chartCsv(spec('success'), alignChart(spec('success'), one), ['A']), 'step,phase,train,eval\n0,eval,,0.25\n1,grpo,0.25,\n2,grpo,0.5,0.5\n');
  // A run label with a comma and a quote is quoted, its quote doubled (RFC 4180).
  const odd = [
    { label: 'run,"1"', points: pointsOf([{ step: 1, phase: 'grpo', loss: 0.5 }], 0) },
    { label: 'B', points: pointsOf([{ step: 1, phase: 'grpo', loss: 1 }], 0) },
  ];
  assert.equal(chartCsv(spec('loss'), alignChart(spec('loss'), odd), ['run,"1"', 'B']), 'step,phase,"run,""1""",B\n1,grpo,0.5,1\n');
});

test('the default view starts at GRPO step 1; the SFT toggle adds the warm start and the eval before GRPO', () => {
  const points = pointsOf(RUN_A, 2);
  const runs = [{ label: 'a', points }];
  // RUN_A's loss: SFT steps 1, 2 at x = s − 2 − 1 = −2, −1; GRPO step 1 at x = 1.
  const loss = spec('loss');
  assert.deepEqual(alignChart(loss, runs, { includeSft: false, smoothing: 0 }).x[0], 1);
  assert.deepEqual(alignChart(loss, runs, { includeSft: true, smoothing: 0 }).x.slice(0, 2), [-2, -1]);
  assert.equal(firstVisibleX([points], DEFAULT_VIEW), 1);
  // A run still in its warm start has no GRPO step: its SFT steps show rather than an empty chart.
  const warming = pointsOf(RUN_A.slice(0, 2), 2);
  assert.equal(firstVisibleX([warming], DEFAULT_VIEW), -Infinity);
  // The eval before GRPO (x = 0) is not drawn then: its values are said in words.
  assert.deepEqual(beforeGrpo(spec('success'), runs), [{ label: 'eval', key: 'eval_success', value: 0.25 }]);
  assert.deepEqual(beforeGrpo(spec('success'), [runs[0], { label: 'b', points: pointsOf([], 0) }]), [{ label: 'a · eval', key: 'eval_success', value: 0.25 }]);
});

test("smoothing is TensorBoard's debiased EMA, restarting at GRPO, never applied to sparse eval points; CSV keeps the logged values", () => {
  // w = 0.5 over 1, 3 (GRPO): s1 = 0.5·1 = 0.5, /(1 − 0.5) = 1; s2 = 0.5·0.5 + 0.5·3 = 1.75, /(1 − 0.25) = 2.3333…
  // The SFT value 8 at x = −1 starts its own average (8), so it does not pull GRPO's.
  const sm = ema([-1, 1, 2, 3], [8, 1, null, 3], 0.5);
  assert.equal(sm[0], 8);
  assert.equal(sm[1], 1);
  assert.equal(sm[2], null);
  assert.ok(Math.abs(sm[3]! - 7 / 3) < 1e-12, String(sm[3]));
  assert.deepEqual(ema([1, 2], [4, 2], 0), [4, 2]);
  const rows: MetricsRow[] = [
    { step: 1, phase: 'grpo', success_rate: 0, eval_success: 0.5 },
    { step: 2, phase: 'grpo', success_rate: 1 },
  ];
  const runs = [{ label: 'a', points: pointsOf(rows, 0) }];
  const data = alignChart(spec('success'), runs, { includeSft: false, smoothing: 0.5 });
  const train = data.columns.find((c) => c.key === 'success_rate')!;
  const evalCol = data.columns.find((c) => c.key === 'eval_success')!;
  // 0, then (0.5·0 + 0.5·1)/(1 − 0.25) = 2/3
  assert.deepEqual(train.raw, [0, 1]);
  assert.ok(Math.abs(train.values[1]! - 2 / 3) < 1e-12);
  assert.equal(evalCol.raw, undefined);
  assert.deepEqual(evalCol.values, [0.5, null]);
  assert.equal(chartCsv(spec('success'), data, ['a']), 'step,phase,train,eval\n1,grpo,0,0.5\n2,grpo,1,\n');
});

test('KL with grpo.kl_beta = 0 in every run is an empty state, not a flat line', () => {
  assert.match(emptyState('kl', [{ klBeta: 0 }]) ?? '', /^KL not computed: grpo\.kl_beta = 0/);
  assert.match(emptyState('kl', [{ klBeta: 0 }, { klBeta: 0 }]) ?? '', /in every run/);
  assert.equal(emptyState('kl', [{ klBeta: 0 }, { klBeta: 0.04 }]), null);
  assert.equal(emptyState('kl', [{ klBeta: null }]), null);
  assert.equal(emptyState('loss', [{ klBeta: 0 }]), null);
});

test('a clip fraction of 0 at every GRPO step is an empty state; one clipped step draws the chart', () => {
  const rows = (xs: number[]) => xs.map((clip_frac, i) => ({ step: i + 1, phase: 'grpo' as const, clip_frac }));
  assert.match(emptyState('clip_frac', [{ klBeta: 0, rows: rows([0, 0, 0]) }]) ?? '', /^Nothing clipped: .* on-policy, ρ = 1/);
  assert.match(
    emptyState('clip_frac', [
      { klBeta: 0, rows: rows([0]) },
      { klBeta: 0, rows: rows([0, 0]) },
    ]) ?? '',
    /^Nothing clipped in every run/,
  );
  assert.equal(emptyState('clip_frac', [{ klBeta: 0, rows: rows([0, 0.02]) }]), null);
  assert.equal(emptyState('clip_frac', [{ klBeta: 0, rows: [] }]), null, 'no value is not an empty state');
});

test('the credit row: credit by token type where the run logs it, MC accuracy at probed steps, after the fixed charts', () => {
  const p = pointsOf(
    [
      {
        step: 1,
        phase: 'grpo',
        reward_mean: 1,
        'credit/filler_abs_c': 0.2,
        'credit/reasoning_abs_c': 0.1,
        'credit/gini': 0.3,
        'credit/effective_token_ratio': 0.7,
      },
      { step: 2, phase: 'grpo', reward_mean: 1, 'mc/spearman_unbiased': 0.3, 'mc/placebo': 0.01, 'mc/lift': 0.004 },
    ],
    0,
  );
  // the credit's concentration beside |c| by token type; the lift (the headline) before the attenuated rank score
  assert.deepEqual(
    chartsFor([p]).map((c) => c.id),
    ['reward', 'credit_by_type', 'credit_concentration', 'mc_lift', 'mc_accuracy'],
  );
  const mc = chartsFor([p]).find((c) => c.id === 'mc_accuracy')!;
  // probed steps are sparse measurements: points, never smoothed
  const data = alignChart(mc, [{ label: 'a', points: p }], { includeSft: false, smoothing: 0.9 });
  assert.deepEqual(
    data.columns.map((c) => [c.key, c.values, c.raw]),
    [
      ['mc/spearman_unbiased', [0.3], undefined],
      ['mc/placebo', [0.01], undefined],
    ],
  );
});
