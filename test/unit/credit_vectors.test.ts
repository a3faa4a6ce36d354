// The shared credit vectors (test/vectors/credit_strategies.json) are what the engine gives today: the Python package
// checks itself against the same file, so a change to a strategy here that is not carried there fails one of the two.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { creditVectors, VECTORS_FILE } from '../vectors/credit_vectors';
import { RUN_SCHEMA_FILE, runSchema } from '../vectors/run_schema';

test('the committed credit vectors equal the engine’s strategies on the same inputs (rewrite: npx tsx test/vectors/credit_vectors.ts --write)', async () => {
  const committed = JSON.parse(readFileSync(VECTORS_FILE, 'utf8'));
  const now = JSON.parse(JSON.stringify(await creditVectors()));
  assert.equal(committed.vectors.length, now.vectors.length);
  assert.deepEqual(committed.advantages, now.advantages, 'the episode advantages');
  for (let k = 0; k < now.vectors.length; k++)
    assert.deepEqual(committed.vectors[k], now.vectors[k], `vector ${k}: ${now.vectors[k].strategy} on ${now.vectors[k].case}`);
});

test('the vectors cover each strategy on every edge case: all-equal rewards, one-token completions, a masked episode', async () => {
  const { vectors } = await creditVectors();
  const tokenCases = new Set(vectors.filter((v) => !v.batch.groups).map((v) => v.case));
  assert.equal(tokenCases.size, 4);
  for (const s of new Set(vectors.filter((v) => !v.batch.groups).map((v) => v.strategy)))
    assert.equal(vectors.filter((v) => v.strategy === s && !v.batch.groups).length % tokenCases.size, 0, s);
  // all-equal rewards: Â is 0 on every token whatever the weights
  for (const v of vectors.filter((x) => x.case.startsWith('all-equal')))
    assert.ok(
      v.expected.effective_advantage.flat().every((a) => a === 0),
      v.strategy,
    );
  // the strategies that set Â per group: every one, on a batch with all-equal rewards (the last group: A = 0, so w = 1),
  // a one-token completion and padding; each setting changes something
  const grouped = vectors.filter((v) => v.batch.groups);
  assert.deepEqual([...new Set(grouped.map((v) => v.strategy))].sort(), ['gtpo', 'ktae', 'otb', 'reward_decomposition']);
  for (const v of grouped) {
    const last = v.batch.groups!.length - 1;
    assert.equal(v.advantages[last], 0, v.strategy);
    assert.ok(
      v.expected.weights[last].every((w, t) => w === v.batch.mask[last][t]),
      `${v.strategy}: w = 1 where A = 0`,
    );
    assert.ok(
      v.batch.mask.some((row) => row.filter(Boolean).length === 1),
      'a one-token completion',
    );
    assert.ok(
      v.batch.mask.some((row) => row.includes(0)),
      'padding',
    );
  }
  for (const s of ['gtpo', 'ktae', 'otb', 'reward_decomposition']) {
    const [a, b] = grouped.filter((v) => v.strategy === s);
    assert.notDeepEqual(a.expected.effective_advantage, b.expected.effective_advantage, `${s}: its two settings differ`);
  }
});

test("the committed run schema is the engine's token and episode tables (rewrite: npx tsx test/vectors/run_schema.ts --write)", () => {
  assert.deepEqual(JSON.parse(readFileSync(RUN_SCHEMA_FILE, 'utf8')), runSchema());
});
