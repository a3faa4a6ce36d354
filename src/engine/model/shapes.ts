// The transformer's configuration and parameter layout: sizes, checks, the stored name and shape of every weight
// (Linear weights as [in, out], fused q|k|v and gate|up; see model.ts), and the RoPE frequencies.
import * as tf from '@tensorflow/tfjs';
import { UserError } from '../core/errors';
import type { HalfWeight } from './half';

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
 * consume the cache they are given (it must not be used afterwards) and return the one to use next;
 * `disposeCache` frees it.
 */
export interface KvCache {
  /**
   * rotated keys per layer: [B, nKvHeads, T, headDim], T = length; in place: [B, nKvHeads, headDim, capacity],
   * transposed so that a query's scores are one pass over contiguous rows
   */
  keys: tf.Tensor4D[];
  /** values per layer, [B, nKvHeads, T, headDim] (T = capacity in place) */
  values: tf.Tensor4D[];
  /** [B, T] float32, 1 = real token, 0 = left padding or (in place) a position not yet written */
  keyMask: tf.Tensor2D;
  /** number of positions held (the next token's position) */
  length: number;
  /**
   * true: preallocated for `capacity` positions and written in place by the wasm decode kernel (no copy of the
   * cache per step); false: every step concatenates the new position.
   */
  inPlace: boolean;
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

export interface PrefillOptions {
  /**
   * Positions the cache should hold without growing (prompt + new tokens); in-place caches that fill up grow by
   * doubling. Ignored by the concatenating cache.
   */
  capacity?: number;
}

/** A projection's weight: float32, or frozen in 16 bits (model.torch_dtype; half.ts). */
export type ProjWeight = tf.Variable | HalfWeight;

export interface Layer {
  ln1: tf.Variable;
  /** [d, (H + 2·Hkv)·hd], columns q | k | v */
  wQkv: ProjWeight;
  bQkv?: tf.Variable;
  wo: ProjWeight;
  ln2: tf.Variable;
  /** [d, 2·dFf], columns gate | up */
  wGateUp: ProjWeight;
  wDown: ProjWeight;
  /** model.lora's adapters of this layer (lora.ts) */
  lora?: LayerLora;
}

/** One adapted module: A [in, r], B [r, out] (the part's own columns of its fused projection). */
export interface LoraPart {
  /** the HF module name, e.g. model.layers.3.self_attn.q_proj */
  module: string;
  A: tf.Variable;
  B: tf.Variable;
}

/** A fused projection's adapters, one slot per column block (null: that block is not adapted). */
export interface LoraSlots {
  parts: (LoraPart | null)[];
  /** each block's width (its columns in the fused output) */
  widths: number[];
}

export interface LayerLora {
  qkv: LoraSlots;
  o: LoraSlots;
  gateUp: LoraSlots;
  down: LoraSlots;
}

/** Which weights train without LoRA: all, or not the embeddings (model.freeze_embeddings), or the last k blocks only. */
export interface TrainableSpec {
  freezeEmbeddings?: boolean;
  /** the last this many blocks (with the final norm, and an untied lm head unless the embeddings are frozen) */
  lastLayers?: number | null;
}

/** Whether the stored parameter `name` trains under `spec`. */
export function isTrainable(cfg: ModelConfig, stored: string, spec: TrainableSpec): boolean {
  // a block of a weight split by the vocabulary (vocab_blocks.ts) trains as its weight does
  const name = stored.replace(/#\d+$/, '');
  if (name === 'model.embed_tokens.weight' || name === 'lm_head.weight') {
    if (spec.freezeEmbeddings) return false;
    // with the last k blocks only, the input embedding stays fixed; an untied output head trains with them
    return !spec.lastLayers || name === 'lm_head.weight';
  }
  const m = /^model\.layers\.(\d+)\./.exec(name);
  if (m && spec.lastLayers) return Number(m[1]) >= cfg.nLayers - spec.lastLayers;
  return true;
}

/**
 * One stored parameter and the HF tensors it holds. `transposed`: a Linear weight stored [in, Σ out] whose HF
 * parts are [out_i, in] (fused projections concatenate their outputs); otherwise the parts are concatenated
 * along their first axis (fused biases) or there is a single part stored as is.
 */
export interface ParamSpec {
  name: string;
  parts: { name: string; hfShape: number[] }[];
  transposed: boolean;
  init: 'normal' | 'residual' | 'ones' | 'zeros';
}

export const MASKED = -1e9;

export function headDimOf(cfg: ModelConfig): number {
  return cfg.headDim ?? cfg.dModel / cfg.nHeads;
}

export function validateConfig(cfg: ModelConfig): void {
  if (cfg.headDim === undefined && cfg.dModel % cfg.nHeads !== 0)
    throw new UserError(`model d_model (${cfg.dModel}) must be divisible by n_heads (${cfg.nHeads})`);
  const hd = headDimOf(cfg);
  const ints: [string, number][] = [
    ['vocabSize', cfg.vocabSize],
    ['dModel', cfg.dModel],
    ['nLayers', cfg.nLayers],
    ['nHeads', cfg.nHeads],
    ['nKvHeads', cfg.nKvHeads],
    ['dFf', cfg.dFf],
    ['maxSeqLen', cfg.maxSeqLen],
    ['headDim', hd],
  ];
  for (const [k, v] of ints) if (!Number.isInteger(v) || v <= 0) throw new UserError(`model ${k} must be a positive integer, got ${v}`);
  if (cfg.nHeads % cfg.nKvHeads !== 0) throw new UserError(`model n_heads (${cfg.nHeads}) must be a multiple of n_kv_heads (${cfg.nKvHeads})`);
  if (hd % 2 !== 0) throw new UserError(`model head dimension must be even for RoPE, got ${hd}`);
  if (!(cfg.ropeTheta > 0)) throw new UserError(`model rope_theta must be positive, got ${cfg.ropeTheta}`);
}

export function paramSpecs(cfg: ModelConfig): ParamSpec[] {
  const d = cfg.dModel;
  const hd = headDimOf(cfg);
  const qDim = cfg.nHeads * hd;
  const kvDim = cfg.nKvHeads * hd;
  const one = (name: string, hfShape: number[], transposed: boolean, init: ParamSpec['init']): ParamSpec => ({
    name,
    parts: [{ name, hfShape }],
    transposed,
    init,
  });
  const specs: ParamSpec[] = [one('model.embed_tokens.weight', [cfg.vocabSize, d], cfg.tieEmbeddings, 'normal')];
  for (let i = 0; i < cfg.nLayers; i++) {
    const p = `model.layers.${i}.`;
    const a = p + 'self_attn.';
    specs.push(one(p + 'input_layernorm.weight', [d], false, 'ones'));
    specs.push({
      name: a + 'qkv_proj.weight',
      transposed: true,
      init: 'normal',
      parts: [
        { name: a + 'q_proj.weight', hfShape: [qDim, d] },
        { name: a + 'k_proj.weight', hfShape: [kvDim, d] },
        { name: a + 'v_proj.weight', hfShape: [kvDim, d] },
      ],
    });
    if (cfg.qkvBias) {
      specs.push({
        name: a + 'qkv_proj.bias',
        transposed: false,
        init: 'zeros',
        parts: [
          { name: a + 'q_proj.bias', hfShape: [qDim] },
          { name: a + 'k_proj.bias', hfShape: [kvDim] },
          { name: a + 'v_proj.bias', hfShape: [kvDim] },
        ],
      });
    }
    specs.push(one(a + 'o_proj.weight', [d, qDim], true, 'residual'));
    specs.push(one(p + 'post_attention_layernorm.weight', [d], false, 'ones'));
    specs.push({
      name: p + 'mlp.gate_up_proj.weight',
      transposed: true,
      init: 'normal',
      parts: [
        { name: p + 'mlp.gate_proj.weight', hfShape: [cfg.dFf, d] },
        { name: p + 'mlp.up_proj.weight', hfShape: [cfg.dFf, d] },
      ],
    });
    specs.push(one(p + 'mlp.down_proj.weight', [d, cfg.dFf], true, 'residual'));
  }
  specs.push(one('model.norm.weight', [d], false, 'ones'));
  if (!cfg.tieEmbeddings) specs.push(one('lm_head.weight', [cfg.vocabSize, d], true, 'normal'));
  return specs;
}

export const sizeOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

/** Stored shape of a parameter: [in, Σ out] when transposed, else the parts stacked on their first axis. */
export function storedShape(s: ParamSpec): number[] {
  const first = s.parts[0].hfShape;
  const stacked = s.parts.reduce((a, p) => a + p.hfShape[0], 0);
  return s.transposed ? [first[1], stacked] : [stacked, ...first.slice(1)];
}

export function transpose2d(data: Float32Array, rows: number, cols: number): Float32Array {
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
