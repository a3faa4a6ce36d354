"""otb, veRL's Optimal Token Baseline (algorithm.adv_estimator optimal_token_baseline): a baseline per position instead
of per group. For sequence i of a group and its token t,
  W_{i,t} = sum_{j<=t} (1 - 2 pi_{i,j} + sum_v pi_{i,j,v}^2)   (the realized energy, summed)
  B_t     = sum_k r_k W_{k,t} / (sum_k W_{k,t} + 1e-8)       over the group's sequences still alive at t
  A-hat   = r_i - B_t
with r the outcome reward, unscaled by the group's std. With handle_zero_tail a group's lone longest completion gets
baseline 0 past the second-longest one. pi and sum pi^2 are the sampler's (exp of logprobs, prob_sq). As
src/engine/credit/otb.ts; the shared vectors hold the two to the same numbers."""

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    raise AssertionError("otb sets A-hat itself; its weight is A-hat / A")


def advantages(batch: TokenBatch, params: dict, episode_advantages: torch.Tensor) -> torch.Tensor:
    rewards = batch.need("rewards", "otb").to(torch.float64)
    prob_sq = batch.need("prob_sq", "otb").detach().to(torch.float64)
    valid = batch.valid
    vf = valid.to(torch.float64)
    energy = (1 - 2 * batch.logprobs.detach().to(torch.float64).exp() + prob_sq) * vf
    w = energy.cumsum(dim=1) * vf
    lengths = valid.sum(dim=1)
    out = torch.zeros_like(w)
    for members in batch.group_members("otb"):
        idx = torch.tensor(members)
        wg = w[idx]
        r = rewards[idx].unsqueeze(1)
        base = (r * wg).sum(dim=0) / (wg.sum(dim=0) + 1e-8)
        base = base.unsqueeze(0).expand_as(wg).clone()
        lens = lengths[idx]
        if params["handle_zero_tail"] and len(members) > 1:
            ordered = lens.sort().values
            longest, second = int(ordered[-1]), int(ordered[-2])
            if longest > second:
                k = int((lens == longest).nonzero()[0])
                base[k, second:] = 0
        out[idx] = (r - base) * vf[idx]
    return out
