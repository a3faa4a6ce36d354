"""A batch of completions as a credit strategy sees it: (B, T) tensors of what a trainer has per token."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The sections of a completion (docs/design.md#semantics): think, answer, other, as small integer codes.
SECTION_CODES = {"other": 0, "think": 1, "answer": 2}


@dataclass
class TokenBatch:
    """Per-token inputs of B completions padded to T tokens.

    logprobs: log-prob of each token under the policy that sampled it (detached).
    entropies: entropy of the policy's distribution at each position.
    sections: SECTION_CODES of each token (long).
    mask: 1 on the completion's valid tokens, 0 on padding (or on tokens the trainer leaves out of the loss).
    """

    logprobs: torch.Tensor
    entropies: torch.Tensor
    sections: torch.Tensor
    mask: torch.Tensor

    def __post_init__(self) -> None:
        shape = self.logprobs.shape
        for name in ("entropies", "sections", "mask"):
            got = getattr(self, name).shape
            if got != shape:
                raise ValueError(f"TokenBatch.{name}: shape {tuple(got)}, expected {tuple(shape)} as logprobs")
        if self.logprobs.dim() != 2:
            raise ValueError(f"TokenBatch.logprobs: expected a (B, T) tensor, got {self.logprobs.dim()} dimensions")

    @property
    def valid(self) -> torch.Tensor:
        """The mask as booleans."""
        return self.mask.bool()

    @classmethod
    def from_lists(cls, logprobs, entropies, sections, mask, dtype: torch.dtype = torch.float64) -> TokenBatch:
        """From nested lists (sections as names), as the shared test vectors hold them."""
        return cls(
            logprobs=torch.tensor(logprobs, dtype=dtype),
            entropies=torch.tensor(entropies, dtype=dtype),
            sections=torch.tensor([[SECTION_CODES[s] for s in row] for row in sections], dtype=torch.long),
            mask=torch.tensor(mask, dtype=dtype),
        )
