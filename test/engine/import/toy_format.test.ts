// What adding an import format takes, shown by doing it: on a copy of src/, the test adds a toy format (rows of
// {q, a, r}) in exactly three places (its reader in src/engine/import/readers/, its line in readers/catalog.ts, its
// label in src/protocol/import_formats.ts), builds the engine CLI from that copy, and imports a folder of its files,
// scored by a run trained through the same CLI: detected without --format, its records in the run's tables, and a row
// that is not one of its records skipped with its file, line and reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { addImportFormat, buildCli, copySources, writeToyConfig } from '../source_copy';
import { readEpisodeTable } from '../../../src/engine/rundir/arrow_tables';

const READER = `// Toy: one completion a row, {q: the prompt, a: the completion, r: the reward}, in files named qa-<step>.jsonl.
import { RowError, num, text, type Obj } from '../fields';
import type { ImportReader } from './types';

export const qa: ImportReader = {
  id: 'qa',
  detect: (files: string[], first: Obj | null) => files.some((f) => /qa-\\d+\\.jsonl$/.test(f)) && !!first && 'q' in first,
  records: (o: Obj, path: string) => {
    const step = Number(/qa-(\\d+)\\.jsonl$/.exec(path)?.[1] ?? 0);
    if (typeof o.a !== 'string') throw new RowError('a: expected the completion');
    return [{ step, group: null, prompt: text(o, 'q'), completion: text(o, 'a'), reward: num(o, 'r', true), advantage: null, success: null }];
  },
};
`;
const ENTRY = `  { id: 'qa', label: 'Toy q/a folder', detail: 'qa-<step>.jsonl files of {q, a, r} rows (a test toy)', perToken: false },\n`;

test('a new import format is one reader, one catalog line and one protocol entry; it imports through the CLI', { timeout: 240_000 }, async () => {
  const dir = copySources('cl-toy-format-');
  addImportFormat(dir, { file: 'qa.ts', source: READER, exportName: 'qa', entry: ENTRY });
  const cli = await buildCli(dir);
  // a scoring model: a tiny run trained through the same CLI
  writeToyConfig(dir, {
    grpo: '{ steps: 1, prompts_per_step: 2, group_size: 4, max_new_tokens: 12, eval_every: 1, checkpoint_every: 1 }',
    extra: 'logging: { tensorboard: false }',
  });
  const tr = cli('train', 'toy.credit.yaml');
  assert.equal(tr.status, 0, tr.stderr);
  const model = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);

  const src = join(dir, 'qa-dump');
  mkdirSync(src);
  // step 1: two prompts, two completions each; step 2: one good row and one without a completion
  const row = (q: string, a: string, r: number) => JSON.stringify({ q, a, r });
  writeFileSync(
    join(src, 'qa-1.jsonl'),
    [row('3 4 -> 7', '3+4', 1), row('3 4 -> 7', '4-3', 0), row('2 5 -> 10', '2*5', 1), row('2 5 -> 10', '5', 0)].join('\n') + '\n',
  );
  writeFileSync(join(src, 'qa-2.jsonl'), [row('3 4 -> 12', '3*4', 1), JSON.stringify({ q: '1 2 -> 3', r: 0 })].join('\n') + '\n');
  // the CLI's --format and its usage take the new name from the protocol's list
  assert.match(cli('import', src, '--format', 'nope').stderr, /expected auto, verl_shard, verl, prime, trl, jsonl or qa/);
  const r = cli('import', src, '--model', model, '--out', join(dir, 'imported'), '--json');
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as {
    format: string;
    records: number;
    skipped: number;
    problems: { file: string; line: number; reason: string }[];
    runDir: string;
  };
  assert.equal(out.format, 'qa', 'detected by its reader');
  assert.equal(out.records, 5);
  assert.deepEqual(out.problems, [{ file: 'qa-2.jsonl', line: 2, reason: 'a: expected the completion' }]);
  const info = JSON.parse(readFileSync(join(out.runDir, 'run.json'), 'utf8')) as { imported: { format: string } };
  assert.equal(info.imported.format, 'qa', "run.json's imported.format takes the new name");
  const eps = readEpisodeTable(join(out.runDir, 'episodes', 'step-000001.arrow'));
  assert.deepEqual([...eps.completion], ['3+4', '4-3', '2*5', '5']);
  assert.deepEqual([...eps.reward], [1, 0, 1, 0]);
});
