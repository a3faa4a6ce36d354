// The config editor's docs, completion and quick fixes (config_docs.ts) on the real schema: every expected text below
// is the schema's own description or default, read from the catalog, or the YAML position worked out by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configJsonSchema } from '../../../src/engine/config/config';
import { ConfigDocs, hoverMarkdown, keyPathAt, mappingAt, suggestedKey } from '../../../src/extension/config_docs';

const docs = new ConfigDocs(configJsonSchema() as ConstructorParameters<typeof ConfigDocs>[0]);

test('a key documents itself: description, default and what is allowed, nullable sections included', () => {
  const g = docs.doc(['grpo', 'group_size'])!;
  assert.equal(g.path, 'grpo.group_size');
  assert.match(g.description, /Completions per prompt \(TRL num_generations\)/);
  assert.equal(g.default, '8');
  assert.equal(g.allowed, 'an integer ≥ 2');
  assert.equal(docs.doc(['grpo', 'loss_agg'])!.allowed, 'one of token_mean, seq_mean_token_mean, seq_mean_token_sum_norm');
  assert.equal(docs.doc(['logging', 'tensorboard'])!.allowed, 'true or false');
  // inside a section that is null by default (logging.mlflow)
  assert.equal(docs.doc(['logging', 'mlflow', 'experiment'])!.default, 'credit-lens');
  assert.match(docs.doc(['logging', 'mlflow'])!.allowed, /^a map of tracking_uri, experiment, or null$/);
  assert.equal(docs.doc(['grpo', 'nope']), null);
  assert.ok(docs.children(['grpo']).includes('clip_eps_high'));
  assert.deepEqual(docs.children(['grpo', 'group_size']), []);
  assert.match(hoverMarkdown(g), /^\*\*`grpo\.group_size`\*\*\n\nCompletions per prompt[^]*Allowed: an integer ≥ 2\n\nDefault: `8`$/);
});

test('the key under the cursor, in block and flow mappings; a value counts as its key', () => {
  const text = 'name: x\ngrpo:\n  group_size: 8\n  lr: 1.0e-4\nsft: { steps: 3, lr: 2.0e-3 }\n';
  //            0123456 7890123 45678901234567 890123456789 0123456789012345678901234567
  assert.deepEqual(keyPathAt(text, 2)?.path, ['name']);
  assert.deepEqual(keyPathAt(text, 17)?.path, ['grpo', 'group_size']);
  assert.deepEqual(keyPathAt(text, 28)?.path, ['grpo', 'group_size'], 'on the value 8');
  assert.deepEqual(keyPathAt(text, text.indexOf('lr: 1')), { path: ['grpo', 'lr'], range: [text.indexOf('lr: 1'), text.indexOf('lr: 1') + 2] });
  assert.deepEqual(keyPathAt(text, text.indexOf('steps'))?.path, ['sft', 'steps']);
  assert.deepEqual(keyPathAt(text, text.indexOf('lr: 2'))?.path, ['sft', 'lr']);
  assert.equal(keyPathAt(text, text.length), null);
});

test('completion: the mapping a new line belongs to by indentation, and the keys it already has', () => {
  const lines = ['name: x', 'grpo:', '  group_size: 8', '  ', '  lr: 1.0e-4', 'credit:', '  cal:', '    ', 'sft: { steps: 3 }'];
  assert.deepEqual(mappingAt(lines, 3, 2), { path: ['grpo'], present: ['group_size', 'lr'] });
  assert.deepEqual(mappingAt(lines, 7, 4), { path: ['credit', 'cal'], present: [] });
  assert.deepEqual(mappingAt(['na'], 0, 2), { path: [], present: [] });
  assert.deepEqual(mappingAt(lines, 1, 0), { path: [], present: ['name', 'credit', 'sft'] });
  assert.equal(mappingAt(lines, 2, 14), null, 'after "group_size: 8": typing a value, not a key');
  assert.equal(mappingAt(lines, 8, 8), null, 'inside a flow mapping');
});

test('a "did you mean" diagnostic proposes a key of the same mapping; one naming another section proposes no edit', () => {
  assert.equal(suggestedKey('grpo.lrr: unknown key; did you mean `lr`?'), 'lr');
  assert.equal(suggestedKey('lr: unknown key; did you mean `grpo.lr`?'), null);
  assert.equal(suggestedKey('grpo.group_size: got 1, expected an integer ≥ 2'), null);
});
