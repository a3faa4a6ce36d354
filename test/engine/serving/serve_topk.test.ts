// SGLang scoring through `credit-lens serve` with top_logprobs_num above the vocabulary: every position lists the whole
// vocabulary once, most likely first, and its probabilities sum to 1 (read with the stride the scoring returns, not
// the one asked for, which read the next positions' entries into a list).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { serve } from '../../../src/engine/serving/serve';
import { sevensConfig } from '../fixtures';

test('top_logprobs_num above the vocabulary lists the vocabulary at each position, no more', { timeout: 120_000 }, async () => {
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
  } finally {
    await s.close();
  }
});
