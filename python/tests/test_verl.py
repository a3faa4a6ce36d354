"""The veRL plugin, through veRL's own registries (real veRL, CPU): loaded by VERL_USE_EXTERNAL_MODULES in a fresh
process, looked up with get_adv_estimator_fn / get_policy_loss_fn, called on tensors and checked against the shared
vectors the TypeScript engine writes. A full veRL training run needs GPUs and Ray workers, and is not run here."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn

import credit_lens.verl  # noqa: F401  (registers the functions in this process)
from credit_lens.advantages import group_advantages

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "test" / "vectors" / "credit_strategies.json").read_text())
CFG = OmegaConf.create(
    {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0, "global_batch_info": {}}
)


@pytest.mark.parametrize("v", VECTORS["advantages"], ids=lambda v: f"{v['scale']}-{len(v['rewards'])}")
def test_group_advantages_are_the_engines(v):
    got = group_advantages(torch.tensor(v["rewards"], dtype=torch.float64), v["groups"], v["scale"])
    torch.testing.assert_close(got, torch.tensor(v["expected"], dtype=torch.float64), rtol=1e-12, atol=1e-12)


def test_the_plugin_loads_through_verls_environment_variable():
    code = (
        "import verl\n"
        "from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn\n"
        "print(get_adv_estimator_fn('credit_lens_grpo').__name__, get_policy_loss_fn('credit_lens_inverse_logprob').__name__)\n"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "credit_lens.verl", "VERL_USE_EXTERNAL_PLUGINS": "none"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["credit_lens_grpo", "credit_lens_inverse_logprob"]


def test_the_advantage_estimator_broadcasts_the_engines_advantage_over_the_response():
    v = next(x for x in VECTORS["advantages"] if x["scale"] == "group")
    n = len(v["rewards"])
    mask = torch.ones(n, 5)
    mask[:, 3:] = 0
    rewards = torch.zeros(n, 5)
    rewards[:, 2] = torch.tensor(v["rewards"])  # veRL puts the score on the last valid token
    adv, ret = get_adv_estimator_fn("credit_lens_grpo")(
        token_level_rewards=rewards, response_mask=mask, index=np.array(v["groups"])
    )
    expected = torch.tensor(v["expected"], dtype=torch.float32).unsqueeze(-1) * mask
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ret, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "v",
    [
        v
        for v in VECTORS["vectors"]
        if v["strategy"] == "inverse_logprob" and v["params"]["inverse_logprob_form"] == "clean"
    ],
)
def test_the_policy_loss_is_vanillas_on_the_strategys_advantages(v, monkeypatch):
    monkeypatch.setenv("CREDIT_LENS_CREDIT", json.dumps(v["params"]))
    old = torch.tensor(v["batch"]["logprobs"], dtype=torch.float64)
    mask = torch.tensor(v["batch"]["mask"], dtype=torch.float64)
    # the current policy a little off the old one, so the ratio and the clip take part
    new = (old + 0.05 * torch.arange(old.numel(), dtype=torch.float64).reshape(old.shape).sin()).requires_grad_()
    a = torch.tensor(v["advantages"], dtype=torch.float64).unsqueeze(-1) * mask
    loss, metrics = get_policy_loss_fn("credit_lens_inverse_logprob")(old, new, a, mask, "token-mean", CFG)
    ref_new = new.detach().clone().requires_grad_()
    ref, ref_metrics = get_policy_loss_fn("vanilla")(
        old, ref_new, torch.tensor(v["expected"]["effective_advantage"], dtype=torch.float64), mask, "token-mean", CFG
    )
    torch.testing.assert_close(loss, ref)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(new.grad, ref_new.grad)
    assert metrics == ref_metrics


def test_a_bad_credit_setting_is_named(monkeypatch):
    monkeypatch.setenv("CREDIT_LENS_CREDIT", "{epsilon: 0.1}")
    lp = torch.full((1, 2), -0.5)
    with pytest.raises(ValueError, match="CREDIT_LENS_CREDIT: not a JSON object"):
        get_policy_loss_fn("credit_lens_inverse_logprob")(lp, lp, torch.ones(1, 2), torch.ones(1, 2), "token-mean", CFG)
    monkeypatch.setenv("CREDIT_LENS_CREDIT", '{"epsilonn": 0.1}')
    with pytest.raises(ValueError, match="credit.epsilonn: inverse_logprob has no such parameter"):
        get_policy_loss_fn("credit_lens_inverse_logprob")(lp, lp, torch.ones(1, 2), torch.ones(1, 2), "token-mean", CFG)


def _write_shards(tmp_path, shard_dir, steps=2, tokenizer=None):
    env = {
        **os.environ,
        "VERL_USE_EXTERNAL_MODULES": "credit_lens.verl",
        "VERL_USE_EXTERNAL_PLUGINS": "none",
        "CREDIT_LENS_SHARD_DIR": str(shard_dir),
        "CREDIT_LENS_STRATEGY": "inverse_logprob",
        "CREDIT_LENS_CREDIT": '{"epsilon": 0.5}',
    }
    if tokenizer:
        env["CREDIT_LENS_TOKENIZER"] = str(tokenizer)
    code = f"from credit_lens.testing import write_verl_shards; write_verl_shards({str(shard_dir)!r}, {steps})"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_shard_holds_what_the_loss_trains_with_and_a_resume_continues_its_steps(tmp_path, monkeypatch):
    from credit_lens.testing import tiny_tokenizer

    tok_dir = tmp_path / "tokenizer"
    tiny_tokenizer().save_pretrained(tok_dir)
    shards = tmp_path / "shards"
    _write_shards(tmp_path, shards, 2, tokenizer=tok_dir)
    _write_shards(tmp_path, shards, 1, tokenizer=tok_dir)  # a resumed trainer: step 3, nothing overwritten
    assert sorted(p.name for p in shards.iterdir()) == ["step_1.jsonl", "step_2.jsonl", "step_3.jsonl"]
    rows = [json.loads(line) for line in (shards / "step_1.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["uid"] for r in rows} == {"q0"}
    rewards = torch.tensor([r["reward"] for r in rows], dtype=torch.float64)
    a = group_advantages(rewards, [0] * 4)
    loss = get_policy_loss_fn("credit_lens_inverse_logprob")
    for i, r in enumerate(rows):
        assert r["tokens"] == [tiny_tokenizer().convert_ids_to_tokens(t) for t in r["token_ids"]]
        assert abs(r["advantage"] - float(a[i])) < 1e-5
        old = torch.tensor([r["old_log_probs"]])
        w = 1 / (old.abs() + 0.5)
        torch.testing.assert_close(torch.tensor([r["weights"]]), w, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(torch.tensor([r["effective_advantages"]]), r["advantage"] * w, rtol=1e-5, atol=1e-6)
        # the loss the trainer ran (same strategy and setting) is veRL's vanilla loss on the shard's A-hat
        monkeypatch.setenv("CREDIT_LENS_CREDIT", '{"epsilon": 0.5}')
        new = old + 0.1
        mask = torch.ones_like(old)
        got = loss(old, new, torch.full_like(old, r["advantage"]), mask, "token-mean", CFG)[0]
        ref = get_policy_loss_fn("vanilla")(
            old, new, torch.tensor([r["effective_advantages"]]), mask, "token-mean", CFG
        )
        torch.testing.assert_close(got, ref[0], rtol=1e-5, atol=1e-6)
