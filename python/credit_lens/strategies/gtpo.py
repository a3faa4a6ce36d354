"""gtpo's seed form: seed doc 002's strategy 1 (GTPO-style entropy weighting), w_t = H_t / mean over the episode's valid
tokens of H, so the mean weight is 1 and a token's share of the credit is its share of the episode's entropy. An episode
whose valid tokens all have zero entropy keeps w = 1. (The paper's form, gtpo with form: gtpo, is not carried here yet.)"""

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    valid = batch.valid
    dtype = batch.entropies.dtype
    h = batch.entropies.detach() * valid.to(dtype)
    n = valid.sum(dim=1, keepdim=True).to(dtype)
    mean = torch.where(n > 0, h.sum(dim=1, keepdim=True) / n.clamp(min=1), torch.zeros_like(n))
    w = torch.where(mean > 0, h / torch.where(mean > 0, mean, torch.ones_like(mean)), torch.ones_like(h))
    return w * valid.to(dtype)
