// `credit-lens probe --plan`: size a probe before spending on it. A small pilot probe (its episodes are kept: the real
// probe with the same settings resumes from them) gives the two things an accuracy table's power rests on:
// - how much of δ̂ is signal at M continuations: the split-half reliability r_h of δ̂ from M/2 continuations gives, by
//   Spearman–Brown, one continuation's r₁ = r_h / (k − (k − 1)·r_h) with k = M/2, and so the reliability at any M′,
//   M′·r₁ / (1 + (M′ − 1)·r₁);
// - how much the lift's excess over the best trivial baseline (the headline) varies between prompts (its per-prompt SD,
//   s): a 95 % interval of half-width h needs about P prompts with t_{0.975, P−1}·s/√P ≤ h. The lift is in δ² (reward²)
//   units, which mean nothing across tasks, so the target is a share of the δ² uniform credit puts on a token
//   (--target 0.1: every excess within ± 10 % of it).
// The plan takes the largest P over the strategies (every row's excess to the target width), at least 10 prompts
// (below that a cluster interval is not to be trusted), the pilot's episodes per prompt, and the smallest M′ (even, up
// to the probe's limit) whose reliability reaches 0.7; its cost is episodes × the pilot's probed positions per episode
// × M′ continuations, and its time the pilot's seconds per continuation times that. The excess's SD is the pilot's at
// its M: a larger M′ only narrows it, so the plan errs on the side of more prompts.
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import type { AccuracyReport } from '../../protocol/analysis';
import { FEW_PROMPTS } from './clustered_mean';

export interface ProbePlanInput {
  report: AccuracyReport;
  /** the pilot's settings and cost */
  rollouts: number;
  /** episodes probed (all, A = 0 included) and the continuations and seconds they took */
  probed: number;
  continuations: number;
  seconds: number;
  /** the target 95 % half-width of every strategy's lift excess, as a share of uniform credit's δ² */
  target: number;
  /** the step's episodes and prompts: what one step can give */
  stepEpisodes: number;
  stepPrompts: number;
  maxRollouts: number;
}

export interface ProbePlan {
  /** the target as given: a share of uniform credit's δ² */
  target_half_width: number;
  /** the same in δ² units: target × the pilot's uniform δ²; null when the pilot has none */
  target_lift: number | null;
  pilot: { episodes: number; prompts: number; rollouts: number; reliability: number | null; continuations: number; seconds: number };
  /** the strategy whose lift excess needs the most prompts, and its per-prompt SD (δ² units) */
  limiting: { strategy: string; prompt_sd: number } | null;
  prompts: number;
  episodes: number;
  rollouts: number;
  /** the reliability of δ̂ expected at `rollouts` */
  reliability: number | null;
  continuations: number;
  seconds: number;
  /** the command that runs the plan */
  command: string;
  notes: string[];
}

/** Reliability at m continuations from one continuation's r₁ (Spearman–Brown). */
const atM = (r1: number, m: number) => (m * r1) / (1 + (m - 1) * r1);

/** One continuation's reliability r₁ from the split-half r_h of a probe at M continuations (halves of M/2). */
const oneContinuation = (rh: number, M: number) => rh / (M / 2 - (M / 2 - 1) * rh);

export const RELIABILITY_TARGET = 0.7;

/**
 * The reliability of δ̂ expected at `m` continuations, from a probe at `rollouts` whose halves agree with split-half r
 * `half`; null where they do not agree at all (r_h ≤ 0: nothing to extrapolate from) or agree perfectly.
 */
export function reliabilityAtRollouts(half: number, rollouts: number, m: number): number | null {
  return half > 0 && half < 1 ? atM(oneContinuation(half, rollouts), m) : null;
}

/** The fewest continuations (even, up to `max`) whose expected reliability reaches RELIABILITY_TARGET; null as above. */
export function rolloutsForReliability(half: number, rollouts: number, max: number): number | null {
  if (!(half > 0 && half < 1)) return null;
  let m = 2;
  while (m < max && reliabilityAtRollouts(half, rollouts, m)! < RELIABILITY_TARGET) m += 2;
  return Math.min(m, max);
}

export function planProbe(i: ProbePlanInput, runDir: string, step: number): ProbePlan {
  const { report } = i;
  const notes: string[] = [];
  const perPrompt = report.prompts ? report.episodes / report.prompts : 1;
  // prompts: the most any strategy's lift excess needs, to a half-width of target × uniform credit's δ²
  const uniform = report.uniform_delta2?.mean ?? null;
  const targetLift = uniform !== null && uniform > 0 ? i.target * uniform : null;
  let widest: { strategy: string; prompt_sd: number; P: number } | null = null;
  for (const [name, s] of Object.entries(report.accuracy)) {
    const sd = s.lift_excess?.prompt_sd;
    if (targetLift === null || sd === null || sd === undefined || !(sd > 0)) continue;
    let P = 2;
    while (P < 100_000 && tQuantile(0.975, P - 1) * (sd / Math.sqrt(P)) > targetLift) P++;
    if (!widest || P > widest.P) widest = { strategy: name, prompt_sd: sd, P };
  }
  const prompts = Math.max(FEW_PROMPTS, widest?.P ?? FEW_PROMPTS);
  const limiting: ProbePlan['limiting'] = widest && { strategy: widest.strategy, prompt_sd: widest.prompt_sd };
  if (targetLift === null)
    notes.push(
      'the pilot put no δ² under uniform credit (every δ̂ᴬ·δ̂ᴮ 0, or no halves): no lift to size for; the plan falls back to 10 prompts; probe a larger pilot',
    );
  else if (!limiting)
    notes.push(
      'the pilot gave no lift excess that varies between prompts (too few prompts, or no halves): the plan falls back to 10 prompts; probe a larger pilot',
    );
  // rollouts: the reliability target from one continuation's reliability
  const rh = report.reliability?.half ?? null;
  let rollouts = i.rollouts;
  let reliability: number | null = report.reliability?.full ?? null;
  if (rh !== null && rh > 0 && rh < 1) {
    rollouts = rolloutsForReliability(rh, i.rollouts, i.maxRollouts)!;
    reliability = reliabilityAtRollouts(rh, i.rollouts, rollouts)!;
    if (reliability < RELIABILITY_TARGET)
      notes.push(`even ${i.maxRollouts} continuations give a reliability of only ${reliability.toFixed(2)}: δ̂ stays mostly noise at this step`);
  } else if (rh !== null && rh <= 0) {
    // no signal to extrapolate from: a pilot at four times the continuations is the next step, not a guess at M
    rollouts = Math.min(i.maxRollouts, 4 * i.rollouts);
    reliability = null;
    notes.push(
      `the pilot's two halves do not agree at all (split-half r ${rh.toFixed(2)} ≤ 0): δ̂ at M = ${i.rollouts} is noise, and no M can be planned from it; ` +
        `probe a pilot at --rollouts ${rollouts} and plan again`,
    );
  }
  const episodes = Math.ceil(prompts * perPrompt);
  // the probed positions per episode and the seconds per continuation, from the pilot
  const positionsPerEpisode = i.probed ? i.continuations / i.probed / i.rollouts : 0;
  // A = 0 episodes are probed too (spreadEpisodes takes every group) and left out of the score: scale up by their share
  const scoredShare = i.probed ? report.episodes / i.probed : 1;
  const toProbe = Math.ceil(episodes / Math.max(scoredShare, 1e-9));
  const continuations = Math.round(toProbe * positionsPerEpisode * rollouts);
  const seconds = i.continuations ? (i.seconds / i.continuations) * continuations : 0;
  if (toProbe > i.stepEpisodes)
    notes.push(
      `one step has ${i.stepEpisodes} episodes of ${i.stepPrompts} prompts, fewer than the ${toProbe} to probe (${episodes} with A ≠ 0): probe several logged steps and pool them, or train with more prompts per step`,
    );
  return {
    target_half_width: i.target,
    target_lift: targetLift,
    pilot: {
      episodes: report.episodes,
      prompts: report.prompts,
      rollouts: i.rollouts,
      reliability: report.reliability?.full ?? null,
      continuations: i.continuations,
      seconds: i.seconds,
    },
    limiting,
    prompts,
    episodes,
    rollouts,
    reliability,
    continuations,
    seconds,
    command: `credit-lens probe ${runDir} --step ${step} --episodes ${Math.min(toProbe, i.stepEpisodes)} --rollouts ${rollouts}${rollouts !== i.rollouts ? ' --replace' : ''}`,
    notes,
  };
}

/** The plan as text. */
export function planText(p: ProbePlan): string {
  const f2 = (x: number | null) => (x === null ? '—' : x.toFixed(2));
  const lines = [
    `pilot: ${p.pilot.episodes} episodes with A ≠ 0 of ${p.pilot.prompts} prompts at M = ${p.pilot.rollouts} (reliability of δ̂ ${f2(p.pilot.reliability)}), ${p.pilot.continuations} continuations in ${p.pilot.seconds.toFixed(1)} s`,
    p.limiting
      ? `the lift's excess over the best baseline varies between prompts by SD ${p.limiting.prompt_sd.toPrecision(3)} (${p.limiting.strategy}, the widest)`
      : "no per-prompt spread of the lift's excess to plan from",
    `for a 95 % interval of ± ${p.target_half_width} × uniform credit's δ²${p.target_lift === null ? '' : ` (± ${p.target_lift.toPrecision(3)})`} on every lift excess: ${p.prompts} prompts, about ${p.episodes} episodes with A ≠ 0, M = ${p.rollouts} (reliability ${f2(p.reliability)})`,
    `cost: about ${p.continuations.toLocaleString('en-US')} continuations, ${(p.seconds / 60).toFixed(1)} min at the pilot's rate`,
    `run: ${p.command}`,
    ...p.notes.map((n) => `note: ${n}`),
  ];
  return lines.join('\n') + '\n';
}
