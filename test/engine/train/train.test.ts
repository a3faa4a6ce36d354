// Engine integration: real runs of a tiny scratch model on the wasm backend.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, truncateSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readEpisodeTable, readTokenTable, TOKEN_SCHEMA, EPISODE_SCHEMA } from '../../../src/engine/rundir/arrow_tables';
import { latestCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { readMetrics, readRunInfo } from '../../../src/engine/rundir/rundir';
import { metricsWithoutTiming, train } from '../../../src/engine/train/train';
import { sevensConfig, stopAtStep, tinyConfig } from '../fixtures';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-train-'));
const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

for (const task of ['countdown', 'arithmetic'] as const) {
  test(`a 3-step ${task} run writes every design.md#run-directory file and column`, async () => {
    const dir = tmp();
    const r = await train({ configPath: tinyConfig(dir, task) });
    assert.equal(r.status, 'completed');
    const info = readRunInfo(r.runDir)!;
    assert.equal(info.status, 'completed');
    assert.equal(info.backend, 'wasm');
    assert.ok(existsSync(join(r.runDir, 'config.yaml')) && existsSync(join(r.runDir, 'engine.log')));
    const rows = readMetrics(r.runDir);
    assert.deepEqual(
      rows.filter((m) => m.phase === 'grpo').map((m) => m.step),
      [1, 2, 3],
    );
    assert.deepEqual(
      rows.filter((m) => m.phase === 'sft').map((m) => m.step),
      [1, 2],
    );
    for (const k of [
      'reward_mean',
      'reward_std',
      'success_rate',
      'effective_groups',
      'loss',
      'grad_norm',
      'kl',
      'entropy_mean',
      'clip_frac',
      'response_len',
      'step_time_s',
      'tokens_per_s',
    ]) {
      assert.equal(typeof rows.find((m) => m.phase === 'grpo')![k], 'number', k);
    }
    assert.ok(rows.some((m) => m.eval_success !== undefined));
    assert.deepEqual(readdirSync(join(r.runDir, 'tokens')).sort(), ['step-000001.arrow', 'step-000002.arrow', 'step-000003.arrow']);
    const tok = readTokenTable(join(r.runDir, 'tokens', 'step-000002.arrow')) as unknown as Record<string, ArrayLike<unknown>>;
    for (const f of TOKEN_SCHEMA.fields) assert.ok(f.name in tok, `token column ${f.name}`);
    const n = (tok.logprob as Float32Array).length;
    assert.ok(n > 0);
    // on-policy (one epoch): every token's gradient weight is 1 and no clip cut it
    assert.ok([...(tok.is_weight as Float32Array)].every((w) => w === 1));
    assert.ok([...(tok.clipped as Float32Array)].every((c) => c === 0));
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
  const { controller: ctl, reporter } = stopAtStep(2);
  const stopped = await train({ configPath: cfg, controller: ctl, reporter });
  assert.equal(stopped.status, 'stopped');
  assert.equal(readRunInfo(stopped.runDir)!.status, 'stopped');
  assert.deepEqual(
    readMetrics(stopped.runDir)
      .filter((m) => m.phase === 'grpo')
      .map((m) => m.step),
    [1, 2],
  );
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
  const { controller: ctl, reporter } = stopAtStep(1);
  const r = await train({ configPath: tinyConfig(dir, 'arithmetic'), controller: ctl, reporter });
  const ck = latestCheckpoint(r.runDir)!;
  assert.match(ck, /step-000001$/);
  truncateSync(join(ck, 'model.safetensors'), 100);
  // step-000001 is damaged; the post-SFT checkpoint step-000000 is intact, so the run resumes from there.
  const resumed = await train({ resume: r.runDir });
  assert.equal(resumed.status, 'completed');
  assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /skipped a damaged checkpoint: checkpoint .*step-000001 is corrupted/);
  assert.match(readRunInfo(r.runDir)!.resumed_from ?? '', /step-000000$/);
  // With every checkpoint damaged, the resume is refused with the reasons and leaves the run directory as it was: its
  // run.json still says completed (a refused resume changes nothing of the run), its engine.log says why.
  for (const c of readdirSync(join(r.runDir, 'checkpoints'))) truncateSync(join(r.runDir, 'checkpoints', c, 'model.safetensors'), 50);
  await assert.rejects(
    train({ resume: r.runDir }),
    (e: Error) => e.name === 'UserError' && /no checkpoint can be loaded/.test(e.message) && /corrupt/.test(e.message),
  );
  assert.equal(readRunInfo(r.runDir)!.status, 'completed');
  assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /no checkpoint can be loaded/);
});

test('GRPO raises a reward it can learn: the fraction of "7"s in the completion', async () => {
  // A check of the whole loop's sign and plumbing (sampling → rewards → advantages → loss → Adam), independent
  // of any task: an untrained model emits few 7s; with lr 1e-2 thirty steps drive the mean reward towards 1.
  const dir = tmp();
  sevensConfig(dir, {
    name: 'clip',
    seed: 3,
    backend: 'wasm',
    grpo: '{ steps: 3, prompts_per_step: 2, group_size: 8, max_new_tokens: 8, lr: 0.05, epochs_per_step: 4, clip_eps: 0.02, clip_eps_high: 0.02, eval_every: 3 }',
  });
  const r = await train({ configPath: join(dir, 'c.credit.yaml') });
  const grpo = readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
  assert.ok(
    grpo.some((m) => (m.clip_frac ?? 0) > 0),
    JSON.stringify(grpo.map((m) => m.clip_frac)),
  );
  assert.ok(
    grpo.every((m) => (m.clip_frac ?? 0) <= 0.75),
    'at most 3 of 4 epochs can clip',
  );
});

test('GSPO and CISPO train from --set: off-policy epochs clip (per sequence, or bounded per token), and each changes the update', async () => {
  const dir = tmp();
  sevensConfig(dir, {
    name: 'loss',
    seed: 3,
    backend: 'wasm',
    grpo: '{ steps: 3, prompts_per_step: 2, group_size: 8, max_new_tokens: 8, lr: 0.05, epochs_per_step: 4, clip_eps: 0.02, clip_eps_high: 0.02, eval_every: 3 }',
  });
  const cfg = join(dir, 'c.credit.yaml');
  const runs = {
    ppo: await train({ configPath: cfg }),
    gspo: await train({ configPath: cfg, sets: ['grpo.importance_sampling_level=sequence'] }),
    cispo: await train({ configPath: cfg, sets: ['grpo.policy_loss=cispo'] }),
  };
  const grpo = (r: { runDir: string }) => readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
  for (const [name, r] of Object.entries(runs)) {
    assert.equal(r.status, 'completed', name);
    assert.ok(
      grpo(r).every((m) => Number.isFinite(m.loss)),
      name,
    );
    assert.ok(
      grpo(r).some((m) => (m.clip_frac ?? 0) > 0),
      `${name} clips in its later epochs: ${JSON.stringify(grpo(r).map((m) => m.clip_frac))}`,
    );
  }
  // the first step's sampling is the same (same seed, same weights); the updates differ, so the second step's do too
  const loss2 = Object.values(runs).map((r) => grpo(r)[1].loss);
  assert.equal(new Set(loss2).size, 3, JSON.stringify(loss2));
  // the token table says what the loss did: over 4 epochs each token is cut in 0 to 3 of them (epoch 0 is on-policy,
  // weight 1); its weight is the mean over epochs of ρ where the gradient flowed and 0 where it was cut, so a token cut
  // in all three later epochs has exactly (1 + 0 + 0 + 0)/4
  const tt = readTokenTable(join(runs.ppo.runDir, 'tokens', 'step-000001.arrow'));
  assert.ok(tt.clipped && tt.is_weight);
  assert.ok(
    [...tt.clipped].every((c) => [0, 0.25, 0.5, 0.75].includes(c)),
    'a share of 4 epochs',
  );
  assert.ok([...tt.clipped].some((c) => c > 0));
  assert.ok(
    [...tt.is_weight].every((w) => w >= 0.25 - 1e-7),
    'epoch 0 gives every token 1/4',
  );
  for (let k = 0; k < tt.clipped.length; k++) if (tt.clipped[k] === 0.75) close(tt.is_weight[k], 0.25, 1e-7);
  const cfgOf = (r: { runDir: string }) => readFileSync(join(r.runDir, 'config.yaml'), 'utf8');
  assert.match(cfgOf(runs.gspo), /importance_sampling_level: sequence/);
  assert.match(cfgOf(runs.cispo), /policy_loss: cispo/);
});

test('mask_truncated_completions leaves truncated completions out of the loss; overlong_buffer shapes the logged reward', async () => {
  const dir = tmp();
  // an untrained model stops (EOS) within 8 tokens in some completions only: the rest are truncated
  sevensConfig(dir, {
    name: 'trunc',
    seed: 3,
    backend: 'wasm',
    grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, lr: 0.05, eval_every: 2 }',
  });
  const cfg = join(dir, 'c.credit.yaml');
  const grpo = (r: { runDir: string }) => readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
  const plain = grpo(await train({ configPath: cfg }));
  const masked = grpo(await train({ configPath: cfg, sets: ['grpo.mask_truncated_completions=true'] }));
  // step 1 samples the same completions in both runs (same seed, same weights): some truncated, some not
  assert.equal(masked[0].truncated_frac, plain[0].truncated_frac);
  assert.ok(plain[0].truncated_frac! > 0 && plain[0].truncated_frac! < 1, String(plain[0].truncated_frac));
  // the masked loss is over the finished completions only, so it differs
  assert.notEqual(masked[0].loss, plain[0].loss);
  // a 4-token buffer and penalty 0.5: a truncated completion (8 tokens) loses 0.5, one that stopped at L ≤ 4 tokens
  // nothing; the step's mean reward falls by exactly the logged mean penalty
  const shaped = grpo(await train({ configPath: cfg, sets: ['grpo.overlong_buffer={len: 4, penalty: 0.5}'] }));
  assert.ok(shaped[0].overlong_penalty_mean! <= -0.5 * plain[0].truncated_frac!, String(shaped[0].overlong_penalty_mean));
  close(shaped[0].reward_mean!, plain[0].reward_mean! + shaped[0].overlong_penalty_mean!, 1e-6);
});

test('dynamic sampling (DAPO) keeps only groups with both a correct and a wrong answer, drawing more prompts from their own streams; off, none is drawn', async () => {
  const dir = tmp();
  // groups of 2 one-or-two-token completions: many groups score alike (both without a 7, or both all 7s)
  sevensConfig(dir, {
    name: 'dyn',
    // a seed whose every step finds groups with a signal within 6 resample batches (most draws of this policy do not)
    seed: 8,
    backend: 'wasm',
    grpo: '{ steps: 3, prompts_per_step: 4, group_size: 2, max_new_tokens: 2, lr: 0.05, eval_every: 3 }',
  });
  const cfg = join(dir, 'c.credit.yaml');
  const grpo = (r: { runDir: string }) => readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
  const plain = grpo(await train({ configPath: cfg }));
  assert.ok(
    plain.some((m) => m.effective_groups! < 1),
    `some groups without a signal: ${JSON.stringify(plain.map((m) => m.effective_groups))}`,
  );
  assert.ok(plain.every((m) => m.groups_drawn === undefined));
  const dynRun = await train({ configPath: cfg, sets: ['grpo.dynamic_sampling=true', 'grpo.max_resample_batches=6'] });
  const dyn = grpo(dynRun);
  for (const m of dyn) {
    assert.equal(m.effective_groups, 1, 'every kept group carries a signal');
    assert.ok(m.groups_drawn! >= 4);
  }
  // step 1 draws the same first prompts: its groups without a signal were replaced from extra draws
  const dropped = Math.round((1 - plain[0].effective_groups!) * 4);
  assert.ok(dropped > 0 || plain.slice(1).some((m) => m.effective_groups! < 1));
  if (dropped > 0) {
    assert.ok(dyn[0].groups_drawn! > 4, JSON.stringify(dyn[0]));
    assert.ok(dyn[0].resampled_frac! > 0);
  }
  // the episodes logged are the kept groups (at most 4 of 2), and within each the rewards differ; a step that kept fewer
  // than 4 after max_resample_batches says so in engine.log
  const runDir = dynRun.runDir;
  const ep = readEpisodeTable(join(runDir, 'episodes', 'step-000001.arrow'));
  assert.ok(ep.reward.length % 2 === 0 && ep.reward.length <= 8 && ep.reward.length > 0, String(ep.reward.length));
  // DAPO filters on accuracy: each kept group has one correct and one wrong answer (the reward alone may differ in
  // groups of two wrong answers)
  for (let k = 0; k < ep.reward.length; k += 2) assert.notEqual(ep.success[k], ep.success[k + 1]);
  if (ep.reward.length < 8) assert.match(readFileSync(join(runDir, 'engine.log'), 'utf8'), /dynamic sampling kept \d of 4 groups after \d+ drawn/);
});
