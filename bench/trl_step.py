"""One TRL GRPO step (credit_lens's CreditGRPOTrainer, strategy none, no run directory) of the same model shape and
batch as the engine's countdown example step that `npm run bench` times: a random Qwen2 of the example's shape written
with a character tokenizer, the example's prompts and rewards from its `credit-lens reward` worker, TRL on the CPU.
Prints one JSON line: {"trl_step_s", "steps", "parameters", "completions", "torch_version", "trl_version", "threads"}.

    python3 bench/trl_step.py '<spec JSON>'   (bench.ts writes the spec from the example's config)
"""

import json
import statistics
import sys
import tempfile
import time

import torch


def main(spec: dict) -> dict:
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig

    from credit_lens.run import RewardWorker, TaskRewards
    from credit_lens.testing import write_tiny_hf
    from credit_lens.trl import CreditGRPOTrainer

    times: list[float] = []
    shape: dict = {}

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    with tempfile.TemporaryDirectory() as tmp:
        worker = RewardWorker(spec["reward_worker"])
        try:
            answer = worker.ask({"op": "examples", "split": "train"})
            examples = answer["examples"]
            # the engine's character tokenizer of the task's alphabet: the same vocabulary and sequence lengths
            write_tiny_hf(tmp + "/model", seed=1, alphabet=answer["alphabet"], **spec["model"])
            data = Dataset.from_dict({"prompt": [e["prompt"] for e in examples], "example_id": [e["id"] for e in examples]})
            g = spec["grpo"]
            args = GRPOConfig(
                output_dir=tmp + "/out",
                max_steps=spec["steps"],
                num_generations=g["group_size"],
                per_device_train_batch_size=g["prompts_per_step"] * g["group_size"] // g["gradient_accumulation_steps"],
                gradient_accumulation_steps=g["gradient_accumulation_steps"],
                max_completion_length=g["max_new_tokens"],
                temperature=g["temperature"],
                learning_rate=g["lr"],
                logging_steps=1,
                report_to=[],
                save_strategy="no",
                # float32 on either device, as the engine's step
                use_cpu=spec.get("device", "cpu") == "cpu",
                bf16=False,
                seed=1,
                reward_weights=[1.0, 1.0, 0.0, 0.0],
            )
            tok = AutoTokenizer.from_pretrained(tmp + "/model")
            model = AutoModelForCausalLM.from_pretrained(tmp + "/model")
            shape["parameters"] = sum(p.numel() for p in model.parameters())
            trainer = CreditGRPOTrainer(
                model=model,
                reward_funcs=TaskRewards(worker).functions(),
                args=args,
                train_dataset=data,
                processing_class=tok,
                strategy="none",
                callbacks=[StepTimer()],
            )
            trainer.train()
        finally:
            worker.close()
    timed = times[1:] or times  # the first step warms up
    return {
        "trl_step_s": statistics.median(timed),
        "steps": len(timed),
        "parameters": shape["parameters"],
        "completions": g["prompts_per_step"] * g["group_size"],
        "torch_version": torch.__version__,
        "trl_version": trl.__version__,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(0) if spec.get("device", "cpu") != "cpu" else "cpu",
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
