// `credit-lens probe` on a real (tiny) run: the sevens task (reward = share of "7"s, so groups differ and advantages are
// not zero). Invariants that hold whatever the policy: V_n is the reward, δ telescopes, values lie in the reward's range,
// V_0 of one prompt agrees across its episodes within sampling error; and the run keeps the policies probes need.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { probeRun, readProbeRecord } from '../../../src/engine/probe/probe';
import { readEpisodeTable, readProbeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { isUserError } from '../../../src/engine/core/errors';
import { sevensConfig } from '../fixtures';

test('a probed step of a real run: invariants, policies kept, resume, and errors that name what can be probed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-probe-'));
  const cfg = sevensConfig(dir, {
    name: 'probe',
    seed: 3,
    backend: 'wasm',
    grpo: '{ steps: 4, prompts_per_step: 4, group_size: 4, max_new_tokens: 8, eval_every: 4, checkpoint_every: 4 }\nlogging: { probe_every: 2 }',
  });
  const { runDir } = await train({ configPath: cfg });
  // step 1 and every 2nd step keep their sampling policy; the final checkpoint (step 4) serves step 5, which was not logged
  assert.deepEqual(readdirSync(join(runDir, 'policies')).sort(), ['step-000001.safetensors', 'step-000002.safetensors', 'step-000004.safetensors']);
  await assert.rejects(
    probeRun({ runDir, step: 3 }),
    (e: unknown) => isUserError(e) && /step 3 cannot be probed/.test(e.message) && e.message.includes('Steps that can be probed: 1, 2, 4'),
  );
  await assert.rejects(probeRun({ runDir, step: 9 }), (e: unknown) => isUserError(e) && /has no token table/.test(e.message));

  const r = await probeRun({ runDir, step: 2, episodes: 8, rollouts: 6 });
  assert.equal(r.complete, true);
  assert.equal(r.episodes.length, 8);
  const probe = readProbeTable(join(runDir, 'probes', 'step-000002.arrow'));
  const eps = readEpisodeTable(join(runDir, 'episodes', 'step-000002.arrow'));
  const tok = readTokenTable(join(runDir, 'tokens', 'step-000002.arrow'));
  const v0ByPrompt = new Map<number, { v: number; se: number }[]>();
  for (const e of r.episodes) {
    const rows = [...probe.episode.keys()].filter((i) => probe.episode[i] === e);
    const n = eps.length[e];
    assert.deepEqual(
      rows.map((i) => probe.position[i]),
      Array.from({ length: n + 1 }, (_, t) => t),
      'every position 0…n',
    );
    const last = rows[rows.length - 1];
    assert.equal(probe.value[last], eps.reward[e], 'V_n is the episode reward');
    // each half's variance as an estimate: s²/m of its 3 continuations, ≥ 0, and 0 where the reward is known
    assert.equal(probe.value_var_a![last], 0);
    for (const i of rows.slice(0, -1)) assert.ok(probe.value_var_a![i] >= 0 && probe.value_var_b![i] >= 0);
    assert.equal(probe.rollouts[last], 0);
    assert.ok(Number.isNaN(probe.delta[last]), 'no δ after the last position');
    let sum = 0;
    for (const i of rows.slice(0, -1)) {
      assert.ok(probe.value[i] >= 0 && probe.value[i] <= 1, 'inside the reward range [0, 1]');
      assert.equal(probe.rollouts[i], 6);
      sum += probe.delta[i];
    }
    // δ telescopes: Σ δ_t = V_n − V_0 (float32 columns)
    assert.ok(Math.abs(sum - (probe.value[last] - probe.value[rows[0]])) < 1e-5);
    const p = eps.prompt_idx[e];
    v0ByPrompt.set(p, [...(v0ByPrompt.get(p) ?? []), { v: probe.value[rows[0]], se: probe.value_se[rows[0]] }]);
  }
  // V_0 is the prompt's value: its episodes' estimates (independent streams) agree within sampling error
  let pairs = 0;
  for (const list of v0ByPrompt.values()) {
    for (let a = 0; a < list.length; a++)
      for (let b = a + 1; b < list.length; b++) {
        pairs++;
        const se = Math.hypot(list[a].se, list[b].se);
        assert.ok(Math.abs(list[a].v - list[b].v) <= 4 * se + 1e-6, `V_0 ${list[a].v} vs ${list[b].v} (se ${se})`);
      }
  }
  assert.ok(pairs >= 4, 'episodes spread over groups, two per prompt');
  // accuracy: the run's own strategy from the token table, the others scored under the same policy
  // probe --json's accuracy: {strategy: {spearman, decisive_share, sign_agreement}}, each {mean, lo, hi, n}
  const acc = { accuracy: r.accuracy! };
  assert.deepEqual(Object.keys(acc.accuracy.none.spearman).sort(), ['hi', 'lo', 'mean', 'n']);
  // one episode set for every row: the probed episodes whose advantage is not 0
  const eps2 = readEpisodeTable(join(runDir, 'episodes', 'step-000002.arrow'));
  assert.equal(r.accuracy_episodes, r.episodes.filter((e) => eps2.advantage[e] !== 0).length);
  assert.ok(r.accuracy_episodes > 0);
  // the probe's report of its own reliability: the split halves, the placebo, the trivial baselines, the excess
  assert.ok(r.reliability && r.reliability.units > 0, JSON.stringify(r.reliability));
  // the lift's ceiling (an oracle credit cross-fitted on the halves) is in the record
  assert.ok(r.ceiling && r.ceiling.n > 0, JSON.stringify(r.ceiling));
  assert.deepEqual(Object.keys(r.baselines!).sort(), ['entropy', 'one_minus_p', 'position']);
  assert.ok(acc.accuracy.none.placebo && acc.accuracy.none.excess && acc.accuracy.none.sign_test);
  assert.ok(
    r.warnings!.some((w) => /prompts?: the intervals are t intervals/.test(w)),
    JSON.stringify(r.warnings),
  );
  assert.equal(r.run_strategy, 'none');
  // every strategy is scored, or left out with the reason no episode could score it (gtpo's paper form on a run this
  // short: its Â is 0 at every token)
  for (const k of ['none', 'entropy_mask', 'gtpo', 'attention_credit', 'ktae', 'otb', 'reward_decomposition', 'gtpo (paper form)'])
    assert.ok(
      k in acc.accuracy || r.warnings!.some((w) => w.startsWith(`${k}: left out, no probed episode can score it: `)),
      `${k}: ${JSON.stringify(r.warnings)}`,
    );
  assert.ok(acc.accuracy.none.sign_agreement.n > 0);
  // the token table's grad_norm: |Â|·√(1 − 2π + Σπ²) ≥ |Â|·(1 − π) (Σπ² ≥ π²), and ≤ |Â|·√2
  for (let k = 0; k < tok.grad_norm!.length; k++) {
    const a = Math.abs(tok.effective_advantage[k]);
    const p = Math.exp(tok.logprob[k]);
    assert.ok(tok.grad_norm![k] >= a * (1 - p) - 1e-4 && tok.grad_norm![k] <= a * Math.SQRT2 + 1e-6, `row ${k}`);
  }

  // same settings again: nothing to do, the table unchanged; more episodes resume
  const again = await probeRun({ runDir, step: 2, episodes: 8, rollouts: 6 });
  assert.equal(again.continuations, r.continuations);
  const stop = new AbortController();
  let batches = 0;
  const partial = await probeRun({
    runDir,
    step: 2,
    episodes: 12,
    rollouts: 6,
    signal: stop.signal,
    progress: () => {
      if (++batches === 3) stop.abort();
    },
  });
  assert.equal(partial.complete, false);
  assert.ok(partial.episodes.length >= 8 && partial.pending.length > 0);
  assert.deepEqual(readProbeRecord(runDir, 2)!.pending, partial.pending);
  const full = await probeRun({ runDir, step: 2, episodes: 12, rollouts: 6 });
  assert.equal(full.complete, true);
  assert.equal(full.episodes.length, 12);
  // a fresh probe of the same 12 episodes gives the same table: resuming loses and changes nothing
  const before = readProbeTable(join(runDir, 'probes', 'step-000002.arrow'));
  const fresh = await probeRun({ runDir, step: 2, episodes: 12, rollouts: 6, replace: true });
  assert.deepEqual(readProbeTable(join(runDir, 'probes', 'step-000002.arrow')), before);
  // and scores exactly alike: the resumed probe's accuracy is the uninterrupted one's, bit for bit
  assert.deepEqual([full.accuracy, full.baselines, full.reliability], [fresh.accuracy, fresh.baselines, fresh.reliability]);
  await assert.rejects(
    probeRun({ runDir, step: 2, rollouts: 4 }),
    (e: unknown) => isUserError(e) && /probed with --rollouts 6/.test(e.message) && /--replace/.test(e.message),
  );
  assert.ok(existsSync(join(runDir, 'probes', 'step-000002.json')));
});
