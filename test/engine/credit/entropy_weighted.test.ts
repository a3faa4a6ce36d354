import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenWeights } from '../../../src/engine/credit';

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} != ${b}`);

test('entropy_weighted: n·softmax(H/temp) over valid tokens (mean weight 1)', () => {
  // H = [0, ln 3], temp 1: softmax = [1/4, 3/4] (e^0 = 1, e^ln3 = 3); × n = 2 → [0.5, 1.5].
  const w = tokenWeights(
    'entropy_weighted',
    { entropy_temp: 1 },
    {
      logprobs: [[-1, -1, -1]],
      entropies: [[0, Math.log(3), 5]],
      sections: [['think', 'think', 'think']],
      mask: [[1, 1, 0]],
    },
  );
  close(w[0][0], 0.5);
  close(w[0][1], 1.5);
  assert.equal(w[0][2], 0); // the padding token's large entropy is ignored
});

test('entropy_weighted: temperature 2 halves the log-odds', () => {
  // H/2 = [0, ln 3 / 2] → softmax [1/(1+√3), √3/(1+√3)] × 2 = [0.7320508, 1.2679492].
  const w = tokenWeights(
    'entropy_weighted',
    { entropy_temp: 2 },
    {
      logprobs: [[-1, -1]],
      entropies: [[0, Math.log(3)]],
      sections: [['think', 'think']],
    },
  );
  close(w[0][0], 2 / (1 + Math.sqrt(3)));
  close(w[0][1], (2 * Math.sqrt(3)) / (1 + Math.sqrt(3)));
});

test('entropy_weighted edge cases: all-equal entropies → 1; one token → 1', () => {
  const w = tokenWeights(
    'entropy_weighted',
    {},
    {
      logprobs: [[-1, -1, -1], [-2]],
      entropies: [[0.7, 0.7, 0.7], [3]],
      sections: [['think', 'answer', 'other'], ['answer']],
    },
  );
  w[0].forEach((x) => close(x, 1));
  close(w[1][0], 1);
});
