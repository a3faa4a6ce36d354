import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MetricsRow, RunInfo } from '../../../src/protocol';
import { isUserError } from '../../../src/engine/core/errors';
import {
  appendMetrics,
  createRunDir,
  findRunDirs,
  listLoggedSteps,
  openEngineLog,
  readMetrics,
  readRunInfo,
  redactSecrets,
  stepFile,
  updateRunInfo,
  writeRunInfo,
} from '../../../src/engine/rundir/rundir';
import { writeFileAtomic } from '../../../src/engine/core/files';

function withTmp(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rundir-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const info = (over: Partial<RunInfo> = {}): RunInfo => ({
  id: 'r1',
  name: 'countdown-baseline',
  status: 'running',
  started: '2026-01-02T03:04:05.000Z',
  ended: null,
  backend: 'wasm',
  engine_version: '0.1.0',
  ...over,
});

test('createRunDir names the folder <name>-<yyyymmdd-hhmmss> in local time, then -2, -3', () => {
  withTmp((root) => {
    const out = join(root, 'runs'); // does not exist yet: created
    // new Date(y, m, d, h, mi, s) is local time; month 0 = January, so this is 2026-01-02 03:04:05 local.
    const now = new Date(2026, 0, 2, 3, 4, 5);
    const a = createRunDir(out, 'countdown-baseline', now);
    const b = createRunDir(out, 'countdown-baseline', now);
    const c = createRunDir(out, 'countdown-baseline', now);
    assert.equal(a, join(out, 'countdown-baseline-20260102-030405'));
    assert.equal(b, join(out, 'countdown-baseline-20260102-030405-2'));
    assert.equal(c, join(out, 'countdown-baseline-20260102-030405-3'));
    for (const sub of ['tokens', 'episodes', 'checkpoints']) assert.ok(statSync(join(a, sub)).isDirectory(), sub);
    // December 31st 23:59:59 checks the month is 1-based and every field is two digits
    assert.equal(createRunDir(out, 'x', new Date(2025, 11, 31, 23, 59, 59)), join(out, 'x-20251231-235959'));
  });
});

test('createRunDir refuses a name that is a path', () => {
  withTmp((root) => {
    assert.throws(
      () => createRunDir(root, '../escape'),
      (e) => isUserError(e) && /folder name/.test(e.message),
    );
    assert.throws(() => createRunDir(root, ''), isUserError);
  });
});

test('run.json: write, read, update; a missing or half-written file reads as null', () => {
  withTmp((dir) => {
    assert.equal(readRunInfo(dir), null);
    writeRunInfo(dir, info());
    assert.deepEqual(readRunInfo(dir), info());
    const next = updateRunInfo(dir, { status: 'completed', ended: '2026-01-02T04:00:00.000Z', last_step: 100 });
    assert.deepEqual(next, info({ status: 'completed', ended: '2026-01-02T04:00:00.000Z', last_step: 100 }));
    assert.deepEqual(readRunInfo(dir), next);
    assert.deepEqual(readdirSync(dir), ['run.json'], 'no .tmp-* file left behind');

    const full = readFileSync(join(dir, 'run.json'), 'utf8');
    writeFileSync(join(dir, 'run.json'), full.slice(0, full.length >> 1)); // torn copy
    assert.equal(readRunInfo(dir), null);
    writeFileSync(join(dir, 'run.json'), '[1, 2]');
    assert.equal(readRunInfo(dir), null);
    assert.throws(
      () => updateRunInfo(dir, { status: 'failed' }),
      (e) => isUserError(e) && e.message.includes(join(dir, 'run.json')),
    );
  });
});

test('writeFileAtomic replaces the whole file', () => {
  withTmp((dir) => {
    const p = join(dir, 'f.txt');
    writeFileAtomic(p, 'a much longer first version');
    writeFileAtomic(p, 'short', { fsync: true });
    assert.equal(readFileSync(p, 'utf8'), 'short');
    assert.deepEqual(readdirSync(dir), ['f.txt']);
  });
});

const row = (step: number, phase: MetricsRow['phase'] = 'grpo', extra: Partial<MetricsRow> = {}): MetricsRow => ({
  step,
  phase,
  reward_mean: step / 10,
  ...extra,
});

test('metrics: one JSON line per row; a torn last line is skipped and not glued to the next row', () => {
  withTmp((dir) => {
    assert.deepEqual(readMetrics(dir), []);
    appendMetrics(dir, row(1, 'grpo', { 'attribution/attribution_entropy': 1.5 }));
    appendMetrics(dir, row(2));
    assert.equal(readFileSync(join(dir, 'metrics.jsonl'), 'utf8').split('\n').length, 3, 'two lines plus the final newline');
    assert.deepEqual(readMetrics(dir), [row(1, 'grpo', { 'attribution/attribution_entropy': 1.5 }), row(2)]);

    appendFileSync(join(dir, 'metrics.jsonl'), '{"step":3,"phase":"grp'); // a crash in mid-write
    assert.deepEqual(
      readMetrics(dir).map((r) => r.step),
      [1, 2],
    );
    appendMetrics(dir, row(3)); // the resumed or continuing writer
    assert.deepEqual(
      readMetrics(dir).map((r) => r.step),
      [1, 2, 3],
    );
  });
});

test('stepFile pads to six digits; listLoggedSteps sorts numerically and ignores in-progress writes', () => {
  withTmp((dir) => {
    assert.equal(stepFile(dir, 'tokens', 1), join(dir, 'tokens', 'step-000001.arrow'));
    assert.equal(stepFile(dir, 'episodes', 1234567), join(dir, 'episodes', 'step-1234567.arrow'));
    assert.deepEqual(listLoggedSteps(dir), [], 'no tokens/ folder yet');
    mkdirSync(join(dir, 'tokens'));
    for (const s of [10, 2, 1234567]) writeFileSync(stepFile(dir, 'tokens', s), '');
    writeFileSync(stepFile(dir, 'tokens', 11) + '.tmp-99', '');
    writeFileSync(join(dir, 'tokens', 'notes.txt'), '');
    assert.deepEqual(listLoggedSteps(dir, 'tokens'), [2, 10, 1234567]);
    assert.deepEqual(listLoggedSteps(dir, 'episodes'), []);
  });
});

test('findRunDirs finds folders with run.json within maxDepth, not inside runs or hidden folders', () => {
  withTmp((root) => {
    const mk = (rel: string) => {
      mkdirSync(join(root, rel), { recursive: true });
      writeFileSync(join(root, rel, 'run.json'), '{}');
    };
    mk('runs/a-20260101-000000');
    mk('runs/b-20260101-000000');
    mk('runs/a-20260101-000000/checkpoints/nested'); // inside a run: not searched
    mk('exp/sweep/runs/c-20260101-000000'); // depth 4
    mk('exp/sweep/runs/deeper/d-20260101-000000'); // depth 5
    mk('.hidden/e');
    mk('node_modules/pkg/f');
    mkdirSync(join(root, 'runs', 'empty'));
    assert.deepEqual(findRunDirs(root), [
      join(root, 'exp/sweep/runs/c-20260101-000000'),
      join(root, 'runs/a-20260101-000000'),
      join(root, 'runs/b-20260101-000000'),
    ]);
    assert.deepEqual(findRunDirs(root, 2), [join(root, 'runs/a-20260101-000000'), join(root, 'runs/b-20260101-000000')]);
    assert.deepEqual(findRunDirs(join(root, 'runs/b-20260101-000000')), [join(root, 'runs/b-20260101-000000')], 'a run itself');
    assert.deepEqual(findRunDirs(join(root, 'missing')), []);
  });
});

test('redactSecrets hides every occurrence, longest secret first, and ignores empty ones', () => {
  assert.equal(redactSecrets('key=sk-abc123 again sk-abc123', ['sk-abc123']), 'key=*** again ***');
  // 'abc' is inside 'sk-abc123': replacing the long one first leaves no 'sk-' or '123' fragment behind
  assert.equal(redactSecrets('sk-abc123 / abc', ['abc', 'sk-abc123', '']), '*** / ***');
  assert.equal(redactSecrets('nothing here', []), 'nothing here');
});

test('engine.log appends timestamped, redacted lines and ignores writes after close', () => {
  withTmp((dir) => {
    const log = openEngineLog(dir, { secrets: ['s3cr3t-key'] });
    log.write('info', 'backend wasm');
    log.write('error', 'oracle failed: Authorization: Bearer s3cr3t-key\n  at call()');
    log.close();
    log.write('warn', 'after close');
    const again = openEngineLog(dir); // a resumed run appends
    again.write('debug', 'resumed');
    again.close();
    const lines = readFileSync(join(dir, 'engine.log'), 'utf8').split('\n');
    assert.equal(lines.length, 5, 'four lines plus the final newline');
    assert.match(lines[0], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO  backend wasm$/);
    assert.match(lines[1], /^\S+Z ERROR oracle failed: Authorization: Bearer \*\*\*$/);
    assert.equal(lines[2], '      at call()', 'continuation lines are indented');
    assert.match(lines[3], /^\S+Z DEBUG resumed$/);
    assert.ok(!readFileSync(join(dir, 'engine.log'), 'utf8').includes('s3cr3t'));
  });
});

test("MLflow's credentials are masked in every engine.log line, whoever logs them: the token, the password, the Basic header", () => {
  withTmp((dir) => {
    const saved = { ...process.env };
    process.env.MLFLOW_TRACKING_TOKEN = 'tok-9f8e7d';
    process.env.MLFLOW_TRACKING_USERNAME = 'ada';
    process.env.MLFLOW_TRACKING_PASSWORD = 'pw-1a2b3c';
    try {
      // no secrets named by the caller: an importer's log, a tracker's warning
      const log = openEngineLog(dir);
      const basic = Buffer.from('ada:pw-1a2b3c').toString('base64');
      log.write('warn', 'MLflow: 401 from the proxy: refused "Authorization: Bearer tok-9f8e7d"');
      log.write('warn', `MLflow: 403: refused "Authorization: Basic ${basic}" (password pw-1a2b3c)`);
      log.close();
      const text = readFileSync(join(dir, 'engine.log'), 'utf8');
      for (const s of ['tok-9f8e7d', 'pw-1a2b3c', basic]) assert.ok(!text.includes(s), `${s} reached engine.log`);
      assert.match(text, /Bearer \*\*\*/);
      assert.match(text, /Basic \*\*\*/);
    } finally {
      for (const k of ['MLFLOW_TRACKING_TOKEN', 'MLFLOW_TRACKING_USERNAME', 'MLFLOW_TRACKING_PASSWORD']) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });
});
