// LoRA (Hu et al. 2021; PEFT's LoraConfig): a frozen weight W [in, out] plus a rank-r update, y = x·W + (α/r)·(x·A)·B with
// A [in, r] and B [r, out]. A starts as PEFT's kaiming_uniform(a = √5), U(−1/√in, 1/√in); B as zeros, so a fresh adapter
// leaves the model unchanged. Only A and B train: their gradients and Adam's moments are all a step keeps.
//
// The model fuses q | k | v into one projection and gate | up into another (model.ts): an adapted part adds its own
// (x·A)·B to its block of columns, an unadapted part adds nothing, so each target is PEFT's adapter on that module.
// Stored as PEFT names it: `<module>.lora_A.weight` [r, in] and `<module>.lora_B.weight` [out, r] (exportAdapters).
import * as tf from '@tensorflow/tfjs';
import { makeRng } from '../core/rng';
import { headDimOf, type LayerLora, type LoraPart, type LoraSlots, type ModelConfig, type WeightTensor } from './shapes';

export type { LayerLora, LoraPart, LoraSlots } from './shapes';

export type LoraTarget = 'q_proj' | 'k_proj' | 'v_proj' | 'o_proj' | 'gate_proj' | 'up_proj' | 'down_proj';
export const ALL_LORA_TARGETS: LoraTarget[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

export interface LoraConfig {
  r: number;
  /** default 2·r */
  alpha?: number;
  /** default every projection */
  targets?: LoraTarget[];
}

/** The fused projections of layer i: [name in the fused order, module, in, out]. */
function layerModules(
  cfg: ModelConfig,
  i: number,
): {
  qkv: [LoraTarget, string, number, number][];
  o: [LoraTarget, string, number, number][];
  gateUp: [LoraTarget, string, number, number][];
  down: [LoraTarget, string, number, number][];
} {
  const d = cfg.dModel,
    hd = headDimOf(cfg),
    q = cfg.nHeads * hd,
    kv = cfg.nKvHeads * hd,
    F = cfg.dFf;
  const a = `model.layers.${i}.self_attn.`,
    m = `model.layers.${i}.mlp.`;
  return {
    qkv: [
      ['q_proj', a + 'q_proj', d, q],
      ['k_proj', a + 'k_proj', d, kv],
      ['v_proj', a + 'v_proj', d, kv],
    ],
    o: [['o_proj', a + 'o_proj', q, d]],
    gateUp: [
      ['gate_proj', m + 'gate_proj', d, F],
      ['up_proj', m + 'up_proj', d, F],
    ],
    down: [['down_proj', m + 'down_proj', F, d]],
  };
}

/** The adapters' parameter count for a model config. */
export function loraParamCount(cfg: ModelConfig, lora: LoraConfig): number {
  const targets = new Set(lora.targets ?? ALL_LORA_TARGETS);
  let n = 0;
  for (let i = 0; i < cfg.nLayers; i++)
    for (const group of Object.values(layerModules(cfg, i))) for (const [t, , inDim, outDim] of group) if (targets.has(t)) n += lora.r * (inDim + outDim);
  return n;
}

export function loraScale(lora: LoraConfig): number {
  return resolvedLora(lora).alpha / lora.r;
}

/** A LoRA config with its defaults filled in (alpha 2·r, every projection), as PEFT's adapter_config.json states them. */
export function resolvedLora(lora: LoraConfig): { r: number; alpha: number; targets: LoraTarget[] } {
  return { r: lora.r, alpha: lora.alpha ?? 2 * lora.r, targets: lora.targets ?? [...ALL_LORA_TARGETS] };
}

/** Fresh adapters for every layer (seeded), as PEFT initialises them. */
export function createLora(cfg: ModelConfig, lora: LoraConfig, seed: number): LayerLora[] {
  const targets = new Set(lora.targets ?? ALL_LORA_TARGETS);
  const rng = makeRng(seed);
  const r = lora.r;
  const slots = (group: [LoraTarget, string, number, number][]): LoraSlots => ({
    widths: group.map(([, , , out]) => out),
    parts: group.map(([t, module, inDim, outDim]) => {
      if (!targets.has(t)) return null;
      const bound = 1 / Math.sqrt(inDim);
      const a = Float32Array.from({ length: inDim * r }, () => (2 * rng() - 1) * bound);
      return { module, A: tf.variable(tf.tensor2d(a, [inDim, r]), true), B: tf.variable(tf.zeros([r, outDim]), true) };
    }),
  });
  return Array.from({ length: cfg.nLayers }, (_, i) => {
    const m = layerModules(cfg, i);
    return { qkv: slots(m.qkv), o: slots(m.o), gateUp: slots(m.gateUp), down: slots(m.down) };
  });
}

/** Every adapter variable by its PEFT name (A stored [in, r], B [r, out] here; exportAdapters transposes). */
export function loraVariables(layers: LayerLora[]): Map<string, tf.Variable> {
  const out = new Map<string, tf.Variable>();
  for (const l of layers)
    for (const s of [l.qkv, l.o, l.gateUp, l.down])
      for (const p of s.parts) {
        if (!p) continue;
        out.set(`${p.module}.lora_A.weight`, p.A);
        out.set(`${p.module}.lora_B.weight`, p.B);
      }
  return out;
}

/**
 * (α/r)·(x·A)·B per adapted block, zeros elsewhere: what the adapters add to a fused projection's output [N, Σ widths].
 * As one product of x·[A_1 | A_2 …]·(α/r) [N, n·r] with the block matrix whose rows n·r hold each B in its own columns
 * (B_i padded with zeros): per token the pass keeps n·r + n·r + Σ widths floats, where a product per block and their
 * concatenation kept several times Σ widths (at 0.5B, LoRA on every projection then doubled a step's activations). The
 * gradient reaches each A_i and B_i through the concatenation and the padding: the zeros never train.
 */
export function loraDelta(x: tf.Tensor2D, slots: LoraSlots, scale: number): tf.Tensor2D | null {
  const total = slots.widths.reduce((a, w) => a + w, 0);
  const used: { p: LoraPart; off: number; w: number }[] = [];
  let off = 0;
  slots.parts.forEach((p, j) => {
    if (p) used.push({ p, off, w: slots.widths[j] });
    off += slots.widths[j];
  });
  if (!used.length) return null;
  const A =
    used.length === 1
      ? used[0].p.A
      : tf.concat(
          used.map((u) => u.p.A),
          1,
        );
  const xa = tf.mul(tf.matMul(x, A), scale);
  const blocks = used.map((u) =>
    u.w === total
      ? u.p.B
      : tf.pad(u.p.B, [
          [0, 0],
          [u.off, total - u.off - u.w],
        ]),
  );
  const B = blocks.length === 1 ? blocks[0] : tf.concat(blocks, 0);
  return tf.matMul(xa, B) as tf.Tensor2D;
}

/** The adapters in PEFT's layout: lora_A [r, in], lora_B [out, r] (read asynchronously). */
export async function exportAdapters(layers: LayerLora[]): Promise<Record<string, WeightTensor>> {
  const out: Record<string, WeightTensor> = {};
  for (const [name, v] of loraVariables(layers)) {
    const [rows, cols] = v.shape;
    const data = (await v.data()) as Float32Array;
    const t = new Float32Array(data.length);
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) t[j * rows + i] = data[i * cols + j];
    out[name] = { shape: [cols, rows], data: t };
  }
  return out;
}

/** Loads PEFT-layout adapters (exportAdapters' output) into these variables; names and shapes must match. */
export function importAdapters(layers: LayerLora[], w: Record<string, WeightTensor>): void {
  for (const [name, v] of loraVariables(layers)) {
    const t = w[name];
    const [rows, cols] = v.shape;
    if (!t || t.shape[0] !== cols || t.shape[1] !== rows) throw new Error(`adapters: ${name} missing or not [${cols}, ${rows}]`);
    const data = new Float32Array(t.data.length);
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) data[i * cols + j] = t.data[j * rows + i];
    v.assign(tf.tensor2d(data, [rows, cols]));
  }
}

/** W + (α/r)·B·A of each adapted module, in HF layout [out, in], added to `weights` (the exported base) in place. */
export async function mergeInto(weights: Record<string, WeightTensor>, layers: LayerLora[], scale: number): Promise<void> {
  for (const l of layers)
    for (const s of [l.qkv, l.o, l.gateUp, l.down])
      for (const p of s.parts) {
        if (!p) continue;
        // (A·B)ᵀ = Bᵀ·Aᵀ: [out, in]
        const prod = tf.tidy(() => tf.transpose(tf.matMul(p.A, p.B)).mul(scale));
        const d = (await prod.data()) as Float32Array;
        prod.dispose();
        const w = weights[`${p.module}.weight`];
        for (let i = 0; i < d.length; i++) w.data[i] += d[i];
      }
}

export function disposeLora(layers: LayerLora[]): void {
  for (const v of loraVariables(layers).values()) v.dispose();
}
