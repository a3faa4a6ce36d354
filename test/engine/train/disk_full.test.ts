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

test('a checkpoint tensor file: short writes are continued, and ENOSPC part-way names the file (no mount needed)', async () => {
  const { writeAll } = await import('../../../src/engine/model/safetensors');
  const { diskFullError } = await import('../../../src/engine/core/files');
  const { mkdtempSync: mk, readFileSync: rf, rmSync: rm, writeSync } = await import('node:fs');
  const { tmpdir: td } = await import('node:os');
  const { join: j } = await import('node:path');
  const dir = mk(j(td(), 'cl-writeall-'));
  try {
    const data = Uint8Array.from({ length: 1000 }, (_, i) => i % 251);
    // a write that takes at most 300 bytes at a time: every byte still lands
    const p = j(dir, 'model.safetensors');
    writeAll(p, data, ((fd: number, buf: Uint8Array, off: number, len: number) => writeSync(fd, buf, off, Math.min(len, 300))) as typeof writeSync);
    assert.deepEqual(new Uint8Array(rf(p)), data);
    // a disk that fills after 500 bytes
    let written = 0;
    const full = ((fd: number, buf: Uint8Array, off: number, len: number) => {
      if (written >= 500) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      const n = writeSync(fd, buf, off, Math.min(len, 500 - written));
      written += n;
      return n;
    }) as typeof writeSync;
    let caught: unknown;
    try {
      writeAll(j(dir, 'b.safetensors'), data, full);
    } catch (e) {
      caught = e;
    }
    assert.equal((caught as NodeJS.ErrnoException).path, j(dir, 'b.safetensors'));
    const said = diskFullError(caught, (caught as NodeJS.ErrnoException).path!) as Error;
    assert.equal(said.message, `disk full while writing ${j(dir, 'b.safetensors')}`);
  } finally {
    rm(dir, { recursive: true, force: true });
  }
});
