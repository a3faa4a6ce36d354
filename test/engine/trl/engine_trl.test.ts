// `engine: trl`: a config trained by TRL through the Python package (real torch, transformers and TRL on the CPU), the
// task and its rewards from this engine's `credit-lens reward` worker. The model is a tiny random Qwen2 folder written by
// `python -m credit_lens.testing --tiny-hf` (nothing downloaded). A machine without the package fails here, as CI would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { train, RunController } from '../../../src/engine/train/train';
import { answer } from '../../../src/engine/trl/reward_worker';
import { latestTrlCheckpoint } from '../../../src/engine/trl/train_trl';
import { trlIssues, grpoConfigOf } from '../../../src/engine/trl/carried';
import { validateConfig } from '../../../src/engine/config/issues';
import { loadConfig } from '../../../src/engine/config/config';
import { makeCountdownTask } from '../../../src/engine/tasks/countdown';
import { readRunInfo, listLoggedSteps } from '../../../src/engine/rundir/rundir';
import { readStepTables } from '../../../src/engine/rundir/arrow_tables';
import { loadRunData } from '../../../src/extension/panels/run_data';

const EXAMPLE = resolve(__dirname, '../../../examples/countdown-trl.credit.yaml');
const PYTHON = process.env.CREDIT_LENS_PYTHON ?? 'python3';
const CLI = [process.execPath, resolve(__dirname, '../../../dist/engine/cli.js')];
const SMALL = ['grpo.prompts_per_step=2', 'grpo.group_size=4', 'grpo.max_new_tokens=12', 'grpo.checkpoint_every=2'];

function tinyHf(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'cl-trl-')), 'tiny-qwen2');
  const r = spawnSync(PYTHON, ['-m', 'credit_lens.testing', '--tiny-hf', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `python -m credit_lens.testing --tiny-hf failed (pip install -e "python[trl]"):\n${r.stderr}`);
  return dir;
}

const metricSteps = (runDir: string) =>
  readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).step);

test(
  'a config with engine: trl trains with TRL and writes a run every reader opens; a stop ends it stopped and a resume completes it',
  { timeout: 600_000 },
  async () => {
    const model = tinyHf();
    const out = mkdtempSync(join(tmpdir(), 'cl-trl-runs-'));
    const sets = [`model.path=${model}`, 'grpo.steps=3', ...SMALL, 'credit.strategy=entropy_weighted'];
    const r = await train({ configPath: EXAMPLE, sets, outputDir: out, engineCommand: [process.execPath, resolve(__dirname, '../../../dist/engine/cli.js')] });
    assert.equal(r.status, 'completed');
    const info = readRunInfo(r.runDir)!;
    assert.equal(info.backend, 'trl');
    assert.equal(info.strategy, 'entropy_weighted');
    assert.deepEqual(listLoggedSteps(r.runDir), [1, 2, 3]);
    assert.deepEqual(
      loadRunData(r.runDir).rows.map((x) => x.step),
      [1, 2, 3],
    );
    const { tokens, episodes } = readStepTables(r.runDir, 2, { tokens: true });
    assert.equal(episodes.episode.length, 8, 'two prompts × four completions');
    // the rewards are the engine's countdown rewards of the logged completions (the worker scored them)
    const cfg = loadConfig(join(r.runDir, 'config.yaml')).config;
    assert.equal(cfg.engine, 'trl');
    for (let e = 0; e < episodes.episode.length; e++) assert.ok(episodes.reward[e] >= 0 && episodes.reward[e] <= 1.1);
    assert.ok(tokens!.token.length > 0);

    // a stop once step 3 is logged (SIGTERM to Python, mid-run: 60 steps leave it seconds of margin), then a resume from
    // TRL's last checkpoint
    const controller = new RunController();
    const runDir2 = join(out, 'stopped-run');
    const sets2 = [`model.path=${model}`, 'grpo.steps=60', ...SMALL, 'name=stopped-run'];
    const seen: number[] = [];
    const reporter = {
      started() {},
      progress() {},
      log() {},
      finished() {},
      metrics(_d: string, row: { step: number }) {
        seen.push(row.step);
        if (row.step >= 3 && !controller.stopRequested) void controller.stop();
      },
    };
    const stopped = await train({ configPath: EXAMPLE, sets: sets2, runDir: runDir2, controller, reporter, engineCommand: CLI });
    assert.equal(stopped.status, 'stopped');
    assert.equal(readRunInfo(runDir2)!.status, 'stopped');
    const last = readRunInfo(runDir2)!.last_step ?? 0;
    assert.ok(last >= 3 && last < 60, `stopped at step ${last}`);
    const resumed = await train({ resume: runDir2, engineCommand: CLI });
    assert.equal(resumed.status, 'completed');
    assert.deepEqual(
      metricSteps(runDir2),
      Array.from({ length: 60 }, (_, i) => i + 1),
      'each step once: the rows after the checkpoint were set aside and written again',
    );
    assert.match(String(readRunInfo(runDir2)!.resumed_from), /^trl checkpoint of step \d+$/);
  },
);

test('engine trl refuses, by name, a key it does not carry and a scratch model; it maps the rest to GRPOConfig', () => {
  const { config } = validateConfig({ engine: 'trl', task: { name: 'countdown' }, model: { source: 'scratch' }, grpo: { dynamic_sampling: true, lr: 5e-6 } });
  const issues = trlIssues(config!);
  assert.match(issues[0], /^grpo\.dynamic_sampling: true; engine trl does not carry it/);
  assert.ok(issues.some((i) => /^model\.source: scratch; engine trl trains a Hugging Face model folder/.test(i)));
  const ok = validateConfig({
    engine: 'trl',
    task: { name: 'countdown' },
    model: { source: 'hf', path: '/m' },
    grpo: { loss_agg: 'seq_mean_token_sum_norm', prompts_per_step: 4, group_size: 8, gradient_accumulation_steps: 4 },
  }).config!;
  assert.deepEqual(trlIssues(ok), []);
  const g = grpoConfigOf(ok);
  assert.equal(g.loss_type, 'dr_grpo');
  assert.equal(g.per_device_train_batch_size, 8);
  assert.equal(g.num_generations, 8);
});

test('the reward worker answers with the task’s own reward, its parts and success, and names a bad request', () => {
  const task = makeCountdownTask({ numbers: [3, 3], max_number: 10, max_target: 30, reward: 'grpo_zero', prompt: 'compact', train_size: 4, eval_size: 1 }, 1);
  const ex = answer(task, '{"op": "examples", "split": "train"}') as { prefill: string; examples: { id: number; prompt: string }[] };
  assert.equal(ex.prefill, '<think>');
  assert.equal(ex.examples.length, 4);
  const e0 = task.train[0];
  const ok = answer(task, JSON.stringify({ op: 'reward', items: [{ split: 'train', id: 0, completion: '</think>\n<answer>1</answer>' }] })) as {
    rewards: Record<string, number | boolean>[];
  };
  const want = task.reward('</think>\n<answer>1</answer>', e0);
  assert.equal(ok.rewards[0].total, want.total);
  assert.equal(ok.rewards[0].answer, want.answer);
  assert.ok(Math.abs((ok.rewards[0].format as number) + (ok.rewards[0].answer as number) - want.total) < 1e-12);
  assert.equal(ok.rewards[0].success, task.isSuccess(want));
  assert.deepEqual(answer(task, JSON.stringify({ op: 'reward', items: [{ split: 'train', id: 9, completion: 'x' }] })), {
    error: 'items[0].id: got 9; expected 0 to 3',
  });
  assert.deepEqual(answer(task, '{"op": "examples", "split": "test"}'), { error: 'split: got "test"; expected train, eval or validation' });
});

test('a sweep of engine: trl runs trains each grid point with TRL (the CLI, as the Sweep CodeLens starts it)', { timeout: 600_000 }, () => {
  const model = tinyHf();
  const dir = mkdtempSync(join(tmpdir(), 'cl-trl-sweep-'));
  const cfg = join(dir, 'trl-sweep.credit.yaml');
  writeFileSync(
    cfg,
    [
      'name: trl-sweep',
      'engine: trl',
      'output_dir: runs',
      `model: { source: hf, path: ${JSON.stringify(model)} }`,
      'task: { name: countdown, numbers: [3, 3], max_number: 9, max_target: 30, train_size: 16, eval_size: 4 }',
      'grpo: { steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, checkpoint_every: 2 }',
      'sweep: { grid: { credit.strategy: [none, otb] } }',
      '',
    ].join('\n'),
  );
  const r = spawnSync(CLI[0], [CLI[1], 'sweep', cfg], { cwd: dir, encoding: 'utf8', timeout: 600_000 });
  assert.equal(r.status, 0, r.stderr.slice(-3000));
  const runs = readdirSync(join(dir, 'runs')).filter((d) => d.startsWith('trl-sweep-'));
  assert.equal(runs.length, 2, runs.join(', '));
  const infos = runs.map((d) => readRunInfo(join(dir, 'runs', d))!);
  assert.deepEqual(infos.map((i) => i.strategy).sort(), ['none', 'otb']);
  for (const [k, i] of infos.entries()) {
    assert.equal(i.status, 'completed');
    assert.equal(i.backend, 'trl');
    assert.deepEqual(metricSteps(join(dir, 'runs', runs[k])), [1, 2]);
  }
});

test('a resume passes over a TRL checkpoint a stop cut short while it was being saved', () => {
  const run = mkdtempSync(join(tmpdir(), 'cl-trl-ckpt-'));
  const whole = ['trainer_state.json', 'optimizer.pt', 'scheduler.pt', 'rng_state.pth', 'training_args.bin'];
  for (const [n, files] of [
    [2, whole],
    [4, whole],
    [6, ['optimizer.pt', 'rng_state.pth']],
  ] as const) {
    mkdirSync(join(run, 'trl', `checkpoint-${n}`), { recursive: true });
    for (const f of files) writeFileSync(join(run, 'trl', `checkpoint-${n}`, f), '');
  }
  assert.equal(latestTrlCheckpoint(run), join(run, 'trl', 'checkpoint-4'));
  assert.equal(latestTrlCheckpoint(mkdtempSync(join(tmpdir(), 'cl-trl-none-'))), null);
});

test('engine trl refuses a strategy the Python package does not carry, with its reason, before the run folder exists', { timeout: 120_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), 'cl-trl-refused-'));
  await assert.rejects(
    train({
      configPath: EXAMPLE,
      sets: [`model.path=${mkdtempSync(join(tmpdir(), 'cl-trl-model-'))}`, 'credit.strategy=attention_credit'],
      outputDir: out,
      engineCommand: CLI,
    }),
    /engine: trl: credit\.strategy attention_credit: it needs the last layer's attention maps/,
  );
  assert.deepEqual(readdirSync(out), [], 'no run folder was made');
});
