// Ctrl-C stops a probe within a batch, not after every continuation: the estimate loop lets the event loop run before
// each batch, so the signal's handler is seen. The probe keeps the episodes it finished, records only those, and exits
// with 130, as a stopped run does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { train } from '../../../src/engine/train/train';
import { readProbeRecord } from '../../../src/engine/rundir/probe_record';
import { readProbeTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { tinyConfig } from '../fixtures';

const CLI = resolve(__dirname, '../../../dist/engine/cli.js');

// SIGINT is Ctrl-C at a terminal; SIGTERM is what VS Code's Cancel on "Probe This Episode…" sends (EngineCli).
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  test(`${signal} stops a probe within a couple of seconds; it keeps and records its finished episodes and exits 130`, { timeout: 180_000 }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-probe-signal-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=1'] });
    assert.equal(r.status, 'completed');
    // 8 episodes × every position × 512 continuations: minutes of work, stopped early
    const child = spawn(process.execPath, [CLI, 'probe', r.runDir, '--step', '1', '--episodes', '8', '--rollouts', '512', '--progress-json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    let sentAt = 0;
    for await (const line of createInterface({ input: child.stderr })) {
      const p = /^\{"progress"/.test(line) ? (JSON.parse(line) as { progress: { done: number; total: number } }).progress : null;
      // a few batches in: some episodes may be finished, most are not
      if (p && p.done >= 1024 && !sentAt) {
        sentAt = Date.now();
        child.kill(signal);
      }
    }
    const code = await exited;
    assert.ok(sentAt > 0, 'the probe reported progress');
    const seconds = (Date.now() - sentAt) / 1000;
    assert.ok(seconds < 5, `stopped ${seconds.toFixed(1)} s after ${signal}`);
    assert.equal(code, 130);
    const rec = readProbeRecord(r.runDir, 1);
    assert.ok(rec, 'the record is written');
    assert.ok(rec.episodes.length < 8, `${rec.episodes.length} of 8 episodes finished before the stop`);
    // the accuracy (which scores the whole step) waits for the probe that finishes
    assert.equal(rec.accuracy, null);
    if (rec.episodes.length) {
      const table = readProbeTable(stepFile(r.runDir, 'probes', 1));
      assert.deepEqual(
        [...new Set(table.episode)].sort((a, b) => a - b),
        [...rec.episodes].sort((a, b) => a - b),
        'the table holds exactly the recorded episodes',
      );
    }
  });

test('a second probe of a step being probed is refused, naming the first; the step lock is gone once the first ends', { timeout: 180_000 }, async (t) => {
  const { spawnSync } = await import('node:child_process');
  const { existsSync } = await import('node:fs');
  const dir = mkdtempSync(join(tmpdir(), 'cl-probe-lock-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=1'] });
  const first = spawn(process.execPath, [CLI, 'probe', r.runDir, '--step', '1', '--episodes', '8', '--rollouts', '512', '--progress-json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((res) => first.on('exit', (code) => res(code)));
  const lines = createInterface({ input: first.stderr });
  for await (const line of lines) if (/^\{"progress"/.test(line)) break;
  const second = spawnSync(process.execPath, [CLI, 'probe', r.runDir, '--step', '1', '--episode', '0', '--rollouts', '2'], { encoding: 'utf8' });
  assert.notEqual(second.status, 0);
  assert.match(second.stderr, new RegExp(`step 1 is already being probed \\(pid ${first.pid}\\)`));
  first.kill('SIGINT');
  lines.close();
  first.stderr.resume();
  assert.equal(await exited, 130);
  assert.equal(existsSync(join(r.runDir, 'probes', 'step-000001.lock')), false, 'released');
  // now the second one runs
  const again = spawnSync(process.execPath, [CLI, 'probe', r.runDir, '--step', '1', '--episode', '0', '--rollouts', '2', '--replace'], { encoding: 'utf8' });
  assert.equal(again.status, 0, again.stderr);
});
