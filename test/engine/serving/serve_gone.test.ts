// A client that goes away takes its work with it, as SGLang and vLLM abort a request whose connection closes: a stopped
// probe must not leave the next client waiting behind rows nobody will read. Timed against the same batch run whole.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '../../../src/engine/serving/serve';
import { qwenBase, randomWeights, writeCheckpoint } from '../model/hf_reference';

const post = (url: string, body: unknown, signal?: AbortSignal) =>
  fetch(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });

// 24 rows of 40 new tokens through a 151,936-token head: seconds of work on this machine
const big = {
  input_ids: Array.from({ length: 24 }, (_, i) => [1, 2, 3 + i]),
  sampling_params: { max_new_tokens: 40, temperature: 1, ignore_eos: true },
};
const small = { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 2, temperature: 0 } };

test(
  'a client that closes its connection: its queued and running rows are dropped, and the next client is answered at once',
  { timeout: 300_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-serve-gone-'));
    const cfg = { ...qwenBase, num_hidden_layers: 1 };
    writeCheckpoint(join(dir, 'model'), cfg, randomWeights(cfg, 5), 'F32', false);
    const s = await serve({ spec: join(dir, 'model'), port: 0, backend: 'wasm' });
    try {
      // the batch run whole, for the time it takes
      let t0 = performance.now();
      assert.equal((await post(s.url, big)).status, 200);
      const whole = performance.now() - t0;

      // the same batch, twice (one running, one queued behind it), both abandoned 300 ms in
      const stop = new AbortController();
      const gone = [post(s.url, big, stop.signal), post(s.url, big, stop.signal)].map((p) => p.catch((e: Error) => e));
      await new Promise((r) => setTimeout(r, 300));
      stop.abort();
      await Promise.all(gone);
      t0 = performance.now();
      const next = await post(s.url, small);
      const waited = performance.now() - t0;
      assert.equal(next.status, 200);
      t.diagnostic(`one batch whole: ${Math.round(whole)} ms; the next client after two abandoned batches: ${Math.round(waited)} ms`);
      assert.ok(waited < whole / 2, `the next client waited ${Math.round(waited)} ms; one batch takes ${Math.round(whole)} ms`);
      // the drops are counted once each client's work has unwound
      for (let k = 0; k < 50 && s.abandoned() < 2; k++) await new Promise((r) => setTimeout(r, 100));
      assert.equal(s.abandoned(), 2);
    } finally {
      await s.close();
    }
  },
);
