"""The run directory the package writes, read back: its schema is the engine's (compared with a table the TypeScript
engine gives, test/vectors/run_schema.json), and the values are the strategy's."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pytest

from credit_lens.rundir import EPISODE_SCHEMA, TOKEN_SCHEMA, RunWriter, token_type
from credit_lens.testing import write_sample_run

ROOT = Path(__file__).resolve().parents[2]
# the engine's schemas, written by test/vectors/run_schema.ts from src/engine/rundir/arrow_tables.ts
ENGINE_SCHEMA = json.loads((ROOT / "test" / "vectors" / "run_schema.json").read_text())
ARROW_NAMES = {pa.int32(): "Int32", pa.float32(): "Float32", pa.string(): "Utf8", pa.bool_(): "Bool"}


def _read(path):
    with pa.ipc.open_file(path) as f:
        return f.read_all()


def test_schemas_are_the_engines():
    def ours(schema):
        return [{"name": f.name, "type": ARROW_NAMES[f.type], "nullable": f.nullable} for f in schema]

    assert ours(TOKEN_SCHEMA) == ENGINE_SCHEMA["tokens"]
    assert ours(EPISODE_SCHEMA) == ENGINE_SCHEMA["episodes"]


def test_a_sample_run_reads_back(tmp_path):
    run = tmp_path / "run"
    write_sample_run(str(run))
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "completed" and info["last_step"] == 2 and info["strategy"] == "entropy_mask"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["phase"]) for r in rows] == [(1, "grpo"), (2, "grpo")]
    t = _read(run / "tokens" / "step-000001.arrow").to_pydict()
    e = _read(run / "episodes" / "step-000001.arrow").to_pydict()
    assert e["length"] == [11, 11, 9, 7] and sum(e["length"]) == len(t["token"])
    # A-hat = A * w and c = A-hat * l, row by row (float32 in the file)
    for a, w, ah, lp, c in zip(t["advantage"], t["weight"], t["effective_advantage"], t["logprob"], t["contribution"]):
        assert ah == pytest.approx(a * w, rel=1e-6, abs=1e-6)
        assert c == pytest.approx(ah * lp, rel=1e-5, abs=1e-6)
    # entropy_mask at the 50th percentile keeps the upper half of the batch's valid tokens (the median's token kept too)
    kept = sum(1 for w in t["weight"] if w == 1)
    assert kept == (len(t["weight"]) + 1) // 2
    # char_start: each episode's tokens joined are its completion
    first = [i for i, ep in enumerate(t["episode"]) if ep == 0]
    assert "".join(t["token"][i] for i in first) == e["completion"][0]


def test_token_types_follow_the_engines_rule():
    assert [token_type(x) for x in ["3", " 12 ", "+", "(3+4)", "=", "so", " ", "", "x2", "÷"]] == [
        "reasoning",
        "reasoning",
        "reasoning",
        "reasoning",
        "reasoning",
        "filler",
        "filler",
        "filler",
        "filler",
        "reasoning",
    ]


def test_bad_settings_and_rows_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"logging.every: got 0; expected an integer >= 1"):
        RunWriter(tmp_path / "r", "x", {}, strategy="none", total_steps=1, logging_every=0)
    w = RunWriter(tmp_path / "r2", "x", {}, strategy="none", total_steps=1)
    with pytest.raises(ValueError, match="needs its step and phase"):
        w.metrics({"loss": 1.0})
    with pytest.raises(ValueError, match="status: got 'done'"):
        w.end("done")
