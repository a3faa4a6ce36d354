// prime-rl's trace stream (its file monitor since 2026-09), built from the structures that write it: prime-rl
// src/prime_rl/monitors/file/monitor.py (stream.jsonl: one verifiers Episode.to_record() a line, nulls left out;
// stream.index.jsonl beside it), traces/update.py (make_update: {version, trace_id, info, branches: [{index, <field>:
// full-length stream with nulls}]}, fold_trace_updates), orchestrator/annotations.py (info.kind, info.arrival,
// info.ship.step) and trainer/rl/annotations.py (trainer_logprobs and entropies, the first value null), and verifiers
// v1/graph.py (MessageNode: token_ids, mask, compact logprobs). Read by `import`, with no model. Sealed chunks are
// compressed as traces/chunks.py seal() does it, by pyzstd's SeekableZstdFile (pip install -e "python[prime]").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { followImport } from '../../../src/engine/import/follow';
import { readImport } from '../../../src/engine/import/formats';
import { importRollouts } from '../../../src/engine/import/import';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { listLoggedSteps, stepFile } from '../../../src/engine/rundir/rundir';

const node = (o: Record<string, unknown>) => ({ timestamp: 1.7e9, ...o });

/** One Episode record: a trace whose assistant turn (ids 8, 9, 10; 8 not sampled) answers a prompt (5, 6, 7). */
function episode(id: string, group: string, kind: 'train' | 'eval', arrival: number, score: number) {
  return {
    id: `e-${id}`,
    env: { id: 'gsm8k', name: 'gsm8k' },
    task: { type: 'Task', data: { question: '2+2' }, key: `k-${group}`, hash: 'h' },
    group: { id: group },
    run: { type: 'train', id: 'run1', name: 'run1', work: { type: kind, step: arrival, policy: { start: arrival - 1, end: arrival - 1 } } },
    ok: true,
    errors: [],
    traces: [
      {
        version: 1,
        id: `t-${id}`,
        agent: { name: 'agent', trainable: true, config: {} },
        nodes: [
          node({
            parent: null,
            message: { role: 'user', content: 'What is 2+2?' },
            sampled: false,
            token_ids: [5, 6, 7],
            mask: [false, false, false],
            logprobs: [],
          }),
          node({
            parent: 0,
            message: { role: 'assistant', content: '4' },
            sampled: true,
            token_ids: [8, 9, 10],
            mask: [false, true, true],
            logprobs: [-0.5, -0.25],
          }),
        ],
        rewards: { correct: { score, weight: 1 } },
        metrics: {},
        info: { kind, dispatch: { step: arrival, time: 1.7e9 }, arrival: { step: arrival, time: 1.7e9 } },
        is_completed: true,
        ok: true,
        stop_condition: 'completed',
      },
    ],
  };
}

/** An annotation line: a branch's streams run over the branch's 6 token ids (prompt node 3, assistant node 3). */
const update = (traceId: string, info: object, fields: Record<string, (number | null)[]>) => ({
  version: 1,
  trace_id: traceId,
  info,
  branches: [{ index: 0, ...fields }],
});

function writeRun(dir: string): string {
  const traces = join(dir, 'run', 'monitors', 'file', 'traces');
  mkdirSync(join(traces, 'annotations'), { recursive: true });
  const lines = (rows: unknown[]) => rows.map((x) => JSON.stringify(x)).join('\n') + '\n';
  writeFileSync(
    join(traces, 'stream.jsonl'),
    lines([episode('a', 'g1', 'train', 3, 1), episode('b', 'g1', 'train', 3, 0), episode('c', 'g9', 'eval', 3, 1), episode('d', 'g2', 'train', 4, 1)]),
  );
  writeFileSync(join(traces, 'stream.index.jsonl'), lines([{ line: 1, offset: 0, id: 'e-a', kind: 'train' }]));
  writeFileSync(
    join(traces, 'annotations', 'orch.jsonl'),
    lines([
      update('t-a', { effective: true, ship: { step: 2, time: 1.7e9 }, advantage: 0.5 }, { advantages: [null, null, null, null, 0.5, 0.5] }),
      update('t-b', { effective: true, ship: { step: 2, time: 1.7e9 }, advantage: -0.5 }, { advantages: [null, null, null, null, -0.5, -0.5] }),
      // a later update of the same trace wins
      update('t-b', {}, { advantages: [null, null, null, null, -0.75, -0.5] }),
    ]),
  );
  writeFileSync(
    join(traces, 'annotations', 'trainer.jsonl'),
    lines([update('t-a', {}, { trainer_logprobs: [null, -1, -1, -1, -0.625, -0.125], entropies: [null, 1, 1, 1, 0.75, 0.25] })]),
  );
  return join(dir, 'run');
}

test("prime-rl's trace stream: each trace at the step that trained it, with its annotations' advantages, trainer log-probs and entropies; evals left out", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-prime-stream-'));
  const run = writeRun(dir);
  const r = await readImport(run);
  assert.equal(r.format, 'prime');
  assert.deepEqual(
    r.files.map((f) => f.slice(run.length + 1)),
    [join('monitors', 'file', 'traces', 'stream.jsonl')],
    'the stream only: not its index, not the annotations',
  );
  assert.equal(r.records.length, 2, 'a and b trained at step 2; c is an eval, d has no ship annotation yet');
  const [a, b] = r.records;
  assert.deepEqual([a.step, a.group, a.reward], [2, 'g1', 1]);
  assert.deepEqual(a.tokens!.promptIds, [5, 6, 7, 8]);
  assert.deepEqual(a.tokens!.ids, [9, 10]);
  assert.deepEqual(a.tokens!.advantage, [0.5, 0.5]);
  assert.deepEqual(a.tokens!.logprob, [-0.625, -0.125], "the trainer's log-probs over the sampler's");
  assert.deepEqual(a.tokens!.entropy, [0.75, 0.25]);
  assert.deepEqual(b.tokens!.advantage, [-0.75, -0.5], 'the newest update wins');
  assert.deepEqual(b.tokens!.logprob, [-0.5, -0.25], "no trainer annotation: the sampler's");
  assert.equal(b.tokens!.entropy, null);
  assert.equal(r.problems.length, 1);
  assert.match(r.problems[0].reason, /trace "t-d": not trained yet, or its annotations are missing \(no info\.ship\.step/);
  // imported with no model: the step's tables hold the annotated values
  const imp = await importRollouts({ source: run, out: join(dir, 'runs'), log: () => {} });
  assert.deepEqual(listLoggedSteps(imp.runDir), [2]);
  const t = readTokenTable(stepFile(imp.runDir, 'tokens', 2));
  assert.deepEqual(
    [...t.effective_advantage].map((x) => Math.round(x * 1e6) / 1e6),
    [0.5, 0.5, -0.75, -0.5],
  );
  assert.deepEqual([...t.logprob], [-0.625, -0.125, -0.5, -0.25]);
});

const PYTHON = process.env.CREDIT_LENS_PYTHON ?? 'python3';
const jsonl = (rows: unknown[]) => rows.map((x) => JSON.stringify(x)).join('\n') + '\n';

/** prime-rl's seal(): the chunk compressed beside itself in independent frames with a seek table (here 512-byte frames). */
function seal(path: string, { keepPlain = false } = {}): void {
  const py = [
    'import pathlib, shutil, sys, pyzstd',
    'src = pathlib.Path(sys.argv[1])',
    "with open(src, 'rb') as a, pyzstd.SeekableZstdFile(str(src) + '.zst', 'wb', level_or_option=3, max_frame_content_size=512) as b:",
    '    shutil.copyfileobj(a, b)',
    "if sys.argv[2] == 'drop': src.unlink()",
  ].join('\n');
  const r = spawnSync(PYTHON, ['-c', py, path, keepPlain ? 'keep' : 'drop'], { encoding: 'utf8' });
  assert.equal(r.status, 0, `pyzstd failed (pip install -e "python[prime]"):\n${r.stderr}`);
}

const ship = (id: string, step: number, adv: number) =>
  update(`t-${id}`, { effective: true, ship: { step, time: 1.7e9 }, advantage: adv }, { advantages: [null, null, null, null, adv, adv] });

test('sealed chunks (.jsonl.zst) read as the live ones: a chunk caught mid-seal once, a torn twin and a seal in progress left out', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-prime-zst-'));
  const traces = join(dir, 'run', 'monitors', 'file', 'traces');
  mkdirSync(join(traces, 'stream'), { recursive: true });
  mkdirSync(join(traces, 'annotations', 'orch'), { recursive: true });
  const chunk = (n: number) => join(traces, 'stream', `0000${n}.jsonl`);
  writeFileSync(chunk(0), jsonl([episode('a', 'g1', 'train', 2, 1), episode('b', 'g1', 'train', 2, 0)]));
  writeFileSync(chunk(1), jsonl([episode('c', 'g2', 'train', 3, 1), episode('d', 'g2', 'train', 3, 0)]));
  writeFileSync(chunk(2), jsonl([episode('e', 'g3', 'train', 4, 1)]));
  seal(chunk(0)); // sealed: the .zst alone
  seal(chunk(1), { keepPlain: true }); // caught between the twin's rename and the plain file's removal
  writeFileSync(chunk(2) + '.zst.tmp', 'a seal in progress'); // never a data file
  const orch = (n: number) => join(traces, 'annotations', 'orch', `0000${n}.jsonl`);
  writeFileSync(orch(0), jsonl([ship('a', 2, 0.5), ship('b', 2, -0.5), ship('c', 3, 0.25)]));
  writeFileSync(orch(1), jsonl([ship('d', 3, -0.25), ship('e', 4, 0.75)]));
  seal(orch(0));
  const r = await readImport(join(dir, 'run'));
  assert.deepEqual(
    r.files.map((f) => f.slice(traces.length + 1)),
    ['stream/00000.jsonl.zst', 'stream/00001.jsonl', 'stream/00002.jsonl'].map((f) => join(...f.split('/'))),
  );
  assert.deepEqual(r.problems, []);
  assert.deepEqual(
    r.records.map((x) => [x.step, x.tokens!.advantage[0]]),
    [
      [2, 0.5],
      [2, -0.5],
      [3, 0.25],
      [3, -0.25],
      [4, 0.75],
    ],
    'every trace once, with the advantage of its sealed or live annotation',
  );
  // a sealed chunk that is not whole zstd is a problem naming it; the other chunks still import
  writeFileSync(join(traces, 'stream', '00003.jsonl.zst'), Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3]));
  const torn = await readImport(join(dir, 'run'));
  assert.equal(torn.records.length, 5);
  assert.match(torn.problems.map((p) => `${p.file}: ${p.reason}`).join('\n'), /00003\.jsonl\.zst: cannot read the file: not a whole Zstandard file/);
});

test('--follow holds a trace read before its ship annotation and imports it at its step once the annotation lands; one never annotated is skipped at the end', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-prime-hold-'));
  const traces = join(dir, 'run', 'monitors', 'file', 'traces');
  mkdirSync(join(traces, 'annotations'), { recursive: true });
  const stream = join(traces, 'stream.jsonl');
  const orch = join(traces, 'annotations', 'orch.jsonl');
  // a and b trained at step 2; c arrived but is not shipped yet
  writeFileSync(stream, jsonl([episode('a', 'g1', 'train', 2, 1), episode('b', 'g1', 'train', 2, 0), episode('c', 'g2', 'train', 2, 1)]));
  writeFileSync(orch, jsonl([ship('a', 2, 0.5), ship('b', 2, -0.5)]));
  const logs: string[] = [];
  const seen: number[] = [];
  const later = (async () => {
    await new Promise((r) => setTimeout(r, 1500));
    // the orchestrator ships c with step 3; the stream itself is not written to
    appendFileSync(orch, jsonl([ship('c', 3, 0.25)]));
    await new Promise((r) => setTimeout(r, 1000));
    // d arrives and is never shipped before the follow ends
    appendFileSync(stream, jsonl([episode('d', 'g3', 'train', 4, 0)]));
  })();
  const r = await followImport({
    source: join(dir, 'run'),
    out: join(dir, 'runs'),
    untilIdle: 3,
    settleMs: 800,
    pollMs: 100,
    log: (_, m) => logs.push(m),
    onStep: (s) => seen.push(s),
  });
  await later;
  assert.deepEqual(seen, [2, 3], 'step 2 once whole, step 3 once c was shipped');
  assert.equal(r.records, 3);
  assert.deepEqual(readdirSync(join(r.runDir, 'episodes')).sort(), ['step-000002.arrow', 'step-000003.arrow']);
  const t = readTokenTable(stepFile(r.runDir, 'tokens', 3));
  assert.deepEqual(
    [...t.effective_advantage].map((x) => Math.round(x * 1e6) / 1e6),
    [0.25, 0.25],
    "c's tokens with its shipped advantage",
  );
  assert.ok(
    logs.some((m) => /stream\.jsonl: 1 row waits for its annotations/.test(m)),
    logs.join('\n'),
  );
  assert.deepEqual(
    r.problems.map((p) => p.reason),
    ['trace "t-d": not trained yet, or its annotations are missing (no info.ship.step in annotations/orch)'],
    'held, then skipped when the follow ended: c is no problem',
  );
});
