// `credit-lens serve` as a client of either engine sees it, over real HTTP: the routes serving.md#sglang and serving.md#vllm list, with their
// response shapes, a weight update between batches, concurrent requests sampled together, and bad requests answered
// 400 with the field named, in each route's error shape, never a crash. Then the command itself, as a process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { serve } from '../../../src/engine/serving/serve';
import { ServerSampler } from '../../../src/engine/serving/client';
import { LocalSampler } from '../../../src/engine/model/sampling';
import { loadConfig } from '../../../src/engine/config/config';
import { openSession, useWeights } from '../../../src/engine/session/session';
import { latestCheckpoint, loadCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { writeSafetensors } from '../../../src/engine/model/safetensors';
import { sevensConfig } from '../fixtures';

async function trainedRun(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'cl-serve-api-'));
  const cfg = sevensConfig(dir, {
    name: 'api',
    seed: 2,
    backend: 'wasm',
    grpo: '{ steps: 2, prompts_per_step: 4, group_size: 4, max_new_tokens: 8, eval_every: 2, checkpoint_every: 1 }',
  });
  return (await train({ configPath: cfg })).runDir;
}

const post = async (url: string, body: unknown) => {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> & Record<number, unknown> };
};
const get = async (url: string) => {
  const r = await fetch(url);
  const text = await r.text();
  return { status: r.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
};

test('serve: SGLang and vLLM routes, seeded draws, a weight update, and 400s that name the field', async () => {
  const runDir = await trainedRun();
  const s = await serve({ spec: runDir, port: 0, backend: 'wasm' });
  try {
    assert.match(s.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'listens on 127.0.0.1 by default');
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
    const info = await get(`${s.url}/model_info`);
    assert.equal(info.status, 200);
    assert.equal(info.body!.is_generation, true);
    assert.match(String(info.body!.model_path), /checkpoints\/step-000002$/, 'a run folder serves its newest checkpoint');
    assert.deepEqual((await get(`${s.url}/get_model_info`)).body, info.body, 'the older route answers the same');
    const models = await get(`${s.url}/v1/models`);
    const name = (models.body!.data as { id: string; max_model_len: number }[])[0];
    assert.equal(name.max_model_len, 32);

    // SGLang: a batch of rows with seeds; the same seed draws the same continuation, in any batch
    const prompt = [1, 2, 3];
    const gen = (seeds: number[], extra: Record<string, unknown> = {}) =>
      post(`${s.url}/generate`, {
        input_ids: seeds.map(() => prompt),
        sampling_params: seeds.map((seed) => ({ max_new_tokens: 6, temperature: 1, sampling_seed: seed, ...extra })),
        return_logprob: true,
      });
    const a = await gen([11, 12, 13]);
    assert.equal(a.status, 200);
    const rows = a.body as unknown as {
      text: string;
      meta_info: { finish_reason: { type: string }; output_token_logprobs: [number, number, null][]; completion_tokens: number };
    }[];
    assert.equal(rows.length, 3);
    for (const r of rows) {
      assert.ok(['length', 'stop'].includes(r.meta_info.finish_reason.type));
      assert.equal(r.meta_info.output_token_logprobs.length, r.meta_info.completion_tokens);
      assert.ok(r.meta_info.output_token_logprobs.every(([lp, id]) => lp <= 0 && Number.isInteger(id)));
    }
    const b = await gen([13]);
    // a batch of one is still a list; a bare input_ids list answers one object
    const single = (b.body as unknown as typeof rows)[0];
    const bare = await post(`${s.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 6, sampling_seed: 13 }, return_logprob: true });
    assert.deepEqual((bare.body as unknown as (typeof rows)[number]).meta_info.output_token_logprobs, rows[2].meta_info.output_token_logprobs);
    assert.deepEqual(single.meta_info.output_token_logprobs, rows[2].meta_info.output_token_logprobs, 'seed 13 alone draws what it drew in a batch of three');

    // vLLM: n children with seed + i, token ids back; raw log-probs (before temperature)
    const v = await post(`${s.url}/v1/completions`, {
      model: name.id,
      prompt,
      n: 2,
      max_tokens: 6,
      temperature: 0.7,
      seed: 12,
      logprobs: 0,
      return_token_ids: true,
    });
    assert.equal(v.status, 200);
    assert.equal(v.body.object, 'text_completion');
    const choices = v.body.choices as { index: number; token_ids: number[]; prompt_token_ids: number[]; logprobs: { token_logprobs: number[] } }[];
    assert.deepEqual(
      choices.map((c) => c.index),
      [0, 1],
    );
    assert.deepEqual(choices[0].prompt_token_ids, prompt);
    const v13 = await post(`${s.url}/v1/completions`, { model: name.id, prompt, n: 1, max_tokens: 6, temperature: 0.7, seed: 13, return_token_ids: true });
    assert.deepEqual((v13.body.choices as { token_ids: number[] }[])[0].token_ids, choices[1].token_ids, 'child 1 of seed 12 is seed 13');
    const sgl07 = await gen([12], { temperature: 0.7 });
    const sglLp = (sgl07.body as unknown as typeof rows)[0].meta_info.output_token_logprobs;
    assert.deepEqual(
      sglLp.map(([, id]) => id),
      choices[0].token_ids,
      'the same seed draws the same tokens on either route',
    );
    assert.notDeepEqual(
      sglLp.map(([lp]) => lp),
      choices[0].logprobs.token_logprobs,
      'SGLang reports log-probs after temperature, vLLM before',
    );

    // scoring: the same log-probs and top 5 through either API as in this process (LocalSampler.score)
    {
      const { config } = loadConfig(join(runDir, 'config.yaml'));
      const { session } = await openSession(config, { runDir });
      await useWeights(session, loadCheckpoint(latestCheckpoint(runDir)!).model);
      const items = [
        { prefix: [1, 2, 3], ids: [4, 5, 6, 7] },
        { prefix: [2], ids: [3] },
      ];
      const here = (await new LocalSampler(session.model, session.tokenizer).score(items, 5))!;
      for (const api of ['sglang', 'vllm'] as const) {
        const client = await ServerSampler.connect({ url: s.url, api }, session.tokenizer);
        const there = (await client.score(items, 5))!;
        await client.close();
        there.forEach((x, i) => {
          x.logprobs.forEach((l, t) => assert.ok(Math.abs(l - here[i].logprobs[t]) < 1e-5, `${api}: ${l} vs ${here[i].logprobs[t]}`));
          x.top.forEach((tp, t) => assert.deepEqual(tp.ids, here[i].top[t].ids, `${api}: top 5 at ${t}`));
        });
      }
      session.model.dispose();
    }

    // concurrent requests in one tick are answered, each with its own rows
    const many = await Promise.all([21, 22, 23, 24].map((seed) => gen([seed])));
    assert.ok(many.every((r) => r.status === 200));

    // bad requests: 400 in the route's shape, naming the field; the server keeps serving
    const bad = await post(`${s.url}/generate`, { input_ids: [[1, 2, 999]], sampling_params: { max_new_tokens: 4 } });
    assert.equal(bad.status, 400);
    assert.match((bad.body.error as { message: string }).message, /input_ids: token id 999 is outside the vocabulary/);
    const long = await post(`${s.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 400 } });
    assert.equal(long.status, 400);
    assert.match((long.body.error as { message: string }).message, /maximum context length is 32/);
    const temp = await post(`${s.url}/generate`, { input_ids: prompt, sampling_params: { temperature: -1 } });
    assert.match((temp.body.error as { message: string }).message, /temperature must be a number ≥ 0, got -1/);
    const notJson = await post(`${s.url}/generate`, '{"input_ids": [1, 2');
    assert.equal(notJson.status, 400);
    assert.match((notJson.body.error as { message: string }).message, /not JSON/);
    const wrongModel = await post(`${s.url}/v1/completions`, { model: 'gpt-4', prompt, max_tokens: 2 });
    assert.equal(wrongModel.status, 404);
    assert.deepEqual(Object.keys(wrongModel.body.error as object).sort(), ['code', 'message', 'param', 'type']);
    assert.equal((wrongModel.body.error as { param: string }).param, 'model');
    const badN = await post(`${s.url}/v1/completions`, { prompt, n: 0 });
    assert.equal(badN.status, 400);
    assert.equal((badN.body.error as { param: string }).param, 'n');
    assert.equal((await fetch(`${s.url}/nope`)).status, 404);

    // a weight update between batches: the checkpoint of step 1 now samples, under its version
    const ck1 = join(runDir, 'checkpoints', 'step-000001');
    const before = ((await gen([5])).body as unknown as typeof rows)[0];
    const up = await post(`${s.url}/update_weights_from_disk`, { model_path: ck1, weight_version: 'step-1' });
    assert.deepEqual(up.body, { success: true, message: `loaded ${join(ck1, 'model.safetensors')}`, num_paused_requests: 0 });
    assert.equal((await get(`${s.url}/model_info`)).body!.weight_version, 'step-1');
    const after = ((await gen([5])).body as unknown as typeof rows)[0];
    assert.notDeepEqual(after.meta_info.output_token_logprobs, before.meta_info.output_token_logprobs, 'other weights, other log-probs');
    const missing = await post(`${s.url}/update_weights_from_disk`, { model_path: join(runDir, 'nowhere') });
    assert.equal(missing.body.success, false);
    // weights of another model: refused, and the model loaded before keeps serving
    const other = join(runDir, 'other.safetensors');
    writeSafetensors(other, { 'model.embed_tokens.weight': { shape: [3, 2], data: new Float32Array(6) } });
    const wrong = await post(`${s.url}/update_weights_from_disk`, { model_path: other, weight_version: 'bad' });
    assert.equal(wrong.body.success, false);
    assert.equal((await get(`${s.url}/model_info`)).body!.weight_version, 'step-1');
    assert.equal((await gen([5])).status, 200);
    assert.equal((await fetch(`${s.url}/flush_cache`, { method: 'POST' })).status, 200);
  } finally {
    await s.close();
  }
});

test('the serve command: prints its URL, serves, and stops on SIGTERM', async () => {
  const runDir = await trainedRun();
  assert.ok(readdirSync(join(runDir, 'checkpoints')).length > 0);
  // the built CLI, as a user runs it (npm run test:unit builds it first)
  const cli = resolve(__dirname, '../../../dist/engine/cli.js');
  const p = spawn(process.execPath, [cli, 'serve', runDir, '--port', '0', '--backend', 'wasm'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (c) => (err += c));
  const url = await new Promise<string>((ok, bad) => {
    let out = '';
    p.stdout.on('data', (c) => {
      out += c;
      const m = /^(http:\/\/\S+)\n/.exec(out);
      if (m) ok(m[1]);
    });
    p.on('exit', (code) => bad(new Error(`serve exited ${code}: ${err}`)));
  });
  const r = await post(`${url}/generate`, { input_ids: [1, 2], sampling_params: { max_new_tokens: 3, sampling_seed: 1 } });
  assert.equal(r.status, 200);
  const code = await new Promise<number | null>((ok) => {
    p.on('exit', ok);
    p.kill('SIGTERM');
  });
  assert.equal(code, 0, err);
  assert.match(err, /serving .* at http:\/\/127\.0\.0\.1:\d+/);
});
