import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AnalysisRunner } from '../../../src/extension/analysis_runner';
import { analyzeArgs, CancelledError, cliError, EngineCli, importArgs, parseAnalyzeReport, probeArgs } from '../../../src/extension/engine_cli';
import type { RunInfo } from '../../../src/protocol/index';

// Stand-ins for dist/engine/cli.js, run with this test's own Node (an absolute nodePath, as a user would set it).
const dir = mkdtempSync(join(tmpdir(), 'cl-cli-'));
const script = (name: string, body: string) => {
  const p = join(dir, name);
  writeFileSync(p, body);
  return p;
};
// The shape of a version 1 report that matters here; the ratio sits under `meta`, as CreditAnalysis declares.
const echoCli = script(
  'echo.js',
  `process.stdout.write(JSON.stringify({ version: 1, meta: { run_dir: process.argv[3], filler_reasoning_ratio: 1.31, args: process.argv.slice(2) }, token_types: {} }));`,
);
const failCli = script('fail.js', `console.error('Error: no token tables in /r\\n    at main (cli.js:1:1)'); process.exit(2);`);
const slowCli = script('slow.js', `setTimeout(() => process.stdout.write('{}'), 30000);`);
const cli = (path: string) => new EngineCli(path, () => process.execPath);
const ended: RunInfo = {
  id: 'a',
  name: 'a',
  status: 'completed',
  started: '2026-11-24T00:00:00Z',
  ended: '2026-11-24T01:00:00Z',
  backend: 'wasm',
  engine_version: '0',
};

test('analyzeArgs passes only the options that are set', () => {
  assert.deepEqual(analyzeArgs('/r'), ['analyze', '/r', '--json', '--probe']);
  assert.deepEqual(analyzeArgs('/r', { from: null, to: null, baselineDir: null }), ['analyze', '/r', '--json', '--probe']);
  // Step 0 is a real step (the eval before GRPO), so it must not be dropped as falsy.
  assert.deepEqual(analyzeArgs('/r', { from: 0, to: 10, baselineDir: '/b' }), [
    'analyze',
    '/r',
    '--json',
    '--probe',
    '--from-step',
    '0',
    '--to-step',
    '10',
    '--baseline',
    '/b',
  ]);
});

test('probeArgs probes one episode with its rollouts, replacing only when asked', () => {
  assert.deepEqual(probeArgs('/r', 4, 9, { rollouts: 8 }), ['probe', '/r', '--step', '4', '--episode', '9', '--rollouts', '8', '--json', '--progress-json']);
  assert.ok(probeArgs('/r', 4, 9, { rollouts: 16, replace: true }).includes('--replace'));
  // creditLens.probe.server: the continuations are sampled on that server
  assert.deepEqual(probeArgs('/r', 4, 9, { rollouts: 8, server: 'http://gpu:30000' }).slice(8, 10), ['--server', 'http://gpu:30000']);
});

test('cliError keeps the message and drops stack frames', () => {
  assert.equal(cliError('Error: bad\n    at x (a.js:1:1)\n    at y (b.js:2:2)\n', 'exit 1'), 'Error: bad');
  assert.equal(cliError('  \n', 'exit 1'), 'exit 1');
});

test('cliError puts the cause first: the error line after the engine logged its backend and memory', () => {
  const stderr = [
    'backend wasm-blas (OpenBLAS, 2 threads)',
    'memory: 1.2 GiB for the model, 3.1 GiB free',
    'error: POST http://127.0.0.1:9/model_info failed 5 times: ECONNREFUSED',
    '',
  ].join('\n');
  assert.equal(cliError(stderr, 'exit 2'), 'POST http://127.0.0.1:9/model_info failed 5 times: ECONNREFUSED');
});

test('parseAnalyzeReport rejects text that is not JSON and JSON that is not a version 1 report', () => {
  assert.throws(() => parseAnalyzeReport('Traceback'), /printed no JSON/);
  assert.throws(() => parseAnalyzeReport('{"version":2,"meta":{},"token_types":{}}'), /not a version 1/);
  assert.throws(() => parseAnalyzeReport('null'), /not a version 1/);
  assert.equal(parseAnalyzeReport('{"version":1,"meta":{"filler_reasoning_ratio":2},"token_types":{}}').meta.filler_reasoning_ratio, 2);
});

test('analyze runs the CLI with its arguments and returns the typed report', async () => {
  const { report, elapsedMs } = await cli(echoCli).analyze('/runs/a', { from: 2 });
  assert.deepEqual((report.meta as unknown as { args: string[] }).args, ['analyze', '/runs/a', '--json', '--probe', '--from-step', '2']);
  assert.ok(elapsedMs >= 0);
});

test('a failing CLI rejects with what it printed, without the stack', async () => {
  await assert.rejects(cli(failCli).analyze('/r'), { message: 'Error: no token tables in /r' });
});

test('aborting kills the process and rejects with CancelledError, long before it would finish', async () => {
  const abort = new AbortController();
  const t0 = Date.now();
  const p = cli(slowCli).analyze('/r', { signal: abort.signal });
  setTimeout(() => abort.abort(), 100);
  await assert.rejects(p, CancelledError);
  // The stand-in prints after 30 s; a kill answers within a few seconds even on a loaded machine.
  assert.ok(Date.now() - t0 < 10_000);
  await assert.rejects(cli(echoCli).analyze('/r', { signal: abort.signal }), CancelledError);
});

test("the sweep table reads the ratio from the report's meta (the key it used to miss), once per ended run", async () => {
  let results = 0;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const warnings: string[] = [];
  const runner = new AnalysisRunner(
    cli(echoCli),
    () => {
      results++;
      resolveDone();
    },
    (m) => warnings.push(m),
  );
  assert.equal(runner.ratio('/runs/a', ended), null); // started, not known yet
  assert.equal(runner.ratio('/runs/a', { ...ended, status: 'running', ended: null }), null); // training: never analysed
  await done;
  assert.equal(runner.ratio('/runs/a', ended), 1.31);
  assert.equal(results, 1);
  assert.deepEqual(warnings, []);
  runner.dispose();
});

// A stand-in import: progress lines on stderr as the engine writes them with --progress-json, a warning in between,
// then the JSON answer; or an error exit with the engine's message.
const importCli = script(
  'import.js',
  `
  const total = 3;
  for (let d = 0; d <= total; d++) console.error(JSON.stringify({ progress: { done: d, total } }));
  console.error('warning: no --tokenizer');
  process.stdout.write(JSON.stringify({ runDir: '/runs/import-x', format: 'verl', records: 3, skipped: 1, steps: [12], problems: [], args: process.argv.slice(2) }));`,
);
const importFail = script('import_fail.js', `console.error('error: import: verl rollouts carry no per-token values; pass --model'); process.exit(2);`);

test('importArgs: the source, --out, JSON answers, and only the options that are set', () => {
  assert.deepEqual(importArgs('/d', { out: '/ws/runs' }), ['import', '/d', '--out', '/ws/runs', '--json', '--progress-json']);
  assert.deepEqual(importArgs('/d', { out: '/o', model: '/m', format: 'trl' }).slice(6), ['--model', '/m', '--format', 'trl']);
  assert.equal(importArgs('/d', { out: '/o', format: 'auto' }).includes('--format'), false);
});

test('importRollouts streams the progress lines and resolves with the JSON answer; a refusal rejects with its message', async () => {
  const seen: [number, number][] = [];
  const r = await cli(importCli).importRollouts(importArgs('/d', { out: '/o' }), (d, t) => seen.push([d, t]));
  assert.deepEqual(seen, [
    [0, 3],
    [1, 3],
    [2, 3],
    [3, 3],
  ]);
  assert.equal(r.runDir, '/runs/import-x');
  assert.equal(r.skipped, 1);
  await assert.rejects(
    cli(importFail).importRollouts(['import', '/d'], () => {}),
    /carry no per-token values; pass --model/,
  );
  const abort = new AbortController();
  const p = cli(slowCli).importRollouts(['import', '/d'], () => {}, abort.signal);
  setTimeout(() => abort.abort(), 100);
  await assert.rejects(p, CancelledError);
});

test('Cancel on Probe This Episode… sends the probe SIGTERM (which it handles as Ctrl-C) and rejects with CancelledError', async () => {
  const got = join(dir, 'probe-signal.txt');
  const probeCli = script(
    'probe.js',
    `process.on('SIGTERM', () => { require('node:fs').writeFileSync(${JSON.stringify(got)}, 'SIGTERM'); process.exit(130); });
     console.error(JSON.stringify({ progress: { done: 1, total: 100 } }));
     setTimeout(() => {}, 30000);`,
  );
  const abort = new AbortController();
  const seen: number[] = [];
  const p = cli(probeCli).probe(
    ['probe', '/r', '--step', '1'],
    (done) => {
      seen.push(done);
      abort.abort();
    },
    abort.signal,
  );
  await assert.rejects(p, CancelledError);
  assert.deepEqual(seen, [1]);
  const { readFileSync } = await import('node:fs');
  assert.equal(readFileSync(got, 'utf8'), 'SIGTERM');
});
