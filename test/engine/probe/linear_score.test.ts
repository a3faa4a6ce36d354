// The probe's headline score on a synthetic probe with known values: episodes whose true V_t is chosen, each half's
// V̂ the mean of M/2 Bernoulli(V_t) draws (what a probe of binary rewards estimates), the halves independent. The
// noise-free values are computed from the true δ_t = V_{t+1} − V_t, and every reported linear score (credit_delta2,
// lift, lift_excess over the best baseline, uniform_delta2) must hold its noise-free value inside its 95 % interval,
// for a perfect credit (|Â| = |δ|), uniform credit and one that beats 1 − π by a known margin. The rank measure the
// headline used to be is shown attenuated on the same data: a perfect credit scores far below its noise-free 1.
// One seed is asserted; the design was checked over other seeds first: over seeds 1–40 every reported score's mean
// deviation from its noise-free value is within one Monte Carlo standard error of 0, and over seeds 1–30 the 95 %
// intervals held their noise-free values in 256 of 270 cases (94.8 %). A single draw misses by chance in about 1 of 20
// intervals, as an interval should.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { creditAccuracy, spearman, type ProbedEpisode } from '../../../src/engine/probe/accuracy';
import { makeRng } from '../../../src/engine/core/rng';

const N_TOKENS = 12;
const PROMPTS = 40;
const PER_PROMPT = 3;
const M = 8;

interface Truth {
  v: number[];
  delta: number[];
  onePi: number[];
}

/** One episode's true values: a few decisive tokens (large |δ|) among small steps, V in [0.05, 0.95], and a 1 − π that tracks |δ| loosely. */
function truth(rand: () => number): Truth {
  const v = [0.4 + 0.2 * rand()];
  for (let t = 0; t < N_TOKENS; t++) {
    const big = rand() < 0.2;
    const step = (big ? 0.3 : 0.04) * (rand() < 0.5 ? -1 : 1);
    v.push(Math.min(0.95, Math.max(0.05, v[t] + step)));
  }
  const delta = v.slice(1).map((x, t) => x - v[t]);
  // 1 − π: high where |δ| is large half of the time, otherwise noise: a trivial credit with some skill
  const onePi = delta.map((d) => (Math.abs(d) > 0.1 && rand() < 0.5 ? 0.6 + 0.3 * rand() : 0.1 + 0.5 * rand()));
  return { v, delta, onePi };
}

function half(rand: () => number, v: number[]): number[] {
  return v.map((p) => {
    let k = 0;
    for (let m = 0; m < M / 2; m++) if (rand() < p) k++;
    return k / (M / 2);
  });
}

/** The noise-free linear scores of a credit's |Â| over an episode's true δ: Σ p·δ² and uniform's Σ δ²/n. */
function exact(abs: number[], delta: number[]): { credit: number; uniform: number } {
  const sum = abs.reduce((a, b) => a + b, 0);
  return { credit: abs.reduce((a, w, t) => a + (w / sum) * delta[t] ** 2, 0), uniform: delta.reduce((a, d) => a + d * d, 0) / delta.length };
}

test('the linear score is unbiased on a synthetic probe: every reported value holds its noise-free value in its interval; the rank score is attenuated', () => {
  const rand = makeRng(7);
  const episodes: ProbedEpisode[] = [];
  const truths: Truth[] = [];
  for (let p = 0; p < PROMPTS; p++)
    for (let e = 0; e < PER_PROMPT; e++) {
      const tr = truth(rand);
      const a = half(rand, tr.v);
      const b = half(rand, tr.v);
      // V_n is the reward itself in a real probe: both halves share it, as they share the completion
      const r = tr.v[N_TOKENS];
      a[N_TOKENS] = r;
      b[N_TOKENS] = r;
      truths.push(tr);
      episodes.push({
        prompt: p,
        n: N_TOKENS,
        positions: Array.from({ length: N_TOKENS + 1 }, (_, t) => t),
        values: a.map((x, t) => (x + b[t]) / 2),
        valuesA: a,
        valuesB: b,
        advantage: 1,
        logprobs: tr.onePi.map((w) => Math.log(1 - w)),
      });
    }
  // the strategies: a perfect credit (|Â| = |δ| of the truth), uniform credit, and "mixed": 1 − π plus |δ| (beats 1 − π)
  const perfect = truths.map((t) => t.delta.map((d) => Math.abs(d)));
  const uniform = truths.map(() => Array.from({ length: N_TOKENS }, () => 1));
  const mixed = truths.map((t) => t.onePi.map((w, i) => w + 3 * Math.abs(t.delta[i])));
  const r = creditAccuracy(episodes, { perfect, uniform, mixed });

  const mean = (f: (t: Truth, i: number) => number) => truths.reduce((a, t, i) => a + f(t, i), 0) / truths.length;
  const exactOf = (rows: number[][]) => ({
    credit: mean((t, i) => exact(rows[i], t.delta).credit),
    lift: mean((t, i) => exact(rows[i], t.delta).credit - exact(rows[i], t.delta).uniform),
  });
  const onePi = exactOf(truths.map((t) => t.onePi));
  const uniformExact = mean((t) => exact(t.delta, t.delta).uniform);
  const inside = (what: string, e: { mean: number | null; lo: number | null; hi: number | null } | undefined, value: number) => {
    assert.ok(e && e.lo !== null && e.hi !== null, `${what}: an interval`);
    console.log(`${what}: ${e.mean!.toFixed(5)} [${e.lo.toFixed(5)}, ${e.hi.toFixed(5)}], noise-free ${value.toFixed(5)}`);
    assert.ok(e.lo - 1e-12 <= value && value <= e.hi + 1e-12, `${what}: the noise-free ${value} outside [${e.lo}, ${e.hi}]`);
  };
  inside('uniform_delta2', r.uniform_delta2, uniformExact);
  for (const [name, rows] of [
    ['perfect', perfect],
    ['uniform', uniform],
    ['mixed', mixed],
  ] as const) {
    const x = exactOf(rows as number[][]);
    inside(`${name} credit_delta2`, r.accuracy[name].credit_delta2, x.credit);
    inside(`${name} lift`, r.accuracy[name].lift, x.lift);
  }
  // uniform credit's lift is 0 by construction, episode by episode
  assert.ok(Math.abs(r.accuracy.uniform.lift!.mean!) < 1e-12);
  // the best trivial baseline is 1 − π (position's and entropy's weights carry no skill; entropy is not logged here)
  assert.equal(r.accuracy.mixed.lift_excess!.over, 'one_minus_p');
  const margin = exactOf(mixed).lift - onePi.lift;
  assert.ok(margin > 0.003, `the design's margin over 1 − π: ${margin}`);
  inside('mixed lift_excess over 1 − π', r.accuracy.mixed.lift_excess, margin);
  inside('perfect lift_excess over 1 − π', r.accuracy.perfect.lift_excess, exactOf(perfect).lift - onePi.lift);

  // the rank measure on the same data: a perfect credit's noise-free value is 1 (|Â| ranks as δ² does), the estimate
  // is far below it, which is why it is no longer the headline
  const defined = truths.filter(
    (t) =>
      spearman(
        t.delta.map(Math.abs),
        t.delta.map((d) => d * d),
      ) !== null,
  );
  assert.ok(
    defined.every(
      (t) =>
        spearman(
          t.delta.map(Math.abs),
          t.delta.map((d) => d * d),
        ) === 1,
    ),
    'noise-free, a perfect credit ranks as δ² does',
  );
  console.log(`perfect credit's rank score: ${r.accuracy.perfect.spearman_unbiased!.mean!.toFixed(3)} against a noise-free 1`);
  assert.ok(r.accuracy.perfect.spearman_unbiased!.hi! < 0.9, 'attenuated: its interval stays well below 1');
});

/** A half of m Bernoulli(V_t) draws per position: its mean and its variance as an estimate, s²/m (s² with m − 1). */
function halfWithVar(rand: () => number, v: number[], m: number): { mean: number[]; var: number[] } {
  const mean: number[] = [];
  const vars: number[] = [];
  for (const p of v) {
    let k = 0;
    for (let i = 0; i < m; i++) if (rand() < p) k++;
    const mu = k / m;
    mean.push(mu);
    vars.push((k * (1 - mu) ** 2 + (m - k) * mu ** 2) / (m - 1) / m);
  }
  return { mean, var: vars };
}

/** The synthetic probe with the halves' variances; the last position is the reward, known exactly (variance 0). */
function probeWithVars(seed: number, m: number) {
  const rand = makeRng(seed);
  const episodes: ProbedEpisode[] = [];
  const truths: Truth[] = [];
  for (let p = 0; p < PROMPTS; p++)
    for (let e = 0; e < PER_PROMPT; e++) {
      const tr = truth(rand);
      const a = halfWithVar(rand, tr.v, m);
      const b = halfWithVar(rand, tr.v, m);
      for (const h of [a, b]) {
        h.mean[N_TOKENS] = tr.v[N_TOKENS];
        h.var[N_TOKENS] = 0;
      }
      truths.push(tr);
      episodes.push({
        prompt: p,
        n: N_TOKENS,
        positions: Array.from({ length: N_TOKENS + 1 }, (_, t) => t),
        values: a.mean.map((x, t) => (x + b.mean[t]) / 2),
        valuesA: a.mean,
        valuesB: b.mean,
        varsA: a.var,
        varsB: b.var,
        advantage: 1,
      });
    }
  return { episodes, truths };
}

test("the lift's ceiling, an oracle credit cross-fitted on the halves: unbiased for its weights' noise-free lift, rising toward the perfect credit's with M", () => {
  // given the oracle's weights (one half's |δ̂|), its noise-free lift is Σ p·δ² − Σ δ²/n with the true δ; averaged
  // over the two ways, episode by episode: the reported ceiling must hold the mean of that in its interval
  const target = (episodes: ProbedEpisode[], truths: Truth[]) =>
    truths.reduce((acc, t, i) => {
      const ep = episodes[i];
      const way = (v: (number | null)[]) => {
        const w = t.delta.map((_, k) => Math.abs(v[k + 1]! - v[k]!));
        const sum = w.reduce((a, x) => a + x, 0);
        return sum > 0 ? w.reduce((a, x, k) => a + (x / sum) * t.delta[k] ** 2, 0) : null;
      };
      const both = [way(ep.valuesA!), way(ep.valuesB!)].filter((x): x is number => x !== null);
      const uniform = t.delta.reduce((a, d) => a + d * d, 0) / t.delta.length;
      return acc + both.reduce((a, x) => a + x, 0) / both.length - uniform;
    }, 0) / truths.length;
  const perfect = (truths: Truth[]) =>
    truths.reduce((a, t) => a + exact(t.delta.map(Math.abs), t.delta).credit - exact(t.delta, t.delta).uniform, 0) / truths.length;

  const small = probeWithVars(11, M / 2);
  const r = creditAccuracy(small.episodes, { uniform: small.truths.map(() => new Array<number>(N_TOKENS).fill(1)) });
  const c = r.ceiling!;
  const want = target(small.episodes, small.truths);
  console.log(
    `ceiling at M = ${M}: ${c.mean!.toFixed(5)} [${c.lo!.toFixed(5)}, ${c.hi!.toFixed(5)}], its weights' noise-free ${want.toFixed(5)}; the perfect credit's ${perfect(small.truths).toFixed(5)}`,
  );
  assert.ok(c.lo! <= want && want <= c.hi!, 'the noise-free value inside the interval');
  // noisy weights put less on the decisive units than |δ| itself: below the perfect credit's lift, and above uniform's 0
  assert.ok(want < perfect(small.truths) && want > 0);
  // the ceiling rises toward the perfect credit's as M grows: at M = 256 (0.027 against 0.033 here; the small steps'
  // δ of 0.04 are still below a half's noise, SD 0.06, so their weights stay noisy)
  const big = probeWithVars(12, 128);
  const rb = creditAccuracy(big.episodes, { uniform: big.truths.map(() => new Array<number>(N_TOKENS).fill(1)) });
  const wantBig = target(big.episodes, big.truths);
  assert.ok(rb.ceiling!.lo! <= wantBig && wantBig <= rb.ceiling!.hi!);
  assert.ok(wantBig > want && wantBig > 0.75 * perfect(big.truths) && wantBig < perfect(big.truths), `${wantBig} vs ${perfect(big.truths)}`);
  // a probe without the halves' variances (an older table) reports no ceiling
  assert.equal(
    creditAccuracy(
      small.episodes.map(({ varsA: _, varsB: __, ...e }) => e),
      { uniform: small.truths.map(() => new Array<number>(N_TOKENS).fill(1)) },
    ).ceiling,
    undefined,
  );
});
