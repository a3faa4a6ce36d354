"""reward_decomposition, seed doc 002's strategy 4: each part of the reward is credited to the tokens it judges, with its
own group advantage (the batch's scale_rewards, as the total's):
  format     on the tag tokens (<think>, </think>, <answer>, </answer>) and the tokens outside both sections;
  answer     on the <answer> section's other tokens;
  reasoning  on the <think> section's other tokens (with reasoning off, they take the answer's advantage).
The parts come with the batch (reward_parts: format, answer, reasoning per episode): from the task's reward worker under
`engine: trl`, or from the reward functions a TRL script names for them. As src/engine/credit/reward_decomposition.ts."""

import torch

from credit_lens.advantages import group_advantages
from credit_lens.batch import SECTION_CODES, TokenBatch

PARTS = ("format", "answer", "reasoning")


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    raise AssertionError("reward_decomposition sets A-hat itself; its weight is A-hat / A")


def advantages(batch: TokenBatch, params: dict, episode_advantages: torch.Tensor) -> torch.Tensor:
    parts = batch.need("reward_parts", "reward_decomposition")
    missing = [p for p in PARTS if p not in parts]
    if missing:
        raise ValueError(
            f"TokenBatch.reward_parts: reward_decomposition reads {', '.join(PARTS)}; missing {missing[0]}"
        )
    tags = batch.need("tags", "reward_decomposition")
    groups = batch.need("groups", "reward_decomposition")
    a = {p: group_advantages(parts[p].to(torch.float64), groups, batch.scale_rewards).unsqueeze(1) for p in PARTS}
    sec = batch.sections
    think = a["reasoning"] if params["reasoning"] else a["answer"]
    out = torch.where(
        tags | (sec == SECTION_CODES["other"]),
        a["format"],
        torch.where(sec == SECTION_CODES["answer"], a["answer"], think),
    )
    return out * batch.valid.to(torch.float64)
