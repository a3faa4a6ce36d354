// A resume refused before it starts (a --set typo, a config the run's checkpoint cannot take) changes nothing of the run:
// a completed run stays completed in run.json, so compare goes on counting it; its engine.log notes the attempt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { isUserError } from '../../../src/engine/core/errors';
import { tinyConfig } from '../fixtures';

test('a refused resume of a completed run leaves its run.json byte for byte', { timeout: 120_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-resume-refused-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=2'] });
  assert.equal(r.status, 'completed');
  const before = readFileSync(join(r.runDir, 'run.json'), 'utf8');
  await assert.rejects(train({ resume: r.runDir, sets: ['grpo.lr=fast'] }), (e: Error) => isUserError(e) && /grpo\.lr/.test(e.message));
  assert.equal(readFileSync(join(r.runDir, 'run.json'), 'utf8'), before);
  assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /error Invalid config[^\n]*\n  grpo\.lr: got "fast"/);
});
