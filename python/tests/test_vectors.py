"""The package's strategies against the shared vectors the TypeScript engine writes (test/vectors/credit_strategies.json):
the same inputs give the same weights and effective advantages, in float64 and in float32 (at float32's tolerance)."""

import json
from pathlib import Path

import pytest
import torch

from credit_lens import TokenBatch, UnsupportedStrategy, effective_advantages, strategy_weights
from credit_lens.strategies.catalog import REFUSED, STRATEGIES

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "test" / "vectors" / "credit_strategies.json").read_text())[
    "vectors"
]


def _id(v):
    return f"{v['strategy']}-{'-'.join(f'{k}={x}' for k, x in v['params'].items())}-{v['case']}"


@pytest.mark.parametrize("v", VECTORS, ids=_id)
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_vector(v, dtype, tol):
    b = dict(v["batch"])
    batch = TokenBatch.from_lists(
        b.pop("logprobs"), b.pop("entropies"), b.pop("sections"), b.pop("mask"), dtype=dtype, **b
    )
    a = torch.tensor(v["advantages"], dtype=dtype)
    w = strategy_weights(v["strategy"], v["params"], batch, a)
    adv = effective_advantages(v["strategy"], v["params"], batch, a)
    torch.testing.assert_close(w, torch.tensor(v["expected"]["weights"], dtype=dtype), rtol=tol, atol=tol)
    torch.testing.assert_close(adv, torch.tensor(v["expected"]["effective_advantage"], dtype=dtype), rtol=tol, atol=tol)


def test_every_carried_strategy_has_vectors():
    assert {v["strategy"] for v in VECTORS} == set(STRATEGIES)


def test_refused_strategies_say_why():
    batch = TokenBatch.from_lists([[-1.0]], [[0.5]], [["answer"]], [[1]])
    for name in REFUSED:
        with pytest.raises(UnsupportedStrategy, match=f"credit.strategy {name}: "):
            strategy_weights(name, {}, batch)
    with pytest.raises(UnsupportedStrategy, match=r"credit.strategy: got 'nope'; expected one of"):
        strategy_weights("nope", {}, batch)
    with pytest.raises(UnsupportedStrategy, match=r"credit.think_discont: outcome_conditional has no such parameter"):
        strategy_weights("outcome_conditional", {"think_discont": 0.5}, batch)
    with pytest.raises(UnsupportedStrategy, match=r"credit.form: got 'paper'; gtpo here takes seed or gtpo"):
        strategy_weights("gtpo", {"form": "paper"}, batch)


def test_a_group_strategy_names_the_field_it_lacks():
    batch = TokenBatch.from_lists([[-1.0, -0.5]], [[0.5, 1.0]], [["answer", "answer"]], [[1, 1]], groups=[0])
    a = torch.tensor([1.0], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"TokenBatch.ids: ktae reads it \(each token's id"):
        effective_advantages("ktae", {}, batch, a)
    with pytest.raises(ValueError, match=r"TokenBatch.prob_sq: otb reads it"):
        effective_advantages(
            "otb", {}, TokenBatch.from_lists([[-1.0]], [[0.5]], [["answer"]], [[1]], groups=[0], rewards=[1]), a
        )
    with pytest.raises(
        ValueError, match=r"strategy_weights: ktae may set A-hat per group; pass the episode advantages"
    ):
        strategy_weights("ktae", {}, batch)
    with pytest.raises(ValueError, match=r"TokenBatch.groups: shape \(2,\), expected \(1,\), one per episode"):
        TokenBatch.from_lists([[-1.0]], [[0.5]], [["answer"]], [[1]], groups=[0, 1])


def test_the_loss_gradient_sees_the_weights_as_constants():
    # w is detached: the gradient of sum(A_hat * l) with respect to l is A_hat itself, as the engine's loss has it
    lp = torch.tensor([[-0.5, -2.0, -0.25]], dtype=torch.float64, requires_grad=True)
    batch = TokenBatch(
        lp,
        torch.tensor([[1.0, 0.5, 2.0]], dtype=torch.float64),
        torch.zeros(1, 3, dtype=torch.long),
        torch.ones(1, 3, dtype=torch.float64),
    )
    a_hat = effective_advantages("inverse_logprob", {"epsilon": 0.1}, batch, torch.tensor([2.0], dtype=torch.float64))
    (a_hat * lp).sum().backward()
    # 2 / (|l| + 0.1), worked out by hand: 2/0.6, 2/2.1, 2/0.35
    torch.testing.assert_close(lp.grad, torch.tensor([[2 / 0.6, 2 / 2.1, 2 / 0.35]], dtype=torch.float64))
