import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenWeights } from '../../../src/engine/credit';

test('inverse_logprob: 1/(|ℓ| + epsilon)', () => {
  const w = tokenWeights(
    'inverse_logprob',
    { epsilon: 0.1 },
    {
      logprobs: [[-0.4, -1.9, 0, -3]],
      entropies: [[0, 0, 0, 0]],
      sections: [['think', 'think', 'answer', 'other']],
      mask: [[1, 1, 1, 0]],
    },
  );
  // 1/(0.4+0.1) = 2; 1/(1.9+0.1) = 0.5; ℓ = 0 (a certain token) → 1/0.1 = 10; padding → 0.
  assert.deepEqual(
    w[0].map((x) => +x.toFixed(12)),
    [2, 0.5, 10, 0],
  );
});

test("inverse_logprob, seed form: the gradient weight ε/(|ℓ|+ε)² of seed doc 001's undetached w(ℓ)·ℓ", () => {
  const w = tokenWeights('inverse_logprob', { epsilon: 0.1, inverse_logprob_form: 'seed' } as never, {
    logprobs: [[-0.4, -1.9, 0, -3]],
    entropies: [[0, 0, 0, 0]],
    sections: [['think', 'think', 'answer', 'other']],
    mask: [[1, 1, 1, 0]],
  });
  // 0.1/0.5² = 0.4; 0.1/2² = 0.025; 0.1/0.1² = 10; padding → 0. Check against a central difference of ℓ/(|ℓ|+ε):
  assert.deepEqual(
    w[0].map((x) => +x.toFixed(12)),
    [0.4, 0.025, 10, 0],
  );
  const f = (l: number) => l / (Math.abs(l) + 0.1);
  const h = 1e-6;
  assert.ok(Math.abs((f(-0.4 + h) - f(-0.4 - h)) / (2 * h) - 0.4) < 1e-6);
});
