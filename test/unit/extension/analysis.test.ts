import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fillerReasoningRatio } from '../../../src/extension/analysis';
import type { CreditAnalysis } from '../../../src/protocol/analysis';

const meta = (ratio: number | null) => ({ meta: { filler_reasoning_ratio: ratio } as CreditAnalysis['meta'] });

test('the filler/reasoning ratio is the report\'s own meta.filler_reasoning_ratio, never guessed', () => {
  // Seed 002's table: filler |c| 0.333, reasoning |c| 0.254 → 1.31 (its "31% more").
  assert.equal(fillerReasoningRatio(meta(1.31)), 1.31);
  assert.equal(fillerReasoningRatio(meta(null)), null);
  assert.equal(fillerReasoningRatio(null), null);
  assert.equal(fillerReasoningRatio({ meta: {} as CreditAnalysis['meta'] }), null);
});
