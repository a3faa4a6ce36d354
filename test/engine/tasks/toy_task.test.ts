// What adding a task takes, shown by doing it: on a copy of src/, the test adds a toy task in exactly two
// places — its own file in src/engine/tasks/ and one entry in tasks/catalog.ts — builds the engine CLI from that copy
// with the project's esbuild, and trains 2 steps through it. The config accepts the new task.name (and its JSON Schema
// lists it), an unknown name is refused with the catalog's names, and the episode table holds the toy's rewards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildCli, copySources } from '../source_copy';
import { readEpisodeTable } from '../../../src/engine/rundir/arrow_tables';

// 1. The task's file: prompts "aN:" with answer "b", reward 1 for a completion that is exactly the answer, else
// 0.5 if it starts with it, else 0; the splits are disjoint ranges of N.
const TOY_FILE = `// Toy: repeat the letter b.
import type { Example, Task } from '../core/types';
import type { TaskOptions } from './catalog';

export function makeRepeatTask(o: TaskOptions, _seed: number): Task {
  const ex = (id: number): Example => ({ id, prompt: 'a' + id + ':', answer: 'b' });
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => ex(from + i));
  return {
    name: 'repeat_b',
    prefill: '',
    train: range(0, o.train_size),
    eval: range(o.train_size, o.eval_size),
    validation: range(o.train_size + o.eval_size, o.val_size ?? 0),
    reward: (c) => { const total = c === 'b' ? 1 : c.startsWith('b') ? 0.5 : 0; return { total, format: 0, answer: total === 1 ? 1 : 0 }; },
    isSuccess: (r) => r.answer === 1,
    demonstration: () => 'b',
    alphabet: () => 'ab:0123456789',
  };
}
`;
// 2. Its catalog entry.
const CATALOG_ENTRY = `  { name: 'repeat_b', summary: 'repeat_b: answer b (a test toy)', make: makeRepeatTask },
`;

test('a new task is one file and one catalog entry; it trains through the CLI', { timeout: 180_000 }, async () => {
  const dir = copySources('cl-toytask-');
  const tasks = join(dir, 'src/engine/tasks');

  writeFileSync(join(tasks, 'repeat_b.ts'), TOY_FILE);
  const catalog = readFileSync(join(tasks, 'catalog.ts'), 'utf8');
  const end = catalog.indexOf('] as const satisfies readonly TaskSpec[];');
  assert.ok(end > 0, 'the catalog is one array literal');
  // the entry, and the import of the function it names (an import may stand anywhere at the top level)
  writeFileSync(join(tasks, 'catalog.ts'), catalog.slice(0, end) + CATALOG_ENTRY + catalog.slice(end) + "import { makeRepeatTask } from './repeat_b';\n");

  const cli = await buildCli(dir);

  writeFileSync(
    join(dir, 'toy.credit.yaml'),
    `name: toytask
seed: 5
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 64, max_seq_len: 32 }
task: { name: repeat_b, train_size: 40, eval_size: 8 }
sft: { steps: 2, batch_size: 8, lr: 1.0e-3 }
grpo: { steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 6, eval_every: 2, checkpoint_every: 2 }
`,
  );
  const bad = cli('train', 'toy.credit.yaml', '--set', 'task.name=repeat_c');
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /task\.name: got "?repeat_c"?, expected one of: countdown, arithmetic, jsonl, word_problems, repeat_b/);
  const schema = JSON.parse(cli('schema').stdout);
  assert.ok(schema.properties.task.properties.name.enum.includes('repeat_b'), 'the JSON Schema lists the toy task');

  const r = cli('train', 'toy.credit.yaml');
  assert.equal(r.status, 0, r.stderr);
  const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);
  const e = readEpisodeTable(join(runDir, 'episodes', 'step-000002.arrow'));
  assert.equal(e.reward.length, 8);
  // every reward is one the toy gives, and the texts decide which
  for (let i = 0; i < e.reward.length; i++) {
    const c = e.completion[i];
    assert.equal(e.reward[i], c === 'b' ? 1 : c.startsWith('b') ? 0.5 : 0, `episode ${i}: ${JSON.stringify(c)}`);
  }
});
