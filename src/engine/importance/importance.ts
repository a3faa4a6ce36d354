// Seed 004, part 2: the importance network f_θ(prefix) ∈ (−1, 1), the correlation of the rewards of two
// rollouts that share `prefix` and then continue independently. Trained by maximum likelihood of each pair
// (R1, R2) ~ N((m_q, m_q), v_q [[1, f], [f, 1]]), m_q and v_q the mean and variance of its group's rewards.
//
// Which network: a small transformer of its own (our `Transformer`, Qwen2 layout) with a scalar head through
// tanh on the final hidden state, not a head on the policy's trunk. The correlation belongs to the policy that
// generated the paired rollouts; during reward_variance training the policy moves, and a head on its live trunk
// would drift with it (or the trunk would need to be copied and frozen, which is this network with the policy's
// size). A separate net is small (a few thousand to a few hundred thousand parameters), costs one causal forward
// per step, works for any policy whose tokenizer it shares, and its checkpoint is self-contained.
//
// Its vocabulary is the set of policy token ids seen in the training prefixes (every other id → one shared
// "unseen" embedding), so a 150k-token HF tokenizer does not put 150k rows into the net.
import * as tf from '@tensorflow/tfjs';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Table } from 'apache-arrow';
import { initBackend } from '../model/backend';
import { loadConfig, type CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { Transformer, type ModelConfig } from '../model/model';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { intFlag, numFlag, parseArgs } from '../cli/args';
import { createOutputFolder, readParquetTable } from './paired';
import { childSeed, makeRng, randNormal, shuffle } from '../core/rng';
import { writeFileAtomic } from '../rundir/rundir';
import { readSafetensors, writeSafetensors } from '../model/safetensors';
import { makeTask } from '../tasks';
import { CharTokenizer, HfTokenizer } from '../model/tokenizer';
import type { Tokenizer } from '../core/types';
import { ENGINE_VERSION } from '../core/version';

/** |f| stays within 1 − F_CLAMP so the bivariate normal stays proper (issue 4: clamp f to ±(1 − 1e-4)). */
export const F_CLAMP = 1e-4;
/** A group whose reward variance is at most this has no pair information (z-scores undefined): skipped. */
const ZERO_VAR = 1e-12;
const FORMAT = 'credit-lens-importance';
const WEIGHTS = 'model.safetensors';
const META = 'meta.json';
const HEAD_W = 'importance_head.weight';
const HEAD_B = 'importance_head.bias';

export interface ImportanceNetConfig {
  d_model: number;
  n_layers: number;
  n_heads: number;
  d_ff: number;
  max_seq_len: number;
}

export const DEFAULT_NET: ImportanceNetConfig = { d_model: 64, n_layers: 2, n_heads: 4, d_ff: 128, max_seq_len: 192 };

export type TokenizerId = { kind: 'char'; alphabet: string } | { kind: 'hf'; vocab_size: number };

export function tokenizerId(t: Tokenizer): TokenizerId {
  return t instanceof CharTokenizer ? { kind: 'char', alphabet: t.alphabet } : { kind: 'hf', vocab_size: t.vocabSize };
}

export interface ImportanceMeta {
  format: typeof FORMAT;
  version: 1;
  net: ImportanceNetConfig;
  /** policy token ids with an embedding of their own; the net's id of vocab[k] is k + 1, 0 is every other id */
  vocab: number[];
  tokenizer: TokenizerId;
  engine_version: string;
  created: string;
  metrics?: ImportanceMetrics;
  training?: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------------------------
// The likelihood

/**
 * −log N((r1, r2); (m, m), v [[1, f], [f, 1]]) = log 2π + log v + ½ log(1 − f²) + (z1² − 2f·z1·z2 + z2²) / (2(1 − f²)),
 * z = (r − m)/√v (the bivariate normal density with det Σ = v²(1 − f²)).
 */
export function pairNll(r1: number, r2: number, m: number, v: number, f: number): number {
  const c = Math.max(-1 + F_CLAMP, Math.min(1 - F_CLAMP, f));
  const s = Math.sqrt(v);
  const z1 = (r1 - m) / s;
  const z2 = (r2 - m) / s;
  const q = 1 - c * c;
  return Math.log(2 * Math.PI) + Math.log(v) + 0.5 * Math.log(q) + (z1 * z1 - 2 * c * z1 * z2 + z2 * z2) / (2 * q);
}

/**
 * The single correlation f that maximises the likelihood of the pairs (the constant baseline). The mean NLL's
 * f-dependent part is ½ log(1 − f²) + (A − 2f·C)/(2(1 − f²)) with A = mean(z1² + z2²), C = mean(z1·z2): a grid over
 * (−1, 1) brackets the minimum, golden-section search refines it.
 */
export function fitConstantCorrelation(pairs: { z1: number; z2: number }[]): number {
  if (pairs.length === 0) return 0;
  let A = 0, C = 0;
  for (const p of pairs) { A += p.z1 * p.z1 + p.z2 * p.z2; C += p.z1 * p.z2; }
  A /= pairs.length;
  C /= pairs.length;
  const lo = -1 + F_CLAMP, hi = 1 - F_CLAMP;
  const obj = (f: number) => 0.5 * Math.log(1 - f * f) + (A - 2 * f * C) / (2 * (1 - f * f));
  const N = 2000;
  let best = 0, bestV = Infinity;
  for (let i = 0; i <= N; i++) {
    const f = lo + ((hi - lo) * i) / N;
    const v = obj(f);
    if (v < bestV) { bestV = v; best = i; }
  }
  let a = lo + ((hi - lo) * Math.max(0, best - 1)) / N;
  let b = lo + ((hi - lo) * Math.min(N, best + 1)) / N;
  const g = (Math.sqrt(5) - 1) / 2;
  for (let it = 0; it < 100 && b - a > 1e-12; it++) {
    const c = b - g * (b - a), d = a + g * (b - a);
    if (obj(c) < obj(d)) b = d; else a = c;
  }
  return (a + b) / 2;
}

// ---------------------------------------------------------------------------------------------------------------
// The network

export class ImportanceNet {
  readonly trunk: Transformer;
  readonly headW: tf.Variable;
  readonly headB: tf.Variable;
  readonly meta: ImportanceMeta;
  private readonly index: Map<number, number>;

  private constructor(trunk: Transformer, headW: tf.Variable, headB: tf.Variable, meta: ImportanceMeta) {
    this.trunk = trunk;
    this.headW = headW;
    this.headB = headB;
    this.meta = meta;
    this.index = new Map(meta.vocab.map((id, k) => [id, k + 1]));
  }

  static modelConfig(net: ImportanceNetConfig, vocabLen: number): ModelConfig {
    return {
      arch: 'qwen2', vocabSize: vocabLen + 1, dModel: net.d_model, nLayers: net.n_layers, nHeads: net.n_heads, nKvHeads: net.n_heads,
      dFf: net.d_ff, maxSeqLen: net.max_seq_len, ropeTheta: 10000, rmsEps: 1e-6, tieEmbeddings: true, qkvBias: true,
    };
  }

  /**
   * Fresh net. The head starts near the constant f0 (bias atanh f0, weights N(0, 0.01²)), so training starts at
   * the baseline it is compared with and only has to learn how f depends on the prefix.
   */
  static create(net: ImportanceNetConfig, vocab: number[], tokenizer: TokenizerId, seed: number, f0 = 0): ImportanceNet {
    if (net.d_model % net.n_heads !== 0 || (net.d_model / net.n_heads) % 2 !== 0) {
      throw new UserError(`importance net: d_model ${net.d_model} must be a multiple of 2·n_heads (${2 * net.n_heads}) (even head size for RoPE)`);
    }
    const trunk = Transformer.init(ImportanceNet.modelConfig(net, vocab.length), childSeed(seed, 'importance-trunk'));
    const rng = makeRng(childSeed(seed, 'importance-head'));
    const w = Float32Array.from({ length: net.d_model }, () => 0.01 * randNormal(rng));
    const f = Math.max(-0.99, Math.min(0.99, f0));
    const meta: ImportanceMeta = { format: FORMAT, version: 1, net, vocab, tokenizer, engine_version: ENGINE_VERSION, created: new Date().toISOString() };
    return new ImportanceNet(trunk, tf.variable(tf.tensor2d(w, [net.d_model, 1]), true), tf.variable(tf.tensor1d([Math.atanh(f)]), true), meta);
  }

  static load(dir: string): ImportanceNet {
    const metaPath = join(dir, META);
    if (!existsSync(metaPath)) throw new UserError(`importance checkpoint ${dir}: no ${META} (train one with \`credit-lens importance train <config> --rollouts <parquet>\`)`);
    let meta: ImportanceMeta;
    try {
      meta = JSON.parse(readFileSync(metaPath, 'utf8')) as ImportanceMeta;
    } catch (e) {
      throw new UserError(`importance checkpoint ${dir}: ${META} is not valid JSON (${(e as Error).message})`);
    }
    if (meta?.format !== FORMAT || !meta.net || !Array.isArray(meta.vocab) || !meta.tokenizer) throw new UserError(`importance checkpoint ${dir}: ${META} is not an importance-network record (format ${JSON.stringify(meta?.format)})`);
    const { tensors } = readSafetensors(join(dir, WEIGHTS));
    const w = tensors[HEAD_W], b = tensors[HEAD_B];
    if (!w || !b) throw new UserError(`importance checkpoint ${dir}: ${WEIGHTS} lacks ${HEAD_W} / ${HEAD_B}`);
    const trunkW = Object.fromEntries(Object.entries(tensors).filter(([k]) => k !== HEAD_W && k !== HEAD_B));
    const trunk = Transformer.fromWeights(ImportanceNet.modelConfig(meta.net, meta.vocab.length), trunkW);
    return new ImportanceNet(trunk, tf.variable(tf.tensor(w.data, w.shape), true), tf.variable(tf.tensor(b.data, b.shape), true), meta);
  }

  /** Weights then meta.json, each written to a temporary name and renamed: a folder with a meta.json is complete. */
  save(dir: string, extra: Partial<ImportanceMeta> = {}): void {
    mkdirSync(dir, { recursive: true });
    const tensors = { ...this.trunk.exportWeights(), [HEAD_W]: { shape: this.headW.shape, data: this.headW.dataSync() as Float32Array }, [HEAD_B]: { shape: this.headB.shape, data: this.headB.dataSync() as Float32Array } };
    const tmp = join(dir, `${WEIGHTS}.tmp-${process.pid}`);
    rmSync(join(dir, META), { force: true });
    writeSafetensors(tmp, tensors);
    renameSync(tmp, join(dir, WEIGHTS));
    Object.assign(this.meta, extra);
    writeFileAtomic(join(dir, META), JSON.stringify(this.meta, null, 2) + '\n');
  }

  get params(): Map<string, tf.Variable> {
    return new Map([...this.trunk.params, [HEAD_W, this.headW], [HEAD_B, this.headB]]);
  }

  mapId(id: number): number {
    return this.index.get(id) ?? 0;
  }

  /** f at every position [B, T] of left-padded net ids (differentiable; call inside tidy), within ±(1 − F_CLAMP). */
  rho(ids: tf.Tensor2D, keyMask: tf.Tensor2D): tf.Tensor2D {
    const [B, T] = ids.shape;
    // Only hidden states are used; logitsFrom T−1 keeps the unused projection to one position.
    const h = this.trunk.forward(ids, keyMask, { returnHidden: true, logitsFrom: T - 1 }).hidden!;
    const z = h.reshape([B * T, this.meta.net.d_model]).matMul(this.headW).add(this.headB).reshape([B, T]);
    // (1 − F_CLAMP)·tanh rather than a clip of tanh: a clip has zero gradient past the bound, and a prediction
    // pushed there by pairs with R1 = R2 (frequent with discrete rewards) could never come back.
    return tf.tanh(z).mul(1 - F_CLAMP) as tf.Tensor2D;
  }

  /** f of each whole prefix (policy ids), read at its last token. */
  prefixRho(prefixes: number[][], chunk = 128): number[] {
    const out: number[] = [];
    for (let s = 0; s < prefixes.length; s += chunk) {
      const batch = prefixes.slice(s, s + chunk);
      const r = tf.tidy(() => {
        const { ids, mask, T } = this.leftPadded(batch);
        return this.rho(ids, mask).slice([0, T - 1], [batch.length, 1]).dataSync() as Float32Array;
      });
      out.push(...r);
    }
    return out;
  }

  /**
   * For each episode, ρ_0 at the last prompt token and ρ_t for the prefix that ends at completion token t
   * (t = 1..n), from one causal forward per chunk: prompts left-padded, completions right-padded.
   */
  episodeRho(promptIds: number[][], completionIds: number[][], chunk = 64): { prompt: number[]; tokens: number[][] } {
    const prompt: number[] = [];
    const tokens: number[][] = [];
    for (let s = 0; s < promptIds.length; s += chunk) {
      const ps = promptIds.slice(s, s + chunk), cs = completionIds.slice(s, s + chunk);
      const B = ps.length;
      const P = Math.max(...ps.map((p) => p.length));
      const C = Math.max(1, ...cs.map((c) => c.length));
      const ids = new Int32Array(B * (P + C));
      const km = new Float32Array(B * (P + C));
      for (let b = 0; b < B; b++) {
        const row = b * (P + C);
        ps[b].forEach((id, i) => { ids[row + P - ps[b].length + i] = this.mapId(id); km[row + P - ps[b].length + i] = 1; });
        cs[b].forEach((id, j) => { ids[row + P + j] = this.mapId(id); km[row + P + j] = 1; });
      }
      const r = tf.tidy(() => this.rho(tf.tensor2d(ids, [B, P + C], 'int32'), tf.tensor2d(km, [B, P + C])).slice([0, P - 1], [B, C + 1]).arraySync() as number[][]);
      r.forEach((row, b) => { prompt.push(row[0]); tokens.push(row.slice(1, 1 + cs[b].length)); });
    }
    return { prompt, tokens };
  }

  leftPadded(prefixes: number[][]): { ids: tf.Tensor2D; mask: tf.Tensor2D; T: number } {
    const B = prefixes.length;
    const T = Math.max(...prefixes.map((p) => p.length));
    const ids = new Int32Array(B * T);
    const mask = new Float32Array(B * T);
    prefixes.forEach((p, b) => p.forEach((id, i) => { ids[b * T + T - p.length + i] = this.mapId(id); mask[b * T + T - p.length + i] = 1; }));
    return { ids: tf.tensor2d(ids, [B, T], 'int32'), mask: tf.tensor2d(mask, [B, T]), T };
  }

  dispose(): void {
    this.trunk.dispose();
    this.headW.dispose();
    this.headB.dispose();
  }
}

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
  const promptId = col(t, 'prompt_id'), promptText = col(t, 'prompt_text'), group = col(t, 'group_id'), pair = col(t, 'pair_id');
  const split = col(t, 'split_token_idx'), ids = col(t, 'completion_token_ids');
  const r = col(t, reward), m = col(t, `${reward}_group_mean`), v = col(t, `${reward}_group_var`);
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
    if (!(variance > ZERO_VAR)) { skipped.add(group[a]); skippedPairs++; continue; }
    const t0 = Number(split[a]);
    const ia = Array.from(ids[a] as ArrayLike<number>), ib = Array.from(ids[b] as ArrayLike<number>);
    for (let k = 0; k < t0; k++) if (ia[k] !== ib[k]) throw new UserError(`rollouts file: pair ${key} does not share its first ${t0} tokens (split_token_idx)`);
    const text = String(promptText[a]);
    let p = promptCache.get(text);
    if (!p) { p = tokenizer.encodePrompt(text); promptCache.set(text, p); }
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

export interface ImportanceMetrics {
  /** pairs of the training prompts (validation included), and those the net is fitted on are train − validation */
  train_pairs: number;
  validation_pairs: number;
  heldout_pairs: number;
  train_prompts: number;
  validation_prompts: number;
  heldout_prompts: number;
  skipped_groups: number;
  skipped_pairs: number;
  /** the constant-correlation baseline, fitted by maximum likelihood on the training pairs */
  constant_f: number;
  /** mean NLL per pair (nats, constants included) */
  train_nll: number;
  train_nll_constant: number;
  /** best validation NLL, at selected_step (null without a validation split) */
  validation_nll: number | null;
  heldout_nll: number;
  heldout_nll_constant: number;
  /** f = 0: the two continuations independent */
  heldout_nll_independent: number;
  /** heldout_nll_constant − heldout_nll: > 0 when the net beats the baseline */
  heldout_gain: number;
  heldout_f_mean: number;
  heldout_f_std: number;
  steps: number;
  /** the step whose weights were kept (0: the constant baseline the head starts at) */
  selected_step: number;
}

const zOf = (p: PairExample) => ({ z1: (p.r1 - p.mean) / Math.sqrt(p.var), z2: (p.r2 - p.mean) / Math.sqrt(p.var) });
const meanOf = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Split by prompt: every pair of a held-out prompt is held out. */
export function splitByPrompt(pairs: PairExample[], heldout: number, seed: number, tag = 'importance-split'): { train: PairExample[]; test: PairExample[] } {
  const prompts = [...new Set(pairs.map((p) => p.prompt))];
  if (prompts.length < 2) throw new UserError(`the rollouts have ${prompts.length} prompt(s) with reward variance; a train/held-out split by prompt needs at least 2 (generate more groups)`);
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
export function trainImportance(data: PairData, o: TrainImportanceOptions): { net: ImportanceNet; metrics: ImportanceMetrics } {
  const log = o.log ?? (() => {});
  const seed = o.seed ?? 1;
  const steps = o.steps ?? 300;
  const batchSize = o.batchSize ?? 64;
  const evalEvery = o.evalEvery ?? 25;
  if (data.pairs.length === 0) {
    throw new UserError(`no pair with reward variance to train on (${data.skippedGroups} of ${data.groups} groups have zero variance): `
      + 'generate the rollouts with a trained policy (--checkpoint) or more groups');
  }
  const { train, test } = splitByPrompt(data.pairs, o.heldout ?? 0.2, seed);
  const trainPrompts = new Set(train.map((p) => p.prompt)).size;
  const { train: fit, test: val } = trainPrompts >= 2 && (o.validation ?? 0.15) > 0
    ? splitByPrompt(train, o.validation ?? 0.15, seed, 'importance-validation') : { train, test: [] as PairExample[] };
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
  const snapshot = () => new Map([...params].map(([k, v]) => [k, (v.dataSync() as Float32Array).slice()]));
  const validate = () => meanNll(val, net.prefixRho(val.map((p) => p.prefix)));
  let best = { step: 0, nll: val.length ? validate() : NaN, weights: val.length ? snapshot() : null };
  let order: number[] = [];
  let running = 0;
  try {
    for (let step = 1; step <= steps; step++) {
      if (order.length < batchSize) order = order.concat(shuffle(rng, fit.map((_, i) => i)));
      const idx = order.splice(0, Math.min(batchSize, fit.length));
      const { value, grads } = tf.variableGrads(() => {
        const { ids, mask, T } = net.leftPadded(idx.map((i) => fit[i].prefix));
        const f = net.rho(ids, mask).slice([0, T - 1], [idx.length, 1]).reshape([idx.length]);
        const z1 = tf.tensor1d(idx.map((i) => fitZ[i].z1));
        const z2 = tf.tensor1d(idx.map((i) => fitZ[i].z2));
        const q = tf.sub(1, f.square());
        // The f-dependent part of pairNll; log 2π + log v does not change the gradient.
        return tf.mean(q.log().mul(0.5).add(z1.square().add(z2.square()).sub(f.mul(z1).mul(z2).mul(2)).div(q.mul(2)))) as tf.Scalar;
      }, [...params.values()]);
      running = step === 1 ? value.dataSync()[0] : 0.95 * running + 0.05 * value.dataSync()[0];
      value.dispose();
      const named = Object.fromEntries(Object.entries(grads).map(([k, g]) => [byVar.get(k) ?? k, g]));
      const clipped = clipByGlobalNorm(named, 1.0);
      if (Number.isFinite(clipped.norm)) opt.apply(params, clipped.grads);
      tf.dispose(Object.values(clipped.grads));
      if (val.length && (step % evalEvery === 0 || step === steps)) {
        const v = validate();
        if (v < best.nll) best = { step, nll: v, weights: snapshot() };
        log(`importance step ${step}/${steps}: train NLL (f-dependent part, running mean) ${running.toFixed(4)}, validation NLL ${v.toFixed(4)} (best ${best.nll.toFixed(4)} at step ${best.step})`);
      } else if (step % 50 === 0 || step === steps) {
        log(`importance step ${step}/${steps}: train NLL (f-dependent part, running mean) ${running.toFixed(4)}`);
      }
    }
  } finally {
    opt.dispose();
  }
  if (best.weights) for (const [k, v] of params) v.assign(tf.tensor(best.weights.get(k)!, v.shape));
  const fTest = net.prefixRho(test.map((p) => p.prefix));
  const fTrain = net.prefixRho(train.map((p) => p.prefix));
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
    train_nll_constant: meanNll(train, train.map(() => f0)),
    validation_nll: val.length ? best.nll : null,
    heldout_nll: meanNll(test, fTest),
    heldout_nll_constant: meanNll(test, test.map(() => f0)),
    heldout_nll_independent: meanNll(test, test.map(() => 0)),
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

// ---------------------------------------------------------------------------------------------------------------
// The command

/** The tokenizer a config's runs use, without loading the policy's weights. */
export function configTokenizer(cfg: CreditConfig): Tokenizer {
  if (cfg.model.source === 'hf') {
    if (!cfg.model.path) throw new UserError('model.path: required when model.source is hf');
    return HfTokenizer.fromDir(cfg.model.path);
  }
  return CharTokenizer.fromAlphabet(makeTask(cfg.task, childSeed(cfg.seed, 'task')).alphabet());
}

const USAGE = 'usage: credit-lens importance train <config.credit.yaml> --rollouts <rollouts.parquet> [--out dir] [--steps N] '
  + '[--batch-size N] [--lr x] [--d-model N] [--layers N] [--heads N] [--heldout fraction] [--validation fraction] [--reward column] [--set key=value]...';


export interface ImportanceTrainResult { dir: string; metrics: ImportanceMetrics }

/** `credit-lens importance train`, as a function. */
export async function importanceTrain(o: {
  configPath: string; rollouts: string; out?: string; sets?: string[]; steps?: number; batchSize?: number; lr?: number;
  net?: Partial<ImportanceNetConfig>; heldout?: number; validation?: number; reward?: string; log?: (m: string) => void;
}): Promise<ImportanceTrainResult> {
  const t0 = performance.now();
  const log = o.log ?? (() => {});
  const { config: cfg } = loadConfig(o.configPath, o.sets ?? []);
  if (o.out && existsSync(o.out) && !statSync(o.out).isDirectory()) throw new UserError(`--out ${o.out}: exists and is not a folder`);
  await initBackend(cfg.backend, log);
  const tokenizer = configTokenizer(cfg);
  const table = await readParquetTable(o.rollouts);
  const data = pairsFromTable(table, tokenizer, o.reward ?? 'reward');
  log(`${data.pairs.length} pairs from ${data.groups} groups; ${data.skippedGroups} zero-variance groups (${data.skippedPairs} pairs) skipped`);
  const net = { max_seq_len: cfg.model.max_seq_len, ...o.net };
  const { net: model, metrics } = trainImportance(data, {
    net, steps: o.steps, batchSize: o.batchSize, lr: o.lr, heldout: o.heldout, validation: o.validation, seed: cfg.seed, tokenizer: tokenizerId(tokenizer), log,
  });
  try {
    const dir = o.out ?? createOutputFolder(cfg.output_dir, cfg.name, 'importance', new Date());
    model.save(dir, {
      training: {
        rollouts: o.rollouts, reward: o.reward ?? 'reward', steps: o.steps ?? 300, batch_size: o.batchSize ?? 64, lr: o.lr ?? 1e-3,
        heldout: o.heldout ?? 0.2, validation: o.validation ?? 0.15, seed: cfg.seed, runtime_s: (performance.now() - t0) / 1000,
      },
    });
    return { dir, metrics };
  } finally {
    model.dispose();
  }
}

/** `credit-lens importance train …` (argv after "importance"). Prints the checkpoint folder on stdout. */
export async function cmdImportance(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'train') throw new UserError(`importance: unknown subcommand ${sub === undefined ? '(none)' : JSON.stringify(sub)}\n${USAGE}`);
  const a = parseArgs(rest, { valued: ['rollouts', 'out', 'steps', 'batch-size', 'lr', 'd-model', 'layers', 'heads', 'heldout', 'validation', 'reward', 'set'] }, USAGE);
  if (a.positional.length !== 1) throw new UserError(`importance train needs exactly one config file\n${USAGE}`);
  const rollouts = a.flags.get('rollouts')?.at(-1);
  if (!rollouts) throw new UserError(`importance train needs --rollouts <rollouts.parquet> (from \`credit-lens rollouts paired\`)\n${USAGE}`);
  const net: Partial<ImportanceNetConfig> = {};
  const d = intFlag(a, 'd-model', 2), l = intFlag(a, 'layers', 1), h = intFlag(a, 'heads', 1);
  if (d !== undefined) net.d_model = d;
  if (l !== undefined) net.n_layers = l;
  if (h !== undefined) net.n_heads = h;
  if (d !== undefined) net.d_ff = 2 * d;
  const r = await importanceTrain({
    configPath: a.positional[0], rollouts, out: a.flags.get('out')?.at(-1), sets: a.flags.get('set'), net,
    steps: intFlag(a, 'steps', 1), batchSize: intFlag(a, 'batch-size', 1),
    lr: numFlag(a, 'lr', (x) => x > 0, 'a positive number'),
    heldout: numFlag(a, 'heldout', (x) => x > 0 && x < 1, 'a fraction in (0, 1)'),
    validation: numFlag(a, 'validation', (x) => x >= 0 && x < 1, 'a fraction in [0, 1)'),
    reward: a.flags.get('reward')?.at(-1), log: (m) => process.stderr.write(m + '\n'),
  });
  const m = r.metrics;
  process.stderr.write(`held-out NLL per pair: net ${m.heldout_nll.toFixed(4)}  constant f=${m.constant_f.toFixed(3)} ${m.heldout_nll_constant.toFixed(4)}  `
    + `independent ${m.heldout_nll_independent.toFixed(4)}  (${m.heldout_pairs} pairs of ${m.heldout_prompts} prompts; ${m.train_pairs} training pairs; `
    + `weights of step ${m.selected_step})\n`);
  console.log(r.dir);
  return 0;
}
