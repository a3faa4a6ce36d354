// Credit accuracy on hand-built episodes; every expected number is worked out by hand in the comments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clusteredMean, creditAccuracy, episodeScores, ranks, spearman } from '../../../src/engine/probe/accuracy';

const close = (a: number | null, b: number, tol = 1e-12) => assert.ok(a !== null && Math.abs(a - b) <= tol, `${a} != ${b}`);

test('ranks and Spearman: average ranks for ties; a constant side has no correlation', () => {
  assert.deepEqual(ranks([3, 1, 3, 2]), [3.5, 1, 3.5, 2]);
  // no ties: 1 − 6Σd²/(n(n²−1)); x ranks 1 2 4 3, y ranks 1 3 4 2: d = 0 −1 0 1, Σd² = 2 → 1 − 12/60 = 0.8
  close(spearman([0.1, 0.2, 0.4, 0.3], [0, 0.5, 0.75, 0.25]), 0.8);
  assert.equal(spearman([1, 1, 1], [1, 2, 3]), null);
});

test('token-level scores of one episode', () => {
  // V = 0.5 0.5 1 0.25 0 at positions 0…4: δ = 0, 0.5, −0.75, −0.25; Â = 0.1, 0.2, −0.4, 0.3
  const ep = { prompt: 1, n: 4, positions: [0, 1, 2, 3, 4], values: [0.5, 0.5, 1, 0.25, 0] };
  const s = episodeScores(ep, [0.1, 0.2, -0.4, 0.3]);
  close(s.spearman, 0.8);
  // top ⌈4/10⌉ = 1 unit by |δ|: token 2 (0.75), with |Â| 0.4 of Σ|Â| 1.0; uniform credit: 1 token of 4
  close(s.decisive_share, 0.4);
  close(s.uniform_share, 0.25);
  // agreeing: token 1 (δ 0.5, Â 0.2) and token 2 (−0.75, −0.4); token 3 (−0.25, 0.3) not: 1.25 / 1.5
  close(s.sign_agreement, 1.25 / 1.5);
  // an episode without credit (A = 0) is scored on nothing
  assert.deepEqual(episodeScores(ep, [0, 0, 0, 0]), { spearman: null, decisive_share: null, uniform_share: null, sign_agreement: null });
});

test('segment units: credit summed over each probed stretch', () => {
  // positions 0, 2, 4 with V 0.2, 0.6, 1.0: units [0,2) and [2,4), δ 0.4 each; Â 1+1 = 2 and −1+3 = 2
  const s = episodeScores({ prompt: 1, n: 4, positions: [0, 2, 4], values: [0.2, 0.6, 1.0] }, [1, 1, -1, 3]);
  assert.equal(s.spearman, null, 'two units: too few to rank');
  // one top unit, the earlier of the tie: |Â| 2 of 4; uniform: its 2 tokens of 4
  close(s.decisive_share, 0.5);
  close(s.uniform_share, 0.5);
  close(s.sign_agreement, 1);
});

test('episodes averaged with an interval that resamples prompts', () => {
  const e = clusteredMean([1, 0, 0.5, null], [7, 7, 9, 9]);
  close(e.mean, 0.5);
  assert.equal(e.n, 3);
  // resampling prompt 7 (mean 0.5 over 2 episodes) and prompt 9 (0.5) always gives 0.5: the prompts agree
  close(e.lo, 0.5);
  close(e.hi, 0.5);
  const spread = clusteredMean([1, 1, 0, 0], [1, 1, 2, 2]);
  assert.ok(spread.lo! < 0.5 && spread.hi! > 0.5);
  // one prompt: no interval
  assert.deepEqual(clusteredMean([1, 0], [3, 3]), { mean: 0.5, lo: null, hi: null, n: 2 });
  const r = creditAccuracy([{ prompt: 1, n: 4, positions: [0, 1, 2, 3, 4], values: [0.5, 0.5, 1, 0.25, 0] }], { a: [[0.1, 0.2, -0.4, 0.3]] });
  close(r.accuracy.a.spearman.mean, 0.8);
  close(r.uniform_share.mean, 0.25);
  assert.equal(r.episodes, 1);
  assert.equal(r.prompts, 1);
});
