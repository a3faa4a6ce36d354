"""Plain GRPO: the episode advantage is broadcast to every valid token (w = 1)."""

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    return batch.mask.to(batch.logprobs.dtype)
