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
  dp_actor.update_policy. Those that need the completion's text (outcome_conditional's sections) likewise; so do the
  per-group ones (ktae's token ids, otb's sum of squared probabilities, reward_decomposition's parts), which an external
  advantage estimator is not given (veRL passes sum_pi_squared to its own optimal_token_baseline only).
- The token shard: with CREDIT_LENS_SHARD_DIR set in the driver's environment, each step's batch is written after
  veRL's compute_advantage (on the driver, where the whole batch is) as <dir>/step_<N>.jsonl, one response a line: its
  uid, prompt and response token ids, the episode advantage A, the strategy's weights of the old log-probs and
  A-hat = A * w (what the credit_lens_<strategy> loss trains with; CREDIT_LENS_STRATEGY names it, default none), the
  old log-probs, the entropies where the batch holds them, and the reward. With CREDIT_LENS_TOKENIZER (the model's
  folder) the tokens' texts come too. `credit-lens import --follow <dir>` reads it as a run still training. This wraps
  compute_advantage where veRL's trainers call it (ray_trainer, and the v1 trainer's utils): the plugin loads in the
  driver, so no fork is needed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from verl.trainer.ppo.core_algos import get_policy_loss_fn, register_adv_est, register_policy_loss

from credit_lens.advantages import group_advantages
from credit_lens.batch import TokenBatch
from credit_lens.strategies.catalog import credit, resolve, strategy_weights

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


SHARD_FORMAT = "credit-lens-verl-shard/1"


def _row_list(x) -> list:
    return x.tolist() if hasattr(x, "tolist") else list(x)


class ShardWriter:
    """Writes a step's responses as one JSON-lines shard, whole, renamed into place (a follower never reads half)."""

    def __init__(
        self, shard_dir: str | os.PathLike, strategy: str = "none", params: dict | None = None, tokenizer=None
    ):
        resolve(strategy, params)
        self.dir = Path(shard_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.strategy, self.params, self.tokenizer = strategy, params or {}, tokenizer
        done = [int(m.group(1)) for f in self.dir.iterdir() if (m := re.fullmatch(r"step_(\d+)\.jsonl", f.name))]
        # a resumed trainer continues after the last shard written
        self.step = max(done, default=0)

    def write(self, batch, non_tensor_batch) -> Path:
        """One step: `batch` holds veRL's tensors (prompts, responses, attention_mask, response_mask, advantages,
        old_log_probs, token_level_scores, entropys where computed), `non_tensor_batch` the uids."""
        self.step += 1
        mask = batch["response_mask"].bool()
        prompts = batch["prompts"]
        prompt_mask = batch["attention_mask"][:, : prompts.size(1)].bool()
        adv_tok = batch["advantages"].float()
        # the episode advantage: veRL broadcasts it over the response; read at each row's first valid token
        first = mask.float().argmax(dim=1)
        a = adv_tok.gather(1, first.unsqueeze(1)).squeeze(1) * mask.any(dim=1)
        old = batch["old_log_probs"].float()
        ent = batch["entropys"].float() if "entropys" in batch else None
        tb = TokenBatch(
            old,
            ent if ent is not None else torch.zeros_like(old),
            torch.zeros_like(old, dtype=torch.long),
            mask.float(),
        )
        w, a_hat = credit(self.strategy, self.params, tb, a)
        scores = batch["token_level_scores"].sum(-1) if "token_level_scores" in batch else None
        uids = _row_list(non_tensor_batch.get("uid", [None] * mask.size(0)))
        lines = []
        for i in range(mask.size(0)):
            keep = mask[i]
            ids = batch["responses"][i][keep].tolist()
            row = {
                "format": SHARD_FORMAT,
                "step": self.step,
                "uid": str(uids[i]) if uids[i] is not None else None,
                "strategy": self.strategy,
                "prompt_ids": prompts[i][prompt_mask[i]].tolist(),
                "token_ids": ids,
                "advantage": float(a[i]),
                "effective_advantages": a_hat[i][keep].tolist(),
                "weights": w[i][keep].tolist(),
                "old_log_probs": old[i][keep].tolist(),
                "entropies": ent[i][keep].tolist() if ent is not None else None,
                "reward": float(scores[i]) if scores is not None else None,
            }
            if self.tokenizer is not None:
                row["prompt"] = self.tokenizer.decode(row["prompt_ids"], skip_special_tokens=False)
                row["tokens"] = [self.tokenizer.decode([t], skip_special_tokens=False) for t in ids]
            lines.append(json.dumps(row))
        path = self.dir / f"step_{self.step}.jsonl"
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)
        return path


def install_shard_hook() -> ShardWriter | None:
    """With CREDIT_LENS_SHARD_DIR set: wrap veRL's compute_advantage where its trainers call it, writing a shard per step."""
    shard_dir = os.environ.get("CREDIT_LENS_SHARD_DIR", "").strip()
    if not shard_dir:
        return None
    tokenizer = None
    if os.environ.get("CREDIT_LENS_TOKENIZER"):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(os.environ["CREDIT_LENS_TOKENIZER"])
    writer = ShardWriter(shard_dir, os.environ.get("CREDIT_LENS_STRATEGY", "none"), credit_params(), tokenizer)
    from verl.trainer.ppo import ray_trainer

    modules = [ray_trainer]
    try:
        import verl.trainer.ppo.v1.utils as v1_utils

        modules.append(v1_utils)
    except ImportError:
        pass
    original = ray_trainer.compute_advantage

    def compute_advantage(data, *args, **kwargs):
        out = original(data, *args, **kwargs)
        writer.write(out.batch, out.non_tensor_batch)
        return out

    compute_advantage.__wrapped__ = original
    for m in modules:
        if getattr(m, "compute_advantage", None) is original:
            m.compute_advantage = compute_advantage
    return writer


SHARD_WRITER = install_shard_hook()
