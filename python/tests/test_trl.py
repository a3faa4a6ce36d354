"""CreditGRPOTrainer on real TRL, on the CPU: a tiny random Qwen2 built from a config with a tokenizer built here (nothing
downloaded) trains 3 GRPO steps on a small task; the per-token advantages that reach TRL's loss are A x w of the
strategy for the same inputs, the run directory it writes holds every step, and a LoRA run through peft trains too."""

import json
from typing import ClassVar

import pytest
import torch

from credit_lens.sections import compute_sections, open_prefill
from credit_lens.testing import dataset, reward_digits, tiny_grpo_config, tiny_model, tiny_tokenizer
from credit_lens.trl import CreditGRPOTrainer


def config(tmp_path, **kw):
    return tiny_grpo_config(str(tmp_path / "out"), kw.pop("max_steps", 3), temperature=1.0, **kw)


class Capturing(CreditGRPOTrainer):
    """Keeps what reached TRL's loss: the per-token advantages, and the inputs to compute them again."""

    seen: ClassVar[list] = []

    def _compute_loss(self, model, inputs):
        self.seen.append({k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in inputs.items()})
        return super()._compute_loss(model, inputs)


def test_three_grpo_steps_with_a_strategy_write_a_credit_lens_run(tmp_path):
    tok = tiny_tokenizer()
    Capturing.seen = []
    run_dir = tmp_path / "trl-entropy_mask"
    trainer = Capturing(
        model=tiny_model(),
        reward_funcs=reward_digits,
        args=config(tmp_path),
        train_dataset=dataset(),
        processing_class=tok,
        strategy="entropy_mask",
        strategy_params={"mask_percentile": 50.0},
        run_dir=run_dir,
    )
    trainer.train()
    assert len(Capturing.seen) >= 3
    for inputs in Capturing.seen:
        a_hat = inputs["advantages"]
        assert a_hat.dim() == 2, "TRL's loss got per-token advantages"
        mask = inputs["completion_mask"].float()
        assert torch.all(a_hat[mask == 0] == 0)
        # on a valid token A-hat is A times entropy_mask's 0 or 1: every nonzero value of a row is that row's A
        for row, m in zip(a_hat, mask):
            vals = row[m.bool()]
            nz = vals[vals != 0]
            if nz.numel():
                assert torch.allclose(nz, nz[0].expand_as(nz))
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "completed" and info["strategy"] == "entropy_mask"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    # each row carries what TRL logged of its step's update (its trainer state's history)
    logged = {h["step"]: h for h in trainer.state.log_history if "loss" in h}
    for r in rows:
        assert r["loss"] == pytest.approx(logged[r["step"]]["loss"])
        assert r["grad_norm"] == pytest.approx(logged[r["step"]]["grad_norm"])
        assert "clip_frac" in r
    assert sorted(p.name for p in (run_dir / "tokens").iterdir()) == [
        "step-000001.arrow",
        "step-000002.arrow",
        "step-000003.arrow",
    ]


def test_the_advantages_in_the_loss_are_the_strategys_for_the_same_inputs(tmp_path):
    tok = tiny_tokenizer()
    Capturing.seen = []
    trainer = Capturing(
        model=tiny_model(1),
        reward_funcs=reward_digits,
        args=config(tmp_path, max_steps=1),
        train_dataset=dataset(),
        processing_class=tok,
        strategy="inverse_logprob",
        strategy_params={"epsilon": 0.5},
    )
    trainer.train()
    inputs = Capturing.seen[0]
    mask = inputs["completion_mask"]
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    att = torch.cat([inputs["prompt_mask"], mask], dim=1)
    # the sampling policy's log-probs, recomputed from the step's model before its update (seeded identically)
    ref = tiny_model(1)
    with torch.no_grad():
        logits = ref(input_ids=ids, attention_mask=att).logits[:, inputs["prompt_ids"].size(1) - 1 : -1]
        lp = torch.log_softmax(logits.float(), -1).gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)
    a_hat = inputs["advantages"]
    # inverse_logprob: A-hat = A / (|l| + 0.5); A per row is recovered from any valid token of it
    w = (1.0 / (lp.abs() + 0.5)) * mask
    a = torch.stack([(a_hat[i][mask[i].bool()] / w[i][mask[i].bool()]).mean() for i in range(a_hat.size(0))])
    torch.testing.assert_close(a_hat, a.unsqueeze(1) * w, rtol=2e-4, atol=2e-5)
    # and A is the group advantage, worked out here from the rewards of the decoded completions:
    # (r - mean) / (sample std + 1e-4) over the group of 4 (design.md#semantics, TRL's scale_rewards "group")
    texts = [
        tok.decode([int(t) for t, m in zip(row, mrow) if m], skip_special_tokens=True)
        for row, mrow in zip(inputs["completion_ids"], mask)
    ]
    r = torch.tensor(reward_digits(texts))
    expected = (r - r.mean()) / (r.std() + 1e-4)
    torch.testing.assert_close(a, expected, rtol=1e-3, atol=1e-4)


def test_a_lora_run_through_peft_trains_and_logs(tmp_path):
    from peft import LoraConfig

    run_dir = tmp_path / "trl-lora"
    trainer = CreditGRPOTrainer(
        model=tiny_model(2),
        reward_funcs=reward_digits,
        args=config(tmp_path, max_steps=2),
        train_dataset=dataset(),
        processing_class=tiny_tokenizer(),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        strategy="outcome_conditional",
        strategy_params={"think_discount": 0.25},
        run_dir=run_dir,
    )
    trainer.train()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2


def test_a_refused_strategy_is_named_before_training():
    from credit_lens import UnsupportedStrategy

    with pytest.raises(UnsupportedStrategy, match="credit.strategy attribution: it trains a head"):
        CreditGRPOTrainer(
            model=tiny_model(), reward_funcs=reward_digits, args=None, train_dataset=dataset(), strategy="attribution"
        )


def test_sections_follow_the_tags_and_the_prefilled_think():
    toks = ["1", "</think>", "\n", "<answer>", "3", "</answer>", "<eos>"]
    assert compute_sections(toks, open_prefill("1+2=<think>")) == [
        "think",
        "think",
        "other",
        "answer",
        "answer",
        "answer",
        "other",
    ]
    assert compute_sections(["<answer>", "3"]) == ["answer", "answer"]
    assert compute_sections(["a", "b"]) == ["other", "other"]


def test_plain_grpo_without_tables_costs_no_extra_forward_pass(tmp_path):
    # none reads nothing of the batch and no run directory asks for tables: the advantages are TRL's A on every valid
    # token, and no no-grad forward pass is added to the step (TRL's own passes all run with gradients here)
    Capturing.seen = []
    no_grad_passes = []

    class Counting(Capturing):
        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            if not torch.is_grad_enabled():
                no_grad_passes.append(1)
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)

    trainer = Counting(
        model=tiny_model(4),
        reward_funcs=reward_digits,
        args=config(tmp_path, max_steps=2),
        train_dataset=dataset(),
        processing_class=tiny_tokenizer(),
        strategy="none",
    )
    trainer.train()
    assert no_grad_passes == []
    for inputs in Capturing.seen:
        a_hat, mask = inputs["advantages"], inputs["completion_mask"].bool()
        for row, m in zip(a_hat, mask):
            assert torch.all(row[~m] == 0)
            assert torch.allclose(row[m], row[m][0].expand_as(row[m]))


def fmt(completions, **kwargs):
    """The format part: 0.1 when the completion closes its think section."""
    return [0.1 if "</think>" in c else 0.0 for c in completions]


def digits(completions, **kwargs):
    return reward_digits(completions)


def steps(completions, **kwargs):
    """A reasoning part outside the total (reward weight 0): the share of "=" among the characters."""
    return [c.count("=") / max(1, len(c)) for c in completions]


@pytest.mark.parametrize(
    "strategy,params",
    [
        ("gtpo", {"form": "gtpo"}),
        ("ktae", {}),
        ("otb", {}),
        ("reward_decomposition", {"reasoning": True}),
    ],
)
def test_a_group_strategy_gets_the_steps_groups_rewards_and_sampler(tmp_path, strategy, params):
    # What reached TRL's loss is the strategy's A-hat of inputs rebuilt here from the step alone: the groups of
    # num_generations, the rewards of the decoded completions, the ids, and the sampling policy's sum of squared
    # probabilities from a copy of the model before its update. The strategy's arithmetic is the shared vectors'.
    from credit_lens import TokenBatch
    from credit_lens.batch import SECTION_CODES
    from credit_lens.sections import tag_tokens
    from credit_lens.strategies.catalog import credit

    tok = tiny_tokenizer()
    Capturing.seen = []
    trainer = Capturing(
        model=tiny_model(5),
        reward_funcs=[fmt, digits, steps],
        args=config(tmp_path, max_steps=1, reward_weights=[1.0, 1.0, 0.0]),
        train_dataset=dataset(),
        processing_class=tok,
        strategy=strategy,
        strategy_params=params,
        success_threshold=0.3,
        reward_parts={"format": "fmt", "answer": "digits", "reasoning": "steps"},
        run_dir=tmp_path / strategy,
    )
    trainer.train()
    inputs = Capturing.seen[0]
    mask = inputs["completion_mask"]
    cids = inputs["completion_ids"]
    ids = torch.cat([inputs["prompt_ids"], cids], dim=1)
    att = torch.cat([inputs["prompt_mask"], mask], dim=1)
    ref = tiny_model(5)
    with torch.no_grad():
        logits = ref(input_ids=ids, attention_mask=att).logits[:, inputs["prompt_ids"].size(1) - 1 : -1].float()
        logp = torch.log_softmax(logits, -1)
        lp = logp.gather(-1, cids.unsqueeze(-1)).squeeze(-1)
        ent = -(logp.exp() * logp).sum(-1)
        psq = logp.exp().pow(2).sum(-1)
    toks = [[tok.decode([int(t)]) for t, m in zip(row, mrow) if m] for row, mrow in zip(cids, mask)]
    # the reward functions see TRL's decoding of each completion
    texts = [
        tok.decode([int(t) for t, m in zip(row, mrow) if m], skip_special_tokens=True) for row, mrow in zip(cids, mask)
    ]
    parts = {"format": fmt(texts), "answer": digits(texts), "reasoning": steps(texts)}
    rewards = torch.tensor(parts["format"]) + torch.tensor(parts["answer"])
    T = mask.size(1)
    secs = [compute_sections(t, "<think>") + ["other"] * (T - len(t)) for t in toks]
    batch = TokenBatch(
        lp,
        ent,
        torch.tensor([[SECTION_CODES[s] for s in row] for row in secs]),
        mask.float(),
        groups=torch.arange(mask.size(0)) // 4,
        rewards=rewards,
        success=rewards >= 0.3,
        ids=cids,
        prob_sq=psq,
        tags=torch.tensor([tag_tokens(t, "<think>") + [False] * (T - len(t)) for t in toks]),
        reward_parts={k: torch.tensor(v) for k, v in parts.items()},
        eos_ids=(tok.eos_token_id,),
    )
    a = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    _, expected = credit(strategy, params, batch, a)
    assert expected.abs().sum() > 0
    torch.testing.assert_close(inputs["advantages"], expected, rtol=2e-4, atol=2e-4)
    run = json.loads((tmp_path / strategy / "run.json").read_text())
    assert run["status"] == "completed"


def test_reward_decomposition_names_the_part_without_a_function():
    with pytest.raises(ValueError, match="reward_parts: reward_decomposition needs the reward function of each of"):
        CreditGRPOTrainer(
            model=tiny_model(),
            reward_funcs=reward_digits,
            args=None,
            train_dataset=dataset(),
            strategy="reward_decomposition",
            reward_parts={"answer": "reward_digits"},
        )
