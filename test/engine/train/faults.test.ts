// Faults injected into real runs of a tiny model: a resumed run with a KL term, a run that diverges,
// a Stop while the oracle hangs, two engines on one run directory, and a run started in a fixed folder (Slurm tasks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { listLoggedSteps, readMetrics, readRunInfo } from '../../../src/engine/rundir/rundir';
import { listEvalSteps } from '../../../src/engine/rundir/eval_table';
import { metricsWithoutTiming, RunController, train } from '../../../src/engine/train/train';
import { startLlmServer } from '../oracle/llm_server';
import { runWithLostCheckpoint, stopAtStep, tinyConfig } from '../fixtures';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-faults-'));
const CLI = resolve(__dirname, '../../../dist/engine/cli.js');

test('KL on resume: the reference is the post-SFT policy, so a resumed run reproduces the uninterrupted one', async () => {
  const cfg = tinyConfig(tmp(), 'countdown');
  const sets = ['grpo.kl_beta=0.5', 'grpo.steps=4', 'grpo.checkpoint_every=1'];
  const full = await train({ configPath: cfg, sets });
  const stopped = await train({ configPath: cfg, sets, ...stopAtStep(2) });
  assert.equal(stopped.status, 'stopped');
  const resumed = await train({ resume: stopped.runDir });
  assert.equal(resumed.status, 'completed');
  const a = readMetrics(full.runDir).map(metricsWithoutTiming);
  const b = readMetrics(resumed.runDir).map(metricsWithoutTiming);
  // The KL of the steps after the resume is what a wrong reference changes first.
  assert.ok(a.filter((r) => r.phase === 'grpo').every((r) => typeof r.kl === 'number'));
  assert.deepEqual(b, a);
});

test('a run whose loss stays non-finite ends failed, "diverged at step N", instead of completing with every step skipped', async () => {
  // SFT at lr 1e38: Adam's first update moves every weight by ~1e38, the products overflow float32, every later loss
  // is NaN (each update skipped), and the run must say so rather than train on.
  const dir = tmp();
  const cfg = tinyConfig(dir, 'countdown');
  await assert.rejects(
    train({ configPath: cfg, sets: ['sft.steps=20', 'sft.lr=1e38', 'grpo.max_nonfinite_steps=3'] }),
    /diverged at SFT step \d+: 3 steps in a row had a non-finite loss or gradient/,
  );
  const runs = spawnSync('ls', [join(dir, 'runs')], { encoding: 'utf8' })
    .stdout.trim()
    .split('\n');
  const runDir = join(dir, 'runs', runs[0]);
  const info = readRunInfo(runDir)!;
  assert.equal(info.status, 'failed');
  assert.match(info.error ?? '', /diverged at SFT step \d+/);
  const rows = readMetrics(runDir).filter((r) => r.phase === 'sft');
  assert.ok(rows.length < 20, `stopped early (${rows.length} steps)`);
  assert.deepEqual(
    rows.slice(-3).map((r) => r.skipped),
    [1, 1, 1],
  );
});

test('Stop while the oracle hangs: the run stops at once, keeps every finished step, and drops the interrupted one', async () => {
  let answered = 0;
  const srv = await startLlmServer(() => (answered++ < 1000 ? { hang: true } : { body: '{}' }));
  process.env.CREDIT_LENS_FAULTS_KEY = 'sk-faults-test';
  try {
    const dir = tmp();
    const cfg = tinyConfig(dir, 'countdown');
    const ctl = new RunController();
    let asked = false;
    const started = Date.now();
    const poll = setInterval(() => {
      if (!asked && srv.received.length > 0) {
        asked = true;
        void ctl.stop();
      }
    }, 20);
    const r = await train({
      configPath: cfg,
      controller: ctl,
      sets: [
        'credit.strategy=cal',
        'credit.cal.provider=openai',
        'credit.cal.model=judge',
        `credit.cal.base_url=${srv.url}`,
        'credit.cal.api_key_env=CREDIT_LENS_FAULTS_KEY',
        'credit.cal.timeout_s=60',
        'credit.cal.cache=false',
        'sft.steps=0',
      ],
    });
    clearInterval(poll);
    assert.ok(asked, 'the oracle was asked');
    assert.equal(r.status, 'stopped');
    assert.ok(Date.now() - started < 30_000, 'not held by the 60 s oracle timeout');
    const grpo = readMetrics(r.runDir)
      .filter((m) => m.phase === 'grpo')
      .map((m) => m.step);
    const info = readRunInfo(r.runDir)!;
    assert.equal(info.last_step, grpo.length ? grpo[grpo.length - 1] : 0);
    assert.ok(existsSync(join(r.runDir, 'checkpoints')));
  } finally {
    await srv.close();
  }
});

test("two engines on one run directory: the second is refused with the first one's pid; --run-dir starts, then resumes", async () => {
  assert.ok(existsSync(CLI), 'npm run build first');
  const dir = tmp();
  const cfg = tinyConfig(dir, 'countdown');
  const runDir = join(dir, 'runs', 'fixed');
  // A long run in a fixed folder, in its own process.
  const first = spawn(process.execPath, [CLI, 'train', cfg, '--run-dir', runDir, '--set', 'grpo.steps=400', '--set', 'grpo.checkpoint_every=1'], {
    stdio: 'ignore',
  });
  let firstCode: number | null = null;
  try {
    for (let i = 0; i < 600 && !(readRunInfo(runDir)?.last_step ?? 0); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(readRunInfo(runDir)?.status === 'running');
    const second = spawnSync(process.execPath, [CLI, 'train', '--resume', runDir], { encoding: 'utf8' });
    assert.equal(second.status, 2, second.stderr);
    assert.match(second.stderr, new RegExp(`run is already running \\(pid ${first.pid}\\)`));
    assert.equal(readRunInfo(runDir)?.status, 'running', 'the refused engine changed nothing');
  } finally {
    first.kill('SIGTERM');
    firstCode = await new Promise<number | null>((r) => first.on('exit', r));
  }
  const stopped = readRunInfo(runDir)!;
  assert.equal(stopped.status, 'stopped');
  assert.equal(firstCode, 130, 'a stopped run exits 130, as a stopped probe or import does');
  // The same command again (a requeued Slurm task) resumes the run in place, to a shorter total.
  const again = spawnSync(process.execPath, [CLI, 'train', cfg, '--run-dir', runDir, '--set', `grpo.steps=${stopped.last_step! + 1}`], { encoding: 'utf8' });
  assert.equal(again.status, 0, again.stderr);
  const done = readRunInfo(runDir)!;
  assert.equal(done.status, 'completed');
  assert.match(done.resumed_from ?? '', /checkpoints\/step-/);
  assert.ok(!existsSync(join(runDir, '.lock')), 'the lock is released');
  assert.ok(readFileSync(join(runDir, 'config.yaml'), 'utf8').includes('name: tiny-countdown'));
});

test('a resume sets aside the tables the abandoned trajectory wrote after its checkpoint, so no reader mixes two trajectories', async () => {
  // A kill after step 4's tables were written but before its checkpoint: the newest checkpoint is step 2.
  const runDir = await runWithLostCheckpoint(tinyConfig(tmp(), 'countdown'), ['grpo.steps=4', 'grpo.checkpoint_every=2', 'grpo.eval_every=1'], 4);
  const oldStep4 = readFileSync(join(runDir, 'tokens', 'step-000004.arrow'));
  // The resumed run stops after step 3: nothing overwrites step 4's tables.
  const resumed = await train({ resume: runDir, ...stopAtStep(3) });
  assert.equal(resumed.status, 'stopped');
  assert.deepEqual(listLoggedSteps(runDir, 'tokens'), [1, 2, 3]);
  assert.deepEqual(listLoggedSteps(runDir, 'episodes'), [1, 2, 3]);
  assert.deepEqual(listEvalSteps(runDir), [0, 1, 2, 3]);
  assert.deepEqual(
    readMetrics(runDir).map((r) => r.step),
    [
      ...readMetrics(runDir)
        .filter((r) => r.phase === 'sft')
        .map((r) => r.step),
      0,
      1,
      2,
      3,
    ],
    'metrics end at step 3 too',
  );
  // Nothing is deleted: the abandoned trajectory's steps 3 and 4 are kept aside, byte for byte.
  const aside = readdirSync(join(runDir, 'abandoned'));
  assert.equal(aside.length, 1);
  const kept = join(runDir, 'abandoned', aside[0]);
  assert.deepEqual(readdirSync(join(kept, 'tokens')).sort(), ['step-000003.arrow', 'step-000004.arrow']);
  assert.deepEqual(readdirSync(join(kept, 'eval')).sort(), ['step-000003.arrow', 'step-000004.arrow']);
  assert.ok(readFileSync(join(kept, 'tokens', 'step-000004.arrow')).equals(oldStep4));
  assert.match(readFileSync(join(runDir, 'engine.log'), 'utf8'), /belong to the trajectory this resume abandons: moved to .*abandoned/);
});

test('Stop during an eval ends it within a few decode steps, writes no eval table for it, and the resume evaluates again', async () => {
  const dir = tmp();
  // a long eval before GRPO: 2,048 greedy completions of up to 48 tokens on a model that has not learned EOS
  const cfg = tinyConfig(dir, 'countdown');
  const ctl = new RunController();
  let stoppedAt = 0;
  const r = await train({
    configPath: cfg,
    controller: ctl,
    sets: [
      'sft.steps=0',
      'task.numbers=[3, 3]',
      'task.max_number=15',
      'task.max_target=50',
      'task.eval_size=2048',
      'task.train_size=256',
      'grpo.max_new_tokens=40',
      'model.d_model=64',
      'model.d_ff=128',
      'model.max_seq_len=96',
    ],
    reporter: {
      ...(await import('../../../src/engine/train/run_control')).silentReporter,
      // half a second after the run starts (no SFT): the eval before GRPO is under way
      started: () => void setTimeout(() => ((stoppedAt = Date.now()), void ctl.stop()), 500),
    },
  });
  assert.ok(stoppedAt > 0, 'stop was requested');
  assert.equal(r.status, 'stopped');
  const after = (Date.now() - stoppedAt) / 1000;
  assert.ok(after < 3, `ended ${after.toFixed(1)} s after the stop`);
  assert.deepEqual(listEvalSteps(r.runDir), [], 'no eval table for an eval that was cut short');
  assert.equal(r.initialEval, null);
  const again = await train({ resume: r.runDir });
  assert.equal(again.status, 'completed');
  assert.equal(listEvalSteps(r.runDir)[0], 0, 'the resume evaluated before GRPO');
  assert.equal(typeof again.initialEval, 'number');
});
