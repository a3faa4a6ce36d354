// probe --plan's arithmetic on hand-made pilot reports; each expected number is worked out beside it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planProbe, planText, RELIABILITY_TARGET } from '../../../src/engine/probe/plan';
import type { AccuracyReport } from '../../../src/protocol/analysis';

const est = (mean: number | null) => ({ mean, lo: null, hi: null, n: 8 });
function report(sds: number[], half: number | null, uniform: number | null = 1): AccuracyReport {
  return {
    accuracy: Object.fromEntries(
      sds.map((sd, k) => [
        `s${k}`,
        {
          spearman: est(0.1),
          decisive_share: est(0.1),
          sign_agreement: est(0.5),
          // the rank excess's spread is not what the plan sizes for: 10× the lift's here, and unused
          excess: { ...est(0), over: 'one_minus_p', prompt_sd: 10 * sd },
          lift_excess: { ...est(0), over: 'one_minus_p', prompt_sd: sd },
        },
      ]),
    ),
    uniform_share: est(0.1),
    // uniform credit's δ² of 1: the target's share is the half-width itself, as the arithmetic below reads
    uniform_delta2: est(uniform),
    episodes: 8,
    prompts: 4,
    reliability: half === null ? null : { half, full: (2 * half) / (1 + half), abs_rank_half: est(0.2), units: 100, zero_share: 0.5 },
  };
}
const base = { rollouts: 8, probed: 16, continuations: 16 * 40 * 8, seconds: 64, stepEpisodes: 128, stepPrompts: 16, maxRollouts: 4096 };

test('prompts from the widest excess: the fewest P with t(0.975, P − 1)·s/√P ≤ h', () => {
  // s = 0.1, h = 0.05: P = 18 gives t(0.975, 17) = 2.1098·0.1/√18 = 0.04973 ≤ 0.05; P = 17: 2.1199·0.1/√17 = 0.05142
  const p = planProbe({ ...base, report: report([0.05, 0.1], 0.5), target: 0.05 }, '/r', 50);
  assert.equal(p.prompts, 18);
  assert.deepEqual(p.limiting, { strategy: 's1', prompt_sd: 0.1 });
  // 2 scored episodes per prompt in the pilot (8 of 4): 36 episodes with A ≠ 0; half the probed episodes scored (8 of
  // 16), so 72 to probe
  assert.equal(p.episodes, 36);
  // a narrow spread still takes 10 prompts: fewer clusters cannot carry an interval
  assert.equal(planProbe({ ...base, report: report([0.01], 0.5), target: 0.05 }, '/r', 50).prompts, 10);
  // the target is a share of uniform credit's δ²: at δ² 0.02, ± 0.1 of it is ± 0.002, and an SD of 0.004 (twice the
  // half-width, as 0.1 against 0.05 above) plans the same 18 prompts
  const scaled = planProbe({ ...base, report: report([0.002, 0.004], 0.5, 0.02), target: 0.1 }, '/r', 50);
  assert.equal(scaled.prompts, 18);
  assert.ok(Math.abs(scaled.target_lift! - 0.002) < 1e-15);
  assert.match(planText(scaled), /± 0\.1 × uniform credit's δ² \(± 0\.00200\) on every lift excess: 18 prompts/);
  // no uniform δ² in the pilot: nothing to size for, and the plan says so
  const none = planProbe({ ...base, report: report([0.1], 0.5, null), target: 0.1 }, '/r', 50);
  assert.equal(none.prompts, 10);
  assert.ok(none.notes.some((n) => /no δ² under uniform credit/.test(n)));
});

test('M from the split-half reliability by Spearman–Brown, and the cost at the pilot’s rate', () => {
  // halves of 4 with r_h = 0.5: one continuation's r₁ = 0.5/(4 − 3·0.5) = 0.2; at M: 0.2M/(1 + 0.2(M − 1)); M = 10 gives
  // 2/2.8 = 0.714 ≥ 0.7, M = 8 gives 1.6/2.4 = 0.667 < 0.7
  const p = planProbe({ ...base, report: report([0.1], 0.5), target: 0.05 }, '/r', 50);
  assert.equal(p.rollouts, 10);
  assert.ok(Math.abs(p.reliability! - 2 / 2.8) < 1e-12 && p.reliability! >= RELIABILITY_TARGET);
  // cost: 72 episodes to probe × 40 positions × 10 = 28,800 continuations; the pilot's 5,120 took 64 s → 360 s
  assert.equal(p.continuations, 28_800);
  assert.ok(Math.abs(p.seconds - 360) < 1e-9);
  assert.equal(p.command, 'credit-lens probe /r --step 50 --episodes 72 --rollouts 10 --replace');
  assert.match(planText(p), /18 prompts, about 36 episodes with A ≠ 0, M = 10/);
});

test('a pilot whose halves disagree plans no M, and a plan beyond one step says so', () => {
  const p = planProbe({ ...base, report: report([0.5], -0.2), target: 0.05 }, '/r', 50);
  assert.equal(p.rollouts, 32, 'a pilot at four times M next');
  assert.equal(p.reliability, null);
  assert.ok(p.notes.some((n) => /do not agree at all/.test(n)));
  assert.ok(p.notes.some((n) => /one step has 128 episodes of 16 prompts/.test(n)));
});
