// A run directory written by the Python package (python/credit_lens/rundir.py, through its strategies) opens in every
// view's reader: run.json and the dashboard's data, the heatmap's step tables and episode, Browse Rollouts' index and
// queries, and `credit-lens analyze`. The run is written by `python -m credit_lens.testing` (the package installed
// by .ci/run with pip install -c python/constraints.txt -e "python[test,trl]"); a machine without it fails here, as CI would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readRunInfoChecked, listLoggedSteps } from '../../../src/engine/rundir/rundir';
import { readStepTables } from '../../../src/engine/rundir/arrow_tables';
import { analyzeRun } from '../../../src/engine/analysis/analysis';
import { loadRollouts } from '../../../src/engine/query/rollouts';
import { StepTables, buildHeatmapEpisode } from '../../../src/extension/heatmap/episode';
import { loadRunData } from '../../../src/extension/panels/run_data';

const PYTHON = process.env.CREDIT_LENS_PYTHON ?? 'python3';

function pythonRun(...args: string[]): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'cl-pyrun-')), 'python-sample-20261129-000000');
  const r = spawnSync(PYTHON, ['-m', 'credit_lens.testing', ...args, dir], { cwd: resolve(__dirname, '../../../python'), encoding: 'utf8' });
  assert.equal(
    r.status,
    0,
    `python -m credit_lens.testing failed (is the package installed? pip install -c python/constraints.txt -e "python[test,trl]"):\n${r.stderr}`,
  );
  return dir;
}

test('a run the Python package wrote opens in the run list, the dashboard, the heatmap, Browse Rollouts and analyze', () => {
  const dir = pythonRun();
  const info = readRunInfoChecked(dir);
  assert.ok(info.ok, info.ok ? '' : info.reason);
  assert.equal(info.info.status, 'completed');
  assert.equal(info.info.strategy, 'entropy_mask');
  assert.deepEqual(listLoggedSteps(dir), [1, 2]);

  const data = loadRunData(dir);
  assert.deepEqual(
    data.rows.map((r) => [r.step, r.phase]),
    [
      [1, 'grpo'],
      [2, 'grpo'],
    ],
  );

  const { tokens, episodes } = readStepTables(dir, 2, { tokens: true });
  const tables = new StepTables(dir, 2, tokens!, episodes);
  const ep = buildHeatmapEpisode(tables, { runDir: dir, step: 2, episode: 0 });
  assert.ok(ep.textMatches, "the episode's tokens join to its completion");
  assert.equal(ep.rows.length, 11);
  // entropy_mask at the 50th percentile: some tokens carry A, the others none
  const w = Array.from(ep.rows, (k) => tokens!.weight[k]);
  assert.ok(w.includes(1) && w.includes(0), `weights ${w}`);

  const idx = loadRollouts(dir);
  assert.equal(idx.episodes, 8);
  assert.equal(idx.filter('success').length, 2, 'one rewarded episode a step');

  const a = analyzeRun(dir, {});
  assert.equal(a.meta.episodes, 8);
  assert.equal(a.meta.tokens, 2 * (11 + 11 + 9 + 7));
  assert.ok(a.token_types.reasoning.count > 0 && a.token_types.filler.count > 0);
});

test('a TRL run (CreditGRPOTrainer, 3 steps of a tiny Qwen2 on the CPU) opens in the same readers', { timeout: 300_000 }, () => {
  const dir = pythonRun('--trl');
  const info = readRunInfoChecked(dir);
  assert.ok(info.ok, info.ok ? '' : info.reason);
  assert.equal(info.info.status, 'completed');
  assert.deepEqual(listLoggedSteps(dir), [1, 2, 3]);
  assert.deepEqual(
    loadRunData(dir).rows.map((r) => r.step),
    [1, 2, 3],
  );
  const { tokens, episodes } = readStepTables(dir, 3, { tokens: true });
  assert.equal(episodes.episode.length, 4, 'one group of four completions a step');
  const tables = new StepTables(dir, 3, tokens!, episodes);
  const ep = buildHeatmapEpisode(tables, { runDir: dir, step: 3, episode: 0 });
  assert.ok(ep.rows.length > 0, 'the episode has painted tokens');
  // Â = A·w on every token the trainer logged
  for (const k of ep.rows) assert.ok(Math.abs(tokens!.effective_advantage[k] - tokens!.advantage[k] * tokens!.weight[k]) < 1e-5);
  assert.equal(loadRollouts(dir).episodes, 12);
  assert.equal(analyzeRun(dir, {}).meta.episodes, 12);
});

test(
  "a veRL token shard (credit_lens.verl's hook on veRL's own compute_advantage) is followed into a run the views read, with veRL's Â per token",
  { timeout: 300_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'cl-verl-shard-'));
    const shards = join(root, 'shards');
    const r = spawnSync(PYTHON, ['-m', 'credit_lens.testing', '--verl-shards', shards], {
      cwd: resolve(__dirname, '../../../python'),
      encoding: 'utf8',
      env: {
        ...process.env,
        VERL_USE_EXTERNAL_MODULES: 'credit_lens.verl',
        VERL_USE_EXTERNAL_PLUGINS: 'none',
        CREDIT_LENS_SHARD_DIR: shards,
        CREDIT_LENS_STRATEGY: 'inverse_logprob',
        CREDIT_LENS_CREDIT: '{"epsilon": 0.5}',
      },
    });
    assert.equal(r.status, 0, `the shard writer failed:\n${r.stderr.slice(-3000)}`);
    const lines = (s: number) =>
      readFileSync(join(shards, `step_${s}.jsonl`), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
    const { followImport } = await import('../../../src/engine/import/follow');
    const seen: number[] = [];
    const f = await followImport({
      source: shards,
      out: join(root, 'runs'),
      untilIdle: 1,
      settleMs: 200,
      pollMs: 50,
      log: () => {},
      onStep: (s) => seen.push(s),
    });
    assert.equal(f.format, 'verl_shard');
    assert.deepEqual(seen, [1, 2]);
    const dir = f.runDir;
    assert.deepEqual(listLoggedSteps(dir), [1, 2]);
    for (const s of [1, 2]) {
      const shard = lines(s);
      const { tokens, episodes } = readStepTables(dir, s, { tokens: true });
      assert.equal(episodes.episode.length, shard.length);
      for (let e = 0; e < shard.length; e++) {
        const rows = [...tokens!.episode.keys()].filter((k) => tokens!.episode[k] === e);
        // veRL's own credit, token by token: Â as the loss took it, its weight, the old log-prob; the texts the shard decoded
        assert.deepEqual(
          rows.map((k) => tokens!.token[k]),
          shard[e].tokens,
        );
        rows.forEach((k, t) => {
          assert.ok(Math.abs(tokens!.effective_advantage[k] - shard[e].effective_advantages[t]) < 1e-6, `Â of step ${s} episode ${e} token ${t}`);
          assert.ok(Math.abs(tokens!.weight[k] - shard[e].weights[t]) < 1e-5, `w of step ${s} episode ${e} token ${t}`);
          assert.ok(Math.abs(tokens!.logprob[k] - shard[e].old_log_probs[t]) < 1e-6);
          // inverse_logprob at epsilon 0.5, worked out here: w = 1 / (|old log-prob| + 0.5)
          assert.ok(Math.abs(shard[e].weights[t] - 1 / (Math.abs(shard[e].old_log_probs[t]) + 0.5)) < 1e-5);
        });
        assert.ok(Math.abs(tokens!.advantage[rows[0]] - shard[e].advantage) < 1e-6);
      }
      const tables = new StepTables(dir, s, tokens!, episodes);
      const ep = buildHeatmapEpisode(tables, { runDir: dir, step: s, episode: 0 });
      assert.ok(ep.textMatches && ep.rows.length === shard[0].token_ids.length, 'the heatmap paints every token of the episode');
    }
    assert.equal(loadRollouts(dir).episodes, 8);
    assert.equal(analyzeRun(dir, {}).meta.episodes, 8);
  },
);
