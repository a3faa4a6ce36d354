// The TRL row of `npm run bench`: one GRPO step of TRL's GRPOTrainer (credit_lens's CreditGRPOTrainer, strategy none)
// on PyTorch on the CPU, for the same model shape and batch as the engine's countdown example step timed beside it
// (bench/trl_step.py: a random Qwen2 of the example's shape, the example's prompts and rewards from its reward worker).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CreditConfig } from '../config/schema';

export interface TrlStepBench {
  trl_step_s: number;
  steps: number;
  /** the model's parameter count (the engine's of the same shape: model/memory.ts paramCount) and the step's batch */
  parameters: number;
  completions: number;
  torch_version: string;
  trl_version: string;
  threads: number;
  device: string;
}

/** TRL's step on the example's shape and batch; an error (the package or TRL missing) comes back as { error }. */
export function trlStepBench(
  config: CreditConfig,
  configPath: string,
  quick: boolean,
  /** the engine's model's vocabulary (its character tokenizer's size) */
  vocabSize: number,
  engineCli = process.argv[1],
  /** the Python and the torch device (the lent GPU's bench: its image's Python, cuda, credit_lens from python/) */
  run: { python?: string; device?: 'cpu' | 'cuda'; env?: Record<string, string> } = {},
): TrlStepBench | { error: string } {
  const script = [join(__dirname, '../../bench/trl_step.py'), resolve('bench/trl_step.py')].find(existsSync);
  if (!script) return { error: 'bench/trl_step.py not found' };
  const m = config.model;
  const spec = {
    model: {
      hidden_size: m.d_model,
      num_hidden_layers: m.n_layers,
      num_attention_heads: m.n_heads,
      num_key_value_heads: m.n_kv_heads,
      intermediate_size: m.d_ff,
      max_position_embeddings: m.max_seq_len,
      vocab_size: vocabSize,
      rope_theta: m.rope_theta,
    },
    grpo: config.grpo,
    // a warm-up step, then the timed ones (their median)
    steps: quick ? 2 : 4,
    reward_worker: [process.execPath, engineCli, 'reward', configPath],
    device: run.device ?? 'cpu',
  };
  const python = run.python ?? (process.env.CREDIT_LENS_PYTHON || 'python3');
  const r = spawnSync(python, [script, JSON.stringify(spec)], { encoding: 'utf8', maxBuffer: 1 << 26, env: { ...process.env, ...run.env } });
  if (r.status !== 0) return { error: `${python} ${script} exited ${r.status}: ${(r.stderr || '').trim().split('\n').slice(-2).join(' ')}` };
  const last = r.stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(last) as TrlStepBench;
  } catch {
    return { error: `bench/trl_step.py printed no JSON: ${last.slice(0, 200)}` };
  }
}

/** The bench's TRL row beside the engine's step (its seconds without the realized-credit pass TRL does not make), said. */
export function trlRow(
  config: CreditConfig,
  configPath: string,
  quick: boolean,
  vocabSize: number,
  engineSeconds: number,
  backend: string,
  say: (m: string) => void,
): (TrlStepBench & { engine_over_trl: number }) | { error: string } {
  const r = trlStepBench(config, configPath, quick, vocabSize);
  if ('error' in r) {
    say(`TRL step: unavailable (${r.error})`);
    return r;
  }
  const row = { ...r, engine_over_trl: engineSeconds / r.trl_step_s };
  say(
    `TRL (${r.trl_version}, torch ${r.torch_version}, CPU, ${r.threads} threads): the same step ${r.trl_step_s.toFixed(2)} s; ` +
      `the engine's (${backend}, without its realized-credit pass) ${engineSeconds.toFixed(2)} s = ${row.engine_over_trl.toFixed(2)}× TRL's`,
  );
  return row;
}
