// `credit-lens import --score-server`: veRL dumps scored through `credit-lens serve` of a Qwen-shaped HF folder, over
// real HTTP with each API, against an independent float64 forward (hf_reference.ts): the log-prob of every token, and
// the top-20 entropy estimate (20 tokens plus one bucket for the rest) recomputed from the whole logits. The estimate is
// written as entropy_topk, never as entropy; run.json says where the tokens were scored.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importRollouts } from '../../../src/engine/import/import';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { readRunInfo, stepFile } from '../../../src/engine/rundir/rundir';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { isUserError } from '../../../src/engine/core/errors';
import { serve } from '../../../src/engine/serving/serve';
import { qwenBase, randomWeights, referenceLogits, writeCheckpoint } from '../model/hf_reference';

const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
const quiet = { log: () => {} };

test('import scored on a server: log-probs and top-K entropies against a float64 forward, with SGLang and vLLM', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-import-server-'));
  const hf = join(dir, 'model');
  const cfg = { ...qwenBase, num_hidden_layers: 1 };
  const w = randomWeights(cfg, 11);
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
