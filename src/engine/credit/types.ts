// The pluggable credit-strategy interface (design.md#semantics "Credit strategies"). A strategy turns a batch of
// episodes into per-token weights w; the trainer sets Â = A_i·w. Arrays are per episode, over completion
// tokens; `mask` (1 = valid) marks padding — invalid tokens always get w = 0 and do not count in n_i.
import { z } from 'zod';
import { creditShape, flattenCredit, type BlockKey, type CreditSection } from './catalog';
import type { ScaleRewards } from './advantages';
import type { Example, RewardResult, Section, Task, Tokenizer, TokenSpan } from '../core/types';

/**
 * One of a batch's per-row inputs beyond the log-probs: a row of numbers per episode, one per completion token (null
 * where an episode has none, as CAL's span of a solved episode), or one number per episode.
 */
export type RowInput = (number[] | null)[] | number[];

/**
 * What a strategy's weights read, one row per episode. Beside the log-probs, entropies and sections, a strategy's own
 * inputs (from its prepare(), its fromOutputs() or its head's read()) go under any name of its choosing: the trainer pads
 * and slices every one of them by rows in one place (padRowInputs, sliceRows), so a new strategy adds no field here. The
 * named ones below are the bundled strategies' inputs, documented.
 */
export interface CreditBatch {
  logprobs: number[][];
  entropies: number[][];
  sections: Section[][];
  mask?: number[][];
  [input: string]: RowInput | Section[][] | undefined;
  /** a_t: attention paid to token t by the answer tokens, summed over them, averaged over last-layer heads */
  answerAttention?: number[][];
  /** ρ_t from the importance network (reward_variance), and ρ_0 at the last prompt token per episode */
  importance?: number[][];
  importancePrompt?: number[];
  /** z_t of a learned attribution head (attribution) */
  attributionLogits?: number[][];
  /** CAL: 1 on the tokens of the oracle's error span; null for episodes without a span */
  spanMask?: (number[] | null)[];
  /** CAL with scale group_std: per episode, what negative_reward is divided by (group std + 1e-4, see cal.ts) */
  calDivisor?: number[];
  /**
   * Â per token, set by a strategy's prepare() where the method defines it directly rather than as A_i·w (ktae's A_i + KT,
   * otb's r_i − B_t, reward_decomposition's per-part advantages, gtpo's paper form, mc_value's segment advantages)
   */
  tokenAdvantages?: number[][];
  /** the weight logged beside tokenAdvantages: Â/A_i (1 where A_i = 0: the weight column must be finite) */
  tokenWeights?: number[][];
}

/** What a strategy's `prepare` hook sees of each episode of the step (in batch order; groups are consecutive). */
export interface EpisodeView {
  index: number;
  /** index of the episode's group (same prompt) */
  group: number;
  example: Example;
  /** text the prompt ends with that belongs to the completion's format (e.g. "<think>") */
  prefill: string;
  completion: string;
  /** completion tokens with character offsets in `completion` */
  tokens: TokenSpan[];
  promptIds: number[];
  ids: number[];
  reward: RewardResult;
  success: boolean;
  /** episode advantage A_i */
  advantage: number;
  /** per completion token: the sampler's log-prob, the entropy and Σπ² of its distribution (absent: not seen), the section */
  logprobs: number[];
  entropies: number[];
  probSq?: number[];
  sections: Section[];
  /** the completion stopped at max_new_tokens */
  truncated?: boolean;
}

/**
 * What a strategy's prepare() reads of the run's config: its credit section, the sampling settings its rollouts use, the
 * advantage normalisation, the reward scheme and the seed. Named here (a run's whole config satisfies it): the config's
 * type is built from the strategy catalog, above this folder.
 */
export interface StrategyRunConfig {
  readonly seed: number;
  readonly credit: CreditSection;
  readonly grpo: { readonly max_new_tokens: number; readonly temperature: number; readonly top_p: number; readonly scale_rewards: ScaleRewards };
  readonly task: { readonly reward: 'grpo_zero' | 'tinyzero' };
}

export interface PrepareContext {
  step: number;
  runDir: string;
  cfg: StrategyRunConfig;
  task: Task;
  tokenizer: Tokenizer;
  log(level: 'info' | 'warn', message: string): void;
  /** aborted when the run is asked to stop: long waits (oracle requests and their back-off) end at once */
  signal?: AbortSignal;
  /** the policy that sampled the episodes (mc_value samples continuations from it) */
  model?: import('../model/model').Transformer;
  /** where the run samples (rollout.server), when not by `model`: a strategy that samples (mc_value) samples there */
  sampler?: import('../model/sampling').Sampler | null;
  /** the reward of a whole completion as the run shapes it (text without the prefill, its length in tokens) */
  reward?(text: string, example: Example, length: number): number;
}

/** Extra per-step inputs a strategy computes before the loss (oracle spans, importance network outputs). */
export interface Prepared {
  batch?: Partial<CreditBatch>;
  /** per episode, the text logged in the episode table's oracle_span column (null when unused) */
  oracleSpans?: (string | null)[];
  /** added to this step's metrics.jsonl row (e.g. cal/oracle_calls) */
  metrics?: Record<string, number>;
}

/**
 * A trainable credit head (seed doc 000's attribution head): its parameters train with the policy and are checkpointed. It
 * plugs into the taped pass of every micro-batch: `weigh` gives the rows' weights, differentiable in the head, and
 * `objective` the surrogate term whose gradient trains it.
 */
export interface CreditHead {
  readonly params: Map<string, import('@tensorflow/tfjs').Variable>;
  /**
   * From the training pass's outputs (its `hidden`) of some rows and their mask [rows, C]: w [rows, C], differentiable in
   * the head's parameters (nothing is read back inside the tape).
   */
  weigh(out: ModelOutputs, mask: import('@tensorflow/tfjs').Tensor2D): import('@tensorflow/tfjs').Tensor2D;
  /**
   * What the credit batch gets from the head (attributionLogits z) for `weights` to read, from a pass without a tape over
   * the same rows (read asynchronously: a GPU backend has no synchronous read).
   */
  read(out: ModelOutputs): Promise<Partial<CreditBatch>>;
  /** the term added to the rows' surrogate, whose gradient w.r.t. the head is its objective's */
  objective(x: HeadStepInput): import('@tensorflow/tfjs').Scalar;
  dispose(): void;
}

/** What a head's objective sees of the rows of one micro-batch. */
export interface HeadStepInput {
  /** `weigh`'s w [rows, C] */
  w: import('@tensorflow/tfjs').Tensor2D;
  mask: import('@tensorflow/tfjs').Tensor2D;
  /** A_i per episode [rows, 1] */
  adv: import('@tensorflow/tfjs').Tensor2D;
  /** ℓ, detached [rows][C] */
  logprobs: number[][];
  /** the loss's aggregation coefficients c of these rows (loss = Σ c·loss_tok) */
  c: number[][];
  /** dLoss/dÂ per token from the policy loss (grpo.ts gradAdv) */
  gradAdv: number[][];
}

/** α = w / n_i per episode (n_i its valid tokens): the token log's attribution column of a head's weights. */
export function alphaOf(weights: number[][], mask: number[][]): number[][] {
  return weights.map((row, i) => {
    const n = mask[i].reduce((a, b) => a + b, 0);
    return row.map((w) => (n ? w / n : 0));
  });
}

type Credit = CreditSection;
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;

/**
 * The `credit:` block flattened to what strategies read (the seeds' parameter names): every strategy's top-level
 * parameter and its block's keys, as the catalog declares them (catalog.ts, flattenCredit).
 */
export type CreditParams = Omit<Credit, 'strategy' | BlockKey> & UnionToIntersection<Credit[BlockKey]>;

/** Every parameter at its default (from the catalog's own shapes, as the config's credit section is built). */
export const DEFAULT_CREDIT_PARAMS: CreditParams = creditParams(z.object(creditShape()).parse({}) as Credit);

export function creditParams(credit: Credit): CreditParams {
  return flattenCredit(credit) as CreditParams;
}

/** What the training forward pass returns beside the log-probs, when the strategy's catalog entry needs it. */
export interface ModelOutputs {
  /** last layer's attention probabilities [B, heads, T, T] (prompt + completion positions) */
  attention?: import('@tensorflow/tfjs').Tensor4D;
  /** final hidden states that predicted each completion token [B, C, d] */
  hidden?: import('@tensorflow/tfjs').Tensor3D;
}

export interface OutputsContext {
  promptLen: number;
  completionLen: number;
  sections: Section[][];
  mask: number[][];
}

/** A strategy's behaviour. Its name, parameters and needs are its entry in catalog.ts. */
export interface CreditStrategy {
  readonly name: string;
  /**
   * The weights (and fromOutputs) of episode i depend on episode i's own inputs only, not on the rest of the batch. Such a
   * strategy's update runs micro-batches (grpo.gradient_accumulation_steps) in one pass, each slice weighted alone; others
   * take a first pass over the whole batch. Tested: the micro-batched step equals the one-pass step.
   */
  readonly rowLocal?: boolean;
  /** per-step inputs taken from the training forward pass (attention_credit's a_t from the attention rows) */
  fromOutputs?(out: ModelOutputs, ctx: OutputsContext): Promise<Partial<CreditBatch>>;
  /** the strategy's own step metrics (metrics.jsonl), from the weights it gave */
  stepMetrics?(weights: number[][], mask: number[][]): Record<string, number>;
  /** constant (no-gradient) weights; trainable strategies return their current weights here */
  weights(batch: CreditBatch, params: CreditParams): number[][];
  /** async per-step preparation (CAL's oracle calls, reward_variance's importance network); runs before the loss */
  prepare?(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared>;
  /**
   * Strategies that set Â directly instead of A_i·w (CAL: negative_reward on the span, 0 elsewhere). The logged
   * `weight` is still `weights()`. Callers go through effectiveAdvantages() below.
   */
  effectiveAdvantages?(batch: CreditBatch, advantages: number[], params: CreditParams): number[][];
  /** trainable strategies create their head here */
  createHead?(dModel: number, seed: number, params: CreditParams): CreditHead;
}

export function validMask(batch: CreditBatch): number[][] {
  return batch.mask ?? batch.logprobs.map((row) => row.map(() => 1));
}

/** n_i · softmax_t(x / temp) over the valid tokens of one episode (entropy_weighted, reward_variance). */
export function scaledSoftmax(x: number[], mask: number[], temp: number): number[] {
  let max = -Infinity;
  let n = 0;
  for (let t = 0; t < x.length; t++)
    if (mask[t]) {
      n++;
      max = Math.max(max, x[t] / temp);
    }
  if (n === 0) return x.map(() => 0);
  let z = 0;
  const e = x.map((v, t) => (mask[t] ? Math.exp(v / temp - max) : 0));
  for (const v of e) z += v;
  return e.map((v) => (n * v) / z);
}

/** What prepare() returns for a strategy that sets Â per token: Â and its weight Â/A_i (1 where A_i = 0). */
export function tokenAdvantageBatch(adv: number[][], episodes: readonly { advantage: number }[]): Partial<CreditBatch> {
  return {
    tokenAdvantages: adv,
    tokenWeights: adv.map((row, i) => row.map((a) => (episodes[i].advantage !== 0 ? a / episodes[i].advantage : 1))),
  };
}

/** A prepare()-set field of the batch, masked (a strategy that sets its Â in prepare() reads them here). */
export function preparedRows(batch: CreditBatch, key: 'tokenAdvantages' | 'tokenWeights'): number[][] {
  const rows = batch[key];
  if (!rows) throw new Error(`this strategy sets ${key} in prepare(); its batch has none`);
  const mask = validMask(batch);
  return mask.map((m, i) => m.map((v, t) => (v ? (rows[i][t] ?? 0) : 0)));
}

/** The members of a strategy whose Â comes from prepare(): weights and effectiveAdvantages read what it set. */
export const PREPARED_CREDIT = {
  weights: (batch: CreditBatch) => preparedRows(batch, 'tokenWeights'),
  effectiveAdvantages: (batch: CreditBatch) => preparedRows(batch, 'tokenAdvantages'),
} as const;

/**
 * What a strategy gives a batch: its weights w, and the effective advantages Â it trains with: its own Â where it sets
 * one (CAL, the strategies whose Â comes from prepare()), else Â = A_i·w on valid tokens and 0 on padding. The GRPO step,
 * the importer and the probe all score through here, so the three cannot disagree on what a token was told.
 */
export function effectiveAdvantages(
  strategy: CreditStrategy,
  batch: CreditBatch,
  advantages: readonly number[],
  params: CreditParams,
): { weights: number[][]; effAdv: number[][] } {
  const weights = strategy.weights(batch, params);
  const effAdv = strategy.effectiveAdvantages
    ? strategy.effectiveAdvantages(batch, advantages as number[], params)
    : scaledAdvantages(batch, advantages, weights);
  return { weights, effAdv };
}

/** Â = A·w on the valid tokens, 0 elsewhere: every strategy's Â unless it sets its own (a group-level method). */
export function scaledAdvantages(batch: CreditBatch, advantages: readonly number[], weights: number[][]): number[][] {
  const mask = validMask(batch);
  return weights.map((row, i) => row.map((w, t) => (mask[i][t] ? advantages[i] * w : 0)));
}

/**
 * A strategy's own inputs (everything but entropies, sections and mask, which the trainer builds itself) padded to
 * `width` tokens: token rows are padded with 0, per-episode numbers and null rows are kept as they are.
 */
export function padRowInputs(inputs: Partial<CreditBatch>, width: number): Record<string, RowInput> {
  const out: Record<string, RowInput> = {};
  for (const [k, v] of Object.entries(inputs)) {
    if (v === undefined || k === 'entropies' || k === 'sections' || k === 'mask' || k === 'logprobs') continue;
    const rows = v as RowInput;
    out[k] = rows.some((r) => Array.isArray(r))
      ? (rows as (number[] | null)[]).map((r) => r && [...r, ...new Array<number>(Math.max(0, width - r.length)).fill(0)])
      : rows;
  }
  return out;
}

/** Rows [a, e) of every per-row input of a batch: each is one entry per episode, so each is sliced alike. */
export function sliceRows<T extends Partial<CreditBatch>>(batch: T, a: number, e: number): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(batch)) if (v !== undefined) out[k] = (v as unknown[]).slice(a, e);
  return out as T;
}
