// A run frees every tensor it allocates. A sweep trains its runs one after another in one process, so a few tensors a
// step become the whole wasm heap: the three-start mitigation sweep's attribution runs died at their third run's step 75
// ("memory access out of bounds") because the pass that reads ahead of the taped one (attention_credit, attribution,
// every webgpu run) left the forward pass's intermediates and the head's reshape of the hidden states alive, and the
// head's initial values outlived it. Counted with tf.memory() before and after whole runs of the strategies that take
// that path, and of plain GRPO.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { train } from '../../../src/engine/train/train';
import { tinyConfig } from '../fixtures';

test('a run leaves no tensor behind: plain GRPO, attention_credit and the attribution head, twice each', { timeout: 300_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-no-leak-'));
  const cfg = tinyConfig(dir, 'countdown', 'logging: { realized_credit: true }\n');
  // the first run loads the backend and its kernels' constants; count from after it
  await train({ configPath: cfg, sets: ['grpo.steps=2', 'name=warm'] });
  const seen: string[] = [];
  for (const strategy of ['none', 'attention_credit', 'attribution']) {
    const before = tf.memory().numTensors;
    for (let k = 0; k < 2; k++) {
      const r = await train({ configPath: cfg, sets: [`credit.strategy=${strategy}`, `name=leak-${strategy}-${k}`, 'grpo.steps=4'] });
      assert.equal(r.status, 'completed');
    }
    const after = tf.memory().numTensors;
    seen.push(`${strategy}: ${before} → ${after}`);
    assert.equal(after, before, `${strategy} left ${after - before} tensors after two runs of 4 steps`);
  }
  console.log(seen.join('; '));
});
