// Realized credit (logging.realized_credit): log π_new(y_t) − log π_old(y_t) after the step's update, per token.
// Checked two ways that need no trust in the column's own code: an update with lr 0 changes nothing, so every value is
// exactly 0; and a small update's value is, to first order, the token's log-prob gradient at the sampling policy dotted
// with the parameters' actual change, ∇θ log π(y_t)·(θ_new − θ_old), computed here by TensorFlow.js's autodiff on the
// two policies the run kept (policies/step-1 and checkpoint 1). The remainder is second order in the step: halving the
// learning rate must shrink it about four times (Taylor), which the test asserts (at most 0.4×, the 0.25 of pure
// second order with room for third-order terms), and at lr 1e-3 it must be under 10 % of the prediction.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { loadConfig } from '../../../src/engine/config/config';
import { checkpointDir, loadCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { probePolicy } from '../../../src/engine/rundir/policies';
import { completionLogprobs, policyBatch } from '../../../src/engine/session/rollout';
import { openSession, useWeights } from '../../../src/engine/session/session';
import { train } from '../../../src/engine/train/train';
import { sevensConfig } from '../fixtures';

async function run(lr: number) {
  const dir = mkdtempSync(join(tmpdir(), 'cl-realized-'));
  const cfg = sevensConfig(dir, {
    name: 'rz',
    // a seed whose first step has a group with a 7 and one without (advantages of both signs)
    seed: 7,
    backend: 'wasm',
    grpo: `{ steps: 1, prompts_per_step: 2, group_size: 2, max_new_tokens: 4, lr: ${lr}, eval_every: 1, checkpoint_every: 1 }`,
  });
  const r = await train({ configPath: cfg, sets: ['logging.realized_credit=true', 'logging.probe_every=1'] });
  assert.equal(r.status, 'completed');
  return r.runDir;
}

/** ∇θ log π(y_t)·Δθ for every token of step 1, at the policy that sampled it. */
async function firstOrder(runDir: string): Promise<{ realized: number[]; predicted: number[]; advantage: number[] }> {
  const { config } = loadConfig(join(runDir, 'config.yaml'));
  const { session: s } = await openSession(config, { runDir });
  const before = probePolicy(runDir, 1).weights;
  const after = loadCheckpoint(checkpointDir(runDir, 1)).model;
  // the parameters as the model holds them (its own layout), after the update and before
  await useWeights(s, after);
  const newValues = new Map([...s.model.trainable].map(([name, v]) => [name, v.clone()]));
  await useWeights(s, before);
  const tok = readTokenTable(join(runDir, 'tokens', 'step-000001.arrow'));
  const eps = readEpisodeTable(join(runDir, 'episodes', 'step-000001.arrow'));
  const rows = Array.from(eps.episode, (e) => [...tok.episode.keys()].filter((k) => tok.episode[k] === e));
  const pb = policyBatch(
    eps.prompt.map((p) => s.tokenizer.encodePrompt(p)),
    rows.map((r) => r.map((k) => tok.token_id[k])),
    s.tokenizer.padId,
  );
  // one entry per variable (a tied embedding is one variable under two names)
  const seen = new Set<string>();
  const vars = [...s.model.trainable.entries()].filter(([, v]) => !seen.has(v.name) && !!seen.add(v.name));
  const delta = new Map(vars.map(([name, v]) => [name, tf.sub(newValues.get(name)!, v)]));
  const out = { realized: [] as number[], predicted: [] as number[], advantage: [] as number[] };
  for (let i = 0; i < rows.length; i++)
    for (let t = 0; t < rows[i].length; t++) {
      const { grads } = tf.variableGrads(
        () => completionLogprobs(s.model, pb, config.grpo.temperature).logp.slice([i, t], [1, 1]).sum() as tf.Scalar,
        vars.map(([, v]) => v),
      );
      let dot = 0;
      for (const [name, v] of vars) dot += (await tf.sum(tf.mul(grads[v.name], delta.get(name)!)).data())[0];
      tf.dispose(Object.values(grads));
      out.realized.push(tok.realized![rows[i][t]]);
      out.predicted.push(dot);
      out.advantage.push(eps.advantage[i]);
    }
  pb.dispose();
  s.model.dispose();
  return out;
}

test('realized credit: exactly 0 under lr 0; to first order ∇log π·Δθ, with a second-order remainder', { timeout: 300_000 }, async () => {
  const zero = readTokenTable(join(await run(0), 'tokens', 'step-000001.arrow'));
  assert.ok(zero.realized && zero.realized.length > 0);
  assert.ok(
    zero.realized.every((v) => v === 0),
    'an update that changes nothing moves no token',
  );

  const big = await firstOrder(await run(1e-3));
  const small = await firstOrder(await run(5e-4));
  const resid = (r: typeof big) => r.realized.reduce((a, v, k) => a + Math.abs(v - r.predicted[k]), 0);
  const size = (r: typeof big) => r.predicted.reduce((a, v) => a + Math.abs(v), 0);
  console.log(
    `realized vs first order: lr 1e-3 remainder ${resid(big).toExponential(2)} of ${size(big).toExponential(2)}; lr 5e-4 ${resid(small).toExponential(2)} of ${size(small).toExponential(2)}`,
  );
  assert.ok(size(big) > 0, 'the update moved the tokens');
  assert.ok(resid(big) < 0.1 * size(big), `first order within 10 %: ${resid(big)} of ${size(big)}`);
  assert.ok(resid(small) <= 0.4 * resid(big), `the remainder is second order: ${resid(small)} vs ${resid(big)}`);
  // the update pushes the positive episodes' tokens up and the negative ones' down, summed over each side
  const sum = (r: typeof big, sign: number) => r.realized.reduce((a, v, k) => a + (Math.sign(r.advantage[k]) === sign ? v : 0), 0);
  assert.ok(sum(big, 1) > 0 && sum(big, -1) < 0, `Σ realized: A > 0 ${sum(big, 1)}, A < 0 ${sum(big, -1)}`);
});
