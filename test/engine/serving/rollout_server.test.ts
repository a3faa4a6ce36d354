// GRPO with rollout.server: `credit-lens serve` on 127.0.0.1 (SGLang's routes) samples every rollout and eval, the
// engine updates, and the server loads each update before the next step samples. Checked: every sync in run.json and
// the server's weight version; the served policy at the end is the run's final one (a seeded draw from the server equals
// the same seed's draw in this process from the final checkpoint); the token table's log-probs are the trainer's own.
// Then a server that dies mid-run: the run stops with a checkpoint and a message naming the URL, and resumes once the
// server is back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { CreditLensServer, serve } from '../../../src/engine/serving/serve';
import { readRunInfo, readMetrics } from '../../../src/engine/rundir/rundir';
import { loadCheckpoint, latestCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { isUserError } from '../../../src/engine/core/errors';
import { openSession, useWeights } from '../../../src/engine/session/session';
import { loadConfig } from '../../../src/engine/config/config';
import { LocalSampler } from '../../../src/engine/model/sampling';
import { silentReporter } from '../../../src/engine/train/run_control';
import { sevensConfig } from '../fixtures';

const GRPO = '{ steps: 3, prompts_per_step: 4, group_size: 4, max_new_tokens: 8, eval_every: 3, checkpoint_every: 1 }';

test('GRPO with its rollouts on a server: every update synced, the served policy is the trained one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rollout-server-'));
  // a first run gives the server something to start from; the run under test replaces it at its first sync
  const seedRun = (await train({ configPath: sevensConfig(dir, { name: 'start', seed: 4, backend: 'wasm', grpo: GRPO }) })).runDir;
  const s = await serve({ spec: seedRun, port: 0, backend: 'wasm', allowPaths: [dir] });
  try {
    const cfg = sevensConfig(dir, { name: 'served', seed: 1, backend: 'wasm', grpo: `${GRPO}\nrollout: { server: '${s.url}', api: sglang }` });
    const r = await train({ configPath: cfg });
    assert.equal(r.status, 'completed');
    const info = readRunInfo(r.runDir)!;
    const rs = info.rollout_server!;
    assert.equal(rs.url, s.url);
    assert.equal(rs.api, 'sglang');
    assert.deepEqual(
      rs.syncs.map((x) => x.step),
      [0, 1, 2, 3],
      'the start and every update',
    );
    assert.ok(rs.syncs.every((x) => x.seconds > 0));
    // only the last step's folder is kept
    assert.deepEqual(readdirSync(join(r.runDir, 'rollout')), ['step-000003']);
    assert.equal((await (await fetch(`${s.url}/model_info`)).json()).weight_version, 'step-3');
    const m = readMetrics(r.runDir).filter((x) => x.phase === 'grpo');
    assert.deepEqual(
      m.map((x) => x.step),
      [1, 2, 3],
    );
    assert.ok(m.every((x) => Number.isFinite(x.reward_mean)));
    assert.ok(
      readMetrics(r.runDir).some((x) => x.phase === 'eval'),
      'evals sampled through the server too',
    );

    // the served weights are the run's final ones: the same seed draws the same continuation here and there
    const { config } = loadConfig(join(r.runDir, 'config.yaml'));
    const { session } = await openSession(config, { runDir: r.runDir });
    await useWeights(session, loadCheckpoint(latestCheckpoint(r.runDir)!).model);
    const local = new LocalSampler(session.model, session.tokenizer);
    const req = { prefix: session.tokenizer.encodePrompt('q1:'), tail: [], seeds: [101, 102, 103], maxNewTokens: 8 };
    const settings = { temperature: 1, topP: 1, eosIds: session.tokenizer.eosIds ?? [session.tokenizer.eosId], stop: ['</answer>'] };
    const here = (await local.sample([req], settings))![0].map((c) => c.ids);
    const res = await fetch(`${s.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        input_ids: req.seeds.map(() => req.prefix),
        sampling_params: req.seeds.map((seed) => ({ max_new_tokens: 8, sampling_seed: seed, stop: ['</answer>'], stop_token_ids: settings.eosIds })),
        return_logprob: true,
      }),
    });
    const there = ((await res.json()) as { meta_info: { output_token_logprobs: [number, number][] } }[]).map((x) =>
      x.meta_info.output_token_logprobs.map(([, id]) => id),
    );
    assert.deepEqual(there, here);
    session.model.dispose();
  } finally {
    await s.close();
  }
});

test('a rollout server that dies mid-run: the run stops with a checkpoint and a message naming the URL; --resume finishes it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rollout-dies-'));
  const seedRun = (await train({ configPath: sevensConfig(dir, { name: 'start', seed: 4, backend: 'wasm', grpo: GRPO }) })).runDir;
  let s = await serve({ spec: seedRun, port: 0, backend: 'wasm', allowPaths: [dir] });
  const port = Number(new URL(s.url).port);
  const cfg = sevensConfig(dir, { name: 'dies', seed: 2, backend: 'wasm', grpo: `${GRPO}\nrollout: { server: '${s.url}' }` });
  let runDir = '';
  await assert.rejects(
    train({
      configPath: cfg,
      reporter: {
        ...silentReporter,
        started: (p) => (runDir = p.runDir),
        progress: (p) => {
          if (p.phase === 'grpo' && p.step === 1) void s.close();
        },
      },
    }),
    (e: unknown) => isUserError(e) && e.message.includes(s.url) && /stopped at step 1 with a checkpoint/.test(e.message) && e.message.includes('--resume'),
  );
  const info = readRunInfo(runDir)!;
  assert.equal(info.status, 'failed');
  assert.ok(existsSync(join(runDir, 'checkpoints', 'step-000001')));
  s = await serve({ spec: seedRun, port, backend: 'wasm', allowPaths: [dir] });
  try {
    const r = await train({ resume: runDir });
    assert.equal(r.status, 'completed');
    const after = readRunInfo(runDir)!;
    assert.equal(after.last_step, 3);
    assert.deepEqual(
      after.rollout_server!.syncs.map((x) => x.step),
      [1, 2, 3],
      'the resumed run loads its checkpoint into the server first',
    );
  } finally {
    await s.close();
  }
});

test('a LoRA run with its rollouts on a server: the adapters synced as PEFT folders, the served adapter is the trained one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rollout-lora-'));
  // the base: a finished run's checkpoint, which the server serves and the LoRA run starts from (model.init_checkpoint)
  const base = (await train({ configPath: sevensConfig(dir, { name: 'base', seed: 4, backend: 'wasm', grpo: GRPO }) })).runDir;
  const ckpt = latestCheckpoint(base)!;
  const s = await serve({ spec: ckpt, port: 0, backend: 'wasm', allowPaths: [dir] });
  try {
    const cfg = sevensConfig(dir, {
      name: 'lora',
      seed: 1,
      backend: 'wasm',
      grpo: `${GRPO}\nrollout: { server: '${s.url}' }`,
    });
    // LoRA on the base's weights
    const { readFileSync, writeFileSync } = await import('node:fs');
    writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('max_seq_len: 32 }', `max_seq_len: 32, lora: { r: 2 }, init_checkpoint: '${ckpt}' }`));
    const r = await train({ configPath: cfg });
    assert.equal(r.status, 'completed');
    const rs = readRunInfo(r.runDir)!.rollout_server!;
    assert.deepEqual(
      rs.syncs.map((x) => x.step),
      [0, 1, 2, 3],
    );
    const folder = join(r.runDir, 'rollout', 'step-000003');
    assert.deepEqual(readdirSync(folder).sort(), ['adapter_config.json', 'adapter_model.safetensors']);
    const peft = JSON.parse(readFileSync(join(folder, 'adapter_config.json'), 'utf8'));
    assert.equal(peft.peft_type, 'LORA');
    assert.equal(peft.r, 2);
    assert.equal(peft.lora_alpha, 4);
    // the previous adapters were unloaded: loading another name now lists only the two
    const load = await fetch(`${s.url}/load_lora_adapter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lora_name: 'again', lora_path: folder }),
    });
    assert.deepEqual(Object.keys(((await load.json()) as { loaded_adapters: object }).loaded_adapters).sort(), ['again', 'step-3']);

    // the served adapter is the run's final one: the same seeds draw the same continuations with lora_path step-3
    const { config } = loadConfig(join(r.runDir, 'config.yaml'));
    const { session } = await openSession(config, { runDir: r.runDir, checkpoint: latestCheckpoint(r.runDir)! });
    const local = new LocalSampler(session.model, session.tokenizer);
    const req = { prefix: session.tokenizer.encodePrompt('q2:'), tail: [], seeds: [7, 8], maxNewTokens: 8 };
    const eos = session.tokenizer.eosIds ?? [session.tokenizer.eosId];
    const here = (await local.sample([req], { temperature: 1, topP: 1, eosIds: eos, stop: ['</answer>'] }))![0].map((c) => c.ids);
    const res = await fetch(`${s.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        input_ids: req.seeds.map(() => req.prefix),
        sampling_params: req.seeds.map((seed) => ({ max_new_tokens: 8, sampling_seed: seed, stop: ['</answer>'], stop_token_ids: eos })),
        return_logprob: true,
        lora_path: 'step-3',
      }),
    });
    const there = ((await res.json()) as { meta_info: { output_token_logprobs: [number, number][] } }[]).map((x) =>
      x.meta_info.output_token_logprobs.map(([, id]) => id),
    );
    assert.deepEqual(there, here);
    session.model.dispose();
    // an adapter that is not loaded is refused by name
    const bad = await fetch(`${s.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: req.prefix, lora_path: 'step-1' }),
    });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: { message: string } }).error.message, /lora_path: "step-1" is not a loaded adapter/);
  } finally {
    await s.close();
  }
});

test("mc_value with its rollouts on a server: the strategy's Monte Carlo continuations are sampled there too", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rollout-mc-'));
  const seedRun = (await train({ configPath: sevensConfig(dir, { name: 'start', seed: 4, backend: 'wasm', grpo: GRPO }) })).runDir;
  const s = await serve({ spec: seedRun, port: 0, backend: 'wasm', allowPaths: [dir] });
  // rows the server sampled, counted where its routes queue them
  let rows = 0;
  const orig = CreditLensServer.prototype.submit;
  CreditLensServer.prototype.submit = function (...args: Parameters<typeof orig>) {
    rows += args[0].seeds.length;
    return orig.apply(this, args);
  };
  try {
    const served = (strategy: string) =>
      sevensConfig(dir, {
        name: strategy,
        seed: 1,
        backend: 'wasm',
        grpo: `${GRPO}\ncredit: { strategy: ${strategy}, mc_value: { rollouts: 2 } }\nrollout: { server: '${s.url}' }`,
      });
    rows = 0;
    await train({ configPath: served('none') });
    const plain = rows;
    rows = 0;
    const r = await train({ configPath: served('mc_value') });
    assert.equal(r.status, 'completed');
    assert.ok(rows > plain, `mc_value's continuations went to the server: ${rows} rows against ${plain} without it`);
  } finally {
    CreditLensServer.prototype.submit = orig;
    await s.close();
  }
});
