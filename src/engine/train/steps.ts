// The steps of a run: an SFT step on demonstrations, a GRPO step (rollouts → rewards → advantages → the credit
// strategy's weights → the PPO-clip update, DESIGN §4), and the greedy eval. train.ts runs them in order.
import * as tf from '@tensorflow/tfjs';
import type { MetricsRow } from '../../protocol';
import type { EvalRows, EvalSplit } from '../rundir/eval_table';
import { getStrategy, type CreditBatch } from '../credit';
import { creditParams } from '../credit/types';
import { headObjective, maskedScaledSoftmax } from '../credit/attribution';
import type { CreditHead, EpisodeView, Prepared } from '../credit/types';
import { advantages, aggregationWeights, meanStd, policyLossAndGrad } from './grpo';
import { Transformer } from '../model/model';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { childSeed, makeRng, randInt, type Rng } from '../core/rng';
import { completionLogprobs, policyBatch, rollout, slicePolicyBatch, type Episode, type PolicyBatch } from './rollout';
import { type Session } from './session';
import type { Example } from '../core/types';


/**
 * Greedy eval (deterministic) on the test split, or on the validation split: the success rate, the mean reward, and
 * one row per instance (DESIGN §10), so that two runs can be compared on the same instances.
 */
export function evaluate(s: Session, examples: Example[] = s.task.eval, split: EvalSplit = 'test'): { success: number; reward: number; rows: EvalRows } {
  const rows: EvalRows = { instance_id: [], split: [], success: [], reward: new Float32Array(examples.length), completion: [] };
  if (examples.length === 0) return { success: 0, reward: 0, rows };
  const eps = rollout(s.model, s.tokenizer, s.task, examples, {
    maxNewTokens: s.cfg.grpo.max_new_tokens, temperature: 1, topP: 1, greedy: true, rng: () => 0, chunk: 128,
  });
  eps.forEach((e, i) => {
    rows.instance_id.push(`${s.cfg.task.name}:${e.example.id}`);
    rows.split.push(split);
    rows.success.push(e.success);
    rows.reward[i] = e.reward.total;
    rows.completion.push(e.text);
  });
  return {
    success: eps.filter((e) => e.success).length / eps.length,
    reward: eps.reduce((a, e) => a + e.reward.total, 0) / eps.length,
    rows,
  };
}

export function pick(rng: Rng, xs: Example[], n: number): Example[] {
  return Array.from({ length: n }, () => xs[randInt(rng, 0, xs.length - 1)]);
}

/** Token-mean cross-entropy on demonstration completions: the SFT warm start. */
export function sftStep(s: Session, opt: Adam, step: number): MetricsRow {
  const t0 = performance.now();
  const rng = makeRng(childSeed(s.cfg.seed, `sft-${step}`));
  const exs = pick(rng, s.task.train, s.cfg.sft.batch_size);
  const prompts = exs.map((ex) => s.tokenizer.encodePrompt(ex.prompt));
  const comps = exs.map((ex) => [...s.tokenizer.encode(s.task.demonstration(ex, rng)), s.tokenizer.eosId]);
  const pb = policyBatch(prompts, comps, s.tokenizer.padId);
  const maskT = tf.tensor2d(pb.mask.flat(), [pb.mask.length, pb.completionLen]);
  const nTok = pb.mask.flat().reduce((a, b) => a + b, 0);
  const { value, grads } = tf.variableGrads(() => {
    const { logp } = completionLogprobs(s.model, pb, 1);
    return logp.mul(maskT).sum().neg().div(nTok) as tf.Scalar;
  }, [...s.model.params.values()]);
  const loss = value.dataSync()[0];
  value.dispose();
  maskT.dispose();
  pb.dispose();
  const named = renameGrads(s.model.params, grads);
  const { norm, grads: clipped } = clipByGlobalNorm(named, s.cfg.grpo.grad_clip);
  let skipped = 0;
  if (Number.isFinite(loss) && Number.isFinite(norm)) opt.apply(s.model.params, clipped);
  else skipped = 1;
  tf.dispose(Object.values(clipped));
  const dt = (performance.now() - t0) / 1000;
  return { step, phase: 'sft', loss, grad_norm: norm, step_time_s: dt, tokens_per_s: nTok / dt, ...(skipped ? { skipped } : {}) };
}

/** The policy's parameters plus a credit head's, under the names the optimizer and checkpoints use. */
export function trainables(s: Session, head: CreditHead | null): Map<string, tf.Variable> {
  return head ? new Map([...s.model.params, ...head.params]) : s.model.params;
}

export function renameGrads(params: Map<string, tf.Variable>, grads: tf.NamedTensorMap): Record<string, tf.Tensor> {
  // variableGrads keys by the variable's tf name; map back to the HF parameter names the optimizer uses.
  const byVar = new Map<string, string>();
  for (const [name, v] of params) byVar.set(v.name, name);
  const out: Record<string, tf.Tensor> = {};
  for (const [k, g] of Object.entries(grads)) out[byVar.get(k) ?? k] = g;
  return out;
}

/** A step abandoned before its update because the run was asked to stop while the step waited. */
export class StepCancelled extends Error {
  constructor(readonly step: number) { super(`step ${step} cancelled by a stop`); }
}

export interface GrpoStepResult { row: MetricsRow; episodes: Episode[]; tok: TokenLog }
export interface TokenLog {
  logprobs: number[][]; weights: number[][]; effAdv: number[][]; adv: number[];
  attribution?: number[][]; importance?: number[][]; oracleSpans?: (string | null)[];
  /** per-token columns beyond the contract, by name, per episode (imported runs: prime-rl's importance_ratio, …) */
  extra?: Record<string, (number | null)[][]>;
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

/** One GRPO step: rollouts, rewards, advantages, the strategy's weights, the PPO-clip update (DESIGN §4). */
export async function grpoStep(o: GrpoStepOptions): Promise<GrpoStepResult> {
  const { session: s, optimizer: opt, step, signal } = o;
  const ref = o.ref ?? null;
  const head = o.head ?? null;
  const runDir = o.runDir ?? '';
  const log = o.log ?? (() => {});
  const g = s.cfg.grpo;
  const t0 = performance.now();
  const rng = makeRng(childSeed(s.cfg.seed, `grpo-${step}`));
  const prompts = pick(rng, s.task.train, g.prompts_per_step);
  const batchExamples = prompts.flatMap((ex) => Array.from({ length: g.group_size }, () => ex));
  const episodes = rollout(s.model, s.tokenizer, s.task, batchExamples, {
    maxNewTokens: g.max_new_tokens, temperature: g.temperature, topP: g.top_p, rng,
  });
  const tGen = performance.now();
  const rewards = episodes.map((e) => e.reward.total);
  const adv = advantages(rewards, g.group_size, g.scale_rewards);

  const strategy = getStrategy(s.cfg.credit.strategy);
  let prepared: Prepared = {};
  if (strategy.prepare) {
    prepared = await strategy.prepare(episodes.map((e, i): EpisodeView => ({
      index: i, group: Math.floor(i / g.group_size), example: e.example, prefill: s.task.prefill, completion: e.text,
      tokens: e.tokens, promptIds: e.promptIds, ids: e.ids, reward: e.reward, success: e.success, advantage: adv[i],
    })), { step, runDir, cfg: s.cfg, task: s.task, tokenizer: s.tokenizer, log, signal });
  }
  if (signal?.aborted) throw new StepCancelled(step);
  const pb = policyBatch(episodes.map((e) => e.promptIds), episodes.map((e) => e.ids), s.tokenizer.padId);
  const C = pb.completionLen;
  const pad = <T>(row: T[], fill: T) => [...row, ...Array<T>(C - row.length).fill(fill)];
  const refLogprobs = ref && g.kl_beta > 0
    ? tf.tidy(() => completionLogprobs(ref, pb, g.temperature).logp.arraySync())
    : undefined;

  let oldLogprobs: number[][] | null = null;
  let firstLogprobs: number[][] = [];
  let batch: CreditBatch | null = null;
  let weights: number[][] = [];
  let effAdv: number[][] = [];
  let alpha: number[][] | undefined;
  let loss = 0, gradNorm = 0, clipFrac = 0, kl = 0, skipped = 0;
  const params = creditParams(s.cfg.credit);
  const trainable = trainables(s, head);
  const maskT = tf.tensor2d(pb.mask);
  const advT = tf.tensor2d(adv, [adv.length, 1]);
  /** Rows [a, b) of the batch's per-token inputs to the strategy, given those rows' log-probs and model outputs. */
  const creditBatch = (a: number, b: number, lp: number[][], outputs: Partial<CreditBatch>): CreditBatch => {
    const rows = episodes.slice(a, b);
    const cb: CreditBatch = {
      logprobs: lp,
      entropies: rows.map((e) => pad(e.entropies, 0)),
      sections: rows.map((e) => pad(e.sections, 'other')),
      mask: pb.mask.slice(a, b),
    };
    // Per-token inputs from prepare() cover each episode's own tokens; pad them to the batch's width.
    const extra = prepared.batch ?? {};
    if (extra.importance) cb.importance = extra.importance.slice(a, b).map((r) => pad(r, 0));
    if (extra.importancePrompt) cb.importancePrompt = extra.importancePrompt;
    if (extra.spanMask) cb.spanMask = extra.spanMask.slice(a, b).map((r) => r && pad(r, 0));
    if (extra.calDivisor) cb.calDivisor = extra.calDivisor;
    return Object.assign(cb, outputs);
  };
  /** The strategy's weights and effective advantages Â of a (slice of the) batch whose episode advantages are advRows. */
  const creditOf = (cb: CreditBatch, advRows: number[]) => {
    const w = strategy.weights(cb, params);
    const eff = strategy.effectiveAdvantages
      ? strategy.effectiveAdvantages(cb, advRows, params)
      : w.map((row, i) => row.map((x, t) => (cb.mask![i][t] ? advRows[i] * x : 0)));
    return { w, eff };
  };
  /** The whole batch's inputs, from the first pass's log-probs (and its model outputs). */
  const initBatch = (lp: number[][], outputs: Partial<CreditBatch>): CreditBatch => {
    // μ = 1 (or the first of μ epochs): the policy that sampled is the one being updated, so ℓ_old = ℓ.detach(), as TRL
    // does; later epochs keep these values.
    oldLogprobs = lp;
    firstLogprobs = lp;
    const b = creditBatch(0, pb.mask.length, lp, outputs);
    if (!head) ({ w: weights, eff: effAdv } = creditOf(b, adv));
    return b;
  };
  /** The aggregation coefficients c of the whole batch (token_mean divides by every token of it), sliced per micro-batch. */
  const c = aggregationWeights(pb.mask, g.loss_agg, g.max_new_tokens);
  /** The PPO-clip loss and dLoss/dℓ of rows [a, b) given their log-probs and effective advantages. */
  const lossOf = (lp: number[][], eff: number[][], a = 0, b = pb.mask.length) => policyLossAndGrad(
    { logprobs: lp, oldLogprobs: oldLogprobs ? oldLogprobs.slice(a, b) : lp, refLogprobs: refLogprobs?.slice(a, b), advantages: eff, mask: pb.mask.slice(a, b) },
    { clipEps: g.clip_eps, clipEpsHigh: g.clip_eps_high, klBeta: g.kl_beta, lossAgg: g.loss_agg, maxNewTokens: g.max_new_tokens, aggregation: c.slice(a, b) },
  );
  /** The strategy's per-row inputs from the model outputs of rows [a, b) (attention_credit's a_t). */
  const outputsOf = (out: ReturnType<typeof completionLogprobs>, a: number, b: number): Partial<CreditBatch> => (strategy.fromOutputs
    ? strategy.fromOutputs(out, { promptLen: pb.promptLen, completionLen: C, sections: episodes.slice(a, b).map((e) => pad(e.sections, 'other')), mask: pb.mask.slice(a, b) })
    : {});
  /** The gradient of `surrogate` on the micro-batch of rows [a, b), one slice's tape at a time. */
  const sliceGrads = (a: number, b: number, surrogate: (mb: PolicyBatch) => tf.Scalar): tf.NamedTensorMap => {
    const mb = slicePolicyBatch(pb, a, b);
    try {
      const { value, grads } = tf.variableGrads(() => surrogate(mb), [...trainable.values()]);
      value.dispose();
      return grads;
    } finally {
      mb.dispose();
    }
  };
  const ranges = microBatchRanges(pb.mask.length, g.gradient_accumulation_steps);
  for (let epoch = 0; epoch < g.epochs_per_step; epoch++) {
    let lossInfo: ReturnType<typeof policyLossAndGrad> | null = null;
    let grads: tf.NamedTensorMap;
    if (ranges.length > 1 && strategy.rowLocal && !head) {
      // Micro-batches of a row-local strategy, in one pass: each slice's credit, loss and dLoss/dℓ need only its own
      // log-probs, with the whole batch's aggregation coefficients c (token_mean divides by every token of the batch).
      const lpAll: number[][] = [];
      const outputs: Partial<CreditBatch>[] = [];
      let lossSum = 0, clipped = 0, klSum = 0, valid = 0;
      grads = accumulateGrads(ranges, (a, b) => sliceGrads(a, b, (mb) => {
        const out = completionLogprobs(s.model, mb, g.temperature, strategy.needs);
        const lp = out.logp.arraySync();
        lpAll.push(...lp);
        let eff: number[][];
        if (!batch) {
          const part = outputsOf(out, a, b);
          outputs.push(part);
          eff = creditOf(creditBatch(a, b, lp, part), adv.slice(a, b)).eff;
        } else {
          eff = effAdv.slice(a, b);
        }
        const info = lossOf(lp, eff, a, b);
        const n = mb.mask.reduce((t, row) => t + row.reduce((u, m) => u + m, 0), 0);
        lossSum += info.loss;
        clipped += info.clipFrac * n;
        klSum += info.kl * n;
        valid += n;
        return out.logp.mul(tf.tensor2d(info.grad)).sum() as tf.Scalar;
      }));
      // The whole batch's credit, for the token log: a row-local strategy gives each row what its slice gave it.
      if (!batch) batch = initBatch(lpAll, concatRows(outputs));
      lossInfo = { loss: lossSum, grad: [], gradAdv: [], clipFrac: valid ? clipped / valid : 0, kl: valid ? klSum / valid : 0 };
    } else if (ranges.length > 1) {
      // Micro-batches (TRL gradient_accumulation_steps): a first pass without a tape gives the whole batch's log-probs,
      // so the strategy, the advantages and dLoss/dℓ are those of the whole batch; then each micro-batch's forward and
      // backward adds its part of Σ (dLoss/dℓ)·dℓ/dθ. Peak memory is one micro-batch's activations, for one more
      // forward pass. (The attribution head trains on the whole batch: the config refuses both together.)
      const lp: number[][] = [];
      const outputs: Partial<CreditBatch>[] = [];
      for (const [a, b] of ranges) {
        const mb = slicePolicyBatch(pb, a, b);
        tf.tidy(() => {
          const out = completionLogprobs(s.model, mb, g.temperature, strategy.needs);
          lp.push(...out.logp.arraySync());
          if (!batch) outputs.push(outputsOf(out, a, b));
        });
        mb.dispose();
      }
      if (!batch) batch = initBatch(lp, concatRows(outputs));
      lossInfo = lossOf(lp, effAdv);
      const dl = lossInfo.grad;
      grads = accumulateGrads(ranges, (a, b) => sliceGrads(a, b,
        (mb) => completionLogprobs(s.model, mb, g.temperature).logp.mul(tf.tensor2d(dl.slice(a, b))).sum() as tf.Scalar));
    } else {
      const { value, grads: whole } = tf.variableGrads(() => {
        const out = completionLogprobs(s.model, pb, g.temperature, { ...strategy.needs, hidden: strategy.needs.hidden || !!head });
        const lp = out.logp.arraySync();
        if (!batch) batch = initBatch(lp, outputsOf(out, 0, pb.mask.length));
        let wT: tf.Tensor2D | null = null;
        if (head && out.hidden) {
          // Detaching copies the values out of the graph, so no gradient reaches the trunk through the head.
          const h = params.detach_hidden ? tf.tensor3d(out.hidden.dataSync() as Float32Array, out.hidden.shape) : out.hidden;
          const z = head.logits(h);
          wT = maskedScaledSoftmax(z, maskT);
          batch.attributionLogits = z.arraySync();
          // The JS weights come from the same library function tokenWeights('attribution') uses.
          weights = strategy.weights(batch, params);
          effAdv = weights.map((row, i) => row.map((w, t) => (pb.mask[i][t] ? adv[i] * w : 0)));
          alpha = weights.map((row, i) => { const n = pb.mask[i].reduce((a, b) => a + b, 0); return row.map((w) => (n ? w / n : 0)); });
        }
        lossInfo = lossOf(lp, effAdv);
        // Surrogate whose gradient w.r.t. the parameters is Σ (dLoss/dℓ)·dℓ/dθ (+ Σ (dLoss/dÂ)·dÂ/dθ for a credit
        // head): the loss itself lives in grpo.ts.
        let sur = out.logp.mul(tf.tensor2d(lossInfo.grad)).sum();
        if (wT) {
          // The head trains on credit.attribution.objective (attribution.ts headObjective); the policy's gradient is the
          // same under all three.
          sur = sur.add(headObjective({
            w: wT, mask: maskT, adv: advT, logprobs: lp, c,
            gradAdv: lossInfo.gradAdv, objective: params.objective, entropyCoef: params.entropy_coef,
          }));
        }
        return sur as tf.Scalar;
      }, [...trainable.values()]);
      value.dispose();
      grads = whole;
    }
    const info = lossInfo!;
    const named = renameGrads(trainable, grads);
    const clippedRes = clipByGlobalNorm(named, g.grad_clip);
    if (epoch === 0) { loss = info.loss; gradNorm = clippedRes.norm; kl = info.kl; }
    // Epoch 0 runs at ρ ≡ 1, where nothing is ever clipped: the fraction is averaged over every epoch (as TRL logs
    // clip_ratio), or it would read 0 whatever the update did.
    clipFrac += info.clipFrac / g.epochs_per_step;
    if (!Number.isFinite(info.loss) || !Number.isFinite(clippedRes.norm)) {
      skipped++;
      log('warn', `step ${step}: non-finite ${Number.isFinite(info.loss) ? 'gradient norm' : 'loss'} (loss=${info.loss}, grad_norm=${clippedRes.norm}); update skipped`);
    } else {
      opt.apply(trainable, clippedRes.grads);
    }
    tf.dispose(Object.values(clippedRes.grads));
  }
  maskT.dispose();
  advT.dispose();
  pb.dispose();

  const dt = (performance.now() - t0) / 1000;
  const nGen = episodes.reduce((a, e) => a + e.ids.length, 0);
  const valid = episodes.flatMap((e) => e.entropies);
  const { mean: rMean, std: rStd } = meanStd(rewards);
  const row: MetricsRow = {
    step,
    phase: 'grpo',
    reward_mean: rMean,
    reward_std: rStd,
    success_rate: episodes.filter((e) => e.success).length / episodes.length,
    loss,
    grad_norm: gradNorm,
    kl,
    entropy_mean: valid.length ? valid.reduce((a, b) => a + b, 0) / valid.length : 0,
    clip_frac: clipFrac,
    response_len: nGen / episodes.length,
    step_time_s: dt,
    tokens_per_s: nGen / ((tGen - t0) / 1000),
  };
  if (skipped) row.skipped = skipped;
  if (strategy.stepMetrics) Object.assign(row, strategy.stepMetrics(weights, pb.mask));
  if (prepared.metrics) Object.assign(row, prepared.metrics);
  const importance = (batch as CreditBatch | null)?.importance;
  return { row, episodes, tok: { logprobs: firstLogprobs, weights, effAdv, adv, attribution: alpha, importance, oracleSpans: prepared.oracleSpans } };
}


/** Row ranges [start, end) of n near-equal consecutive micro-batches of B rows (n capped at B). */
export function microBatchRanges(B: number, n: number): [number, number][] {
  const k = Math.min(Math.max(1, Math.floor(n)), Math.max(1, B));
  return Array.from({ length: k }, (_, i): [number, number] => [Math.floor((i * B) / k), Math.floor(((i + 1) * B) / k)]);
}

/** Sums the gradients of each range's loss (from `gradsOf`) into one map, holding one range's tape at a time. */
export function accumulateGrads(ranges: [number, number][],
  gradsOf: (start: number, end: number) => tf.NamedTensorMap): tf.NamedTensorMap {
  let acc: tf.NamedTensorMap | null = null;
  for (const [a, b] of ranges) {
    const g = gradsOf(a, b);
    if (!acc) { acc = g; continue; }
    for (const [k, t] of Object.entries(g)) {
      const prev: tf.Tensor | undefined = acc[k];
      acc[k] = prev ? prev.add(t) : t;
      if (prev) { prev.dispose(); t.dispose(); }
    }
  }
  return acc ?? {};
}

/** Per-row arrays of several micro-batches' strategy outputs, joined in row order. */
export function concatRows(parts: Partial<CreditBatch>[]): Partial<CreditBatch> {
  const out: Record<string, unknown[]> = {};
  for (const p of parts) {
    for (const [k, v] of Object.entries(p)) {
      if (!Array.isArray(v)) throw new Error(`concatRows: ${k} is not a per-row array`);
      (out[k] ??= []).push(...v);
    }
  }
  return out as Partial<CreditBatch>;
}
