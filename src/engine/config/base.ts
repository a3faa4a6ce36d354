// The config schema proper (DESIGN §3, a contract): every section but `sweep`. Keys added here that §3 does not
// list:
//   model.rope_theta      the scratch model uses rotary position embeddings; 10000 is the RoFormer/Llama base.
//   model.tie_embeddings  the scratch model shares input and output embeddings (GPT-2/nanoGPT style).
//   model.init_checkpoint start from a checkpoint's weights (share one SFT warm start across a sweep).
//   grpo.max_nonfinite_steps  end a run that diverged instead of skipping every later update.
import { z } from 'zod';
import { allow, bool, collectPaths, core, defOf, int, num, oneOf, pathOrNull, schemaAt, section, strOrNull } from './fields';

// ---------------------------------------------------------------------------------------------------------
// The schema.

export const BACKENDS = ['auto', 'tensorflow', 'wasm', 'cpu'] as const;
export const STRATEGIES = ['none', 'outcome_conditional', 'inverse_logprob', 'attention_credit', 'entropy_weighted',
  'entropy_mask', 'attribution', 'cal', 'reward_variance'] as const;
export type CreditStrategy = (typeof STRATEGIES)[number];

export const modelSchema = section({
  source: oneOf(['scratch', 'hf'], 'scratch: a small decoder trained from random init with the sizes below. hf: a local '
    + 'directory with config.json, *.safetensors and tokenizer.json (the sizes below are then read from config.json).')
    .default('scratch'),
  path: pathOrNull('Model directory for source: hf.').default(null),
  init_checkpoint: pathOrNull('Start from the weights of this checkpoint (a run\'s checkpoints/step-N folder, or a run folder '
    + 'for its latest checkpoint) instead of the initial weights, e.g. one SFT warm start shared by every run of a sweep '
    + '(not in DESIGN §3).').default(null),
  d_model: int(1, 'Hidden size of the scratch model.').default(128),
  n_layers: int(1, 'Transformer blocks of the scratch model.').default(4),
  n_heads: int(1, 'Attention (query) heads; must divide d_model.').default(4),
  n_kv_heads: int(1, 'Key/value heads (grouped-query attention); must divide n_heads.').default(4),
  d_ff: int(1, 'Feed-forward hidden size.').default(512),
  max_seq_len: int(1, 'Longest prompt + completion, in tokens.').default(192),
  rope_theta: num({ gt: 0 }, 'Rotary position embedding base (not in DESIGN §3; RoFormer/Llama use 10000).').default(10000),
  tie_embeddings: bool('Share the input embedding and the output projection (not in DESIGN §3).').default(true),
}, 'The policy model.').superRefine((m, ctx) => {
  if (m.source === 'hf' && m.path === null) {
    ctx.addIssue({ code: 'custom', path: ['path'], params: { at: ['model', 'source'] },
      message: 'got null; it is required when model.source is hf (a local folder with config.json, *.safetensors and '
        + 'tokenizer.json)' });
  }
  // The sizes only shape a scratch model; an hf model takes its own from config.json.
  if (m.source !== 'scratch') return;
  if (m.n_heads % m.n_kv_heads !== 0) {
    ctx.addIssue({ code: 'custom', path: ['n_kv_heads'], message: `got ${m.n_kv_heads}, expected a divisor of `
      + `model.n_heads (${m.n_heads}): grouped-query attention shares each key/value head among n_heads / n_kv_heads query heads` });
  }
  if (m.d_model % m.n_heads !== 0) {
    ctx.addIssue({ code: 'custom', path: ['n_heads'], message: `got ${m.n_heads}, expected a divisor of model.d_model `
      + `(${m.d_model}): each head gets d_model / n_heads dimensions` });
  } else if ((m.d_model / m.n_heads) % 2 !== 0) {
    ctx.addIssue({ code: 'custom', path: ['n_heads'], message: `got ${m.n_heads}, but the head size d_model / n_heads = `
      + `${m.d_model / m.n_heads} must be even: rotary embeddings rotate pairs of dimensions` });
  }
});

const operand = z.int().min(1).max(6);
const numbersSchema = allow(z.tuple([operand, operand])
  .refine((p) => p[0] <= p[1], { message: '', params: { expected: '[min, max] with min ≤ max' } })
  .describe('[min, max] count of operands per countdown problem, 1 ≤ min ≤ max ≤ 6.'),
'a [min, max] pair of integers with 1 ≤ min ≤ max ≤ 6');

export const taskSchema = section({
  name: oneOf(['countdown', 'arithmetic', 'jsonl'], 'Task generator; jsonl reads task.path.').default('countdown'),
  numbers: numbersSchema.default([3, 3]),
  max_number: int(1, 'Largest operand (countdown).').default(20),
  max_target: int(1, 'Largest target (countdown).').default(100),
  reward: oneOf(['grpo_zero', 'tinyzero'], 'grpo_zero: 0.1·format + answer. tinyzero: 0 without an <answer>, 0.1 if '
    + 'wrong, 1 if correct.').default('grpo_zero'),
  prompt: oneOf(['compact', 'tinyzero'], 'compact (e.g. "3 5 2 -> 16\\n<think>") keeps character-level scratch models fast; '
    + 'tinyzero is the verbatim ~300-character TinyZero prompt, for real HF models.').default('compact'),
  train_size: int(1, 'Training problems generated.').default(4096),
  eval_size: int(1, 'Held-out problems used by evaluation.').default(128),
  path: pathOrNull('jsonl: a file of lines {"prompt": ..., "answer": ...}.').default(null),
  reward_module: pathOrNull('jsonl: a JS module exporting reward(completion, example) -> number | {total, parts}.')
    .default(null),
}, 'The task: prompts, answers and the reward.').superRefine((t, ctx) => {
  if (t.name === 'jsonl' && t.path === null) {
    ctx.addIssue({ code: 'custom', path: ['path'], params: { at: ['task', 'name'] },
      message: 'got null; it is required when task.name is jsonl (a file of lines {"prompt": ..., "answer": ...})' });
  }
});

export const sftSchema = section({
  steps: int(0, 'Supervised steps on generated demonstrations before GRPO; 0 skips the warm start.').default(0),
  batch_size: int(1, 'Demonstrations per supervised step.').default(32),
  lr: num({ gt: 0 }, 'Supervised learning rate.').default(1.0e-3),
}, 'Optional supervised warm start on generated demonstrations.');

export const grpoSchema = section({
  steps: int(0, 'GRPO steps (TRL max_steps); 0 makes an SFT-only run whose final checkpoint other runs can start from (model.init_checkpoint).').default(100),
  prompts_per_step: int(1, 'Prompts sampled per step; each gets group_size completions.').default(8),
  group_size: int(2, 'Completions per prompt (TRL num_generations); the group baseline needs at least 2.').default(8),
  max_new_tokens: int(1, 'Completion length cap (TRL max_completion_length).').default(64),
  temperature: num({ gt: 0 }, 'Sampling temperature.').default(1.0),
  top_p: num({ gt: 0, lte: 1 }, 'Nucleus sampling mass; 1 samples the full distribution.').default(1.0),
  lr: num({ gt: 0 }, 'Policy learning rate (TRL learning_rate).').default(1.0e-4),
  epochs_per_step: int(1, 'PPO inner epochs over each batch (mu; TRL num_iterations).').default(1),
  clip_eps: num({ gte: 0 }, 'Lower clip: the ratio is clipped at 1 − clip_eps (TRL epsilon).').default(0.2),
  clip_eps_high: num({ gte: 0 }, 'Upper clip: the ratio is clipped at 1 + clip_eps_high (TRL epsilon_high; DAPO uses 0.28).')
    .default(0.2),
  kl_beta: num({ gte: 0 }, 'Weight of the k3 KL penalty to the reference model (TRL beta); 0 disables it.').default(0.0),
  scale_rewards: oneOf(['group', 'batch', 'none'], 'Advantage normalisation: group: (r − mean_g)/(std_g + 1e-4); batch: '
    + 'the same with batch statistics; none: r − mean_g.').default('group'),
  loss_agg: oneOf(['token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm'], 'Loss aggregation (TRL loss_type): '
    + 'token_mean: Σ m·loss / Σ m; seq_mean_token_mean: mean over episodes of per-episode token means; '
    + 'seq_mean_token_sum_norm: Σ m·loss / (episodes · max_new_tokens).').default('token_mean'),
  grad_clip: num({ gt: 0 }, 'Global gradient-norm clip (TRL max_grad_norm).').default(1.0),
  eval_every: int(1, 'Evaluate on the held-out set every this many steps.').default(10),
  checkpoint_every: int(1, 'Write a checkpoint every this many steps.').default(25),
  max_nonfinite_steps: int(1, 'End the run as failed ("diverged at step N") after this many GRPO steps in a row whose loss or '
    + 'gradient was not finite (each such update is skipped).').default(5),
}, 'GRPO training.');

const secretLikeEnvValue = /^(sk-|AIza|ghp_|xox)/;
/** `*_API_KEY`, `*_KEY`, `*_TOKEN` (any case). */
export const KEY_LIKE_ENV = /^[A-Za-z_][A-Za-z0-9_]*_(KEY|TOKEN)$/i;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Why an oracle URL may not carry a key, or null: https anywhere, plain http only to this machine (a local vLLM, Ollama). */
export function keySafeUrl(url: string): string | null {
  let u: URL;
  try { u = new URL(url); } catch { return 'expected an http(s) URL'; }
  if (u.username || u.password) return 'credentials in the URL would be logged and cached; give the key through api_key_env';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:' && (LOOPBACK.has(u.hostname) || /^127\.\d+\.\d+\.\d+$/.test(u.hostname))) return null;
  if (u.protocol === 'http:') return `the API key is only sent over https, or over http to this machine (localhost, 127.0.0.1, ::1); ${u.hostname} is neither`;
  return 'expected an http(s) URL';
}
export const calSchema = section({
  provider: oneOf(['rule', 'openai', 'gemini'], 'Error-span oracle. rule: offline, for countdown and arithmetic (first '
    + 'wrong arithmetic step in <think>, else the answer expression). openai: an OpenAI-compatible /v1/chat/completions '
    + 'at base_url. gemini: generateContent.').default('rule'),
  model: strOrNull('Model name for the openai/gemini oracle.').default(null),
  base_url: allow(z.string().regex(/^https?:\/\/\S+$/).nullable().describe('Endpoint root for provider openai, e.g. '
    + 'https://api.openai.com.'), 'an http(s) URL or null').default(null),
  api_key_env: allow(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).refine((s) => !secretLikeEnvValue.test(s), { message: '', params: { expected: 'a variable name, not a key' } })
    .nullable().describe('NAME of the environment variable holding the API key (e.g. OPENAI_API_KEY). The key itself '
    + 'is never written in the config or the run directory.'),
  'the NAME of an environment variable (like OPENAI_API_KEY), not the key itself; or null').default(null),
  negative_reward: num({}, 'Effective advantage given to the tokens of the oracle\'s error span.').default(-1.0),
  max_error_span: int(1, 'The error span is cut to this many tokens from its start.').default(64),
  timeout_s: num({ gt: 0 }, 'Per-request timeout, seconds.').default(30),
  max_retries: int(0, 'Retries per oracle request.').default(3),
  concurrency: int(1, 'Oracle requests in flight.').default(4),
  cache: bool('Cache oracle replies on disk (~/.cache/credit-lens/oracle, by sha256 of provider, model and prompt) so reruns cost nothing.').default(true),
}, 'cal strategy: an oracle names the error span of a wrong answer.').superRefine((c, ctx) => {
  // Where a key may go: a config from someone else's repository must not be able to send it to their server.
  if (c.base_url !== null) {
    const why = keySafeUrl(c.base_url);
    if (why) ctx.addIssue({ code: 'custom', path: ['base_url'], message: `got ${JSON.stringify(c.base_url)}; ${why}` });
  }
  if (c.api_key_env !== null && !KEY_LIKE_ENV.test(c.api_key_env)) {
    ctx.addIssue({ code: 'custom', path: ['api_key_env'], message: `got ${JSON.stringify(c.api_key_env)}, expected the name of a `
      + 'key variable (ending in _API_KEY, _KEY or _TOKEN): the engine sends that variable\'s value to base_url, so it must not '
      + 'be able to name PATH, HOME or any other variable' });
  }
  if (c.provider === 'rule') return;
  const need: ('model' | 'api_key_env' | 'base_url')[] = c.provider === 'openai'
    ? ['model', 'base_url', 'api_key_env'] : ['model', 'api_key_env'];
  for (const k of need) {
    if (c[k] === null) {
      ctx.addIssue({ code: 'custom', path: [k], params: { at: ['credit', 'cal', 'provider'] },
        message: `got null; it is required when credit.cal.provider is ${c.provider}` });
    }
  }
});

export const creditSchema = section({
  strategy: oneOf(STRATEGIES, 'Credit strategy: how the episode advantage is spread over its tokens (DESIGN §4). '
    + 'none: every token gets A. outcome_conditional: think_discount outside <answer>. inverse_logprob: 1/(|ℓ|+epsilon). '
    + 'attention_credit: attention paid by the answer, scaled by credit_scale. entropy_weighted: n·softmax(H/entropy_temp). '
    + 'entropy_mask: only tokens at or above the mask_percentile of entropy. attribution: a learned head. '
    + 'cal: an oracle-named error span. reward_variance: an importance net.').default('none'),
  think_discount: num({ gte: 0 }, 'outcome_conditional: weight of tokens outside the answer (answer tokens get 1).')
    .default(0.5),
  epsilon: num({ gt: 0 }, 'inverse_logprob: w = 1/(|logprob| + epsilon); larger smooths more.').default(0.1),
  credit_scale: num({ gte: 0 }, 'attention_credit: w = max(0, 1 + credit_scale·(a/mean(a) − 1)).').default(2.0),
  entropy_temp: num({ gt: 0 }, 'entropy_weighted: softmax temperature; lower focuses on high-entropy tokens.').default(1.0),
  mask_percentile: num({ gte: 0, lte: 100 }, 'entropy_mask: tokens below this percentile of the batch\'s entropy get '
    + 'weight 0 (80 keeps the top 20%, TRL top_entropy_quantile 0.2).').default(80),
  attribution: section({
    init_std: num({ gte: 0 }, 'Std of the attribution head\'s initial weights.').default(0.01),
    detach_hidden: bool('Stop the policy loss from training the model through the head\'s input.').default(true),
  }, 'attribution strategy: a linear head on the final hidden state, trained through the loss.').prefault({}),
  cal: calSchema.prefault({}),
  reward_variance: section({
    importance_checkpoint: pathOrNull('Checkpoint from `credit-lens importance train`.').default(null),
    mode: oneOf(['variance_drop', 'raw'], 'raw: g = ρ_t. variance_drop: g_t = max(0, ρ_t − ρ_{t−1}).')
      .default('variance_drop'),
    temp: num({ gt: 0 }, 'Softmax temperature over g.').default(1.0),
  }, 'reward_variance strategy: weights from an importance net trained on paired rollouts.').prefault({}),
}, 'Credit assignment.').superRefine((c, ctx) => {
  if (c.strategy === 'reward_variance' && c.reward_variance.importance_checkpoint === null) {
    ctx.addIssue({ code: 'custom', path: ['reward_variance', 'importance_checkpoint'], params: { at: ['credit', 'strategy'] },
      message: 'got null; it is required when credit.strategy is reward_variance (train one with '
        + '`credit-lens importance train <config> --rollouts <parquet>`)' });
  }
});

export const loggingSchema = section({
  tokens: bool('Write the per-token Arrow tables (the heatmap\'s data).').default(true),
  every: int(1, 'Log tables every this many steps.').default(1),
}, 'What the run directory records.');

export const baseSchema = z.strictObject({
  name: allow(z.string().regex(/^[A-Za-z0-9._-]+$/).describe('Run name; the run goes to <output_dir>/<name>-<yyyymmdd-hhmmss>/.'),
    "letters, digits, '.', '_' or '-' (it names the run's folder)").default('countdown-baseline'),
  seed: int(0, 'Seed of every random stream of the run.').default(1),
  backend: oneOf(BACKENDS, 'TensorFlow.js backend. auto: tfjs-node-gpu if it sees a GPU, else tfjs-node, else wasm, '
    + 'else cpu.').default('auto'),
  output_dir: allow(z.string().min(1).describe('Folder for runs, relative to the config file.'),
    "a path (relative paths resolve against the config file's folder)").default('runs'),
  model: modelSchema.prefault({}),
  task: taskSchema.prefault({}),
  sft: sftSchema.prefault({}),
  grpo: grpoSchema.prefault({}),
  credit: creditSchema.prefault({}),
  logging: loggingSchema.prefault({}),
});


export const CONFIG_PATHS = collectPaths(baseSchema, '', []);
export const CONFIG_PATH_SET = new Set(CONFIG_PATHS);
export const ARRAY_VALUED_PATHS = new Set(CONFIG_PATHS.filter((p) => {
  const t = defOf(core(schemaAt(baseSchema, p.split('.'))!)).type;
  return t === 'tuple' || t === 'array';
}));
/** Keys holding file-system paths: resolved against the config's folder. */
export const PATH_KEYS = ['output_dir', 'model.path', 'model.init_checkpoint', 'task.path', 'task.reward_module',
  'credit.reward_variance.importance_checkpoint'];

