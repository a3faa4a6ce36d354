// logging.mlflow against the stand-in MLflow server (mlflow_server.ts), for the faults a real server does not produce on
// demand; the same runs against `mlflow server` itself are mlflow_real.test.ts. Here:
// the batching limits, real runs (created experiment, params, every metric once, artifacts, the end status), a 429 and a
// dropped connection, a dead server, a resume, and the token kept out of the run directory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flattenParams, logBatches, MlflowTracker, type MlflowMetric } from '../../../src/engine/tracking/mlflow';
import { metricTag } from '../../../src/engine/tracking/tags';
import { readMetrics, readRunInfo } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { loadConfig } from '../../../src/engine/config/config';
import { stopAtStep, tinyConfig } from '../fixtures';
import { startFakeMlflow } from './mlflow_server';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-mlflow-'));
const TOKEN = 'mlflow-secret-token-4f9a1c';

test('params: the config flattened with dotted keys, lists as JSON, values cut to MLflow 6,000 characters', () => {
  const p = flattenParams({ grpo: { group_size: 8, clip: [0.2, 0.28] }, model: { path: null }, name: 'x', long: 'a'.repeat(7000) });
  assert.deepEqual(Object.keys(p), ['grpo.group_size', 'grpo.clip', 'model.path', 'name', 'long']);
  assert.equal(p['grpo.group_size'], '8');
  assert.equal(p['grpo.clip'], '[0.2,0.28]');
  assert.equal(p['model.path'], 'null');
  assert.equal(p.long.length, 6000);
});

test('log-batch bodies stay within the limits: 1,000 metrics, 100 params (in batches of their own), 1 MB', () => {
  const m = (i: number, key = 'train/x'): MlflowMetric => ({ key, value: i, step: i, timestamp: 1 });
  const b = logBatches(
    'r',
    Array.from({ length: 2500 }, (_, i) => m(i)),
    Array.from({ length: 250 }, (_, i) => ({ key: `k${i}`, value: 'v' })),
  );
  assert.deepEqual(
    b.map((x) => x.metrics),
    [0, 0, 0, 1000, 1000, 500],
  );
  assert.deepEqual(
    b.slice(0, 3).map((x) => (JSON.parse(x.body) as { params: unknown[] }).params.length),
    [100, 100, 50],
  );
  // 1,000 metrics with 1,200-character keys would be 1.2 MB: split by size
  const big = logBatches(
    'r',
    Array.from({ length: 1000 }, (_, i) => m(i, 'k'.repeat(1200))),
  );
  assert.ok(big.length >= 2 && big.every((x) => x.body.length <= 1_000_000));
  assert.equal(
    big.reduce((a, x) => a + x.metrics, 0),
    1000,
  );
});

/** metrics.jsonl's numbers as MLflow metrics, sorted, for comparison */
function expected(runDir: string): string[] {
  const out: string[] = [];
  for (const row of readMetrics(runDir))
    for (const [k, v] of Object.entries(row))
      if (k !== 'step' && k !== 'phase' && typeof v === 'number') out.push(`${metricTag(row.phase, k)}@${row.step}=${v}`);
  return out.sort();
}
const got = (metrics: { key: string; step: number; value: number }[]) => metrics.map((m) => `${m.key}@${m.step}=${m.value}`).sort();

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

test('a run logs to MLflow through a 429 and a dropped connection: one run, its params, every metric once, artifacts, FINISHED; the token never in the run', async () => {
  const srv = await startFakeMlflow();
  process.env.MLFLOW_TRACKING_TOKEN = TOKEN;
  try {
    // the second and third log-batch calls fail: one answered 429, one connection dropped before an answer
    srv.faults.set(
      'runs/log-batch',
      new Map([
        [2, '429'],
        [3, 'drop'],
      ]),
    );
    const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${srv.url}', experiment: lab-exp } }`);
    const r = await train({ configPath: cfg });
    assert.equal(r.status, 'completed');
    const expId = srv.experiments.get('lab-exp');
    assert.ok(expId, 'the experiment was created');
    assert.equal(srv.runs.size, 1);
    const run = [...srv.runs.values()][0];
    assert.equal(run.experiment_id, expId);
    assert.equal(run.run_name, 'tiny-countdown');
    assert.equal(run.params['grpo.group_size'], '4');
    assert.equal(run.params['model.d_model'], '32');
    assert.equal(Object.keys(run.params).length, Object.keys(flattenParams(loadConfig(cfg).config)).length);
    assert.deepEqual(got(run.metrics), expected(r.runDir), 'every metrics.jsonl value exactly once');
    assert.deepEqual(run.statuses, ['RUNNING', 'FINISHED']);
    assert.ok(run.end_time! >= run.start_time);
    const prefix = `${expId}/${run.run_id}/artifacts/`;
    assert.equal((JSON.parse(srv.artifacts.get(prefix + 'run.json')!) as { status: string }).status, 'completed');
    assert.match(srv.artifacts.get(prefix + 'analysis.md')!, /#/);
    // the token went with every request, and nowhere into the run's files; run.json names the MLflow run
    assert.ok(srv.requests.every((q) => q.auth === `Bearer ${TOKEN}`));
    for (const f of filesUnder(r.runDir)) assert.ok(!readFileSync(f).includes(TOKEN), `${f} holds the token`);
    assert.deepEqual(readRunInfo(r.runDir)!.mlflow, { tracking_uri: srv.url, experiment_id: expId, run_id: run.run_id });
    assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), new RegExp(`MLflow at ${srv.url} is not answering`));
  } finally {
    delete process.env.MLFLOW_TRACKING_TOKEN;
    await srv.close();
  }
});

test('a stopped run is KILLED, and its resume logs on in the same MLflow run (RUNNING again, params not sent twice), then FINISHED', async () => {
  const srv = await startFakeMlflow();
  try {
    const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${srv.url}', experiment: e } }`);
    const stopped = await train({ configPath: cfg, ...stopAtStep(2) });
    assert.equal(stopped.status, 'stopped');
    const run = [...srv.runs.values()][0];
    assert.deepEqual(run.statuses, ['RUNNING', 'KILLED']);
    const paramBatches = run.paramBatches;
    assert.equal(paramBatches, 2, 'the config in two batches of at most 100 params');
    const resumed = await train({ resume: stopped.runDir });
    assert.equal(resumed.status, 'completed');
    assert.equal(srv.runs.size, 1, 'no second MLflow run');
    assert.deepEqual(run.statuses, ['RUNNING', 'KILLED', 'RUNNING', 'FINISHED']);
    assert.deepEqual(got(run.metrics), expected(resumed.runDir));
    assert.equal(run.paramBatches, paramBatches, 'the resume sends no params');
    // no Authorization header without a token in the environment
    assert.ok(srv.requests.every((q) => q.auth === undefined));
  } finally {
    await srv.close();
  }
});

test('a failed run is FAILED; a server without proxied artifacts gets none, said once', async () => {
  const srv = await startFakeMlflow();
  srv.proxyArtifacts = false;
  try {
    const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${srv.url}', experiment: e } }`);
    await assert.rejects(train({ configPath: cfg, sets: ['sft.steps=20', 'sft.lr=1e38', 'grpo.max_nonfinite_steps=3'] }), /diverged/);
    const run = [...srv.runs.values()][0];
    assert.deepEqual(run.statuses, ['RUNNING', 'FAILED']);
    assert.equal(srv.artifacts.size, 0);
    const runDir = join(cfg, '..', 'runs', readdirSync(join(cfg, '..', 'runs'))[0]);
    assert.match(readFileSync(join(runDir, 'engine.log'), 'utf8'), /run\.json not uploaded: the server does not proxy artifacts \(artifact_uri s3:/);
  } finally {
    await srv.close();
  }
});

test('a dead server never stops training: the run completes, one warning names the URL, metrics.jsonl holds everything', async () => {
  const srv = await startFakeMlflow();
  const url = srv.url;
  await srv.close();
  const cfg = tinyConfig(tmp(), 'countdown', `logging: { mlflow: { tracking_uri: '${url}', experiment: e } }`);
  const t0 = performance.now();
  const r = await train({ configPath: cfg });
  assert.equal(r.status, 'completed');
  assert.ok(performance.now() - t0 < 60_000);
  const log = readFileSync(join(r.runDir, 'engine.log'), 'utf8');
  assert.equal(log.match(/is not answering/g)?.length, 1, log);
  assert.match(log, new RegExp(`MLflow at ${url}: \\d+ metrics and the run's status were not sent`));
  assert.ok(readMetrics(r.runDir).length > 0);
  assert.equal(readRunInfo(r.runDir)!.mlflow, undefined);
});

test('the queue is bounded: past it the oldest metrics go, with a warning', async () => {
  const warnings: string[] = [];
  const t = new MlflowTracker(
    { tracking_uri: 'http://127.0.0.1:9', experiment: 'e' },
    { runName: 'r', runDir: '/x', params: {}, log: (_, m) => warnings.push(m), backoffMs: [10, 10], requestTimeoutMs: 200 },
  );
  for (let i = 0; i < 110; i++) t.logMetrics(Array.from({ length: 1000 }, (_, k) => ({ key: 'train/x', value: k, step: i, timestamp: 0 })));
  assert.ok(t.pending <= 100_000, String(t.pending));
  await t.end('FINISHED', 100);
  assert.ok(warnings.some((w) => /metrics were dropped while the server did not answer/.test(w)));
});

test('config: a tracking_uri with user:password@ is refused, naming the field and where credentials go', () => {
  const dir = tmp();
  assert.throws(
    () => loadConfig(tinyConfig(dir, 'countdown', "logging: { mlflow: { tracking_uri: 'http://u:p@host:5000' } }")),
    /logging\.mlflow.*without user:password@/s,
  );
});
