// What adding a credit strategy takes, shown by doing it: on a copy of src/, the test adds a toy strategy
// in exactly three places — its own file in src/engine/credit/, one entry in credit/catalog.ts, one line in the
// registry (credit/index.ts) — builds the engine CLI from that copy with the project's esbuild, and trains 2 steps
// through it. The config accepts the toy's parameter, rejects a bad value naming it, and the token table holds the
// toy's weights.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { addStrategy, buildCli, copySources, writeToyConfig } from '../source_copy';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';

// 1. The strategy's file: w = 1 on each episode's last valid token, `floor` on the others.
const TOY_FILE = `// Toy: all the credit on the last token, floor elsewhere.
import { validMask, type CreditStrategy } from './types';

export const lastToken: CreditStrategy = {
  name: 'last_token',
  weights: (batch, p) => validMask(batch).map((row) => {
    const last = row.lastIndexOf(1);
    return row.map((m, t) => (!m ? 0 : t === last ? 1 : p.floor));
  }),
};
`;
// 2. Its catalog entry: name, one-line summary, its parameter with default, range and description.
const CATALOG_ENTRY = `  {
    name: 'last_token', summary: 'last_token: all the credit on the final token (a test toy)',
    params: { floor: num({ gte: 0 }, 'last_token: weight of every token but the last.').default(0.25) },
    sweepValues: { 'credit.floor': [0, 0.25] }, headline: 'floor',
  },
`;

test('a new strategy is one file, one catalog entry and one registry line; it trains through the CLI', { timeout: 180_000 }, async () => {
  const dir = copySources('cl-toy-');
  addStrategy(dir, { file: 'last_token.ts', source: TOY_FILE, exportName: 'lastToken', entry: CATALOG_ENTRY });

  // The engine bundle exactly as esbuild.mjs builds it, with the wasm binaries beside it.
  const cli = await buildCli(dir);

  writeToyConfig(dir, {
    grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 16, eval_every: 2, checkpoint_every: 2 }',
    extra: 'credit: { strategy: last_token, floor: 0.5 }',
  });
  // The schema knows the new key from its catalog entry: a bad value is refused with the key and the range.
  const bad = cli('train', 'toy.credit.yaml', '--set', 'credit.floor=-1');
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /credit\.floor: got -1, expected a number ≥ 0/);
  const schema = JSON.parse(cli('schema').stdout);
  assert.ok(schema.properties.credit.properties.floor, "the JSON Schema has the toy's parameter");

  const r = cli('train', 'toy.credit.yaml');
  assert.equal(r.status, 0, r.stderr);
  const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);
  const t = readTokenTable(join(runDir, 'tokens', 'step-000002.arrow'));
  // Per episode: 1 on its last token, 0.5 (the config's floor) on every other.
  let episodes = 0;
  for (let i = 0; i < t.weight.length; i++) {
    const last = i + 1 === t.weight.length || t.episode[i + 1] !== t.episode[i];
    assert.equal(t.weight[i], last ? 1 : 0.5, `row ${i}`);
    if (last) episodes++;
  }
  assert.equal(episodes, 8);
});
