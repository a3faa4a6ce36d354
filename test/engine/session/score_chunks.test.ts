// Scoring in row chunks (scoreStrategies' SCORE_ROWS) against one pass over every row: a probed step of 2,048 episodes
// does not fit the wasm heap in one pass, so the forward pass runs a chunk at a time while the weights are computed on
// the whole batch. The expected values are the one-pass scores of the same model: on the cpu backend a row's
// log-probs, entropies and attention do not depend on the other rows in its pass, so chunking must change no bit,
// also for entropy_mask, whose percentile is taken over the whole batch, and attention_credit, whose inputs come from
// each chunk's attention rows.
import { test } from 'node:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { initBackend } from '../../../src/engine/model/backend';
import { Transformer } from '../../../src/engine/model/model';
import { scoreStrategies, type ScoreInput } from '../../../src/engine/session/score';
import { makeRng } from '../../../src/engine/core/rng';
import type { Section } from '../../../src/protocol';
import { smallModelConfig, tinyConfig } from '../fixtures';
import { loadConfig } from '../../../src/engine/config/config';

test('scoring in chunks of 3 rows gives the one-pass scores bit for bit: log-probs, entropies, and every strategy’s Â, batch-normalised ones included', async () => {
  await initBackend('cpu');
  const model = Transformer.init(smallModelConfig({ maxSeqLen: 32 }), 4);
  const rng = makeRng(8);
  const items: ScoreInput[] = Array.from({ length: 11 }, (_, i) => {
    const n = 3 + (i % 5) * 2;
    const ids = Array.from({ length: n }, () => 1 + Math.floor(rng() * 38));
    const sections: Section[] = ids.map((_, t) => (t < n - 2 ? 'think' : 'answer'));
    return {
      promptIds: Array.from({ length: 2 + (i % 3) }, () => 1 + Math.floor(rng() * 38)),
      ids,
      sections,
      advantage: i % 3 === 0 ? 0 : i % 2 ? 0.75 : -0.5,
    };
  });
  const dir = mkdtempSync(join(tmpdir(), 'cl-score-chunks-'));
  const cfg = loadConfig(tinyConfig(dir, 'countdown')).config;
  const scorer = { model, tokenizer: { padId: 0 } as never, describe: 'test', dispose: () => {} };
  const names = ['none', 'inverse_logprob', 'entropy_mask', 'attention_credit', 'entropy_weighted'];
  const whole = await scoreStrategies(scorer, items, cfg, names, { rows: 1000 });
  const chunked = await scoreStrategies(scorer, items, cfg, names, { rows: 3 });
  assert.deepEqual(chunked, whole);
  // the strategies did something: attention_credit moved weights off 1, entropy_mask zeroed some tokens
  const w = (name: string) => whole.flatMap((x) => x.credit[name].weight);
  assert.ok(w('attention_credit').some((v) => Math.abs(v - 1) > 1e-3));
  assert.ok(w('entropy_mask').some((v) => v === 0));
  model.dispose();
});
