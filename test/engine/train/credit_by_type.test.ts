// The dashboard's credit row: each GRPO step's metrics row carries credit/filler_abs_c and credit/reasoning_abs_c, the
// mean |c| of its filler and reasoning tokens with c = A·ℓ. Checked against the step's token table as written (its
// advantage, logprob and token_type columns), and against the credit analysis run on that one step, which computes the
// same numbers from the same table by its own code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { computeTables } from '../../../src/engine/analysis/credit_tables';
import { creditByTokenType } from '../../../src/engine/train/grpo_step';
import { train } from '../../../src/engine/train/train';
import { sevensConfig } from '../fixtures';

test('creditByTokenType: mean |A·ℓ| per token type, in float32, a type without tokens left out (hand-computed)', () => {
  // episode 0, A = 0.5: filler ℓ −2 (|c| 1), reasoning ℓ −1 (0.5); episode 1, A = −0.25: filler ℓ −4 (1)
  const ep = (types: ('filler' | 'reasoning')[]) => ({ ids: types.map(() => 0), tokenTypes: types }) as never;
  const out = creditByTokenType([ep(['filler', 'reasoning']), ep(['filler'])], [0.5, -0.25], [[-2, -1], [-4]]);
  assert.deepEqual(out, { 'credit/filler_abs_c': 1, 'credit/reasoning_abs_c': 0.5 });
  assert.deepEqual(creditByTokenType([ep(['filler'])], [0.5], [[-2]]), { 'credit/filler_abs_c': 1 });
});

test("a run's metrics rows carry the step's filler and reasoning |c|, as its token table and the credit analysis give them", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-credit-type-'));
  const cfg = sevensConfig(dir, {
    name: 'ct',
    seed: 5,
    backend: 'wasm',
    grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, eval_every: 2, checkpoint_every: 2 }',
  });
  const r = await train({ configPath: cfg });
  assert.equal(r.status, 'completed');
  const rows = readFileSync(join(r.runDir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .filter((x) => x.phase === 'grpo');
  assert.equal(rows.length, 2);
  for (const row of rows) {
    const tok = readTokenTable(join(r.runDir, 'tokens', `step-${String(row.step).padStart(6, '0')}.arrow`));
    const sum = { filler: 0, reasoning: 0 };
    const n = { filler: 0, reasoning: 0 };
    for (let k = 0; k < tok.advantage.length; k++) {
      const type = tok.token_type[k] as 'filler' | 'reasoning';
      sum[type] += Math.abs(Math.fround(Math.fround(tok.advantage[k]) * Math.fround(tok.logprob[k])));
      n[type]++;
    }
    for (const type of ['filler', 'reasoning'] as const) {
      const logged = row[`credit/${type}_abs_c`];
      if (!n[type]) {
        assert.equal(logged, undefined);
        continue;
      }
      assert.ok(Math.abs(logged - sum[type] / n[type]) < 1e-9, `step ${row.step} ${type}: ${logged} vs ${sum[type] / n[type]}`);
      const analysed = computeTables(tok, null, 5).token_types[type].mean_abs_contribution!;
      assert.ok(Math.abs(logged - analysed) < 1e-6, `step ${row.step} ${type}: ${logged} vs the analysis's ${analysed}`);
    }
  }
});
