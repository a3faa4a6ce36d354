"""`python -m credit_lens.run <spec.json>`: a Credit Lens run trained by TRL, as `credit-lens train` starts it for a config
with `engine: trl` (src/engine/trl/train_trl.ts writes the spec). The task stays in the engine: a `credit-lens reward`
worker gives the training prompts and scores every completion (total, its format / answer / reasoning parts, success),
so there is one implementation of every task. The model is a Hugging Face folder (model.path). SIGTERM stops the run
after TRL's current step ("stopped"); a resume continues from TRL's last checkpoint in <run>/trl/."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import torch

from credit_lens.strategies.catalog import STRATEGIES


class RewardWorker:
    """The engine's `credit-lens reward` process: one JSON request a line, one answer a line."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the reward worker ended (exit {self.proc.poll()}); see its message above")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the reward worker: {answer['error']}")
        return answer

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


class TaskRewards:
    """TRL reward functions of the worker's answers, one per part: format and answer sum to the task's total; reasoning
    and success (reward weight 0) are read by reward_decomposition and by the success column. The worker is asked once
    per batch of completions; the other parts read that answer."""

    PARTS = ("format", "answer", "reasoning", "success")

    def __init__(self, worker: RewardWorker) -> None:
        self.worker = worker
        self._key = None
        self._answers: list[dict] = []

    def _score(self, completions, example_id) -> list[dict]:
        key = (tuple(completions), tuple(example_id))
        if key != self._key:
            items = [{"split": "train", "id": int(i), "completion": c} for c, i in zip(completions, example_id)]
            self._answers = self.worker.ask({"op": "reward", "items": items})["rewards"]
            self._key = key
        return self._answers

    def functions(self) -> list:
        def part(name):
            def reward(prompts, completions, example_id, **kwargs):
                return [float(a[name]) for a in self._score(completions, example_id)]

            reward.__name__ = name
            return reward

        return [part(p) for p in self.PARTS]


def _stop(signum, frame):
    raise KeyboardInterrupt


def main(spec_path: str) -> int:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from credit_lens.trl import CreditGRPOTrainer

    spec = json.loads(Path(spec_path).read_text())
    run_dir = Path(spec["run_dir"])
    signal.signal(signal.SIGTERM, _stop)
    worker = RewardWorker(spec["reward_worker"])
    try:
        examples = worker.ask({"op": "examples", "split": "train"})["examples"]
        dataset = Dataset.from_dict(
            {"prompt": [e["prompt"] for e in examples], "example_id": [e["id"] for e in examples]}
        )
        cuda = torch.cuda.is_available()
        args = GRPOConfig(
            **spec["grpo"],
            output_dir=str(run_dir / "trl"),
            logging_steps=1,
            report_to=[],
            save_strategy="steps",
            use_cpu=not cuda,
            bf16=cuda,
            reward_weights=[1.0, 1.0, 0.0, 0.0],
        )
        strategy = spec["strategy"]
        params = {
            k: v
            for k, v in spec["strategy_params"].items()
            if k in STRATEGIES.get(strategy, STRATEGIES["none"]).defaults
        }
        resume = spec.get("resume_from")
        tokenizer = AutoTokenizer.from_pretrained(spec["model_path"])
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        trainer = CreditGRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(spec["model_path"]),
            reward_funcs=TaskRewards(worker).functions(),
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            strategy=strategy,
            strategy_params=params,
            run_dir=run_dir,
            run_name=spec["name"],
            logging_every=spec["logging"]["every"],
            logging_tokens=spec["logging"]["tokens"],
            reward_parts={"format": "format", "answer": "answer", "reasoning": "reasoning"},
            success_from="success",
            keep_config=True,
            resume_step=int(Path(resume).name.split("-")[1]) if resume else None,
        )
        try:
            trainer.train(resume_from_checkpoint=resume)
        except KeyboardInterrupt:
            print("credit_lens.run: stopped; resume continues from the last TRL checkpoint", file=sys.stderr)
            return 0
        return 0
    finally:
        worker.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m credit_lens.run <spec.json>")
    sys.exit(main(sys.argv[1]))
