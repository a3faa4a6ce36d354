// Monte Carlo values of completion prefixes (VinePPO's and Segment PO's estimator). For an episode with
// completion y (n tokens) and a probed position t (0 ≤ t ≤ n), V_t is the mean reward of M continuations sampled by
// the policy from the prompt plus y_<t, with the run's sampler, temperature, stop rules and max length; V_n is the
// episode's own reward. The credit of token t is δ_t = V_{t+1} − V_t.
//
// Every continuation draws from its own stream, seeded by (seed, step, episode, t, m): a probe is reproducible, whatever
// else shares its batch, and a resumed probe redoes an unfinished episode exactly. Each prefix is prefilled once and its
// keys and values copied to its M rows (generate's `repeat`); rows stop at EOS, at "</answer>" (seen across the join of
// prefix and continuation) or at their own budget, max_new_tokens − t.
import type { Example, Tokenizer } from '../core/types';
import { childSeed } from '../core/rng';
import { meanVar } from '../core/stats';
import { UserError } from '../core/errors';
import type { Transformer } from './model';
import { LocalSampler, type SampleRequest, type Sampler } from './sampling';

export { kvBytesPerRow, probeRowsPerBatch } from './sampling';

export type PositionRule = { kind: 'every' } | { kind: 'segments'; size: number } | { kind: 'cutpoints'; tau: number };

/** `every`, `segments:S` (S ≥ 1 tokens) or `cutpoints:τ` (0 < τ < 1), as `--positions` takes it. */
export function parsePositions(spec: string): PositionRule {
  if (spec === 'every') return { kind: 'every' };
  const m = /^(segments|cutpoints):(.+)$/.exec(spec);
  const v = m ? Number(m[2]) : NaN;
  if (m?.[1] === 'segments' && Number.isInteger(v) && v >= 1) return { kind: 'segments', size: v };
  if (m?.[1] === 'cutpoints' && v > 0 && v < 1) return { kind: 'cutpoints', tau: v };
  throw new UserError(
    `--positions: got ${JSON.stringify(spec)}; expected every, segments:S (S an integer ≥ 1: every S-th position) or cutpoints:τ ` +
      '(0 < τ < 1: each token whose probability is below τ, probed before and after it, as Segment PO cuts)',
  );
}

/**
 * The positions probed in a completion of n tokens, ascending, always with 0 and n. cutpoints: t and t + 1 for each
 * token t with π(y_t) < τ, so δ_t is measured exactly at the low-probability choices (SPO's cutpoints).
 */
export function probePositions(n: number, rule: PositionRule, logprobs: ArrayLike<number>): number[] {
  const set = new Set<number>([0, n]);
  if (rule.kind === 'every') for (let t = 1; t < n; t++) set.add(t);
  else if (rule.kind === 'segments') for (let t = rule.size; t < n; t += rule.size) set.add(t);
  else
    for (let t = 0; t < n; t++)
      if (Math.exp(logprobs[t]) < rule.tau) {
        set.add(t);
        set.add(t + 1);
      }
  return [...set].sort((a, b) => a - b);
}

export interface ProbeEpisode {
  /** the episode's index in its step */
  episode: number;
  example: Example;
  promptIds: number[];
  /** completion token ids */
  ids: number[];
  /** the episode's reward as the run shaped it: V_n */
  reward: number;
}

export interface ProbeRow {
  episode: number;
  position: number;
  value: number;
  valueSe: number;
  rollouts: number;
  /**
   * The value from each independent half of the M continuations (m < ⌊M/2⌋, and the rest): two estimates of V_t whose
   * errors are independent, for the probe's split-half reliability and its noise-unbiased target. At t = n both are the
   * episode's reward; null with M < 2.
   */
  valueA: number | null;
  valueB: number | null;
  /**
   * The variance of each half's value as an estimate (its continuations' sample variance over their count): with it a
   * single half's δ̂² − var is unbiased for δ², which the oracle credit of the probe's ceiling is scored by. 0 at t = n
   * (the reward is known); null with fewer than 2 continuations in a half, and in tables from before it was kept.
   */
  varA?: number | null;
  varB?: number | null;
}

export interface EstimateOptions {
  rollouts: number;
  temperature: number;
  topP: number;
  maxNewTokens: number;
  seed: number;
  step: number;
  /** the reward of a whole completion (its text without the prefill, and its length in tokens), as the run shapes it */
  reward(text: string, example: Example, length: number): number;
  /** continuation rows per generate() call */
  rowsPerBatch?: number;
  /** continuations done so far in this episode (after each batch) */
  onRows?(done: number): void;
  /** checked between batches: a stop leaves the episode unfinished */
  stopped?(): boolean;
}

const STOP = '</answer>';

/** The seed of continuation m of position t of an episode. */
export function probeSeed(seed: number, step: number, episode: number, t: number, m: number): number {
  return childSeed(seed, `probe/${step}/${episode}/${t}/${m}`);
}

/** Mean and standard error (sample sd / √M) of M rewards. */
export function meanSe(xs: number[]): { mean: number; se: number } {
  const { mean, var: v } = meanVar(xs);
  return { mean, se: Math.sqrt(v / xs.length) };
}

/** The most continuations a position may take: V_t's standard error falls as 1/√M, so 4,096 already pins it to a
 *  sixty-fourth of the reward's spread; more is a typo, not a measurement. */
export const PROBE_MAX_ROLLOUTS = 4096;

/**
 * V_t for each of `positions` of one episode; null when `stopped()` ended it before all were done. The M continuations
 * of every open position go to the sampler in one call: a model runs them here (LocalSampler: buckets of prefixes whose
 * rows fit the KV cache's budget, `rowsPerBatch`), a server samples them concurrently (serving/client.ts).
 * Continuation m of position t draws from its own seeded stream, so how the rows are batched never changes a value.
 */
export async function estimateEpisode(
  model: Transformer | Sampler,
  tokenizer: Tokenizer,
  ep: ProbeEpisode,
  positions: number[],
  o: EstimateOptions,
): Promise<ProbeRow[] | null> {
  const n = ep.ids.length;
  const M = o.rollouts;
  if (!Number.isInteger(M) || M < 1 || M > PROBE_MAX_ROLLOUTS)
    throw new UserError(`--rollouts: got ${M}; expected an integer from 2 to ${PROBE_MAX_ROLLOUTS} continuations per position`);
  const sampler = 'sample' in model ? model : new LocalSampler(model, tokenizer, o.rowsPerBatch);
  const open = positions.filter((t) => t < n);
  // positions ascending: the sampler batches neighbours, whose prefixes are close in length
  const reqs: SampleRequest[] = open.map((t) => ({
    prefix: [...ep.promptIds, ...ep.ids.slice(0, t)],
    // the prefix's last tokens, where a "</answer>" split across the join would start
    tail: ep.ids.slice(Math.max(0, t - STOP.length), t),
    seeds: Array.from({ length: M }, (_, m) => probeSeed(o.seed, o.step, ep.episode, t, m)),
    // a row stops at its own budget, max_new_tokens − t, as the completion it continues would have
    maxNewTokens: o.maxNewTokens - t,
  }));
  if (o.stopped?.()) return null;
  const out = await sampler.sample(
    reqs,
    { temperature: o.temperature, topP: o.topP, eosIds: tokenizer.eosIds ?? [tokenizer.eosId], stop: [STOP] },
    { stop: o.stopped, progress: o.onRows },
  );
  if (!out) return null;
  const rewards = new Map<number, number[]>();
  open.forEach((t, q) =>
    rewards.set(
      t,
      out[q].map((c) => {
        const full = [...ep.ids.slice(0, t), ...c.ids];
        return o.reward(tokenizer.decode(full), ep.example, full.length);
      }),
    ),
  );
  const half = Math.floor(M / 2);
  const avg = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  return positions.map((t) => {
    if (t === n) return { episode: ep.episode, position: t, value: ep.reward, valueSe: 0, rollouts: 0, valueA: ep.reward, valueB: ep.reward, varA: 0, varB: 0 };
    const r = rewards.get(t)!;
    const { mean, se } = meanSe(r);
    // continuations come back in seed order m = 0…M − 1
    const [valueA, valueB] = half >= 1 ? [avg(r.slice(0, half)), avg(r.slice(half))] : [null, null];
    const [varA, varB] = [meanVariance(r.slice(0, half)), meanVariance(r.slice(half))];
    return { episode: ep.episode, position: t, value: mean, valueSe: se, rollouts: M, valueA, valueB, varA, varB };
  });
}

/** The unbiased variance of a mean of independent draws, s²/m; null below 2 draws. */
export function meanVariance(xs: readonly number[]): number | null {
  const m = xs.length;
  if (m < 2) return null;
  const mu = xs.reduce((a, x) => a + x, 0) / m;
  return xs.reduce((a, x) => a + (x - mu) ** 2, 0) / (m - 1) / m;
}
