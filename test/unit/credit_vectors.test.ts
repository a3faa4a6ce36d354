// The shared credit vectors (test/vectors/credit_strategies.json) are what the engine gives today: the Python package
// checks itself against the same file, so a change to a strategy here that is not carried there fails one of the two.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { creditVectors, VECTORS_FILE } from '../vectors/credit_vectors';
import { RUN_SCHEMA_FILE, runSchema } from '../vectors/run_schema';

test('the committed credit vectors equal the engine’s strategies on the same inputs (rewrite: npx tsx test/vectors/credit_vectors.ts --write)', () => {
  const committed = JSON.parse(readFileSync(VECTORS_FILE, 'utf8'));
  const now = JSON.parse(JSON.stringify(creditVectors()));
  assert.equal(committed.vectors.length, now.vectors.length);
  assert.deepEqual(committed.advantages, now.advantages, 'the episode advantages');
  for (let k = 0; k < now.vectors.length; k++)
    assert.deepEqual(committed.vectors[k], now.vectors[k], `vector ${k}: ${now.vectors[k].strategy} on ${now.vectors[k].case}`);
});

test('the vectors cover each strategy on every edge case: all-equal rewards, one-token completions, a masked episode', () => {
  const { vectors } = creditVectors();
  const cases = new Set(vectors.map((v) => v.case));
  assert.equal(cases.size, 4);
  for (const s of new Set(vectors.map((v) => v.strategy))) assert.equal(vectors.filter((v) => v.strategy === s).length % cases.size, 0, s);
  // all-equal rewards: Â is 0 on every token whatever the weights
  for (const v of vectors.filter((x) => x.case.startsWith('all-equal')))
    assert.ok(
      v.expected.effective_advantage.flat().every((a) => a === 0),
      v.strategy,
    );
});

test("the committed run schema is the engine's token and episode tables (rewrite: npx tsx test/vectors/run_schema.ts --write)", () => {
  assert.deepEqual(JSON.parse(readFileSync(RUN_SCHEMA_FILE, 'utf8')), runSchema());
});
