// `credit-lens import --score-server`: veRL dumps scored through `credit-lens serve` of a Qwen-shaped HF folder, over
// real HTTP with each API, against an independent float64 forward (hf_reference.ts): the log-prob of every token, and
// the top-20 entropy estimate (20 tokens plus one bucket for the rest) recomputed from the whole logits. The estimate is
// written as entropy_topk, never as entropy; run.json says where the tokens were scored. Then what a server should
// never send: null and positive log-probs (skipped with the reason, as a file's are) and a prime-rl export's scoring.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ServerSampler } from '../../../src/engine/serving/client';
import { importRollouts } from '../../../src/engine/import/import';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { readRunInfo, stepFile } from '../../../src/engine/rundir/rundir';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { isUserError } from '../../../src/engine/core/errors';
import { serve } from '../../../src/engine/serving/serve';
import { qwenBase, randomWeights, referenceLogits, writeCheckpoint } from '../model/hf_reference';

const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
const quiet = { log: () => {} };

/** A Qwen-shaped HF folder of random weights (seeded) and a veRL dump of four completions of two prompts, in a new folder. */
function verlDump(prefix: string, seed: number) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const hf = join(dir, 'model');
  const cfg = { ...qwenBase, num_hidden_layers: 1 };
  const w = randomWeights(cfg, seed);
  writeCheckpoint(hf, cfg, w, 'F32', false);
  const src = join(dir, 'rollouts');
  mkdirSync(src);
  writeFileSync(
    join(src, '1.jsonl'),
    jsonl([
      { input: 'Using 3, 5: make 8.', output: ' 3 + 5 = 8', score: 1, step: 1 },
      { input: 'Using 3, 5: make 8.', output: ' 5 - 3', score: 0, step: 1 },
      { input: 'Using 2, 2: make 4.', output: ' 2 * 2', score: 0.5, step: 1 },
      { input: 'Using 2, 2: make 4.', output: ' 2 + 2 = 4', score: 1, step: 1 },
    ]),
  );
  return { dir, hf, cfg, w, src };
}

test('import scored on a server: log-probs and top-K entropies against a float64 forward, with SGLang and vLLM', async () => {
  const { dir, hf, cfg, w, src } = verlDump('cl-import-server-', 11);
  const s = await serve({ spec: hf, port: 0, backend: 'cpu' });
  try {
    const tok = HfTokenizer.fromDir(hf, { useChatTemplate: false });
    for (const api of ['sglang', 'vllm'] as const) {
      const r = await importRollouts({
        source: src,
        scoreServer: { url: s.url, api },
        tokenizer: hf,
        topK: 20,
        out: join(dir, 'runs'),
        name: api,
        sets: ['backend=cpu'],
        ...quiet,
      });
      const info = readRunInfo(r.runDir)!;
      assert.equal(info.status, 'completed');
      assert.deepEqual(info.imported!.scored_by, { api, url: s.url, model: hf, weight_version: api === 'sglang' ? 'default' : null, top_k: 20 });
      assert.equal(info.imported!.tokenizer, hf);
      const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', 1));
      const tt = readTokenTable(stepFile(r.runDir, 'tokens', 1));
      const topk = tt.extra?.entropy_topk;
      assert.ok(topk, 'entropy_topk column');
      assert.ok(tt.extra?.grad_norm_topk, 'grad_norm_topk column');
      let checked = 0;
      for (let e = 0; e < 4; e++) {
        const comp = tok.encode(ep.completion[e]);
        const pIds = tok.encodePrompt(ep.prompt[e]);
        const logits = referenceLogits(cfg, w, [...pIds, ...comp]);
        const rows = [...tt.episode.keys()].filter((i) => tt.episode[i] === e);
        assert.equal(rows.length, comp.length);
        rows.forEach((row, t) => {
          const z = logits[pIds.length - 1 + t];
          const m = z.reduce((a, v) => Math.max(a, v), -Infinity);
          const lse = m + Math.log(z.reduce((a, v) => a + Math.exp(v - m), 0));
          assert.ok(Math.abs(tt.logprob[row] - (z[comp[t]] - lse)) < 2e-4, `${api}: ℓ ${tt.logprob[row]} vs ${z[comp[t]] - lse}`);
          // the top 20 in float64, plus one bucket for the rest
          const top = [...z].sort((a, b) => b - a).slice(0, 20);
          const ps = top.map((v) => Math.exp(v - lse));
          const rest = Math.max(0, 1 - ps.reduce((a, p) => a + p, 0));
          const est = -ps.reduce((a, p) => a + p * Math.log(p), 0) - (rest > 0 ? rest * Math.log(rest) : 0);
          const exact = -z.reduce((a, v) => a + Math.exp(v - lse) * (v - lse), 0);
          assert.ok(Math.abs((topk![row] as number) - est) < 2e-4, `${api}: top-20 entropy ${topk![row]} vs ${est}`);
          assert.ok((topk![row] as number) <= exact + 1e-4, 'a lower bound of the whole entropy');
          assert.ok(Number.isNaN(tt.entropy[row]), 'the exact name stays empty');
          checked++;
        });
      }
      assert.ok(checked >= 12);
    }

    // refusals before anything is written: no tokenizer, a temperature other than 1, a strategy that needs attention
    await assert.rejects(
      importRollouts({ source: src, scoreServer: { url: s.url }, out: join(dir, 'runs'), ...quiet }),
      (e: unknown) => isUserError(e) && /pass --tokenizer/.test(e.message),
    );
    await assert.rejects(
      importRollouts({ source: src, scoreServer: { url: s.url }, tokenizer: hf, out: join(dir, 'runs'), sets: ['grpo.temperature=0.7'], ...quiet }),
      (e: unknown) => isUserError(e) && /grpo.temperature is 0.7; a server's log-probs are taken at temperature 1/.test(e.message),
    );
    await assert.rejects(
      importRollouts({ source: src, model: hf, scoreServer: { url: s.url }, tokenizer: hf, out: join(dir, 'runs'), ...quiet }),
      (e: unknown) => isUserError(e) && /--model and --score-server/.test(e.message),
    );
  } finally {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * A stand-in between the client and `credit-lens serve`, because no real server sends these on demand: it rewrites one
 * log-prob of a scored completion to null (what SGLang's JSON encoder writes for -inf and NaN) and one to +0.5 (p > 1),
 * and (once `sampled` is set) one sampled token's log-prob to +0.7. Everything else is serve's own answer.
 */
async function corrupting(target: string): Promise<{ url: string; sampled: boolean; close(): Promise<void> }> {
  const self = { url: '', sampled: false, close: async () => {} };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const r = await fetch(target + req.url, {
      method: req.method,
      headers: req.method === 'POST' ? { 'content-type': 'application/json' } : {},
      body: req.method === 'POST' ? Buffer.concat(chunks) : undefined,
    });
    let body = (await r.json()) as unknown;
    const results = Array.isArray(body) ? body : [body];
    for (const [k, x] of results.entries()) {
      const meta = (x as { meta_info?: Record<string, unknown[][]> }).meta_info;
      if (!meta) continue;
      const lp = meta.input_token_logprobs;
      if (lp?.length > 2 && k === 0) lp[1][0] = null;
      if (lp?.length > 2 && k === 2) lp[2][0] = 0.5;
      if (self.sampled && meta.output_token_logprobs?.length) meta.output_token_logprobs[0][0] = 0.7;
    }
    body = Array.isArray(body) ? results : results[0];
    res.writeHead(r.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  self.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  self.close = () => new Promise((ok) => server.close(() => ok()));
  return self;
}

test('a server answering null or positive log-probs: the import skips those completions with the reason, the probe client refuses the answer', async () => {
  const { dir, hf, src } = verlDump('cl-import-impossible-', 12);
  const s = await serve({ spec: hf, port: 0, backend: 'cpu' });
  const proxy = await corrupting(s.url);
  try {
    const r = await importRollouts({
      source: src,
      scoreServer: { url: proxy.url, api: 'sglang' },
      tokenizer: hf,
      out: join(dir, 'runs'),
      sets: ['backend=cpu'],
      ...quiet,
    });
    assert.equal(r.records, 2, 'two completions imported');
    assert.equal(r.skipped, 2);
    assert.deepEqual(
      r.problems.map((p) => [p.line, p.reason.replace(/token \d+/, 'token T')]),
      [
        [1, 'the server gave no finite log-prob for token T at completion position 0 (null or NaN)'],
        [3, "the server's log-prob of token T at completion position 1 is +0.500, above 0 (a probability over 1)"],
      ],
    );
    assert.equal(readRunInfo(r.runDir)!.imported!.skipped, 2);
    const tt = readTokenTable(stepFile(r.runDir, 'tokens', 1));
    assert.ok(
      [...tt.logprob].every((l) => Number.isFinite(l) && l <= 0),
      'no impossible value written',
    );

    const tok = HfTokenizer.fromDir(hf, { useChatTemplate: false });
    proxy.sampled = true;
    const client = await ServerSampler.connect({ url: proxy.url, api: 'sglang', tries: 1 }, tok).catch((e: Error) => e);
    assert.ok(client instanceof Error && /reported log-prob \+0\.700 for sampled token \d+, above 0/.test(client.message), String(client));

    // a prime-rl export carries its own log-probs: scoring it on a server is refused, not ignored
    const prime = join(dir, 'prime', 'step_1');
    mkdirSync(prime, { recursive: true });
    writeFileSync(
      join(prime, 'rank_0.jsonl'),
      jsonl([{ token_ids: [1, 2, 3], loss_mask: [false, true, true], trainer_logprobs: [0, -0.1, -0.2], advantages: [0, 1, 1] }]),
    );
    await assert.rejects(
      importRollouts({ source: join(dir, 'prime'), scoreServer: { url: s.url }, tokenizer: hf, out: join(dir, 'runs'), ...quiet }),
      (e: unknown) => isUserError(e) && /--score-server: prime exports carry the trainer's own log-prob of every token/.test(e.message),
    );
  } finally {
    await proxy.close();
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
