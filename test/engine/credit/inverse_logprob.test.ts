import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenWeights } from '../../../src/engine/credit';

test('inverse_logprob: 1/(|ℓ| + epsilon)', () => {
  const w = tokenWeights('inverse_logprob', { epsilon: 0.1 }, {
    logprobs: [[-0.4, -1.9, 0, -3]],
    entropies: [[0, 0, 0, 0]],
    sections: [['think', 'think', 'answer', 'other']],
    mask: [[1, 1, 1, 0]],
  });
  // 1/(0.4+0.1) = 2; 1/(1.9+0.1) = 0.5; ℓ = 0 (a certain token) → 1/0.1 = 10; padding → 0.
  assert.deepEqual(w[0].map((x) => +x.toFixed(12)), [2, 0.5, 10, 0]);
});
