"""The episode advantage A_i of GRPO (docs/design.md#semantics, "Advantages"), as the engine computes it: each reward
against its group's mean; scale group divides by the group's sample std + 1e-4 (TRL's default), batch by the whole
batch's, none not at all (Dr. GRPO). A group of one has std 0."""

from __future__ import annotations

import torch


def _sample_std(x: torch.Tensor) -> torch.Tensor:
    return x.std(unbiased=True) if x.numel() > 1 else torch.zeros((), dtype=x.dtype, device=x.device)


def group_advantages(rewards: torch.Tensor, groups, scale: str = "group") -> torch.Tensor:
    """A of each episode; `groups[i]` names episode i's group (any hashable: a prompt index, veRL's uid)."""
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale_rewards: got {scale!r}; expected group, batch or none")
    rewards = rewards.to(torch.float64) if rewards.dtype not in (torch.float32, torch.float64) else rewards
    members: dict = {}
    for i, g in enumerate(list(groups)):
        members.setdefault(g.item() if hasattr(g, "item") else g, []).append(i)
    out = torch.empty_like(rewards)
    batch_std = _sample_std(rewards) if scale == "batch" else None
    for idx in members.values():
        r = rewards[idx]
        div = _sample_std(r) + 1e-4 if scale == "group" else batch_std + 1e-4 if scale == "batch" else 1.0
        out[idx] = (r - r.mean()) / div
    return out
