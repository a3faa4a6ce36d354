import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fillerReasoningRatio } from '../../../src/extension/analysis';

test('the filler/reasoning ratio is read from the analysis JSON, never guessed', () => {
  assert.equal(fillerReasoningRatio({ filler_reasoning_ratio: 1.31 }), 1.31);
  // Seed 002's table: filler |c| 0.333, reasoning |c| 0.254 → 1.311 (its "31% more").
  const r = fillerReasoningRatio({ token_types: { filler: { mean_abs_contribution: 0.333 }, reasoning: { mean_abs_contribution: 0.254 } } });
  assert.ok(Math.abs(r! - 0.333 / 0.254) < 1e-12);
  assert.equal(fillerReasoningRatio({ token_types: { filler: { mean_abs_contribution: 0.3 } } }), null);
  assert.equal(fillerReasoningRatio({ token_types: { filler: { mean_abs_contribution: 0.3 }, reasoning: { mean_abs_contribution: 0 } } }), null);
  assert.equal(fillerReasoningRatio(null), null);
  assert.equal(fillerReasoningRatio('x'), null);
});
