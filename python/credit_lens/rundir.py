"""A Credit Lens run directory written from Python (docs/design.md#run-directory): run.json, config.yaml, metrics.jsonl,
and per logged step the token and episode tables as Arrow IPC files, in the schema the TypeScript engine writes, so the
runs tree, the heatmaps, Browse Rollouts, the dashboard and `credit-lens analyze` read a PyTorch trainer's run as one of
their own. Every file is written whole and renamed into place: a reader polling a live run never sees half of one."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import yaml

from credit_lens import __name__ as _package

VERSION = "0.1.0"

# docs/design.md#semantics, "Token types": a token is reasoning if its trimmed text is non-empty and holds only digits,
# + - * / = ( ) ., x or /, with at least one digit or operator (the engine's REASONING_TOKEN_RE).
REASONING_TOKEN_RE = re.compile(r"^(?=.*[0-9+\-*/=×÷])[0-9+\-*/=().×÷]+$")

_F32 = pa.float32()
_I32 = pa.int32()
_STR = pa.string()

# The token table's columns in contract order (src/protocol/token_columns.ts): name, type, nullable.
TOKEN_SCHEMA = pa.schema(
    [
        pa.field("step", _I32, False),
        pa.field("episode", _I32, False),
        pa.field("prompt_idx", _I32, False),
        pa.field("position", _I32, False),
        pa.field("token_id", _I32, False),
        pa.field("token", _STR, False),
        pa.field("char_start", _I32, True),
        pa.field("logprob", _F32, False),
        pa.field("entropy", _F32, False),
        pa.field("advantage", _F32, False),
        pa.field("weight", _F32, False),
        pa.field("effective_advantage", _F32, False),
        pa.field("contribution", _F32, False),
        pa.field("attribution", _F32, True),
        pa.field("importance", _F32, True),
        pa.field("is_weight", _F32, True),
        pa.field("clipped", _F32, True),
        pa.field("grad_norm", _F32, True),
        pa.field("realized", _F32, True),
        pa.field("ref_logratio", _F32, True),
        pa.field("section", _STR, False),
        pa.field("token_type", _STR, False),
        pa.field("reward", _F32, False),
    ]
)

EPISODE_SCHEMA = pa.schema(
    [
        pa.field("step", _I32, False),
        pa.field("episode", _I32, False),
        pa.field("prompt_idx", _I32, False),
        pa.field("prompt", _STR, False),
        pa.field("completion", _STR, False),
        pa.field("reward", _F32, False),
        pa.field("reward_format", _F32, False),
        pa.field("reward_answer", _F32, False),
        pa.field("success", pa.bool_(), False),
        pa.field("advantage", _F32, False),
        pa.field("length", _I32, False),
        pa.field("oracle_span", _STR, True),
        pa.field("truncated", pa.bool_(), True),
        pa.field("status", _STR, True),
    ]
)


@dataclass
class Episode:
    """One completion of a logged step, with its tokens' values as the trainer had them.

    tokens: each token's text (decoded alone), so that their join is the completion.
    sections: "think", "answer" or "other" per token. weights and effective_advantages: the strategy's w and A-hat.
    """

    prompt_idx: int
    prompt: str
    token_ids: list[int]
    tokens: list[str]
    logprobs: list[float]
    entropies: list[float]
    sections: list[str]
    advantage: float
    weights: list[float]
    effective_advantages: list[float]
    reward: float
    success: bool
    reward_format: float = 0.0
    reward_answer: float | None = None
    truncated: bool | None = None
    grad_norm: list[float] | None = None
    extra: dict = field(default_factory=dict)

    @property
    def completion(self) -> str:
        return "".join(self.tokens)


def token_type(text: str) -> str:
    t = text.strip()
    return "reasoning" if t and REASONING_TOKEN_RE.match(t) else "filler"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _arrow_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def step_tables(step: int, episodes: list[Episode]) -> tuple[pa.Table, pa.Table]:
    """The token and episode tables of one step, in the engine's schema."""
    cols: dict[str, list] = {f.name: [] for f in TOKEN_SCHEMA}
    for i, e in enumerate(episodes):
        n = len(e.token_ids)
        for name in ("tokens", "logprobs", "entropies", "sections", "weights", "effective_advantages"):
            if len(getattr(e, name)) != n:
                raise ValueError(
                    f"episode {i} of step {step}: {name} has {len(getattr(e, name))} entries for {n} token ids"
                )
        at = 0
        for t in range(n):
            cols["step"].append(step)
            cols["episode"].append(i)
            cols["prompt_idx"].append(e.prompt_idx)
            cols["position"].append(t)
            cols["token_id"].append(e.token_ids[t])
            cols["token"].append(e.tokens[t])
            cols["char_start"].append(at)
            at += (
                len(e.tokens[t].encode("utf-16-le")) // 2
            )  # the views count UTF-16 code units, as JavaScript strings do
            cols["logprob"].append(e.logprobs[t])
            cols["entropy"].append(e.entropies[t])
            cols["advantage"].append(e.advantage)
            cols["weight"].append(e.weights[t])
            cols["effective_advantage"].append(e.effective_advantages[t])
            # design.md#semantics: contribution = A-hat x l (a rewarded episode has a negative contribution)
            cols["contribution"].append(e.effective_advantages[t] * e.logprobs[t])
            for empty in ("attribution", "importance", "is_weight", "clipped", "realized", "ref_logratio"):
                cols[empty].append(None)
            cols["grad_norm"].append(e.grad_norm[t] if e.grad_norm is not None else None)
            cols["section"].append(e.sections[t])
            cols["token_type"].append(token_type(e.tokens[t]))
            cols["reward"].append(e.reward)
    tokens = pa.Table.from_pydict(cols, schema=TOKEN_SCHEMA)
    eps = pa.Table.from_pydict(
        {
            "step": [step] * len(episodes),
            "episode": list(range(len(episodes))),
            "prompt_idx": [e.prompt_idx for e in episodes],
            "prompt": [e.prompt for e in episodes],
            "completion": [e.completion for e in episodes],
            "reward": [e.reward for e in episodes],
            "reward_format": [e.reward_format for e in episodes],
            "reward_answer": [e.reward if e.reward_answer is None else e.reward_answer for e in episodes],
            "success": [bool(e.success) for e in episodes],
            "advantage": [e.advantage for e in episodes],
            "length": [len(e.token_ids) for e in episodes],
            "oracle_span": [None] * len(episodes),
            "truncated": [e.truncated for e in episodes],
            "status": [None] * len(episodes),
        },
        schema=EPISODE_SCHEMA,
    )
    return tokens, eps


class RunWriter:
    """A run directory for a run trained elsewhere (TRL, veRL): open it, log steps, end it.

    `logging_every` and `logging_tokens` mean what the engine's logging.every and logging.tokens mean: the token and
    episode tables of every logging_every-th step, none when logging_tokens is false; metrics rows every step.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        name: str,
        config: dict,
        *,
        strategy: str,
        total_steps: int,
        backend: str = "torch",
        logging_every: int = 1,
        logging_tokens: bool = True,
        resume_step: int | None = None,
    ) -> None:
        """config None leaves the folder's config.yaml as it is (the engine wrote it). resume_step: the run continues
        from its checkpoint of that step: the rows and tables of later steps, which the resumed trajectory will write
        again, are set aside, and run.json keeps its start and records the resume."""
        if logging_every < 1:
            raise ValueError(f"logging.every: got {logging_every}; expected an integer >= 1")
        self.dir = Path(run_dir)
        self.every = logging_every
        self.tokens = logging_tokens
        for sub in ("tokens", "episodes", "checkpoints"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        if config is not None:
            _write_atomic(self.dir / "config.yaml", yaml.safe_dump(config, sort_keys=False).encode())
        before = json.loads((self.dir / "run.json").read_text()) if resume_step is not None else None
        if resume_step is not None:
            self._truncate(resume_step)
        self.info = {
            "id": self.dir.name,
            "name": name,
            "status": "running",
            "started": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
            "ended": None,
            "backend": backend,
            "engine_version": f"{_package} {VERSION} (python)",
            "strategy": strategy,
            "total_steps": total_steps,
            "last_step": 0,
            "pid": os.getpid(),
        }
        if before is not None:
            self.info.update(started=before.get("started", self.info["started"]), last_step=resume_step)
            self.info["resumed_from"] = f"trl checkpoint of step {resume_step}"
        self._write_info()

    def _truncate(self, step: int) -> None:
        metrics = self.dir / "metrics.jsonl"
        if metrics.exists():
            kept = [
                line for line in metrics.read_text().splitlines() if line and json.loads(line).get("step", 0) <= step
            ]
            _write_atomic(metrics, ("".join(line + "\n" for line in kept)).encode())
        for sub in ("tokens", "episodes"):
            for f in (self.dir / sub).glob("step-*.arrow"):
                if int(f.stem.split("-")[1]) > step:
                    f.unlink()

    def _write_info(self) -> None:
        _write_atomic(self.dir / "run.json", (json.dumps(self.info, indent=2) + "\n").encode())

    def logs_tables(self, step: int) -> bool:
        return self.tokens and step % self.every == 0

    def log_step(self, step: int, episodes: list[Episode], metrics: dict) -> None:
        """A GRPO step: its tables where logging asks for them, its metrics row, and run.json's last step."""
        if self.logs_tables(step):
            tokens, eps = step_tables(step, episodes)
            _write_atomic(self.dir / "tokens" / f"step-{step:06d}.arrow", _arrow_file(tokens))
            _write_atomic(self.dir / "episodes" / f"step-{step:06d}.arrow", _arrow_file(eps))
        self.metrics({"step": step, "phase": "grpo", **metrics})
        self.info["last_step"] = step
        self._write_info()

    def metrics(self, row: dict) -> None:
        if "step" not in row or "phase" not in row:
            raise ValueError("a metrics row needs its step and phase (sft, grpo or eval)")
        with open(self.dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    def end(self, status: str = "completed", error: str | None = None) -> None:
        if status not in ("completed", "failed", "stopped"):
            raise ValueError(f"status: got {status!r}; expected completed, failed or stopped")
        self.info.update(status=status, ended=datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"))
        if error:
            self.info["error"] = error
        self._write_info()
