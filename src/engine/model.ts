// Decoder-only transformer of the Llama / Qwen2 family (the HF `modeling_llama.py` / `modeling_qwen2.py` math):
// embedding → nLayers × [RMSNorm → GQA self-attention with RoPE → residual → RMSNorm → SwiGLU MLP → residual]
// → final RMSNorm → lm_head.
//
// Layout: parameters keep their Hugging Face names, but every Linear weight is stored as [in, out] (HF stores
// [out, in]) so the forward is `x[N, in] @ W[in, out]` — plain 2-D matmuls, the fast path on the wasm backend.
// With tied embeddings `model.embed_tokens.weight` is stored as [d, V] for the same reason (lm_head is the
// biggest matmul of a decode step), and the embedding lookup gathers its columns instead of its rows.
// exportWeights()/fromWeights() convert from/to the HF layout.
//
// Left padding: every row uses positions 0..T−1 and padded keys are masked out. RoPE makes q·k depend only on
// the position difference, so a left-padded row gives the same logits for its real tokens as the unpadded one.
import * as tf from '@tensorflow/tfjs';
import { UserError } from './errors';
import { makeRng, randNormal } from './rng';

export interface RopeScaling {
  /** `linear`: positions are divided by `factor`; `llama3`: the frequency-dependent scaling of Llama 3.1. */
  type: 'linear' | 'llama3';
  factor: number;
  lowFreqFactor?: number;
  highFreqFactor?: number;
  originalMaxPositionEmbeddings?: number;
}

export interface ModelConfig {
  vocabSize: number;
  dModel: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  dFf: number;
  maxSeqLen: number;
  ropeTheta: number;
  rmsEps: number;
  tieEmbeddings: boolean;
  qkvBias: boolean;
  /** defaults to dModel / nHeads */
  headDim?: number;
  arch: 'llama' | 'qwen2';
  ropeScaling?: RopeScaling;
}

export interface WeightTensor {
  shape: number[];
  data: Float32Array;
}

/**
 * Per-layer attention state of a batch being decoded. Owned by the caller: `decodeStep` and `keepCacheRows`
 * consume the cache they are given (its tensors are disposed) and return a new one; `disposeCache` frees it.
 */
export interface KvCache {
  /** rotated keys per layer, [B, nKvHeads, headDim, T]: stored transposed so q·kᵀ is a plain batched matmul */
  keys: tf.Tensor4D[];
  /** values per layer, [B, nKvHeads, T, headDim] */
  values: tf.Tensor4D[];
  /** [B, T] float32, 1 = real token, 0 = left padding */
  keyMask: tf.Tensor2D;
  /** number of positions held (the next token's position) */
  length: number;
}

export interface ForwardOptions {
  /** also return the final normed hidden states [B, T, d] */
  returnHidden?: boolean;
  /** also return the last layer's attention probabilities [B, H, T, T] */
  returnAttention?: boolean;
  /**
   * Compute logits only for positions logitsFrom..T−1 (logits is then [B, T − logitsFrom, V]). Training only
   * needs the completion's positions; with a 150k vocabulary the prompt's logits would dominate the cost.
   */
  logitsFrom?: number;
}

interface Layer {
  ln1: tf.Variable;
  wq: tf.Variable;
  wk: tf.Variable;
  wv: tf.Variable;
  bq?: tf.Variable;
  bk?: tf.Variable;
  bv?: tf.Variable;
  wo: tf.Variable;
  ln2: tf.Variable;
  wGate: tf.Variable;
  wUp: tf.Variable;
  wDown: tf.Variable;
}

/** One parameter: its HF name, HF shape, and whether it is stored transposed relative to HF. */
interface ParamSpec {
  name: string;
  hfShape: number[];
  transposed: boolean;
  init: 'normal' | 'residual' | 'ones' | 'zeros';
}

const MASKED = -1e9;

export function headDimOf(cfg: ModelConfig): number {
  return cfg.headDim ?? cfg.dModel / cfg.nHeads;
}

function validateConfig(cfg: ModelConfig): void {
  if (cfg.headDim === undefined && cfg.dModel % cfg.nHeads !== 0) throw new UserError(`model d_model (${cfg.dModel}) must be divisible by n_heads (${cfg.nHeads})`);
  const hd = headDimOf(cfg);
  const ints: [string, number][] = [['vocabSize', cfg.vocabSize], ['dModel', cfg.dModel], ['nLayers', cfg.nLayers], ['nHeads', cfg.nHeads],
    ['nKvHeads', cfg.nKvHeads], ['dFf', cfg.dFf], ['maxSeqLen', cfg.maxSeqLen], ['headDim', hd]];
  for (const [k, v] of ints) if (!Number.isInteger(v) || v <= 0) throw new UserError(`model ${k} must be a positive integer, got ${v}`);
  if (cfg.nHeads % cfg.nKvHeads !== 0) throw new UserError(`model n_heads (${cfg.nHeads}) must be a multiple of n_kv_heads (${cfg.nKvHeads})`);
  if (hd % 2 !== 0) throw new UserError(`model head dimension must be even for RoPE, got ${hd}`);
  if (!(cfg.ropeTheta > 0)) throw new UserError(`model rope_theta must be positive, got ${cfg.ropeTheta}`);
}

function paramSpecs(cfg: ModelConfig): ParamSpec[] {
  const d = cfg.dModel;
  const hd = headDimOf(cfg);
  const qDim = cfg.nHeads * hd;
  const kvDim = cfg.nKvHeads * hd;
  const specs: ParamSpec[] = [{ name: 'model.embed_tokens.weight', hfShape: [cfg.vocabSize, d], transposed: cfg.tieEmbeddings, init: 'normal' }];
  for (let i = 0; i < cfg.nLayers; i++) {
    const p = `model.layers.${i}.`;
    specs.push({ name: p + 'input_layernorm.weight', hfShape: [d], transposed: false, init: 'ones' });
    specs.push({ name: p + 'self_attn.q_proj.weight', hfShape: [qDim, d], transposed: true, init: 'normal' });
    specs.push({ name: p + 'self_attn.k_proj.weight', hfShape: [kvDim, d], transposed: true, init: 'normal' });
    specs.push({ name: p + 'self_attn.v_proj.weight', hfShape: [kvDim, d], transposed: true, init: 'normal' });
    if (cfg.qkvBias) {
      specs.push({ name: p + 'self_attn.q_proj.bias', hfShape: [qDim], transposed: false, init: 'zeros' });
      specs.push({ name: p + 'self_attn.k_proj.bias', hfShape: [kvDim], transposed: false, init: 'zeros' });
      specs.push({ name: p + 'self_attn.v_proj.bias', hfShape: [kvDim], transposed: false, init: 'zeros' });
    }
    specs.push({ name: p + 'self_attn.o_proj.weight', hfShape: [d, qDim], transposed: true, init: 'residual' });
    specs.push({ name: p + 'post_attention_layernorm.weight', hfShape: [d], transposed: false, init: 'ones' });
    specs.push({ name: p + 'mlp.gate_proj.weight', hfShape: [cfg.dFf, d], transposed: true, init: 'normal' });
    specs.push({ name: p + 'mlp.up_proj.weight', hfShape: [cfg.dFf, d], transposed: true, init: 'normal' });
    specs.push({ name: p + 'mlp.down_proj.weight', hfShape: [d, cfg.dFf], transposed: true, init: 'residual' });
  }
  specs.push({ name: 'model.norm.weight', hfShape: [d], transposed: false, init: 'ones' });
  if (!cfg.tieEmbeddings) specs.push({ name: 'lm_head.weight', hfShape: [cfg.vocabSize, d], transposed: true, init: 'normal' });
  return specs;
}

function transpose2d(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    for (let c = 0; c < cols; c++) out[c * rows + r] = data[base + c];
  }
  return out;
}

/** RoPE inverse frequencies θ^(−2i/hd), i < hd/2, with HF's `rope_scaling` variants applied. */
export function ropeInvFreq(cfg: ModelConfig): Float64Array {
  const hd = headDimOf(cfg);
  const half = hd / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(cfg.ropeTheta, (2 * i) / hd);
  const s = cfg.ropeScaling;
  if (!s) return inv;
  if (s.type === 'linear') {
    for (let i = 0; i < half; i++) inv[i] /= s.factor;
    return inv;
  }
  // Llama 3.1 (HF `_compute_llama3_parameters`): long wavelengths are slowed down by `factor`, short ones kept,
  // and the band in between interpolated.
  const lowFreqFactor = s.lowFreqFactor ?? 1;
  const highFreqFactor = s.highFreqFactor ?? 4;
  const oldCtx = s.originalMaxPositionEmbeddings ?? 8192;
  const lowFreqWavelen = oldCtx / lowFreqFactor;
  const highFreqWavelen = oldCtx / highFreqFactor;
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / inv[i];
    if (wavelen > lowFreqWavelen) inv[i] = inv[i] / s.factor;
    else if (wavelen >= highFreqWavelen) {
      const smooth = (oldCtx / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      inv[i] = (1 - smooth) * (inv[i] / s.factor) + smooth * inv[i];
    }
  }
  return inv;
}

export class Transformer {
  readonly cfg: ModelConfig;
  /** trainable weights keyed by Hugging Face names (layout: see the file comment) */
  readonly params: Map<string, tf.Variable>;
  private readonly specs: ParamSpec[];
  private readonly layers: Layer[];
  private readonly embed: tf.Variable;
  private readonly finalNorm: tf.Variable;
  private readonly lmHead: tf.Variable | null;
  private readonly hd: number;
  private readonly invFreq: Float64Array;
  /** cos / sign-folded sin tables [len, hd], grown on demand (float64 math, stored float32) */
  private ropeCos = new Float32Array(0);
  private ropeSin = new Float32Array(0);
  private ropeLen = 0;
  private disposed = false;

  private constructor(cfg: ModelConfig, values: Map<string, tf.Tensor>) {
    this.cfg = { ...cfg };
    this.specs = paramSpecs(cfg);
    this.hd = headDimOf(cfg);
    this.invFreq = ropeInvFreq(cfg);
    this.params = new Map();
    for (const s of this.specs) {
      const t = values.get(s.name)!;
      // Unnamed variables: tfjs names must be globally unique and a run holds several models (policy, reference).
      this.params.set(s.name, tf.variable(t, true));
      t.dispose();
    }
    const g = (n: string) => this.params.get(n)!;
    const o = (n: string) => this.params.get(n);
    this.embed = g('model.embed_tokens.weight');
    this.finalNorm = g('model.norm.weight');
    this.lmHead = cfg.tieEmbeddings ? null : g('lm_head.weight');
    this.layers = [];
    for (let i = 0; i < cfg.nLayers; i++) {
      const p = `model.layers.${i}.`;
      this.layers.push({
        ln1: g(p + 'input_layernorm.weight'),
        wq: g(p + 'self_attn.q_proj.weight'), wk: g(p + 'self_attn.k_proj.weight'), wv: g(p + 'self_attn.v_proj.weight'),
        bq: o(p + 'self_attn.q_proj.bias'), bk: o(p + 'self_attn.k_proj.bias'), bv: o(p + 'self_attn.v_proj.bias'),
        wo: g(p + 'self_attn.o_proj.weight'),
        ln2: g(p + 'post_attention_layernorm.weight'),
        wGate: g(p + 'mlp.gate_proj.weight'), wUp: g(p + 'mlp.up_proj.weight'), wDown: g(p + 'mlp.down_proj.weight'),
      });
    }
  }

  /**
   * Seeded init: N(0, 0.02²) for embeddings and projections, with the projections that write into the residual
   * stream (o_proj, down_proj) scaled by 1/√(2·nLayers) as in GPT-2; norms 1, biases 0.
   */
  static init(cfg: ModelConfig, seed: number): Transformer {
    validateConfig(cfg);
    const rng = makeRng(seed);
    const std = 0.02;
    const resStd = std / Math.sqrt(2 * cfg.nLayers);
    const values = new Map<string, tf.Tensor>();
    for (const s of paramSpecs(cfg)) {
      const n = s.hfShape.reduce((a, b) => a * b, 1);
      const data = new Float32Array(n);
      if (s.init === 'ones') data.fill(1);
      else if (s.init === 'normal' || s.init === 'residual') {
        const sd = s.init === 'normal' ? std : resStd;
        for (let i = 0; i < n; i++) data[i] = sd * randNormal(rng);
      }
      const shape = s.transposed ? [s.hfShape[1], s.hfShape[0]] : s.hfShape;
      values.set(s.name, tf.tensor(data, shape, 'float32'));
    }
    return new Transformer(cfg, values);
  }

  /** Build from tensors in the Hugging Face layout (Linear weights [out, in]). */
  static fromWeights(cfg: ModelConfig, w: Record<string, WeightTensor>): Transformer {
    validateConfig(cfg);
    const specs = paramSpecs(cfg);
    const known = new Set(specs.map((s) => s.name));
    for (const name of Object.keys(w)) {
      // A weight of a layer we do not model (Qwen3's q_norm, a Llama with attention_bias, ...) would be silently
      // dropped and give a different network: refuse instead. Rotary caches of old checkpoints are recomputed.
      if (name.startsWith('model.layers.') && !known.has(name) && !name.endsWith('rotary_emb.inv_freq')) {
        throw new UserError(`checkpoint has tensor ${name}, which this ${cfg.arch} model does not have (different architecture or config?)`);
      }
    }
    const values = new Map<string, tf.Tensor>();
    try {
      for (const s of specs) {
        const t = w[s.name];
        if (!t) throw new UserError(`checkpoint is missing tensor ${s.name} (expected shape [${s.hfShape.join(', ')}])`);
        const n = s.hfShape.reduce((a, b) => a * b, 1);
        if (t.shape.length !== s.hfShape.length || t.shape.some((v, i) => v !== s.hfShape[i]) || t.data.length !== n) {
          throw new UserError(`checkpoint tensor ${s.name} has shape [${t.shape.join(', ')}] (${t.data.length} values), expected [${s.hfShape.join(', ')}]`);
        }
        values.set(s.name, s.transposed
          ? tf.tensor(transpose2d(t.data, s.hfShape[0], s.hfShape[1]), [s.hfShape[1], s.hfShape[0]], 'float32')
          : tf.tensor(t.data.slice(), s.hfShape, 'float32'));
      }
    } catch (e) {
      for (const v of values.values()) v.dispose();
      throw e;
    }
    return new Transformer(cfg, values);
  }

  /** All weights in the Hugging Face layout and names (copies). */
  exportWeights(): Record<string, WeightTensor> {
    const out: Record<string, WeightTensor> = {};
    for (const s of this.specs) {
      const data = this.params.get(s.name)!.dataSync() as Float32Array;
      out[s.name] = {
        shape: s.hfShape.slice(),
        data: s.transposed ? transpose2d(data, s.hfShape[1], s.hfShape[0]) : Float32Array.from(data),
      };
    }
    return out;
  }

  /** Full forward. ids [B,T] int32; keyMask [B,T] (1 = real token, 0 = left padding). */
  forward(ids: tf.Tensor2D, keyMask: tf.Tensor2D, opts: ForwardOptions = {}): { logits: tf.Tensor3D; hidden?: tf.Tensor3D; attention?: tf.Tensor4D } {
    this.checkLive();
    const [B, T] = ids.shape;
    const from = opts.logitsFrom ?? 0;
    if (!Number.isInteger(from) || from < 0 || from >= T) throw new Error(`logitsFrom ${from} outside [0, ${T})`);
    return tf.tidy(() => {
      const r = this.run(ids, tf.cast(keyMask, 'float32') as tf.Tensor2D, 0, null, !!opts.returnAttention);
      const h = from === 0 ? r.hidden : r.hidden.slice([0, from, 0], [B, T - from, this.cfg.dModel]);
      const logits = this.project(h.reshape([B * (T - from), this.cfg.dModel]) as tf.Tensor2D).reshape([B, T - from, this.cfg.vocabSize]) as tf.Tensor3D;
      const out: { logits: tf.Tensor3D; hidden?: tf.Tensor3D; attention?: tf.Tensor4D } = { logits };
      if (opts.returnHidden) out.hidden = r.hidden;
      if (opts.returnAttention) out.attention = r.attention!;
      return out;
    });
  }

  /** Run the prompts and keep their keys/values. Returns the logits of the last position, [B, V]. */
  prefill(ids: tf.Tensor2D, keyMask: tf.Tensor2D): { logits: tf.Tensor2D; cache: KvCache } {
    this.checkLive();
    const [B, T] = ids.shape;
    const res = tf.tidy(() => {
      const mask = tf.cast(keyMask, 'float32') as tf.Tensor2D;
      const r = this.run(ids, mask, 0, null, false);
      const last = r.hidden.slice([0, T - 1, 0], [B, 1, this.cfg.dModel]).reshape([B, this.cfg.dModel]) as tf.Tensor2D;
      return { logits: this.project(last), keys: r.keys, values: r.values, keyMask: mask };
    });
    return { logits: res.logits, cache: { keys: res.keys, values: res.values, keyMask: res.keyMask, length: T } };
  }

  /**
   * Feed one token per row (ids, length B) at position cache.length. Consumes `cache` (its tensors are
   * disposed) and returns the extended cache with the next-token logits [B, V].
   */
  decodeStep(cache: KvCache, ids: ArrayLike<number>): { logits: tf.Tensor2D; cache: KvCache } {
    this.checkLive();
    const B = cache.keyMask.shape[0];
    if (ids.length !== B) throw new Error(`decodeStep: ${ids.length} ids for a cache of ${B} rows`);
    const res = tf.tidy(() => {
      const idT = tf.tensor2d(Int32Array.from(ids), [B, 1], 'int32');
      const mask = tf.concat([cache.keyMask, tf.ones([B, 1])], 1) as tf.Tensor2D;
      const r = this.run(idT, mask, cache.length, cache, false);
      return { logits: this.project(r.hidden.reshape([B, this.cfg.dModel]) as tf.Tensor2D), keys: r.keys, values: r.values, keyMask: mask };
    });
    const length = cache.length + 1;
    this.disposeCache(cache);
    return { logits: res.logits, cache: { keys: res.keys, values: res.values, keyMask: res.keyMask, length } };
  }

  /** Keep only the given rows (in that order), e.g. to drop finished sequences. Consumes `cache`. */
  keepCacheRows(cache: KvCache, rows: number[]): KvCache {
    const res = tf.tidy(() => {
      const idx = tf.tensor1d(Int32Array.from(rows), 'int32');
      return {
        keys: cache.keys.map((k) => tf.gather(k, idx, 0) as tf.Tensor4D),
        values: cache.values.map((v) => tf.gather(v, idx, 0) as tf.Tensor4D),
        keyMask: tf.gather(cache.keyMask, idx, 0) as tf.Tensor2D,
      };
    });
    const length = cache.length;
    this.disposeCache(cache);
    return { ...res, length };
  }

  disposeCache(cache: KvCache): void {
    for (const t of cache.keys) t.dispose();
    for (const t of cache.values) t.dispose();
    cache.keyMask.dispose();
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const v of this.params.values()) v.dispose();
  }

  private checkLive(): void {
    if (this.disposed) throw new Error('Transformer used after dispose()');
  }

  /** logits = h @ lm_head; h [N, d] → [N, V] */
  private project(h: tf.Tensor2D): tf.Tensor2D {
    return tf.matMul(h, this.lmHead ?? this.embed);
  }

  private rmsNorm(x: tf.Tensor2D, w: tf.Variable): tf.Tensor2D {
    const ms = tf.mean(tf.square(x), -1, true);
    return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, this.cfg.rmsEps))), w) as tf.Tensor2D;
  }

  private ensureRope(len: number): void {
    if (len <= this.ropeLen) return;
    const n = Math.max(len, this.ropeLen * 2, 64);
    const hd = this.hd;
    const half = hd / 2;
    const cos = new Float32Array(n * hd);
    const sin = new Float32Array(n * hd);
    for (let p = 0; p < n; p++) {
      for (let i = 0; i < half; i++) {
        const a = p * this.invFreq[i];
        const c = Math.cos(a);
        const s = Math.sin(a);
        cos[p * hd + i] = c;
        cos[p * hd + half + i] = c;
        // rotate_half(x) = [−x2, x1]; with roll(x) = [x2, x1] that is roll(x)·[−1…, +1…], folded into sin.
        sin[p * hd + i] = -s;
        sin[p * hd + half + i] = s;
      }
    }
    this.ropeCos = cos;
    this.ropeSin = sin;
    this.ropeLen = n;
  }

  /** x [B,T,h,hd] → x·cos + rotate_half(x)·sin at positions pos0..pos0+T−1 (HF `apply_rotary_pos_emb`). */
  private rope(x: tf.Tensor4D, cos: tf.Tensor4D, sin: tf.Tensor4D): tf.Tensor4D {
    const half = this.hd / 2;
    const [b, t, h] = x.shape;
    const x1 = tf.slice(x, [0, 0, 0, 0], [b, t, h, half]);
    const x2 = tf.slice(x, [0, 0, 0, half], [b, t, h, half]);
    return tf.add(tf.mul(x, cos), tf.mul(tf.concat([x2, x1], 3), sin)) as tf.Tensor4D;
  }

  /**
   * The shared layer stack. mask [B, past + T] covers the cached keys and the new ones. Returns the final normed
   * hidden states [B, T, d] and, per layer, the full keys/values (past + new) for the cache.
   */
  private run(ids: tf.Tensor2D, mask: tf.Tensor2D, pos0: number, past: KvCache | null, wantAttention: boolean) {
    const cfg = this.cfg;
    const [B, T] = ids.shape;
    const N = B * T;
    const d = cfg.dModel;
    const hd = this.hd;
    const H = cfg.nHeads;
    const Hkv = cfg.nKvHeads;
    const rep = H / Hkv;
    const Tk = pos0 + T;

    this.ensureRope(Tk);
    const cosArr = this.ropeCos.subarray(pos0 * hd, Tk * hd);
    const sinArr = this.ropeSin.subarray(pos0 * hd, Tk * hd);
    const cos = tf.tensor4d(cosArr, [1, T, 1, hd]);
    const sin = tf.tensor4d(sinArr, [1, T, 1, hd]);
    // 1/√hd folded into q's rotation tables: one [T, hd] multiply instead of one over the scores.
    const scale = 1 / Math.sqrt(hd);
    const cosQ = tf.mul(cos, scale) as tf.Tensor4D;
    const sinQ = tf.mul(sin, scale) as tf.Tensor4D;

    // Additive mask [B, 1, T, Tk]: key j is visible to query i (absolute position pos0+i) iff j ≤ pos0+i and j is
    // a real token. −1e9 rather than −∞ so a padded query row (all keys hidden) stays finite instead of NaN.
    const causal = new Float32Array(T * Tk);
    for (let i = 0; i < T; i++) for (let j = 0; j <= pos0 + i; j++) causal[i * Tk + j] = 1;
    const allowed = tf.mul(tf.tensor4d(causal, [1, 1, T, Tk]), mask.reshape([B, 1, 1, Tk]));
    const maskAdd = tf.mul(tf.sub(1, allowed), MASKED);

    const flat = ids.reshape([N]);
    let x: tf.Tensor2D = this.cfg.tieEmbeddings
      ? (tf.transpose(tf.gather(this.embed, flat, 1)) as tf.Tensor2D)
      : (tf.gather(this.embed, flat, 0) as tf.Tensor2D);

    const keys: tf.Tensor4D[] = [];
    const values: tf.Tensor4D[] = [];
    let attention: tf.Tensor4D | undefined;
    for (let li = 0; li < this.layers.length; li++) {
      const L = this.layers[li];
      const h = this.rmsNorm(x, L.ln1);
      let q = tf.matMul(h, L.wq) as tf.Tensor2D;
      let k = tf.matMul(h, L.wk) as tf.Tensor2D;
      let v = tf.matMul(h, L.wv) as tf.Tensor2D;
      if (L.bq) q = tf.add(q, L.bq);
      if (L.bk) k = tf.add(k, L.bk!);
      if (L.bv) v = tf.add(v, L.bv!);
      const q4 = this.rope(q.reshape([B, T, H, hd]), cosQ, sinQ);
      const k4 = this.rope(k.reshape([B, T, Hkv, hd]), cos, sin);
      // GQA without copying k/v: query heads hkv·rep … hkv·rep+rep−1 share kv head hkv (HF repeat_kv order), so
      // [B,H,T,hd] viewed as [B,Hkv,rep·T,hd] lines every query row up with its kv head.
      const qh = tf.transpose(q4, [0, 2, 1, 3]).reshape([B, Hkv, rep * T, hd]) as tf.Tensor4D;
      let kt = tf.transpose(k4, [0, 2, 3, 1]) as tf.Tensor4D; // [B,Hkv,hd,T]
      let vt = tf.transpose(v.reshape([B, T, Hkv, hd]), [0, 2, 1, 3]) as tf.Tensor4D; // [B,Hkv,T,hd]
      if (past) {
        kt = tf.concat([past.keys[li], kt], 3);
        vt = tf.concat([past.values[li], vt], 2);
      }
      keys.push(kt);
      values.push(vt);
      const scores = tf.add(tf.matMul(qh, kt).reshape([B, H, T, Tk]), maskAdd);
      const probs = tf.softmax(scores) as tf.Tensor4D;
      if (wantAttention && li === this.layers.length - 1) attention = probs;
      const ctx = tf.matMul(probs.reshape([B, Hkv, rep * T, Tk]) as tf.Tensor4D, vt); // [B,Hkv,rep·T,hd]
      const merged = tf.transpose(ctx.reshape([B, H, T, hd]), [0, 2, 1, 3]).reshape([N, H * hd]) as tf.Tensor2D;
      x = tf.add(x, tf.matMul(merged, L.wo));
      const h2 = this.rmsNorm(x, L.ln2);
      const gate = tf.matMul(h2, L.wGate);
      const act = tf.mul(tf.mul(gate, tf.sigmoid(gate)), tf.matMul(h2, L.wUp)) as tf.Tensor2D; // SiLU(gate)·up
      x = tf.add(x, tf.matMul(act, L.wDown));
    }
    const hidden = this.rmsNorm(x, this.finalNorm).reshape([B, T, d]) as tf.Tensor3D;
    return { hidden, keys, values, attention };
  }
}
