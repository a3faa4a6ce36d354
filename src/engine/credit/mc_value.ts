// mc_value: VinePPO's and Segment PO's Monte Carlo advantages (VinePPO, arXiv 2410.01679; SPO chain, arXiv 2505.23564).
// Each completion is cut at boundaries b_0 = 0 < b_1 < … < b_K = n, the value of each boundary's prefix is estimated by
// mc_value.rollouts continuations from the policy that sampled the step (credit-lens probe's estimator: shared prefills,
// a seeded stream per continuation), V̂(b_K) = the episode's reward, and every token of segment k gets
//   Â = V̂(b_{k+1}) − V̂(b_k)
// (VinePPO's r + V(s') − V(s) with the outcome reward at the end). Boundaries (mc_value.segments):
//   fixed:     every segment_len tokens (VinePPO cuts at reasoning steps; a fixed length needs no step parser);
//   cutpoints: before every cutpoints_per_segment-th token whose probability is below cutpoint_tau (SPO's cutpoints).
// With prob_mask (SPO's probability mask) only the segment's cutpoint tokens get its advantage, the others 0. No group
// baseline and no std scaling: the values are in reward units, as in both papers. The continuations' count and time are
// logged per step (mc_value/rollouts, mc_value/seconds).
import { childSeed } from '../core/rng';
import { estimateEpisode } from '../model/prefix_values';
import { PREPARED_CREDIT, tokenAdvantageBatch, type CreditStrategy, type EpisodeView, type PrepareContext, type Prepared } from './types';

export interface McValueParams {
  segments: 'fixed' | 'cutpoints';
  segment_len: number;
  cutpoint_tau: number;
  cutpoints_per_segment: number;
  prob_mask: boolean;
}

/** Segment boundaries 0 = b_0 < … < b_K = n, and which tokens are cutpoints (π < τ). */
export function mcBoundaries(logprobs: number[], p: McValueParams): { bounds: number[]; cut: boolean[] } {
  const n = logprobs.length;
  const cut = logprobs.map((lp) => Math.exp(lp) < p.cutpoint_tau);
  const set = new Set([0, n]);
  if (p.segments === 'fixed') for (let t = p.segment_len; t < n; t += p.segment_len) set.add(t);
  else {
    let k = 0;
    cut.forEach((c, t) => {
      if (c && t > 0 && k++ % p.cutpoints_per_segment === 0) set.add(t);
    });
  }
  return { bounds: [...set].sort((a, b) => a - b), cut };
}

/** Â per token from the boundaries' values (values[k] = V̂(bounds[k])). */
export function segmentAdvantages(n: number, bounds: number[], values: number[], cut: boolean[], probMask: boolean): number[] {
  const out = new Array<number>(n).fill(0);
  for (let k = 0; k + 1 < bounds.length; k++) {
    const a = values[k + 1] - values[k];
    for (let t = bounds[k]; t < bounds[k + 1]; t++) out[t] = probMask && !cut[t] ? 0 : a;
  }
  return out;
}

async function prepare(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared> {
  if (!ctx.model || !ctx.reward) throw new Error('mc_value needs the policy and the reward in its prepare context');
  const p = ctx.cfg.credit.mc_value;
  const t0 = performance.now();
  let rollouts = 0;
  const adv: number[][] = [];
  for (const e of episodes) {
    const { bounds, cut } = mcBoundaries(e.logprobs, p);
    const rows = await estimateEpisode(
      ctx.sampler ?? ctx.model,
      ctx.tokenizer,
      { episode: e.index, example: e.example, promptIds: e.promptIds, ids: e.ids, reward: e.reward.total },
      bounds,
      {
        rollouts: p.rollouts,
        temperature: ctx.cfg.grpo.temperature,
        topP: ctx.cfg.grpo.top_p,
        maxNewTokens: ctx.cfg.grpo.max_new_tokens,
        seed: childSeed(ctx.cfg.seed, 'mc_value'),
        step: ctx.step,
        reward: ctx.reward,
        stopped: () => !!ctx.signal?.aborted,
      },
    );
    if (!rows)
      return {
        batch: tokenAdvantageBatch(
          episodes.map((x) => x.ids.map(() => 0)),
          episodes,
        ),
      };
    rollouts += (bounds.length - 1) * p.rollouts;
    adv.push(
      segmentAdvantages(
        e.ids.length,
        bounds,
        rows.map((r) => r.value),
        cut,
        p.prob_mask,
      ),
    );
  }
  return { batch: tokenAdvantageBatch(adv, episodes), metrics: { 'mc_value/rollouts': rollouts, 'mc_value/seconds': (performance.now() - t0) / 1000 } };
}

export const mcValue: CreditStrategy = { name: 'mc_value', rowLocal: true, prepare, ...PREPARED_CREDIT };
