// reward_variance (seed doc 004, part 3): the weights of design.md#semantics by hand, then the whole pipeline end to end:
// a tiny trained run → `rollouts paired` → `importance train` → a reward_variance run whose token table holds ρ.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { tokenWeights } from '../../../src/engine/credit';
import { loadImportanceCached } from '../../../src/engine/credit/reward_variance';
import { isUserError } from '../../../src/engine/core/errors';
import { cmdImportance, cmdRollouts } from '../../../src/engine/cli/data_commands';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { CharTokenizer } from '../../../src/engine/model/tokenizer';
import { makeTask } from '../../../src/engine/tasks';
import { loadConfig } from '../../../src/engine/config/config';
import { childSeed } from '../../../src/engine/core/rng';
import { tinyConfig } from '../fixtures';

const close = (a: number, b: number, tol = 1e-9) => Math.abs(a - b) <= tol;
const batchOf = (importance: number[][], importancePrompt: number[], mask?: number[][]) => ({
  logprobs: importance.map((r) => r.map(() => 0)),
  entropies: importance.map((r) => r.map(() => 0)),
  sections: importance.map((r) => r.map(() => 'other' as const)),
  importance,
  importancePrompt,
  mask,
});

test('raw: w = n·softmax(ρ/temp)', () => {
  // 3·softmax([.2, .5, .9]): e^.2 = 1.22140, e^.5 = 1.64872, e^.9 = 2.45960, sum 5.32973 → [0.68750, 0.92803, 1.38446]
  const w = tokenWeights('reward_variance', { mode: 'raw', temp: 1 }, batchOf([[0.2, 0.5, 0.9]], [0.7]));
  [0.6875039149693979, 0.9280332148644251, 1.3844628701661772].forEach((x, t) => assert.ok(close(w[0][t], x), `${w[0][t]} vs ${x}`));
});

test('variance_drop: g_t = max(0, ρ_t − ρ_{t−1}) with ρ_0 at the last prompt token, then n·softmax(g/temp)', () => {
  // ρ_0 = .1, ρ = [.2, .15, .9] → g = [.1, 0 (a rise of −.05), .75]; temp .5 → [.2, 0, 1.5]:
  // e = [1.22140, 1, 4.48169], sum 6.70309 → 3·e/sum = [0.54664, 0.44755, 2.00580]
  const w = tokenWeights('reward_variance', { mode: 'variance_drop', temp: 0.5 }, batchOf([[0.2, 0.15, 0.9]], [0.1]));
  [0.5466444990209006, 0.447554662349318, 2.0058008386297814].forEach((x, t) => assert.ok(close(w[0][t], x), `${w[0][t]} vs ${x}`));
});

test('one-token episodes, padding and all-equal ρ', () => {
  for (const mode of ['raw', 'variance_drop'] as const) {
    // n = 1: the softmax of one value is 1, so w = 1 whatever ρ.
    assert.deepEqual(tokenWeights('reward_variance', { mode, temp: 0.3 }, batchOf([[0.95]], [-0.5])), [[1]]);
    // every ρ equal (and ρ_0 too): raw gives a uniform softmax, variance_drop all-zero gains: w = 1 everywhere.
    const flat = tokenWeights('reward_variance', { mode, temp: 1 }, batchOf([[0.4, 0.4, 0.4, 0.4]], [0.4]));
    flat[0].forEach((x) => assert.ok(close(x, 1)));
  }
  // A padding token (mask 0) gets 0 and does not count in n: ρ_0 = .3, ρ = [.3, .8, pad] → g = [0, .5],
  // 2·softmax([0, .5]) = 2·[1, e^.5]/(1 + e^.5) = [0.75508, 1.24492]. The padded ρ (.99) must not matter.
  const w = tokenWeights(
    'reward_variance',
    { mode: 'variance_drop', temp: 1 },
    batchOf(
      [
        [0.3, 0.8, 0.99],
        [0.1, 0.2, 0.3],
      ],
      [0.3, 0],
      [
        [1, 1, 0],
        [1, 1, 1],
      ],
    ),
  );
  assert.ok(close(w[0][0], 0.7550813375962908) && close(w[0][1], 1.2449186624037092));
  assert.equal(w[0][2], 0);
  // second episode: ρ_0 = 0, ρ = [.1, .2, .3] → g = [.1, .1, .1], all equal → uniform
  w[1].forEach((x) => assert.ok(close(x, 1)));
});

test('missing importance inputs are an error, not silent uniform weights', () => {
  assert.throws(() => tokenWeights('reward_variance', {}, { logprobs: [[0]], entropies: [[0]], sections: [['other']] }), /importance/);
  assert.throws(() => tokenWeights('reward_variance', { mode: 'variance_drop' }, { ...batchOf([[0.1, 0.2]], []), importancePrompt: undefined }), /ρ_0/);
});

test('end to end: paired rollouts of a trained tiny run → importance net → a reward_variance run logs ρ and its weights', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rv-'));
  const cfg = tinyConfig(dir, 'countdown');
  // 40 new tokens let the SFT'd policy close its <answer>, so rewards vary within groups.
  const sets = ['grpo.max_new_tokens=40'];
  const policy = await train({ configPath: cfg, sets: [...sets, 'sft.steps=80', 'sft.lr=1e-2', 'grpo.steps=1'] });
  assert.equal(policy.status, 'completed');

  const out = join(dir, 'paired');
  assert.equal(
    await cmdRollouts(['paired', cfg, '--groups', '16', '--checkpoint', policy.runDir, '--output-dir', out, ...sets.flatMap((s) => ['--set', s])]),
    0,
  );
  const [folder] = readdirSync(out);
  const parquet = join(out, folder, 'rollouts_g4.parquet');
  const ck = join(dir, 'importance');
  assert.equal(
    await cmdImportance([
      'train',
      cfg,
      '--rollouts',
      parquet,
      '--out',
      ck,
      '--steps',
      '60',
      '--d-model',
      '16',
      '--layers',
      '1',
      '--heads',
      '2',
      ...sets.flatMap((s) => ['--set', s]),
    ]),
    0,
  );

  const run = await train({
    configPath: cfg,
    sets: [
      ...sets,
      'sft.steps=30',
      'sft.lr=1e-2',
      'grpo.steps=2',
      'credit.strategy=reward_variance',
      `credit.reward_variance.importance_checkpoint=${ck}`,
      'credit.reward_variance.mode=variance_drop',
      'credit.reward_variance.temp=0.5',
    ],
  });
  assert.equal(run.status, 'completed');
  const m = readMetrics(run.runDir).filter((r) => r.phase === 'grpo');
  assert.equal(m.length, 2);
  for (const r of m) assert.ok(Number.isFinite(r['reward_variance/rho_mean']) && Number.isFinite(r['reward_variance/rho0_mean']));

  // Rebuild the step's episodes from the tables and recompute ρ with the checkpoint: the logged importance
  // column is that ρ, and the logged weights are tokenWeights() of it.
  const tok = readTokenTable(join(run.runDir, 'tokens', 'step-000002.arrow'));
  const eps = readEpisodeTable(join(run.runDir, 'episodes', 'step-000002.arrow'));
  assert.ok(tok.importance, 'importance column filled');
  const c = loadConfig(cfg).config;
  const tokenizer = CharTokenizer.fromAlphabet(makeTask(c.task, childSeed(c.seed, 'task')).alphabet());
  const rows = eps.episode.length;
  const ids: number[][] = Array.from({ length: rows }, () => []);
  const logged: number[][] = Array.from({ length: rows }, () => []);
  const loggedW: number[][] = Array.from({ length: rows }, () => []);
  for (let i = 0; i < tok.episode.length; i++) {
    ids[tok.episode[i]].push(tok.token_id[i]);
    logged[tok.episode[i]].push(tok.importance![i]);
    loggedW[tok.episode[i]].push(tok.weight[i]);
  }
  const net = loadImportanceCached(ck);
  const rho = await net.episodeRho(
    Array.from(eps.prompt, (p) => tokenizer.encodePrompt(p)),
    ids,
  );
  const C = Math.max(...ids.map((r) => r.length));
  const pad = (r: number[]) => [...r, ...Array(C - r.length).fill(0)];
  const expected = tokenWeights(
    'reward_variance',
    { mode: 'variance_drop', temp: 0.5 },
    batchOf(
      rho.tokens.map(pad),
      rho.prompt,
      ids.map((r) => pad(r.map(() => 1))),
    ),
  );
  for (let e = 0; e < rows; e++) {
    ids[e].forEach((_, k) => {
      // ρ after the final token is defined as 1 (the completion fixes its reward); the others are the net's tanh.
      if (k === ids[e].length - 1) assert.equal(logged[e][k], 1);
      else assert.ok(logged[e][k] > -1 && logged[e][k] < 1);
      assert.ok(close(logged[e][k], rho.tokens[e][k], 1e-5), `ρ e${e} t${k + 1}: ${logged[e][k]} vs ${rho.tokens[e][k]}`);
      assert.ok(close(loggedW[e][k], expected[e][k], 1e-4), `w e${e} t${k + 1}: ${loggedW[e][k]} vs ${expected[e][k]}`);
    });
    const n = ids[e].length;
    assert.ok(
      close(
        loggedW[e].reduce((a, b) => a + b, 0),
        n,
        1e-3 * n,
      ),
      'weights average 1 over the episode',
    );
  }
  for (let e = 0; e < 2; e++) {
    t.diagnostic(
      `episode ${e} (reward ${eps.reward[e].toFixed(2)}), ρ_0 ${rho.prompt[e].toFixed(3)}: ` +
        ids[e].map((id, k) => `${JSON.stringify(tokenizer.decode([id]))} ρ${logged[e][k].toFixed(3)} w${loggedW[e][k].toFixed(2)}`).join(' | '),
    );
  }

  // A checkpoint trained on another tokenizer's rollouts is refused with the reason.
  const arith = tinyConfig(dir, 'arithmetic');
  await assert.rejects(
    train({
      configPath: arith,
      sets: ['sft.steps=0', 'grpo.steps=1', 'credit.strategy=reward_variance', `credit.reward_variance.importance_checkpoint=${ck}`],
    }),
    (e) => isUserError(e) && /trained on rollouts of a character tokenizer/.test((e as Error).message),
  );
});
