// Training the importance net (seed doc 004, part 2): pairs from the paired-rollout table, a held-out split by prompt,
// maximum likelihood of the bivariate-normal pair model, and the constant-correlation baseline it must beat.
import { mean } from '../core/stats';
import * as tf from '@tensorflow/tfjs';
import type { Table } from 'apache-arrow';
import { UserError } from '../core/errors';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { childSeed, makeRng, shuffle } from '../core/rng';
import type { Tokenizer } from '../core/types';
import {
  DEFAULT_NET,
  fitConstantCorrelation,
  ImportanceNet,
  pairNll,
  ZERO_VAR,
  type ImportanceMetrics,
  type ImportanceNetConfig,
  type TokenizerId,
} from '../model/importance_net';

export type { ImportanceMetrics } from '../model/importance_net';

// ---------------------------------------------------------------------------------------------------------------
// Data and training

/** One pair of rollouts sharing `prefix` (policy ids: prompt + shared completion tokens). */
export interface PairExample {
  /** pairs of one prompt stay on one side of the train/held-out split */
  prompt: number | string;
  prefix: number[];
  r1: number;
  r2: number;
  mean: number;
  var: number;
}

export interface PairData {
  pairs: PairExample[];
  skippedGroups: number;
  skippedPairs: number;
  groups: number;
}

function col(t: Table, name: string): unknown[] {
  const c = t.getChild(name);
  if (!c) throw new UserError(`rollouts file has no column ${name} (columns: ${t.schema.fields.map((f) => f.name).join(', ')})`);
  return c.toArray() as unknown[];
}

/** Pairs (same group_id and pair_id) of a paired-rollouts table; zero-variance groups are skipped and counted. */
export function pairsFromTable(t: Table, tokenizer: Tokenizer, reward = 'reward'): PairData {
  const promptId = col(t, 'prompt_id'),
    promptText = col(t, 'prompt_text'),
    group = col(t, 'group_id'),
    pair = col(t, 'pair_id');
  const split = col(t, 'split_token_idx'),
    ids = col(t, 'completion_token_ids');
  const r = col(t, reward),
    m = col(t, `${reward}_group_mean`),
    v = col(t, `${reward}_group_var`);
  const byPair = new Map<string, number[]>();
  for (let i = 0; i < t.numRows; i++) {
    const key = `${group[i]}/${pair[i]}`;
    byPair.set(key, [...(byPair.get(key) ?? []), i]);
  }
  const groups = new Set<unknown>(group);
  const skipped = new Set<unknown>();
  const pairs: PairExample[] = [];
  let skippedPairs = 0;
  const promptCache = new Map<string, number[]>();
  for (const [key, rows] of byPair) {
    if (rows.length !== 2) throw new UserError(`rollouts file: pair ${key} (group_id/pair_id) has ${rows.length} rows, expected 2`);
    const [a, b] = rows;
    const variance = Number(v[a]);
    if (!(variance > ZERO_VAR)) {
      skipped.add(group[a]);
      skippedPairs++;
      continue;
    }
    const t0 = Number(split[a]);
    const ia = Array.from(ids[a] as ArrayLike<number>),
      ib = Array.from(ids[b] as ArrayLike<number>);
    for (let k = 0; k < t0; k++) if (ia[k] !== ib[k]) throw new UserError(`rollouts file: pair ${key} does not share its first ${t0} tokens (split_token_idx)`);
    const text = String(promptText[a]);
    let p = promptCache.get(text);
    if (!p) {
      p = tokenizer.encodePrompt(text);
      promptCache.set(text, p);
    }
    pairs.push({ prompt: Number(promptId[a]), prefix: [...p, ...ia.slice(0, t0)], r1: Number(r[a]), r2: Number(r[b]), mean: Number(m[a]), var: variance });
  }
  return { pairs, skippedGroups: skipped.size, skippedPairs, groups: groups.size };
}

export interface TrainImportanceOptions {
  net?: Partial<ImportanceNetConfig>;
  steps?: number;
  batchSize?: number;
  lr?: number;
  /** fraction of prompts held out for the final report (default 0.2) */
  heldout?: number;
  /** fraction of the training prompts used to pick the step whose weights are kept (default 0.15; 0: keep the last) */
  validation?: number;
  /** validation every this many steps (default 25) */
  evalEvery?: number;
  seed?: number;
  tokenizer: TokenizerId;
  log?: (m: string) => void;
}

const zOf = (p: PairExample) => ({ z1: (p.r1 - p.mean) / Math.sqrt(p.var), z2: (p.r2 - p.mean) / Math.sqrt(p.var) });
/** core/stats' mean, but NaN for no values: an empty held-out split writes null to meta.json, not a 0 that looks measured. */
const meanOf = (xs: number[]) => (xs.length ? mean(xs) : NaN);

/** Split by prompt: every pair of a held-out prompt is held out. */
export function splitByPrompt(pairs: PairExample[], heldout: number, seed: number, tag = 'importance-split'): { train: PairExample[]; test: PairExample[] } {
  const prompts = [...new Set(pairs.map((p) => p.prompt))];
  if (prompts.length < 2)
    throw new UserError(
      `the rollouts have ${prompts.length} prompt(s) with reward variance; a train/held-out split by prompt needs at least 2 (generate more groups)`,
    );
  shuffle(makeRng(childSeed(seed, tag)), prompts);
  const nHeld = Math.min(prompts.length - 1, Math.max(1, Math.round(heldout * prompts.length)));
  const held = new Set(prompts.slice(0, nHeld));
  return { train: pairs.filter((p) => !held.has(p.prompt)), test: pairs.filter((p) => held.has(p.prompt)) };
}

const meanNll = (ps: PairExample[], fs: number[]) => meanOf(ps.map((p, i) => pairNll(p.r1, p.r2, p.mean, p.var, fs[i])));

/**
 * Fit on the training prompts minus a validation share of them, and keep the weights of the step with the best
 * validation NLL (checked every `evalEvery` steps, from step 0 = the constant baseline the head starts at).
 * The Gaussian likelihood punishes a confident wrong f without bound (a pair with z1 ≠ z2 at f → 1 costs
 * (z1 − z2)²/(4·(1 − f))), and discrete rewards make R1 = R2 pairs that invite exactly that confidence; on a
 * few hundred pairs the net overfits into it within a few hundred steps. Selection on validation prompts stops
 * it there, and falls back to the baseline when the prefix carries nothing the net can use.
 */
export async function trainImportance(data: PairData, o: TrainImportanceOptions): Promise<{ net: ImportanceNet; metrics: ImportanceMetrics }> {
  const log = o.log ?? (() => {});
  const seed = o.seed ?? 1;
  const steps = o.steps ?? 300;
  const batchSize = o.batchSize ?? 64;
  const evalEvery = o.evalEvery ?? 25;
  if (data.pairs.length === 0) {
    throw new UserError(
      `no pair with reward variance to train on (${data.skippedGroups} of ${data.groups} groups have zero variance): ` +
        'generate the rollouts with a trained policy (--checkpoint) or more groups',
    );
  }
  const { train, test } = splitByPrompt(data.pairs, o.heldout ?? 0.2, seed);
  const trainPrompts = new Set(train.map((p) => p.prompt)).size;
  const { train: fit, test: val } =
    trainPrompts >= 2 && (o.validation ?? 0.15) > 0
      ? splitByPrompt(train, o.validation ?? 0.15, seed, 'importance-validation')
      : { train, test: [] as PairExample[] };
  const f0 = fitConstantCorrelation(train.map(zOf));
  const vocab = [...new Set(fit.flatMap((p) => p.prefix))].sort((a, b) => a - b);
  const netCfg: ImportanceNetConfig = { ...DEFAULT_NET, ...o.net };
  netCfg.max_seq_len = Math.max(netCfg.max_seq_len, ...data.pairs.map((p) => p.prefix.length));
  const net = ImportanceNet.create(netCfg, vocab, o.tokenizer, seed, f0);
  const params = net.params;
  const opt = new Adam(o.lr ?? 1e-3);
  const rng = makeRng(childSeed(seed, 'importance-batches'));
  const fitZ = fit.map(zOf);
  // variableGrads keys gradients by the variables' tfjs names; the optimizer keys them by parameter name.
  const byVar = new Map([...params].map(([k, v]) => [v.name, k]));
  const snapshot = async () => {
    const out = new Map<string, Float32Array>();
    for (const [k, v] of params) out.set(k, ((await v.data()) as Float32Array).slice());
    return out;
  };
  const validate = async () => meanNll(val, await net.prefixRho(val.map((p) => p.prefix)));
  let best: { step: number; nll: number; weights: Map<string, Float32Array> | null } = {
    step: 0,
    nll: val.length ? await validate() : NaN,
    weights: val.length ? await snapshot() : null,
  };
  let order: number[] = [];
  let running = 0;
  try {
    for (let step = 1; step <= steps; step++) {
      if (order.length < batchSize)
        order = order.concat(
          shuffle(
            rng,
            fit.map((_, i) => i),
          ),
        );
      const idx = order.splice(0, Math.min(batchSize, fit.length));
      const { value, grads } = tf.variableGrads(() => {
        const { ids, mask, T } = net.leftPadded(idx.map((i) => fit[i].prefix));
        const f = net
          .rho(ids, mask)
          .slice([0, T - 1], [idx.length, 1])
          .reshape([idx.length]);
        const z1 = tf.tensor1d(idx.map((i) => fitZ[i].z1));
        const z2 = tf.tensor1d(idx.map((i) => fitZ[i].z2));
        const q = tf.sub(1, f.square());
        // The f-dependent part of pairNll; log 2π + log v does not change the gradient.
        return tf.mean(
          q
            .log()
            .mul(0.5)
            .add(z1.square().add(z2.square()).sub(f.mul(z1).mul(z2).mul(2)).div(q.mul(2))),
        ) as tf.Scalar;
      }, [...params.values()]);
      const nll = (await value.data())[0];
      running = step === 1 ? nll : 0.95 * running + 0.05 * nll;
      value.dispose();
      const named = Object.fromEntries(Object.entries(grads).map(([k, g]) => [byVar.get(k) ?? k, g]));
      const clipped = await clipByGlobalNorm(named, 1.0);
      if (Number.isFinite(clipped.norm)) opt.apply(params, clipped.grads);
      tf.dispose(Object.values(clipped.grads));
      if (val.length && (step % evalEvery === 0 || step === steps)) {
        const v = await validate();
        if (v < best.nll) best = { step, nll: v, weights: await snapshot() };
        log(
          `importance step ${step}/${steps}: train NLL (f-dependent part, running mean) ${running.toFixed(4)}, validation NLL ${v.toFixed(4)} (best ${best.nll.toFixed(4)} at step ${best.step})`,
        );
      } else if (step % 50 === 0 || step === steps) {
        log(`importance step ${step}/${steps}: train NLL (f-dependent part, running mean) ${running.toFixed(4)}`);
      }
    }
  } finally {
    opt.dispose();
  }
  if (best.weights) for (const [k, v] of params) v.assign(tf.tensor(best.weights.get(k)!, v.shape));
  const fTest = await net.prefixRho(test.map((p) => p.prefix));
  const fTrain = await net.prefixRho(train.map((p) => p.prefix));
  const fMean = meanOf(fTest);
  const metrics: ImportanceMetrics = {
    train_pairs: train.length,
    validation_pairs: val.length,
    heldout_pairs: test.length,
    train_prompts: trainPrompts,
    validation_prompts: new Set(val.map((p) => p.prompt)).size,
    heldout_prompts: new Set(test.map((p) => p.prompt)).size,
    skipped_groups: data.skippedGroups,
    skipped_pairs: data.skippedPairs,
    constant_f: f0,
    train_nll: meanNll(train, fTrain),
    train_nll_constant: meanNll(
      train,
      train.map(() => f0),
    ),
    validation_nll: val.length ? best.nll : null,
    heldout_nll: meanNll(test, fTest),
    heldout_nll_constant: meanNll(
      test,
      test.map(() => f0),
    ),
    heldout_nll_independent: meanNll(
      test,
      test.map(() => 0),
    ),
    heldout_gain: 0,
    heldout_f_mean: fMean,
    heldout_f_std: Math.sqrt(meanOf(fTest.map((f) => (f - fMean) ** 2))),
    steps,
    selected_step: val.length ? best.step : steps,
  };
  metrics.heldout_gain = metrics.heldout_nll_constant - metrics.heldout_nll;
  net.meta.metrics = metrics;
  return { net, metrics };
}
