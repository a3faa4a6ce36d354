// One file although long: the stages share the Batch and Update types and read top to bottom as one step.
// One GRPO step (design.md#semantics) as a pipeline of named stages, each a function of typed inputs:
//   sample → advantages → prepare (the strategy's async inputs) → update (credit, loss and gradient over micro-batches,
//   PPO epochs) → metrics.
// Rewards are scored as each episode is sampled (rollout.ts scoreEpisode). grpoStep below reads the stages in order.
import { creditConcentration } from '../analysis/concentration';
import * as tf from '@tensorflow/tfjs';
import type { MetricsRow } from '../../protocol';
import { getStrategy, type CreditBatch } from '../credit';
import {
  alphaOf,
  creditParams,
  effectiveAdvantages,
  padRowInputs,
  sliceRows,
  type CreditHead,
  type CreditParams,
  type EpisodeView,
  type Prepared,
} from '../credit/types';
import { childSeed, makeRng } from '../core/rng';
import { meanStd } from '../core/stats';
import type { Adam } from '../model/optim';
import { clipByGlobalNorm } from '../model/optim';
import { readsSync } from '../model/backend';
import type { Transformer } from '../model/model';
import { advantages } from '../credit/advantages';
import { aggregationWeights, policyLossAndGrad, type PolicyLossResult } from './grpo';
import { lossOptions, lossSpec } from '../losses/catalog';
import { accumulateGrads, concatRows, microBatchRanges } from './micro_batch';
import { completionLogprobs, policyBatch, rollout, slicePolicyBatch, type Episode, type PolicyBatch } from '../session/rollout';
import { shapedReward, shapeRewards } from '../session/reward';
import type { Session } from '../session/session';
import { gradNorms, logsTables, type TokenLog } from '../session/token_log';
import { pick, renameGrads, trainables } from './steps';

/** A step abandoned before its update because the run was asked to stop while the step waited. */
export class StepCancelled extends Error {
  constructor(readonly step: number) {
    super(`step ${step} cancelled by a stop`);
  }
}

export interface GrpoStepResult {
  row: MetricsRow;
  episodes: Episode[];
  tok: TokenLog;
}

export interface GrpoStepOptions {
  session: Session;
  optimizer: Adam;
  step: number;
  /** the frozen KL reference (grpo.kl_beta > 0) */
  ref?: Transformer | null;
  /** a trainable strategy's head (attribution) */
  head?: CreditHead | null;
  runDir?: string;
  log?: (l: 'info' | 'warn', m: string) => void;
  /** a Stop: the step is abandoned (StepCancelled) if it fires while the step waits */
  signal?: AbortSignal;
}

type Strategy = ReturnType<typeof getStrategy>;

/** One GRPO step: rollouts, rewards, advantages, the strategy's weights, the PPO-clip update. */
export async function grpoStep(o: GrpoStepOptions): Promise<GrpoStepResult> {
  const { session: s, step } = o;
  const log = o.log ?? (() => {});
  const strategy = getStrategy(s.cfg.credit.strategy);
  const t0 = performance.now();
  const drawn = await collectGroups(s, step, log);
  const { episodes } = drawn;
  const genSeconds = (performance.now() - t0) / 1000;
  const adv = advantages(
    episodes.map((e) => e.reward.total),
    s.cfg.grpo.group_size,
    s.cfg.grpo.scale_rewards,
  );
  const prepared = await prepare(strategy, s, episodes, adv, { step, runDir: o.runDir ?? '', log, signal: o.signal });
  if (o.signal?.aborted) throw new StepCancelled(step);
  const u = await update({ s, opt: o.optimizer, ref: o.ref ?? null, head: o.head ?? null, strategy, episodes, adv, prepared, log, step });
  const row = metrics(episodes, u, { step, genSeconds, seconds: (performance.now() - t0) / 1000, groupSize: s.cfg.grpo.group_size });
  row.truncated_frac = episodes.filter((e) => e.truncated).length / episodes.length;
  if (s.cfg.grpo.overlong_buffer) row.overlong_penalty_mean = episodes.reduce((a, e) => a + (e.overlongPenalty ?? 0), 0) / episodes.length;
  if (s.cfg.grpo.dynamic_sampling) {
    row.groups_drawn = drawn.groupsDrawn;
    row.resampled_frac = drawn.resampledFrac;
  }
  Object.assign(row, creditByTokenType(episodes, adv, u.credit.logprobs));
  Object.assign(
    row,
    creditConcentration(
      u.credit.effAdv,
      episodes.map((e) => e.ids.length),
    ),
  );
  if (u.realizedSeconds !== undefined) row.realized_seconds = u.realizedSeconds;
  if (strategy.stepMetrics) Object.assign(row, strategy.stepMetrics(u.credit.weights, u.mask));
  if (prepared.metrics) Object.assign(row, prepared.metrics);
  const tok: TokenLog = {
    logprobs: u.credit.logprobs,
    weights: u.credit.weights,
    effAdv: u.credit.effAdv,
    adv,
    attribution: o.head ? alphaOf(u.credit.weights, u.mask) : undefined,
    importance: u.importance,
    refLogratio: u.refLogratio,
    isWeight: u.isWeight,
    clipped: u.clipped,
    // on the sampling distribution, whose Σπ² the sampler saw (on-policy it is the policy the loss differentiates)
    gradNorm: gradNorms(
      u.credit.effAdv,
      episodes.map((e) => e.sampleLogprobs),
      episodes.map((e) => e.probSq),
      s.cfg.grpo.temperature,
    ),
    oracleSpans: prepared.oracleSpans,
    realized: u.realized,
  };
  return { row, episodes, tok };
}

// ---- sample ----

/**
 * The step's groups, their rewards shaped (grpo.overlong_buffer): the shaped reward is the episode's reward from here on
 * (advantages, the episode table, the metrics). With grpo.dynamic_sampling (DAPO; veRL's filter_groups with DAPO's metric
 * acc) the groups whose rollouts are all correct or all wrong by the task's success are dropped, as DAPO does: filtering
 * on the total reward would keep a group whose only differences are the format part or the overlong penalty. More
 * prompts are drawn, each draw from its own
 * seeded stream, until prompts_per_step groups are kept or max_resample_batches more draws were made; a step that
 * finds none keeps its first draw (its update is then zero) and says so.
 */
async function collectGroups(
  s: Session,
  step: number,
  log: (l: 'info' | 'warn', m: string) => void,
): Promise<{ episodes: Episode[]; groupsDrawn: number; resampledFrac: number }> {
  const g = s.cfg.grpo;
  const G = g.group_size;
  const draw = async (k: number) => {
    const eps = await sample(s, step, k);
    shapeRewards(s.cfg, eps);
    return eps;
  };
  const first = await draw(0);
  if (!g.dynamic_sampling) return { episodes: first, groupsDrawn: first.length / G, resampledFrac: 0 };
  const kept: { eps: Episode[]; draw: number }[] = [];
  let groupsDrawn = 0;
  for (let k = 0; k <= g.max_resample_batches && kept.length < g.prompts_per_step; k++) {
    const eps = k === 0 ? first : await draw(k);
    for (let i = 0; i < eps.length / G && kept.length < g.prompts_per_step; i++) {
      groupsDrawn++;
      const group = eps.slice(i * G, (i + 1) * G);
      if (rewardsDiffer(group.map((e) => Number(e.success)))) kept.push({ eps: group, draw: k });
    }
  }
  if (!kept.length) {
    log('warn', `step ${step}: dynamic sampling found no group with both correct and wrong answers in ${groupsDrawn} groups; training on the first draw`);
    return { episodes: first, groupsDrawn, resampledFrac: 0 };
  }
  if (kept.length < g.prompts_per_step)
    log('info', `step ${step}: dynamic sampling kept ${kept.length} of ${g.prompts_per_step} groups after ${groupsDrawn} drawn (grpo.max_resample_batches)`);
  return { episodes: kept.flatMap((k) => k.eps), groupsDrawn, resampledFrac: kept.filter((k) => k.draw > 0).length / kept.length };
}

/**
 * One draw: prompts_per_step prompts drawn with the step's seed, each sampled group_size times, rewards scored as
 * sampled; draw 0 is the step's own stream (the same as before resampling), each later draw a stream of its own.
 */
export async function sample(s: Session, step: number, draw = 0): Promise<Episode[]> {
  const g = s.cfg.grpo;
  const rng = makeRng(childSeed(s.cfg.seed, draw === 0 ? `grpo-${step}` : `grpo-${step}-draw-${draw}`));
  const prompts = pick(rng, s.task.train, g.prompts_per_step);
  const examples = prompts.flatMap((ex) => Array.from({ length: g.group_size }, () => ex));
  return rollout(s.model, s.tokenizer, s.task, examples, {
    maxNewTokens: g.max_new_tokens,
    temperature: g.temperature,
    topP: g.top_p,
    rng,
    sampler: s.rolloutSampler,
  });
}

// ---- prepare ----

/** The strategy's per-step inputs computed before the loss (CAL's oracle spans, reward_variance's ρ); {} for most. */
export async function prepare(
  strategy: Strategy,
  s: Session,
  episodes: Episode[],
  adv: number[],
  ctx: { step: number; runDir: string; log: (l: 'info' | 'warn', m: string) => void; signal?: AbortSignal },
): Promise<Prepared> {
  if (!strategy.prepare) return {};
  const G = s.cfg.grpo.group_size;
  const views = episodes.map((e, i): EpisodeView => ({
    index: i,
    group: Math.floor(i / G),
    example: e.example,
    prefill: s.task.prefill,
    completion: e.text,
    tokens: e.tokens,
    promptIds: e.promptIds,
    ids: e.ids,
    reward: e.reward,
    success: e.success,
    advantage: adv[i],
    logprobs: e.sampleLogprobs,
    entropies: e.entropies,
    probSq: e.probSq,
    sections: e.sections,
    truncated: e.truncated,
  }));
  return strategy.prepare(views, {
    ...ctx,
    cfg: s.cfg,
    task: s.task,
    tokenizer: s.tokenizer,
    model: s.model,
    sampler: s.rolloutSampler,
    reward: shapedReward(s),
  });
}

// ---- update ----

interface UpdateInputs {
  s: Session;
  opt: Adam;
  ref: Transformer | null;
  head: CreditHead | null;
  strategy: Strategy;
  episodes: Episode[];
  adv: number[];
  prepared: Prepared;
  log: (l: 'info' | 'warn', m: string) => void;
  step: number;
}

/** The credit of some rows: their log-probs, the strategy's weights and the effective advantages Â. */
export interface Credit {
  logprobs: number[][];
  weights: number[][];
  effAdv: number[][];
}

interface Update {
  credit: Credit;
  mask: number[][];
  importance?: number[][];
  loss: number;
  gradNorm: number;
  kl: number;
  clipFrac: number;
  skipped: number;
  /** a trainable head over several epochs: mean |w_last − w_0| over valid tokens, how far its weights moved */
  headDrift?: number;
  /** per token, mean over the PPO epochs: the importance weight on its gradient, and the share of epochs that cut it */
  isWeight: number[][];
  clipped: number[][];
  /** logging.realized_credit: log π_new − log π_old per token, and the seconds its forward pass took */
  realized?: number[][];
  /** logging.ref_logratio: log π(y_t) − log π_ref(y_t) per token, the sampling policy against the reference */
  refLogratio?: number[][];
  realizedSeconds?: number;
}

/** What every pass over the batch shares: the batch, the strategy's padded per-row inputs, the loss's constants. */
interface Batch {
  x: UpdateInputs;
  pb: PolicyBatch;
  params: CreditParams;
  trainable: Map<string, tf.Variable>;
  /** the loss's aggregation coefficients of the whole batch (token_mean divides by every token of it) */
  c: number[][];
  refLogprobs?: number[][];
  /** the per-row inputs the strategy reads besides log-probs and model outputs, padded to the batch's width */
  rows: Partial<CreditBatch> & Pick<CreditBatch, 'entropies' | 'sections' | 'mask'>;
  /**
   * Read each micro-batch's log-probs and outputs in a pass without a tape before its taped pass (readAhead), instead
   * of inside the tape: on a backend without synchronous reads (webgpu), and for a strategy that reads model outputs
   * (attention_credit) or a head (attribution), whose reads are asynchronous. The taped pass then gives the same values
   * (the same weights and kernels), so the update is the one the in-tape read gives; it costs one forward pass more.
   */
  readAhead: boolean;
}

/** A [rows, C] tensor's values as rows, read asynchronously (a GPU backend has no synchronous read); disposes it. */
async function readRows(t: tf.Tensor2D): Promise<number[][]> {
  try {
    return (await t.array()) as number[][];
  } finally {
    t.dispose();
  }
}

/** What a micro-batch's pass without a tape read: its log-probs, the strategy's outputs and a head's. */
interface ReadAhead {
  lp: number[][];
  outputs: Partial<CreditBatch>;
}

/** Rows [start, end) of the batch for `f`: the batch itself where they are all of it, else a slice disposed after. */
async function inSlice<T>(pb: PolicyBatch, start: number, end: number, f: (mb: PolicyBatch) => T | Promise<T>): Promise<T> {
  const mb = start === 0 && end === pb.mask.length ? pb : slicePolicyBatch(pb, start, end);
  try {
    return await f(mb);
  } finally {
    if (mb !== pb) mb.dispose();
  }
}

/**
 * Each range's rows through the policy without a tape, `needs` the outputs kept beside the log-probs: `each` reads what
 * it wants of a range's outputs (they can be large, so they are read and freed range by range), and the log-probs of
 * every range stay on the device and come back in one read (readRowsAll): one download per pass over the batch, not one
 * per micro-batch.
 */
async function logprobsAhead(
  b: Batch,
  ranges: [number, number][],
  needs: Parameters<typeof completionLogprobs>[3],
  each?: (out: ReturnType<typeof completionLogprobs>, start: number, end: number) => Promise<void>,
): Promise<number[][][]> {
  const lps: tf.Tensor2D[] = [];
  try {
    for (const [start, end] of ranges)
      await inSlice(b.pb, start, end, async (mb) => {
        // in a scope, keeping only the outputs: outside a tape nothing else frees the forward pass's intermediates, and
        // a sweep that ran attention_credit or attribution in one process lost megabytes a step until wasm's heap failed
        const out = tf.tidy(() => {
          const o = completionLogprobs(b.x.s.model, mb, b.x.s.cfg.grpo.temperature, needs);
          return Object.fromEntries(Object.entries(o).filter(([, t]) => t !== undefined)) as typeof o;
        });
        lps.push(out.logp);
        try {
          await each?.(out, start, end);
        } finally {
          tf.dispose([out.attention, out.hidden, out.entropy].filter((t) => t !== undefined));
        }
      });
    return await readRowsAll(lps);
  } finally {
    tf.dispose(lps);
  }
}

/**
 * What each range's taped pass will need to read, read ahead of all of them (logprobsAhead): its log-probs, the
 * strategy's outputs and a head's. The weights do not change within a pass, so reading ahead of all the taped passes
 * reads what reading ahead of each would.
 */
async function readAhead(b: Batch, ranges: [number, number][]): Promise<ReadAhead[]> {
  const { strategy, head } = b.x;
  const outputs: Partial<CreditBatch>[] = [];
  const lp = await logprobsAhead(b, ranges, strategy.needs, async (out, start, end) => {
    outputs.push({ ...(await outputsOf(b, out, start, end)), ...(head ? await head.read(out) : {}) });
  });
  return lp.map((rows, i) => ({ lp: rows, outputs: outputs[i] }));
}

/** Several [rows, C_i] tensors' values as rows, in one read (joined on the device); disposes them. */
async function readRowsAll(ts: tf.Tensor2D[]): Promise<number[][][]> {
  if (ts.length === 1) return [await readRows(ts[0])];
  const flat = tf.tidy(() => tf.concat(ts.map((t) => t.reshape([-1]))));
  try {
    const v = (await flat.data()) as Float32Array;
    let at = 0;
    return ts.map((t) => {
      const [n, c] = t.shape;
      const rows = Array.from({ length: n }, (_, i) => Array.from(v.subarray(at + i * c, at + (i + 1) * c)));
      at += n * c;
      return rows;
    });
  } finally {
    flat.dispose();
    tf.dispose(ts);
  }
}

/**
 * grpo.epochs_per_step PPO epochs of the clipped loss. Epoch 0 gives the credit: a row-local strategy (and the whole
 * batch in one micro-batch) weighs each micro-batch inside its own pass; any other takes a first pass without a tape
 * over the whole batch. Later epochs keep epoch 0's credit and log-probs (ℓ_old), except a trainable head's, which
 * weighs anew each epoch. The log keeps epoch 0's credit for every strategy: the weights that trained the policy on
 * policy (ρ ≡ 1), with the log-probs they were paired with, so c = Â·ℓ holds for one snapshot (the head's
 * last-epoch weights were logged before); how far the head moved after that is the metric attribution/epoch_drift.
 */
async function update(x: UpdateInputs): Promise<Update> {
  const g = x.s.cfg.grpo;
  const pb = policyBatch(
    x.episodes.map((e) => e.promptIds),
    x.episodes.map((e) => e.ids),
    x.s.tokenizer.padId,
  );
  const b: Batch = {
    x,
    pb,
    params: creditParams(x.s.cfg.credit),
    trainable: trainables(x.s, x.head),
    // TRL's mask_truncated_completions: a truncated completion's tokens weigh nothing in the loss and are not counted
    c: aggregationWeights(
      g.mask_truncated_completions ? pb.mask.map((row, i) => (x.episodes[i].truncated ? row.map(() => 0) : row)) : pb.mask,
      g.loss_agg,
      g.max_new_tokens,
    ),
    refLogprobs: await referenceLogprobs(x, pb),
    rows: creditRows(x.episodes, x.prepared, pb),
    readAhead: !readsSync() || !!x.strategy.fromOutputs || !!x.head,
  };
  const ranges = microBatchRanges(pb.mask.length, g.gradient_accumulation_steps);
  let first: Credit | null = ranges.length > 1 && !x.strategy.rowLocal ? await firstPass(b, ranges) : null;
  let credit: Credit | null = null;
  const zeros = () => pb.mask.map((row) => row.map(() => 0));
  const out: Update = {
    credit: null as unknown as Credit,
    mask: pb.mask,
    importance: b.rows.importance,
    loss: 0,
    gradNorm: 0,
    kl: 0,
    clipFrac: 0,
    skipped: 0,
    isWeight: zeros(),
    clipped: zeros(),
  };
  for (let epoch = 0; epoch < g.epochs_per_step; epoch++) {
    const pass = await epochGrads(b, ranges, first);
    credit = pass.credit;
    if (epoch === 0) first ??= pass.credit;
    const { norm, grads } = await clipByGlobalNorm(renameGrads(b.trainable, pass.grads), g.grad_clip);
    if (epoch === 0) Object.assign(out, { loss: pass.info.loss, gradNorm: norm, kl: pass.info.kl });
    // Epoch 0 runs at ρ ≡ 1, where nothing is ever clipped: the fraction is averaged over every epoch (as TRL logs
    // clip_ratio), or it would read 0 whatever the update did.
    out.clipFrac += pass.info.clipFrac / g.epochs_per_step;
    for (let i = 0; i < pb.mask.length; i++)
      for (let t = 0; t < pb.mask[i].length; t++) {
        out.isWeight[i][t] += pass.isWeight[i][t] / g.epochs_per_step;
        out.clipped[i][t] += pass.cut[i][t] / g.epochs_per_step;
      }
    if (!Number.isFinite(pass.info.loss) || !Number.isFinite(norm)) {
      out.skipped++;
      x.log(
        'warn',
        `step ${x.step}: non-finite ${Number.isFinite(pass.info.loss) ? 'gradient norm' : 'loss'} (loss=${pass.info.loss}, grad_norm=${norm}); update skipped`,
      );
    } else {
      x.opt.apply(b.trainable, grads);
    }
    tf.dispose(Object.values(grads));
  }
  const lg = x.s.cfg.logging;
  // only where the step's tables are written: the column is all the measurement is for
  if (lg.realized_credit && logsTables(lg, x.step)) {
    const t0 = performance.now();
    out.realized = await realizedCredit(b, ranges, first!.logprobs);
    out.realizedSeconds = (performance.now() - t0) / 1000;
  }
  if (b.refLogprobs && x.s.cfg.logging.ref_logratio && logsTables(lg, x.step))
    out.refLogratio = first!.logprobs.map((row, i) => row.map((v, t) => (pb.mask[i][t] ? v - b.refLogprobs![i][t] : 0)));
  pb.dispose();
  out.credit = first!;
  if (x.head && g.epochs_per_step > 1) out.headDrift = meanAbsChange(first!.weights, credit!.weights, pb.mask);
  return out;
}

/** The reference's log-probs of the step's tokens: for the KL penalty, and for the ref_logratio column where the step's tables are written. */
async function referenceLogprobs(x: UpdateInputs, pb: PolicyBatch): Promise<number[][] | undefined> {
  const { grpo: g, logging: lg } = x.s.cfg;
  if (!x.ref || !(g.kl_beta > 0 || (lg.ref_logratio && logsTables(lg, x.step)))) return undefined;
  return readRows(tf.tidy(() => completionLogprobs(x.ref!, pb, g.temperature).logp));
}

/**
 * Realized credit: each token's log-prob under the updated policy minus its log-prob under the policy that sampled it,
 * one forward pass without a tape in the update's own micro-batches (the same slices give the same float rounding, so
 * an update that changed nothing reads exactly 0).
 */
async function realizedCredit(b: Batch, ranges: [number, number][], old: number[][]): Promise<number[][]> {
  const lp = (await logprobsAhead(b, ranges, undefined)).flat();
  return lp.map((row, i) => row.map((v, t) => (b.pb.mask[i][t] ? v - old[i][t] : 0)));
}

/** Mean |b − a| over the valid tokens of `mask`. */
function meanAbsChange(a: number[][], b: number[][], mask: number[][]): number {
  let sum = 0;
  let n = 0;
  mask.forEach((row, i) =>
    row.forEach((m, t) => {
      if (!m) return;
      sum += Math.abs(b[i][t] - a[i][t]);
      n++;
    }),
  );
  return n ? sum / n : 0;
}

/** The strategy's per-row inputs other than log-probs (entropies, sections, prepare()'s extras), padded to C tokens. */
function creditRows(episodes: Episode[], prepared: Prepared, pb: PolicyBatch): Batch['rows'] {
  const pad = <T>(row: T[], fill: T) => [...row, ...Array<T>(pb.completionLen - row.length).fill(fill)];
  return {
    ...padRowInputs(prepared.batch ?? {}, pb.completionLen),
    entropies: episodes.map((e) => pad(e.entropies, 0)),
    sections: episodes.map((e) => pad(e.sections, 'other')),
    mask: pb.mask,
  };
}

/** Rows [start, end) of the strategy's inputs, with those rows' log-probs and model outputs. */
function creditBatch(b: Batch, start: number, end: number, lp: number[][], outputs: Partial<CreditBatch>): CreditBatch {
  return Object.assign({ ...sliceRows(b.rows, start, end), logprobs: lp }, outputs);
}

/** The strategy's weights and Â = A_i·w (or its own Â) of rows [start, end). */
function creditOf(b: Batch, start: number, end: number, cb: CreditBatch): Credit {
  const { weights, effAdv } = effectiveAdvantages(b.x.strategy, cb, b.x.adv.slice(start, end), b.params);
  return { logprobs: cb.logprobs, weights, effAdv };
}

/** The model outputs the strategy reads, for rows [start, end) (attention_credit's a_t). */
async function outputsOf(b: Batch, out: ReturnType<typeof completionLogprobs>, start: number, end: number): Promise<Partial<CreditBatch>> {
  const s = b.x.strategy;
  return s.fromOutputs
    ? await s.fromOutputs(out, {
        promptLen: b.pb.promptLen,
        completionLen: b.pb.completionLen,
        sections: b.rows.sections.slice(start, end),
        mask: b.pb.mask.slice(start, end),
      })
    : {};
}

/** A strategy whose credit needs the whole batch, micro-batched: every slice's forward pass without a tape first. */
async function firstPass(b: Batch, ranges: [number, number][]): Promise<Credit> {
  const ahead = await readAhead(b, ranges);
  const lp = ahead.flatMap((r) => r.lp);
  return creditOf(b, 0, b.pb.mask.length, creditBatch(b, 0, b.pb.mask.length, lp, concatRows(ahead.map((r) => r.outputs))));
}

/**
 * One epoch's gradient, one micro-batch's tape at a time: each slice's forward pass, its credit (`fixed`'s rows where
 * the credit is already known), its loss and dLoss/dℓ with the whole batch's c, and the surrogate Σ (dLoss/dℓ)·ℓ (plus
 * a head's objective) whose gradient is the loss's.
 */
async function epochGrads(b: Batch, ranges: [number, number][], fixed: Credit | null) {
  const { s, strategy, head } = b.x;
  const g = s.cfg.grpo;
  const parts: Credit[] = [];
  const infos: { info: PolicyLossResult; n: number }[] = [];
  const aheadAll = b.readAhead ? await readAhead(b, ranges) : null;
  const grads = await accumulateGrads(ranges, (start, end) =>
    inSlice(b.pb, start, end, (mb) => {
      const ahead = aheadAll ? aheadAll[ranges.findIndex(([r]) => r === start)] : null;
      const { value, grads } = tf.variableGrads(() => {
        const out = completionLogprobs(s.model, mb, g.temperature, strategy.needs);
        // without readAhead only a backend with synchronous reads gets here, with a strategy that reads no outputs
        const lp = ahead ? ahead.lp : out.logp.arraySync();
        const maskT = head ? tf.tensor2d(mb.mask) : null;
        const w = head ? head.weigh(out, maskT!) : null;
        const cr = fixed && !head ? slice(fixed, start, end, lp) : creditOf(b, start, end, creditBatch(b, start, end, lp, ahead?.outputs ?? {}));
        parts.push(cr);
        const info = policyLossAndGrad(
          {
            logprobs: lp,
            oldLogprobs: fixed ? fixed.logprobs.slice(start, end) : lp,
            // only the penalty reads them: a run that keeps them for the column alone trains exactly as without
            refLogprobs: g.kl_beta > 0 ? b.refLogprobs?.slice(start, end) : undefined,
            advantages: cr.effAdv,
            mask: mb.mask,
          },
          {
            clipEps: g.clip_eps,
            clipEpsHigh: g.clip_eps_high,
            klBeta: g.kl_beta,
            lossAgg: g.loss_agg,
            maxNewTokens: g.max_new_tokens,
            aggregation: b.c.slice(start, end),
            policyLoss: g.policy_loss,
            importanceSamplingLevel: g.importance_sampling_level,
            lossOptions: lossOptions(lossSpec(g.policy_loss)!, g),
          },
        );
        infos.push({ info, n: mb.mask.reduce((t, row) => t + row.reduce((u, m) => u + m, 0), 0) });
        const sur = out.logp.mul(tf.tensor2d(info.grad)).sum();
        return (
          w
            ? sur.add(
                head!.objective({
                  w,
                  mask: maskT!,
                  adv: tf.tensor2d(b.x.adv.slice(start, end), [end - start, 1]),
                  logprobs: lp,
                  c: b.c.slice(start, end),
                  gradAdv: info.gradAdv,
                }),
              )
            : sur
        ) as tf.Scalar;
      }, [...b.trainable.values()]);
      value.dispose();
      return grads;
    }),
  );
  // per token, in row order (the micro-batches run in order): the weight on its gradient and whether the clip cut it
  const isWeight = infos.flatMap((p) => p.info.isWeight);
  const cut = infos.flatMap((p) => p.info.cut);
  return { grads, info: joinInfos(infos), credit: joinRows(parts), isWeight, cut };
}

/** Rows [start, end) of a known credit, with this pass's log-probs. */
const slice = (c: Credit, start: number, end: number, lp: number[][]): Credit => ({
  logprobs: lp,
  weights: c.weights.slice(start, end),
  effAdv: c.effAdv.slice(start, end),
});

function joinRows(parts: Credit[]): Credit {
  if (parts.length === 1) return parts[0];
  return { logprobs: parts.flatMap((p) => p.logprobs), weights: parts.flatMap((p) => p.weights), effAdv: parts.flatMap((p) => p.effAdv) };
}

/** The batch's loss (a sum over rows) and its token-mean clip fraction and KL, from the micro-batches'. */
function joinInfos(infos: { info: PolicyLossResult; n: number }[]): Pick<PolicyLossResult, 'loss' | 'clipFrac' | 'kl'> {
  if (infos.length === 1) return infos[0].info;
  const n = infos.reduce((t, p) => t + p.n, 0);
  const sum = (f: (p: { info: PolicyLossResult; n: number }) => number) => infos.reduce((t, p) => t + f(p), 0);
  return { loss: sum((p) => p.info.loss), clipFrac: n ? sum((p) => p.info.clipFrac * p.n) / n : 0, kl: n ? sum((p) => p.info.kl * p.n) / n : 0 };
}

// ---- metrics ----

/**
 * The share of groups whose rewards are not all equal: only these carry a learning signal (GRPO's advantages of an
 * all-equal group are 0), so a falling share is a run running out of signal (DAPO's reason for dynamic sampling).
 */
export function effectiveGroups(rewards: readonly number[], groupSize: number): number {
  const groups = Math.floor(rewards.length / groupSize);
  let live = 0;
  for (let g = 0; g < groups; g++) if (rewardsDiffer(rewards.slice(g * groupSize, (g + 1) * groupSize))) live++;
  return groups ? live / groups : 0;
}

/** Whether a group's rewards are not all equal: its advantages are not all 0. */
function rewardsDiffer(r: readonly number[]): boolean {
  return r.some((x) => x !== r[0]);
}

/**
 * The step's mean |c| of filler and of reasoning tokens, c = A·ℓ (the episode's advantage times the token's log-prob,
 * float32 like the token table's columns), tokens typed as the token table's token_type column: the credit analysis's
 * two headline numbers, per step, so the dashboard can chart where the credit goes while a run trains. A type with no
 * token in the step is left out.
 */
export function creditByTokenType(episodes: readonly Episode[], adv: readonly number[], logprobs: readonly (readonly number[])[]): Record<string, number> {
  const sum = { filler: 0, reasoning: 0 };
  const n = { filler: 0, reasoning: 0 };
  episodes.forEach((e, i) => {
    const a = Math.fround(adv[i]);
    for (let t = 0; t < e.ids.length; t++) {
      const type = e.tokenTypes[t];
      sum[type] += Math.abs(Math.fround(a * Math.fround(logprobs[i][t])));
      n[type]++;
    }
  });
  const out: Record<string, number> = {};
  if (n.filler) out['credit/filler_abs_c'] = sum.filler / n.filler;
  if (n.reasoning) out['credit/reasoning_abs_c'] = sum.reasoning / n.reasoning;
  return out;
}

function metrics(episodes: Episode[], u: Update, t: { step: number; genSeconds: number; seconds: number; groupSize: number }): MetricsRow {
  const nGen = episodes.reduce((a, e) => a + e.ids.length, 0);
  const ent = episodes.flatMap((e) => e.entropies);
  const { mean: rMean, std: rStd } = meanStd(episodes.map((e) => e.reward.total));
  const row: MetricsRow = {
    step: t.step,
    phase: 'grpo',
    reward_mean: rMean,
    reward_std: rStd,
    success_rate: episodes.filter((e) => e.success).length / episodes.length,
    effective_groups: effectiveGroups(
      episodes.map((e) => e.reward.total),
      t.groupSize,
    ),
    loss: u.loss,
    grad_norm: u.gradNorm,
    kl: u.kl,
    entropy_mean: ent.length ? ent.reduce((a, b) => a + b, 0) / ent.length : 0,
    clip_frac: u.clipFrac,
    response_len: nGen / episodes.length,
    step_time_s: t.seconds,
    tokens_per_s: nGen / t.genSeconds,
  };
  if (u.skipped) row.skipped = u.skipped;
  if (u.headDrift !== undefined) row['attribution/epoch_drift'] = u.headDrift;
  return row;
}
