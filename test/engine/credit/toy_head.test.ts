// What adding a strategy with a trained head takes, shown by doing it on a copy of src/: its file (the head and the
// weights), one catalog entry, one registry line. The head's own input (its logits) travels in the credit batch under
// a name of its choosing, which the trainer pads and slices like every other; the head trains with the policy, is
// saved in checkpoints, and its weights are what the token table logs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { addStrategy, buildCli, copySources } from '../source_copy';
import { sevensConfig } from '../fixtures';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { readSafetensorsHeader } from '../../../src/engine/model/safetensors';

// 1. The strategy's file: w_t = gate_scale · σ(u·h_t) on the final hidden state, u = 0 at the start (so the
//    first step is plain GRPO scaled by gate_scale / 2), trained on the contribution objective −Σ c·Â·ℓ.
const TOY_FILE = `// Toy: a sigmoid gate per token, learned on the final hidden state.
import * as tf from '@tensorflow/tfjs';
import { headObjective } from './attribution';
import { validMask, type CreditHead, type CreditParams, type CreditStrategy, type HeadStepInput, type ModelOutputs } from './types';

class GateHead implements CreditHead {
  readonly params: Map<string, tf.Variable>;
  constructor(dModel: number, private readonly p: CreditParams) {
    this.params = new Map([['gate_head.weight', tf.variable(tf.zeros([dModel, 1]), true, 'gate_head.weight')]]);
  }
  private logits(hidden: tf.Tensor3D): tf.Tensor2D {
    const [B, C, d] = hidden.shape;
    return hidden.reshape([B * C, d]).matMul(this.params.get('gate_head.weight')!).reshape([B, C]);
  }
  weigh(out: ModelOutputs, mask: tf.Tensor2D): tf.Tensor2D {
    return tf.tidy(() => this.logits(out.hidden!).sigmoid().mul(this.p.gate_scale).mul(mask));
  }
  async read(out: ModelOutputs) {
    const z = this.logits(out.hidden!);
    try {
      return { gateLogits: (await z.array()) as number[][] };
    } finally {
      z.dispose();
    }
  }
  objective(x: HeadStepInput): tf.Scalar {
    return headObjective({ ...x, objective: 'contribution', entropyCoef: 0 });
  }
  dispose(): void {
    for (const v of this.params.values()) v.dispose();
  }
}

export const gate: CreditStrategy = {
  name: 'gate',
  rowLocal: true,
  weights: (batch, p) => {
    const z = batch.gateLogits as number[][] | undefined;
    return validMask(batch).map((row, i) => row.map((m, t) => (m ? p.gate_scale / (1 + Math.exp(-(z?.[i][t] ?? 0))) : 0)));
  },
  createHead: (dModel, _seed, p) => new GateHead(dModel, p),
};
`;
// 2. Its catalog entry: its parameter, and that its training pass must return the hidden states.
const CATALOG_ENTRY = `  {
    name: 'gate', summary: 'gate: a learned sigmoid gate per token (a test toy)', needs: { hidden: true },
    params: { gate_scale: num({ gt: 0 }, 'gate: the largest weight a token can get.').default(2) },
  },
`;

test('a strategy with a trained head is one file, one catalog entry and one registry line; the head trains and is saved', { timeout: 180_000 }, async () => {
  const dir = copySources('cl-toy-head-');
  addStrategy(dir, { file: 'gate.ts', source: TOY_FILE, exportName: 'gate', entry: CATALOG_ENTRY });
  const cli = await buildCli(dir);

  // A task where every group's rewards differ (the share of "7"s), so every step has tokens with A ≠ 0 and the head moves.
  const config = sevensConfig(dir, {
    name: 'toy',
    seed: 7,
    backend: 'wasm',
    grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 12, lr: 1.0e-2, checkpoint_every: 2 }',
  });
  appendFileSync(config, 'credit: { strategy: gate, gate_scale: 1.5 }\n');
  const r = cli('train', config);
  assert.equal(r.status, 0, r.stderr);
  const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);

  // Step 1 runs with u = 0: every valid token's weight is 1.5 · σ(0) = 0.75.
  const first = readTokenTable(join(runDir, 'tokens', 'step-000001.arrow'));
  for (let k = 0; k < first.weight.length; k++) assert.ok(Math.abs(first.weight[k] - 0.75) < 1e-6, `step 1 row ${k}: ${first.weight[k]}`);
  // After one update the gate has moved: weights differ across tokens, each within (0, 1.5), and Â = A·w.
  const second = readTokenTable(join(runDir, 'tokens', 'step-000002.arrow'));
  const moved = second.weight.filter((w) => Math.abs(w - 0.75) > 1e-6).length;
  assert.ok(moved > 0, 'the head trained: some weights moved off σ(0)');
  for (let k = 0; k < second.weight.length; k++) {
    assert.ok(second.weight[k] > 0 && second.weight[k] < 1.5, `step 2 row ${k}: ${second.weight[k]}`);
    assert.ok(Math.abs(second.effective_advantage[k] - second.advantage[k] * second.weight[k]) < 1e-5, `step 2 row ${k}: Â = A·w`);
  }
  // The head is saved with the checkpoint, under its own parameter names.
  const ckpt = join(runDir, 'checkpoints', 'step-000002', 'head.safetensors');
  assert.deepEqual(Object.keys(readSafetensorsHeader(ckpt).header).sort(), ['gate_head.weight']);
});
