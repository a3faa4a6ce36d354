// Seed doc 001 mitigation 4 (after "Beyond the 80/20 Rule", arXiv 2506.01939, but soft): w = n_i·softmax_t(H/entropy_temp)
// over the episode's valid tokens, so the mean weight is 1 and high-entropy "forking" tokens get more.
import { scaledSoftmax, validMask, type CreditStrategy } from './types';

export const entropyWeighted: CreditStrategy = {
  name: 'entropy_weighted',
  rowLocal: true,
  weights: (batch, p) => validMask(batch).map((row, i) => scaledSoftmax(batch.entropies[i], row, p.entropy_temp)),
};
