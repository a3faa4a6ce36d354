// Seed 001 mitigation 2: w = 1/(|ℓ| + epsilon) evens out gradient magnitude between confident and unconfident
// tokens. Small epsilon gives near-certain tokens huge weights — seed 002 saw it destabilise training; the
// trainer's NaN/Inf guard reports and skips such steps.
import { validMask, type CreditStrategy } from './types';

export const inverseLogprob: CreditStrategy = {
  name: 'inverse_logprob',
  weights: (batch, p) =>
    validMask(batch).map((row, i) => row.map((m, t) => (m ? 1 / (Math.abs(batch.logprobs[i][t]) + p.epsilon) : 0))),
};
