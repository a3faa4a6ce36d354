// The placebo of the run-level gate: the same config with gradient_accumulation_steps 1 against 2. The update is the same
// math (the loss, advantages and credit are the whole batch's either way), but the gradients are summed in a different
// float order, so from the first update on the two runs of one seed fork into different trajectories. A gate that reads
// those forks as a method effect calls noise a finding; the run-level gate must come out n.s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compareSeeds } from '../../../src/engine/analysis/compare';
import { evalFile, listEvalSteps, readEvalTable } from '../../../src/engine/rundir/eval_table';
import { latestCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { train } from '../../../src/engine/train/train';

test('placebo: gradient_accumulation_steps 1 against 2 over 4 seeds forks the trajectories and comes out n.s.', { timeout: 600_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-placebo-'));
  // A small arithmetic model that solves about 10 % after SFT, so that runs can differ on many of 128 instances.
  const cfg = join(dir, 'p.credit.yaml');
  writeFileSync(
    cfg,
    `name: p
seed: 1
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 64, n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 128, max_seq_len: 80 }
task: { name: arithmetic, numbers: [2, 3], max_number: 9, reward: grpo_zero, prompt: compact, train_size: 512, eval_size: 128 }
sft: { steps: 500, batch_size: 32, lr: 3.0e-3 }
grpo: { steps: 40, prompts_per_step: 8, group_size: 4, max_new_tokens: 40, lr: 2.0e-3, scale_rewards: none, eval_every: 40, checkpoint_every: 40 }
`,
  );
  // one SFT start shared by every run (the mitigation sweep's design), so that the seeds differ only in GRPO's sampling
  const warm = await train({ configPath: cfg, sets: ['grpo.steps=1', 'name=warm'] });
  const start = latestCheckpoint(warm.runDir)!;
  const sets = [`model.init_checkpoint=${start}`, 'sft.steps=0'];
  const runs: Record<1 | 2, string[]> = { 1: [], 2: [] };
  for (const seed of [1, 2, 3, 4])
    for (const ga of [1, 2] as const) {
      const r = await train({ configPath: cfg, sets: [...sets, `seed=${seed}`, `grpo.gradient_accumulation_steps=${ga}`, `name=placebo-ga${ga}-seed${seed}`] });
      assert.equal(r.status, 'completed');
      runs[ga].push(r.runDir);
    }
  // The two accumulations of one seed start from the same SFT and sample the same first batch, then fork: the step-1
  // losses agree to float rounding, and the final evals are not all the same.
  const loss1 = (d: string) =>
    readFileSync(join(d, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .find((m) => m.phase === 'grpo' && m.step === 1).loss as number;
  for (let k = 0; k < 4; k++) assert.ok(Math.abs(loss1(runs[1][k]) - loss1(runs[2][k])) < 1e-4, `seed ${k + 1}: step 1 is the same update`);
  const last = (d: string) => readEvalTable(evalFile(d, listEvalSteps(d).at(-1)!)).success.join('');
  assert.ok(
    runs[1].some((d, k) => last(d) !== last(runs[2][k])),
    'the trajectories fork (the float order of the summed gradients differs)',
  );
  const report = compareSeeds(runs[1], runs[2], { tokenTypes: false, resamples: 2000 });
  const row = report.rows[1];
  console.log(
    `placebo: ${report.rows.map((r) => `${r.group} ${(100 * r.eval_success.mean!).toFixed(1)} %`).join(' vs ')}; ` +
      `gate Δ ${(100 * row.run_test!.diff).toFixed(1)} pp, p ${row.run_test!.p.toPrecision(2)} (df ${row.run_test!.df.toFixed(1)}); ` +
      `conditional p ${row.conditional!.p.toPrecision(2)}`,
  );
  assert.ok(row.run_test, 'four runs a side: a run-level test');
  assert.equal(row.significant, false, `the placebo is n.s. (p_adj ${row.p_adjusted})`);
});
