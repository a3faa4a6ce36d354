// What a training run needs in memory, estimated before anything trains, against what the backend can hold: a run that
// cannot fit stops before step 1 with the numbers instead of running out of memory mid-run.
//
// The parts (float32, but for the projections model.torch_dtype stores in 16 bits):
//   weights      every parameter of the policy
//   gradients    one per trainable parameter, twice: the pass's gradients and the accumulated (or clipped) copy
//   adam         the first and second moments of every trainable parameter
//   reference    a frozen copy of the weights for the KL penalty (grpo.kl_beta > 0); none with LoRA (the base is it)
//   activations  what one micro-batch's pass keeps (rows × prompt + completion tokens), twice: tfjs holds every forward
//                output the tape saw and every gradient of one until the backward pass ends. Per layer and token the
//                residual stream and norms, q|k|v and the rotated heads, the attention scores and probabilities
//                (2·H·T per token), the context, the MLP's gate|up, SwiGLU and down outputs; with LoRA each adapted
//                projection's x·A (n·r) and its update and sum (2 × its width); and per completion token the lm head's
//                logits, log-softmax and their gradients (4·V)
// The count follows the ops as the model composes them (model.ts, ops/composed.ts); wasm-blas's fused kernels keep less,
// so the estimate errs high: at 0.5B with LoRA on wasm-blas the wasm heap grew by 1.08 GB for 1 × 96 tokens and
// 1.66 GB for 2 × 80, against 1.33 and 2.2 GB estimated. Sampling (no gradients, a KV cache) needs far less than a
// step and is not counted.
import { totalmem } from 'node:os';
import { UserError } from '../core/errors';
import type { BackendInfo } from './backend';
import { headDimOf, paramSpecs, sizeOf, type ModelConfig, type ParamSpec } from './shapes';

export interface TrainShape {
  /** rows of one micro-batch: prompts_per_step × group_size / gradient_accumulation_steps */
  rows: number;
  /** the longest prompt, in tokens */
  promptLen: number;
  /** max_new_tokens */
  completionLen: number;
  /** grpo.kl_beta > 0 */
  klReference: boolean;
  /** parameters the optimizer updates (all of them unless LoRA or freezing says otherwise) */
  trainableParams?: number;
  /** LoRA's adapter parameters, held beside the frozen weights */
  adapterParams?: number;
  /** LoRA's rank and targets: each adapted projection keeps more per token */
  lora?: { r: number; targets?: readonly string[] };
  /** model.torch_dtype in 16 bits on a backend that packs: the policy's and the reference's projections held in 2 bytes */
  halfParams?: { policy: number; reference: number };
}

export interface MemoryPart {
  name: 'weights' | 'adapters' | 'gradients' | 'adam' | 'reference' | 'activations';
  bytes: number;
}

export interface MemoryEstimate {
  params: number;
  trainable: number;
  parts: MemoryPart[];
  total: number;
  /** the largest single tensor (bytes): a GPU adapter must be able to bind it */
  largestTensor: { name: string; bytes: number };
}

/** Parameters of a model config (HF count: tied embeddings once), or of the stored weights `keep` selects. */
export function paramCount(cfg: ModelConfig, keep: (storedName: string) => boolean = () => true): number {
  return paramSpecs(cfg).reduce((a, s) => a + (keep(s.name) ? specParams(s) : 0), 0);
}

/**
 * A stored weight model.torch_dtype can hold in 16 bits where it does not train (Transformer.storeFrozen): a projection,
 * or a vocabulary-sized weight whose packed axis is even (the vocabulary for [d, V], d for an untied [V, d] embedding).
 */
export function isHalfable(cfg: ModelConfig, storedName: string): boolean {
  if (/^model\.layers\.\d+\.(self_attn\.(qkv|o)_proj|mlp\.(gate_up|down)_proj)\.weight$/.test(storedName)) return true;
  if (storedName === 'lm_head.weight' || (storedName === 'model.embed_tokens.weight' && cfg.tieEmbeddings)) return cfg.vocabSize % 2 === 0;
  return storedName === 'model.embed_tokens.weight' && cfg.dModel % 2 === 0;
}

/** Parameters of one stored weight (the sum of its HF parts). */
function specParams(s: ParamSpec): number {
  return s.parts.reduce((b, p) => b + sizeOf(p.hfShape), 0);
}

/** Floats the forward pass keeps for one token of one layer (see the file comment), T the sequence length. */
export function layerFloatsPerToken(cfg: ModelConfig, T: number, lora?: TrainShape['lora']): number {
  const d = cfg.dModel,
    hd = headDimOf(cfg),
    H = cfg.nHeads,
    Hkv = cfg.nKvHeads,
    F = cfg.dFf;
  const qkv = (H + 2 * Hkv) * hd;
  const base = 7 * d + 2 * qkv + (H + Hkv) * hd + 2 * H * hd + 2 * H * T + 5 * F;
  if (!lora) return base;
  const t = new Set(lora.targets ?? ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']);
  // the fused projections: [their adapted parts, their width]
  const groups: [number, number][] = [
    [['q_proj', 'k_proj', 'v_proj'].filter((n) => t.has(n)).length, qkv],
    [t.has('o_proj') ? 1 : 0, d],
    [['gate_proj', 'up_proj'].filter((n) => t.has(n)).length, 2 * F],
    [t.has('down_proj') ? 1 : 0, d],
  ];
  return base + groups.reduce((a, [n, width]) => a + (n ? 2 * n * lora.r + 2 * width : 0), 0);
}

export function estimateTrainingMemory(cfg: ModelConfig, shape: TrainShape): MemoryEstimate {
  const params = paramCount(cfg);
  const adapters = shape.adapterParams ?? 0;
  const trainable = shape.trainableParams ?? params;
  const T = shape.promptLen + shape.completionLen;
  const tokens = shape.rows * T;
  const activations = 4 * (2 * tokens * cfg.nLayers * layerFloatsPerToken(cfg, T, shape.lora) + shape.rows * shape.completionLen * 4 * cfg.vocabSize);
  const parts: MemoryPart[] = [
    { name: 'weights', bytes: 4 * params - 2 * (shape.halfParams?.policy ?? 0) },
    ...(adapters ? [{ name: 'adapters' as const, bytes: 4 * adapters }] : []),
    { name: 'gradients', bytes: 2 * 4 * trainable },
    { name: 'adam', bytes: 2 * 4 * trainable },
    { name: 'reference', bytes: shape.klReference && !adapters ? 4 * params - 2 * (shape.halfParams?.reference ?? 0) : 0 },
    { name: 'activations', bytes: activations },
  ];
  // The embedding and LM head are stored in vocabulary blocks where one binding holds less (vocab_blocks.ts), so the
  // largest tensor that must fit one buffer is the largest other weight, or the logits.
  const biggest = paramSpecs(cfg)
    .filter((s) => s.name !== 'model.embed_tokens.weight' && s.name !== 'lm_head.weight')
    .map((s) => ({ name: s.name, bytes: 4 * specParams(s) }))
    .reduce((a, b) => (b.bytes > a.bytes ? b : a));
  // the logits of one micro-batch's completion tokens are one tensor too
  const logits = { name: 'the logits of a micro-batch', bytes: 4 * shape.rows * shape.completionLen * cfg.vocabSize };
  return {
    params,
    trainable,
    parts,
    total: parts.reduce((a, p) => a + p.bytes, 0),
    largestTensor: logits.bytes > biggest.bytes ? logits : biggest,
  };
}

/** What the backend can hold: bytes in all, and for a GPU the largest tensor it can bind; with the words for it. */
export interface Capacity {
  total: number | null;
  perTensor: number | null;
  what: string;
}

/** The wasm backend's heap: 32-bit WebAssembly addresses 4 GiB (tfjs-backend-wasm grows its memory up to 65,535 pages). */
export const WASM_HEAP_BYTES = 65535 * 65536;

export function backendCapacity(info: Pick<BackendInfo, 'backend' | 'adapter'>): Capacity {
  switch (info.backend) {
    case 'wasm':
    case 'wasm-blas':
      return { total: WASM_HEAP_BYTES, perTensor: null, what: 'wasm heap' };
    case 'webgpu': {
      const a = info.adapter;
      // WebGPU does not report an adapter's memory; its limits say how large one buffer may be
      return {
        total: null,
        perTensor: a ? Math.min(a.max_buffer_size, a.max_storage_buffer_binding_size) : null,
        what: `the ${a?.description || 'WebGPU'} adapter's buffers`,
      };
    }
    default:
      return { total: totalmem(), perTensor: null, what: 'system memory' };
  }
}

export const gb = (b: number) => `${(b / 1e9).toFixed(2)} GB`;

/** "weights 1.98 GB, gradients 3.95 GB, …": the estimate's non-zero parts. */
export function describeEstimate(e: MemoryEstimate): string {
  const words: Record<MemoryPart['name'], string> = {
    weights: 'weights',
    adapters: 'LoRA adapters',
    gradients: 'gradients',
    adam: "Adam's moments",
    reference: 'KL reference',
    activations: 'activations',
  };
  return e.parts
    .filter((p) => p.bytes > 0)
    .map((p) => `${words[p.name]} ${gb(p.bytes)}`)
    .join(', ');
}

/**
 * Throws a UserError with the numbers when the estimate does not fit the backend: before step 1, never mid-run. `where`
 * names the shape ("8 rows × 190 tokens per micro-batch").
 */
export function checkFits(
  e: MemoryEstimate,
  cap: Capacity,
  backend: string,
  where: string,
  fixes = 'use backend webgpu on a GPU, model.lora (train adapters only), grpo.gradient_accumulation_steps, or a smaller model',
): void {
  if (cap.total !== null && e.total > cap.total) {
    throw new UserError(
      `this run needs ${gb(e.total)} of ${cap.what} (${describeEstimate(e)}; ${where}), the ${backend} backend holds ${gb(cap.total)}: ${fixes}`,
    );
  }
  if (cap.perTensor !== null && e.largestTensor.bytes > cap.perTensor) {
    throw new UserError(
      `this run's largest tensor, ${e.largestTensor.name}, needs ${gb(e.largestTensor.bytes)} in one buffer; ${cap.what} hold at most ${gb(cap.perTensor)} each: ${fixes}`,
    );
  }
}
