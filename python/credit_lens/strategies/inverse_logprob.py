"""Seed doc 001 mitigation 2: w = 1/(|l| + epsilon), which evens out gradient magnitude between confident and unconfident
tokens (l detached).

inverse_logprob_form seed reproduces seed doc 001's code, which keeps l in the autograd graph inside w: the gradient of
A*w(l)*l = A*l/(|l|+eps) with respect to l (l <= 0) is A*eps/(|l|+eps)^2, so that factor is the weight it trains with.
"""

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    eps = float(params["epsilon"])
    d = batch.logprobs.detach().abs() + eps
    w = eps / (d * d) if params.get("inverse_logprob_form", "clean") == "seed" else 1.0 / d
    return w * batch.mask.to(w.dtype)
