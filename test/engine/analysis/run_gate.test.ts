// The run-level gate (core/significance.ts): the training run is the unit of "method B trains better than A".
// Expected numbers come from test/engine/analysis/twoway_reference.py, an independent Python implementation of the same
// two-way variance and Satterthwaite df whose t tail is Simpson's rule on the t density (no shared code, no stdlib),
// and from hand arithmetic written beside each assertion. The null simulation draws runs with a run effect on the logit
// (u_r ~ N(0, τ²), τ from 0 to 0.35, the spread the README's mitigation runs showed) and no method effect, on balanced
// and on unequal sides (11 v 3, 6 v 3, 11 v 2: where each side's own variance, Welch's, rejected up to 11.5 %).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clustersOf, runComponents, runLevelMde, runLevelTest, runsNeeded, signFlipP } from '../../../src/engine/core/significance';
import { makeRng } from '../../../src/engine/core/rng';

const close = (a: number, b: number, tol: number, what: string) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

test('a worked case with run-to-run variance and unequal seeds (4 against 3) matches the independent reference', () => {
  const B = [
    [1, 1, 1, 0, 1, 0],
    [1, 1, 0, 1, 0, 0],
    [1, 1, 1, 1, 1, 0],
    [0, 1, 1, 0, 0, 0],
  ];
  const A = [
    [1, 0, 0, 0, 0, 0],
    [1, 1, 0, 0, 0, 1],
    [0, 0, 0, 0, 1, 0],
  ];
  // By hand: B's run rates 4/6, 3/6, 5/6, 2/6 (mean 7/12), A's 1/6, 3/6, 1/6 (mean 5/18): Δ = 7/12 − 5/18 = 11/36.
  // s_B² = Var(4,3,5,2)/36 = (5/3)/36 = 0.046296, s_A² = Var(1,3,1)/36 = (4/3)/36 = 0.037037; pooled over 3 + 2 df:
  // s_p² = 0.042593, times 1/4 + 1/3: 0.024846; σ_inst²/6 = 0.0076389; se = √0.032485 = 0.18023.
  // twoway_reference.py: σ_inst² 0.0458333, se 0.18023476, df 7.809006, t 1.6953198, p 0.12938247.
  const r = runLevelTest([
    { sign: 1, runs: B },
    { sign: -1, runs: A },
  ])!;
  close(r.diff, 11 / 36, 1e-12, 'Δ');
  close(r.components.runVar[0]!, 5 / 3 / 36, 1e-12, 's_B²');
  close(r.components.runVar[1]!, 4 / 3 / 36, 1e-12, 's_A²');
  close(r.components.instanceVar, 0.0458333333, 1e-9, 'σ_inst²');
  close(r.se, 0.1802347577500926, 1e-10, 'se');
  close(r.df, 7.809005595453145, 1e-8, 'df');
  close(r.p, 0.1293824680468436, 1e-7, 'p');
  // the interval is the test's own: it contains 0 exactly when p ≥ 0.05
  assert.ok(r.lo < 0 && r.hi > 0 && r.p >= 0.05);
  // pooled over the sides (df-weighted: (3·0.046296 + 2·0.037037)/5) for planning
  close(r.components.pooledRunVar!, (3 * (5 / 3 / 36) + 2 * (4 / 3 / 36)) / 5, 1e-12, 'pooled');
});

test('fewer than 2 runs a side: no test, and no plan without any seed variance; with it, the seeds needed', () => {
  const one = [[1, 0, 1, 0]];
  const three = [
    [1, 1, 0, 0],
    [0, 0, 1, 0],
    [1, 0, 0, 1],
  ];
  assert.equal(
    runLevelTest([
      { sign: 1, runs: one },
      { sign: -1, runs: one },
    ]),
    null,
  );
  assert.equal(
    runLevelTest([
      { sign: 1, runs: three },
      { sign: -1, runs: one },
    ]),
    null,
  );
  const none = runComponents([
    { sign: 1, runs: one },
    { sign: -1, runs: one },
  ]);
  assert.equal(none.pooledRunVar, null);
  assert.equal(runLevelMde(none, [3, 3], 0.05), null);
  assert.equal(runsNeeded(none, 0.05, 0.05), null);
  // One side with 3 runs: its variance (rates 0.5, 0.25, 0.5: s² = (1/3)/16 = 1/48) plans both sides. Against a run
  // that solves nothing, d = (2/3, 1/3, 1/3, 1/3): Var(d) = 0.027778 is below the within-instance spread (1/3)/3, so the
  // interaction is clamped to 0. With S a side: SE = √(2/(48 S)), MDE(S) = (t_{.975,df} + t_{.8,df})·SE with the df a
  // test of S a side would have, Satterthwaite's 2(S − 1). t table: df 6: 2.4469 + 0.9057 → S = 4: 3.3526·√(1/96) =
  // 0.34218 > 0.30; df 8: 2.3060 + 0.8889 → S = 5: 3.1949·√(1/120) = 0.29165 ≤ 0.30.
  const c = runComponents([
    { sign: 1, runs: three },
    { sign: -1, runs: [[0, 0, 0, 0]] },
  ]);
  close(c.pooledRunVar!, 1 / 48, 1e-12, 'pooled run variance');
  assert.equal(c.instanceVar, 0);
  close(runLevelMde(c, [4, 4], 0.05)!, 0.34218, 2e-4, 'MDE at 4');
  close(runLevelMde(c, [5, 5], 0.05)!, 0.29165, 2e-4, 'MDE at 5');
  assert.equal(runsNeeded(c, 0.3, 0.05), 5);
});

test('the instances set a floor that seeds cannot lower: the seeds needed is null below it', () => {
  // Identical runs (no seed variance): the noise is σ_inst²/n alone, so more seeds never shrink it.
  const a = Array.from({ length: 3 }, () => Array.from({ length: 100 }, (_, i) => Number(i < 20)));
  const b = Array.from({ length: 3 }, () => Array.from({ length: 100 }, (_, i) => Number(i < 25 || (i >= 90 && i < 95))));
  const c = runComponents([
    { sign: 1, runs: b },
    { sign: -1, runs: a },
  ]);
  assert.ok(c.instanceVar > 0);
  assert.equal(runsNeeded(c, 0.01, 0.05), null);
  assert.ok(runsNeeded(c, 0.5, 0.05) === 2);
});

/** Runs drawn under the method null: instance difficulty b_i shared, a run effect u ~ N(0, τ²) on the logit. */
function simulate(tau: number, runsA: number, runsB: number, sims: number, seed: number) {
  const rand = makeRng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const n = 256;
  let gate = 0;
  let conditional = 0;
  let withheld = 0;
  for (let k = 0; k < sims; k++) {
    // difficulty around a 12 % success rate, the README's countdown runs
    const b = Array.from({ length: n }, () => -2.5 + 1.5 * gauss());
    const draw = () => {
      const u = tau * gauss();
      return b.map((bi) => Number(rand() < 1 / (1 + Math.exp(-(bi + u)))));
    };
    const A = Array.from({ length: runsA }, draw);
    const B = Array.from({ length: runsB }, draw);
    const r = runLevelTest([
      { sign: 1, runs: B },
      { sign: -1, runs: A },
    ]);
    if (!r) withheld++;
    else if (r.p < 0.05) gate++;
    // today's instance-clustered test, every A run against every B run
    const cl = clustersOf(A.flatMap((a) => B.map((bb) => a.map((x, i) => ({ id: String(i), baseline: x === 1, other: bb[i] === 1 })))));
    if (signFlipP(cl) < 0.05) conditional++;
  }
  return { gate: gate / sims, conditional: conditional / sims, withheld };
}

test('under the method null with run effects (τ 0 to 0.35), on equal and unequal sides, the gate rejects at most α + 3 MC SE; the instance test does not', () => {
  const sims = 1500;
  const bound = 0.05 + 3 * Math.sqrt((0.05 * 0.95) / sims);
  const seen: string[] = [];
  for (const [tau, a, b] of [
    [0, 3, 3],
    [0.15, 3, 3],
    [0.35, 3, 3],
    [0.35, 3, 6],
    [0.35, 6, 6],
    [0.35, 11, 3],
    [0.35, 6, 3],
    [0.35, 11, 2],
  ] as const) {
    const r = simulate(tau, a, b, sims, 11 + Math.round(100 * tau) + a + b);
    seen.push(`τ ${tau}, ${a} vs ${b}: gate ${r.gate.toFixed(3)}, instance-clustered ${r.conditional.toFixed(3)}`);
    assert.equal(r.withheld, 0);
    assert.ok(r.gate <= bound, `the gate's size ${r.gate} exceeds ${bound.toFixed(4)} at τ ${tau}, ${a} vs ${b}`);
    // the instance-clustered test's size grows with the run effect, and more seeds do not bring it back
    if (tau === 0.35) assert.ok(r.conditional > bound, `the instance-clustered test held its size at τ 0.35 (${r.conditional}): the simulation shows nothing`);
  }
  console.log(seen.join('\n'));
});

test('the gain form (one side: each run against its own start) is calibrated under no gain', () => {
  // Start and final drawn independently around the same difficulty, each run with its own effect: no true gain.
  const rand = makeRng(5);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const sims = 1500;
  let rejected = 0;
  for (let k = 0; k < sims; k++) {
    const b = Array.from({ length: 256 }, () => -2 + 1.5 * gauss());
    const runs = Array.from({ length: 3 }, () => {
      const u0 = 0.35 * gauss();
      const u1 = 0.35 * gauss();
      return b.map((bi) => Number(rand() < 1 / (1 + Math.exp(-(bi + u1)))) - Number(rand() < 1 / (1 + Math.exp(-(bi + u0)))));
    });
    const r = runLevelTest([{ sign: 1, runs }]);
    if (r && r.p < 0.05) rejected++;
  }
  const bound = 0.05 + 2 * Math.sqrt((0.05 * 0.95) / sims);
  assert.ok(rejected / sims <= bound, `gain gate size ${rejected / sims}`);
});
