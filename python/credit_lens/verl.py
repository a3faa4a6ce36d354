"""Credit Lens inside veRL, registered with veRL's own registries. Load it in a launch command with
VERL_USE_EXTERNAL_MODULES=credit_lens.verl (or through the `verl.plugins` entry point this package declares), then:

    algorithm.adv_estimator=credit_lens_grpo                 # the engine's group advantage (sample std + 1e-4)
    actor_rollout_ref.actor.policy_loss.loss_mode=credit_lens_inverse_logprob

- Advantage estimators see rewards, masks and the group ids only: credit_lens_grpo is the engine's A (its scale from
  CREDIT_LENS_SCALE_REWARDS, default group), broadcast over the response.
- Policy losses see the old log-probs: credit_lens_<strategy> reweights the advantages by the strategy's weights of
  those log-probs before veRL's vanilla clipped loss, for the strategies whose weights need nothing else (none,
  inverse_logprob). Their parameters come from CREDIT_LENS_CREDIT, a JSON object ({"epsilon": 0.1}), which Ray's
  runtime_env carries to the workers.
- Strategies that need entropies (entropy_weighted, entropy_mask, gtpo) are not registered: veRL's actor computes the
  entropy for its entropy bonus but does not pass it to the policy loss, so they would need a patched
  dp_actor.update_policy. Those that need the completion's text (outcome_conditional's sections) likewise.
"""

from __future__ import annotations

import json
import os

import torch
from verl.trainer.ppo.core_algos import get_policy_loss_fn, register_adv_est, register_policy_loss

from credit_lens.advantages import group_advantages
from credit_lens.batch import TokenBatch
from credit_lens.strategies.catalog import strategy_weights

# strategies whose weights need only the old log-probs and the mask
LOSS_STRATEGIES = ("none", "inverse_logprob")


def credit_params() -> dict:
    raw = os.environ.get("CREDIT_LENS_CREDIT", "").strip()
    if not raw:
        return {}
    try:
        params = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"CREDIT_LENS_CREDIT: not a JSON object ({e}); expected e.g. '{{\"epsilon\": 0.1}}'") from e
    if not isinstance(params, dict):
        raise TypeError(f"CREDIT_LENS_CREDIT: got {raw!r}; expected a JSON object")
    return params


@register_adv_est("credit_lens_grpo")
def credit_lens_grpo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index, config=None, **kwargs):
    """The engine's episode advantage of each response, on its valid tokens: (advantages, returns), both (bs, T)."""
    scale = os.environ.get("CREDIT_LENS_SCALE_REWARDS", "group")
    with torch.no_grad():
        a = group_advantages(token_level_rewards.sum(dim=-1), index, scale)
        out = a.unsqueeze(-1) * response_mask
    return out, out


def _policy_loss(strategy: str):
    def loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode="token-mean",
        config=None,
        rollout_is_weights=None,
    ):
        params = credit_params()
        zeros = torch.zeros_like(old_log_prob)
        batch = TokenBatch(
            old_log_prob.detach(), zeros, torch.zeros_like(old_log_prob, dtype=torch.long), response_mask
        )
        w = strategy_weights(strategy, params, batch).to(advantages.dtype)
        return get_policy_loss_fn("vanilla")(
            old_log_prob, log_prob, advantages * w, response_mask, loss_agg_mode, config, rollout_is_weights
        )

    loss.__name__ = f"credit_lens_{strategy}"
    loss.__doc__ = (
        f"veRL's vanilla clipped loss on the advantages reweighted by Credit Lens's {strategy} of the old log-probs."
    )
    return register_policy_loss(f"credit_lens_{strategy}")(loss)


for _s in LOSS_STRATEGIES:
    _policy_loss(_s)
