// A disk that fills while a run trains, on a real filesystem of its own (a 3 MiB tmpfs mounted for the test; skipped
// where this process may not mount): the run ends with "disk full while writing <path>", no stack trace, and its
// directory stays resumable: once there is room, --resume finishes it from the last checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { tinyConfig } from '../fixtures';
import { readRunInfo } from '../../../src/engine/rundir/rundir';

const CLI = resolve(__dirname, '../../../dist/engine/cli.js');
const mnt = mkdtempSync(join(tmpdir(), 'cl-disk-full-'));
const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mnt]).status === 0;
if (!mounted) rmSync(mnt, { recursive: true, force: true });

test(
  'a disk that fills during a run: "disk full while writing <path>", no stack trace, and the run resumes once there is room',
  { skip: mounted ? false : 'cannot mount a tmpfs here (not root)', timeout: 180_000 },
  () => {
    try {
      const config = tinyConfig(mnt, 'countdown');
      // 2.4 MB of the 3 MiB taken: room for the start and some steps' tables and checkpoints, not for 20 steps (about 1 MB)
      writeFileSync(join(mnt, 'filler'), Buffer.alloc(2400 * 1024));
      const run = (...args: string[]) => spawnSync(process.execPath, [CLI, 'train', ...args], { cwd: mnt, encoding: 'utf8', timeout: 120_000 });
      const full = run(config, '--set', 'grpo.steps=20', '--set', 'grpo.checkpoint_every=1');
      assert.notEqual(full.status, 0, full.stdout);
      assert.match(full.stderr, /disk full while writing \/\S+/);
      assert.doesNotMatch(full.stderr, /^\s+at /m, 'no stack trace');
      assert.doesNotMatch(full.stderr, /internal error/);
      const runDir = join(mnt, 'runs', readdirSync(join(mnt, 'runs'))[0]);
      rmSync(join(mnt, 'filler'));
      const resumed = run('--resume', runDir);
      assert.equal(resumed.status, 0, resumed.stderr);
      assert.equal(readRunInfo(runDir)!.status, 'completed');
      assert.equal(readRunInfo(runDir)!.last_step, 20);
    } finally {
      spawnSync('umount', [mnt]);
      rmSync(mnt, { recursive: true, force: true });
    }
  },
);
