// Hostile and damaged safetensors headers: each is a UserError that names the file and says what is
// wrong — never "internal error", never a name that reaches Object.prototype — and resume falls back to the
// newest checkpoint that still loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isUserError } from '../../../src/engine/core/errors';
import { readSafetensors, writeSafetensors } from '../../../src/engine/model/safetensors';
import { loadLatestGoodCheckpoint, saveCheckpoint } from '../../../src/engine/rundir/checkpoint';

const dir = mkdtempSync(join(tmpdir(), 'cl-st-'));

const parts = (step: number) => ({
  model: { w: { shape: [2], data: Float32Array.from([step, 1]) } },
  optimizer: { name: 'adam', step, state: { 'm/w': { shape: [2], data: new Float32Array(2) } } },
  meta: { phase: 'grpo' },
});

/** A file with the given header JSON text and `dataBytes` zero bytes of data. */
function withHeader(name: string, header: string, dataBytes = 16): string {
  const h = Buffer.from(header, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  const p = join(dir, name);
  writeFileSync(p, Buffer.concat([len, h, Buffer.alloc(dataBytes)]));
  return p;
}

function rejects(p: string, re: RegExp): void {
  assert.throws(
    () => readSafetensors(p),
    (e: unknown) => {
      assert.ok(isUserError(e), `a UserError, got ${(e as Error)?.stack}`);
      assert.ok(e.message.includes(p), `names the file: ${e.message}`);
      assert.match(e.message, re);
      return true;
    },
  );
}

test('headers that are not an object of tensors name the file and the fault', () => {
  rejects(withHeader('null.st', 'null'), /expected a JSON object, got null/);
  rejects(withHeader('array.st', '[1,2]'), /got an array/);
  rejects(withHeader('num.st', '42'), /got number/);
  rejects(withHeader('entry-null.st', '{"w": null}'), /tensor w is not an object/);
  rejects(withHeader('dtype.st', '{"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}}'), /dtype "Q4"/);
  rejects(withHeader('meta.st', '{"__metadata__": [1]}'), /__metadata__ is not an object/);
});

test('negative, fractional and inconsistent shapes and offsets are refused before any data is read', () => {
  rejects(withHeader('neg-shape.st', '{"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}'), /shape \[-2\]/);
  rejects(withHeader('frac-shape.st', '{"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 6]}}'), /shape \[1.5\]/);
  rejects(withHeader('neg-off.st', '{"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}'), /data_offsets \[-8,0\]/);
  rejects(withHeader('frac-off.st', '{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0.5, 8.5]}}'), /data_offsets/);
  rejects(withHeader('reversed.st', '{"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}}'), /begin ≤ end/);
  rejects(withHeader('span.st', '{"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}'), /span 8 bytes .* needs 12/);
  rejects(withHeader('beyond.st', '{"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}', 16), /ends at byte 32 .* holds 16/);
  // A header length past the end of the file (a few flipped bytes in the length field).
  const p = join(dir, 'len.st');
  const b = Buffer.alloc(24);
  b.writeBigUInt64LE(1000n);
  writeFileSync(p, b);
  rejects(p, /header length 1000, file size 24/);
});

test('__proto__ and other prototype names are refused; a valid file still reads', () => {
  rejects(withHeader('proto.st', '{"__proto__": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'), /"__proto__" is not allowed/);
  rejects(withHeader('ctor.st', '{"constructor": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'), /"constructor" is not allowed/);
  assert.equal(({} as Record<string, unknown>).dtype, undefined, 'Object.prototype untouched');
  const ok = join(dir, 'ok.st');
  writeSafetensors(ok, { w: { shape: [2], data: Float32Array.from([1.5, -2]) } }, { metadata: { note: 'x' } });
  const back = readSafetensors(ok);
  assert.deepEqual(Array.from(back.tensors.w.data), [1.5, -2]);
  assert.equal(back.metadata.note, 'x');
});

test('resume falls back to the newest checkpoint that loads, and says which it skipped and why', () => {
  const run = join(dir, 'run');
  mkdirSync(join(run, 'checkpoints'), { recursive: true });
  saveCheckpoint(run, 2, parts(2));
  const newest = saveCheckpoint(run, 4, parts(4));
  // Damage the newest one's model header in place (same size, so the size check passes and the header check must catch it).
  const mp = join(newest, 'model.safetensors');
  const bytes = readFileSync(mp);
  const text = bytes.toString('latin1').replace('"shape":[2]', '"shape":[9]');
  writeFileSync(mp, Buffer.from(text, 'latin1'));
  const r = loadLatestGoodCheckpoint(run)!;
  assert.equal(r.checkpoint.step, 2);
  assert.equal(r.skipped.length, 1);
  assert.equal(r.skipped[0].dir, newest);
  assert.match(r.skipped[0].reason, /shape \[9\]/);
  // None left: one error listing every checkpoint's fault.
  rmSync(join(run, 'checkpoints', 'step-000002', 'meta.json'));
  assert.throws(() => loadLatestGoodCheckpoint(run), /no checkpoint can be loaded:[\s\S]*shape \[9\][\s\S]*meta.json is missing/);
});

/** The pid of a process that has exited: a writer killed mid-save. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
  return Number(r.stdout.trim());
}

test('a kill between the two renames that replace a checkpoint loses nothing: the complete new one, else the old one, takes its name', () => {
  for (const complete of [true, false]) {
    const run = join(dir, `swap-${complete}`);
    mkdirSync(run, { recursive: true });
    const old = saveCheckpoint(run, 0, parts(1));
    // What a writer killed between `step-0 → step-0.old-P` and `step-0.tmp-P → step-0` leaves behind.
    const pid = deadPid();
    const fresh = saveCheckpoint(join(dir, `scratch-${complete}`), 0, parts(7));
    renameSync(old, `${old}.old-${pid}`);
    cpSync(fresh, `${old}.tmp-${pid}`, { recursive: true });
    if (!complete) rmSync(join(`${old}.tmp-${pid}`, 'meta.json')); // killed before its meta.json (written last)
    const r = loadLatestGoodCheckpoint(run);
    assert.ok(r, 'the checkpoint is still there');
    assert.equal(r.checkpoint.step, 0);
    assert.equal(r.checkpoint.model.w.data[0], complete ? 7 : 1, complete ? 'the new one, complete' : 'the old one, back');
    // and the next save's clean-up does not take it away
    saveCheckpoint(run, 2, parts(2));
    assert.ok(existsSync(old), 'step 0 survives the next save');
    assert.deepEqual(readdirSync(join(run, 'checkpoints')).sort(), ['step-000000', 'step-000002']);
  }
});
