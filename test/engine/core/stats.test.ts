// Summary statistics, against values worked by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mean, meanStd, meanVar } from '../../../src/engine/core/stats';

test('mean and sample (N − 1) variance and std', () => {
  // [1, 2, 3, 4]: mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5; / 3 = 5/3; std √(5/3) = 1.2909944.
  assert.equal(mean([1, 2, 3, 4]), 2.5);
  const r = meanVar([1, 2, 3, 4]);
  assert.equal(r.mean, 2.5);
  assert.ok(Math.abs(r.var - 5 / 3) < 1e-15);
  assert.ok(Math.abs(meanStd([1, 2, 3, 4]).std - 1.2909944487358056) < 1e-15);
  // One element: no spread; none: zeros.
  assert.deepEqual(meanStd([7]), { mean: 7, std: 0 });
  assert.deepEqual(meanVar([]), { mean: 0, var: 0 });
  // Equal values: exactly zero variance, and the mean is the value itself (eight 0.1s sum to 0.7999999999999999).
  assert.deepEqual(meanVar(Array(8).fill(0.1)), { mean: 0.1, var: 0 });
});
