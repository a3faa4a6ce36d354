import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isUserError } from '../../../src/engine/core/errors';
import { checkpointDir, latestCheckpoint, listCheckpoints, loadCheckpoint, saveCheckpoint, type CheckpointParts } from '../../../src/engine/rundir/checkpoint';
import { readSafetensors } from '../../../src/engine/model/safetensors';

function withRun(fn: (runDir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'cl-ckpt-'));
  mkdirSync(join(dir, 'checkpoints'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Tensor values are float32-exact (small integers and binary fractions), so equality after the round trip is exact.
function parts(step: number, withHead = false): CheckpointParts {
  return {
    model: {
      'embed.weight': { shape: [3, 2], data: Float32Array.from([1, 2, 3, 4, 5, step]) },
      'norm.weight': { shape: [2], data: Float32Array.from([0.5, -0.25]) },
    },
    ...(withHead ? { head: { v: { shape: [2], data: Float32Array.from([0.125, -8]) }, b: { shape: [1], data: Float32Array.from([0]) } } } : {}),
    optimizer: {
      name: 'adam',
      step,
      state: {
        'm/embed.weight': { shape: [3, 2], data: new Float32Array(6).fill(0.5) },
        'v/embed.weight': { shape: [3, 2], data: new Float32Array(6).fill(0.25) },
      },
    },
    meta: { phase: 'grpo', rng: [1, 2, 3, 4], config_hash: 'abc', metrics: { reward_mean: 0.5 } },
  };
}

const plain = (m: Record<string, { shape: number[]; data: Float32Array }>) =>
  Object.fromEntries(Object.entries(m).map(([k, t]) => [k, { shape: t.shape, data: Array.from(t.data) }]));

test('save then load returns the same model, head, optimizer state and meta', () => {
  withRun((run) => {
    const p = parts(25, true);
    const dir = saveCheckpoint(run, 25, p);
    assert.equal(dir, join(run, 'checkpoints', 'step-000025'));
    assert.deepEqual(readdirSync(dir).sort(), ['head.safetensors', 'meta.json', 'model.safetensors', 'optimizer.safetensors']);
    const back = loadCheckpoint(dir);
    assert.equal(back.step, 25);
    assert.equal(back.dir, dir);
    assert.deepEqual(plain(back.model), plain(p.model));
    assert.deepEqual(plain(back.head!), plain(p.head!));
    assert.equal(back.optimizer.name, 'adam');
    assert.equal(back.optimizer.step, 25);
    assert.deepEqual(plain(back.optimizer.state), plain(p.optimizer.state));
    assert.deepEqual(back.meta, p.meta);
    // model.safetensors is an ordinary safetensors file that the shared reader opens on its own
    assert.deepEqual(readSafetensors(join(dir, 'model.safetensors')).tensors['embed.weight'].shape, [3, 2]);
    // no head given: no head file and no head in the result
    const noHead = loadCheckpoint(saveCheckpoint(run, 26, parts(26)));
    assert.equal(noHead.head, undefined);
  });
});

test('keeps only the newest K checkpoints; latestCheckpoint is the highest step', () => {
  withRun((run) => {
    for (const s of [5, 10, 15, 20]) saveCheckpoint(run, s, parts(s));
    assert.deepEqual(
      listCheckpoints(run).map((c) => c.step),
      [10, 15, 20],
    ); // default K = 3
    // Past six digits the names stop sorting as text ('step-1000000' < 'step-999999'): order is by number.
    saveCheckpoint(run, 999_999, parts(1));
    saveCheckpoint(run, 1_000_000, parts(2), { keep: 2 });
    assert.deepEqual(
      listCheckpoints(run).map((c) => c.step),
      [999_999, 1_000_000],
    );
    assert.equal(latestCheckpoint(run), join(run, 'checkpoints', 'step-1000000'));
  });
});

test('a leftover .tmp-* folder from a crashed save is ignored, and removed once its writer is dead', () => {
  withRun((run) => {
    saveCheckpoint(run, 10, parts(10));
    // A crash during the save of step 20, by a process that no longer exists (pid beyond Linux's pid_max
    // of 2^22), and a save in progress by a live process (our parent).
    const dead = join(run, 'checkpoints', 'step-000020.tmp-999999999');
    const live = join(run, 'checkpoints', `step-000030.tmp-${process.ppid}`);
    for (const d of [dead, live]) {
      mkdirSync(d);
      writeFileSync(join(d, 'model.safetensors'), 'half');
    }
    assert.equal(latestCheckpoint(run), checkpointDir(run, 10));
    assert.deepEqual(
      listCheckpoints(run).map((c) => c.step),
      [10],
    );

    saveCheckpoint(run, 15, parts(15));
    const names = readdirSync(join(run, 'checkpoints')).sort();
    assert.deepEqual(names, ['step-000010', 'step-000015', `step-000030.tmp-${process.ppid}`]);
  });
});

test('saving a step again replaces its checkpoint whole', () => {
  withRun((run) => {
    saveCheckpoint(run, 25, parts(25, true));
    const p = parts(25);
    p.meta = { phase: 'grpo', stopped: true };
    saveCheckpoint(run, 25, p);
    const back = loadCheckpoint(checkpointDir(run, 25));
    assert.deepEqual(back.meta, { phase: 'grpo', stopped: true });
    assert.equal(back.head, undefined, 'the old head file did not survive');
    assert.deepEqual(readdirSync(join(run, 'checkpoints')), ['step-000025']);
  });
});

test('a tensor whose data does not fill its shape is refused before anything is written', () => {
  withRun((run) => {
    const p = parts(1);
    p.model['bad'] = { shape: [2, 3], data: new Float32Array(5) };
    assert.throws(() => saveCheckpoint(run, 1, p), /bad: shape \[2,3\] holds 6 values but data has 5/);
    assert.deepEqual(readdirSync(join(run, 'checkpoints')), []);
  });
});

function assertCorrupted(dir: string, what: RegExp, previous: string | null): void {
  assert.throws(
    () => loadCheckpoint(dir),
    (e) => {
      assert.ok(isUserError(e), `expected a UserError, got ${e}`);
      assert.ok(e.message.includes(dir), `message names the folder: ${e.message}`);
      assert.match(e.message, what);
      if (previous) assert.ok(e.message.includes(`previous checkpoint ${previous}`), e.message);
      else assert.match(e.message, /no earlier checkpoint/);
      return true;
    },
  );
}

test('a truncated model.safetensors is a UserError naming the folder and the previous checkpoint', () => {
  withRun((run) => {
    const prev = saveCheckpoint(run, 25, parts(25));
    const dir = saveCheckpoint(run, 50, parts(50));
    const p = join(dir, 'model.safetensors');
    truncateSync(p, statSync(p).size - 4);
    assertCorrupted(dir, /model\.safetensors is \d+ bytes but was saved with \d+/, prev);
    truncateSync(p, 3);
    assertCorrupted(dir, /model\.safetensors/, prev);
  });
});

test('a safetensors file damaged in place (same size) is reported through the reader', () => {
  withRun((run) => {
    const dir = saveCheckpoint(run, 25, parts(25));
    const p = join(dir, 'optimizer.safetensors');
    const bytes = readFileSync(p);
    bytes.fill(0xff, 0, 8); // header length becomes 2^64 − 1
    writeFileSync(p, bytes);
    assertCorrupted(dir, /optimizer\.safetensors cannot be read/, null);
  });
});

test('garbage or missing meta.json, or a missing file, is a UserError naming the folder', () => {
  withRun((run) => {
    const first = saveCheckpoint(run, 10, parts(10));
    const dir = saveCheckpoint(run, 20, parts(20));
    writeFileSync(join(dir, 'meta.json'), '{"format": "credit-lens-checkpoint", "st');
    assertCorrupted(dir, /meta\.json is not valid JSON/, first);
    writeFileSync(join(dir, 'meta.json'), '{"format": "credit-lens-checkpoint"}');
    assertCorrupted(dir, /meta\.json lacks/, first);
    rmSync(join(dir, 'meta.json'));
    assertCorrupted(dir, /meta\.json is missing/, first);

    rmSync(join(first, 'optimizer.safetensors'));
    assertCorrupted(first, /optimizer\.safetensors is missing/, null);

    assert.throws(
      () => loadCheckpoint(join(run, 'checkpoints', 'step-000099')),
      (e) => isUserError(e) && /does not exist/.test(e.message),
    );
  });
});
