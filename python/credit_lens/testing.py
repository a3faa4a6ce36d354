"""A small run written through the package's own path (strategy, A-hat, RunWriter), for the tests on both sides:
pytest reads it back with pyarrow, and the TypeScript suite opens it with the views' readers
(`python -m credit_lens.testing <run_dir>`). The episodes are countdown-shaped completions with seeded log-probs and
entropies; the strategy's weights are computed, not written in."""

from __future__ import annotations

import sys

import torch

from credit_lens.batch import SECTION_CODES, TokenBatch
from credit_lens.rundir import Episode, RunWriter
from credit_lens.strategies import effective_advantages, strategy_weights

COMPLETIONS = [
    (["<think>", "3", "+", "4", "=", "7", "</think>", "\n", "<answer>", "3+4", "</answer>"], 1.1),
    (["<think>", "maybe", " ", "4", "-", "3", "</think>", "\n", "<answer>", "4-3", "</answer>"], 0.1),
    (["<think>", "3", "*", "4", "</think>", "\n", "<answer>", "12", "</answer>"], 0.1),
    (["<think>", "so", "</think>", "\n", "<answer>", "7", "</answer>"], 0.1),
]


def _sections(tokens: list[str]) -> list[str]:
    out, where = [], "other"
    for t in tokens:
        if t == "<think>":
            where = "think"
        if t == "<answer>":
            where = "answer"
        out.append(where)
        if t in ("</think>", "</answer>"):
            where = "other"
    return out


def write_sample_run(run_dir: str, strategy: str = "entropy_mask", steps: int = 2, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    params = {"mask_percentile": 50.0} if strategy == "entropy_mask" else {}
    w = RunWriter(run_dir, "python-sample", {"name": "python-sample", "credit": {"strategy": strategy, **params}}, strategy=strategy, total_steps=steps)
    for step in range(1, steps + 1):
        T = max(len(c) for c, _ in COMPLETIONS)
        B = len(COMPLETIONS)
        lp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
        ent = torch.rand(B, T, generator=g, dtype=torch.float64) * 2
        mask = torch.tensor([[1.0 if t < len(c) else 0.0 for t in range(T)] for c, _ in COMPLETIONS], dtype=torch.float64)
        secs = [_sections(c) + ["other"] * (T - len(c)) for c, _ in COMPLETIONS]
        batch = TokenBatch(lp, ent, torch.tensor([[SECTION_CODES[s] for s in row] for row in secs]), mask)
        rewards = torch.tensor([r for _, r in COMPLETIONS], dtype=torch.float64)
        # one group of four: A = (r - mean) / (sample std + 1e-4), as the engine's group scaling (design.md#semantics)
        adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
        wts = strategy_weights(strategy, params, batch)
        a_hat = effective_advantages(strategy, params, batch, adv)
        eps = []
        for i, (toks, r) in enumerate(COMPLETIONS):
            n = len(toks)
            eps.append(
                Episode(
                    prompt_idx=0,
                    prompt="3 4 -> 7\n<think>",
                    token_ids=[(hash(t) % 1000) for t in toks],
                    tokens=toks,
                    logprobs=lp[i, :n].tolist(),
                    entropies=ent[i, :n].tolist(),
                    sections=_sections(toks),
                    advantage=float(adv[i]),
                    weights=wts[i, :n].tolist(),
                    effective_advantages=a_hat[i, :n].tolist(),
                    reward=float(r),
                    success=r >= 1,
                    reward_format=0.1,
                    reward_answer=float(r) - 0.1,
                )
            )
        w.log_step(step, eps, {"reward_mean": float(rewards.mean()), "reward_std": float(rewards.std()), "success_rate": 0.25, "loss": 0.0})
    w.end("completed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m credit_lens.testing <run_dir>")
    write_sample_run(sys.argv[1])
