"""Hard entropy mask of "Beyond the 80/20 Rule" (arXiv 2506.01939): only tokens at or above the batch's
mask_percentile-th entropy percentile train (80 keeps the top 20 %, TRL's top_entropy_quantile 0.2). The percentile
interpolates linearly, as numpy.percentile's default does, over all valid tokens of the step's batch.

entropy_mask_norm kept reproduces the GRPO credit-assignment mitigations' code, which averages the loss over the kept
tokens: with token_mean that is the kept weights scaled by (valid / kept) of the batch.
"""

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    valid = batch.valid
    h = batch.entropies.detach()
    values = h[valid]
    dtype = h.dtype
    if values.numel() == 0:
        return torch.zeros_like(h)
    q = torch.quantile(values.to(torch.float64), float(params["mask_percentile"]) / 100.0, interpolation="linear").to(
        dtype
    )
    w = (valid & (h >= q)).to(dtype)
    if params.get("entropy_mask_norm", "valid") != "kept":
        return w
    kept = w.sum()
    return w * (values.numel() / kept) if kept > 0 else torch.zeros_like(w)
