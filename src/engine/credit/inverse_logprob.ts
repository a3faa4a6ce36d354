// Seed doc 001 mitigation 2: w = 1/(|ℓ| + epsilon) evens out gradient magnitude between confident and unconfident
// tokens. Small epsilon gives near-certain tokens huge weights — seed doc 002 saw it destabilise training; the
// trainer's NaN/Inf guard reports and skips such steps.
import { validMask, type CreditStrategy } from './types';

//
// inverse_logprob_form: seed reproduces seed doc 001's code, which keeps ℓ in the autograd graph inside w: the gradient of
// A·w(ℓ)·ℓ = A·ℓ/(|ℓ|+ε) with respect to ℓ (ℓ ≤ 0) is A·ε/(|ℓ|+ε)², so that factor is the weight it trains with.
export const inverseLogprob: CreditStrategy = {
  name: 'inverse_logprob',
  rowLocal: true,
  weights: (batch, p) =>
    validMask(batch).map((row, i) =>
      row.map((m, t) => {
        if (!m) return 0;
        const d = Math.abs(batch.logprobs[i][t]) + p.epsilon;
        return p.inverse_logprob_form === 'seed' ? p.epsilon / (d * d) : 1 / d;
      }),
    ),
};
