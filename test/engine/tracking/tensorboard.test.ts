// TensorBoard event files, read back twice. TensorBoard's own reader decides (read_tb.py: its EventAccumulator, as its
// server loads a run, purge of orphaned data included; `tensorboard --inspect` once). read_tfevents.py, written
// independently of the writer (Python's standard library, a bitwise CRC-32C, a generic protobuf decoder), stays as the
// fast check of what the real reader does not report: every CRC, the raw events before the purge, steps out of order.
// Unit cases on the writer, then real runs: a trained run, a resumed one, an import, and the backfill.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { maskedCrc32c, EventFileWriter, histogramOf, tfRecord } from '../../../src/engine/tracking/tensorboard';
import { metricTag } from '../../../src/engine/tracking/tags';
import { acquireRunLock } from '../../../src/engine/rundir/run_lock';
import { exportTensorboard } from '../../../src/engine/tracking/export';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { listLoggedSteps, readMetrics, stepFile } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { importRollouts } from '../../../src/engine/import/import';
import { runWithLostCheckpoint, tinyConfig } from '../fixtures';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-tb-'));
const READER = resolve(__dirname, 'read_tfevents.py');
const TENSORBOARD = resolve(__dirname, 'read_tb.py');

/** What TensorBoard itself shows of a log folder (tensorboard from the package index, installed by .ci/run). */
function readReal(folder: string): Pick<Read, 'series' | 'histograms'> {
  const r = spawnSync('python3', [TENSORBOARD, folder], { encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, `read_tb.py ${folder} (is tensorboard installed? pip install tensorboard): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

interface Read {
  files: string[];
  events: { step: number; wall_time: number; file_version?: string; session_log?: number; summary?: { tag: string; simple_value?: number }[] }[];
  series: Record<string, [number, number][]>;
  histograms: Record<string, [number, { min: number; max: number; num: number; sum: number; sum_squares: number; bucket_limit: number[]; bucket: number[] }][]>;
  out_of_order: number;
}

function read(folder: string): Read {
  const r = spawnSync('python3', [READER, folder], { encoding: 'utf8' });
  assert.equal(r.status, 0, `read_tfevents.py ${folder}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Read;
}

test('masked CRC-32C: the check value of "123456789" (0xE3069283, RFC 3720 B.4) and its TFRecord mask', () => {
  const c = 0xe3069283;
  const want = ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
  assert.equal(maskedCrc32c(new TextEncoder().encode('123456789')), want);
  // A TFRecord of 3 bytes: length 3 as uint64 LE, then the masked CRCs the reader checks
  const rec = tfRecord(Uint8Array.from([1, 2, 3]));
  assert.equal(rec.length, 12 + 3 + 4);
  assert.deepEqual([...rec.subarray(0, 8)], [3, 0, 0, 0, 0, 0, 0, 0]);
});

test('histograms: equal-width buckets over the finite values; edges close their bucket; num, sum, sum of squares', () => {
  // values 0..10 in 5 buckets of width 2: (−∞,2] holds 0,1,2; (2,4] 3,4; … (8,10] 9,10; NaN and null are not counted
  const h = histogramOf([...Array.from({ length: 11 }, (_, i) => i), NaN, null], 5)!;
  assert.deepEqual(h.bucketLimit, [2, 4, 6, 8, 10]);
  assert.deepEqual(h.bucket, [3, 2, 2, 2, 2]);
  assert.equal(h.num, 11);
  assert.equal(h.sum, 55);
  assert.equal(h.sumSquares, 385);
  assert.deepEqual(histogramOf([0.5, 0.5]), { min: 0.5, max: 0.5, num: 2, sum: 1, sumSquares: 0.5, bucketLimit: [0.5], bucket: [2] });
  assert.equal(histogramOf([NaN]), null);
});

test('tags: grouped with / as TensorBoard groups charts', () => {
  assert.equal(metricTag('grpo', 'reward_mean'), 'train/reward_mean');
  assert.equal(metricTag('grpo', 'kl'), 'train/kl');
  assert.equal(metricTag('grpo', 'eval_success'), 'eval/success');
  assert.equal(metricTag('grpo', 'val_success'), 'eval/val_success');
  assert.equal(metricTag('eval', 'reward_mean'), 'eval/reward_mean');
  assert.equal(metricTag('grpo', 'effective_groups'), 'credit/effective_groups');
  assert.equal(metricTag('grpo', 'attribution/attribution_entropy'), 'attribution/attribution_entropy');
  assert.equal(metricTag('grpo', 'step_time_s'), 'perf/step_time_s');
  assert.equal(metricTag('sft', 'loss'), 'sft/loss');
});

test('the writer: version record first, scalars as float32, histograms, and a purge marker the reader applies', () => {
  const dir = tmp();
  const a = new EventFileWriter(dir);
  a.add(1, [['train/x', 0.1]], [['tokens/v', histogramOf([1, 2, 3])!]], 1000);
  a.add(2, [['train/x', 0.2]], [], 1001);
  a.add(3, [['train/x', 0.3]], [], 1002);
  a.close();
  // a restart from step 1's checkpoint: step 2 onwards is written again
  const b = new EventFileWriter(dir, 2);
  b.add(2, [['train/x', 0.25]], [], 1003);
  b.close();
  const r = read(dir);
  assert.equal(r.files.length, 2);
  assert.match(r.files[0], /^events\.out\.tfevents\.1000\./);
  assert.equal(r.events[0].file_version, 'brain.Event:2');
  assert.deepEqual(r.series['train/x'], [
    [1, Math.fround(0.1)],
    [2, Math.fround(0.25)],
  ]);
  assert.equal(r.out_of_order, 0);
  const [[step, h]] = r.histograms['tokens/v'];
  assert.equal(step, 1);
  assert.deepEqual([h.min, h.max, h.num, h.sum, h.sum_squares], [1, 3, 3, 6, 14]);
  assert.equal(
    h.bucket.reduce((x, y) => x + y, 0),
    3,
  );
  // one flipped bit anywhere is caught by the reader's CRC check
  const f = join(dir, r.files[0]);
  const bytes = readFileSync(f);
  bytes[40] ^= 1;
  writeFileSync(f, bytes);
  assert.notEqual(spawnSync('python3', [READER, dir]).status, 0);
});

/** Every metrics.jsonl row's numbers, under their tags, in the folders TensorBoard would read, as float32. */
function expectedSeries(runDir: string, phase: 'sft' | 'main'): Record<string, [number, number][]> {
  const out: Record<string, [number, number][]> = {};
  for (const row of readMetrics(runDir)) {
    if ((row.phase === 'sft') !== (phase === 'sft')) continue;
    for (const [k, v] of Object.entries(row)) {
      if (k === 'step' || k === 'phase' || typeof v !== 'number') continue;
      (out[metricTag(row.phase, k)] ??= []).push([row.step, Math.fround(v)]);
    }
  }
  return out;
}

function assertMatchesRun(runDir: string): Read {
  const main = read(join(runDir, 'tensorboard'));
  const sft = read(join(runDir, 'tensorboard', 'sft'));
  // TensorBoard's own reader: every metrics row's number under its tag, once per step, after its purge
  const real = readReal(join(runDir, 'tensorboard'));
  assert.deepEqual(real.series, expectedSeries(runDir, 'main'), "TensorBoard's EventAccumulator");
  assert.deepEqual(readReal(join(runDir, 'tensorboard', 'sft')).series, expectedSeries(runDir, 'sft'), "TensorBoard's EventAccumulator, sft/");
  // and the hand-written reader agrees with it
  assert.deepEqual(main.series, real.series);
  assert.deepEqual(sft.series, expectedSeries(runDir, 'sft'));
  assert.equal(main.out_of_order + sft.out_of_order, 0, 'no step goes back within a folder (TensorBoard would drop points)');
  // each logged step's token columns as histograms, counted over the finite values
  for (const step of listLoggedSteps(runDir, 'tokens')) {
    const t = readTokenTable(stepFile(runDir, 'tokens', step));
    for (const col of ['contribution', 'effective_advantage', 'entropy'] as const) {
      const got = real.histograms[`tokens/${col}`].filter(([s]) => s === step);
      assert.equal(got.length, 1, `tokens/${col} at step ${step}`);
      assert.deepEqual(
        got,
        main.histograms[`tokens/${col}`].filter(([s]) => s === step),
      );
      const v = [...t[col]].filter(Number.isFinite);
      assert.equal(got[0][1].num, v.length);
      assert.equal(got[0][1].min, Math.min(...v));
      assert.equal(got[0][1].max, Math.max(...v));
      assert.equal(
        got[0][1].bucket.reduce((a, b) => a + b, 0),
        v.length,
      );
    }
  }
  return main;
}

test('a trained run writes <run>/tensorboard/ as it goes: every metrics row under its tag, SFT in sft/, token histograms', async () => {
  const r = await train({ configPath: tinyConfig(tmp(), 'countdown') });
  const main = assertMatchesRun(r.runDir);
  assert.ok(main.series['train/reward_mean'] && main.series['eval/success'] && main.series['credit/effective_groups']);
  // and `tensorboard --inspect`, TensorBoard's command-line summary of a log folder, sees the run's tags and steps
  const inspect = spawnSync('python3', ['-m', 'tensorboard.main', '--inspect', '--logdir', join(r.runDir, 'tensorboard')], { encoding: 'utf8' });
  assert.equal(inspect.status, 0, inspect.stderr);
  assert.match(inspect.stdout, /train\/loss/);
  assert.match(inspect.stdout, /histograms\s*\n[^]*tokens\/contribution/);
  assert.match(inspect.stdout, /max_step\s+3/);
  assert.deepEqual(
    main.series['train/loss'].map(([s]) => s),
    [1, 2, 3],
  );
  assert.match(
    readdirSync(join(r.runDir, 'tensorboard')).find((n) => n.includes('tfevents'))!,
    /^events\.out\.tfevents\.\d+\.[^.]+/,
  );
});

test('logging.tensorboard false writes none', async () => {
  const r = await train({ configPath: tinyConfig(tmp(), 'countdown'), sets: ['logging.tensorboard=false'] });
  assert.throws(() => readdirSync(join(r.runDir, 'tensorboard')), /ENOENT/);
});

test('a resumed run starts a new event file whose purge marker drops the abandoned steps: one line per tag, as metrics.jsonl', async () => {
  // a kill after step 4 was logged but before its checkpoint: the resume goes on from step 2, and steps 3 and 4 are
  // sampled and logged again
  const runDir = await runWithLostCheckpoint(tinyConfig(tmp(), 'countdown'), ['grpo.steps=4', 'grpo.checkpoint_every=2', 'grpo.eval_every=1'], 4);
  const resumed = await train({ resume: runDir });
  assert.equal(resumed.status, 'completed');
  const main = assertMatchesRun(runDir);
  assert.equal(main.files.length, 2);
  const start = main.events.find((e) => e.session_log === 1)!;
  assert.equal(start.step, 3, 'START at the first step after the checkpoint');
  // the abandoned trajectory's values are in the first file, and gone from what TensorBoard shows
  const raw = main.events.filter((e) => e.summary?.some((v) => v.tag === 'train/loss')).map((e) => e.step);
  assert.deepEqual(raw, [1, 2, 3, 4, 3, 4]);
  assert.deepEqual(
    main.series['train/loss'].map(([s]) => s),
    [1, 2, 3, 4],
  );
});

test('an import writes event files too, and export tensorboard backfills a run made without them (the same series)', async () => {
  const dir = tmp();
  // a trained run without event files: backfilled below, and the model that scores an import of its own rollouts
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['logging.tensorboard=false'] });
  const lines = [];
  for (const step of [1, 2]) {
    const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', step));
    for (let i = 0; i < ep.prompt.length; i++) lines.push(JSON.stringify({ step, prompt: ep.prompt[i], completion: ep.completion[i], reward: ep.reward[i] }));
  }
  writeFileSync(join(dir, 'rollouts.jsonl'), lines.join('\n') + '\n');
  const imp = await importRollouts({ source: join(dir, 'rollouts.jsonl'), model: r.runDir, out: join(dir, 'imported'), log: () => {} });
  const got = read(join(imp.runDir, 'tensorboard'));
  assert.deepEqual(got.series, expectedSeries(imp.runDir, 'main'));
  assert.deepEqual(readReal(join(imp.runDir, 'tensorboard')).series, expectedSeries(imp.runDir, 'main'), "TensorBoard's EventAccumulator");
  assert.deepEqual(
    got.series['train/success_rate'].map(([s]) => s),
    [1, 2],
  );
  assert.ok(got.histograms['tokens/contribution'].length === 2);

  const out = exportTensorboard(r.runDir);
  assert.equal(out.histogramSteps, 3);
  assertMatchesRun(r.runDir);
  assert.throws(() => exportTensorboard(r.runDir), /already has event files .*--replace/);
  const again = exportTensorboard(r.runDir, { replace: true });
  assert.equal(again.files.length, 2);
  // a run still running holds its lock and has its event files open: --replace refuses, and deletes nothing
  const release = acquireRunLock(r.runDir);
  try {
    assert.throws(
      () => exportTensorboard(r.runDir, { replace: true }),
      /export tensorboard .*: the run is still running, and its trainer writes its event files/,
    );
    assert.deepEqual(
      again.files.map((f) => existsSync(f)),
      [true, true],
    );
  } finally {
    release();
  }
  // through the CLI: a folder that is not a run is reported and the command fails, after exporting the others
  const cli = resolve(__dirname, '../../../dist/engine/cli.js');
  const res = spawnSync(process.execPath, [cli, 'export', 'tensorboard', r.runDir, join(dir, 'imported'), '--replace'], { encoding: 'utf8' });
  assert.equal(res.status, 2, res.stderr);
  assert.match(res.stderr, /not a run directory/);
  assert.match(res.stdout, /histograms of 3 steps/);
});
