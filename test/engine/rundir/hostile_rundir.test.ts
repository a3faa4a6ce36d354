// run.json and metrics.jsonl from older versions, other tools or a bad merge: a reader gets the record or
// the reason it is unreadable, never a crash and never a half-valid record; and one engine per run directory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isUserError } from '../../../src/engine/core/errors';
import { readMetrics, readRunInfo, readRunInfoChecked } from '../../../src/engine/rundir/rundir';
import { acquireRunLock, RUN_LOCK } from '../../../src/engine/rundir/run_lock';

const root = mkdtempSync(join(tmpdir(), 'cl-hostile-run-'));
let k = 0;
function runWith(runJson: string | null, metrics?: string): string {
  const d = join(root, `r${k++}`);
  spawnSync('mkdir', ['-p', d]);
  if (runJson !== null) writeFileSync(join(d, 'run.json'), runJson);
  if (metrics !== undefined) writeFileSync(join(d, 'metrics.jsonl'), metrics);
  return d;
}

const good = { id: 'x', name: 'n', status: 'completed', started: '2026-01-01T00:00:00Z', ended: null, backend: 'wasm', engine_version: '0.1.0' };

test('run.json: each malformed field is named with the value found; a good one reads (unknown keys kept)', () => {
  const cases: [unknown, RegExp][] = [
    [{ ...good, status: 'paused' }, /^status: got "paused"; .*running.*completed/],
    [{ ...good, started: 1767225600 }, /^started: got 1767225600; /],
    [{ ...good, id: null }, /^id: got null; /],
    [{ ...good, last_step: 'three' }, /^last_step: got "three"; /],
    [[1, 2], /^run\.json: /],
    [null, /^run\.json: /],
  ];
  for (const [v, re] of cases) {
    const r = readRunInfoChecked(runWith(JSON.stringify(v)));
    assert.equal(r.ok, false, JSON.stringify(v));
    if (!r.ok) assert.match(r.reason, re);
  }
  const notJson = readRunInfoChecked(runWith('{"id": "x", "status": '));
  assert.deepEqual(notJson, { ok: false, missing: false, reason: 'run.json is not valid JSON' });
  const missing = readRunInfoChecked(runWith(null));
  assert.equal(missing.ok === false && missing.missing, true);
  const ok = readRunInfoChecked(runWith(JSON.stringify({ ...good, provenance: { from: 'x.jsonl' } })));
  assert.ok(ok.ok);
  assert.deepEqual(ok.ok && (ok.info as unknown as { provenance: unknown }).provenance, { from: 'x.jsonl' });
  // A known key is checked: run.json's `imported` (credit-lens import) must say where from and how.
  const bad = readRunInfoChecked(runWith(JSON.stringify({ ...good, imported: { from: 'x.jsonl' } })));
  assert.ok(!bad.ok && /^imported\.source: /.test(bad.reason), JSON.stringify(bad));
  assert.equal(readRunInfo(runWith(JSON.stringify({ ...good, status: 'paused' }))), null);
});

test('metrics.jsonl: null and non-finite values are dropped from their row, rows without a step or phase are dropped', () => {
  const d = runWith(
    JSON.stringify(good),
    [
      '{"step": 1, "phase": "grpo", "reward_mean": null, "loss": 0.5}',
      '{"step": "2", "phase": "grpo", "loss": 1}',
      '{"step": 3, "phase": "warmup", "loss": 1}',
      '{"step": 4, "phase": "eval", "eval_success": 0.25, "note": "x", "bad": {"a": 1}}',
      '[5]',
      '{"step": 6, "phase": "gr',
    ].join('\n'),
  );
  assert.deepEqual(readMetrics(d), [
    { step: 1, phase: 'grpo', loss: 0.5 },
    { step: 4, phase: 'eval', eval_success: 0.25, note: 'x' },
  ]);
});

test('one engine per run directory: a live holder is named, a dead one is stale, another host is named with the fix', async () => {
  const d = runWith(JSON.stringify(good));
  // A real second process holds the lock.
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
  try {
    writeFileSync(join(d, RUN_LOCK), JSON.stringify({ pid: child.pid, host: 'here', started: '' }));
    assert.throws(
      () => acquireRunLock(d, 'here'),
      (e: unknown) => isUserError(e) && e.message.startsWith(`run is already running (pid ${child.pid})`),
    );
  } finally {
    child.kill();
    await new Promise((r) => child.on('exit', r));
  }
  // Its process is gone: the lock is stale and taken over.
  const release = acquireRunLock(d, 'here');
  assert.equal(JSON.parse(readFileSync(join(d, RUN_LOCK), 'utf8')).pid, process.pid);
  assert.throws(() => acquireRunLock(d, 'elsewhere'), /run is already running \(pid \d+ on here\)/);
  release();
  assert.equal(existsSync(join(d, RUN_LOCK)), false);
  // A lock from another host cannot be checked from here: while its heartbeat is fresh it is live, and the error says
  // when it will be taken over.
  writeFileSync(join(d, RUN_LOCK), JSON.stringify({ pid: 1, host: 'node-7', started: '' }));
  assert.throws(
    () => acquireRunLock(d, 'here'),
    (e: unknown) => isUserError(e) && /pid 1 on node-7/.test(e.message) && /taken over once its heartbeat \(last \d+ s ago\) is 600 s old/.test(e.hint ?? ''),
  );
});

// ---- the lock's heartbeat and its take-over: each failed on the code before ----

const age = (path: string, ms: number) => {
  const t = new Date(Date.now() - ms);
  utimesSync(path, t, t);
};

test('a lock whose heartbeat stopped is stale whatever its host: a trainer killed on another node, a renamed host', () => {
  const d = runWith(JSON.stringify(good));
  for (const host of ['node-7', 'here-before-rename']) {
    writeFileSync(join(d, RUN_LOCK), JSON.stringify({ pid: 4242, host, started: '' }));
    age(join(d, RUN_LOCK), 11 * 60_000);
    const release = acquireRunLock(d, 'here');
    assert.equal(JSON.parse(readFileSync(join(d, RUN_LOCK), 'utf8')).host, 'here', `taken over from ${host}`);
    release();
  }
});

test("a live holder with the newcomer's own pid (containers on one host) is not taken over while it beats", () => {
  const d = runWith(JSON.stringify(good));
  writeFileSync(join(d, RUN_LOCK), JSON.stringify({ pid: process.pid, host: 'here', started: '', token: 'another-container' }));
  assert.throws(
    () => acquireRunLock(d, 'here'),
    (e: unknown) => isUserError(e) && e.message.startsWith(`run is already running (pid ${process.pid})`),
  );
  age(join(d, RUN_LOCK), 11 * 60_000);
  acquireRunLock(d, 'here')();
});

test('the holder keeps its lock fresh: the heartbeat touches it while it lives, and stops at release', async () => {
  const d = runWith(JSON.stringify(good));
  const release = acquireRunLock(d, { host: 'here', heartbeatMs: 20 });
  const path = join(d, RUN_LOCK);
  age(path, 60_000);
  await new Promise((r) => setTimeout(r, 120));
  assert.ok(Date.now() - statSync(path).mtimeMs < 1000, 'touched again');
  release();
  assert.equal(existsSync(path), false);
});

test('taking over a stale lock is atomic: 4 processes released at once, 15 times, end with exactly one holder each time', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-lock-race-'));
  const rounds = 15;
  const workers = 4;
  const start = Date.now() + 4000; // after every worker has started
  for (let r = 0; r < rounds; r++) {
    mkdirSync(join(dir, `r${r}`));
    // a stale lock on this host: a pid that has exited
    const dead = Number(spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' }).stdout);
    writeFileSync(join(dir, `r${r}`, RUN_LOCK), JSON.stringify({ pid: dead, host: 'here', started: '' }));
  }
  const script = join(dir, 'worker.ts');
  writeFileSync(
    script,
    `import { acquireRunLock } from ${JSON.stringify(join(__dirname, '../../../src/engine/rundir/run_lock'))};
import { appendFileSync } from 'node:fs';
const [dir, rounds, start] = process.argv.slice(2).map((x, i) => (i ? Number(x) : x)) as [string, number, number];
for (let r = 0; r < rounds; r++) {
  const t = start + r * 400;
  while (Date.now() < t) {} // released together: a busy wait, not a timer
  try {
    acquireRunLock(dir + '/r' + r, 'here'); // held to the end: a second holder would also succeed
    appendFileSync(dir + '/held', r + ' ' + process.pid + '\\n');
  } catch {}
}
`,
  );
  const procs = Array.from({ length: workers }, () =>
    spawn(process.execPath, ['--import', 'tsx', script, dir, String(rounds), String(start)], { stdio: 'inherit' }),
  );
  await Promise.all(procs.map((p) => new Promise((res) => p.on('exit', res))));
  const held = readFileSync(join(dir, 'held'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => Number(l.split(' ')[0]));
  const perRound = Array.from({ length: rounds }, (_, r) => held.filter((x) => x === r).length);
  assert.deepEqual(perRound, Array(rounds).fill(1), `holders per round: ${perRound.join(' ')}`);
});

test('an asynchronous run scan finds what findRunDirs finds, and a huge tree ends on its budget with a reason', async () => {
  const { findRunDirs, findRunDirsAsync } = await import('../../../src/engine/rundir/rundir');
  const { mkdirSync } = await import('node:fs');
  const base = join(root, 'scan');
  for (const p of ['a/r1', 'a/b/r2', 'c/d/e/r3', 'node_modules/r4', '.hidden/r5']) {
    mkdirSync(join(base, p), { recursive: true });
    writeFileSync(join(base, p, 'run.json'), JSON.stringify(good));
  }
  mkdirSync(join(base, 'a/r1/tokens'), { recursive: true });
  const scan = await findRunDirsAsync(base);
  assert.deepEqual(scan, { dirs: findRunDirs(base), truncated: null });
  assert.deepEqual(
    scan.dirs.map((d) => d.slice(base.length + 1)),
    ['a/b/r2', 'a/r1', 'c/d/e/r3'],
  );
  // 3,000 empty folders against a budget of 500 entries: a partial answer and why, not a walk of everything.
  const wide = join(root, 'wide');
  for (let i = 0; i < 3000; i++) mkdirSync(join(wide, `d${i}`, 'x'), { recursive: true });
  const partial = await findRunDirsAsync(wide, { maxEntries: 500 });
  assert.match(partial.truncated ?? '', /stopped after 500 entries/);
  const ctl = new AbortController();
  ctl.abort();
  assert.equal((await findRunDirsAsync(wide, { signal: ctl.signal })).truncated, 'cancelled');
});
