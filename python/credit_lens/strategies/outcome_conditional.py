"""Seed doc 001 mitigation 1: full advantage on the <answer> section, think_discount elsewhere."""

import torch

from credit_lens.batch import SECTION_CODES, TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    dtype = batch.logprobs.dtype
    answer = batch.sections == SECTION_CODES["answer"]
    w = torch.where(answer, torch.ones((), dtype=dtype), torch.tensor(float(params["think_discount"]), dtype=dtype))
    return w * batch.mask.to(dtype)
