// Hard entropy mask of "Beyond the 80/20 Rule" (arXiv 2506.01939): only tokens at or above the batch's
// mask_percentile-th entropy percentile train (80 → the top 20%). The percentile uses linear interpolation,
// numpy.percentile's default, over all valid tokens of the step's batch.
import { percentileLinear } from '../core/stats';
import { validMask, type CreditStrategy } from './types';

export const entropyMask: CreditStrategy = {
  name: 'entropy_mask',
  weights: (batch, p) => {
    const mask = validMask(batch);
    const all: number[] = [];
    mask.forEach((row, i) =>
      row.forEach((m, t) => {
        if (m) all.push(batch.entropies[i][t]);
      }),
    );
    const q = percentileLinear(all, p.mask_percentile);
    const w: number[][] = mask.map((row, i) => row.map((m, t) => (m && batch.entropies[i][t] >= q ? 1 : 0)));
    if (p.entropy_mask_norm !== 'kept') return w;
    // Seed doc 001's code averages the loss over the kept tokens: with token_mean that is the same as scaling the kept
    // weights by (valid ÷ kept) of the batch.
    const kept = w.flat().reduce((a, b) => a + b, 0);
    const scale = kept > 0 ? all.length / kept : 0;
    return w.map((row) => row.map((x) => x * scale));
  },
};
