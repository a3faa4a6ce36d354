import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenWeights } from '../../../src/engine/credit';
import { answerAttention } from '../../../src/engine/credit/attention_credit';

test('answerAttention sums the answer rows of the head-averaged attention', () => {
  // 3 tokens; token 2 is the answer. Row 2 = [0.5, 0.3, 0.2] is what the answer pays to each token.
  const att = [
    [
      [1, 0, 0],
      [0.6, 0.4, 0],
      [0.5, 0.3, 0.2],
    ],
  ];
  assert.deepEqual(answerAttention(att, [['think', 'think', 'answer']], [[1, 1, 1]]), [[0.5, 0.3, 0.2]]);
});

test('attention_credit: max(0, 1 + s·(a/ā − 1)) outside the answer, 1 on it', () => {
  // Outside-answer a = [0.5, 0.3, 0.1] → ā = 0.3. s = 2:
  //   t0: 1 + 2·(0.5/0.3 − 1) = 1 + 2·0.6667 = 2.3333; t1: 1 + 0 = 1; t2: 1 + 2·(1/3 − 1) = −0.3333 → 0.
  const w = tokenWeights(
    'attention_credit',
    { credit_scale: 2 },
    {
      logprobs: [[-1, -1, -1, -1, -1]],
      entropies: [[0, 0, 0, 0, 0]],
      sections: [['think', 'think', 'think', 'answer', 'answer']],
      mask: [[1, 1, 1, 1, 0]],
      answerAttention: [[0.5, 0.3, 0.1, 0.1, 0]],
    },
  );
  assert.ok(Math.abs(w[0][0] - 7 / 3) < 1e-12);
  assert.ok(Math.abs(w[0][1] - 1) < 1e-12);
  assert.equal(w[0][2], 0);
  assert.equal(w[0][3], 1);
  assert.equal(w[0][4], 0);
});

test('attention_credit: an episode with no answer gets w = 1', () => {
  const w = tokenWeights(
    'attention_credit',
    {},
    {
      logprobs: [[-1, -1]],
      entropies: [[0, 0]],
      sections: [['think', 'other']],
      answerAttention: [[0, 0]],
    },
  );
  assert.deepEqual(w, [[1, 1]]);
});
