import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsRow } from '../../../src/protocol/index';
import { percent, setArg, summarizeMetrics } from '../../../src/extension/metrics_summary';

// A run as the trainer logs it: an eval row at step 0 (before GRPO), GRPO rows, evals on steps 2 and 4.
const rows: MetricsRow[] = [
  { step: 1, phase: 'sft', loss: 2.0 },
  { step: 0, phase: 'eval', eval_success: 0.05 },
  { step: 1, phase: 'grpo', reward_mean: 0.1, success_rate: 0.0, grad_norm: 1.0 },
  { step: 2, phase: 'grpo', reward_mean: 0.2, success_rate: 0.125, grad_norm: 3.0, eval_success: 0.25 },
  { step: 3, phase: 'grpo', reward_mean: 0.3, success_rate: 0.5, grad_norm: 100, skipped: 1 },
  { step: 4, phase: 'grpo', reward_mean: 0.4, success_rate: 0.05, grad_norm: 2.0, eval_success: 0.125 },
];

test('summary of a run: latest values, final and best eval after GRPO, first step at 10% success', () => {
  const s = summarizeMetrics(rows);
  assert.equal(s.lastGrpoStep, 4);
  assert.equal(s.latestReward, 0.4);
  assert.equal(s.latestEvalSuccess, 0.125);
  // The step-0 eval (0.05) is before GRPO, so it is neither final nor best.
  assert.equal(s.finalEvalSuccess, 0.125);
  assert.equal(s.bestEvalSuccess, 0.25);
  // success_rate 0.125 ≥ 0.1 first at step 2.
  assert.equal(s.stepsToThreshold, 2);
  // (1 + 3 + 2) / 3 = 2: step 3 was skipped by the NaN guard, its grad norm does not count.
  assert.equal(s.meanGradNorm, 2);
});

test('summary before any GRPO step has no values, and the threshold is a parameter', () => {
  const s = summarizeMetrics(rows.slice(0, 2));
  assert.deepEqual(s, {
    lastGrpoStep: 0,
    latestReward: null,
    latestEvalSuccess: 0.05,
    finalEvalSuccess: null,
    bestEvalSuccess: null,
    stepsToThreshold: null,
    meanGradNorm: null,
  });
  assert.equal(summarizeMetrics(rows, 0.5).stepsToThreshold, 3);
});

test('percent formats fractions and shows a dash for missing values', () => {
  assert.equal(percent(0.125, 1), '12.5%');
  assert.equal(percent(1), '100%');
  assert.equal(percent(null), '—');
  assert.equal(percent(Number.NaN), '—');
});

test('setArg writes values the CLI reads back as the same YAML value', async () => {
  const { parse } = await import('yaml');
  const cases: [string, unknown][] = [
    ['credit.strategy', 'outcome_conditional'],
    ['credit.think_discount', 0.25],
    ['grpo.steps', 3],
    ['name', 'sweep-outcome_conditional-td0.25'],
    ['task.numbers', [3, 4]],
    ['credit.cal.model', null],
    ['credit.attribution.detach_hidden', false],
    ['task.path', 'data/my file.jsonl'],
    ['credit.cal.provider', 'true'],
    ['name', '1e3'],
  ];
  for (const [key, value] of cases) {
    const arg = setArg(key, value);
    assert.ok(arg.startsWith(`${key}=`), arg);
    assert.deepEqual(parse(arg.slice(key.length + 1)), value, arg);
  }
  assert.equal(setArg('credit.strategy', 'none'), 'credit.strategy=none');
});
