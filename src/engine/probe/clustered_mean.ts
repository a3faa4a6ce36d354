// A mean over a probe's episodes with its interval over prompts, the cluster a probe's episodes share: the accuracy
// tables and the cancellation test both report this.
import type { Estimate } from '../../protocol/analysis';
import { clusterBootstrap, meanInterval } from '../core/significance';
import { mean } from '../core/stats';

/** Prompts below which resampling them is too coarse an interval: a t interval over the prompts' means instead. */
export const FEW_PROMPTS = 10;

/**
 * Mean over episodes with a 95 % interval over prompts; `values[i]` null where undefined. From FEW_PROMPTS prompts on, a
 * cluster bootstrap that resamples prompts, each with all of its episodes; below, a t interval over the prompts' means
 * (a bootstrap over 4 prompts covers about 80 %).
 */
export function clusteredMean(values: readonly (number | null)[], prompts: readonly number[], seed = 1): Estimate {
  const byPrompt = definedByPrompt(values, prompts);
  let n = 0;
  for (const row of byPrompt.values()) n += row.length;
  if (n === 0) return { mean: null, lo: null, hi: null, n };
  const b = clusterBootstrap({ d: [...byPrompt.values()], b: 0, c: 0, pairs: n, seeds: 1 }, { seed });
  // one prompt: resampling prompts cannot show any spread, so no interval
  if (byPrompt.size < 2) return { mean: b.diff, lo: null, hi: null, n };
  if (byPrompt.size < FEW_PROMPTS) {
    const t = meanInterval([...byPrompt.values()].map(mean));
    // the point estimate stays the mean over episodes; the interval's width comes from the prompts' spread
    return { mean: b.diff, lo: b.diff - t.half, hi: b.diff + t.half, n };
  }
  return { mean: b.diff, lo: b.lo, hi: b.hi, n };
}

/** The finite values of each prompt, in order. */
export function definedByPrompt(values: readonly (number | null)[], prompts: readonly number[]): Map<number, number[]> {
  const by = new Map<number, number[]>();
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) return;
    const row = by.get(prompts[i]);
    if (row) row.push(v);
    else by.set(prompts[i], [v]);
  });
  return by;
}
