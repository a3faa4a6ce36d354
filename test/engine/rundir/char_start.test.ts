// Each token's character start is stored by the writer (char_start); runs written before the column read it as null, and
// every reader's offsets then come from the tokens' texts (protocol's charStarts), the same numbers either way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { readTokenTable, writeTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { charStarts } from '../../../src/protocol/token_columns';
import { loadRollouts } from '../../../src/engine/query/rollouts';
import { tinyConfig } from '../fixtures';

test("the writer stores each token's start in its completion; an older table without it gives the same offsets", { timeout: 120_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-char-start-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['grpo.steps=1'] });
  const file = stepFile(r.runDir, 'tokens', 1);
  const tok = readTokenTable(file);
  assert.ok(tok.char_start, 'written');
  // per episode: starts at 0, each the previous start plus the previous token's length
  for (let i = 0; i < tok.step.length; i++) {
    const want: number = tok.position[i] === 0 ? 0 : tok.char_start![i - 1] + tok.token[i - 1].length;
    assert.equal(tok.char_start![i], want, `row ${i}`);
  }
  const rows = Array.from({ length: tok.step.length }, (_, i) => i).filter((i) => tok.episode[i] === 0);
  const stored = charStarts(tok, rows);
  const hits = loadRollouts(r.runDir).search(tok.token[rows[Math.min(3, rows.length - 1)]], Int32Array.of(0), { plain: true, limit: 1 });
  // an older run: the same table without the column
  writeTokenTable(file, { ...tok, char_start: null, extra: {} } as unknown as Parameters<typeof writeTokenTable>[1]);
  const old = readTokenTable(file);
  assert.equal(old.char_start, null, 'read as null');
  assert.deepEqual(charStarts(old, rows), stored, 'rebuilt from the texts: the same starts');
  assert.deepEqual(loadRollouts(r.runDir).search(tok.token[rows[Math.min(3, rows.length - 1)]], Int32Array.of(0), { plain: true, limit: 1 }), hits);
});
