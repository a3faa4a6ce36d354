// One file although long: the forward pass, prefill and decode steps, LoRA views and weight export share the layers' weights,
// vocabulary blocks and the RoPE tables' cache (blocked scoring is scoring.ts).
// Decoder-only transformer of the Llama / Qwen2 family (the HF `modeling_llama.py` / `modeling_qwen2.py` math):
// embedding → nLayers × [RMSNorm → GQA self-attention with RoPE → residual → RMSNorm → SwiGLU MLP → residual]
// → final RMSNorm → lm_head.
//
// Layout: every Linear weight is stored as [in, out] (HF stores [out, in]) so the forward is `x[N, in] @ W[in, out]`
// — plain 2-D matmuls, the fast path on the wasm backend. Projections that read the same input are fused into one
// matmul: q/k/v are one `self_attn.qkv_proj` ([d, (H + 2·Hkv)·hd], columns q | k | v, with a fused bias when the
// model has one) and gate/up are one `mlp.gate_up_proj` ([d, 2·dFf], columns gate | up). At the reference sizes a
// decode step is dominated by per-op overhead, and one wide product runs at XNNPACK's full rate where three
// narrow ones do not. With tied embeddings `model.embed_tokens.weight` is stored as [d, V] (lm_head is the biggest
// matmul of a decode step), and the embedding lookup gathers its columns instead of its rows.
// `params` is keyed by these stored names (HF names, with the two fused ones above); exportWeights()/fromWeights()
// convert from/to the HF layout and names (separate q_proj/k_proj/v_proj, gate_proj/up_proj).
//
// Left padding: every row uses positions 0..T−1 and padded keys are masked out. RoPE makes q·k depend only on
// the position difference, so a left-padded row gives the same logits for its real tokens as the unpadded one.
//
// Decoding: where the backend's ops have a decode step (wasm, wasm-blas) the KV cache is preallocated and each step writes
// its keys/values in place with one fused kernel per layer; elsewhere the cache grows by concatenation.
//
// The fused ops (RMSNorm, SwiGLU, the attention heads with RoPE, attention, the decode step) come from the running
// backend's table (ops/): this file never asks which backend runs.
import * as tf from '@tensorflow/tfjs';
import { UserError } from '../core/errors';
import { makeRng, randNormal } from '../core/rng';
import { backendCaps, keepsTables, maxBindingBytes, modelOps, type ModelOps } from './ops';
import { halfWeight, isHalfWeight, readHalf, readHalfSync, roundTo, type HalfFormat, type HalfWeight } from './half';
import {
  blockName,
  blockRanges,
  gatherVocab,
  joinHost,
  joinState,
  projectVocab,
  splitHost,
  splitState,
  vocabBlockWidth,
  type VocabBlocks,
} from './vocab_blocks';
import type { NamedArray } from './optim';
import { scoreHidden, type ScoreOptions, type TokenScores } from './scoring';
import {
  createLora,
  disposeLora,
  importAdapters,
  exportAdapters,
  loraDelta,
  loraScale,
  loraVariables,
  mergeInto,
  type LayerLora,
  type LoraConfig,
  type LoraSlots,
} from './lora';
import {
  headDimOf,
  isTrainable,
  MASKED,
  paramSpecs,
  ropeInvFreq,
  sizeOf,
  storedShape,
  transpose2d,
  validateConfig,
  type KvCache,
  type Layer,
  type ModelConfig,
  type ParamSpec,
  type PrefillOptions,
  type ProjWeight,
  type ForwardOptions,
  type TrainableSpec,
  type WeightTensor,
} from './shapes';

export * from './shapes';

/** A stored weight's values on the host, in its stored layout. */
interface HostTensor {
  data: Float32Array;
  shape: number[];
}

export interface BuildOptions {
  /**
   * Vocabulary entries per block of the embedding and LM head (vocab_blocks.ts). By default the widest block the
   * backend lets one kernel bind: the whole vocabulary on host backends and on GPUs with large bindings.
   */
  vocabBlock?: number;
}

/** What Transformer.storeFrozen did: the weights it took, and their values packed in 16 bits or rounded in float32. */
export interface StoredFrozen {
  weights: number;
  /** values stored two a word (the backend has the 16-bit kernels and the weight's last axis is even) */
  packed: number;
  /** values rounded to the format and kept in float32 (a host backend, or an odd last axis) */
  rounded: number;
}

export class Transformer {
  readonly cfg: ModelConfig;
  /** trainable weights keyed by their stored names (layout and the two fused names: see the file comment) */
  readonly params: Map<string, tf.Variable>;
  private readonly specs: ParamSpec[];
  private readonly layers: Layer[];
  /** the embedding ([d, V] when tied, [V, d] otherwise) and the LM head ([d, V]; the embedding's blocks when tied) */
  private readonly embed: VocabBlocks;
  private readonly finalNorm: tf.Variable;
  private readonly head: VocabBlocks;
  /** the vocabulary-sized weights by name, each in its blocks (one unless a binding limit forced more) */
  private readonly vocab = new Map<string, VocabBlocks>();
  /** the frozen projections stored in 16 bits (storeFrozen), by stored name: no longer in `params` */
  private readonly halves = new Map<string, HalfWeight>();
  private readonly hd: number;
  private readonly invFreq: Float64Array;
  /** cos / sign-folded sin tables [len, hd], grown on demand (float64 math, stored float32) */
  private ropeCos = new Float32Array(0);
  private ropeSin = new Float32Array(0);
  private ropeLen = 0;
  /** ropeTables' last device tensors, by `${pos0},${T}`, oldest first */
  private tables = new Map<string, { cos: tf.Tensor4D; sin: tf.Tensor4D; causal: tf.Tensor4D }>();
  private disposed = false;
  /** model.lora: the adapters' config (null without LoRA) */
  private loraCfg: LoraConfig | null = null;
  /** a view of another model's weights (baseView): disposing it leaves them */
  private sharesParams = false;
  /** what the optimizer updates: every weight, a subset (TrainableSpec), or LoRA's adapters */
  trainable: Map<string, tf.Variable>;

  private constructor(cfg: ModelConfig, values: Map<string, HostTensor>, opts: BuildOptions = {}) {
    this.cfg = { ...cfg };
    this.specs = paramSpecs(cfg);
    this.hd = headDimOf(cfg);
    this.invFreq = ropeInvFreq(cfg);
    this.params = new Map();
    const V = cfg.vocabSize;
    const width = opts.vocabBlock ?? vocabBlockWidth(V, cfg.dModel, maxBindingBytes());
    if (!Number.isInteger(width) || width < 1) throw new Error(`vocabBlock ${width}: a positive integer`);
    const ranges = blockRanges(V, Math.min(width, V));
    // Unnamed variables: tfjs names must be globally unique and a run holds several models (policy, reference).
    const variable = (data: Float32Array, shape: number[]) => tf.tidy(() => tf.variable(tf.tensor(data, shape, 'float32'), true));
    for (const s of this.specs) {
      const v = values.get(s.name)!;
      // the vocabulary's axis in the stored layout: [d, V] for the LM head and a tied embedding, [V, d] otherwise
      const axis = s.name === 'lm_head.weight' ? 1 : s.name === 'model.embed_tokens.weight' ? (cfg.tieEmbeddings ? 1 : 0) : null;
      if (axis === null) {
        this.params.set(s.name, variable(v.data, v.shape));
        continue;
      }
      const shape = v.shape as [number, number];
      const one = ranges.starts.length === 1;
      const vars = (one ? [v.data] : splitHost(v.data, shape, axis, ranges.starts, ranges.widths)).map((data, i) => {
        const t = variable(data, axis === 0 ? [ranges.widths[i], shape[1]] : [shape[0], ranges.widths[i]]);
        this.params.set(one ? s.name : blockName(s.name, i), t);
        return t;
      });
      this.vocab.set(s.name, { name: s.name, shape, axis, ...ranges, vars });
    }
    const g = (n: string) => this.params.get(n)!;
    this.embed = this.vocab.get('model.embed_tokens.weight')!;
    this.finalNorm = g('model.norm.weight');
    this.head = cfg.tieEmbeddings ? this.embed : this.vocab.get('lm_head.weight')!;
    this.layers = [];
    for (let i = 0; i < cfg.nLayers; i++) {
      const p = `model.layers.${i}.`;
      this.layers.push({
        ln1: g(p + 'input_layernorm.weight'),
        wQkv: g(p + 'self_attn.qkv_proj.weight'),
        bQkv: this.params.get(p + 'self_attn.qkv_proj.bias'),
        wo: g(p + 'self_attn.o_proj.weight'),
        ln2: g(p + 'post_attention_layernorm.weight'),
        wGateUp: g(p + 'mlp.gate_up_proj.weight'),
        wDown: g(p + 'mlp.down_proj.weight'),
      });
    }
    this.trainable = this.params;
  }

  /**
   * Adds LoRA adapters (lora.ts) to every layer, seeded; from then on only they train (`trainable`), and readWeights
   * gives the merged weights (the policy that samples).
   */
  enableLora(lora: LoraConfig, seed: number): void {
    if (this.loraCfg) throw new Error('enableLora: the model already has adapters');
    const layers = createLora(this.cfg, lora, seed);
    this.layers.forEach((L, i) => (L.lora = layers[i]));
    this.loraCfg = { ...lora };
    this.trainable = loraVariables(layers);
  }

  /** Trains only the weights `spec` selects (model.freeze_embeddings, model.trainable_layers); not with LoRA. */
  setTrainable(spec: TrainableSpec): void {
    if (this.loraCfg) throw new Error('setTrainable: with LoRA only the adapters train');
    this.trainable = new Map([...this.params].filter(([n]) => isTrainable(this.cfg, n, spec)));
  }

  /**
   * model.torch_dtype: every projection and vocabulary-sized weight that does not train (the base under LoRA, the
   * blocks trainable_layers leaves frozen, frozen embeddings) stored in 16 bits where the backend has the kernels
   * (BackendCaps.halfWeights; half.ts); on a host backend rounded to the format in place, the same numbers in float32.
   * Norms and biases stay float32. Call it once the trainable weights are set and before any view is taken; `all` for a
   * model that never trains (a KL reference).
   */
  async storeFrozen(format: HalfFormat, o: { all?: boolean } = {}): Promise<StoredFrozen> {
    const packed = backendCaps().halfWeights;
    const trains = new Set(o.all ? [] : this.trainable.values());
    const out: StoredFrozen = { weights: 0, packed: 0, rounded: 0 };
    const keys = [
      ['wQkv', 'self_attn.qkv_proj.weight'],
      ['wo', 'self_attn.o_proj.weight'],
      ['wGateUp', 'mlp.gate_up_proj.weight'],
      ['wDown', 'mlp.down_proj.weight'],
    ] as const;
    for (let i = 0; i < this.layers.length; i++) {
      const L = this.layers[i];
      for (const [key, suffix] of keys) {
        const w = L[key];
        if (isHalfWeight(w) || trains.has(w)) continue;
        const name = `model.layers.${i}.${suffix}`;
        const [rows, cols] = w.shape;
        const data = (await w.data()) as Float32Array;
        if (packed && cols % 2 === 0) {
          const h = halfWeight(format, data, rows, cols);
          L[key] = h;
          this.halves.set(name, h);
          this.params.delete(name);
          w.dispose();
          out.packed += rows * cols;
        } else {
          roundInPlace(w, format, data);
          out.rounded += rows * cols;
        }
        out.weights++;
      }
    }
    // the embedding and an untied LM head, where none of their blocks trains and each packs (an even last axis)
    for (const vb of new Set([this.embed, this.head])) {
      if (vb.half || vb.vars.some((v) => trains.has(v))) continue;
      const shapes = vb.vars.map((v) => v.shape as [number, number]);
      const datas: Float32Array[] = [];
      for (const v of vb.vars) datas.push((await v.data()) as Float32Array);
      if (packed && shapes.every(([, cols]) => cols % 2 === 0)) {
        const ops = this.ops();
        vb.half = { blocks: datas.map((data, i) => halfWeight(format, data, ...shapes[i])), matMul: ops.matMulHalf, gather: ops.gatherHalf };
        vb.vars.forEach((v, i) => {
          this.params.delete(vb.vars.length === 1 ? vb.name : blockName(vb.name, i));
          v.dispose();
        });
        vb.vars = [];
        out.packed += vb.shape[0] * vb.shape[1];
      } else {
        vb.vars.forEach((v, i) => roundInPlace(v, format, datas[i]));
        out.rounded += vb.shape[0] * vb.shape[1];
      }
      out.weights++;
    }
    return out;
  }

  /** LoRA's adapters in PEFT's layout and names (empty without LoRA). */
  async readAdapters(): Promise<Record<string, WeightTensor>> {
    return this.loraCfg ? exportAdapters(this.loraLayers()) : {};
  }

  /** Sets the adapters from readAdapters' output (a resumed LoRA run). */
  loadAdapters(w: Record<string, WeightTensor>): void {
    if (!this.loraCfg) throw new Error('loadAdapters: the model has no adapters');
    importAdapters(this.loraLayers(), w);
  }

  /**
   * The same weights without the adapters, sharing them (no copy): LoRA's KL reference is the frozen base. Disposing
   * the view leaves the weights to this model.
   */
  baseView(): Transformer {
    const v = Object.create(Transformer.prototype) as Transformer;
    Object.assign(v, this);
    const fields = v as unknown as { layers: Layer[]; loraCfg: LoraConfig | null; sharesParams: boolean; trainable: Map<string, tf.Variable> };
    fields.layers = this.layers.map((L) => ({ ...L, lora: undefined }));
    fields.loraCfg = null;
    fields.sharesParams = true;
    fields.trainable = new Map();
    return v;
  }

  /**
   * A view of these weights with adapters of its own, set to `adapters` (PEFT layout): a served LoRA adapter on a shared
   * base. Disposing the view disposes its adapters and leaves the weights to this model.
   */
  adaptedView(lora: LoraConfig, adapters: Record<string, WeightTensor>): Transformer {
    const v = this.baseView();
    v.enableLora(lora, 0);
    try {
      v.loadAdapters(adapters);
    } catch (e) {
      v.dispose();
      throw e;
    }
    return v;
  }

  private loraLayers(): LayerLora[] {
    return this.layers.map((L) => L.lora!);
  }

  /** x·W plus the adapters' update of this projection. */
  private proj(x: tf.Tensor2D, w: ProjWeight, slots: LoraSlots | undefined): tf.Tensor2D {
    const y = isHalfWeight(w) ? this.ops().matMulHalf(x, w, null) : (tf.matMul(x, w) as tf.Tensor2D);
    return this.plusDelta(y, x, slots);
  }

  /** y plus the adapters' update of x's projection, where the projection has adapters. */
  private plusDelta(y: tf.Tensor2D, x: tf.Tensor2D, slots: LoraSlots | undefined): tf.Tensor2D {
    const delta = slots && this.loraCfg ? loraDelta(x, slots, loraScale(this.loraCfg)) : null;
    return delta ? (tf.add(y, delta) as tf.Tensor2D) : y;
  }

  /**
   * Seeded init: N(0, 0.02²) for embeddings and projections, with the projections that write into the residual
   * stream (o_proj, down_proj) scaled by 1/√(2·nLayers) as in GPT-2; norms 1, biases 0. Values are drawn per HF
   * tensor in HF order, each filling its [in, out] block, so a seed gives the same network as before the fusion.
   */
  static init(cfg: ModelConfig, seed: number, opts: BuildOptions = {}): Transformer {
    validateConfig(cfg);
    const rng = makeRng(seed);
    const std = 0.02;
    const resStd = std / Math.sqrt(2 * cfg.nLayers);
    const values = new Map<string, HostTensor>();
    for (const s of paramSpecs(cfg)) {
      const shape = storedShape(s);
      const data = new Float32Array(sizeOf(shape));
      if (s.init === 'ones') data.fill(1);
      else if (s.init === 'normal' || s.init === 'residual') {
        const sd = s.init === 'normal' ? std : resStd;
        const cols = shape[shape.length - 1];
        let col0 = 0;
        for (const part of s.parts) {
          // transposed: part i owns columns col0..col0+out_i of every row; else a single part fills everything
          const rows = s.transposed ? shape[0] : data.length / cols;
          const width = s.transposed ? part.hfShape[0] : cols;
          for (let r = 0; r < rows; r++) for (let c = 0; c < width; c++) data[r * cols + col0 + c] = sd * randNormal(rng);
          col0 += width;
        }
      }
      values.set(s.name, { data, shape });
    }
    return new Transformer(cfg, values, opts);
  }

  /** Build from tensors in the Hugging Face layout (Linear weights [out, in]). */
  static fromWeights(cfg: ModelConfig, w: Record<string, WeightTensor>, opts: BuildOptions = {}): Transformer {
    validateConfig(cfg);
    const specs = paramSpecs(cfg);
    const known = new Set(specs.flatMap((s) => s.parts.map((p) => p.name)));
    for (const name of Object.keys(w)) {
      // A weight of a layer we do not model (Qwen3's q_norm, a Llama with attention_bias, ...) would be silently
      // dropped and give a different network: refuse instead. Rotary caches of old checkpoints are recomputed.
      if (name.startsWith('model.layers.') && !known.has(name) && !name.endsWith('rotary_emb.inv_freq')) {
        throw new UserError(`checkpoint has tensor ${name}, which this ${cfg.arch} model does not have (different architecture or config?)`);
      }
    }
    const values = new Map<string, HostTensor>();
    for (const s of specs) {
      const shape = storedShape(s);
      const stacked = new Float32Array(sizeOf(shape));
      let off = 0;
      for (const p of s.parts) {
        const t = w[p.name];
        if (!t) throw new UserError(`checkpoint is missing tensor ${p.name} (expected shape [${p.hfShape.join(', ')}])`);
        const n = sizeOf(p.hfShape);
        if (t.shape.length !== p.hfShape.length || t.shape.some((v, i) => v !== p.hfShape[i]) || t.data.length !== n) {
          throw new UserError(`checkpoint tensor ${p.name} has shape [${t.shape.join(', ')}] (${t.data.length} values), expected [${p.hfShape.join(', ')}]`);
        }
        stacked.set(t.data, off);
        off += n;
      }
      // stacked holds the HF parts one after the other: [Σ out, in] for Linear weights
      values.set(s.name, { data: s.transposed ? transpose2d(stacked, shape[1], shape[0]) : stacked, shape });
    }
    return new Transformer(cfg, values, opts);
  }

  /** All weights in the Hugging Face layout and names (copies), read synchronously: not on webgpu (readWeights). */
  exportWeights(): Record<string, WeightTensor> {
    return this.toHf(
      this.specs.map((s) => {
        const h = this.halves.get(s.name);
        if (h) return readHalfSync(h);
        const blocks = this.vocab.get(s.name)?.half?.blocks;
        return this.joinStored(s.name, blocks ? blocks.map(readHalfSync) : this.storedVars(s.name).map((v) => v.dataSync() as Float32Array));
      }),
    );
  }

  /** exportWeights read asynchronously, as every backend allows (a GPU backend has no synchronous read). */
  async readWeights(): Promise<Record<string, WeightTensor>> {
    const data: Float32Array[] = [];
    for (const s of this.specs) {
      const h = this.halves.get(s.name);
      if (h) {
        data.push(await readHalf(h));
        continue;
      }
      const parts: Float32Array[] = [];
      const blocks = this.vocab.get(s.name)?.half?.blocks;
      if (blocks) for (const b of blocks) parts.push(await readHalf(b));
      else for (const v of this.storedVars(s.name)) parts.push((await v.data()) as Float32Array);
      data.push(this.joinStored(s.name, parts));
    }
    const out = this.toHf(data);
    // with LoRA: the merged weights W + (α/r)·B·A, the policy that samples
    if (this.loraCfg) await mergeInto(out, this.loraLayers(), loraScale(this.loraCfg));
    return out;
  }

  /** A stored weight's variables: its blocks where it is split, else itself. */
  private storedVars(name: string): tf.Variable[] {
    return this.vocab.get(name)?.vars ?? [this.params.get(name)!];
  }

  /** A stored weight's values from its variables' (storedVars) values: the blocks joined on the host. */
  private joinStored(name: string, parts: Float32Array[]): Float32Array {
    const L = this.vocab.get(name);
    return L && parts.length > 1 ? joinHost(parts, L.shape, L.axis, L.starts, L.widths) : parts[0];
  }

  /** Optimizer state as a checkpoint keeps it: under the weights' own names, blocks joined (vocab_blocks.ts). */
  joinOptimizerState(state: Record<string, NamedArray>): Record<string, NamedArray> {
    return joinState(state, this.splitWeights());
  }

  /** A checkpoint's optimizer state for this model's blocks: joinOptimizerState's inverse. */
  splitOptimizerState(state: Record<string, NamedArray>): Record<string, NamedArray> {
    return splitState(state, this.splitWeights());
  }

  /** The vocabulary-sized weights stored in more than one block (none unless a binding limit forced it). */
  private splitWeights(): VocabBlocks[] {
    return [...this.vocab.values()].filter((b) => b.starts.length > 1);
  }

  /** How many blocks the vocabulary-sized weights are stored in (1 unless a binding limit split them). */
  get vocabBlocks(): number {
    return this.embed.starts.length;
  }

  /** The stored parameters' values (in specs order) as HF tensors: separate projections, [out, in] layout. */
  private toHf(values: Float32Array[]): Record<string, WeightTensor> {
    const out: Record<string, WeightTensor> = {};
    this.specs.forEach((s, i) => {
      const shape = storedShape(s);
      const stacked = s.transposed ? transpose2d(values[i], shape[0], shape[1]) : values[i];
      let off = 0;
      for (const p of s.parts) {
        const n = sizeOf(p.hfShape);
        out[p.name] = { shape: p.hfShape.slice(), data: stacked.slice(off, off + n) };
        off += n;
      }
    });
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

  /**
   * Teacher-forced scores of the positions [from, from + count) of each row, without the logits tensor: the hidden states
   * of those positions go to scoring.ts, which applies the lm head a block at a time. No gradient (import scoring,
   * servers, the probe).
   */
  async scoreTokens(
    ids: tf.Tensor2D,
    keyMask: tf.Tensor2D,
    positions: { from: number; count: number },
    targets: Int32Array,
    temperature: number,
    opts: ScoreOptions & { returnAttention?: boolean } = {},
  ): Promise<TokenScores & { attention?: tf.Tensor4D }> {
    this.checkLive();
    const [B, T] = ids.shape;
    const { from, count } = positions;
    if (from < 0 || count < 1 || from + count > T) throw new Error(`scoreTokens: positions [${from}, ${from + count}) outside [0, ${T})`);
    const d = this.cfg.dModel;
    const { h, attention } = tf.tidy(() => {
      const r = this.run(ids, tf.cast(keyMask, 'float32') as tf.Tensor2D, 0, null, !!opts.returnAttention);
      const hh = r.hidden.slice([0, from, 0], [B, count, d]).reshape([B * count, d]) as tf.Tensor2D;
      return { h: hh, attention: r.attention };
    });
    try {
      const scores = await scoreHidden(h, this.head, this.cfg.vocabSize, targets, temperature, opts);
      return { ...scores, ...(attention ? { attention } : {}) };
    } finally {
      h.dispose();
    }
  }

  /** log softmax(logits)[n, targets[n]] for logits [N, V] and int32 targets [N], differentiable: the backend's op. */
  tokenLogprob(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D {
    return this.ops().tokenLogprob(logits, targets);
  }

  /** Run the prompts and keep their keys/values. Returns the logits of the last position, [B, V]. */
  prefill(ids: tf.Tensor2D, keyMask: tf.Tensor2D, opts: PrefillOptions = {}): { logits: tf.Tensor2D; cache: KvCache } {
    this.checkLive();
    const [B, T] = ids.shape;
    const inPlace = this.canDecodeInPlace();
    const capacity = inPlace ? roundUp(Math.max(opts.capacity ?? 0, T + 1), CAPACITY_STEP) : T;
    const res = tf.tidy(() => {
      const mask = tf.cast(keyMask, 'float32') as tf.Tensor2D;
      const r = this.run(ids, mask, 0, null, false);
      const last = r.hidden.slice([0, T - 1, 0], [B, 1, this.cfg.dModel]).reshape([B, this.cfg.dModel]) as tf.Tensor2D;
      if (!inPlace) return { logits: this.project(last), keys: r.keys, values: r.values, keyMask: mask };
      const spare = capacity - T;
      return {
        logits: this.project(last),
        keys: r.keys.map(
          (k) =>
            tf.pad(tf.transpose(k, [0, 1, 3, 2]), [
              [0, 0],
              [0, 0],
              [0, 0],
              [0, spare],
            ]) as tf.Tensor4D,
        ),
        values: r.values.map(
          (v) =>
            tf.pad(v, [
              [0, 0],
              [0, 0],
              [0, spare],
              [0, 0],
            ]) as tf.Tensor4D,
        ),
        keyMask: tf.pad(mask, [
          [0, 0],
          [0, spare],
        ]) as tf.Tensor2D,
      };
    });
    return { logits: res.logits, cache: { keys: res.keys, values: res.values, keyMask: res.keyMask, length: T, inPlace } };
  }

  /**
   * Feed one token per row (ids, length B) at position cache.length. Consumes `cache` and returns the extended
   * cache with the next-token logits [B, V].
   */
  decodeStep(cache: KvCache, ids: ArrayLike<number> | tf.Tensor1D): { logits: tf.Tensor2D; cache: KvCache } {
    this.checkLive();
    const B = cache.keyMask.shape[0];
    const n = ids instanceof tf.Tensor ? ids.size : ids.length;
    if (n !== B) throw new Error(`decodeStep: ${n} ids for a cache of ${B} rows`);
    if (cache.inPlace) {
      if (!this.canDecodeInPlace()) throw new Error('decodeStep: an in-place KV cache needs a backend with an in-place decode step (wasm, wasm-blas)');
      return this.decodeInPlace(cache, ids);
    }
    const res = tf.tidy(() => {
      const idT = idsTensor(ids).reshape([B, 1]) as tf.Tensor2D;
      const mask = tf.concat([cache.keyMask, tf.ones([B, 1])], 1) as tf.Tensor2D;
      const r = this.run(idT, mask, cache.length, cache, false);
      return { logits: this.project(r.hidden.reshape([B, this.cfg.dModel]) as tf.Tensor2D), keys: r.keys, values: r.values, keyMask: mask };
    });
    const length = cache.length + 1;
    this.disposeCache(cache);
    return { logits: res.logits, cache: { keys: res.keys, values: res.values, keyMask: res.keyMask, length, inPlace: false } };
  }

  /** The backend's draw on the device (ops.ts sampleRows), or null where the host samples from read logits. */
  deviceSampler(): ModelOps['sampleRows'] {
    return this.ops().sampleRows;
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
    const { length, inPlace } = cache;
    this.disposeCache(cache);
    return { ...res, length, inPlace };
  }

  disposeCache(cache: KvCache): void {
    for (const t of cache.keys) t.dispose();
    for (const t of cache.values) t.dispose();
    cache.keyMask.dispose();
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.sharesParams) {
      // a view's own adapters (adaptedView) are its to dispose; the weights are its model's
      if (this.loraCfg) disposeLora(this.loraLayers());
      return;
    }
    for (const t of this.tables.values()) tf.dispose([t.cos, t.sin, t.causal]);
    this.tables.clear();
    for (const v of this.params.values()) v.dispose();
    for (const h of this.halves.values()) h.packed.dispose();
    for (const vb of this.vocab.values()) for (const b of vb.half?.blocks ?? []) b.packed.dispose();
    if (this.loraCfg) disposeLora(this.loraLayers());
  }

  private checkLive(): void {
    if (this.disposed) throw new Error('Transformer used after dispose()');
  }

  /** The backend's fused ops for this model's sizes (ops/index.ts: its table, the compositions where it has none). */
  private ops(): ModelOps {
    return modelOps({ headDim: this.hd, dFf: this.cfg.dFf });
  }

  /** Whether the backend's ops have an in-place decode step for this model's sizes. */
  private canDecodeInPlace(): boolean {
    return this.ops().decodeAttention !== null;
  }

  /** logits = h @ lm_head; h [N, d] → [N, V] */
  private project(h: tf.Tensor2D): tf.Tensor2D {
    return projectVocab(h, this.head);
  }

  /** Embedding rows of flat ids [N] → [N, d]. */
  private embedRows(flat: tf.Tensor1D): tf.Tensor2D {
    const rows = gatherVocab(this.embed, flat);
    return this.cfg.tieEmbeddings ? (tf.transpose(rows) as tf.Tensor2D) : rows;
  }

  /**
   * [N, (H + 2·Hkv)·hd] = h @ W_qkv (+ b_qkv). Not tf.fused.matMul: on wasm that is XNNPACK's product, which the
   * SIMD product (wasm_kernels.ts) outruns by more than the separate bias add costs.
   */
  private qkv(h: tf.Tensor2D, L: Layer): tf.Tensor2D {
    return L.bQkv ? this.projAdd(h, L.wQkv, L.lora?.qkv, L.bQkv) : this.proj(h, L.wQkv, L.lora?.qkv);
  }

  /** add + proj(x): the residual stream's update, or a bias; one kernel where the backend fuses it and there is no LoRA */
  private projAdd(x: tf.Tensor2D, w: ProjWeight, slots: LoraSlots | undefined, add: tf.Tensor): tf.Tensor2D {
    // a 16-bit weight's kernel adds in its epilogue, with or without adapters
    if (isHalfWeight(w)) return this.plusDelta(this.ops().matMulHalf(x, w, add), x, slots);
    if (slots && this.loraCfg) return tf.add(add, this.proj(x, w, slots)) as tf.Tensor2D;
    return this.ops().matMulAdd(x, w as tf.Tensor as tf.Tensor2D, add);
  }

  /** x + down(SiLU(gate)·up) of rmsNorm(x) (the infer ops where no gradient is taken). */
  private mlp(ops: ModelOps, x: tf.Tensor2D, L: Layer, infer = false): tf.Tensor2D {
    const gu = this.proj(
      infer ? ops.rmsNormInfer(x, L.ln2 as tf.Tensor1D, this.cfg.rmsEps) : ops.rmsNorm(x, L.ln2 as tf.Tensor1D, this.cfg.rmsEps),
      L.wGateUp,
      L.lora?.gateUp,
    );
    return this.projAdd(infer ? ops.swigluInfer(gu) : ops.swiglu(gu), L.wDown, L.lora?.down, x);
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

  /**
   * cos / sin tables [1, H + Hkv, T, hd] for positions pos0..pos0+T−1, matching the q | k heads of the fused
   * projection. 1/√hd is folded into q's rows: one multiply of the tables instead of one over the scores.
   */
  private ropeTables(pos0: number, T: number): { cos: tf.Tensor4D; sin: tf.Tensor4D; causal: tf.Tensor4D } {
    // the last few (pos0, T) stay on the device: a training step runs the same shapes two or three times (the pass that
    // reads ahead, the taped pass, the reference), and a GPU backend would upload them each time
    const keep = keepsTables();
    const key = `${pos0},${T}`;
    const hit = keep ? this.tables.get(key) : undefined;
    if (hit) {
      this.tables.delete(key);
      this.tables.set(key, hit);
      return hit;
    }
    const hd = this.hd;
    const heads = this.cfg.nHeads + this.cfg.nKvHeads;
    this.ensureRope(pos0 + T);
    const rowCos = this.ropeCos.subarray(pos0 * hd, (pos0 + T) * hd);
    const rowSin = this.ropeSin.subarray(pos0 * hd, (pos0 + T) * hd);
    const cos = new Float32Array(heads * T * hd);
    const sin = new Float32Array(heads * T * hd);
    const scale = 1 / Math.sqrt(hd);
    for (let h = 0; h < heads; h++) {
      const s = h < this.cfg.nHeads ? scale : 1;
      const off = h * T * hd;
      for (let i = 0; i < T * hd; i++) {
        cos[off + i] = rowCos[i] * s;
        sin[off + i] = rowSin[i] * s;
      }
    }
    const Tk = pos0 + T;
    // key j is visible to query i (absolute position pos0 + i) iff j ≤ pos0 + i
    const causal = new Float32Array(T * Tk);
    for (let i = 0; i < T; i++) causal.fill(1, i * Tk, i * Tk + pos0 + i + 1);
    const t = { cos: tf.tensor4d(cos, [1, heads, T, hd]), sin: tf.tensor4d(sin, [1, heads, T, hd]), causal: tf.tensor4d(causal, [1, 1, T, Tk]) };
    if (!keep) return t;
    tf.keep(t.cos);
    tf.keep(t.sin);
    tf.keep(t.causal);
    this.tables.set(key, t);
    if (this.tables.size > TABLES_KEPT) {
      const [oldest, v] = this.tables.entries().next().value!;
      this.tables.delete(oldest);
      tf.dispose([v.cos, v.sin, v.causal]);
    }
    return t;
  }

  /**
   * The shared layer stack. mask [B, past + T] covers the cached keys and the new ones. Returns the final normed
   * hidden states [B, T, d] and, per layer, the full keys/values (past + new, [B, Hkv, past + T, hd]) for the
   * cache.
   */
  private run(ids: tf.Tensor2D, mask: tf.Tensor2D, pos0: number, past: KvCache | null, wantAttention: boolean) {
    const cfg = this.cfg;
    const [B, T] = ids.shape;
    const N = B * T;
    const d = cfg.dModel;
    const Tk = pos0 + T;

    const { cos, sin, causal } = this.ropeTables(pos0, T);
    // Additive mask [B, 1, T, Tk]: key j is visible to query i (absolute position pos0+i) iff j ≤ pos0+i and j is
    // a real token. −1e9 rather than −∞ so a padded query row (all keys hidden) stays finite instead of NaN.
    const allowed = tf.mul(causal, mask.reshape([B, 1, 1, Tk]));
    const maskAdd = tf.mul(tf.sub(1, allowed), MASKED) as tf.Tensor4D;
    const ops = this.ops();
    const eps = cfg.rmsEps;
    const dims = { B, T, nHeads: cfg.nHeads, nKvHeads: cfg.nKvHeads, headDim: this.hd };

    let x = this.embedRows(ids.reshape([N]));
    const keys: tf.Tensor4D[] = [];
    const values: tf.Tensor4D[] = [];
    let attention: tf.Tensor4D | undefined;
    for (let li = 0; li < this.layers.length; li++) {
      const L = this.layers[li];
      const [q, kNew, vNew] = ops.heads(this.qkv(ops.rmsNorm(x, L.ln1 as tf.Tensor1D, eps), L), cos, sin, dims);
      const k = past ? (tf.concat([past.keys[li], kNew], 2) as tf.Tensor4D) : kNew;
      const v = past ? (tf.concat([past.values[li], vNew], 2) as tf.Tensor4D) : vNew;
      keys.push(k);
      values.push(v);
      const { context, probs } = ops.attention(q, k, v, maskAdd);
      if (wantAttention && li === this.layers.length - 1) attention = probs;
      x = this.mlp(ops, this.projAdd(context, L.wo, L.lora?.o, x), L);
    }
    const hidden = ops.rmsNorm(x, this.finalNorm as tf.Tensor1D, eps).reshape([B, T, d]) as tf.Tensor3D;
    return { hidden, keys, values, attention };
  }

  /**
   * One decode step on a preallocated cache: per layer, one kernel rotates q and the new key, writes key and
   * value at position cache.length in place, marks that position real in keyMask and attends.
   */
  private decodeInPlace(cache: KvCache, ids: ArrayLike<number> | tf.Tensor1D): { logits: tf.Tensor2D; cache: KvCache } {
    const pos = cache.length;
    if (pos >= cache.keyMask.shape[1]) cache = this.growCache(cache, pos + 1);
    const hd = this.hd;
    this.ensureRope(pos + 1);
    const attrs = {
      pos,
      nHeads: this.cfg.nHeads,
      nKvHeads: this.cfg.nKvHeads,
      headDim: hd,
      scale: 1 / Math.sqrt(hd),
      cos: this.ropeCos.subarray(pos * hd, (pos + 1) * hd),
      sin: this.ropeSin.subarray(pos * hd, (pos + 1) * hd),
    };
    const c = cache;
    const ops = this.ops();
    const decode = ops.decodeAttention!;
    const eps = this.cfg.rmsEps;
    const logits = tf.tidy(() => {
      let x = this.embedRows(idsTensor(ids));
      for (let li = 0; li < this.layers.length; li++) {
        const L = this.layers[li];
        const ctx = decode(this.qkv(ops.rmsNormInfer(x, L.ln1 as tf.Tensor1D, eps), L), c.keys[li], c.values[li], c.keyMask, attrs);
        x = this.mlp(ops, this.projAdd(ctx, L.wo, L.lora?.o, x), L, true);
      }
      return this.project(ops.rmsNormInfer(x, this.finalNorm as tf.Tensor1D, eps));
    });
    return { logits, cache: { ...cache, length: pos + 1 } };
  }

  /** A copy of an in-place cache with room for at least `need` positions (doubling). Consumes `cache`. */
  private growCache(cache: KvCache, need: number): KvCache {
    const cap = cache.keyMask.shape[1];
    const spare = roundUp(Math.max(need, 2 * cap), CAPACITY_STEP) - cap;
    const res = tf.tidy(() => ({
      keys: cache.keys.map(
        (k) =>
          tf.pad(k, [
            [0, 0],
            [0, 0],
            [0, 0],
            [0, spare],
          ]) as tf.Tensor4D,
      ),
      values: cache.values.map(
        (v) =>
          tf.pad(v, [
            [0, 0],
            [0, 0],
            [0, spare],
            [0, 0],
          ]) as tf.Tensor4D,
      ),
      keyMask: tf.pad(cache.keyMask, [
        [0, 0],
        [0, spare],
      ]) as tf.Tensor2D,
    }));
    this.disposeCache(cache);
    return { ...res, length: cache.length, inPlace: true };
  }
}

/** A decode step's ids as an int32 tensor: as given where they are one (sampled on the device), else uploaded. */
/** A weight's values (`data`, read from it) rounded to a 16-bit format, kept in float32 in place. */
function roundInPlace(v: tf.Variable, format: HalfFormat, data: Float32Array): void {
  const rounded = tf.tensor(roundTo(format, data), v.shape);
  v.assign(rounded);
  rounded.dispose();
}

function idsTensor(ids: ArrayLike<number> | tf.Tensor1D): tf.Tensor1D {
  return ids instanceof tf.Tensor ? ids : tf.tensor1d(Int32Array.from(ids), 'int32');
}

/** ropeTables keeps this many (pos0, T) on the device. */
const TABLES_KEPT = 4;

/** In-place caches hold a multiple of this many positions: the decode kernel scores 4 keys at a time. */
const CAPACITY_STEP = 8;

function roundUp(n: number, step: number): number {
  return Math.ceil(n / step) * step;
}
