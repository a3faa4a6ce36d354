// Shared fixtures for engine tests: a tiny scratch config that trains in about a second on wasm.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function tinyConfig(dir: string, task: 'countdown' | 'arithmetic', extra = ''): string {
  const p = join(dir, `${task}.credit.yaml`);
  writeFileSync(p, `name: tiny-${task}
seed: 7
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 64, max_seq_len: 64 }
task: { name: ${task}, numbers: [2, 3], max_number: 6, max_target: 20, train_size: 48, eval_size: 8 }
sft: { steps: 2, batch_size: 8, lr: 1.0e-3 }
grpo: { steps: 3, prompts_per_step: 2, group_size: 4, max_new_tokens: 24, eval_every: 2, checkpoint_every: 2 }
${extra}`);
  return p;
}
