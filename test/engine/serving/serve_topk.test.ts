// SGLang scoring through `credit-lens serve` with top_logprobs_num above the vocabulary: every position lists the whole
// vocabulary once, most likely first, and its probabilities sum to 1 (read with the stride the scoring returns, not
// the one asked for, which read the next positions' entries into a list). Then the bounds: a scoring request over
// positions × (K + 1) = 2,000,000 entries (the 955 KB request that ran serve out of heap) and a body over 64 MiB are
// refused with 413 before any work, the server answering on after them; a large answer inside the bound is streamed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { serve } from '../../../src/engine/serving/serve';
import { sevensConfig } from '../fixtures';

test(
  'top_logprobs_num above the vocabulary lists the vocabulary at each position, no more; scoring past the bound is refused, inside it streamed',
  { timeout: 300_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-serve-topk-'));
    const cfg = sevensConfig(dir, {
      name: 'topk',
      seed: 3,
      backend: 'wasm',
      grpo: '{ steps: 1, prompts_per_step: 2, group_size: 2, max_new_tokens: 4, eval_every: 1, checkpoint_every: 1 }',
    });
    const runDir = (await train({ configPath: cfg })).runDir;
    const s = await serve({ spec: runDir, port: 0, backend: 'wasm' });
    try {
      const r = await fetch(`${s.url}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          input_ids: [3, 4, 5, 6, 7, 8],
          sampling_params: { max_new_tokens: 0 },
          return_logprob: true,
          logprob_start_len: 1,
          top_logprobs_num: 100,
        }),
      });
      assert.equal(r.status, 200);
      const body = (await r.json()) as {
        meta_info: { input_top_logprobs: ([number, number, null][] | null)[]; input_token_logprobs: [number | null, number, null][] };
      };
      const lists = body.meta_info.input_top_logprobs.slice(1) as [number, number, null][][];
      assert.equal(lists.length, 4, 'positions 2–5');
      const V = lists[0].length;
      assert.ok(V < 100, `the vocabulary (${V}) is below the 100 asked for`);
      lists.forEach((list, t) => {
        assert.equal(list.length, V, `position ${t}: the whole vocabulary`);
        assert.equal(new Set(list.map((e) => e[1])).size, V, `position ${t}: each id once`);
        for (let j = 1; j < V; j++) assert.ok(list[j - 1][0] >= list[j][0], `position ${t}: most likely first`);
        const mass = list.reduce((a, e) => a + Math.exp(e[0]), 0);
        assert.ok(Math.abs(mass - 1) < 1e-4, `position ${t}: probabilities sum to ${mass}`);
        // the given token's log-prob is its entry in the list
        const [lp, id] = body.meta_info.input_token_logprobs[t + 1];
        assert.ok(Math.abs(list.find((e) => e[1] === id)![0] - (lp as number)) < 1e-5);
      });

      // 8,000 rows of 24 tokens, top 100: 192,000 positions × (V + 1) entries, over the bound
      const big = JSON.stringify({
        input_ids: Array.from({ length: 8000 }, (_, i) => Array.from({ length: 24 }, (_, t) => 3 + ((i + t) % (V - 3)))),
        sampling_params: { max_new_tokens: 0 },
        return_logprob: true,
        logprob_start_len: 0,
        top_logprobs_num: 100,
      });
      const t0 = performance.now();
      const refused = await post(s.url, big);
      assert.equal(refused.status, 413);
      assert.match(refused.text, /scores 192000 positions with top_logprobs_num \d+: \d+ entries, over the 2000000 one request may ask for; send fewer rows/);
      assert.ok(performance.now() - t0 < 5000, 'refused before any scoring');
      t.diagnostic(`${(big.length / 1024).toFixed(0)} KB scoring request refused with 413 in ${Math.round(performance.now() - t0)} ms`);
      const huge = await post(s.url, `{"input_ids": [${'1,'.repeat(33 * 2 ** 20)}1]}`);
      assert.equal(huge.status, 413);
      assert.match(huge.text, /the request body is over 64 MiB/);

      // inside the bound: 600 rows, streamed as it is made (chunked, never one string), each row as a request of its own
      const rows = Array.from({ length: 600 }, (_, i) => Array.from({ length: 24 }, (_, t) => 3 + ((i * 7 + t) % (V - 3))));
      const scoreBody = (ids: number[][] | number[]) =>
        JSON.stringify({ input_ids: ids, sampling_params: { max_new_tokens: 0 }, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 5 });
      const streamed = await post(s.url, scoreBody(rows));
      assert.equal(streamed.status, 200);
      assert.equal(streamed.headers.get('transfer-encoding'), 'chunked');
      const all = JSON.parse(streamed.text) as { meta_info: { input_token_logprobs: [number | null, number][]; input_top_logprobs: unknown[] } }[];
      assert.equal(all.length, 600);
      for (const i of [0, 299, 599]) {
        const one = JSON.parse((await post(s.url, scoreBody(rows[i]))).text) as (typeof all)[number];
        assert.deepEqual(all[i].meta_info.input_token_logprobs, one.meta_info.input_token_logprobs, `row ${i} as a request of its own`);
        assert.deepEqual(all[i].meta_info.input_top_logprobs, one.meta_info.input_top_logprobs);
      }
      assert.equal((await fetch(`${s.url}/model_info`)).status, 200, 'the server answers on');

      // vLLM's prompt_logprobs: 0, the given token alone with its rank, for two prompts of two lengths (the target's own
      // logit was gathered with batchDims 1, which the wasm backend read out of its heap with more than one row)
      const k0 = await fetch(`${s.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          prompt: [
            [3, 4, 5, 6],
            [3, 4],
          ],
          max_tokens: 0,
          echo: true,
          prompt_logprobs: 0,
        }),
      });
      assert.equal(k0.status, 200, await k0.clone().text());
      const choices = ((await k0.json()) as { choices: { prompt_logprobs: (Record<string, { logprob: number; rank: number }> | null)[] }[] }).choices;
      assert.deepEqual(
        choices.map((c) => c.prompt_logprobs.length),
        [4, 2],
      );
      for (const { prompt_logprobs: entries } of choices) {
        assert.equal(entries[0], null);
        entries.slice(1).forEach((e, t) => {
          assert.deepEqual(Object.keys(e!), [String(4 + t)], 'the given token only');
          assert.ok(e![String(4 + t)].rank >= 1 && e![String(4 + t)].rank <= V);
        });
      }
    } finally {
      await s.close();
    }
  },
);

async function post(url: string, body: string): Promise<{ status: number; text: string; headers: Headers }> {
  const r = await fetch(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: r.status, text: await r.text(), headers: r.headers };
}
