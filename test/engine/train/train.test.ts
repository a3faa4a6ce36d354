// Engine integration: real runs of a tiny scratch model on the wasm backend.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, truncateSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readEpisodeTable, readTokenTable, TOKEN_SCHEMA, EPISODE_SCHEMA } from '../../../src/engine/rundir/arrow_tables';
import { latestCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { readMetrics, readRunInfo } from '../../../src/engine/rundir/rundir';
import { metricsWithoutTiming, RunController, train } from '../../../src/engine/train/train';
import { tinyConfig } from '../fixtures';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-train-'));

for (const task of ['countdown', 'arithmetic'] as const) {
  test(`a 3-step ${task} run writes every DESIGN §5 file and column`, async () => {
    const dir = tmp();
    const r = await train({ configPath: tinyConfig(dir, task) });
    assert.equal(r.status, 'completed');
    const info = readRunInfo(r.runDir)!;
    assert.equal(info.status, 'completed');
    assert.equal(info.backend, 'wasm');
    assert.ok(existsSync(join(r.runDir, 'config.yaml')) && existsSync(join(r.runDir, 'engine.log')));
    const rows = readMetrics(r.runDir);
    assert.deepEqual(rows.filter((m) => m.phase === 'grpo').map((m) => m.step), [1, 2, 3]);
    assert.deepEqual(rows.filter((m) => m.phase === 'sft').map((m) => m.step), [1, 2]);
    for (const k of ['reward_mean', 'reward_std', 'success_rate', 'loss', 'grad_norm', 'kl', 'entropy_mean', 'clip_frac', 'response_len', 'step_time_s', 'tokens_per_s']) {
      assert.equal(typeof rows.find((m) => m.phase === 'grpo')![k], 'number', k);
    }
    assert.ok(rows.some((m) => m.eval_success !== undefined));
    assert.deepEqual(readdirSync(join(r.runDir, 'tokens')).sort(), ['step-000001.arrow', 'step-000002.arrow', 'step-000003.arrow']);
    const tok = readTokenTable(join(r.runDir, 'tokens', 'step-000002.arrow')) as unknown as Record<string, ArrayLike<unknown>>;
    for (const f of TOKEN_SCHEMA.fields) assert.ok(f.name in tok, `token column ${f.name}`);
    const n = (tok.logprob as Float32Array).length;
    assert.ok(n > 0);
    const eff = tok.effective_advantage as Float32Array;
    const lp = tok.logprob as Float32Array;
    const c = tok.contribution as Float32Array;
    for (let i = 0; i < n; i++) assert.equal(c[i], Math.fround(eff[i] * lp[i]), `contribution row ${i}`);
    // strategy none: w = 1 so Â = A on every token
    const adv = tok.advantage as Float32Array;
    for (let i = 0; i < n; i++) assert.equal(eff[i], adv[i]);
    const ep = readEpisodeTable(join(r.runDir, 'episodes', 'step-000002.arrow')) as unknown as Record<string, ArrayLike<unknown>>;
    for (const f of EPISODE_SCHEMA.fields) assert.ok(f.name in ep, `episode column ${f.name}`);
    assert.equal((ep.reward as Float32Array).length, 8);
    assert.ok(latestCheckpoint(r.runDir));
  });
}

test('the same seed twice gives identical metrics', async () => {
  const dir = tmp();
  const cfg = tinyConfig(dir, 'countdown');
  const a = await train({ configPath: cfg });
  const b = await train({ configPath: cfg });
  assert.notEqual(a.runDir, b.runDir);
  assert.deepEqual(readMetrics(a.runDir).map(metricsWithoutTiming), readMetrics(b.runDir).map(metricsWithoutTiming));
});

test('stop + resume continues from the checkpoint and matches an uninterrupted run', async () => {
  const dir = tmp();
  const cfg = tinyConfig(dir, 'countdown', '');
  const ctl = new RunController();
  const reporter = {
    started() {}, metrics() {}, log() {}, finished() {},
    progress(p: { phase: string; step: number }) { if (p.phase === 'grpo' && p.step === 2) void ctl.stop(); },
  };
  const stopped = await train({ configPath: cfg, controller: ctl, reporter });
  assert.equal(stopped.status, 'stopped');
  assert.equal(readRunInfo(stopped.runDir)!.status, 'stopped');
  assert.deepEqual(readMetrics(stopped.runDir).filter((m) => m.phase === 'grpo').map((m) => m.step), [1, 2]);
  const resumed = await train({ resume: stopped.runDir });
  assert.equal(resumed.status, 'completed');
  assert.equal(resumed.runDir, stopped.runDir);
  const full = await train({ configPath: cfg });
  // Per-step RNG streams are derived from (seed, step) and the checkpoint holds weights + Adam state exactly,
  // so the resumed run reproduces the uninterrupted one row for row.
  assert.deepEqual(readMetrics(resumed.runDir).map(metricsWithoutTiming), readMetrics(full.runDir).map(metricsWithoutTiming));
});

test('resume skips a damaged checkpoint for the previous good one, and reports clearly when none is left', async () => {
  const dir = tmp();
  const ctl = new RunController();
  const reporter = { started() {}, metrics() {}, log() {}, finished() {}, progress(p: { phase: string; step: number }) { if (p.phase === 'grpo' && p.step === 1) void ctl.stop(); } };
  const r = await train({ configPath: tinyConfig(dir, 'arithmetic'), controller: ctl, reporter });
  const ck = latestCheckpoint(r.runDir)!;
  assert.match(ck, /step-000001$/);
  truncateSync(join(ck, 'model.safetensors'), 100);
  // step-000001 is damaged; the post-SFT checkpoint step-000000 is intact, so the run resumes from there.
  const resumed = await train({ resume: r.runDir });
  assert.equal(resumed.status, 'completed');
  assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /skipped a damaged checkpoint: checkpoint .*step-000001 is corrupted/);
  assert.match(readRunInfo(r.runDir)!.resumed_from ?? '', /step-000000$/);
  // With every checkpoint damaged, the resume fails with the reasons and leaves a readable run directory.
  for (const c of readdirSync(join(r.runDir, 'checkpoints'))) truncateSync(join(r.runDir, 'checkpoints', c, 'model.safetensors'), 50);
  await assert.rejects(train({ resume: r.runDir }), (e: Error) => e.name === 'UserError' && /no checkpoint can be loaded/.test(e.message) && /corrupt/.test(e.message));
  assert.equal(readRunInfo(r.runDir)!.status, 'failed');
  assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /no checkpoint can be loaded/);
});

test('GRPO raises a reward it can learn: the fraction of "7"s in the completion', async () => {
  // A check of the whole loop's sign and plumbing (sampling → rewards → advantages → loss → Adam), independent
  // of any task: an untrained model emits few 7s; with lr 1e-2 thirty steps drive the mean reward towards 1.
  const dir = tmp();
  writeFileSync(join(dir, 'data.jsonl'), Array.from({ length: 40 }, (_, i) => JSON.stringify({ prompt: `q${i}:`, answer: '7' })).join('\n'));
  writeFileSync(join(dir, 'sevens.js'), 'module.exports.reward = (c) => { const s = [...c]; return s.filter((x) => x === "7").length / (s.length || 1); };\n');
  writeFileSync(join(dir, 'c.credit.yaml'), `name: sevens
seed: 3
backend: wasm
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 64, max_seq_len: 48 }
task: { name: jsonl, path: data.jsonl, reward_module: sevens.js, train_size: 32, eval_size: 4 }
grpo: { steps: 30, prompts_per_step: 4, group_size: 8, max_new_tokens: 16, lr: 1.0e-2, eval_every: 100 }
`);
  const r = await train({ configPath: join(dir, 'c.credit.yaml') });
  const rewards = readMetrics(r.runDir).filter((m) => m.phase === 'grpo').map((m) => m.reward_mean!);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  assert.ok(mean(rewards.slice(0, 3)) < 0.2, `starts low: ${rewards.slice(0, 3)}`);
  assert.ok(mean(rewards.slice(-5)) > 0.8, `ends high: ${rewards.slice(-5)}`);
});

test('eval re-scores a checkpoint with the same greedy success the run logged', async () => {
  const dir = tmp();
  const r = await train({ configPath: tinyConfig(dir, 'arithmetic') });
  const { evalRun } = await import('../../../src/engine/train/evalrun');
  const ev = await evalRun(r.runDir);
  const last = readMetrics(r.runDir).filter((m) => m.eval_success !== undefined).pop()!;
  assert.equal(ev.success, last.eval_success);
  assert.equal(ev.n, 8);
  await assert.rejects(evalRun(r.runDir, 99), /no checkpoint for step 99/);
});

test('clip_frac is averaged over the PPO epochs: with several epochs and a large step it is above 0', async () => {
  // At epoch 0 the policy that sampled is the one updated (ρ ≡ 1), so a fraction read there is always 0; later
  // epochs move ρ, and with lr 0.05 and clip 0.02 some tokens leave [1 − ε, 1 + ε]. The reward (the share of "7"s in
  // the completion) varies within every group, so every step has non-zero advantages.
  const dir = tmp();
  writeFileSync(join(dir, 'data.jsonl'), Array.from({ length: 40 }, (_, i) => JSON.stringify({ prompt: `q${i}:`, answer: '7' })).join('\n'));
  writeFileSync(join(dir, 'sevens.js'), 'module.exports.reward = (c) => { const s = [...c]; return s.filter((x) => x === "7").length / (s.length || 1); };\n');
  writeFileSync(join(dir, 'c.credit.yaml'), `name: clip
seed: 3
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 16, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 32, max_seq_len: 32 }
task: { name: jsonl, path: data.jsonl, reward_module: sevens.js, train_size: 32, eval_size: 4 }
grpo: { steps: 3, prompts_per_step: 2, group_size: 8, max_new_tokens: 8, lr: 0.05, epochs_per_step: 4, clip_eps: 0.02, clip_eps_high: 0.02, eval_every: 3 }
`);
  const r = await train({ configPath: join(dir, 'c.credit.yaml') });
  const grpo = readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
  assert.ok(grpo.some((m) => (m.clip_frac ?? 0) > 0), JSON.stringify(grpo.map((m) => m.clip_frac)));
  assert.ok(grpo.every((m) => (m.clip_frac ?? 0) <= 0.75), 'at most 3 of 4 epochs can clip');
});
