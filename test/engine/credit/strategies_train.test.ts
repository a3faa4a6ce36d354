// Every strategy trains end to end, and the weights in the token table are exactly tokenWeights() of the same
// batch (the library function training calls), rebuilt here from the logged columns.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { tokenWeights } from '../../../src/engine/credit';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { RunController, silentReporter, train } from '../../../src/engine/train/train';
import { runSweep } from '../../../src/engine/sweep/run_sweep';
import { tinyConfig } from '../fixtures';
import type { Section } from '../../../src/engine/core/types';

const dir = mkdtempSync(join(tmpdir(), 'cl-strat-'));
const PARAMS: Record<string, string> = {
  outcome_conditional: 'think_discount: 0.25',
  inverse_logprob: 'epsilon: 0.1',
  entropy_weighted: 'entropy_temp: 0.5',
  entropy_mask: 'mask_percentile: 70',
  attention_credit: 'credit_scale: 2.0',
};

for (const [strategy, param] of Object.entries(PARAMS)) {
  test(`${strategy} trains end to end and logs the weights tokenWeights() gives`, async () => {
    const cfg = tinyConfig(dir, 'countdown', `credit: { strategy: ${strategy}, ${param} }\n`);
    const r = await train({ configPath: cfg, sets: ['sft.steps=30', 'sft.lr=5e-3'] });
    assert.equal(r.status, 'completed');
    for (const m of readMetrics(r.runDir)) for (const [k, v] of Object.entries(m)) if (typeof v === 'number') assert.ok(Number.isFinite(v), `${k} finite`);
    const tok = readTokenTable(join(r.runDir, 'tokens', 'step-000002.arrow'));
    // Rebuild the padded per-episode batch from the table's rows.
    const episodes = new Map<number, number[]>();
    for (let i = 0; i < tok.episode.length; i++) episodes.set(tok.episode[i], [...(episodes.get(tok.episode[i]) ?? []), i]);
    const rows = [...episodes.values()];
    const C = Math.max(...rows.map((r) => r.length));
    const padded = <T>(f: (i: number) => T, fill: T) => rows.map((idx) => [...idx.map(f), ...Array<T>(C - idx.length).fill(fill)]);
    const batch = {
      logprobs: padded((i) => tok.logprob[i], 0),
      entropies: padded((i) => tok.entropy[i], 0),
      sections: padded((i) => tok.section[i] as Section, 'other' as Section),
      mask: padded(() => 1, 0),
    };
    const logged = padded((i) => tok.weight[i], 0);
    if (strategy === 'attention_credit') {
      // The attention is not logged; check the contract's invariants instead: 1 on answer tokens, ≥ 0, mean-like scale.
      rows.forEach((idx) =>
        idx.forEach((i) => {
          assert.ok(tok.weight[i] >= 0);
          if (tok.section[i] === 'answer') assert.equal(tok.weight[i], 1);
        }),
      );
      return;
    }
    const [k, v] = param.split(': ');
    const expected = tokenWeights(strategy, { [k]: Number(v) }, batch);
    // float32 storage of ℓ and H → compare within float32 rounding
    expected.forEach((row, e) =>
      row.forEach((w, t) => {
        if (!batch.mask[e][t]) return;
        assert.ok(Math.abs(w - logged[e][t]) <= 1e-4 * Math.max(1, Math.abs(w)), `${strategy} e${e} t${t}: ${w} vs ${logged[e][t]}`);
      }),
    );
  });
}

test('a 2-run sweep trains both runs in turn', async () => {
  const cfg = tinyConfig(dir, 'arithmetic', 'sweep: { grid: { credit.strategy: [none, outcome_conditional] } }\n');
  const logs: string[] = [];
  const results = await runSweep(cfg, [], silentReporter, new RunController(), (m) => logs.push(m));
  assert.deepEqual(
    results.map((r) => r.status),
    ['completed', 'completed'],
  );
  assert.deepEqual(
    results.map((r) => r.name),
    ['tiny-arithmetic-none', 'tiny-arithmetic-outcome_conditional'],
  );
  assert.match(logs[0], /2 runs/);
});
