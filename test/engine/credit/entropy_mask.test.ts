import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenWeights } from '../../../src/engine/credit';
import { percentileLinear } from '../../../src/engine/core/stats';

test('percentile uses numpy linear interpolation', () => {
  // numpy.percentile([1,2,3,4,5], 80) = 1 + 0.8·4 → position 3.2 → 4 + 0.2·(5−4) = 4.2
  assert.ok(Math.abs(percentileLinear([5, 1, 4, 2, 3], 80) - 4.2) < 1e-12);
  // numpy.percentile([10, 20], 70) → position 0.7 → 17
  assert.ok(Math.abs(percentileLinear([20, 10], 70) - 17) < 1e-12);
});

test('entropy_mask: top (100 − p)% of the batch by entropy train; padding excluded from the percentile', () => {
  // Valid entropies over the batch: [0.1, 0.5, 0.9, 0.3, 0.7] → sorted [0.1,0.3,0.5,0.7,0.9]; p80 → position 3.2 →
  // 0.7 + 0.2·0.2 = 0.74. Only 0.9 ≥ 0.74. The padding token (H = 9) would move the percentile if counted.
  const w = tokenWeights(
    'entropy_mask',
    { mask_percentile: 80 },
    {
      logprobs: [
        [-1, -1, -1],
        [-1, -1, -1],
      ],
      entropies: [
        [0.1, 0.5, 0.9],
        [0.3, 0.7, 9],
      ],
      sections: [
        ['think', 'think', 'answer'],
        ['think', 'answer', 'other'],
      ],
      mask: [
        [1, 1, 1],
        [1, 1, 0],
      ],
    },
  );
  assert.deepEqual(w, [
    [0, 0, 1],
    [0, 0, 0],
  ]);
});

test('entropy_mask: all-equal entropies keep every token (H ≥ q)', () => {
  const w = tokenWeights(
    'entropy_mask',
    { mask_percentile: 80 },
    {
      logprobs: [[-1, -1]],
      entropies: [[0.4, 0.4]],
      sections: [['think', 'answer']],
    },
  );
  assert.deepEqual(w, [[1, 1]]);
});

test('entropy_mask, kept norm: seed doc 001 averages over the kept tokens — kept weights are valid ÷ kept', () => {
  // Same batch as above: 5 valid tokens, 1 kept (H = 0.9) → its weight is 5/1 = 5; token_mean over the 5 valid tokens
  // then equals the seed's mean over the 1 kept token.
  const w = tokenWeights('entropy_mask', { mask_percentile: 80, entropy_mask_norm: 'kept' } as never, {
    logprobs: [
      [-1, -1, -1],
      [-1, -1, -1],
    ],
    entropies: [
      [0.1, 0.5, 0.9],
      [0.3, 0.7, 9],
    ],
    sections: [
      ['think', 'think', 'answer'],
      ['think', 'answer', 'other'],
    ],
    mask: [
      [1, 1, 1],
      [1, 1, 0],
    ],
  });
  assert.deepEqual(w, [
    [0, 0, 5],
    [0, 0, 0],
  ]);
});
