// The vocabulary-sized weights (the embedding and the LM head) in blocks of the vocabulary, where one of them is larger
// than a kernel may bind. WebGPU binds every input of a kernel whole, and a device grants at most
// maxStorageBufferBindingSize bytes per binding: 128 MiB on Mesa's lavapipe and on many integrated GPUs, while
// Qwen2.5-0.5B's fp32 embedding is 545 MiB. Stored as blocks of at most that size, no kernel ever binds more: the
// lookup gathers from each block and keeps the block that holds the id, the LM head is one product per block, and
// the scorer already walks the vocabulary block by block. The blocks are split and joined on the host, so the whole
// tensor never exists on the device. A gather from the block that does not hold an id is multiplied by 0 and added,
// so forward values and gradients equal the unsplit model's exactly.
import * as tf from '@tensorflow/tfjs';
import { halfWindow, type HalfWeight } from './half';
import type { ModelOps } from './ops/ops';

/** A vocabulary-sized weight's stored layout: its name, stored shape, the vocabulary axis and the blocks' ranges along it. */
export interface VocabLayout {
  name: string;
  /** [d, V] split by columns (axis 1), or [V, d] by rows (axis 0) */
  shape: [number, number];
  axis: 0 | 1;
  /** each block's first vocabulary index, and its width */
  starts: number[];
  widths: number[];
}

/** The layout with its variables, one per block (a single one where the weight fits one binding). */
export interface VocabBlocks extends VocabLayout {
  /** the blocks in float32 (empty once `half` holds them) */
  vars: tf.Variable[];
  /**
   * the blocks in 16 bits where the weight does not train (model.torch_dtype; half.ts), with the backend's product and
   * gather that read them
   */
  half?: { blocks: HalfWeight[]; matMul: ModelOps['matMulHalf']; gather: ModelOps['gatherHalf'] };
}

/** gather(block b, ids, axis): the block's rows (axis 0) or columns (axis 1) at ids, in float32. */
function blockGather(vb: VocabBlocks, b: number, ids: tf.Tensor1D): tf.Tensor2D {
  return vb.half ? vb.half.gather(vb.half.blocks[b], ids, vb.axis) : (tf.gather(vb.vars[b], ids, vb.axis) as tf.Tensor2D);
}

/** Columns [from, from + width) of block b of a [d, V] weight, as the right side of products: x @ slice. */
export interface HeadSlice {
  cols: number;
  times(x: tf.Tensor2D): tf.Tensor2D;
  dispose(): void;
}

/**
 * A slice of the LM head's block b for products. A 16-bit block is read through a window on its packed words, two
 * columns each, so `from` and `width` must be even there (scoring.ts steps by an even width).
 */
export function headSlice(vb: VocabBlocks, b: number, from: number, width: number): HeadSlice {
  if (vb.half) {
    const w = halfWindow(vb.half.blocks[b], from, width);
    const matMul = vb.half.matMul;
    return { cols: width, times: (x) => matMul(x, w, null), dispose: () => undefined };
  }
  const W0 = vb.vars[b];
  const whole = from === 0 && width === W0.shape[1];
  const Wb = (whole ? W0 : tf.slice(W0, [0, from], [W0.shape[0], width])) as tf.Tensor2D;
  return { cols: width, times: (x) => tf.matMul(x, Wb), dispose: () => (whole ? undefined : Wb.dispose()) };
}

/** A block's stored name: the weight's name and its index (`model.embed_tokens.weight#1`). */
export const blockName = (name: string, i: number): string => `${name}#${i}`;

/** The weight a stored name belongs to (itself, for an unsplit one). */
export function baseName(name: string): string {
  const i = name.lastIndexOf('#');
  return i < 0 ? name : name.slice(0, i);
}

/**
 * The vocabulary width of one block, so that a block [d, width] holds at most `maxBytes` of float32: V itself where
 * the whole weight fits. An even width where it is more than 1, so that a block packs into 16-bit words
 * (model.torch_dtype: two columns a word).
 */
export function vocabBlockWidth(vocab: number, d: number, maxBytes: number): number {
  if (!(maxBytes > 0)) throw new Error(`vocabBlockWidth: binding limit ${maxBytes} bytes`);
  const w = Math.floor(maxBytes / (4 * d));
  if (w < 1) throw new Error(`a binding of ${maxBytes} bytes cannot hold one vocabulary row of ${d} floats`);
  return w >= vocab ? vocab : w > 1 ? w - (w % 2) : w;
}

/** The blocks' [start, width] along a vocabulary of V, `width` each, the last one shorter. */
export function blockRanges(V: number, width: number): { starts: number[]; widths: number[] } {
  const starts: number[] = [];
  const widths: number[] = [];
  for (let s = 0; s < V; s += width) {
    starts.push(s);
    widths.push(Math.min(width, V - s));
  }
  return { starts, widths };
}

/** Host-side split of a row-major [rows, cols] array along `axis` into the given ranges. */
export function splitHost(data: Float32Array, shape: [number, number], axis: 0 | 1, starts: number[], widths: number[]): Float32Array[] {
  const [rows, cols] = shape;
  return starts.map((s, b) => {
    const w = widths[b];
    if (axis === 0) return data.slice(s * cols, (s + w) * cols);
    const out = new Float32Array(rows * w);
    for (let r = 0; r < rows; r++) out.set(data.subarray(r * cols + s, r * cols + s + w), r * w);
    return out;
  });
}

/** The inverse of splitHost: the blocks' values joined into one row-major [rows, cols] array. */
export function joinHost(parts: Float32Array[], shape: [number, number], axis: 0 | 1, starts: number[], widths: number[]): Float32Array {
  const [rows, cols] = shape;
  const out = new Float32Array(rows * cols);
  parts.forEach((p, b) => {
    const s = starts[b];
    const w = widths[b];
    if (axis === 0) out.set(p, s * cols);
    else for (let r = 0; r < rows; r++) out.set(p.subarray(r * w, (r + 1) * w), r * cols + s);
  });
  return out;
}

/**
 * gather(W, ids, axis) over the blocks: each block's gather of the ids it holds (others clamped into range, then
 * zeroed by the block's mask), summed. One block is a plain gather.
 */
export function gatherVocab(vb: VocabBlocks, ids: tf.Tensor1D): tf.Tensor2D {
  if (vb.starts.length === 1) return blockGather(vb, 0, ids);
  return tf.tidy(() => {
    let out: tf.Tensor2D | null = null;
    for (let b = 0; b < vb.starts.length; b++) {
      const s = vb.starts[b];
      const w = vb.widths[b];
      const shifted = tf.sub(ids, tf.scalar(s, 'int32'));
      const local = tf.minimum(tf.maximum(shifted, tf.scalar(0, 'int32')), tf.scalar(w - 1, 'int32')) as tf.Tensor1D;
      const inBlock = tf.cast(tf.equal(shifted, local), 'float32');
      const mask = vb.axis === 0 ? inBlock.reshape([-1, 1]) : inBlock.reshape([1, -1]);
      const part = tf.mul(blockGather(vb, b, local), mask) as tf.Tensor2D;
      out = out ? (tf.add(out, part) as tf.Tensor2D) : part;
    }
    return out!;
  });
}

/** Adam's exported state: `m.<name>` and `v.<name>` arrays (optim.ts). */
type OptimizerState = Record<string, { shape: number[]; data: Float32Array }>;

/**
 * Optimizer state (`m.<name>`, `v.<name>`) saved under the weights' own names: a weight's blocks joined on the host,
 * so a checkpoint reads the same whatever binding limit the run had.
 */
export function joinState(state: OptimizerState, layouts: VocabLayout[]): OptimizerState {
  const out = { ...state };
  for (const L of layouts) {
    for (const kind of ['m.', 'v.']) {
      const keys = L.starts.map((_, i) => kind + blockName(L.name, i));
      if (!keys.every((k) => k in out)) continue;
      out[kind + L.name] = {
        shape: L.shape.slice(),
        data: joinHost(
          keys.map((k) => out[k].data),
          L.shape,
          L.axis,
          L.starts,
          L.widths,
        ),
      };
      for (const k of keys) delete out[k];
    }
  }
  return out;
}

/** joinState's inverse, for the blocks of this run's model. */
export function splitState(state: OptimizerState, layouts: VocabLayout[]): OptimizerState {
  const out = { ...state };
  for (const L of layouts) {
    for (const kind of ['m.', 'v.']) {
      const whole = out[kind + L.name];
      if (!whole) continue;
      splitHost(whole.data, L.shape, L.axis, L.starts, L.widths).forEach((data, i) => {
        out[kind + blockName(L.name, i)] = { shape: L.axis === 0 ? [L.widths[i], L.shape[1]] : [L.shape[0], L.widths[i]], data };
      });
      delete out[kind + L.name];
    }
  }
  return out;
}

/** h @ W for W [d, V] stored by column blocks: each block's product, concatenated along the vocabulary. */
export function projectVocab(h: tf.Tensor2D, vb: VocabBlocks): tf.Tensor2D {
  if (vb.axis !== 1) throw new Error('projectVocab: the LM head is stored [d, V], split by columns');
  const whole = (b: number) => headSlice(vb, b, 0, vb.widths[b]).times(h);
  if (vb.starts.length === 1) return whole(0);
  return tf.tidy(
    () =>
      tf.concat(
        vb.starts.map((_, b) => whole(b)),
        1,
      ) as tf.Tensor2D,
  );
}
