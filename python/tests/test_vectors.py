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
    b = v["batch"]
    batch = TokenBatch.from_lists(b["logprobs"], b["entropies"], b["sections"], b["mask"], dtype=dtype)
    w = strategy_weights(v["strategy"], v["params"], batch)
    adv = effective_advantages(v["strategy"], v["params"], batch, torch.tensor(v["advantages"], dtype=dtype))
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
    with pytest.raises(UnsupportedStrategy, match=r"credit.form: got 'gtpo'; gtpo here takes seed"):
        strategy_weights("gtpo", {"form": "gtpo"}, batch)


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
