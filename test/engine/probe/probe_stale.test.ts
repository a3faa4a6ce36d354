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
import { readProbeRecord } from '../../../src/engine/probe/record';
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
