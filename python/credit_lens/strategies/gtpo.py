"""gtpo, two forms (form):

- seed: seed doc 002's strategy 1 (GTPO-style entropy weighting), w_t = H_t / mean over the episode's valid tokens of H,
  so the mean weight is 1 and a token's share of the credit is its share of the episode's entropy. An episode whose valid
  tokens all have zero entropy keeps w = 1.
- gtpo: the paper's form (Tan et al., arXiv 2508.04349), entropy-shaped token rewards with successful and failed
  sequences apart. Per group, at position t, with O+_t / O-_t the successful / failed sequences still generating at t:
    success i: r_{i,t} = alpha1 * r_i + alpha2 * |O+_t| * H_{i,t} / sum_{k in O+_t} H_{k,t}
    failure j: r_{j,t} = -alpha1 - alpha2 * |O-_t| * (1/H_{j,t}) / sum_{k in O-_t} 1/H_{k,t}
  then each set's shaped rewards are standardised over its own tokens in the group, (r - mean) / (std + 1e-4), sample
  std. entropy_clip [lo, hi] clips H first. A group whose rollouts are all correct or all wrong gets A-hat = 0 (the
  paper trains on DAPO's dynamically sampled batches, where such groups never reach the loss). The formulas and the
  reasons are docs/methods.md's and src/engine/credit/gtpo.ts's; the shared vectors hold the two to the same numbers.
"""

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


def advantages(batch: TokenBatch, params: dict, episode_advantages: torch.Tensor) -> torch.Tensor | None:
    """The paper form's A-hat per token (float64), or None under the seed form (A * w)."""
    if params["form"] == "seed":
        return None
    rewards = batch.need("rewards", "gtpo (form gtpo)").to(torch.float64)
    success = batch.need("success", "gtpo (form gtpo)")
    valid = batch.valid
    h = batch.entropies.detach().to(torch.float64)
    clip = params.get("entropy_clip")
    if clip is not None:
        h = h.clamp(min=float(clip[0]), max=float(clip[1]))
    a1, a2 = float(params["alpha1"]), float(params["alpha2"])
    out = torch.zeros_like(h)
    for members in batch.group_members("gtpo"):
        idx = torch.tensor(members)
        s = success[idx]
        if bool(s.all()) or not bool(s.any()):
            continue
        alive = valid[idx]
        hg = h[idx]
        pos = alive & s.unsqueeze(1)
        neg = alive & ~s.unsqueeze(1)
        sum_h = (hg * pos).sum(dim=0)
        inv = 1.0 / hg.clamp(min=1e-8)
        sum_inv = (inv * neg).sum(dim=0)
        n_pos = pos.sum(dim=0).to(torch.float64)
        n_neg = neg.sum(dim=0).to(torch.float64)
        safe_h = torch.where(sum_h > 0, sum_h, torch.ones_like(sum_h))
        shaped_pos = a1 * rewards[idx].unsqueeze(1) + torch.where(sum_h > 0, a2 * n_pos * hg / safe_h, a2)
        safe_inv = torch.where(sum_inv > 0, sum_inv, torch.ones_like(sum_inv))
        shaped_neg = -a1 - a2 * n_neg * inv / safe_inv
        shaped = torch.where(s.unsqueeze(1), shaped_pos, shaped_neg)
        adv = torch.zeros_like(hg)
        for cell in (pos, neg):
            vals = shaped[cell]
            std = vals.std(unbiased=True) if vals.numel() > 1 else torch.zeros((), dtype=torch.float64)
            adv = torch.where(cell, (shaped - vals.mean()) / (std + 1e-4), adv)
        out[idx] = adv
    return out
