import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenWeights } from '../../../src/engine/credit';

test('outcome_conditional: 1 on answer, think_discount elsewhere, 0 on padding', () => {
  const w = tokenWeights(
    'outcome_conditional',
    { think_discount: 0.25 },
    {
      logprobs: [
        [-1, -1, -1, -1],
        [-1, 0, 0, 0],
      ],
      entropies: [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
      ],
      sections: [
        ['think', 'other', 'answer', 'answer'],
        ['think', 'other', 'other', 'other'],
      ],
      mask: [
        [1, 1, 1, 0],
        [1, 0, 0, 0],
      ],
    },
  );
  // ep0: think 0.25, other 0.25, answer 1, padding 0. ep1 has no answer section and one valid token: 0.25.
  assert.deepEqual(w, [
    [0.25, 0.25, 1, 0],
    [0.25, 0, 0, 0],
  ]);
});
