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
