// Shared fixtures for engine tests: a tiny scratch config that trains in about a second on wasm, the sevens task, a
// reporter that stops a run at a step, and the relative error the numeric comparisons use.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RunController } from '../../src/engine/train/run_control';
import type { ModelConfig } from '../../src/engine/model/model';

/** A two-layer Qwen2-style model of a few thousand weights (GQA 4 over 2, q/k/v biases, tied), with `o` changed. */
export function smallModelConfig(o: Partial<ModelConfig> = {}): ModelConfig {
  return {
    arch: 'qwen2',
    vocabSize: 40,
    dModel: 32,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    dFf: 64,
    maxSeqLen: 16,
    ropeTheta: 10000,
    rmsEps: 1e-6,
    tieEmbeddings: true,
    qkvBias: true,
    ...o,
  };
}

/** ‖got − want‖ / ‖want‖ (‖got − want‖ when want is 0) */
export function relErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  assert.equal(got.length, want.length);
  let d = 0,
    w = 0;
  for (let i = 0; i < want.length; i++) {
    d += (got[i] - want[i]) ** 2;
    w += want[i] ** 2;
  }
  return w === 0 ? Math.sqrt(d) : Math.sqrt(d / w);
}

/** A controller and a reporter that stops the run once it reports GRPO step `step` (train's options). */
export function stopAtStep(step: number): {
  controller: RunController;
  reporter: { started(): void; metrics(): void; log(): void; finished(): void; progress(p: { phase: string; step: number }): void };
} {
  const controller = new RunController();
  const reporter = {
    started() {},
    metrics() {},
    log() {},
    finished() {},
    progress(p: { phase: string; step: number }) {
      if (p.phase === 'grpo' && p.step === step) void controller.stop();
    },
  };
  return { controller, reporter };
}

export function tinyConfig(dir: string, task: 'countdown' | 'arithmetic', extra = ''): string {
  const p = join(dir, `${task}.credit.yaml`);
  writeFileSync(
    p,
    `name: tiny-${task}
seed: 7
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 64, max_seq_len: 64 }
task: { name: ${task}, numbers: [2, 3], max_number: 6, max_target: 20, train_size: 48, eval_size: 8 }
sft: { steps: 2, batch_size: 8, lr: 1.0e-3 }
grpo: { steps: 3, prompts_per_step: 2, group_size: 4, max_new_tokens: 24, eval_every: 2, checkpoint_every: 2 }
${extra}`,
  );
  return p;
}

/**
 * A jsonl task whose reward is the share of "7"s in the completion, so every group's rewards differ and every step has
 * non-zero advantages, on a 16-wide scratch model. Returns the config's path; `grpo` is the YAML flow map of that section.
 */
export function sevensConfig(dir: string, o: { name: string; seed: number; backend: string; grpo: string }): string {
  writeFileSync(join(dir, 'data.jsonl'), Array.from({ length: 40 }, (_, i) => JSON.stringify({ prompt: `q${i}:`, answer: '7' })).join('\n'));
  writeFileSync(join(dir, 'sevens.js'), 'module.exports.reward = (c) => { const s = [...c]; return s.filter((x) => x === "7").length / (s.length || 1); };\n');
  const p = join(dir, 'c.credit.yaml');
  writeFileSync(
    p,
    `name: ${o.name}
seed: ${o.seed}
backend: ${o.backend}
output_dir: runs
model: { source: scratch, d_model: 16, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 32, max_seq_len: 32 }
task: { name: jsonl, path: data.jsonl, reward_module: sevens.js, train_size: 32, eval_size: 4 }
grpo: ${o.grpo}
`,
  );
  return p;
}

/**
 * Three completions of 3, 2 and 1 valid tokens for the policy loss: ratios exp(ℓ − ℓ_old) of 1.105, 1, 0.368 | 1, 1.35 |
 * 1.35, inside, at and beyond both clip bounds (0.8, 1.2), with advantages of both signs (grpo.test.ts, losses.test.ts).
 */
export const POLICY_FIXTURE = {
  logprobs: [
    [-1, -0.5, -2],
    [-0.3, -0.7, 0],
    [-0.2, 0, 0],
  ],
  oldLogprobs: [
    [-1.1, -0.5, -1],
    [-0.3, -1.0, 0],
    [-0.5, 0, 0],
  ],
  advantages: [
    [1, 1, 1],
    [-2, -2, 0],
    [0.5, 0, 0],
  ],
  mask: [
    [1, 1, 1],
    [1, 1, 0],
    [1, 0, 0],
  ],
};

/** The fixture with a reference policy's log-probs, for the KL term in the finite-difference checks. */
export const POLICY_FIXTURE_REF = {
  ...POLICY_FIXTURE,
  refLogprobs: [
    [-0.9, -0.6, -1.8],
    [-0.4, -0.6, 0],
    [-0.3, 0, 0],
  ],
};

/**
 * A run of `sets` whose newest checkpoint (step `lost`) is deleted and whose run.json says failed: a kill after step
 * `lost` was logged but before its checkpoint, so a resume goes on from the checkpoint before and logs the steps after
 * it again. Returns the run directory.
 */
export async function runWithLostCheckpoint(configPath: string, sets: string[], lost: number): Promise<string> {
  const { train } = await import('../../src/engine/train/train');
  const { checkpointDir } = await import('../../src/engine/rundir/checkpoint');
  const { updateRunInfo } = await import('../../src/engine/rundir/rundir');
  const { rmSync } = await import('node:fs');
  const first = await train({ configPath, sets });
  rmSync(checkpointDir(first.runDir, lost), { recursive: true });
  updateRunInfo(first.runDir, { status: 'failed' });
  return first.runDir;
}
