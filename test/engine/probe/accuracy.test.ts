// Credit accuracy on hand-built episodes; every expected number is worked out by hand in the comments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binomialTwoSided, creditAccuracy, episodeScores, kendallTauB, pearson, ranks, reliability, spearman } from '../../../src/engine/probe/accuracy';
import { clusteredMean } from '../../../src/engine/probe/clustered_mean';

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
  const none = episodeScores(ep, [0, 0, 0, 0]);
  assert.deepEqual(
    [none.spearman, none.decisive_share, none.uniform_share, none.sign_agreement, none.pearson, none.kendall, none.sign_units],
    [null, null, null, null, null, null, 0],
  );
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
  // fewer than 10 prompts: a t interval over the prompts' means. Means 0.5, 0.5, 0.3: sd 0.11547, half-width
  // t(0.975, 2)·0.11547/√3 = 4.302653·0.066667 = 0.286844, around the mean over episodes 2.6/6 = 0.433333
  const few = clusteredMean([1, 0, 0.5, 0.5, 0.2, 0.4], [1, 1, 2, 2, 3, 3]);
  close(few.mean, 2.6 / 6, 1e-12);
  close(few.lo, 2.6 / 6 - 0.286844, 1e-6);
  close(few.hi, 2.6 / 6 + 0.286844, 1e-6);
  const r = creditAccuracy([{ prompt: 1, n: 4, positions: [0, 1, 2, 3, 4], values: [0.5, 0.5, 1, 0.25, 0] }], { a: [[0.1, 0.2, -0.4, 0.3]] });
  close(r.accuracy.a.spearman.mean, 0.8);
  close(r.uniform_share.mean, 0.25);
  assert.equal(r.episodes, 1);
  assert.equal(r.prompts, 1);
});

test("QVal's measures: Pearson, Kendall τ-b with ties, and the exact sign test, by hand", () => {
  // x 1 2 3, y 1 2 4: Σdxdy = 3, Σdx² = 2, Σdy² = 42/9 → 3/√(2·42/9) = 0.981981
  close(pearson([1, 2, 3], [1, 2, 4]), 0.9819805, 1e-6);
  // one discordant pair of 6: (5 − 1)/6
  close(kendallTauB([1, 2, 3, 4], [1, 3, 2, 4]), 4 / 6);
  // ties on each side once: C 4, D 0, one pair tied in x only and one in y only → 4/√(5·5) = 0.8 (scipy's kendalltau)
  close(kendallTauB([1, 1, 2, 3], [1, 2, 2, 3]), 0.8);
  assert.equal(kendallTauB([1, 1, 1], [1, 2, 3]), null);
  // 9 of 10 agree: 2·(C(10,9) + C(10,10))/2^10 = 22/1024; 5 of 10: 1; none: 1
  close(binomialTwoSided(9, 10), 22 / 1024);
  close(binomialTwoSided(1, 10), 22 / 1024);
  close(binomialTwoSided(5, 10), 1, 1e-12);
  assert.equal(binomialTwoSided(0, 0), 1);
});

test('independent halves: the noise-unbiased target, the placebo and the split-half reliability, by hand', () => {
  // halves' values at positions 0…4: δᴬ = 0, 0.5, −1, 0 and δᴮ = 0.5, 0.5, −0.5, 0
  const ep = {
    prompt: 1,
    n: 4,
    positions: [0, 1, 2, 3, 4],
    values: [0.5, 0.75, 1.25, 0.5, 0.5],
    valuesA: [0.5, 0.5, 1.0, 0.0, 0.0],
    valuesB: [0.5, 1.0, 1.5, 1.0, 1.0],
  };
  const s = episodeScores(ep, [0.1, 0.2, -0.4, 0.3]);
  // |Â| ranks 1 2 4 3; δᴬ·δᴮ = 0, 0.25, 0.5, 0 ranks 1.5 3 4 1.5: Σdxdy = 3, Σdx² = 5, Σdy² = 4.5 → 3/√22.5
  close(s.spearman_unbiased, 3 / Math.sqrt(22.5));
  // |δᴬ − δᴮ| = 0.5, 0, 0.5, 0 ranks 3.5 1.5 3.5 1.5: Σdxdy = 0
  close(s.placebo, 0);
  // split-half: Pearson of δᴬ and δᴮ = 0.8125/√(1.1875·0.6875) = 0.899228; Spearman–Brown 2r/(1 + r) = 0.946940
  const rel = reliability([ep])!;
  close(rel.half, 0.899228, 1e-6);
  close(rel.full, 0.94694, 1e-5);
  assert.equal(rel.units, 4);
  // the full-M δ̂ = 0.25, 0.5, −0.75, 0: one of four is exactly 0
  close(rel.zero_share, 0.25);
  // the linear score: δᴬ·δᴮ = 0, 0.25, 0.5, 0; |Â| = 0.1, 0.2, 0.4, 0.3 (Σ 1.0) → credit 0.2·0.25 + 0.4·0.5 = 0.25;
  // uniform weighs each token ¼ → (0.25 + 0.5)/4 = 0.1875; lift 0.0625
  close(s.credit_delta2, 0.25);
  close(s.uniform_delta2, 0.1875);
  close(s.lift, 0.0625);
  // a table without halves scores none of these
  const old = episodeScores({ prompt: 1, n: 4, positions: [0, 1, 2, 3, 4], values: ep.values }, [0.1, 0.2, -0.4, 0.3]);
  assert.deepEqual([old.spearman_unbiased, old.placebo, old.credit_delta2, old.lift], [null, null, null, null]);
  assert.equal(reliability([{ prompt: 1, n: 4, positions: [0, 1, 2, 3, 4], values: ep.values }]), null);
});

test('one episode set for every row (A ≠ 0), the trivial baselines and the excess over the best of them', () => {
  const base = {
    n: 4,
    positions: [0, 1, 2, 3, 4],
    values: [0.5, 0.75, 1.25, 0.5, 0.5],
    valuesA: [0.5, 0.5, 1.0, 0.0, 0.0],
    valuesB: [0.5, 1.0, 1.5, 1.0, 1.0],
    // π = 0.9, 0.5, 0.2, 0.6 → 1 − π = 0.1, 0.5, 0.8, 0.4; entropies rise along the completion
    logprobs: [0.9, 0.5, 0.2, 0.6].map(Math.log),
    entropies: [0.1, 0.2, 0.3, 0.4],
  };
  const eps = [
    { ...base, prompt: 1, advantage: 1 },
    { ...base, prompt: 2, advantage: 0 },
    { ...base, prompt: 3, advantage: -1 },
  ];
  const adv = [0.1, 0.2, -0.4, 0.3];
  // "flat" gives the A = 0 episode credit all the same; it is not scored on more episodes than "a"
  const r = creditAccuracy(eps, { a: [adv, [0, 0, 0, 0], adv], flat: [adv, adv, adv] });
  assert.equal(r.episodes, 2);
  assert.equal(r.prompts, 2);
  assert.equal(r.accuracy.flat.spearman_unbiased!.n, 2);
  // 1 − π ranks the units 1 3 4 2 against δᴬ·δᴮ's 1.5 3 4 1.5: Σdxdy = 1.5·1 + 0.5·0.5 + 1.5·1.5 + 0.5·1 = 4.5 →
  // 4.5/√(5·4.5) = 0.948683; position (and entropy, rising the same way) ranks 1 2 3 4: dx −1.5 −0.5 0.5 1.5 against
  // dy −1 0.5 1.5 −1, Σdxdy = 1.5 − 0.25 + 0.75 − 1.5 = 0.5 → 0.5/√22.5 = 0.105409. The best baseline is 1 − π, above
  // "a"'s 0.632456: an excess of −0.316228.
  close(r.baselines!.one_minus_p.spearman_unbiased!.mean, 4.5 / Math.sqrt(22.5), 1e-9);
  close(r.baselines!.position.spearman_unbiased!.mean, 0.5 / Math.sqrt(22.5), 1e-9);
  assert.equal(r.accuracy.a.excess!.over, 'one_minus_p');
  close(r.accuracy.a.excess!.mean, (3 - 4.5) / Math.sqrt(22.5), 1e-9);
  // the sign test pools the units where Â and δ̂ are both non-zero: δ̂ = 0.25, 0.5, −0.75, 0, so tokens 0–2 of each
  // episode, all agreeing in sign (0.1·0.25, 0.2·0.5, −0.4·−0.75 > 0): 6 of 6, p = 2/2^6
  assert.deepEqual([r.accuracy.a.sign_test!.agree, r.accuracy.a.sign_test!.units], [6, 6]);
  close(r.accuracy.a.sign_test!.p, 2 / 64);
  assert.ok(r.warnings!.some((w) => /2 prompts: the intervals are t intervals/.test(w)));
});

test('the cancellation test: δ̂ of the tokens the update boosted minus those it suppressed, by hand', () => {
  // V 0.5 0.5 1 0.25 0 → δ̂ = 0, 0.5, −0.75, −0.25 per token
  const ep = (prompt: number, advantage: number, realized: number[], ownAdv: number[]) => ({
    prompt,
    n: 4,
    positions: [0, 1, 2, 3, 4],
    values: [0.5, 0.5, 1, 0.25, 0],
    advantage,
    realized,
    ownAdv,
  });
  const eps = [
    // A > 0: boosted tokens 0 and 1 (δ̂ mean 0.25), suppressed 2 and 3 (mean −0.5): +0.75
    ep(1, 1, [0.1, 0.2, -0.1, -0.3], [1, 1, 1, 1]),
    // A < 0: boosted token 1 (0.5), suppressed 0, 2, 3 (mean −1/3): +0.8333
    ep(2, -1, [-0.1, 0.2, -0.1, -0.3], [-1, -1, -1, -1]),
  ];
  const c = creditAccuracy(eps, {
    a: [
      [0.1, 0.2, -0.4, 0.3],
      [0.1, 0.2, -0.4, 0.3],
    ],
  }).cancellation!;
  close(c.within_positive.mean, 0.75);
  close(c.within_negative.mean, 0.5 + 1 / 3);
  assert.equal(c.within_positive.n, 1);
  // over all, one value per prompt: prompt 1's is its episode's 0.75, prompt 2's 0.8333 → mean 0.791667
  close(c.realized.mean, (0.75 + 0.5 + 1 / 3) / 2);
  // Â's sign is one per episode: within a prompt of one episode there is no split, so nothing to score
  assert.equal(c.advantage.mean, null);
  // without realized credit there is no test
  assert.equal(creditAccuracy([{ prompt: 1, n: 4, positions: [0, 1, 2, 3, 4], values: [0.5, 0.5, 1, 0.25, 0] }], { a: [[1, 1, 1, 1]] }).cancellation, null);
});

test('a strategy no probed episode can score is left out with the reason, not shown as an empty row', () => {
  const eps = [
    { prompt: 1, n: 3, positions: [0, 1, 2, 3], values: [0.5, 0.5, 1, 0.25] },
    { prompt: 2, n: 3, positions: [0, 1, 2, 3], values: [0.5, 0, 0.5, 1] },
  ];
  // gtpo's paper form on a short run: Â 0 at every token (no group it reshapes), beside a strategy that scores
  const r = creditAccuracy(eps, {
    gtpo_paper: [
      [0, 0, 0],
      [0, 0, 0],
    ],
    none: [
      [0.5, 0.5, 0.5],
      [-0.5, -0.25, -0.5],
    ],
  });
  assert.deepEqual(Object.keys(r.accuracy), ['none']);
  assert.ok(
    r.warnings!.includes(
      'gtpo_paper: left out, no probed episode can score it: its Â is 0 at every token in all 2 probed episodes with A ≠ 0, so it weighs and ranks no token',
    ),
    r.warnings!.join('\n'),
  );
});

test('the sign test with the prompt as the unit: a share carried by one prompt is not evidence, hand-computed', async () => {
  const { clusteredSignTest, binomialTwoSided } = await import('../../../src/engine/probe/accuracy');
  // three prompts: 90 of 100 units agree on prompt 0, 5 of 10 on prompts 1 and 2. Pooled: 100 of 120 (binomial p tiny).
  // Clustered: p̂ = 100/120 = 0.8333; residuals a − p̂n: 90 − 83.33 = 6.667, 5 − 8.333 = −3.333 (twice);
  // Σ² = 44.44 + 11.11 + 11.11 = 66.67; v = 66.67/120² · 3/2 = 0.0069444, se 0.083333; t = 0.3333/0.08333 = 4.0 on 2 df:
  // p = 2·P(T₂ > 4) = 1 − 4/√(16 + 2) = 0.057191 (the t₂ tail in closed form: P(|T| > t) = 1 − t/√(t² + 2))
  const scores = [
    { sign_agree: 60, sign_units: 70 },
    { sign_agree: 30, sign_units: 30 },
    { sign_agree: 5, sign_units: 10 },
    { sign_agree: 5, sign_units: 10 },
  ];
  const r = clusteredSignTest(scores, [0, 0, 1, 2]);
  assert.equal(r.prompts, 3);
  assert.ok(Math.abs(r.p_clustered! - (1 - 4 / Math.sqrt(18))) < 1e-9, String(r.p_clustered));
  assert.ok(binomialTwoSided(100, 120) < 1e-10, 'the pooled binomial calls it certain');
  assert.deepEqual(clusteredSignTest(scores.slice(0, 2), [0, 0]), { prompts: 1, p_clustered: null });
});
