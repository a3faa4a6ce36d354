// The comparison statistics against values worked out independently. Student t quantiles: the standard two-sided 95 %
// table (NIST/SEMATECH e-Handbook 1.3.6.7.2: df 2 → 4.303, 4 → 2.776, 10 → 2.228, 30 → 2.042). The sign-flip test:
// binomial tails worked by hand, and, with one seed, McNemar's exact test computed from @stdlib's binomial CDF (a
// dev dependency the engine does not use). Holm: the adjustment worked by hand. The instance-clustered test's size: a
// seeded simulation of 2,000 synthetic experiments under the null.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import binomialCdf from '@stdlib/stats-base-dists-binomial-cdf';
import { clusterBootstrap, clustersOf, holm, meanInterval, mdeWithSeeds, powerOf, seedsNeeded, signFlipP } from '../../../src/engine/core/significance';
import { makeRng } from '../../../src/engine/core/rng';

const close = (a: number, b: number, tol: number, what: string) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

/** One run pair on `n` instances: b where only the baseline succeeds, c where only the other, `both` where both do. */
function pairRun(b: number, c: number, both: number, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    id: `i${i}`,
    baseline: i < b || (i >= b + c && i < b + c + both),
    other: (i >= b && i < b + c) || (i >= b + c && i < b + c + both),
  }));
}

/** McNemar's exact two-sided p from the binomial CDF: 2·P(X ≤ min(b, c)), X ~ Bin(b + c, ½), capped at 1. */
const mcnemar = (b: number, c: number) => (b + c === 0 ? 1 : Math.min(1, 2 * binomialCdf(Math.min(b, c), b + c, 0.5)));

test('Student t: 0.975 quantiles match the printed table to its 3 decimals; mean ± 95 % t interval over seeds', () => {
  // Values 0.10, 0.12, 0.14: mean 0.12, sample sd 0.02, half width t(0.975, 2)·0.02/√3 = 4.30265·0.011547 = 0.049683.
  const r = meanInterval([0.1, 0.12, 0.14]);
  close(r.mean, 0.12, 1e-12, 'mean');
  close(r.half, 0.049683, 1e-6, 'half width');
  for (const [df, t] of [
    [4, 2.776],
    [10, 2.228],
    [30, 2.042],
  ] as const) {
    const values = Array.from({ length: df + 1 }, (_, i) => (i % 2 ? 1 : -1));
    const iv = meanInterval(values);
    const sd = Math.sqrt(values.reduce((a, v) => a + (v - iv.mean) ** 2, 0) / df);
    close(iv.half / (sd / Math.sqrt(df + 1)), t, 5e-4, `t(0.975, ${df})`);
  }
  assert.ok(Number.isNaN(meanInterval([0.2]).half), 'one seed has no interval');
});

test('sign-flip test with one seed is McNemar exact: the issue’s worked case b = 10, c = 20 gives p = 0.0987', () => {
  const one = clustersOf([pairRun(10, 20, 50, 256)]);
  assert.deepEqual([one.b, one.c, one.pairs, one.d.length], [10, 20, 256, 256]);
  close(signFlipP(one), mcnemar(10, 20), 1e-12, 'b=10 c=20');
  close(signFlipP(one), 0.0987371467, 1e-9, 'the issue’s figure');
  // Hand-worked tails: b = 1, c = 6 → 2·(1 + 7)/128 = 0.125; b = 0, c = 10 → 2/1024; b = c → 1; none discordant → 1.
  close(signFlipP(clustersOf([pairRun(1, 6, 10, 40)])), 0.125, 1e-12, 'b=1 c=6');
  close(signFlipP(clustersOf([pairRun(0, 10, 0, 40)])), 0.001953125, 1e-12, 'b=0 c=10');
  assert.equal(signFlipP(clustersOf([pairRun(4, 4, 3, 40)])), 1);
  assert.equal(signFlipP(clustersOf([pairRun(0, 0, 5, 40)])), 1);
  for (const [b, c] of [
    [3, 17],
    [40, 61],
    [150, 190],
  ])
    close(signFlipP(clustersOf([pairRun(b, c, 0, 400)])), mcnemar(b, c), 1e-9 * Math.max(1, mcnemar(b, c)), `b=${b} c=${c}`);
});

test('three identical copies of one seed give the verdict and interval of that seed; pooling them would not', () => {
  const seed = pairRun(10, 20, 50, 256);
  const one = clustersOf([seed]);
  const three = clustersOf([seed, seed, seed]);
  assert.deepEqual([three.b, three.c, three.pairs, three.d.length], [30, 60, 768, 256], 'pairs triple, instances do not');
  close(signFlipP(three), signFlipP(one), 1e-12, 'same p');
  // Pooled McNemar on the 768 pairs: b = 30, c = 60 → p ≈ 0.002, which the clustered test refuses to claim.
  assert.ok(mcnemar(30, 60) < 0.003);
  const a = clusterBootstrap(one, { resamples: 4000, seed: 3 });
  const c = clusterBootstrap(three, { resamples: 4000, seed: 3 });
  assert.deepEqual([c.diff, c.lo, c.hi], [a.diff, a.lo, a.hi], 'the same resampled instances, the same ratios');
  close(a.diff, 10 / 256, 1e-15, 'diff (c − b)/n');
  assert.ok(a.lo < 0 && a.hi > 0, `interval [${a.lo}, ${a.hi}] includes 0 like p = 0.0987`);
});

test('the clustered test with unequal instance sums: exact distribution worked by hand', () => {
  // Instance sums D = (3, 2, −1) over 3 seeds: Σ = 4; the 8 sign patterns give ±3 ±2 ±1 ∈ {6, 4, 2, 0, 0, −2, −4, −6};
  // |sum| ≥ 4 in 4 of 8 → p = 0.5.
  const cl = {
    d: [
      [1, 1, 1],
      [1, 1, 0],
      [-1, 0, 0],
      [0, 0, 0],
    ],
    b: 1,
    c: 5,
    pairs: 12,
    seeds: 3,
  };
  close(signFlipP(cl), 0.5, 1e-15, 'p');
  // D = (3, 3, 3, 3, 2): Σ = 14 of max 14 → only the all-plus and all-minus patterns: p = 2/32.
  close(
    signFlipP({
      d: [
        [1, 1, 1],
        [1, 1, 1],
        [1, 1, 1],
        [1, 1, 1],
        [1, 1, 0],
      ],
      b: 0,
      c: 14,
      pairs: 15,
      seeds: 3,
    }),
    1 / 16,
    1e-15,
    'p extreme',
  );
});

test('Holm over one comparison’s rows, worked by hand', () => {
  // p = (0.01, 0.04, 0.03, 0.20), m = 4. Sorted: 0.01·4 = 0.04; 0.03·3 = 0.09; 0.04·2 = 0.08 → max with 0.09 = 0.09;
  // 0.20·1 = 0.20. Back in order: (0.04, 0.09, 0.09, 0.20).
  const adj = holm([0.01, 0.04, 0.03, 0.2]);
  [0.04, 0.09, 0.09, 0.2].forEach((x, i) => close(adj[i], x, 1e-12, `row ${i}`));
  assert.deepEqual(holm([0.3]), [0.3], 'a family of one is not adjusted');
  assert.deepEqual(holm([0.6, 0.7]), [1, 1], 'capped at 1');
  assert.deepEqual(holm([]), []);
});

test('power: the MDE and the seeds needed, from the variance components worked by hand', () => {
  // One seed, b = 10, c = 20 of 256 (the worked case): d has mean 10/256 and variance over instances
  // (30 − 256·(10/256)²)/255 = (30 − 0.390625)/255 = 0.116115; with S = 1 the between-seed covariance is assumed 0.
  // At α = 0.05: z = 1.959964 + 0.841621 = 2.801585; MDE = 2.801585·√(0.116115/256) = 0.059666.
  const one = powerOf(clustersOf([pairRun(10, 20, 50, 256)]), 0.05);
  close(one.within, 0.116115, 1e-6, 'within');
  assert.equal(one.between, 0);
  assert.equal(one.assumedIndependent, true);
  close(one.mde, 0.059666, 1e-6, 'MDE one seed');
  // Seeds needed for a 3-point difference with independent seeds: MDE(S) = 0.059666/√S ≤ 0.03 → S ≥ 3.9556 → 4.
  assert.equal(seedsNeeded(one, 0.03), 4);
  close(mdeWithSeeds(one, 4), 0.059666 / 2, 1e-6, 'MDE(4)');
  // Three identical copies: the seeds are perfectly correlated (between = within), so the MDE stays that of one seed
  // and no number of seeds reaches 3 points on these instances.
  const three = powerOf(clustersOf([pairRun(10, 20, 50, 256), pairRun(10, 20, 50, 256), pairRun(10, 20, 50, 256)]), 0.05);
  close(three.between, three.within, 1e-12, 'between = within');
  close(three.mde, one.mde, 1e-9, 'MDE copies');
  assert.equal(seedsNeeded(three, 0.03), null);
  assert.equal(seedsNeeded(three, 0.07), 1);
  // No discordant instance: nothing to estimate a variance from, so no MDE (not a claim that any difference is visible).
  const none = powerOf(clustersOf([pairRun(0, 0, 5, 40)]), 0.05);
  assert.ok(Number.isNaN(none.mde));
  assert.equal(seedsNeeded(none, 0.05), null);
});

/**
 * A synthetic experiment under the null: n instances of difficulty q ~ U(0, 1); each method has its own success
 * probability on each instance, drawn the same way for both (q plus a method × instance deviation, so the methods are
 * exchangeable but an instance one of them happens to be good at stays good across seeds, as with runs from one SFT
 * start); each seed's outcome is Bernoulli(p).
 */
function nullExperiment(rand: () => number, n: number, seeds: number) {
  const runs: { id: string; baseline: boolean; other: boolean }[][] = Array.from({ length: seeds }, () => []);
  const clamp = (x: number) => Math.min(1, Math.max(0, x));
  for (let i = 0; i < n; i++) {
    const q = rand();
    const pa = clamp(q + 1.2 * (rand() - 0.5));
    const pb = clamp(q + 1.2 * (rand() - 0.5));
    for (let s = 0; s < seeds; s++) runs[s].push({ id: `i${i}`, baseline: rand() < pa, other: rand() < pb });
  }
  return clustersOf(runs);
}

/**
 * The exact test's attained size for one experiment, by an independent route: the sign-flip distribution of the
 * instance sums by direct convolution, then the largest two-sided tail below α. A discrete test rejects at most this
 * often; its mean over experiments is the rate the simulation should show.
 */
function attainedSize(D: number[], alpha: number): number {
  const M = D.reduce((a, x) => a + Math.abs(x), 0);
  let dist = new Float64Array(2 * M + 1);
  dist[M] = 1;
  for (const x of D) {
    const next = new Float64Array(2 * M + 1);
    for (let j = 0; j <= 2 * M; j++) {
      if (!dist[j]) continue;
      next[j - Math.abs(x)] += dist[j] / 2;
      next[j + Math.abs(x)] += dist[j] / 2;
    }
    dist = next;
  }
  let tail = 0;
  let size = 0;
  for (let t = M; t >= 0; t--) {
    tail += t === 0 ? dist[M] : dist[M + t] + dist[M - t];
    if (tail < alpha) size = tail;
    else break;
  }
  return size;
}

test('size under the null: 2,000 seeded synthetic experiments reject at α = 0.05 within Monte Carlo error; pooled McNemar does not', () => {
  const rand = makeRng(2025);
  const K = 2000;
  let clustered = 0;
  let pooled = 0;
  let attained = 0;
  for (let k = 0; k < K; k++) {
    const cl = nullExperiment(rand, 256, 3);
    if (signFlipP(cl) < 0.05) clustered++;
    if (mcnemar(cl.b, cl.c) < 0.05) pooled++;
    attained += attainedSize(
      cl.d.map((r) => r.reduce((a, x) => a + x, 0)).filter((x) => x !== 0),
      0.05,
    );
  }
  // Monte Carlo standard error of a 0.05 rate over 2,000 experiments: √(0.05·0.95/2000) = 0.00487.
  const se = Math.sqrt((0.05 * 0.95) / K);
  const rate = clustered / K;
  const expected = attained / K;
  // An exact test on a lattice rejects a little less than α: its attained size, here about 0.044 (the sums move in
  // steps of 2). The rate must match that within 2.5 SE, never exceed α by more than 2 SE, and discreteness may cost at
  // most one point.
  assert.ok(expected > 0.04 && expected <= 0.05, `attained size ${expected}`);
  assert.ok(Math.abs(rate - expected) <= 2.5 * se, `clustered test rejects ${rate} of null experiments; its attained size is ${expected}`);
  assert.ok(rate <= 0.05 + 2 * se, `clustered test rejects ${rate}`);
  assert.ok(pooled / K > 0.05 + 10 * se, `pooled McNemar rejects ${pooled / K}: anti-conservative here, the reason for the change`);
});

test('cluster bootstrap: seeded, brackets the difference, and covers it near 95 % under resampling of instances', () => {
  const cl = clustersOf([pairRun(5, 25, 40, 200), pairRun(8, 22, 40, 200), pairRun(6, 20, 40, 200)]);
  const a = clusterBootstrap(cl, { resamples: 3000, seed: 7 });
  assert.deepEqual(a, clusterBootstrap(cl, { resamples: 3000, seed: 7 }), 'same seed, same interval');
  close(a.diff, (25 + 22 + 20 - 5 - 8 - 6) / 600, 1e-15, 'diff');
  assert.ok(a.lo > 0 && a.lo <= a.diff && a.diff <= a.hi, JSON.stringify(a));
  const none = clusterBootstrap(clustersOf([pairRun(0, 0, 10, 20)]), { resamples: 100 });
  assert.deepEqual([none.diff, none.lo, none.hi], [0, 0, 0]);
});
