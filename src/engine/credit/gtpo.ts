// Seed doc 002's strategy 1 (GTPO-style entropy weighting): w_t = H_t / mean over the episode's valid tokens of H, so
// the mean weight is 1 and a token's share of the credit is its share of the episode's entropy (linear, where
// entropy_weighted is a softmax). An episode whose valid tokens all have zero entropy keeps w = 1 (nothing to weigh
// by). GTPO's paper form (arXiv 2508.04349: entropy-shaped token rewards, successes and failures normalised apart) is
// not this; METHODS.md gives it.
import { validMask, type CreditStrategy } from './types';

export function gtpoSeedWeights(entropies: number[], mask: number[]): number[] {
  let sum = 0;
  let n = 0;
  for (let t = 0; t < mask.length; t++)
    if (mask[t]) {
      sum += entropies[t];
      n++;
    }
  const mean = n ? sum / n : 0;
  return mask.map((m, t) => (m ? (mean > 0 ? entropies[t] / mean : 1) : 0));
}

export const gtpo: CreditStrategy = {
  name: 'gtpo',
  rowLocal: true,
  weights: (batch) => validMask(batch).map((row, i) => gtpoSeedWeights(batch.entropies[i], row)),
};
