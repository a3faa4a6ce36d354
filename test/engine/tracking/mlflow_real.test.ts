// logging.mlflow against a real MLflow tracking server (`mlflow server` from the package index, installed by .ci/run) on
// 127.0.0.1, with a SQLite backend and proxied artifacts (--serve-artifacts). What the runs logged is read back through
// MLflow's own Python client (read_mlflow.py: MlflowClient's get_metric_history, list_artifacts, the params and status):
// every metric once per step, the params, run.json and the analysis as artifacts, a stop KILLED and its resume the same
// run FINISHED, and the token in no file. The TypeScript stand-in (mlflow_server.ts) stays for the faults a real server
// does not produce on demand.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { flattenParams } from '../../../src/engine/tracking/mlflow';
import { metricTag } from '../../../src/engine/tracking/tags';
import { readMetrics, readRunInfo } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { loadConfig } from '../../../src/engine/config/config';
import { runWithLostCheckpoint, stopAtStep, tinyConfig } from '../fixtures';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-mlflow-real-'));
const READ = resolve(__dirname, 'read_mlflow.py');
const TOKEN = 'mlflow-real-token-7d3e21';
let server: ChildProcess;
let url: string;

async function freePort(): Promise<number> {
  return new Promise((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

before(async () => {
  const dir = tmp();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  server = spawn(
    'python3',
    [
      '-m',
      'mlflow',
      'server',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--workers',
      '1',
      '--backend-store-uri',
      `sqlite:///${join(dir, 'mlflow.db')}`,
      '--serve-artifacts',
      '--artifacts-destination',
      join(dir, 'artifacts'),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  server.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const t0 = Date.now();
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (server.exitCode !== null || Date.now() - t0 > 120_000) throw new Error(`mlflow server did not start (pip install mlflow):\n${log}`);
    await new Promise((r) => setTimeout(r, 500));
  }
});

after(() => {
  server?.kill('SIGTERM');
});

interface MlflowRun {
  run_id: string;
  name: string;
  status: string;
  params: Record<string, string>;
  metrics: Record<string, [number, number][]>;
  artifacts: string[];
  run_json: { status: string } | null;
  tags: Record<string, string>;
}

function readBack(experiment: string): { experiment_id: string | null; runs: MlflowRun[] } {
  const r = spawnSync('python3', [READ, url, experiment], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** metrics.jsonl as MLflow holds it: each value under its tag, one per step, as float64 */
function expected(runDir: string): Record<string, [number, number][]> {
  const out: Record<string, [number, number][]> = {};
  for (const row of readMetrics(runDir))
    for (const [k, v] of Object.entries(row))
      if (k !== 'step' && k !== 'phase' && typeof v === 'number') (out[metricTag(row.phase, k)] ??= []).push([row.step, v]);
  for (const k of Object.keys(out)) out[k].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return out;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

test(
  'a run logs to a real MLflow server: one run, its params, every metric once per step, run.json and the analysis as artifacts, FINISHED; the token in no file',
  { timeout: 300_000 },
  async () => {
    process.env.MLFLOW_TRACKING_TOKEN = TOKEN;
    try {
      const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${url}', experiment: real-exp } }`);
      const r = await train({ configPath: cfg });
      assert.equal(r.status, 'completed');
      const got = readBack('real-exp');
      assert.equal(got.runs.length, 1);
      const [run] = got.runs;
      assert.equal(run.name, 'tiny-countdown');
      assert.equal(run.status, 'FINISHED');
      assert.deepEqual(run.params, Object.fromEntries(Object.entries(flattenParams(loadConfig(cfg).config)).map(([k, v]) => [k, String(v)])));
      assert.deepEqual(run.metrics, expected(r.runDir), "MlflowClient's metric histories are metrics.jsonl's");
      assert.ok(run.artifacts.includes('run.json') && run.artifacts.includes('analysis.md'), run.artifacts.join(', '));
      assert.equal(run.run_json!.status, 'completed');
      assert.deepEqual(readRunInfo(r.runDir)!.mlflow, { tracking_uri: url, experiment_id: got.experiment_id, run_id: run.run_id });
      for (const f of filesUnder(r.runDir)) assert.ok(!readFileSync(f).includes(TOKEN), `${f} holds the token`);
    } finally {
      delete process.env.MLFLOW_TRACKING_TOKEN;
    }
  },
);

test(
  'on a real MLflow server a stopped run is KILLED, and its resume continues the same run to FINISHED with each step once',
  { timeout: 300_000 },
  async () => {
    const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${url}', experiment: real-resume } }`);
    const stopped = await train({ configPath: cfg, ...stopAtStep(2) });
    assert.equal(stopped.status, 'stopped');
    const first = readBack('real-resume');
    assert.equal(first.runs.length, 1);
    assert.equal(first.runs[0].status, 'KILLED');
    const resumed = await train({ resume: stopped.runDir });
    assert.equal(resumed.status, 'completed');
    const after = readBack('real-resume');
    assert.equal(after.runs.length, 1, 'the resume logs on in the same MLflow run');
    assert.equal(after.runs[0].run_id, first.runs[0].run_id);
    assert.equal(after.runs[0].status, 'FINISHED');
    assert.deepEqual(after.runs[0].metrics, expected(resumed.runDir));
  },
);

test(
  'a resume that abandons logged steps logs to a new MLflow run, a child of the first, so no step holds two trajectories',
  { timeout: 300_000 },
  async () => {
    // a kill after step 4 was logged but before its checkpoint: the resume goes on from step 2
    const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${url}', experiment: real-abandon } }`);
    const runDir = await runWithLostCheckpoint(cfg, ['grpo.steps=4', 'grpo.checkpoint_every=2', 'grpo.eval_every=1'], 4);
    const before = expected(runDir);
    const first = readBack('real-abandon');
    assert.equal(first.runs.length, 1);
    const resumed = await train({ resume: runDir });
    assert.equal(resumed.status, 'completed');
    const after = readBack('real-abandon');
    assert.equal(after.runs.length, 2, 'the first run and its child');
    const parent = after.runs.find((r) => r.run_id === first.runs[0].run_id)!;
    const child = after.runs.find((r) => r.run_id !== first.runs[0].run_id)!;
    assert.deepEqual(parent.metrics, before, 'the first run keeps the abandoned trajectory as it was, each step once');
    assert.deepEqual(child.tags, { 'mlflow.parentRunId': parent.run_id, 'credit_lens.run_dir': runDir, 'credit_lens.resumed_from': 'grpo step 2' });
    assert.equal(child.status, 'FINISHED');
    // the child holds what the resume logged: steps after the checkpoint, each once, and nothing that came before
    const now = expected(runDir);
    for (const [tag, series] of Object.entries(child.metrics)) {
      assert.ok(
        series.every(([step]) => step > 2),
        `${tag}: ${JSON.stringify(series)}`,
      );
      assert.deepEqual(
        series,
        now[tag].filter(([step]) => step > 2),
        tag,
      );
    }
    assert.ok((child.metrics['train/loss'] ?? []).length === 2, 'steps 3 and 4');
    assert.equal(readRunInfo(runDir)!.mlflow!.run_id, child.run_id, 'run.json names the run it logs to now');
  },
);
