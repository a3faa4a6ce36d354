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
  // refused later, once the engine has opened the run: the task it would draw is not the one the run trained on
  await assert.rejects(train({ resume: r.runDir, sets: ['task.split_seed=7'] }), (e: Error) => isUserError(e) && /split_seed|task/.test(e.message));
  assert.equal(readFileSync(join(r.runDir, 'run.json'), 'utf8'), before, 'still completed, byte for byte');
  assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /ERROR resume refused, the run is as it was: /);
});

test('a LoRA run resumed with other LoRA settings is refused before anything changes, naming each key with both values', { timeout: 120_000 }, async (t) => {
  const { stopAtStep } = await import('../fixtures');
  const { loraChanges } = await import('../../../src/engine/train/train');
  const { parseConfigText } = await import('../../../src/engine/config/config');
  const dir = mkdtempSync(join(tmpdir(), 'cl-resume-lora-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const sets = ['model.lora={r: 4, targets: [q_proj, v_proj]}', 'sft.steps=2', 'grpo.steps=3'];
  const stopped = await train({ configPath: tinyConfig(dir, 'countdown'), sets, ...stopAtStep(2) });
  assert.equal(stopped.status, 'stopped');
  const files = ['run.json', 'metrics.jsonl'].map((f) => readFileSync(join(stopped.runDir, f), 'utf8'));
  for (const [set, want] of [
    ['model.lora.r=8', /model\.lora\.r: the run trained with 4, now 8; model\.lora\.alpha: the run trained with 8, now 16/],
    ['model.lora.alpha=2', /model\.lora\.alpha: the run trained with 8, now 2/],
    ['model.lora.targets=[q_proj]', /model\.lora\.targets: the run trained with q_proj, v_proj, now q_proj/],
    ['model.lora=null', /model\.lora: the run trained with adapters, now without/],
  ] as const)
    await assert.rejects(
      train({ resume: stopped.runDir, sets: [set] }),
      (e: Error) => isUserError(e) && /LoRA settings cannot change on a resume/.test(e.message) && want.test(e.message),
      set,
    );
  assert.deepEqual(
    ['run.json', 'metrics.jsonl'].map((f) => readFileSync(join(stopped.runDir, f), 'utf8')),
    files,
    'nothing of the run changed',
  );
  // the same settings written another way (alpha at its default, targets in another order) are no change
  const cfg = (y: string) => parseConfigText(y).config!;
  assert.deepEqual(
    loraChanges(cfg('model:\n  lora: {r: 4, targets: [v_proj, q_proj]}\n'), cfg('model:\n  lora: {r: 4, alpha: 8, targets: [q_proj, v_proj]}\n')),
    [],
  );
  const resumed = await train({ resume: stopped.runDir });
  assert.equal(resumed.status, 'completed');
});
