"""The strategies this package carries, with their parameters' defaults (the seeds' names, as a run config's credit
section flattens them), and the ones it refuses, each with the reason. A new strategy is its file in this folder and
its entry below; test/vectors/credit_strategies.json (written by the TypeScript engine) checks it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from credit_lens.batch import TokenBatch
from credit_lens.strategies import (
    entropy_mask,
    entropy_weighted,
    gtpo,
    inverse_logprob,
    ktae,
    none,
    otb,
    outcome_conditional,
    reward_decomposition,
)


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    weights: Callable[[TokenBatch, dict], torch.Tensor]
    defaults: dict
    # a parameter and the values it may take, where it is a choice
    choices: dict
    # what it reads of the batch beyond the mask: "logprobs", "entropies", "sections", and TokenBatch's optional fields
    reads: frozenset = frozenset()
    # a strategy that defines A-hat itself rather than as A * w (per group): (batch, params, A) -> A-hat, or None where
    # a setting falls back to A * w (gtpo's seed form); its logged weight is A-hat / A (1 where A = 0)
    advantages: Callable[[TokenBatch, dict, torch.Tensor], torch.Tensor | None] | None = None


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in [
        Strategy("none", "every token gets A (plain GRPO)", none.weights, {}, {}),
        Strategy(
            "outcome_conditional",
            "w = 1 on answer tokens, think_discount elsewhere",
            outcome_conditional.weights,
            {"think_discount": 0.5},
            {},
            frozenset({"sections"}),
        ),
        Strategy(
            "inverse_logprob",
            "w = 1/(|l| + epsilon)",
            inverse_logprob.weights,
            {"epsilon": 0.1, "inverse_logprob_form": "clean"},
            {"inverse_logprob_form": ("clean", "seed")},
            frozenset({"logprobs"}),
        ),
        Strategy(
            "entropy_weighted",
            "w = n * softmax(H / entropy_temp) over the episode",
            entropy_weighted.weights,
            {"entropy_temp": 1.0},
            {},
            frozenset({"entropies"}),
        ),
        Strategy(
            "entropy_mask",
            "only tokens at or above the batch's mask_percentile of entropy",
            entropy_mask.weights,
            {"mask_percentile": 80.0, "entropy_mask_norm": "valid"},
            {"entropy_mask_norm": ("valid", "kept")},
            frozenset({"entropies"}),
        ),
        Strategy(
            "gtpo",
            "seed: w = H / mean H over the episode; gtpo: the paper's entropy-shaped rewards, success and failure apart",
            gtpo.weights,
            {"form": "seed", "alpha1": 1.0, "alpha2": 0.1, "entropy_clip": None},
            {"form": ("seed", "gtpo")},
            frozenset({"entropies", "groups", "rewards", "success"}),
            gtpo.advantages,
        ),
        Strategy(
            "ktae",
            "A / (group std + 1e-6) + KT[token id], the key-token bonus from each id's split of correct and wrong rollouts",
            ktae.weights,
            {"alpha": 1.0, "beta": 1.0, "tf": True},
            {},
            frozenset({"groups", "success", "ids"}),
            ktae.advantages,
        ),
        Strategy(
            "otb",
            "r - B_t, veRL's optimal token baseline weighted by the realized energy",
            otb.weights,
            {"handle_zero_tail": True},
            {},
            frozenset({"logprobs", "groups", "rewards", "prob_sq"}),
            otb.advantages,
        ),
        Strategy(
            "reward_decomposition",
            "each reward part's group advantage on the tokens it judges (format, answer, reasoning)",
            reward_decomposition.weights,
            {"reasoning": True},
            {},
            frozenset({"sections", "groups", "tags", "reward_parts"}),
            reward_decomposition.advantages,
        ),
    ]
}

# What a trainer cannot give, said by name.
REFUSED: dict[str, str] = {
    "attention_credit": "it needs the last layer's attention maps, which the trainers' loss does not see",
    "attribution": "it trains a head on the policy's hidden states inside the engine's forward pass",
    "cal": "it asks an LLM oracle for error spans between rollout and update, a step the trainers do not have",
    "reward_variance": "it needs the engine's importance net, trained on paired rollouts",
    "mc_value": "it samples Monte Carlo continuations from the policy inside the engine",
}


class UnsupportedStrategy(ValueError):
    """A strategy or setting this package does not carry, with the reason."""


def resolve(name: str, params: dict | None = None) -> tuple[Strategy, dict]:
    """The strategy and its full parameters; an unknown name, a refused strategy or a bad choice is an error naming it."""
    if name in REFUSED:
        raise UnsupportedStrategy(f"credit.strategy {name}: {REFUSED[name]}")
    if name not in STRATEGIES:
        known = ", ".join(sorted(STRATEGIES))
        raise UnsupportedStrategy(f"credit.strategy: got {name!r}; expected one of {known}")
    s = STRATEGIES[name]
    full = {**s.defaults, **(params or {})}
    unknown = sorted(set(params or {}) - set(s.defaults))
    if unknown:
        raise UnsupportedStrategy(
            f"credit.{unknown[0]}: {name} has no such parameter; it takes {', '.join(s.defaults) or 'none'}"
        )
    for key, allowed in s.choices.items():
        if full[key] not in allowed:
            raise UnsupportedStrategy(f"credit.{key}: got {full[key]!r}; {name} here takes {' or '.join(allowed)}")
    return s, full


def credit(
    name: str, params: dict | None, batch: TokenBatch, advantages: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The strategy's weights w and effective advantages A-hat of every token (0 on masked tokens), detached: (B, T) each.

    A strategy that defines A-hat itself (per group) gives it, and w = A-hat / A (1 where A = 0), as the engine logs it.
    """
    s, full = resolve(name, params)
    dtype = batch.logprobs.dtype
    a = advantages.detach().to(dtype).reshape(-1)
    if a.shape[0] != batch.logprobs.shape[0]:
        raise ValueError(f"advantages: {a.shape[0]} episodes, the batch has {batch.logprobs.shape[0]}")
    own = s.advantages(batch, full, a) if s.advantages is not None else None
    if own is None:
        w = s.weights(batch, full).detach()
        return w, scaled_advantages(w, batch, a)
    valid = batch.valid
    a_hat = torch.where(valid, own.to(device=valid.device, dtype=dtype), torch.zeros_like(batch.logprobs))
    col = a.reshape(-1, 1)
    w = torch.where(col != 0, a_hat / torch.where(col != 0, col, torch.ones_like(col)), torch.ones_like(a_hat))
    return torch.where(valid, w, torch.zeros_like(w)), a_hat


def strategy_weights(name: str, params: dict | None, batch: TokenBatch, advantages: torch.Tensor | None = None):
    """The strategy's weight w of every token (0 on masked tokens), detached: (B, T). A strategy that defines A-hat per
    group (ktae, otb, reward_decomposition, gtpo's paper form) needs the episode advantages A for its w = A-hat / A."""
    if advantages is not None:
        return credit(name, params, batch, advantages)[0]
    s, full = resolve(name, params)
    if s.advantages is not None:
        raise ValueError(f"strategy_weights: {name} may set A-hat per group; pass the episode advantages")
    return s.weights(batch, full).detach()


def scaled_advantages(weights: torch.Tensor, batch: TokenBatch, advantages: torch.Tensor) -> torch.Tensor:
    """A_i * w_{i,t} on valid tokens and 0 elsewhere: (B, T), from weights a caller already has."""
    a = advantages.to(weights.dtype).reshape(-1, 1)
    if a.shape[0] != weights.shape[0]:
        raise ValueError(f"advantages: {a.shape[0]} episodes, the batch has {weights.shape[0]}")
    return torch.where(batch.valid, a * weights, torch.zeros_like(weights))


def effective_advantages(name: str, params: dict | None, batch: TokenBatch, advantages: torch.Tensor) -> torch.Tensor:
    """The per-token advantage the loss takes: (B, T), 0 on masked tokens."""
    return credit(name, params, batch, advantages)[1]
