// Step tables are read in a worker thread (src/extension/worker_client.ts): the same columns as a read on the spot, a damaged
// file a clear error naming it, and a reader that hangs or dies ends in an error instead of a frozen host.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readStepTables, writeEpisodeTable, writeTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { TableReader } from '../../../src/extension/worker_client';

// The bundled worker the extension ships (`npm run test:unit` builds first).
const WORKER = resolve(__dirname, '../../../dist/extension/run_worker.js');

function writeRun(n: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-tables-'));
  for (const sub of ['tokens', 'episodes']) mkdirSync(join(dir, sub));
  const f = (g: (i: number) => number) => Float32Array.from({ length: n }, (_, i) => g(i));
  writeTokenTable(stepFile(dir, 'tokens', 3), {
    step: new Int32Array(n).fill(3),
    episode: Int32Array.from({ length: n }, (_, i) => i % 4),
    prompt_idx: new Int32Array(n),
    position: Int32Array.from({ length: n }, (_, i) => i >> 2),
    token_id: Int32Array.from({ length: n }, (_, i) => i % 97),
    token: Array.from({ length: n }, (_, i) => (i % 3 ? ' so' : '7é')),
    logprob: f((i) => -i / n),
    entropy: f((i) => (i % 5) / 2),
    advantage: f((i) => (i % 4) - 1.5),
    weight: f(() => 1),
    effective_advantage: f((i) => (i % 4) - 1.5),
    contribution: f((i) => ((i % 4) - 1.5) * (-i / n)),
    attribution: null,
    importance: Array.from({ length: n }, (_, i) => (i % 7 ? i / n : null)),
    section: Array.from({ length: n }, () => 'think'),
    token_type: Array.from({ length: n }, (_, i) => (i % 3 ? 'filler' : 'reasoning')),
    reward: f(() => 1),
    extra: { importance_ratio: f((i) => 1 + i / n) },
  });
  writeEpisodeTable(stepFile(dir, 'episodes', 3), {
    step: new Int32Array(4).fill(3),
    episode: Int32Array.of(0, 1, 2, 3),
    prompt_idx: new Int32Array(4),
    prompt: ['p', 'p', 'q', 'q'],
    completion: ['a', 'b', 'c', 'd'],
    reward: Float32Array.of(1, 0, 1, 0),
    reward_format: new Float32Array(4),
    reward_answer: new Float32Array(4),
    success: [true, false, true, false],
    advantage: Float32Array.of(1, -1, 1, -1),
    length: new Int32Array(4),
    oracle_span: [null, 'x', null, null],
  });
  return dir;
}

test('the worker returns exactly the columns a direct read returns', async () => {
  const dir = writeRun(20_000);
  const reader = new TableReader(WORKER);
  try {
    const { tokens, episodes } = await reader.step(dir, 3);
    // the step's one reader: token rows in (episode, position) order, checked
    assert.deepEqual({ tokens, episodes }, readStepTables(dir, 3));
    assert.deepEqual(await reader.episodes(dir, 3), episodes);
    // Several reads queue on the one worker and each gets its own answer.
    const again = await Promise.all([reader.episodes(dir, 3), reader.step(dir, 3), reader.episodes(dir, 3)]);
    assert.equal(again[1].tokens.step.length, 20_000);
  } finally {
    reader.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a damaged table is an error naming the file, and the worker goes on serving', async () => {
  const dir = writeRun(2_000);
  const reader = new TableReader(WORKER);
  try {
    const file = stepFile(dir, 'tokens', 3);
    const good = readFileSync(file);
    writeFileSync(file, good.subarray(0, good.length >> 1));
    await assert.rejects(reader.step(dir, 3), (e: Error) => e.message.includes(file) && /truncated or corrupted/.test(e.message));
    writeFileSync(file, good);
    assert.equal((await reader.step(dir, 3)).tokens.step.length, 2_000);
  } finally {
    reader.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a read that hangs times out with the file named; a reader that dies fails its read; the next read starts a new one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-tables-'));
  try {
    const hang = join(dir, 'hang.js');
    writeFileSync(hang, "require('node:worker_threads').parentPort.on('message', () => { for (;;) {} });");
    const slow = new TableReader(hang, 300);
    const t0 = Date.now();
    await assert.rejects(slow.step('/runs/r', 4), /tokens[/\\]step-000004\.arrow took longer than 0\.3 s and was stopped; the file may be damaged/);
    assert.ok(Date.now() - t0 < 5_000);
    slow.dispose();

    const die = join(dir, 'die.js');
    writeFileSync(die, "require('node:worker_threads').parentPort.on('message', () => process.exit(3));");
    const dying = new TableReader(die, 10_000);
    await assert.rejects(dying.episodes('/runs/r', 1), /stopped \(exit 3\)/);
    await assert.rejects(dying.episodes('/runs/r', 1), /stopped \(exit 3\)/, 'a new worker for the next read');
    dying.dispose();
    await assert.rejects(new TableReader(join(dir, 'missing.js')).episodes('/r', 1), /rebuild the extension/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the time limit counts the read, not its wait in the queue: five reads of 200 ms each under a 500 ms limit all succeed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-tables-'));
  try {
    /** A stand-in worker that runs `before` on each request, then answers with the request's step as its episodes. */
    const worker = (name: string, before: string) => {
      const p = join(dir, name);
      const reply = 'parentPort.postMessage({ id: r.id, ok: true, episodes: { step: r.step } })';
      writeFileSync(p, `const { parentPort } = require('node:worker_threads');\nparentPort.on('message', (r) => { ${before}; ${reply}; });`);
      return p;
    };
    const reader = new TableReader(worker('slow.js', 'const t = Date.now() + 200; while (Date.now() < t) {}'), 500);
    const got = await Promise.all([1, 2, 3, 4, 5].map((k) => reader.episodes('/runs/r', k)));
    assert.deepEqual(
      got.map((e) => (e as unknown as { step: number }).step),
      [1, 2, 3, 4, 5],
    );
    // A read that hangs fails alone; the reads queued behind it go to a new worker.
    const once = new TableReader(worker('hang-once.js', 'if (r.step === 9) for (;;) {}'), 300);
    const [a, b] = await Promise.allSettled([once.episodes('/runs/r', 9), once.episodes('/runs/r', 2)]);
    assert.equal(a.status, 'rejected');
    assert.match(String((a as PromiseRejectedResult).reason), /step-000009\.arrow took longer than 0\.3 s/);
    assert.deepEqual((b as PromiseFulfilledResult<unknown>).value, { step: 2 });
    reader.dispose();
    once.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
