// A probe belongs to the token table it was made on: its record keeps the table's and the policy's sha256. When the
// step's table is rewritten (a restart, a resume of another trajectory), Browse Rollouts no longer joins the old δ onto
// the new tokens, and the next probe of the step starts afresh instead of keeping the stale episodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { probeRun } from '../../../src/engine/probe/probe';
import { readProbeRecord } from '../../../src/engine/rundir/probe_record';
import { loadRollouts } from '../../../src/engine/query/rollouts';
import { readTokenTable, writeTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { tinyConfig } from '../fixtures';

test('a rewritten token table is not joined with the old probe, and the next probe of the step starts afresh', { timeout: 180_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-probe-stale-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=1'] });
  const first = await probeRun({ runDir: r.runDir, step: 1, episodeList: [0], rollouts: 2 });
  const rec = readProbeRecord(r.runDir, 1)!;
  assert.match(rec.tokens_sha256 ?? '', /^[0-9a-f]{64}$/);
  assert.match(rec.policy_sha256 ?? '', /^[0-9a-f]{64}$/);
  assert.ok(loadRollouts(r.runDir).tokens.extra.mc_delta, 'joined while the table is the probed one');
  // the step's table rewritten (as a restart would), here with every log-prob halved
  const tokenFile = stepFile(r.runDir, 'tokens', 1);
  const tok = readTokenTable(tokenFile);
  writeTokenTable(tokenFile, { ...tok, logprob: tok.logprob.map((x) => x / 2), extra: {} } as unknown as Parameters<typeof writeTokenTable>[1]);
  assert.equal(loadRollouts(r.runDir).tokens.extra.mc_delta, undefined, 'the stale δ is not painted on the new tokens');
  const logs: string[] = [];
  const again = await probeRun({ runDir: r.runDir, step: 1, episodeList: [0], rollouts: 2, log: (m) => logs.push(m) });
  assert.ok(
    logs.some((m) => /made on another token table .* probing afresh/.test(m)),
    logs.join('\n'),
  );
  assert.equal(again.continuations, first.continuations, 'the episode was sampled again, not kept');
  assert.ok(loadRollouts(r.runDir).tokens.extra.mc_delta, 'joined again: the new probe is of this table');
});

test(
  'a probe from a checkpoint records its policy hash; another policy under the step starts afresh; analyze skips a stale probe',
  { timeout: 180_000 },
  async (t) => {
    const { existsSync, rmSync: rm } = await import('node:fs');
    const { readSafetensors, writeSafetensors } = await import('../../../src/engine/model/safetensors');
    const { probeAccuracies } = await import('../../../src/engine/rundir/probe_record');
    const { policyFile } = await import('../../../src/engine/rundir/policies');
    const dir = mkdtempSync(join(tmpdir(), 'cl-probe-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    // steps 1–3, checkpoints at 2; step 3's policy is checkpoint 2 (no kept policy for it: probe_every 0)
    const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=3', 'logging.probe_every=0', 'grpo.checkpoint_every=2'] });
    assert.equal(existsSync(policyFile(r.runDir, 3)), false);
    await probeRun({ runDir: r.runDir, step: 3, episodeList: [0], rollouts: 2 });
    const rec = readProbeRecord(r.runDir, 3)!;
    assert.match(rec.policy, /checkpoints\/step-000002$/);
    assert.match(rec.policy_sha256 ?? '', /^[0-9a-f]{64}$/, "the checkpoint's model.safetensors is hashed");
    assert.equal(
      probeAccuracies(r.runDir)
        .map((a) => a.step)
        .join(),
      '3',
    );
    // another policy under the step (checkpoint 2's weights changed, as a resume of another trajectory would): the
    // next probe starts afresh
    const ck = join(r.runDir, 'checkpoints', 'step-000002', 'model.safetensors');
    const { tensors } = readSafetensors(ck);
    const w0 = Object.values(tensors)[0];
    w0.data = w0.data.map((x: number) => x * 0.5) as typeof w0.data;
    writeSafetensors(ck, tensors);
    const logs: string[] = [];
    await probeRun({ runDir: r.runDir, step: 3, episodeList: [0], rollouts: 2, log: (m) => logs.push(m) });
    assert.ok(
      logs.some((m) => /made on another policy .* probing afresh/.test(m)),
      logs.join('\n'),
    );
    // the step's token table rewritten: analyze --probe no longer reports the probe's accuracy
    const tokenFile = stepFile(r.runDir, 'tokens', 3);
    const tok = readTokenTable(tokenFile);
    writeTokenTable(tokenFile, { ...tok, logprob: tok.logprob.map((x) => x / 2), extra: {} } as unknown as Parameters<typeof writeTokenTable>[1]);
    assert.deepEqual(probeAccuracies(r.runDir), []);
    // the probe's own bound on --rollouts, with the numbers
    await assert.rejects(probeRun({ runDir: r.runDir, step: 3, episodeList: [0], rollouts: 4097 }), (e: Error) =>
      /--rollouts: got 4097; expected an integer from 2 .* to 4096/.test(e.message),
    );
    rm(join(r.runDir, 'probes'), { recursive: true });
  },
);
