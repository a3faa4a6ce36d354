// Splits that do not leak: task.split_seed alone fixes train / test / validation, the three
// are disjoint, the test split does not move when train_size or val_size do, and a checkpoint records what it trained
// on so that a run starting from it refuses a test split the checkpoint may have trained on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../src/engine/config/config';
import { isUserError } from '../../../src/engine/core/errors';
import { readEvalTable } from '../../../src/engine/rundir/eval_table';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { loadCheckpoint, latestCheckpoint } from '../../../src/engine/rundir/checkpoint';
import { checkTaskIdentity, taskIdentity } from '../../../src/engine/tasks/identity';
import { buildSession } from '../../../src/engine/session/session';
import { train } from '../../../src/engine/train/train';
import { tinyConfig } from '../fixtures';

const prompts = (xs: { prompt: string }[]) => xs.map((x) => x.prompt);

for (const name of ['countdown', 'arithmetic'] as const) {
  test(`${name}: the run seed does not move the splits; split_seed does; three disjoint splits; test fixed under train_size and val_size`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-splits-'));
    try {
      const cfg = tinyConfig(dir, name);
      const at = async (...sets: string[]) => {
        const s = await buildSession(loadConfig(cfg, ['task.val_size=6', ...sets]).config);
        s.model.dispose();
        return s.task;
      };
      const a = await at('seed=1');
      const b = await at('seed=99');
      assert.deepEqual(prompts(b.eval), prompts(a.eval), 'another run seed, the same test split');
      assert.deepEqual(prompts(b.train), prompts(a.train));
      assert.deepEqual(prompts(b.validation), prompts(a.validation));
      const c = await at('task.split_seed=2');
      assert.notDeepEqual(prompts(c.eval), prompts(a.eval), 'split_seed draws other splits');
      const tr = new Set(prompts(a.train));
      const te = new Set(prompts(a.eval));
      assert.equal(a.validation.length, 6);
      assert.ok(prompts(a.eval).every((p) => !tr.has(p)));
      assert.ok(prompts(a.validation).every((p) => !tr.has(p) && !te.has(p)));
      const d = await at('task.val_size=0');
      assert.deepEqual(prompts(d.eval), prompts(a.eval), 'val_size does not move the test split');
      assert.deepEqual(prompts(d.train), prompts(a.train), 'nor the training split');
      const e = await at('task.train_size=20');
      assert.deepEqual(prompts(e.eval), prompts(a.eval), 'train_size does not move the test split');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('validation is evaluated with the test split: val_success in metrics, rows marked "validation" in the eval table', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-splits-'));
  try {
    const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['task.val_size=5'] });
    const m = readMetrics(r.runDir).filter((x) => x.eval_success !== undefined);
    assert.ok(m.length >= 2 && m.every((x) => typeof x.val_success === 'number'));
    const t = readEvalTable(join(r.runDir, 'eval', readdirSync(join(r.runDir, 'eval')).sort().at(-1)!));
    assert.deepEqual([t.split.filter((x) => x === 'test').length, t.split.filter((x) => x === 'validation').length], [8, 5]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a warm start records its task; a run from it with another split_seed is refused, naming both; an older checkpoint warns', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-splits-'));
  try {
    const cfg = tinyConfig(dir, 'countdown');
    const sft = await train({ configPath: cfg, sets: ['name=sft', 'grpo.steps=0'] });
    const meta = loadCheckpoint(latestCheckpoint(sft.runDir)!).meta.task as ReturnType<typeof taskIdentity>;
    assert.equal(meta.split_seed, 1);
    assert.match(meta.test_hash, /^[0-9a-f]{16}$/);
    // Seeds 2 and 3 from the shared warm start: accepted (same splits).
    const ok = await train({ configPath: cfg, sets: ['name=seed2', 'seed=2', `model.init_checkpoint=${sft.runDir}`, 'grpo.steps=1'] });
    assert.equal(ok.status, 'completed');
    await assert.rejects(
      train({ configPath: cfg, sets: ['name=leak', 'task.split_seed=5', `model.init_checkpoint=${sft.runDir}`] }),
      (e: unknown) =>
        isUserError(e) &&
        /model\.init_checkpoint .*trained on task countdown with split_seed 1 .* this run draws task countdown with split_seed 5/.test((e as Error).message),
    );
    const warnings: string[] = [];
    const cur = taskIdentity({ name: 'countdown', train: [], eval: [], validation: [] } as never, 1);
    checkTaskIdentity('model.init_checkpoint x', undefined, cur, (m) => warnings.push(m));
    assert.match(warnings[0], /does not record its task and splits/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a checkpoint trained on another train split is refused when the run has a validation split', () => {
  // Identities as taskIdentity makes them, from hand-made splits: the checkpoint's train split is a superset (a larger
  // train_size), the test split is the same.
  const ex = (id: number) => ({ id, prompt: `p${id}`, answer: `a${id}` });
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => ex(from + i));
  const ident = (train: number, val: number) =>
    taskIdentity({ name: 'countdown', train: range(0, train), eval: range(1000, 8), validation: range(train, val) } as never, 1);
  const warnings: string[] = [];
  const warn = (m: string) => warnings.push(m);
  // same train split: validation is disjoint from it by construction, accepted silently
  checkTaskIdentity('model.init_checkpoint w', ident(40, 0), ident(40, 5), warn);
  assert.deepEqual(warnings, []);
  // a larger train split (0–59) against this run's train 0–39 and validation 40–44: refused, naming both
  assert.throws(
    () => checkTaskIdentity('model.init_checkpoint w', ident(60, 0), ident(40, 5), warn),
    (e: unknown) =>
      isUserError(e) && /another training split \(60 instances, .*\) than this run's \(40, .*validation split \(5 instances\)/.test((e as Error).message),
  );
  // without a validation split it only warns, as before
  checkTaskIdentity('model.init_checkpoint w', ident(60, 0), ident(40, 0), warn);
  assert.match(warnings[0], /another training split \(60 instances\) than this run \(40\); the test split is the same/);
  assert.match(ident(40, 5).validation_hash!, /^[0-9a-f]{16}$/);
});
