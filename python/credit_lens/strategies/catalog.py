"""The strategies this package carries, with their parameters' defaults (the seeds' names, as a run config's credit
section flattens them), and the ones it refuses, each with the reason. A new strategy is its file in this folder and
its entry below; test/vectors/credit_strategies.json (written by the TypeScript engine) checks it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from credit_lens.batch import TokenBatch
from credit_lens.strategies import entropy_mask, entropy_weighted, gtpo, inverse_logprob, none, outcome_conditional


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    weights: Callable[[TokenBatch, dict], torch.Tensor]
    defaults: dict
    # a parameter and the values it may take, where it is a choice
    choices: dict
    # what its weights read of the batch beyond the mask: "logprobs", "entropies", "sections"
    reads: frozenset = frozenset()


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
            "w = H / mean H over the episode (the seeds' GTPO-style weighting, form: seed)",
            gtpo.weights,
            {"form": "seed"},
            {"form": ("seed",)},
            frozenset({"entropies"}),
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
    "ktae": "not carried by the Python package yet (the TypeScript engine has it)",
    "otb": "not carried by the Python package yet (the TypeScript engine has it)",
    "reward_decomposition": "not carried by the Python package yet (the TypeScript engine has it)",
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


def strategy_weights(name: str, params: dict | None, batch: TokenBatch) -> torch.Tensor:
    """The strategy's weight w of every token (0 on masked tokens), detached: (B, T)."""
    s, full = resolve(name, params)
    return s.weights(batch, full).detach()


def scaled_advantages(weights: torch.Tensor, batch: TokenBatch, advantages: torch.Tensor) -> torch.Tensor:
    """A_i * w_{i,t} on valid tokens and 0 elsewhere: (B, T), from weights a caller already has."""
    a = advantages.to(weights.dtype).reshape(-1, 1)
    if a.shape[0] != weights.shape[0]:
        raise ValueError(f"advantages: {a.shape[0]} episodes, the batch has {weights.shape[0]}")
    return torch.where(batch.valid, a * weights, torch.zeros_like(weights))


def effective_advantages(name: str, params: dict | None, batch: TokenBatch, advantages: torch.Tensor) -> torch.Tensor:
    """The per-token advantage the loss takes, A_i * w_{i,t} on valid tokens and 0 elsewhere: (B, T)."""
    return scaled_advantages(strategy_weights(name, params, batch), batch, advantages)
