// What adding a token column takes, shown by doing it: on a copy of src/, the test declares a toy column
// once — one entry in protocol/token_columns.ts — and fills it with one line in session/token_log.ts. The copy then
// type-checks (the writer's column type comes from the entry; leaving the fill line out is a type error), a 2-step run
// through the copy's CLI writes it, the copy's reader reads it back with the declared type, and the copy's heatmap
// lists it as a paintable metric with the declared scale and meaning. No other file changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildCli, copySources } from '../source_copy';

const ROOT = resolve(__dirname, '../../..');

// 1. The catalog entry: surprisal, −ℓ, painted sequentially, with a hover row.
const ENTRY = `  {
    name: 'surprisal',
    type: 'float32',
    nullable: true,
    meaning: "−ℓ, the token's surprisal in nats (a test toy)",
    heatmap: { label: 'surprisal', signed: false },
    hover: 'surprisal −ℓ',
  },
`;
// 2. The writer's line that fills it (the array is allocated from the catalog, allocTokenColumns).
const FILL = `      cols.surprisal[k] = -lp;\n`;

function tsc(dir: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.extension.json')], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 170_000,
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

test('a new token column is one catalog entry and one writer line; the schema, reader, heatmap and hover follow', { timeout: 400_000 }, async () => {
  const dir = copySources('cl-toycolumn-');
  for (const f of ['tsconfig.base.json', 'tsconfig.extension.json']) cpSync(join(ROOT, f), join(dir, f));

  const catalogPath = join(dir, 'src/protocol/token_columns.ts');
  const catalog = readFileSync(catalogPath, 'utf8');
  const end = catalog.indexOf('] as const satisfies readonly TokenColumnDef[];');
  assert.ok(end > 0, 'the catalog is one array literal');
  writeFileSync(catalogPath, catalog.slice(0, end) + ENTRY + catalog.slice(end));

  const logPath = join(dir, 'src/engine/session/token_log.ts');
  const log = readFileSync(logPath, 'utf8');
  const fill = log.indexOf('      cols.reward[k] = e.reward.total;\n');
  assert.ok(fill > 0, 'token_log.ts fills the columns');
  writeFileSync(logPath, log.slice(0, fill) + FILL + log.slice(fill));
  const ok = tsc(dir);
  assert.equal(ok.status, 0, ok.out);

  const cli = await buildCli(dir);
  writeFileSync(
    join(dir, 'toy.credit.yaml'),
    `name: toycolumn
seed: 3
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 64, max_seq_len: 48 }
task: { name: arithmetic, train_size: 40, eval_size: 8 }
sft: { steps: 2, batch_size: 8, lr: 1.0e-3 }
grpo: { steps: 1, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, eval_every: 1, checkpoint_every: 1 }
`,
  );
  const r = cli('train', 'toy.credit.yaml');
  assert.equal(r.status, 0, r.stderr);
  const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);

  // The copy's own reader and schema: the column is in the file, after the contract's, with the declared type.
  const tables = (await import(join(dir, 'src/engine/rundir/arrow_tables.ts'))) as typeof import('../../../src/engine/rundir/arrow_tables');
  const field = tables.TOKEN_SCHEMA.fields.at(-1)!;
  assert.equal(field.name, 'surprisal');
  assert.equal(String(field.type), 'Float32');
  assert.equal(field.nullable, true);
  const t = tables.readTokenTable(join(runDir, 'tokens', 'step-000001.arrow')) as unknown as Record<string, Float32Array>;
  assert.ok(t.surprisal instanceof Float32Array && t.surprisal.length === t.logprob.length && t.logprob.length > 0);
  for (let i = 0; i < t.logprob.length; i++) assert.equal(t.surprisal[i], -t.logprob[i], `row ${i}`);
  assert.deepEqual(Object.keys(tables.readTokenTable(join(runDir, 'tokens', 'step-000001.arrow')).extra), [], 'a contract column, not an extra one');

  // The copy's heatmap: a metric with the entry's scale and meaning, reachable by cycling.
  const scales = (await import(join(dir, 'src/extension/heatmap/scales.ts'))) as typeof import('../../../src/extension/heatmap/scales');
  const def = scales.metricDef('surprisal' as never);
  assert.deepEqual(
    { label: def.label, signed: def.signed, description: def.description },
    { label: 'surprisal', signed: false, description: "−ℓ, the token's surprisal in nats (a test toy)" },
  );
  assert.ok(scales.isMetricId('surprisal'));
  assert.equal(scales.nextMetric('weight', ['contribution', 'weight', 'surprisal' as never]), 'surprisal');

  // The copy's hover rows (tokenFields, what the hover provider renders; the e2e suite hovers the real one).
  const episode = (await import(join(dir, 'src/extension/heatmap/episode.ts'))) as typeof import('../../../src/extension/heatmap/episode');
  const tokens = tables.readTokenTable(join(runDir, 'tokens', 'step-000001.arrow'));
  const step = new episode.StepTables(runDir, 1, tokens, tables.readEpisodeTable(join(runDir, 'episodes', 'step-000001.arrow')));
  const view = episode.buildHeatmapEpisode(step, { runDir, step: 1, episode: 0 });
  const fields = episode.tokenFields(view, 0);
  const row = fields.values.find((v) => v.column === 'surprisal');
  assert.deepEqual(row, { column: 'surprisal', label: 'surprisal −ℓ', value: -tokens.logprob[view.rows[0]], metric: 'surprisal' });
  assert.deepEqual(
    fields.values.map((v) => v.column),
    ['logprob', 'entropy', 'advantage', 'weight', 'effective_advantage', 'contribution', 'is_weight', 'clipped', 'grad_norm', 'surprisal'],
    'catalog order; attribution and importance are null under grpo and left out',
  );
});
