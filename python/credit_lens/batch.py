"""A batch of completions as a credit strategy sees it: (B, T) tensors of what a trainer has per token, and, for the
strategies that work per group (gtpo's paper form, ktae, otb, reward_decomposition), what it has per episode."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The sections of a completion (docs/design.md#semantics): think, answer, other, as small integer codes.
SECTION_CODES = {"other": 0, "think": 1, "answer": 2}

# What each optional field holds, for the error that names a missing one.
GROUP_FIELDS = {
    "groups": "each episode's group (the prompt it answers): (B,) integers",
    "rewards": "each episode's total reward: (B,)",
    "success": "whether each episode solved its task: (B,) booleans",
    "ids": "each token's id: (B, T) integers",
    "prob_sq": "each position's sum of squared probabilities under the sampling policy: (B, T)",
    "tags": "whether each token overlaps a <think>/<answer> tag: (B, T) booleans",
    "reward_parts": "each episode's format, answer and reasoning rewards: a dict of (B,) tensors",
}


@dataclass
class TokenBatch:
    """Per-token inputs of B completions padded to T tokens.

    logprobs: log-prob of each token under the policy that sampled it (detached).
    entropies: entropy of the policy's distribution at each position.
    sections: SECTION_CODES of each token (long).
    mask: 1 on the completion's valid tokens, 0 on padding (or on tokens the trainer leaves out of the loss). Valid
      tokens come first in a row: a completion's length is its row's count of them.
    The rest is read only by the strategies that need it (GROUP_FIELDS says what each holds); scale_rewards is the
    trainer's advantage normalisation (group, batch or none), and eos_ids the end-of-sequence ids ktae gives no bonus.
    """

    logprobs: torch.Tensor
    entropies: torch.Tensor
    sections: torch.Tensor
    mask: torch.Tensor
    groups: torch.Tensor | None = None
    rewards: torch.Tensor | None = None
    success: torch.Tensor | None = None
    ids: torch.Tensor | None = None
    prob_sq: torch.Tensor | None = None
    tags: torch.Tensor | None = None
    reward_parts: dict[str, torch.Tensor] | None = None
    eos_ids: tuple[int, ...] = ()
    scale_rewards: str = "group"

    def __post_init__(self) -> None:
        shape = self.logprobs.shape
        if self.logprobs.dim() != 2:
            raise ValueError(f"TokenBatch.logprobs: expected a (B, T) tensor, got {self.logprobs.dim()} dimensions")
        for name in ("entropies", "sections", "mask", "ids", "prob_sq", "tags"):
            value = getattr(self, name)
            if value is not None and value.shape != shape:
                raise ValueError(f"TokenBatch.{name}: shape {tuple(value.shape)}, expected {tuple(shape)} as logprobs")
        for name in ("groups", "rewards", "success"):
            value = getattr(self, name)
            if value is not None and tuple(value.shape) != (shape[0],):
                raise ValueError(
                    f"TokenBatch.{name}: shape {tuple(value.shape)}, expected ({shape[0]},), one per episode"
                )

    @property
    def valid(self) -> torch.Tensor:
        """The mask as booleans."""
        return self.mask.bool()

    def need(self, name: str, strategy: str):
        """An optional field a strategy reads, or an error naming the field, the strategy and what the field holds."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"TokenBatch.{name}: {strategy} reads it ({GROUP_FIELDS[name]}); this batch has none")
        return value

    def group_members(self, strategy: str) -> list[list[int]]:
        """The episodes of each group, in batch order."""
        members: dict = {}
        for i, g in enumerate(self.need("groups", strategy).tolist()):
            members.setdefault(g, []).append(i)
        return list(members.values())

    @classmethod
    def from_lists(cls, logprobs, entropies, sections, mask, dtype: torch.dtype = torch.float64, **extra) -> TokenBatch:
        """From nested lists (sections as names), as the shared test vectors hold them; `extra` the optional fields."""
        conv = {
            "groups": lambda v: torch.tensor(v, dtype=torch.long),
            "rewards": lambda v: torch.tensor(v, dtype=dtype),
            "success": lambda v: torch.tensor(v, dtype=torch.bool),
            "ids": lambda v: torch.tensor(v, dtype=torch.long),
            "prob_sq": lambda v: torch.tensor(v, dtype=dtype),
            "tags": lambda v: torch.tensor(v, dtype=torch.bool),
            "reward_parts": lambda v: {k: torch.tensor(x, dtype=dtype) for k, x in v.items()},
            "eos_ids": tuple,
            "scale_rewards": str,
        }
        unknown = sorted(set(extra) - set(conv))
        if unknown:
            raise ValueError(f"TokenBatch.from_lists: no field {unknown[0]}; the optional ones are {', '.join(conv)}")
        return cls(
            logprobs=torch.tensor(logprobs, dtype=dtype),
            entropies=torch.tensor(entropies, dtype=dtype),
            sections=torch.tensor([[SECTION_CODES[s] for s in row] for row in sections], dtype=torch.long),
            mask=torch.tensor(mask, dtype=dtype),
            **{k: conv[k](v) for k, v in extra.items()},
        )
