// The comparison statistics against published values. Student t quantiles: the standard two-sided 95 % table
// (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2: df 1 → 12.706, 2 → 4.303, 4 → 2.776, 10 → 2.228, 30 → 2.042). McNemar
// exact p-values: binomial tails worked by hand below. The bootstrap: properties that hold for any seed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { incompleteBeta, mcnemarExact, meanInterval, pairedBootstrap, studentTCdf, studentTQuantile } from '../../../src/engine/analysis/significance';

const close = (a: number, b: number, tol: number, what: string) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

test('Student t: 0.975 quantiles match the printed table to its 3 decimals', () => {
  for (const [df, t] of [
    [1, 12.706],
    [2, 4.303],
    [4, 2.776],
    [10, 2.228],
    [30, 2.042],
  ] as const)
    close(studentTQuantile(0.975, df), t, 5e-4, `df ${df}`);
  // Symmetry, and the CDF of the quantile is the probability back.
  close(studentTQuantile(0.025, 3), -studentTQuantile(0.975, 3), 1e-9, 'symmetry');
  close(studentTCdf(studentTQuantile(0.9, 7), 7), 0.9, 1e-9, 'round trip');
  // df 1 is the Cauchy distribution: P(T ≤ 1) = 1/2 + atan(1)/π = 0.75 exactly.
  close(studentTCdf(1, 1), 0.75, 1e-12, 'Cauchy');
  // I_x(1, 1) = x (the uniform distribution).
  close(incompleteBeta(0.3, 1, 1), 0.3, 1e-12, 'I_x(1,1)');
});

test('mean ± 95 % t interval over seeds', () => {
  // Values 0.10, 0.12, 0.14: mean 0.12, sample sd 0.02, half width t(0.975, 2)·0.02/√3 = 4.30265·0.011547 = 0.049683.
  const r = meanInterval([0.1, 0.12, 0.14]);
  close(r.mean, 0.12, 1e-12, 'mean');
  close(r.half, 0.049683, 1e-6, 'half width');
  close(r.lo, 0.12 - 0.049683, 1e-6, 'lo');
  assert.equal(r.n, 3);
  const one = meanInterval([0.2]);
  assert.equal(one.mean, 0.2);
  assert.ok(Number.isNaN(one.half), 'one seed has no interval');
});

test('McNemar exact: two-sided binomial tails worked by hand', () => {
  const pairs = (b: number, c: number, same: number): [boolean, boolean][] => [
    ...Array(b).fill([true, false]),
    ...Array(c).fill([false, true]),
    ...Array(same).fill([true, true]),
  ];
  // b = 1, c = 6: n = 7, P(X ≤ 1) = (1 + 7)/128 = 0.0625, p = 0.125.
  let r = mcnemarExact(pairs(1, 6, 10));
  assert.deepEqual([r.b, r.c, r.n], [1, 6, 17]);
  close(r.p, 0.125, 1e-12, 'b=1 c=6');
  // b = 0, c = 10: p = 2/1024 = 0.001953125.
  close(mcnemarExact(pairs(0, 10, 0)).p, 0.001953125, 1e-12, 'b=0 c=10');
  // b = c: p is capped at 1. No discordant pairs: p = 1.
  assert.equal(mcnemarExact(pairs(4, 4, 3)).p, 1);
  assert.equal(mcnemarExact(pairs(0, 0, 5)).p, 1);
  // A large n stays finite: b = 400, c = 500 → p well below 0.01 (normal approximation z = 100/√900 = 3.33, p ≈ 0.00086).
  r = mcnemarExact(pairs(400, 500, 0));
  assert.ok(r.p > 0.0005 && r.p < 0.0015, String(r.p));
});

test('paired bootstrap: the interval brackets the mean difference, is seeded, and tells noise from a shift', () => {
  const base = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? 1 : 0));
  const shifted = base.map((v, i) => (i % 5 === 0 ? 1 : v));
  const a = pairedBootstrap(base, shifted, { resamples: 4000, seed: 7 });
  const b = pairedBootstrap(base, shifted, { resamples: 4000, seed: 7 });
  assert.deepEqual(a, b, 'same seed, same interval');
  assert.ok(a.lo <= a.diff && a.diff <= a.hi);
  assert.ok(a.lo > 0 && a.p < 0.01, `a shift of ${a.diff} is detected (p ${a.p})`);
  const same = pairedBootstrap(base, base, { resamples: 1000 });
  assert.deepEqual([same.diff, same.lo, same.hi, same.p], [0, 0, 0, 1]);
  assert.throws(() => pairedBootstrap([1], [1, 0]), /same instances/);
});
