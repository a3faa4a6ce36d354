// sft.share: one SFT warm start for runs that differ only in seed, credit or grpo. Two real engines start at once
// (separate processes, so the run lock is contended as in a sweep of several runs at a time or a Slurm array).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/engine/config/config';
import { evalFile, readEvalTable } from '../../../src/engine/rundir/eval_table';
import { readMetrics, readRunInfo } from '../../../src/engine/rundir/rundir';
import { warmStartDir, warmStartKey } from '../../../src/engine/train/warm_start';
import { tinyConfig } from '../fixtures';

const CLI = resolve(__dirname, '../../../dist/engine/cli.js');

test('the warm start key follows model, task, sft and backend, and not the run seed, credit or grpo', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-ws-key-'));
  const cfg = tinyConfig(dir, 'countdown');
  const key = (...sets: string[]) => warmStartKey(loadConfig(cfg, ['sft.share=true', ...sets]).config);
  const k = key();
  assert.equal(key('seed=99'), k);
  assert.equal(key('credit.strategy=entropy_mask'), k);
  assert.equal(key('grpo.lr=0.01', 'grpo.steps=9'), k);
  assert.notEqual(key('sft.lr=0.002'), k);
  assert.notEqual(key('sft.seed=2'), k);
  assert.notEqual(key('task.split_seed=3'), k);
  assert.notEqual(key('model.d_model=64', 'model.n_heads=2'), k);
  // the 16-bit storage of frozen weights counts only where SFT trains beside frozen weights (and float32 is the key
  // warm starts had before the option existed: the same as leaving it out)
  assert.equal(key('model.torch_dtype=float32'), k);
  assert.equal(key('model.torch_dtype=bfloat16'), k, 'nothing is frozen: the same weights');
  const lora = key('model.lora={r: 2}');
  assert.notEqual(lora, k);
  assert.notEqual(key('model.lora={r: 2}', 'model.torch_dtype=bfloat16'), lora);
  assert.match(warmStartDir(loadConfig(cfg).config), /countdown-warm-start-[0-9a-f]{12}$/);
});

function trainCli(cfg: string, sets: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((res) => {
    const p = spawn(process.execPath, [CLI, 'train', cfg, ...sets.flatMap((s) => ['--set', s])], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
    });
    p.stderr.on('data', (d) => {
      out += d;
    });
    p.on('close', (code) => res({ code, out }));
  });
}

test('two engines started at once share one SFT warm start, trained once with sft.seed', { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-ws-'));
  // The fixture's sft line is replaced: 60 SFT steps, so that the first engine is still training when the second looks.
  const cfg = tinyConfig(dir, 'countdown');
  const text = readFileSync(cfg, 'utf8').replace(/^sft: .*$/m, 'sft: { steps: 60, batch_size: 8, lr: 1.0e-3, share: true, seed: 5 }');
  (await import('node:fs')).writeFileSync(cfg, text);
  const [a, b] = await Promise.all([
    trainCli(cfg, ['seed=1', 'name=ws-seed1', 'credit.strategy=none']),
    trainCli(cfg, ['seed=2', 'name=ws-seed2', 'credit.strategy=entropy_mask']),
  ]);
  assert.equal(a.code, 0, a.out);
  assert.equal(b.code, 0, b.out);
  const runs = readdirSync(join(dir, 'runs')).sort();
  const ws = runs.filter((r) => r.startsWith('countdown-warm-start-'));
  assert.equal(ws.length, 1, runs.join(', '));
  const wsDir = join(dir, 'runs', ws[0]);
  assert.equal(readRunInfo(wsDir)!.status, 'completed');
  // Trained once: 60 SFT rows, seeded by sft.seed (its config says seed 5), no GRPO.
  assert.equal(readMetrics(wsDir).filter((r) => r.phase === 'sft').length, 60);
  assert.equal(readMetrics(wsDir).filter((r) => r.phase === 'grpo').length, 0);
  assert.equal((parse(readFileSync(join(wsDir, 'config.yaml'), 'utf8')) as { seed: number }).seed, 5);
  assert.ok(
    [a.out, b.out].some((o) => /pid \d+ on \S+ is training .*countdown-warm-start-.*; waiting for it \(if its heartbeat stops/.test(o)),
    `${a.out}\n${b.out}`,
  );
  const own = runs.filter((r) => r.startsWith('ws-seed')).map((r) => join(dir, 'runs', r));
  assert.equal(own.length, 2);
  for (const r of own) {
    const c = parse(readFileSync(join(r, 'config.yaml'), 'utf8')) as { model: { init_checkpoint: string }; sft: { steps: number } };
    assert.equal(resolve(c.model.init_checkpoint), resolve(wsDir), 'the run records where it started');
    assert.equal(c.sft.steps, 0);
    assert.equal(readMetrics(r).filter((x) => x.phase === 'sft').length, 0);
  }
  // One starting policy: greedy eval before GRPO is the same, instance by instance, whatever the seed and strategy.
  const e0 = own.map((r) => readEvalTable(evalFile(r, 0)));
  assert.deepEqual(e0[0].completion, e0[1].completion);
  // A third run finds it finished and starts at once.
  const c = await trainCli(cfg, ['seed=3', 'name=ws-seed3']);
  assert.equal(c.code, 0, c.out);
  assert.equal(readdirSync(join(dir, 'runs')).filter((r) => r.startsWith('countdown-warm-start-')).length, 1);
  assert.doesNotMatch(c.out, /waiting for it/);
});
