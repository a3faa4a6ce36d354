// The results book (analysis/results_book.ts, cli/results_command.ts): what `results keep` copies of a run is enough
// for compare to print the same table as from the whole run, and docs/results.md holds exactly the tables that the
// committed runs under results/ give (results/tables.yaml names the command of each). The second test is the check the
// issue asked for: a table edited by hand, or data changed under it, fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expandPattern, keepRun, readBook, staleTables, writeTables } from '../../../src/engine/analysis/results_book';
import { compareMarkdown, compareSeeds, runTokenTypeContributions } from '../../../src/engine/analysis/compare';
import { renderBook } from '../../../src/engine/cli/results_command';

const FIXTURES = 'test/e2e/fixtures/mitigations-runs';

test('a kept run (run.json, config, first and last eval, |c| by token type) compares exactly as the whole run does', () => {
  const into = mkdtempSync(join(tmpdir(), 'cl-keep-'));
  const base = expandPattern('.', `${FIXTURES}/mitigations-none-seed*`);
  const other = expandPattern('.', `${FIXTURES}/mitigations-entropy_mask-mp80-seed*`);
  assert.deepEqual(
    base.map((d) =>
      d
        .split('/')
        .pop()!
        .replace(/-\d{8}-\d{6}$/, ''),
    ),
    ['mitigations-none-seed1', 'mitigations-none-seed2', 'mitigations-none-seed3'],
    'a pattern expands to the matching folders, sorted',
  );
  const kept = [...base, ...other].map((d) => keepRun(d, into));
  assert.deepEqual(readdirSync(join(kept[0], 'eval')), ['step-000000.arrow', 'step-000100.arrow']);
  assert.ok(!existsSync(join(kept[0], 'tokens')), 'the token tables stay behind');
  assert.deepEqual(runTokenTypeContributions(kept[0]), runTokenTypeContributions(base[0]));
  const whole = compareMarkdown(compareSeeds(base, other, { resamples: 500 }));
  const fromKept = compareMarkdown(compareSeeds(kept.slice(0, 3), kept.slice(3), { resamples: 500 }));
  assert.equal(fromKept, whole);
  assert.match(whole, /\| mitigations-entropy_mask-mp80 \| entropy_mask \(mask_percentile 80\) \| 1, 2, 3 \| 256 \|/);
  assert.throws(() => expandPattern('.', `${FIXTURES}/nothing-*`), /matches no folder/);
});

test('a document block is replaced by its table, and a stale or missing block is named', () => {
  const doc = 'intro\n<!-- results: a -->\nold\n<!-- /results -->\nmiddle\n<!-- results: b -->\nB\n<!-- /results -->\n';
  const tables = new Map([
    ['a', 'new A'],
    ['b', 'B'],
  ]);
  assert.equal(writeTables(doc, tables), 'intro\n<!-- results: a -->\nnew A\n<!-- /results -->\nmiddle\n<!-- results: b -->\nB\n<!-- /results -->\n');
  assert.deepEqual(staleTables(doc, tables), ['a']);
  assert.deepEqual(staleTables(writeTables(doc, tables), tables), []);
  assert.throws(() => writeTables(doc, new Map([['c', 'x']])), /has no <!-- results: c --> … <!-- \/results --> block/);
});

test('every table of docs/results.md is what the runs committed under results/ give (npm run results rebuilds them)', async () => {
  const book = readBook('results/tables.yaml');
  assert.ok(book.tables.length >= 1);
  const tables = await renderBook(book);
  const doc = readFileSync(join(book.root, book.doc), 'utf8');
  assert.deepEqual(staleTables(doc, tables), [], 'run `npm run results -- --write` after changing the data or the tables');
});
