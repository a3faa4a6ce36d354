// logging.ref_logratio: the token table's ref_logratio column, log π(y_t) − log π_ref(y_t) against the run's starting
// policy. At GRPO step 1 the sampling policy is the reference, so every value is 0 to float rounding; at step 3 each
// value is recomputed here from the two policies the run kept (policies/step-1, the reference, since the run has no
// SFT; policies/step-3, the one that sampled step 3) by scoring the step's tokens under each. Keeping the reference for the column alone must not change training: with kl_beta 0 the loss never reads
// it, so a run with the column trains exactly as one without (the same losses, bit for bit). The probe scores the
// column beside the strategies (credit_scores.ts), as it scores realized credit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { loadConfig } from '../../../src/engine/config/config';
import { probePolicy } from '../../../src/engine/rundir/policies';
import { completionLogprobs, policyBatch } from '../../../src/engine/session/rollout';
import { openSession, useWeights } from '../../../src/engine/session/session';

/** log π(y_t) of every token of `step` under the policy the run kept at `policyStep`. */
async function scoreUnder(runDir: string, step: number, policyStep: number): Promise<number[]> {
  const { config } = loadConfig(join(runDir, 'config.yaml'));
  const { session: s } = await openSession(config, { runDir });
  await useWeights(s, probePolicy(runDir, policyStep).weights);
  const tok = readTokenTable(stepFile(runDir, 'tokens', step));
  const eps = readEpisodeTable(stepFile(runDir, 'episodes', step));
  const rows = Array.from(eps.episode, (e) => [...tok.episode.keys()].filter((k) => tok.episode[k] === e));
  const pb = policyBatch(
    eps.prompt.map((p) => s.tokenizer.encodePrompt(p)),
    rows.map((r) => r.map((k) => tok.token_id[k])),
    s.tokenizer.padId,
  );
  const lp = (await completionLogprobs(s.model, pb, config.grpo.temperature).logp.array()) as number[][];
  const out = new Array<number>(tok.episode.length);
  rows.forEach((r, i) => r.forEach((k, t) => (out[k] = lp[i][t])));
  pb.dispose();
  s.model.dispose();
  return out;
}

test('ref_logratio: 0 at step 1, moving after updates, null without the option; training is unchanged by it', { timeout: 180_000 }, async () => {
  const { train } = await import('../../../src/engine/train/train');
  const { sevensConfig } = await import('../fixtures');
  const dir = mkdtempSync(join(tmpdir(), 'cl-ref-logratio-'));
  const cfg = sevensConfig(dir, {
    name: 'ref',
    seed: 5,
    backend: 'wasm',
    grpo: '{ steps: 3, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, lr: 0.01 }',
  });
  const withIt = await train({ configPath: cfg, sets: ['logging.ref_logratio=true', 'logging.probe_every=1', 'name=ref-on'] });
  const without = await train({ configPath: cfg, sets: ['name=ref-off'] });
  const col = (runDir: string, step: number) => readTokenTable(stepFile(runDir, 'tokens', step)).ref_logratio;
  const first = col(withIt.runDir, 1)!;
  assert.ok(first.length > 0);
  assert.ok(
    first.every((v) => Math.abs(v) < 1e-5),
    `step 1 samples from the reference: ${Math.max(...Array.from(first, Math.abs))}`,
  );
  const third = col(withIt.runDir, 3)!;
  assert.ok(
    third.some((v) => Math.abs(v) > 1e-4),
    'two updates later the sampled tokens have moved',
  );
  const [now, ref] = [await scoreUnder(withIt.runDir, 3, 3), await scoreUnder(withIt.runDir, 3, 1)];
  const worst = Math.max(...Array.from(third, (v, k) => Math.abs(v - (now[k] - ref[k]))));
  assert.ok(worst < 1e-5, `the column against the two kept policies: off by ${worst}`);
  assert.equal(col(without.runDir, 3), null, 'without the option the column is null');
  const losses = (runDir: string) =>
    readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { phase: string; loss?: number })
      .filter((r) => r.phase === 'grpo')
      .map((r) => r.loss);
  assert.deepEqual(losses(withIt.runDir), losses(without.runDir));
});
