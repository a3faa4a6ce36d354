// TRL's own completions log: GRPOTrainer (TRL 1.16, the plain trainer) with log_completions writes
// <output_dir>/completions/completions_NNNNN.parquet each step. The importer reads what TRL wrote here, the real trainer
// on the CPU (`python -m credit_lens.testing --trl-completions`), row for row as pandas reads it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readImport } from '../../../src/engine/import/formats';

const PYTHON = process.env.CREDIT_LENS_PYTHON ?? 'python3';

test(
  "TRL's completions_NNNNN.parquet (log_completions) imports as the trl format, every row with its step, reward and advantage",
  { timeout: 300_000 },
  async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'cl-trl-parquet-')), 'trl-out');
    const cwd = resolve(__dirname, '../../../python');
    const r = spawnSync(PYTHON, ['-m', 'credit_lens.testing', '--trl-completions', out], { cwd, encoding: 'utf8' });
    assert.equal(r.status, 0, `TRL run failed (pip install -e "python[trl]"):\n${r.stderr.slice(-2000)}`);
    // pandas' reading of the same files: the rows the importer must give
    const py = `import glob, json, pandas as pd
rows = []
for f in sorted(glob.glob(${JSON.stringify(join(out, 'completions', '*.parquet'))})):
    d = pd.read_parquet(f)
    rows += [{"step": int(x.step), "prompt": x.prompt, "completion": x.completion, "reward": float(x.reward_digits), "advantage": float(x.advantage)} for x in d.itertuples()]
print(json.dumps(rows))`;
    const want = JSON.parse(spawnSync(PYTHON, ['-c', py], { encoding: 'utf8' }).stdout) as Record<string, unknown>[];
    assert.equal(want.length, 8, 'two steps of four completions');
    const got = await readImport(join(out, 'completions'));
    assert.equal(got.format, 'trl');
    assert.deepEqual(got.problems, []);
    assert.deepEqual(
      got.records.map((x) => ({ step: x.step, prompt: x.prompt, completion: x.completion, reward: x.reward, advantage: x.advantage })),
      want,
    );
  },
);
