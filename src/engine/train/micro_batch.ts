// The one micro-batcher (TRL gradient_accumulation_steps): a batch's rows in near-equal consecutive slices, each
// slice's gradient taken with one tape at a time and summed.
import * as tf from '@tensorflow/tfjs';
import type { CreditBatch } from '../credit';

/** Row ranges [start, end) of n near-equal consecutive micro-batches of B rows (n capped at B). */
export function microBatchRanges(B: number, n: number): [number, number][] {
  const k = Math.min(Math.max(1, Math.floor(n)), Math.max(1, B));
  return Array.from({ length: k }, (_, i): [number, number] => [Math.floor((i * B) / k), Math.floor(((i + 1) * B) / k)]);
}

/** Sums the gradients of each range's loss (from `gradsOf`) into one map, holding one range's tape at a time. */
export async function accumulateGrads(
  ranges: [number, number][],
  gradsOf: (start: number, end: number) => Promise<tf.NamedTensorMap>,
): Promise<tf.NamedTensorMap> {
  let acc: tf.NamedTensorMap | null = null;
  for (const [a, b] of ranges) {
    const g = await gradsOf(a, b);
    if (!acc) {
      acc = g;
      continue;
    }
    for (const [k, t] of Object.entries(g)) {
      const prev: tf.Tensor | undefined = acc[k];
      acc[k] = prev ? prev.add(t) : t;
      if (prev) {
        prev.dispose();
        t.dispose();
      }
    }
  }
  return acc ?? {};
}

/** Per-row arrays of several micro-batches' strategy outputs, joined in row order. */
export function concatRows(parts: Partial<CreditBatch>[]): Partial<CreditBatch> {
  const out: Record<string, unknown[]> = {};
  for (const p of parts) {
    for (const [k, v] of Object.entries(p)) {
      if (!Array.isArray(v)) throw new Error(`concatRows: ${k} is not a per-row array`);
      (out[k] ??= []).push(...v);
    }
  }
  return out as Partial<CreditBatch>;
}
