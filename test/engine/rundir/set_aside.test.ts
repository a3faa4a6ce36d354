// A resume sets aside everything keyed by a step past its checkpoint: the tables, and the probes of those steps and
// the policies kept for probing them, so no reader mixes the abandoned trajectory's δ or policies with the new one's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setAsideTablesAfter } from '../../../src/engine/rundir/rundir';

test('probes and kept policies past the checkpoint go aside with the tables; those before it stay', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-aside-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const files = [
    'tokens/step-000002.arrow',
    'tokens/step-000003.arrow',
    'episodes/step-000003.arrow',
    'eval/step-000003.arrow',
    'probes/step-000002.arrow',
    'probes/step-000002.json',
    'probes/step-000003.arrow',
    'probes/step-000003.json',
    'policies/step-000002.safetensors',
    'policies/step-000003.safetensors',
  ];
  for (const f of files) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), f);
  }
  const dest = setAsideTablesAfter(dir, { tables: 2, eval: 2 });
  assert.ok(dest);
  for (const f of files) {
    const past = /step-000003/.test(f);
    assert.equal(existsSync(join(dir, f)), !past, `${f} ${past ? 'moved' : 'kept'}`);
    assert.equal(existsSync(join(dest, f)), past, `${f} ${past ? 'in' : 'not in'} ${dest}`);
  }
  assert.deepEqual(readdirSync(dest).sort(), ['episodes', 'eval', 'policies', 'probes', 'tokens']);
});

test('a restart in place after a death before the first checkpoint starts from an empty run directory', { timeout: 120_000 }, async (t) => {
  const { train } = await import('../../../src/engine/train/train');
  const { tinyConfig } = await import('../fixtures');
  const { readMetrics } = await import('../../../src/engine/rundir/rundir');
  const { readTokenTable } = await import('../../../src/engine/rundir/arrow_tables');
  const dir = mkdtempSync(join(tmpdir(), 'cl-restart-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const runDir = join(dir, 'run');
  // the dead attempt: a table of step 3, a kept policy, metrics rows, no checkpoint
  for (const sub of ['tokens', 'policies']) mkdirSync(join(runDir, sub), { recursive: true });
  writeFileSync(join(runDir, 'tokens/step-000003.arrow'), 'dead attempt');
  writeFileSync(join(runDir, 'policies/step-000003.safetensors'), 'dead attempt');
  writeFileSync(join(runDir, 'metrics.jsonl'), JSON.stringify({ step: 3, phase: 'grpo', reward_mean: 9 }) + '\n');
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), runDir, sets: ['grpo.steps=2'] });
  assert.equal(r.status, 'completed');
  assert.equal(existsSync(join(runDir, 'tokens/step-000003.arrow')), false, "the dead attempt's table is not this run's");
  assert.equal(existsSync(join(runDir, 'policies/step-000003.safetensors')), false);
  assert.ok(
    readMetrics(runDir).every((m) => m.reward_mean !== 9),
    'no metrics row of the dead attempt',
  );
  assert.equal(readTokenTable(join(runDir, 'tokens/step-000002.arrow')).step[0], 2);
  const aside = readdirSync(join(runDir, 'abandoned'));
  assert.equal(aside.length, 1);
  for (const f of ['tokens/step-000003.arrow', 'policies/step-000003.safetensors', 'metrics.jsonl'])
    assert.ok(existsSync(join(runDir, 'abandoned', aside[0], f)), `${f} kept in abandoned/`);
});
