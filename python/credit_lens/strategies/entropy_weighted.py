"""Seed doc 001 mitigation 4 (soft "Beyond the 80/20 Rule"): w = n_i * softmax_t(H / entropy_temp) over episode i's valid
tokens, so the mean weight is 1 and high-entropy "forking" tokens get more. An episode without valid tokens gets 0."""

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    valid = batch.valid
    z = batch.entropies.detach() / float(params["entropy_temp"])
    z = z.masked_fill(~valid, float("-inf"))
    n = valid.sum(dim=1, keepdim=True).to(z.dtype)
    # a row of -inf alone would give NaN: such a row has no valid token and its weights are 0
    soft = torch.softmax(torch.where(n > 0, z, torch.zeros_like(z)), dim=1)
    return torch.where(valid, n * soft, torch.zeros_like(soft))
