// Seed doc 004, part 3: weights from the importance network (importance.ts). ρ_t is the predicted correlation of
// two continuations that share the prefix ending at completion token t, i.e. the share of the reward's variance
// that the prefix already fixes. design.md#semantics: raw g_t = ρ_t; variance_drop g_t = max(0, ρ_t − ρ_{t−1}) with ρ_0 at
// the last prompt token (how much of the remaining variance token t removed); w = n_i·softmax_t(g/temp).
import * as tf from '@tensorflow/tfjs';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { mean } from '../core/stats';
import { ImportanceNet, tokenizerId } from '../model/importance_net';
import { scaledSoftmax, validMask, type CreditParams, type CreditStrategy } from './types';

/** g over one episode's completion tokens (before the softmax). */
export function importanceGains(rho: number[], rho0: number | undefined, mask: number[], mode: CreditParams['mode']): number[] {
  if (mode === 'raw') return rho.map((r, t) => (mask[t] ? r : 0));
  if (rho0 === undefined) throw new Error('reward_variance (variance_drop): batch.importancePrompt (ρ_0 at the last prompt token) is missing');
  return rho.map((r, t) => (mask[t] ? Math.max(0, r - (t === 0 ? rho0 : rho[t - 1])) : 0));
}

/** One net per checkpoint folder, reloaded when its weights file changes or the tfjs backend is another. */
const cache = new Map<string, { stamp: string; net: ImportanceNet }>();

export function loadImportanceCached(dir: string): ImportanceNet {
  let stamp: string;
  try {
    const st = statSync(join(dir, 'model.safetensors'));
    stamp = `${st.mtimeMs}:${st.size}:${tf.getBackend()}`;
  } catch {
    throw new UserError(
      `credit.reward_variance.importance_checkpoint: ${dir} has no model.safetensors (train one with \`credit-lens importance train <config> --rollouts <parquet>\`)`,
    );
  }
  const hit = cache.get(dir);
  if (hit && hit.stamp === stamp) return hit.net;
  const net = ImportanceNet.load(dir);
  hit?.net.dispose();
  cache.set(dir, { stamp, net });
  return net;
}

export const rewardVariance: CreditStrategy = {
  name: 'reward_variance',
  weights: (batch, p) => {
    if (!batch.importance) throw new Error("reward_variance: batch.importance (ρ per completion token) is missing; the strategy's prepare() computes it");
    return validMask(batch).map((row, i) => scaledSoftmax(importanceGains(batch.importance![i], batch.importancePrompt?.[i], row, p.mode), row, p.temp));
  },
  async prepare(episodes, ctx) {
    const dir = ctx.cfg.credit.reward_variance.importance_checkpoint;
    if (!dir) throw new UserError('credit.reward_variance.importance_checkpoint: required when credit.strategy is reward_variance');
    const net = loadImportanceCached(dir);
    const want = tokenizerId(ctx.tokenizer),
      have = net.meta.tokenizer;
    if (JSON.stringify(want) !== JSON.stringify(have)) {
      const say = (t: typeof want) =>
        t.kind === 'char' ? `a character tokenizer over ${JSON.stringify(t.alphabet)}` : `an HF tokenizer of ${t.vocab_size} ids`;
      throw new UserError(
        `credit.reward_variance.importance_checkpoint: ${dir} was trained on rollouts of ${say(have)}, but this run uses ${say(want)}; ` +
          "train the importance net on paired rollouts of this config's policy",
      );
    }
    const r = await net.episodeRho(
      episodes.map((e) => e.promptIds),
      episodes.map((e) => e.ids),
    );
    return {
      batch: { importance: r.tokens, importancePrompt: r.prompt },
      metrics: { 'reward_variance/rho0_mean': mean(r.prompt), 'reward_variance/rho_mean': mean(r.tokens.flat()) },
    };
  },
};
