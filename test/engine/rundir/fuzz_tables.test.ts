// Damaged Arrow tables: copies of a real run's token and episode files with flipped bytes or cut short.
// Each read must end in a clear UserError naming the file, or in a read whose columns all have the table's row count,
// quickly: never a hang, never a crash deeper in, never columns of the wrong length.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isUserError } from '../../../src/engine/core/errors';
import { makeRng, randInt } from '../../../src/engine/core/rng';
import { readEpisodeTable, readTokenTable, writeEpisodeTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { tinyConfig } from '../fixtures';

const dir = mkdtempSync(join(tmpdir(), 'cl-fuzz-'));
const COPIES = 400;
/** Far above a correct read of these files (about a millisecond); a walk past a buffer's end took seconds. */
const PER_READ_MS = 500;

function fuzz(original: Buffer, read: (p: string) => Record<string, ArrayLike<unknown> | null>, label: string, seed: number) {
  const rng = makeRng(seed);
  const tally = { errors: 0, reads: 0, slowest: 0 };
  for (let k = 0; k < COPIES; k++) {
    const bytes = Buffer.from(original);
    let what: string;
    if (k % 5 === 4) {
      const at = randInt(rng, 0, bytes.length);
      what = `cut at ${at}`;
      writeFileSync(join(dir, 'f.arrow'), bytes.subarray(0, at));
    } else {
      const flips = 1 + randInt(rng, 0, 4);
      const at: number[] = [];
      for (let f = 0; f < flips; f++) {
        const i = randInt(rng, 0, bytes.length);
        bytes[i] ^= 1 << randInt(rng, 0, 8);
        at.push(i);
      }
      what = `bits flipped at ${at.join(', ')}`;
      writeFileSync(join(dir, 'f.arrow'), bytes);
    }
    const p = join(dir, 'f.arrow');
    const t0 = performance.now();
    try {
      const cols = read(p);
      // Every column, the extra ones (token tables: numeric columns beyond the contract) included, has one length.
      const all = Object.entries(cols).flatMap(([k, c]) => (k === 'extra' ? Object.values(c as object) : [c]));
      const lengths = new Set(all.filter((c) => c !== null).map((c) => (c as { length: number }).length));
      assert.equal(lengths.size, 1, `${label} copy ${k} (${what}): columns of different lengths ${[...lengths]}`);
      tally.reads++;
    } catch (e) {
      assert.ok(isUserError(e), `${label} copy ${k} (${what}): not a UserError: ${(e as Error)?.stack}`);
      assert.ok(e.message.includes(p), `${label} copy ${k}: the message names the file: ${e.message}`);
      tally.errors++;
    }
    const ms = performance.now() - t0;
    tally.slowest = Math.max(tally.slowest, ms);
    assert.ok(ms < PER_READ_MS, `${label} copy ${k} (${what}) took ${ms.toFixed(0)} ms`);
  }
  return tally;
}

test(`${COPIES} damaged copies each of a real token table and episode table: a clear error or a consistent read`, { timeout: 120_000 }, async () => {
  const r = await train({ configPath: tinyConfig(dir, 'countdown') });
  const tokens = readFileSync(stepFile(r.runDir, 'tokens', 2));
  const episodes = readFileSync(stepFile(r.runDir, 'episodes', 2));
  const t = fuzz(tokens, (p) => readTokenTable(p) as unknown as Record<string, ArrayLike<unknown>>, 'tokens', 11);
  const e = fuzz(episodes, (p) => readEpisodeTable(p) as unknown as Record<string, ArrayLike<unknown>>, 'episodes', 12);
  // Both outcomes occur: a flip inside a float value reads (a checksum-free format cannot tell), one in the
  // metadata or offsets does not.
  assert.ok(t.errors > 0 && t.reads > 0, JSON.stringify(t));
  assert.ok(e.errors > 0 && e.reads > 0, JSON.stringify(e));
});

test("the two hangs the fuzzing found: a schema vtable size and a field's children count, each a clear error at once", () => {
  // An episode table as the trainer writes it; positions found by walking its flatbuffers here (Arrow IPC file format).
  const dir2 = mkdtempSync(join(tmpdir(), 'cl-fuzz-'));
  const p = join(dir2, 'e.arrow');
  writeEpisodeTable(p, {
    step: Int32Array.of(1, 1),
    episode: Int32Array.of(0, 1),
    prompt_idx: Int32Array.of(0, 0),
    prompt: ['p', 'p'],
    completion: ['a', 'b'],
    reward: Float32Array.of(1, 0),
    reward_format: Float32Array.of(1, 1),
    reward_answer: Float32Array.of(1, 0),
    success: [true, false],
    advantage: Float32Array.of(1, -1),
    length: Int32Array.of(1, 1),
    oracle_span: [null, 'b'],
  });
  const good = readFileSync(p);
  const u32 = (b: Buffer, at: number) => b.readUInt32LE(at);
  const check = (bytes: Buffer, re: RegExp) => {
    writeFileSync(p, bytes);
    const t0 = performance.now();
    assert.throws(
      () => readEpisodeTable(p),
      (e: unknown) => isUserError(e) && (e as Error).message.includes(p) && re.test((e as Error).message),
    );
    assert.ok(performance.now() - t0 < PER_READ_MS);
  };
  // 1. The stream's Schema message (after "ARROW1\0\0", 0xFFFFFFFF and its length): the high byte of its vtable size.
  const root = 16 + u32(good, 16);
  const vt = root - good.readInt32LE(root);
  const a = Buffer.from(good);
  a[vt + 1] ^= 0x80;
  check(a, /schema message: read of \d+ bytes/);
  // 2. The footer's schema: the first field's children vector claims 2^19 entries.
  const footerLen = good.readInt32LE(good.length - 10);
  const fs = good.length - 10 - footerLen;
  const field = (t: number, i: number) => {
    const v = t - good.readInt32LE(t);
    const off = good.readUInt16LE(v + 4 + 2 * i);
    return off ? t + off : null;
  };
  const footer = fs + u32(good, fs);
  const schemaAt = field(footer, 1)!;
  const schema = schemaAt + u32(good, schemaAt);
  const fieldsAt = field(schema, 1)!;
  const fields = fieldsAt + u32(good, fieldsAt);
  const f0 = fields + 4 + u32(good, fields + 4);
  const childrenAt = field(f0, 5)!;
  const b = Buffer.from(good);
  b.writeUInt32LE(1 << 19, childrenAt + u32(good, childrenAt));
  check(b, /a vector claims 524288 entries/);
});
