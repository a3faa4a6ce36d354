// The run config (`*.credit.yaml`): one zod schema is the source of the CLI's validation, the extension's
// diagnostics and the JSON Schema contributed to the YAML extension, so the three can never disagree.
// Keys and defaults are DESIGN.md §3 (a contract). Keys added here that §3 does not list:
//   model.rope_theta      the scratch model uses rotary position embeddings; 10000 is the RoFormer/Llama base.
//   model.tie_embeddings  the scratch model shares input and output embeddings (GPT-2/nanoGPT style).
//   model.init_checkpoint start from a checkpoint's weights (share one SFT warm start across a sweep).
import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, resolve as resolvePath } from 'node:path';
import { Document, isMap, isNode, isScalar, isSeq, LineCounter, parse as parseYaml, parseDocument } from 'yaml';
import { z } from 'zod';
import { UserError } from '../core/errors';

// ---------------------------------------------------------------------------------------------------------
// Leaf builders. Each registers the sentence that an error message uses for "what is allowed", so a wrong
// value reads `grpo.group_size: got 1, expected an integer ≥ 2` rather than zod's generic text.

const allowedText = new WeakMap<object, string>();

function allow<T extends z.ZodType>(schema: T, text: string): T {
  allowedText.set(schema, text);
  return schema;
}

function int(min: number, description: string, max?: number) {
  const s = max === undefined ? z.int().min(min) : z.int().min(min).max(max);
  return allow(s.describe(description), max === undefined ? `an integer ≥ ${min}` : `an integer from ${min} to ${max}`);
}

interface NumRange { gt?: number; gte?: number; lte?: number }

function num(range: NumRange, description: string) {
  let s = z.number();
  const parts: string[] = [];
  if (range.gt !== undefined) { s = s.gt(range.gt); parts.push(`> ${range.gt}`); }
  if (range.gte !== undefined) { s = s.gte(range.gte); parts.push(`≥ ${range.gte}`); }
  if (range.lte !== undefined) { s = s.lte(range.lte); parts.push(`≤ ${range.lte}`); }
  return allow(s.describe(description), parts.length ? `a number ${parts.join(' and ')}` : 'a number');
}

function oneOf<const T extends readonly [string, ...string[]]>(values: T, description: string) {
  return allow(z.enum(values).describe(description), `one of: ${values.join(', ')}`);
}

function bool(description: string) {
  return allow(z.boolean().describe(description), 'true or false');
}

function pathOrNull(description: string) {
  return allow(z.string().min(1).nullable().describe(description),
    "a path (relative paths resolve against the config file's folder) or null");
}

function strOrNull(description: string) {
  return allow(z.string().min(1).nullable().describe(description), 'a non-empty string or null');
}

function section<T extends z.core.$ZodLooseShape>(shape: T, description: string) {
  return allow(z.strictObject(shape).describe(description), `a mapping with keys: ${Object.keys(shape).join(', ')}`);
}

// ---------------------------------------------------------------------------------------------------------
// The schema.

export const BACKENDS = ['auto', 'tensorflow', 'wasm', 'cpu'] as const;
export const STRATEGIES = ['none', 'outcome_conditional', 'inverse_logprob', 'attention_credit', 'entropy_weighted',
  'entropy_mask', 'attribution', 'cal', 'reward_variance'] as const;
export type CreditStrategy = (typeof STRATEGIES)[number];

const modelSchema = section({
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

const taskSchema = section({
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

const sftSchema = section({
  steps: int(0, 'Supervised steps on generated demonstrations before GRPO; 0 skips the warm start.').default(0),
  batch_size: int(1, 'Demonstrations per supervised step.').default(32),
  lr: num({ gt: 0 }, 'Supervised learning rate.').default(1.0e-3),
}, 'Optional supervised warm start on generated demonstrations.');

const grpoSchema = section({
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
const calSchema = section({
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

const creditSchema = section({
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

const loggingSchema = section({
  tokens: bool('Write the per-token Arrow tables (the heatmap\'s data).').default(true),
  every: int(1, 'Log tables every this many steps.').default(1),
}, 'What the run directory records.');

const baseSchema = z.strictObject({
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

// ---------------------------------------------------------------------------------------------------------
// Walking the schema by path (for messages, did-you-mean, overrides and sweep keys).

interface Def { type: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType>;
  items?: z.ZodType[]; element?: z.ZodType }

function defOf(s: z.ZodType): Def {
  return (s as unknown as { _zod: { def: Def } })._zod.def;
}

const WRAPPERS = new Set(['default', 'prefault', 'optional', 'nullable', 'readonly', 'catch', 'nonoptional']);

/** The schema and its wrappers, outermost first, ending at the core type. */
function unwrapChain(s: z.ZodType): z.ZodType[] {
  const chain = [s];
  for (;;) {
    const d = defOf(chain[chain.length - 1]);
    if (WRAPPERS.has(d.type) && d.innerType) chain.push(d.innerType);
    else if (d.type === 'pipe' && d.in) chain.push(d.in);
    else return chain;
  }
}

function core(s: z.ZodType): z.ZodType {
  const c = unwrapChain(s);
  return c[c.length - 1];
}

function shapeOf(s: z.ZodType): Record<string, z.ZodType> | undefined {
  const d = defOf(core(s));
  return d.type === 'object' ? d.shape : undefined;
}

function schemaAt(root: z.ZodType, path: readonly (string | number)[]): z.ZodType | undefined {
  let s: z.ZodType | undefined = root;
  for (const seg of path) {
    if (!s) return undefined;
    const d = defOf(core(s));
    if (d.type === 'object' && typeof seg === 'string') s = Object.hasOwn(d.shape!, seg) ? d.shape![seg] : undefined;
    else if (d.type === 'tuple' && typeof seg === 'number') s = d.items![seg];
    else if (d.type === 'array' && typeof seg === 'number') s = d.element;
    else return undefined;
  }
  return s;
}

function allowedOf(s: z.ZodType | undefined): string | undefined {
  if (!s) return undefined;
  for (const x of unwrapChain(s)) {
    const t = allowedText.get(x);
    if (t) return t;
  }
  return undefined;
}

/** Every dotted path of the config proper (sections and leaves; not `sweep`). */
function collectPaths(s: z.ZodType, prefix: string, out: string[]): string[] {
  const shape = shapeOf(s);
  if (shape) {
    for (const [k, v] of Object.entries(shape)) {
      const p = prefix ? `${prefix}.${k}` : k;
      out.push(p);
      collectPaths(v, p, out);
    }
  }
  return out;
}

const CONFIG_PATHS = collectPaths(baseSchema, '', []);
const CONFIG_PATH_SET = new Set(CONFIG_PATHS);
const ARRAY_VALUED_PATHS = new Set(CONFIG_PATHS.filter((p) => {
  const t = defOf(core(schemaAt(baseSchema, p.split('.'))!)).type;
  return t === 'tuple' || t === 'array';
}));
/** Keys holding file-system paths: resolved against the config's folder. */
const PATH_KEYS = ['output_dir', 'model.path', 'model.init_checkpoint', 'task.path', 'task.reward_module',
  'credit.reward_variance.importance_checkpoint'];

// ---------------------------------------------------------------------------------------------------------
// Did-you-mean.

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

function closest(word: string, candidates: readonly string[]): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = levenshtein(w, c.toLowerCase());
    if (d < bestD) { best = c; bestD = d; }
  }
  if (best !== undefined && bestD <= Math.max(1, Math.floor(Math.max(w.length, best.length) * 0.4))) return best;
  // A fragment of a key (`discount` for think_discount) is too far by edit distance but unambiguous.
  if (w.length >= 4) {
    const hits = candidates.filter((c) => c.toLowerCase().includes(w) || (c.length >= 4 && w.includes(c.toLowerCase())));
    if (hits.length === 1) return hits[0];
  }
  return undefined;
}

// Names a researcher brings from TRL's GRPOConfig, Hugging Face model configs, nanoGPT and seed 001's CLI.
const FOREIGN_NAMES: Record<string, { path: string; from: string; note?: string }> = {
  num_generations: { path: 'grpo.group_size', from: "TRL's num_generations" },
  beta: { path: 'grpo.kl_beta', from: "TRL's beta" },
  kl_coef: { path: 'grpo.kl_beta', from: 'the usual kl_coef' },
  epsilon: { path: 'grpo.clip_eps', from: "TRL's epsilon" },
  epsilon_low: { path: 'grpo.clip_eps', from: "TRL's epsilon" },
  epsilon_high: { path: 'grpo.clip_eps_high', from: "TRL's epsilon_high" },
  loss_type: { path: 'grpo.loss_agg', from: "TRL's loss_type" },
  learning_rate: { path: 'grpo.lr', from: "TRL's learning_rate" },
  max_completion_length: { path: 'grpo.max_new_tokens', from: "TRL's max_completion_length" },
  num_iterations: { path: 'grpo.epochs_per_step', from: "TRL's num_iterations" },
  max_grad_norm: { path: 'grpo.grad_clip', from: "TRL's max_grad_norm" },
  max_steps: { path: 'grpo.steps', from: "TRL's max_steps" },
  eval_steps: { path: 'grpo.eval_every', from: "TRL's eval_steps" },
  save_steps: { path: 'grpo.checkpoint_every', from: "TRL's save_steps" },
  logging_steps: { path: 'logging.every', from: "TRL's logging_steps" },
  top_entropy_quantile: { path: 'credit.mask_percentile', from: "TRL's top_entropy_quantile",
    note: 'with credit.strategy: entropy_mask, mask_percentile = 100·(1 − top_entropy_quantile)' },
  mitigation: { path: 'credit.strategy', from: "seed 001's --mitigation" },
  hidden_size: { path: 'model.d_model', from: "Hugging Face's hidden_size" },
  n_embd: { path: 'model.d_model', from: "nanoGPT's n_embd" },
  intermediate_size: { path: 'model.d_ff', from: "Hugging Face's intermediate_size" },
  num_hidden_layers: { path: 'model.n_layers', from: "Hugging Face's num_hidden_layers" },
  n_layer: { path: 'model.n_layers', from: "nanoGPT's n_layer" },
  num_attention_heads: { path: 'model.n_heads', from: "Hugging Face's num_attention_heads" },
  n_head: { path: 'model.n_heads', from: "nanoGPT's n_head" },
  num_key_value_heads: { path: 'model.n_kv_heads', from: "Hugging Face's num_key_value_heads" },
  max_position_embeddings: { path: 'model.max_seq_len', from: "Hugging Face's max_position_embeddings" },
  block_size: { path: 'model.max_seq_len', from: "nanoGPT's block_size" },
};

// Enum values from the seeds that differ from ours.
const FOREIGN_VALUES: Record<string, string> = { baseline: 'none', entropy_masking: 'entropy_mask' };

const SECRET_KEY = /(^|_)(api_?key|secret|password|passwd|token|access_token|auth_token|bearer|private_key|credentials?)$/i;

function looksSecret(key: string): boolean {
  return SECRET_KEY.test(key) && !/_env$/i.test(key);
}

/** A suggestion for an unknown key `key` under `parent` (both from the config root), as a full dotted path. */
function suggestFor(parent: readonly string[], key: string): { path: string; note?: string } | undefined {
  const parentSchema = schemaAt(creditConfigSchema, parent);
  const siblings = parentSchema ? Object.keys(shapeOf(parentSchema) ?? {}) : [];
  const join = (k: string) => [...parent, k].join('.');
  const foreign = FOREIGN_NAMES[key.toLowerCase()];
  if (foreign) {
    const leaf = foreign.path.split('.').pop()!;
    // `sft.learning_rate` means sft.lr, not grpo.lr.
    const target = siblings.includes(leaf) ? join(leaf) : foreign.path;
    return { path: target, note: foreign.note ? `${foreign.from}; ${foreign.note}` : foreign.from };
  }
  const near = closest(key, siblings);
  if (near) return { path: join(near) };
  const elsewhere = CONFIG_PATHS.filter((p) => p.split('.').pop() === key.toLowerCase() && p !== join(key));
  if (elsewhere.length) return { path: elsewhere.join('` or `') };
  // A dotted path written with the wrong section (`--set think_discount=…` at the root).
  const byLeaf = closest(key, CONFIG_PATHS.map((p) => p.split('.').pop()!));
  if (byLeaf) return { path: CONFIG_PATHS.filter((p) => p.endsWith(`.${byLeaf}`) || p === byLeaf).join('` or `') };
  return undefined;
}

/** Checks that a dotted config key exists; returns a message naming the problem, or undefined when it does. */
function checkConfigKey(key: string): string | undefined {
  if (CONFIG_PATH_SET.has(key)) return undefined;
  const segs = key.split('.');
  let i = 0;
  while (i < segs.length && CONFIG_PATH_SET.has(segs.slice(0, i + 1).join('.'))) i++;
  const parent = segs.slice(0, i);
  const parentSchema = schemaAt(baseSchema, parent);
  if (parentSchema && !shapeOf(parentSchema)) {
    return `\`${key}\` is not a config key: \`${parent.join('.')}\` has no sub-keys`;
  }
  const s = suggestFor(parent, segs[i]);
  if (s) {
    const rest = segs.slice(i + 1);
    const full = rest.length && !s.path.includes('`') ? `${s.path}.${rest.join('.')}` : s.path;
    return `\`${key}\` is not a config key; did you mean \`${full}\`?${s.note ? ` (${s.note})` : ''}`;
  }
  const siblings = parentSchema ? Object.keys(shapeOf(parentSchema) ?? {}) : [];
  return `\`${key}\` is not a config key; keys${parent.length ? ` under \`${parent.join('.')}\`` : ''}: ${siblings.join(', ')}`;
}

// ---------------------------------------------------------------------------------------------------------
// Sweep grid: `{dotted.key: [values]}` (a cartesian product) or a list of such mappings (each its own product,
// the runs concatenated), e.g. seed 001's mitigation list. A scalar stands for a one-value list.

const GRID_DESCRIPTION = 'Runs of the sweep command. Either a mapping {dotted.key: [values]}: every combination '
  + '(cartesian product) is one run, e.g. {credit.strategy: [none, outcome_conditional], credit.think_discount: '
  + '[0.25, 0.5]}. Or a list of such mappings, each expanded on its own and the runs concatenated, for sweeps that '
  + 'are not one product, e.g. [{credit.strategy: none}, {credit.strategy: outcome_conditional, '
  + 'credit.think_discount: [0.25, 0.5, 0.75]}]. A scalar stands for a one-value list. A credit.* parameter that '
  + 'the run\'s strategy does not use is dropped (and duplicate runs with it). Keys are config paths.';

const gridEntry = z.record(z.string(), z.unknown());
const gridSchema = allow(z.union([gridEntry, z.array(gridEntry).min(1)]).describe(GRID_DESCRIPTION),
  'a mapping of dotted config keys to lists of values, or a list of such mappings');

export type SweepGrid = Record<string, unknown> | Record<string, unknown>[];

/** Whether `v` is a list of candidate values for `key`, or one value (a bare array for an array-valued key). */
export function gridValues(key: string, v: unknown): unknown[] {
  if (!Array.isArray(v)) return [v];
  if (ARRAY_VALUED_PATHS.has(key) && !v.some(Array.isArray)) return [v];
  return v;
}

const slurmSchema = section({
  partition: strOrNull('sbatch --partition.').default(null),
  time: allow(z.string().regex(/^(\d+-)?\d+(:\d{1,2}){0,2}$/).nullable().describe('sbatch --time per run, e.g. "2:00:00", "30", "1-12:00:00".'),
    'a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS) or null').default(null),
  cpus_per_task: allow(z.int().min(1).nullable().describe('sbatch --cpus-per-task.'), 'an integer ≥ 1 or null').default(null),
  mem: allow(z.string().regex(/^\d+[KMGT]?$/).nullable().describe('sbatch --mem, e.g. "8G".'), 'a size like 4000, 8G or 512M, or null').default(null),
  account: strOrNull('sbatch --account.').default(null),
  qos: strOrNull('sbatch --qos.').default(null),
  max_parallel: allow(z.int().min(1).nullable().describe('The array\'s %N throttle: at most this many runs at once.'), 'an integer ≥ 1 or null').default(null),
  extra_args: allow(z.array(z.string().regex(/^--?[A-Za-z]/)).describe('Further sbatch flags, one per item, e.g. ["--gres=gpu:1"].'),
    'a list of sbatch flags, each starting with - or --').default([]),
  setup: allow(z.array(z.string()).describe('Shell lines run before the engine on the compute node, e.g. ["module load node/20"].'),
    'a list of shell lines').default([]),
  signal: allow(z.string().regex(/^(B:)?[A-Z0-9]+(@\d+)?$/).describe('sbatch --signal: B:TERM@120 asks the engine to checkpoint and stop 120 s before the time limit.'),
    'a Slurm signal spec like B:TERM@120').default('B:TERM@120'),
  requeue: bool('sbatch --requeue: a preempted or requeued run starts again and resumes from its last checkpoint.').default(true),
  engine: oneOf(['bundled', 'path'], 'bundled: node + the engine shipped with the extension (a path the compute nodes must see). '
    + 'path: `credit-lens` on the compute nodes\' PATH.').default('bundled'),
  node: allow(z.string().min(1).describe('The Node.js executable on the compute nodes (engine: bundled).'), 'a command or path').default('node'),
}, 'Slurm options for sweep.executor: slurm (one job array per sweep). output_dir must be on storage the login node and '
  + 'the compute nodes share.');

/** sweep.slurm with every default (what an absent block means). */
export function slurmDefaults(): z.output<typeof slurmSchema> {
  return slurmSchema.parse({});
}

const seedsSchema = allow(z.union([z.int().min(1).max(100), z.array(z.int().min(0)).min(1)])
  .describe('Train every grid point once per seed: a list of seeds, or a count n for seeds seed, seed+1, …, seed+n−1.'),
'a list of seeds (integers ≥ 0) or a count from 1 to 100');

const sweepSchema = section({
  grid: gridSchema.optional(),
  seeds: seedsSchema.optional(),
  executor: oneOf(['local', 'slurm'], 'Where the sweep runs: local (this machine, one run after another) or slurm (one '
    + 'job array; see sweep.slurm). The creditLens.executor setting applies when this is not set.').optional(),
  slurm: slurmSchema.optional(),
}, 'Optional; used by the sweep command.').superRefine((sw, ctx) => {
  if (sw.grid === undefined) return;
  const entries = Array.isArray(sw.grid) ? sw.grid : [sw.grid];
  entries.forEach((entry, i) => {
    const at = Array.isArray(sw.grid) ? ['grid', i] : ['grid'];
    for (const [key, v] of Object.entries(entry)) {
      const bad = key === 'sweep' || key.startsWith('sweep.') ? `\`${key}\`: a sweep cannot set the sweep`
        : checkConfigKey(key);
      if (bad) {
        ctx.addIssue({ code: 'custom', path: [...at, key], params: { key: true }, message: bad });
        continue;
      }
      const leaf = schemaAt(baseSchema, key.split('.'))!;
      const values = gridValues(key, v);
      if (values.length === 0) {
        ctx.addIssue({ code: 'custom', path: [...at, key], message: 'got [], expected at least one value' });
      }
      values.forEach((value, j) => {
        const r = leaf.safeParse(value);
        if (!r.success) {
          const p = values === v ? [...at, key, j] : [...at, key];
          const hint = typeof value === 'string' ? enumHint(leaf, value) : '';
          ctx.addIssue({ code: 'custom', path: p, params: { expected: (allowedOf(leaf) ?? r.error.issues[0].message) + hint },
            message: '' });
        }
      });
    }
  });
});

/** The config schema (zod): snake_case keys, every default from DESIGN §3, unknown keys rejected. */
export const creditConfigSchema = baseSchema.extend({ sweep: sweepSchema.optional() })
  .describe('Credit Lens run config (*.credit.yaml). DESIGN.md §3.');

export type CreditConfig = z.output<typeof creditConfigSchema>;

// ---------------------------------------------------------------------------------------------------------
// Issues.

export interface ConfigIssue {
  /** Dotted path of the offending key (`grpo.group_size`, `task.numbers`); '' for the whole document. */
  path: string;
  /** Names the path, the value given and what is allowed. */
  message: string;
  value?: unknown;
  /** [start, end) character offsets of the offending YAML node (the key for an unknown key). */
  offset?: [number, number];
  /** 1-based line and column of offset[0]. */
  line?: number;
  col?: number;
}

type Seg = string | number;

function pathString(path: readonly Seg[]): string {
  let s = '';
  for (const seg of path) s += typeof seg === 'number' ? `[${seg}]` : s ? `.${seg}` : seg;
  return s;
}

function getAt(obj: unknown, path: readonly Seg[]): unknown {
  let cur = obj;
  for (const seg of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[seg as string];
  }
  return cur;
}

function fmtValue(v: unknown): string {
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

function enumHint(s: z.ZodType, value: string): string {
  const d = defOf(core(s)) as Def & { entries?: Record<string, string> };
  if (d.type !== 'enum' || !d.entries) return '';
  const options = Object.values(d.entries);
  const guess = options.includes(FOREIGN_VALUES[value]) ? FOREIGN_VALUES[value] : closest(value, options);
  return guess ? `; did you mean \`${guess}\`?` : '';
}

/** Whether a value must not be echoed: it may be a credential. */
function hideValue(path: readonly Seg[]): boolean {
  const last = path[path.length - 1];
  return typeof last === 'string' && (looksSecret(last) || last === 'api_key_env');
}

interface RawIssue { path: Seg[]; message: string; value?: unknown; isKey?: boolean; at?: Seg[] }

function zodToRawIssues(issues: readonly z.core.$ZodIssue[], raw: unknown): RawIssue[] {
  const out: RawIssue[] = [];
  for (const iss of issues) {
    const path = iss.path.filter((p): p is Seg => typeof p !== 'symbol');
    if (iss.code === 'unrecognized_keys') {
      for (const key of iss.keys) {
        const p = [...path, key];
        const name = pathString(p);
        let message: string;
        if (looksSecret(key)) {
          message = `${name}: secrets never go in the config; put the value in an environment variable and name `
            + 'that variable in credit.cal.api_key_env';
        } else {
          const s = path.every((x) => typeof x === 'string') ? suggestFor(path as string[], key) : undefined;
          if (s) {
            const parentPrefix = path.length ? `${path.join('.')}.` : '';
            const shown = s.path.startsWith(parentPrefix) && !s.path.includes('`') ? s.path.slice(parentPrefix.length) : s.path;
            message = `${name}: unknown key; did you mean \`${shown}\`?${s.note ? ` (${s.note})` : ''}`;
          } else {
            const parentSchema = schemaAt(creditConfigSchema, path);
            const keys = parentSchema ? Object.keys(shapeOf(parentSchema) ?? {}) : [];
            message = `${name}: unknown key; allowed keys here: ${keys.join(', ')}`;
          }
        }
        out.push({ path: p, message, value: looksSecret(key) ? undefined : getAt(raw, p), isKey: true });
      }
      continue;
    }
    if (iss.code === 'custom') {
      const params = (iss as { params?: { at?: Seg[]; expected?: string; key?: boolean } }).params ?? {};
      const value = getAt(raw, path);
      const name = pathString(path);
      const message = params.expected !== undefined
        ? `${name}: got ${hideValue(path) ? 'a value' : fmtValue(value)}, expected ${params.expected}`
        : params.key ? `${pathString(path.slice(0, -1))}: ${iss.message}` : `${name}: ${iss.message}`;
      out.push({ path, message, value: hideValue(path) ? undefined : value, isKey: params.key, at: params.at });
      continue;
    }
    // Errors inside a pair like task.numbers read better about the pair as a whole.
    const firstIndex = path.findIndex((p) => typeof p === 'number');
    const p = firstIndex >= 0 ? path.slice(0, firstIndex) : path;
    const value = getAt(raw, p);
    const leaf = schemaAt(creditConfigSchema, p);
    let expected = allowedOf(leaf) ?? iss.message;
    if (iss.code === 'invalid_value' && typeof value === 'string' && leaf) expected += enumHint(leaf, value);
    if (iss.code === 'invalid_type' && value === null && shapeOf(leaf ?? z.never())) {
      expected += ' (an empty section is written `{}` or left out)';
    }
    const shown = hideValue(p) ? 'a value' : fmtValue(value);
    out.push({ path: p, message: `${pathString(p) || 'the config'}: got ${shown}, expected ${expected}`,
      value: hideValue(p) ? undefined : value });
  }
  // One problem per node: a tuple's two bad items, or a pattern and a refinement of one string, would otherwise
  // say the same thing twice.
  const seen = new Set<string>();
  return out.filter((i) => {
    const id = `${i.isKey ? 'key' : 'value'}:${JSON.stringify(i.path)}`;
    return seen.has(id) ? false : (seen.add(id), true);
  });
}

// ---------------------------------------------------------------------------------------------------------
// YAML positions.

interface Located { range: [number, number]; exact: boolean }

function locate(doc: Document, path: readonly Seg[], isKey: boolean): Located | undefined {
  let node: unknown = doc.contents;
  let fallback: [number, number] | undefined;
  const rangeOf = (n: unknown): [number, number] | undefined => {
    if (!isNode(n) || !n.range) return undefined;
    return n.range[1] > n.range[0] ? [n.range[0], n.range[1]] : undefined;
  };
  for (let i = 0; i < path.length; i++) {
    const seg = path[i];
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find((it) => isScalar(it.key) && String(it.key.value) === String(seg));
      if (!pair) return fallback && { range: fallback, exact: false };
      const keyRange = rangeOf(pair.key) ?? fallback;
      if (last && isKey) return keyRange && { range: keyRange, exact: true };
      fallback = keyRange;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === 'number' && seg < node.items.length) {
      fallback = rangeOf(node.items[seg]) ?? fallback;
      node = node.items[seg];
    } else {
      return fallback && { range: fallback, exact: false };
    }
  }
  const r = rangeOf(node) ?? fallback;
  return r && { range: r, exact: true };
}

interface Source { doc: Document; lines: LineCounter; overridden: string[] }

function finish(raw: RawIssue[], src: Source | undefined): ConfigIssue[] {
  const issues = raw.map((r): ConfigIssue => {
    const path = pathString(r.path);
    const issue: ConfigIssue = { path, message: r.message };
    if (r.value !== undefined) issue.value = r.value;
    if (!src) return issue;
    const dotted = r.path.filter((s) => typeof s === 'string').join('.');
    if (src.overridden.some((o) => dotted === o || dotted.startsWith(`${o}.`) || o.startsWith(`${dotted}.`))) {
      issue.message += ' (set by --set)';
      return issue;
    }
    let loc = locate(src.doc, r.path, !!r.isKey);
    if ((!loc || !loc.exact) && r.at) loc = locate(src.doc, r.at, false) ?? loc;
    if (loc) {
      issue.offset = loc.range;
      const { line, col } = src.lines.linePos(loc.range[0]);
      issue.line = line;
      issue.col = col;
    }
    return issue;
  });
  // Document order reads best in a terminal; issues without a position (from --set) go last.
  return issues.map((x, i) => [x, i] as const)
    .sort((a, b) => (a[0].offset?.[0] ?? Infinity) - (b[0].offset?.[0] ?? Infinity) || a[1] - b[1]).map((x) => x[0]);
}

/** Validates an already-parsed config object (defaults filled). Paths are returned as written. */
export function validateConfig(raw: unknown): { config: CreditConfig | null; issues: ConfigIssue[] } {
  return validateWith(raw, undefined);
}

function validateWith(raw: unknown, src: Source | undefined): { config: CreditConfig | null; issues: ConfigIssue[] } {
  const r = creditConfigSchema.safeParse(raw);
  if (r.success) return { config: r.data, issues: [] };
  return { config: null, issues: finish(zodToRawIssues(r.error.issues, raw), src) };
}

function parseSource(text: string): { raw: unknown; doc: Document; lines: LineCounter; issues: ConfigIssue[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const issues = doc.errors.map((e): ConfigIssue => {
    const { line, col } = lines.linePos(e.pos[0]);
    return { path: '', message: `YAML syntax error: ${e.message}`, offset: [e.pos[0], e.pos[1]], line, col };
  });
  // A file of only comments or whitespace is a mistake (an unsaved buffer, a truncated copy), not a run of all defaults.
  if (!issues.length && (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null))) {
    issues.push({ path: '', message: 'empty config: nothing to run (a config sets at least name and the parts it changes, e.g. task and grpo)',
      offset: [0, text.length], line: 1, col: 1 });
  }
  const raw = issues.length ? undefined : doc.toJS() ?? {};
  if (!issues.length && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) {
    issues.push({ path: '', message: `the config must be a YAML mapping of keys (name, model, grpo, ...), got ${fmtValue(raw)}`,
      offset: [0, text.length], line: 1, col: 1 });
  }
  return { raw, doc, lines, issues };
}

/**
 * Parses and validates config text without touching the file system. When `file` is given, relative paths in the
 * returned config are resolved against its folder, as loadConfig does.
 */
export function parseConfigText(text: string, opts: { file?: string } = {}): { config: CreditConfig | null; issues: ConfigIssue[] } {
  const src = parseSource(text);
  if (src.issues.length) return { config: null, issues: src.issues };
  const res = validateWith(src.raw, { doc: src.doc, lines: src.lines, overridden: [] });
  if (res.config && opts.file) resolveConfigPaths(res.config, dirname(resolvePath(opts.file)));
  return res;
}

function issuesError(file: string, issues: ConfigIssue[]): UserError {
  const lines = issues.map((i) => `  ${i.line !== undefined ? `${file}:${i.line}:${i.col}: ` : ''}${i.message}`);
  const n = issues.length;
  return new UserError(`Invalid config ${file} (${n} problem${n === 1 ? '' : 's'}):\n${lines.join('\n')}`);
}

// ---------------------------------------------------------------------------------------------------------
// Overrides and paths.

export function getDotted(obj: unknown, key: string): unknown {
  return getAt(obj, key.split('.'));
}

/** Sets obj[a][b]... = value for key "a.b...", creating (or replacing non-object) intermediate mappings. */
export function setDotted(obj: Record<string, unknown>, key: string, value: unknown): void {
  const segs = key.split('.');
  let cur = obj;
  for (const seg of segs.slice(0, -1)) {
    const next = cur[seg];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) cur[seg] = {};
    cur = cur[seg] as Record<string, unknown>;
  }
  cur[segs[segs.length - 1]] = value;
}

function parseOverride(set: string): { key: string; value: unknown } | string {
  const eq = set.indexOf('=');
  if (eq <= 0) return `--set ${set}: expected key=value, e.g. --set grpo.steps=3`;
  const key = set.slice(0, eq).trim();
  const text = set.slice(eq + 1);
  try {
    return { key, value: parseYaml(text) };
  } catch (e) {
    return `--set ${set}: the value is not valid YAML (${(e as Error).message.split('\n')[0]})`;
  }
}

/**
 * Returns a copy of `raw` with each `--set key=value` applied; the value is read as YAML (`3`, `null`, `[3, 4]`,
 * `{init_std: 0.1}`). `sweep.grid.<dotted key>=[...]` sets one key of a mapping grid. Unknown keys throw a
 * UserError with a did-you-mean, all bad overrides at once.
 */
export function applyOverrides(raw: object, sets: string[]): object {
  const out = structuredClone(raw) as Record<string, unknown>;
  const errors: string[] = [];
  for (const set of sets) {
    const o = parseOverride(set);
    if (typeof o === 'string') { errors.push(o); continue; }
    if (o.key.startsWith('sweep.grid.')) {
      const gridKey = o.key.slice('sweep.grid.'.length);
      const bad = checkConfigKey(gridKey);
      const grid = getDotted(out, 'sweep.grid');
      if (bad) errors.push(`--set ${set}: ${bad}`);
      else if (Array.isArray(grid)) errors.push(`--set ${set}: sweep.grid is a list; replace it whole with --set sweep.grid=[...]`);
      else {
        const g = grid && typeof grid === 'object' ? grid as Record<string, unknown> : {};
        g[gridKey] = o.value;
        setDotted(out, 'sweep.grid', g);
      }
      continue;
    }
    const bad = o.key === 'sweep' || o.key === 'sweep.grid' ? undefined : checkConfigKey(o.key);
    if (bad) { errors.push(`--set ${set}: ${bad}`); continue; }
    setDotted(out, o.key, o.value);
  }
  if (errors.length) throw new UserError(`Invalid --set (${errors.length}):\n${errors.map((e) => `  ${e}`).join('\n')}`);
  return out;
}

function resolveOne(p: string, dir: string): string {
  if (p === '~' || p.startsWith('~/')) return resolvePath(homedir(), p.slice(2));
  return isAbsolute(p) ? p : resolvePath(dir, p);
}

function resolveConfigPaths(config: CreditConfig, dir: string): void {
  const c = config as unknown as Record<string, unknown>;
  for (const key of PATH_KEYS) {
    const v = getDotted(c, key);
    if (typeof v === 'string') setDotted(c, key, resolveOne(v, dir));
  }
  // A sweep over model.path etc. names files relative to the same folder.
  const grid = config.sweep?.grid;
  for (const entry of grid === undefined ? [] : Array.isArray(grid) ? grid : [grid]) {
    for (const key of Object.keys(entry)) {
      if (!PATH_KEYS.includes(key)) continue;
      const v = entry[key];
      entry[key] = Array.isArray(v) ? v.map((x) => (typeof x === 'string' ? resolveOne(x, dir) : x))
        : typeof v === 'string' ? resolveOne(v, dir) : v;
    }
  }
}

/** What each path key must name on disk; output_dir is created by the run, so it need not exist. */
const PATH_KINDS: Record<string, 'file' | 'folder' | 'file or folder'> = {
  'model.path': 'folder', 'model.init_checkpoint': 'folder', 'task.path': 'file', 'task.reward_module': 'file',
  'credit.reward_variance.importance_checkpoint': 'folder',
};

/**
 * Every path key (resolved) that names nothing on disk, or the wrong kind of thing: checked before a run directory
 * is created, so a typo costs an error message, not a half-made run. Sweep grid values are checked too.
 */
export function configPathIssues(config: CreditConfig): string[] {
  const out: string[] = [];
  const check = (key: string, v: unknown, where: string) => {
    const kind = PATH_KINDS[key];
    if (!kind || typeof v !== 'string') return;
    let st: ReturnType<typeof statSync> | null = null;
    try { st = statSync(v); } catch { /* reported below */ }
    const ok = st && (kind === 'file' ? st.isFile() : kind === 'folder' ? st.isDirectory() : true);
    if (!ok) out.push(`${where}: got ${JSON.stringify(v)}, ${st ? `expected a ${kind}` : `no such ${kind}`}`);
  };
  for (const key of Object.keys(PATH_KINDS)) check(key, getDotted(config as unknown as Record<string, unknown>, key), key);
  const grid = config.sweep?.grid;
  for (const entry of grid === undefined ? [] : Array.isArray(grid) ? grid : [grid]) {
    for (const [key, v] of Object.entries(entry)) for (const x of Array.isArray(v) ? v : [v]) check(key, x, `sweep.grid.${key}`);
  }
  return out;
}

/** Reads, overrides, validates and resolves a config file. Every problem throws one UserError. */
export function loadConfig(path: string, sets: string[] = []): { config: CreditConfig; configPath: string; configDir: string } {
  const configPath = resolvePath(path);
  const configDir = dirname(configPath);
  let text: string;
  try {
    text = readFileSync(configPath, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(`Cannot read config ${path}: ${code === 'ENOENT' ? 'no such file'
      : code === 'EISDIR' ? 'it is a folder' : (e as Error).message}`);
  }
  const src = parseSource(text);
  if (src.issues.length) throw issuesError(path, src.issues);
  const raw = applyOverrides(src.raw as object, sets);
  const overridden = sets.map((s) => s.slice(0, Math.max(0, s.indexOf('='))).trim());
  const { config, issues } = validateWith(raw, { doc: src.doc, lines: src.lines, overridden });
  if (!config) throw issuesError(path, issues);
  resolveConfigPaths(config, configDir);
  const missing = configPathIssues(config);
  if (missing.length) throw new UserError(`Invalid config ${path} (${missing.length} problem${missing.length === 1 ? '' : 's'}):\n${missing.map((m) => `  ${m}`).join('\n')}`);
  return { config, configPath, configDir };
}

// ---------------------------------------------------------------------------------------------------------
// Output.

/** JSON Schema (draft-07) for the YAML extension's yamlValidation: descriptions, defaults, enums. */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(creditConfigSchema, { target: 'draft-07', io: 'input', unrepresentable: 'any' }) as
    Record<string, unknown>;
  schema.title = 'Credit Lens run config';
  // Completion for the grid's dotted keys, which zod models as a free-form record.
  const grid = getDotted(schema, 'properties.sweep.properties.grid') as { anyOf?: Record<string, unknown>[] } | undefined;
  const keyEnum = { enum: CONFIG_PATHS };
  for (const alt of grid?.anyOf ?? []) {
    if (alt.type === 'object') alt.propertyNames = keyEnum;
    const items = alt.items as Record<string, unknown> | undefined;
    if (alt.type === 'array' && items) items.propertyNames = keyEnum;
  }
  stripIntLimits(schema);
  return schema;
}

// zod writes ±Number.MAX_SAFE_INTEGER bounds on every integer; they only clutter hovers.
function stripIntLimits(node: unknown): void {
  if (Array.isArray(node)) { node.forEach(stripIntLimits); return; }
  if (node === null || typeof node !== 'object') return;
  const o = node as Record<string, unknown>;
  if (o.maximum === Number.MAX_SAFE_INTEGER) delete o.maximum;
  if (o.minimum === Number.MIN_SAFE_INTEGER) delete o.minimum;
  Object.values(o).forEach(stripIntLimits);
}

function dropSecrets(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropSecrets);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (!looksSecret(k)) out[k] = dropSecrets(x);
  return out;
}

/**
 * The config as written to a run directory. API keys are never config values (only api_key_env, a variable
 * NAME), but a deep copy without any secret-named key guards against objects that skipped validation.
 */
export function redactConfig(cfg: CreditConfig): CreditConfig {
  return dropSecrets(cfg) as CreditConfig;
}

export function configToYaml(cfg: CreditConfig): string {
  const doc = new Document(cfg);
  // Short lists of scalars (task.numbers, grid values) read best inline, as DESIGN §3 writes them.
  const flowSeqs = (n: unknown): void => {
    if (isSeq(n)) {
      if (n.items.every((it) => isScalar(it))) n.flow = true;
      n.items.forEach(flowSeqs);
    } else if (isMap(n)) {
      n.items.forEach((it) => flowSeqs(it.value));
    }
  };
  flowSeqs(doc.contents);
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}
