"""Runs for the tests on both sides. A small run written through the package's own path (strategy, A-hat, RunWriter), for the tests on both sides:
pytest reads it back with pyarrow, and the TypeScript suite opens it with the views' readers
(`python -m credit_lens.testing <run_dir>`). The episodes are countdown-shaped completions with seeded log-probs and
entropies; the strategy's weights are computed, not written in."""

from __future__ import annotations

import os
import sys
import zlib

import torch

from credit_lens.advantages import group_advantages
from credit_lens.batch import SECTION_CODES, TokenBatch
from credit_lens.rundir import Episode, RunWriter
from credit_lens.sections import compute_sections
from credit_lens.strategies.catalog import credit

COMPLETIONS = [
    (["<think>", "3", "+", "4", "=", "7", "</think>", "\n", "<answer>", "3+4", "</answer>"], 1.1),
    (["<think>", "maybe", " ", "4", "-", "3", "</think>", "\n", "<answer>", "4-3", "</answer>"], 0.1),
    (["<think>", "3", "*", "4", "</think>", "\n", "<answer>", "12", "</answer>"], 0.1),
    (["<think>", "so", "</think>", "\n", "<answer>", "7", "</answer>"], 0.1),
]


def write_sample_run(run_dir: str, strategy: str = "entropy_mask", steps: int = 2, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    params = {"mask_percentile": 50.0} if strategy == "entropy_mask" else {}
    w = RunWriter(
        run_dir,
        "python-sample",
        {"name": "python-sample", "credit": {"strategy": strategy, **params}},
        strategy=strategy,
        total_steps=steps,
    )
    for step in range(1, steps + 1):
        T = max(len(c) for c, _ in COMPLETIONS)
        B = len(COMPLETIONS)
        lp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
        ent = torch.rand(B, T, generator=g, dtype=torch.float64) * 2
        mask = torch.tensor(
            [[1.0 if t < len(c) else 0.0 for t in range(T)] for c, _ in COMPLETIONS], dtype=torch.float64
        )
        secs = [compute_sections(c) + ["other"] * (T - len(c)) for c, _ in COMPLETIONS]
        batch = TokenBatch(lp, ent, torch.tensor([[SECTION_CODES[s] for s in row] for row in secs]), mask)
        rewards = torch.tensor([r for _, r in COMPLETIONS], dtype=torch.float64)
        # one group of four, normalised as the engine's group scaling (design.md#semantics)
        adv = group_advantages(rewards, [0] * B)
        wts, a_hat = credit(strategy, params, batch, adv)
        eps = []
        for i, (toks, r) in enumerate(COMPLETIONS):
            n = len(toks)
            eps.append(
                Episode(
                    prompt_idx=0,
                    prompt="3 4 -> 7\n<think>",
                    token_ids=[zlib.crc32(t.encode()) % 1000 for t in toks],
                    tokens=toks,
                    logprobs=lp[i, :n].tolist(),
                    entropies=ent[i, :n].tolist(),
                    sections=compute_sections(toks),
                    advantage=float(adv[i]),
                    weights=wts[i, :n].tolist(),
                    effective_advantages=a_hat[i, :n].tolist(),
                    reward=float(r),
                    success=r >= 1,
                    reward_format=0.1,
                    reward_answer=float(r) - 0.1,
                )
            )
        w.log_step(
            step,
            eps,
            {
                "reward_mean": float(rewards.mean()),
                "reward_std": float(rewards.std()),
                "success_rate": 0.25,
                "loss": 0.0,
            },
        )
    w.end("completed")


# ---- a tiny TRL run: a random Qwen2 built from a config and a tokenizer built here, nothing downloaded ----

VOCAB = (
    ["<pad>", "<eos>", "<think>", "</think>", "<answer>", "</answer>", " ", "+", "-", "=", "\n"]
    + [str(d) for d in range(10)]
    + list("abcdefgh")
)


def tiny_tokenizer():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    # every vocabulary entry is one token; the tags are whole tokens (a Regex: a plain str is matched literally)
    tok.pre_tokenizer = pre_tokenizers.Split(
        pattern=Regex("(<think>|</think>|<answer>|</answer>|.)"), behavior="isolated"
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.padding_side = "left"
    return fast


def tiny_model(seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(VOCAB),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
    )
    return Qwen2ForCausalLM(cfg)


def write_tiny_hf(folder: str, seed: int = 0, alphabet: str | None = None, **dims) -> None:
    """A random Qwen2 folder (config, safetensors, tokenizer) whose tokenizer has a token for every printable character,
    newline and the tags: the engine's text tasks (countdown, arithmetic) are written in it, nothing is downloaded.
    `dims` override the shape (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
    intermediate_size, max_position_embeddings, vocab_size: at least the tokenizer's, the rest unused rows). With
    `alphabet` the tokenizer is the engine's character tokenizer of that alphabet instead: <pad>, <bos>, <eos> and one
    token per character, tags spelled out (the same vocabulary size and sequence lengths as the engine's scratch model)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    if alphabet is None:
        vocab_list = ["<pad>", "<eos>", "<think>", "</think>", "<answer>", "</answer>", "\n"]
        vocab_list += [chr(c) for c in range(32, 127)]
        split = "(<think>|</think>|<answer>|</answer>|.|\n)"
    else:
        vocab_list = ["<pad>", "<bos>", "<eos>", *alphabet]
        split = "(.|\n)"
    vocab = {t: i for i, t in enumerate(dict.fromkeys(vocab_list))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    # a Regex: a plain str is matched literally, and every text would be one unknown token
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=Regex(split), behavior="isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.padding_side = "left"
    torch.manual_seed(seed)
    shape = {
        "vocab_size": len(vocab),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 128,
        **dims,
    }
    if shape["vocab_size"] < len(vocab):
        raise ValueError(f"vocab_size: got {shape['vocab_size']}; the tokenizer has {len(vocab)} tokens")
    cfg = Qwen2Config(**shape, tie_word_embeddings=True, pad_token_id=0, eos_token_id=vocab["<eos>"])
    Qwen2ForCausalLM(cfg).save_pretrained(folder)
    fast.save_pretrained(folder)


def reward_digits(completions, **kwargs):
    """A small task: reward a completion by the share of its characters that are digits."""
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]


def dataset():
    from datasets import Dataset

    return Dataset.from_dict({"prompt": ["1+2=<think>", "3+4=<think>", "5-1=<think>", "2+2=<think>"]})


def tiny_grpo_config(output_dir: str, steps: int, **kw):
    """TRL's GRPOConfig of the tiny runs: one group of 4 completions of up to 8 tokens a step, on the CPU, seeded."""
    from trl import GRPOConfig

    args = {
        "output_dir": output_dir,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 8,
        "max_steps": steps,
        "learning_rate": 1e-2,
        "logging_steps": 1,
        "report_to": [],
        "save_strategy": "no",
        "use_cpu": True,
        "bf16": False,
        "seed": 0,
    }
    return GRPOConfig(**{**args, **kw})


def write_trl_run(run_dir: str, strategy: str = "entropy_mask", steps: int = 3) -> None:
    """A CreditGRPOTrainer run of `steps` GRPO steps on the CPU, logged to run_dir."""
    import tempfile

    from credit_lens.trl import CreditGRPOTrainer

    with tempfile.TemporaryDirectory() as out:
        args = tiny_grpo_config(out, steps)
        params = {"mask_percentile": 50.0} if strategy == "entropy_mask" else {}
        CreditGRPOTrainer(
            model=tiny_model(),
            reward_funcs=reward_digits,
            args=args,
            train_dataset=dataset(),
            processing_class=tiny_tokenizer(),
            strategy=strategy,
            strategy_params=params,
            run_dir=run_dir,
        ).train()


def write_verl_shards(shard_dir: str, steps: int = 2, seed: int = 0) -> None:
    """Shards written the way a veRL run writes them: this process loads the plugin through veRL's environment variable
    with CREDIT_LENS_SHARD_DIR set (the caller's environment), and calls veRL's own compute_advantage with the plugin's
    credit_lens_grpo estimator on DataProto batches of the tiny tokenizer's countdown-shaped responses."""
    import numpy as np
    from verl import DataProto
    from verl.trainer.ppo import ray_trainer

    import credit_lens.verl as plugin

    if plugin.SHARD_WRITER is None or os.path.abspath(shard_dir) != str(plugin.SHARD_WRITER.dir.resolve()):
        sys.exit("write_verl_shards: run with CREDIT_LENS_SHARD_DIR=<shard_dir> in the environment")
    tok = tiny_tokenizer()
    # the tokens' texts, as CREDIT_LENS_TOKENIZER=<the model's folder> gives them in a real launch
    plugin.SHARD_WRITER.tokenizer = plugin.SHARD_WRITER.tokenizer or tok
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        texts = [["<think>", *list("3+4=7"), "</think>", "<answer>", "7", "</answer>"], ["<think>", "a", "</think>"]]
        rows = [texts[k % 2] if k != 3 else ["<answer>", "8", "</answer>"] for k in range(4)]
        T = max(len(r) for r in rows)
        responses = torch.tensor([tok.convert_tokens_to_ids(r) + [0] * (T - len(r)) for r in rows])
        response_mask = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in rows])
        prompts = torch.tensor([tok.convert_tokens_to_ids(["<pad>", *list("3+4"), "="])] * 4)
        prompt_mask = (prompts != 0).long()
        scores = torch.zeros(4, T)
        for i, r in enumerate(rows):
            scores[i, len(r) - 1] = 1.0 if "7" in r else 0.1 if "</think>" in r else 0.0
        data = DataProto.from_dict(
            tensors={
                "prompts": prompts,
                "responses": responses,
                "attention_mask": torch.cat([prompt_mask, response_mask], dim=1),
                "response_mask": response_mask,
                "old_log_probs": -torch.rand(4, T, generator=g) * 3,
                "entropys": torch.rand(4, T, generator=g) * 2,
                "token_level_scores": scores,
                "token_level_rewards": scores,
            },
            non_tensors={"uid": np.array(["q0"] * 4, dtype=object)},
        )
        ray_trainer.compute_advantage(data, adv_estimator="credit_lens_grpo", num_repeat=4)


def write_trl_completions(output_dir: str, steps: int = 2) -> None:
    """What TRL's own GRPOTrainer logs with log_completions: <output_dir>/completions/completions_NNNNN.parquet, one a
    step (the plain trainer, no Credit Lens), for the importer's tests."""
    from trl import GRPOTrainer

    args = tiny_grpo_config(output_dir, steps, log_completions=True)
    GRPOTrainer(
        model=tiny_model(),
        reward_funcs=reward_digits,
        args=args,
        train_dataset=dataset(),
        processing_class=tiny_tokenizer(),
    ).train()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--trl":
        write_trl_run(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--verl-shards":
        write_verl_shards(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--trl-completions":
        write_trl_completions(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--tiny-hf":
        write_tiny_hf(sys.argv[2])
    elif len(sys.argv) == 2:
        write_sample_run(sys.argv[1])
    else:
        sys.exit("usage: python -m credit_lens.testing [--trl | --verl-shards | --tiny-hf | --trl-completions] <dir>")
