// Seed doc 004, part 2: the importance network f_θ(prefix) ∈ (−1, 1), the correlation of the rewards of two
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
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { Transformer, type ModelConfig } from './model';
import { childSeed, makeRng, randNormal } from '../core/rng';
import { writeFileAtomic } from '../core/files';
import { readSafetensors, writeSafetensors } from './safetensors';
import { CharTokenizer } from './tokenizer';
import type { Tokenizer } from '../core/types';
import { ENGINE_VERSION } from '../core/version';

/** |f| stays within 1 − F_CLAMP so the bivariate normal stays proper (f is clamped to ±(1 − 1e-4)). */
export const F_CLAMP = 1e-4;
/** A group whose reward variance is at most this has no pair information (z-scores undefined): skipped. */
export const ZERO_VAR = 1e-12;
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
  let A = 0,
    C = 0;
  for (const p of pairs) {
    A += p.z1 * p.z1 + p.z2 * p.z2;
    C += p.z1 * p.z2;
  }
  A /= pairs.length;
  C /= pairs.length;
  const lo = -1 + F_CLAMP,
    hi = 1 - F_CLAMP;
  const obj = (f: number) => 0.5 * Math.log(1 - f * f) + (A - 2 * f * C) / (2 * (1 - f * f));
  const N = 2000;
  let best = 0,
    bestV = Infinity;
  for (let i = 0; i <= N; i++) {
    const f = lo + ((hi - lo) * i) / N;
    const v = obj(f);
    if (v < bestV) {
      bestV = v;
      best = i;
    }
  }
  let a = lo + ((hi - lo) * Math.max(0, best - 1)) / N;
  let b = lo + ((hi - lo) * Math.min(N, best + 1)) / N;
  const g = (Math.sqrt(5) - 1) / 2;
  for (let it = 0; it < 100 && b - a > 1e-12; it++) {
    const c = b - g * (b - a),
      d = a + g * (b - a);
    if (obj(c) < obj(d)) b = d;
    else a = c;
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
      arch: 'qwen2',
      vocabSize: vocabLen + 1,
      dModel: net.d_model,
      nLayers: net.n_layers,
      nHeads: net.n_heads,
      nKvHeads: net.n_heads,
      dFf: net.d_ff,
      maxSeqLen: net.max_seq_len,
      ropeTheta: 10000,
      rmsEps: 1e-6,
      tieEmbeddings: true,
      qkvBias: true,
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
    if (!existsSync(metaPath))
      throw new UserError(`importance checkpoint ${dir}: no ${META} (train one with \`credit-lens importance train <config> --rollouts <parquet>\`)`);
    let meta: ImportanceMeta;
    try {
      meta = JSON.parse(readFileSync(metaPath, 'utf8')) as ImportanceMeta;
    } catch (e) {
      throw new UserError(`importance checkpoint ${dir}: ${META} is not valid JSON (${(e as Error).message})`);
    }
    if (meta?.format !== FORMAT || !meta.net || !Array.isArray(meta.vocab) || !meta.tokenizer)
      throw new UserError(`importance checkpoint ${dir}: ${META} is not an importance-network record (format ${JSON.stringify(meta?.format)})`);
    const { tensors } = readSafetensors(join(dir, WEIGHTS));
    const w = tensors[HEAD_W],
      b = tensors[HEAD_B];
    if (!w || !b) throw new UserError(`importance checkpoint ${dir}: ${WEIGHTS} lacks ${HEAD_W} / ${HEAD_B}`);
    const trunkW = Object.fromEntries(Object.entries(tensors).filter(([k]) => k !== HEAD_W && k !== HEAD_B));
    const trunk = Transformer.fromWeights(ImportanceNet.modelConfig(meta.net, meta.vocab.length), trunkW);
    return new ImportanceNet(trunk, tf.variable(tf.tensor(w.data, w.shape), true), tf.variable(tf.tensor(b.data, b.shape), true), meta);
  }

  /** Weights then meta.json, each written to a temporary name and renamed: a folder with a meta.json is complete. */
  async save(dir: string, extra: Partial<ImportanceMeta> = {}): Promise<void> {
    mkdirSync(dir, { recursive: true });
    const tensors = {
      ...(await this.trunk.readWeights()),
      [HEAD_W]: { shape: this.headW.shape, data: (await this.headW.data()) as Float32Array },
      [HEAD_B]: { shape: this.headB.shape, data: (await this.headB.data()) as Float32Array },
    };
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
    const z = h
      .reshape([B * T, this.meta.net.d_model])
      .matMul(this.headW)
      .add(this.headB)
      .reshape([B, T]);
    // (1 − F_CLAMP)·tanh rather than a clip of tanh: a clip has zero gradient past the bound, and a prediction
    // pushed there by pairs with R1 = R2 (frequent with discrete rewards) could never come back.
    return tf.tanh(z).mul(1 - F_CLAMP) as tf.Tensor2D;
  }

  /** f of each whole prefix (policy ids), read at its last token. */
  async prefixRho(prefixes: number[][], chunk = 128): Promise<number[]> {
    const out: number[] = [];
    for (let s = 0; s < prefixes.length; s += chunk) {
      const batch = prefixes.slice(s, s + chunk);
      const t = tf.tidy(() => {
        const { ids, mask, T } = this.leftPadded(batch);
        return this.rho(ids, mask).slice([0, T - 1], [batch.length, 1]);
      });
      out.push(...((await t.data()) as Float32Array));
      t.dispose();
    }
    return out;
  }

  /**
   * For each episode, ρ_0 at the last prompt token and ρ_t for the prefix that ends at completion token t
   * (t = 1..n), from one causal forward per chunk: prompts left-padded, completions right-padded. ρ_n, after the
   * final token, is defined as 1, not predicted: the finished completion fixes its reward, and the net never trains
   * on a whole completion as a prefix (a pair always differs after its shared prefix; paired.ts).
   */
  async episodeRho(promptIds: number[][], completionIds: number[][], chunk = 64): Promise<{ prompt: number[]; tokens: number[][] }> {
    const prompt: number[] = [];
    const tokens: number[][] = [];
    for (let s = 0; s < promptIds.length; s += chunk) {
      const ps = promptIds.slice(s, s + chunk),
        cs = completionIds.slice(s, s + chunk);
      const B = ps.length;
      const P = Math.max(...ps.map((p) => p.length));
      const C = Math.max(1, ...cs.map((c) => c.length));
      const ids = new Int32Array(B * (P + C));
      const km = new Float32Array(B * (P + C));
      for (let b = 0; b < B; b++) {
        const row = b * (P + C);
        ps[b].forEach((id, i) => {
          ids[row + P - ps[b].length + i] = this.mapId(id);
          km[row + P - ps[b].length + i] = 1;
        });
        cs[b].forEach((id, j) => {
          ids[row + P + j] = this.mapId(id);
          km[row + P + j] = 1;
        });
      }
      const rt = tf.tidy(() => this.rho(tf.tensor2d(ids, [B, P + C], 'int32'), tf.tensor2d(km, [B, P + C])).slice([0, P - 1], [B, C + 1]));
      const r = (await rt.array()) as number[][];
      rt.dispose();
      r.forEach((row, b) => {
        prompt.push(row[0]);
        const t = row.slice(1, 1 + cs[b].length);
        if (t.length) t[t.length - 1] = 1;
        tokens.push(t);
      });
    }
    return { prompt, tokens };
  }

  leftPadded(prefixes: number[][]): { ids: tf.Tensor2D; mask: tf.Tensor2D; T: number } {
    const B = prefixes.length;
    const T = Math.max(...prefixes.map((p) => p.length));
    const ids = new Int32Array(B * T);
    const mask = new Float32Array(B * T);
    prefixes.forEach((p, b) =>
      p.forEach((id, i) => {
        ids[b * T + T - p.length + i] = this.mapId(id);
        mask[b * T + T - p.length + i] = 1;
      }),
    );
    return { ids: tf.tensor2d(ids, [B, T], 'int32'), mask: tf.tensor2d(mask, [B, T]), T };
  }

  dispose(): void {
    this.trunk.dispose();
    this.headW.dispose();
    this.headB.dispose();
  }
}

/** What training measured of a net (trainImportance, training.ts), saved beside its weights. */
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
