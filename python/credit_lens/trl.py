"""Credit Lens inside TRL: a GRPOTrainer whose loss takes each token's effective advantage A-hat = A * w from a Credit Lens
strategy, and whose every logged step is a Credit Lens step (token and episode tables, a metrics row).

TRL's _compute_loss takes (B, T) advantages (TRL >= 0.26): after TRL has sampled, scored and computed the group
advantages A (B,), this trainer computes the completions' log-probs under the sampling policy (TRL's own
old_per_token_logps where it computed them) and their entropies in one no-grad forward pass, the tokens' sections from
their decoded text, and hands the loss A-hat instead of A. Everything else is TRL's: clipping, the KL term, loss_type.

    from credit_lens.trl import CreditGRPOTrainer
    trainer = CreditGRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=...,
                                strategy="entropy_mask", strategy_params={"mask_percentile": 80}, run_dir="runs/my-run")
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import torch
from trl import GRPOTrainer

from credit_lens.batch import SECTION_CODES, TokenBatch
from credit_lens.rundir import Episode, RunWriter
from credit_lens.sections import compute_sections, open_prefill, tag_tokens
from credit_lens.strategies.catalog import STRATEGIES, credit, resolve
from credit_lens.strategies.reward_decomposition import PARTS


def _text(x: Any) -> str:
    """A prompt or completion as text: conversational ones (lists of {role, content}) joined as the importer joins them."""
    if isinstance(x, str):
        return x
    if isinstance(x, list):
        return "\n".join(m.get("content", "") if isinstance(m, dict) else str(m) for m in x)
    return str(x)


class CreditGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with a Credit Lens credit strategy and, with run_dir, a Credit Lens run directory.

    strategy, strategy_params: a strategy of credit_lens.strategies and its parameters (the seeds' names).
    run_dir: where the run directory goes (its folder is created); None logs nothing.
    logging_every, logging_tokens: as the engine's logging.every and logging.tokens.
    success_threshold: an episode whose total reward reaches it counts as a success (in the tables, and for the
      strategies that read success: ktae, gtpo's paper form).
    reward_parts: for reward_decomposition, which reward function (by TRL's reward_func_names) gives each part:
      {"format": ..., "answer": ..., "reasoning": ...}. A part's function may have reward weight 0 (the reasoning
      part of the seeds' tasks is not in the total).
    success_from: a reward function (weight 0) whose value > 0.5 marks a success, in place of success_threshold: a
      task that knows what solving it means (the engine's reward worker under `engine: trl`) says so itself.
    keep_config, resume_step: for a run directory the engine made (`engine: trl`): its config.yaml stays as the engine
      wrote it, and a resume from TRL's checkpoint of resume_step sets aside the later steps' rows and tables.
    """

    def __init__(
        self,
        *args,
        strategy: str = "none",
        strategy_params: dict | None = None,
        run_dir: str | os.PathLike | None = None,
        run_name: str | None = None,
        logging_every: int = 1,
        logging_tokens: bool = True,
        success_threshold: float = 1.0,
        reward_parts: dict[str, str] | None = None,
        success_from: str | None = None,
        keep_config: bool = False,
        resume_step: int | None = None,
        **kwargs,
    ) -> None:
        # a strategy, parameter or choice this package does not carry is refused before the model is loaded
        _, self.credit_params = resolve(strategy, strategy_params)
        self.credit_strategy = strategy
        if strategy == "reward_decomposition":
            missing = [p for p in PARTS if p not in (reward_parts or {})]
            if missing:
                raise ValueError(
                    f"reward_parts: reward_decomposition needs the reward function of each of {', '.join(PARTS)}; "
                    f"{missing[0]} has none"
                )
        super().__init__(*args, **kwargs)
        self.success_threshold = success_threshold
        self.credit_reward_parts: dict[str, int] = {}
        for part, func in (reward_parts or {}).items():
            if part not in PARTS:
                raise ValueError(f"reward_parts: got part {part!r}; the parts are {', '.join(PARTS)}")
            if func not in self.reward_func_names:
                raise ValueError(
                    f"reward_parts.{part}: got {func!r}; the reward functions are {', '.join(self.reward_func_names)}"
                )
            self.credit_reward_parts[part] = self.reward_func_names.index(func)
        if success_from is not None and success_from not in self.reward_func_names:
            raise ValueError(
                f"success_from: got {success_from!r}; the reward functions are {', '.join(self.reward_func_names)}"
            )
        self.credit_success_from = self.reward_func_names.index(success_from) if success_from is not None else None
        self._credit_per_func: torch.Tensor | None = None
        self._credit_texts: tuple[list[str], list[str]] | None = None
        self._credit_rewards: torch.Tensor | None = None
        # each distinct prompt text's number, kept across steps so that a prompt drawn again keeps it
        self._credit_prompt_ids: dict[str, int] = {}
        self.credit_run: RunWriter | None = None
        if run_dir is not None:
            config = {
                "name": run_name or os.path.basename(os.fspath(run_dir)),
                "engine": "trl",
                "credit": {"strategy": strategy, **self.credit_params},
                "grpo": {
                    "group_size": self.num_generations,
                    "max_new_tokens": self.max_completion_length,
                    "temperature": self.temperature,
                    "scale_rewards": self.scale_rewards,
                    "lr": self.args.learning_rate,
                    "steps": self.args.max_steps,
                },
                "logging": {"every": logging_every, "tokens": logging_tokens},
            }
            self.credit_run = RunWriter(
                run_dir,
                config["name"],
                None if keep_config else config,
                strategy=strategy,
                total_steps=max(0, self.args.max_steps),
                backend="trl",
                logging_every=logging_every,
                logging_tokens=logging_tokens,
                resume_step=resume_step,
            )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._credit_texts = ([_text(p) for p in prompts], [_text(c) for c in completions])
        self._credit_per_func = rewards_per_func
        self._credit_rewards = (rewards_per_func * self.reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(
            dim=1
        )
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return out
        prompt_ids, completion_ids = out["prompt_ids"], out["completion_ids"]
        mask = out["completion_mask"]
        reads = STRATEGIES[self.credit_strategy].reads
        logs = self.credit_run is not None and self.credit_run.logs_tables(self.state.global_step + 1)
        old = out.get("old_per_token_logps")
        # The extra no-grad pass is a forward over the whole batch: only where the strategy or this step's tables read
        # what it gives (plain GRPO and outcome_conditional without tables train at TRL's own cost).
        entropies = prob_sq = None
        if "prob_sq" in reads:
            # otb: one pass gives the log-probs, entropies and sum of squared probabilities together
            logps, entropies, prob_sq = self._sampler_stats(out)
            old = old if old is not None else logps
        elif logs or "entropies" in reads or ("logprobs" in reads and old is None):
            with torch.no_grad():
                logps, entropies, _ = self._get_per_token_logps_and_entropies(
                    self.model,
                    torch.cat([prompt_ids, completion_ids], dim=1),
                    torch.cat([out["prompt_mask"], mask], dim=1),
                    completion_ids.size(1),
                    compute_entropy=True,
                )
            old = old if old is not None else logps
        logprobs = old if old is not None else torch.zeros_like(mask, dtype=torch.float32)
        texts = (
            self._token_texts(completion_ids, mask)
            if logs or reads & {"sections", "tags"} or self.credit_run is not None
            else None
        )
        prompts = self._credit_texts[0] if self._credit_texts else [""] * mask.size(0)
        prefills = [open_prefill(p) for p in prompts]
        sections = (
            [compute_sections(t, f) + ["other"] * (mask.size(1) - len(t)) for t, f in zip(texts, prefills)]
            if texts is not None
            else [["other"] * mask.size(1)] * mask.size(0)
        )
        batch = TokenBatch(
            logprobs.detach().float(),
            (entropies if entropies is not None else torch.zeros_like(logprobs)).detach().float(),
            torch.tensor([[SECTION_CODES[s] for s in row] for row in sections], device=mask.device),
            mask.float(),
            **self._group_inputs(reads, out, texts, prefills, mask, prob_sq),
        )
        advantages = out["advantages"]
        weights, a_hat = credit(self.credit_strategy, self.credit_params, batch, advantages.float())
        out["advantages"] = a_hat.to(advantages.dtype)
        if self.credit_run is not None:
            self._log_credit_step(
                batch, texts, sections, advantages, weights, a_hat, completion_ids, entropies is not None
            )
        return out

    def _local(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """This process's rows of a tensor TRL gathered over every process."""
        offset = self.accelerator.process_index * n
        return x[offset : offset + n] if x.size(0) > n else x

    def _group_inputs(self, reads, out, texts, prefills, mask, prob_sq) -> dict:
        """What the per-group strategies read, for the fields the strategy reads (TokenBatch's optional fields)."""
        n = mask.size(0)
        extra: dict = {"scale_rewards": self.scale_rewards}
        if "groups" in reads:
            # TRL's sampler repeats each prompt num_generations times in a row over the global batch
            start = self.accelerator.process_index * n
            extra["groups"] = torch.arange(start, start + n, device=mask.device) // self.num_generations
        if reads & {"rewards", "success"}:
            extra["rewards"] = self._local(self._credit_rewards, n).float()
            extra["success"] = self._success(n)
        if "ids" in reads:
            extra["ids"] = out["completion_ids"]
            tok = getattr(self.processing_class, "tokenizer", self.processing_class)
            extra["eos_ids"] = (tok.eos_token_id,) if tok.eos_token_id is not None else ()
        if "prob_sq" in reads:
            extra["prob_sq"] = prob_sq
        if "tags" in reads:
            extra["tags"] = torch.tensor(
                [tag_tokens(t, f) + [False] * (mask.size(1) - len(t)) for t, f in zip(texts, prefills)],
                device=mask.device,
            )
        if "reward_parts" in reads:
            per_func = self._local(self._credit_per_func, n).float()
            extra["reward_parts"] = {
                part: per_func[:, k].nan_to_num(0.0) for part, k in self.credit_reward_parts.items()
            }
        return extra

    def _success(self, n: int) -> torch.Tensor:
        """Each local episode's success: its success_from function's verdict, else its total reward's threshold."""
        if self.credit_success_from is not None:
            return self._local(self._credit_per_func, n)[:, self.credit_success_from].nan_to_num(0.0) > 0.5
        return self._local(self._credit_rewards, n) >= self.success_threshold

    @torch.no_grad()
    def _sampler_stats(self, out) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The sampling policy's log-prob of each completion token, the entropy and the sum of squared probabilities
        at each position (otb's realized energy), at TRL's temperature, from one forward pass in rows of 4."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
        k = out["completion_ids"].size(1)
        stats = []
        for start in range(0, ids.size(0), 4):
            logits = self.model(input_ids=ids[start : start + 4], attention_mask=attn[start : start + 4]).logits
            logp = torch.log_softmax(logits[:, -k - 1 : -1, :].float() / self.temperature, dim=-1)
            p = logp.exp()
            token = logp.gather(-1, out["completion_ids"][start : start + 4].unsqueeze(-1)).squeeze(-1)
            stats.append((token, -(p * logp).sum(dim=-1), p.pow(2).sum(dim=-1)))
        return tuple(torch.cat(parts, dim=0) for parts in zip(*stats))

    def _token_texts(self, completion_ids: torch.Tensor, mask: torch.Tensor) -> list[list[str]]:
        tok = self.processing_class
        tok = getattr(tok, "tokenizer", tok)
        return [
            [tok.decode([int(i)]) for i, m in zip(row, mrow) if m]
            for row, mrow in zip(completion_ids.tolist(), mask.tolist())
        ]

    def _log_credit_step(
        self, batch, texts, sections, advantages, weights, a_hat, completion_ids, scored: bool
    ) -> None:
        step = self.state.global_step + 1
        prompts = self._credit_texts[0] if self._credit_texts else [""] * len(texts)
        rewards = self._credit_rewards if self._credit_rewards is not None else torch.zeros(len(texts))
        rewards = self._local(rewards, len(texts))
        success = self._success(len(texts)).tolist() if self._credit_rewards is not None else [False] * len(texts)
        parts = self._local(self._credit_per_func, len(texts)) if self._credit_per_func is not None else None
        episodes = []
        for i, toks in enumerate(texts):
            n = len(toks)
            r = float(rewards[i])
            episodes.append(
                Episode(
                    prompt_idx=self._credit_prompt_ids.setdefault(prompts[i], len(self._credit_prompt_ids)),
                    prompt=prompts[i],
                    token_ids=completion_ids[i, :n].tolist(),
                    tokens=toks,
                    logprobs=batch.logprobs[i, :n].tolist(),
                    entropies=batch.entropies[i, :n].tolist(),
                    sections=sections[i][:n],
                    advantage=float(advantages[i]),
                    weights=weights[i, :n].tolist(),
                    effective_advantages=a_hat[i, :n].tolist(),
                    reward=r,
                    success=bool(success[i]),
                    **(
                        {
                            "reward_format": float(parts[i, self.credit_reward_parts["format"]]),
                            "reward_answer": float(parts[i, self.credit_reward_parts["answer"]]),
                        }
                        if parts is not None and {"format", "answer"} <= set(self.credit_reward_parts)
                        else {}
                    ),
                )
            )
        valid = batch.valid
        metrics = {
            "reward_mean": float(rewards.mean()),
            "reward_std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
            "success_rate": sum(e.success for e in episodes) / max(1, len(episodes)),
            "response_len": float(valid.sum(dim=1).float().mean()),
            **({"entropy_mean": float(batch.entropies[valid].mean())} if scored and valid.any() else {}),
            "credit/mean_abs_effective_advantage": float(a_hat[valid].abs().mean()) if valid.any() else 0.0,
        }
        # written once TRL logs the step's update (its loss, gradient norm, KL and clip fraction join the row), or
        # when the next generation comes first (logging_steps > 1)
        self._flush_credit_step()
        self._credit_pending = (step, episodes, metrics)

    # TRL's names of what the update did, and the engine's metrics-row names for them
    UPDATE_METRICS: ClassVar[dict[str, str]] = {
        "loss": "loss",
        "grad_norm": "grad_norm",
        "kl": "kl",
        "clip_ratio/region_mean": "clip_frac",
    }

    def _flush_credit_step(self, update: dict | None = None) -> None:
        pending = getattr(self, "_credit_pending", None)
        if pending is None or self.credit_run is None:
            return
        step, episodes, metrics = pending
        extra = {
            ours: float(update[theirs]) for theirs, ours in self.UPDATE_METRICS.items() if theirs in (update or {})
        }
        self.credit_run.log_step(step, episodes, {**metrics, **extra})
        self._credit_pending = None

    def log(self, logs: dict, *args, **kwargs) -> None:
        super().log(logs, *args, **kwargs)
        # TRL's log adds its own metrics (clip ratios, KL) to the dict it records: read that record
        if "loss" in logs and self.model.training and self.state.log_history:
            self._flush_credit_step(self.state.log_history[-1])

    def train(self, *args, **kwargs):
        try:
            result = super().train(*args, **kwargs)
        except KeyboardInterrupt:
            if self.credit_run is not None:
                self.credit_run.end("stopped")
            raise
        except Exception as e:
            if self.credit_run is not None:
                self._flush_credit_step()
                self.credit_run.end("failed", error=str(e))
            raise
        if self.credit_run is not None:
            self._flush_credit_step()
            self.credit_run.end("completed")
        return result
