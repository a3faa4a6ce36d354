// Scoring imported completions with a model (`credit-lens import --model`): every completion token's log-prob and
// entropy, teacher-forced, in batches, and the weights of a credit strategy that needs no training. The model is a
// Hugging Face directory, a Credit Lens run directory (its newest good checkpoint) or one of its checkpoints.
import * as tf from '@tensorflow/tfjs';
import type { CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import type { Section } from '../core/types';
import { getStrategy } from '../credit';
import { offlineStrategies, strategySpec } from '../credit/catalog';
import { creditParams, effectiveAdvantages, type CreditBatch, type EpisodeView, type PrepareContext } from '../credit/types';
import { policyBatch } from './rollout';

/** Strategies whose weights come from the batch alone: no trained head, network or oracle (what an import can score). */
export const IMPORT_STRATEGIES = offlineStrategies('outputs');

/**
 * Strategies whose Â come from the episodes alone through a local prepare() (ktae, otb, reward_decomposition; gtpo's
 * paper form too): the probe's accuracy scores them on the logged episodes (localCredit).
 */
export const LOCAL_PREPARE_STRATEGIES = offlineStrategies('prepare');

/**
 * Â of a strategy whose prepare() is local, on logged episodes (their log-probs, entropies and Σπ² as scored under the
 * policy): prepare() then its effectiveAdvantages, as a GRPO step runs them.
 */
export async function localCredit(name: string, views: EpisodeView[], ctx: PrepareContext): Promise<number[][]> {
  const strategy = getStrategy(name);
  if (!strategySpec(name)?.offline || !strategy.prepare) throw new Error(`${name} has no local prepare()`);
  const prepared = await strategy.prepare(views, ctx);
  const batch: CreditBatch = {
    logprobs: views.map((v) => v.logprobs),
    entropies: views.map((v) => v.entropies),
    sections: views.map((v) => v.sections),
    mask: views.map((v) => v.ids.map(() => 1)),
    ...prepared.batch,
  };
  return effectiveAdvantages(
    strategy,
    batch,
    views.map((v) => v.advantage),
    creditParams(ctx.cfg.credit),
  ).effAdv;
}

import type { Scorer } from './model_path';

export { loadScorer, loadTokenizerOnly, type Scorer } from './model_path';

export interface ScoreInput {
  promptIds: number[];
  ids: number[];
  sections: Section[];
  advantage: number;
}

export interface ScoreOutput {
  logprob: number[];
  entropy: number[];
  /** Σ_j π_j² at each position */
  probSq: number[];
  weight: number[];
  effAdv: number[];
}

/**
 * Teacher-forced log-probs and entropies of a batch of completions, and the strategy's weights and effective
 * advantages, computed as a GRPO step computes them (grpo_step.ts) so that an imported run's columns mean what a
 * trained run's do. Rows are left-padded prompts and right-padded completions (policyBatch).
 */
export async function scoreBatch(
  scorer: Scorer,
  items: ScoreInput[],
  cfg: CreditConfig,
  opts: { budget?: number; beforeChunk?: () => Promise<void> } = {},
): Promise<ScoreOutput[]> {
  const name = cfg.credit.strategy;
  return (await scoreStrategies(scorer, items, cfg, [name], opts)).map(({ credit, ...x }) => ({
    ...x,
    weight: credit[name].weight,
    effAdv: credit[name].effAdv,
  }));
}

/** Rows per forward pass when scoring (scoreStrategies): a probed step's 2,048 episodes go in chunks of this many. */
export const SCORE_ROWS = 64;

export interface StrategyScores {
  logprob: number[];
  entropy: number[];
  probSq: number[];
  /** per strategy, its weights and effective advantages */
  credit: Record<string, { weight: number[]; effAdv: number[] }>;
}

/**
 * scoreBatch for several strategies that need no training (IMPORT_STRATEGIES) from one forward pass: each gets the
 * run config's parameters (`cfg.credit`, where every strategy's keys have their values or defaults).
 */
export async function scoreStrategies(
  scorer: Scorer,
  items: ScoreInput[],
  cfg: CreditConfig,
  names: readonly string[],
  opts: { budget?: number; rows?: number; beforeChunk?: () => Promise<void> } = {},
): Promise<StrategyScores[]> {
  const strategies = names.map((n) => [n, getStrategy(n)] as const);
  const params = creditParams(cfg.credit);
  // The forward pass runs SCORE_ROWS rows at a time: a whole probed step (2,048 episodes) in one pass, with its
  // attention rows, is more than the wasm heap's 4 GiB. Per-row outputs (log-probs, a row-local strategy's
  // fromOutputs) are gathered over the chunks; the weights are then computed on the whole batch, so a strategy that
  // normalises over the batch (entropy_mask's percentile) still sees all of it.
  const chunk = strategies.some(([, st]) => st.fromOutputs && !st.rowLocal) ? items.length : Math.max(1, opts.rows ?? SCORE_ROWS);
  const needsAttention = strategies.some(([, st]) => st.needs.attention);
  const C = Math.max(1, ...items.map((x) => x.ids.length));
  const padTo = <T>(row: T[], fill: T) => [...row, ...Array<T>(C - row.length).fill(fill)];
  const lp: number[][] = [];
  const ent: number[][] = [];
  const sq: number[][] = [];
  // each strategy's fromOutputs inputs, row by row
  const extras: Record<string, number[][]>[] = strategies.map(() => ({}));
  for (let r0 = 0; r0 < items.length; r0 += chunk) {
    // the caller's stop check: each chunk is seconds of synchronous work at the seeds' model size
    await opts.beforeChunk?.();
    const part = items.slice(r0, r0 + chunk);
    const pb = policyBatch(
      part.map((x) => x.promptIds),
      part.map((x) => x.ids),
      scorer.tokenizer.padId,
    );
    let attention: tf.Tensor4D | undefined;
    try {
      const Cp = pb.completionLen;
      // The lm head and log-softmax in blocks (model.scoreTokens): one long completion over a large vocabulary never
      // materialises its logits, whatever its length.
      const scored = await scorer.model.scoreTokens(
        pb.ids,
        pb.keyMask,
        { from: pb.promptLen - 1, count: Cp },
        (await pb.targets.data()) as Int32Array,
        cfg.grpo.temperature,
        { budget: opts.budget, returnAttention: needsAttention },
      );
      attention = scored.attention;
      part.forEach((x, i) => {
        const row = (a: Float32Array) => padTo(Array.from(a.subarray(i * Cp, i * Cp + x.ids.length)), 0);
        lp.push(row(scored.logp));
        ent.push(row(scored.entropy));
        sq.push(row(scored.probSq));
      });
      const sections = part.map((x) => [...x.sections, ...Array<Section>(Cp - x.sections.length).fill('other')]);
      for (const [k, [, strategy]] of strategies.entries()) {
        if (!strategy.fromOutputs) continue;
        const got = await strategy.fromOutputs({ attention }, { promptLen: pb.promptLen, completionLen: Cp, sections, mask: pb.mask });
        for (const [key, rows] of Object.entries(got) as [string, number[][]][])
          (extras[k][key] ??= []).push(...rows.map((r, i) => padTo(r.slice(0, part[i].ids.length), 0)));
      }
    } finally {
      pb.dispose();
      attention?.dispose();
    }
  }
  const mask = items.map((x) => padTo(Array<number>(x.ids.length).fill(1), 0));
  const sections = items.map((x) => padTo(x.sections, 'other' as Section));
  const adv = items.map((x) => x.advantage);
  const credit = strategies.map(([, strategy], k) =>
    effectiveAdvantages(strategy, { logprobs: lp, entropies: ent, sections, mask, ...extras[k] }, adv, params),
  );
  return items.map((x, i) => {
    const n = x.ids.length;
    return {
      logprob: lp[i].slice(0, n),
      entropy: ent[i].slice(0, n),
      probSq: sq[i].slice(0, n),
      credit: Object.fromEntries(strategies.map(([name], k) => [name, { weight: credit[k].weights[i].slice(0, n), effAdv: credit[k].effAdv[i].slice(0, n) }])),
    };
  });
}

/** The same strategy on values a trainer exported per token (prime-rl): no model, no attention. */
export function weighExported(
  items: { logprob: number[]; entropy: number[]; sections: Section[]; advantage: number }[],
  cfg: CreditConfig,
  why = 'pass --model to score the tokens',
): { weight: number[]; effAdv: number[] }[] {
  const strategy = getStrategy(cfg.credit.strategy);
  if (strategy.needs.attention) throw new UserError(`credit.strategy ${cfg.credit.strategy} needs the model's attention: ${why}`);
  const params = creditParams(cfg.credit);
  const C = Math.max(1, ...items.map((x) => x.logprob.length));
  const pad = <T>(row: T[], fill: T) => [...row, ...Array<T>(C - row.length).fill(fill)];
  const batch = {
    logprobs: items.map((x) => pad(x.logprob, 0)),
    entropies: items.map((x) => pad(x.entropy, 0)),
    sections: items.map((x) => pad(x.sections, 'other' as Section)),
    mask: items.map((x) =>
      pad(
        x.logprob.map(() => 1),
        0,
      ),
    ),
  };
  const adv = items.map((x) => x.advantage);
  const { weights, effAdv } = effectiveAdvantages(strategy, batch, adv, params);
  return items.map((x, i) => ({ weight: weights[i].slice(0, x.logprob.length), effAdv: effAdv[i].slice(0, x.logprob.length) }));
}
