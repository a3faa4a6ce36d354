// gtpo: seed doc 002's strategy 1, w_t = H_t / mean_episode(H), by hand; and a real run logs exactly those weights.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tokenWeights } from '../../../src/engine/credit';
import { gtpoSeedWeights } from '../../../src/engine/credit/gtpo';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { train } from '../../../src/engine/train/train';
import { tinyConfig } from '../fixtures';

test('gtpo weights by hand: H over the mean H of the valid tokens; padding 0; an all-zero-entropy episode keeps 1', () => {
  // mean(0.5, 1.5, 1.0) = 1.0 → 0.5, 1.5, 1.0; the padded position gets 0
  assert.deepEqual(gtpoSeedWeights([0.5, 1.5, 1.0, 9], [1, 1, 1, 0]), [0.5, 1.5, 1.0, 0]);
  // mean(0.2, 0.6) = 0.4 → 0.5, 1.5 (the mean weight is 1)
  const w = gtpoSeedWeights([0.2, 0.6], [1, 1]);
  assert.ok(Math.abs(w[0] - 0.5) < 1e-12 && Math.abs(w[1] - 1.5) < 1e-12);
  assert.deepEqual(gtpoSeedWeights([0, 0, 0], [1, 1, 0]), [1, 1, 0]);
  // the library function training calls (design.md#library-api)
  const batch = {
    logprobs: [
      [-1, -2, -3],
      [-1, -1, 0],
    ],
    entropies: [
      [0.5, 1.5, 1.0],
      [0.2, 0.6, 7],
    ],
    sections: [
      ['think', 'think', 'answer'],
      ['think', 'answer', 'other'],
    ] as never,
    mask: [
      [1, 1, 1],
      [1, 1, 0],
    ],
  };
  const got = tokenWeights('gtpo', {}, batch);
  assert.deepEqual(got[0], [0.5, 1.5, 1.0]);
  assert.ok(Math.abs(got[1][0] - 0.5) < 1e-12 && Math.abs(got[1][1] - 1.5) < 1e-12 && got[1][2] === 0);
});

test('gtpo trains from the config and logs w = H / mean_episode(H) of its own logged entropies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-gtpo-'));
  const r = await train({ configPath: tinyConfig(dir, 'countdown', 'credit: { strategy: gtpo }\n'), sets: ['sft.steps=30', 'sft.lr=5e-3'] });
  assert.equal(r.status, 'completed');
  const tok = readTokenTable(join(r.runDir, 'tokens', 'step-000002.arrow'));
  const byEpisode = new Map<number, number[]>();
  for (let i = 0; i < tok.episode.length; i++) byEpisode.set(tok.episode[i], [...(byEpisode.get(tok.episode[i]) ?? []), i]);
  for (const rows of byEpisode.values()) {
    const want = gtpoSeedWeights(
      rows.map((i) => tok.entropy[i]),
      rows.map(() => 1),
    );
    // entropies are stored as float32: compare within its rounding
    rows.forEach((i, k) => assert.ok(Math.abs(tok.weight[i] - want[k]) <= 1e-5 * Math.max(1, want[k]), `${tok.weight[i]} vs ${want[k]}`));
  }
});
