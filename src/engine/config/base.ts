// The config schema proper (design.md#config, a contract): every section but `sweep`. Keys added here that the contract does not
// list:
//   model.rope_theta      the scratch model uses rotary position embeddings; 10000 is the RoFormer/Llama base.
//   model.tie_embeddings  the scratch model shares input and output embeddings (GPT-2/nanoGPT style).
//   model.init_checkpoint start from a checkpoint's weights (share one SFT warm start across a sweep).
//   grpo.max_nonfinite_steps  end a run that diverged instead of skipping every later update.
//   model.torch_dtype     frozen weights in 16 bits (model/half.ts).
import { z } from 'zod';
import { creditShape, STRATEGY_NAMES } from '../credit/catalog';
import { TASK_NAMES, TASKS, taskSpec } from '../tasks/catalog';
import { lossShape } from '../losses/catalog';
import { sinkShape } from '../tracking/sinks/catalog';
import { SERVER_API_SPECS, SERVER_APIS } from '../server_apis/catalog';
import { allow, bool, collectPaths, core, defOf, int, num, oneOf, pathOrNull, schemaAt, section } from '../core/fields';

// ---------------------------------------------------------------------------------------------------------
// The schema.

/** The projections LoRA can adapt, by PEFT's module names. */
export const LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

/** model.torch_dtype: float32, or the 16-bit formats frozen weights can be stored in (model/half.ts). */
export const HALF_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

export const BACKENDS = ['auto', 'webgpu', 'tensorflow', 'wasm-blas', 'wasm', 'cpu'] as const;
export const STRATEGIES = STRATEGY_NAMES;
export type { StrategyName } from '../credit/catalog';
export { KEY_LIKE_ENV, keySafeUrl } from '../oracle/key_policy';

export const modelSchema = section(
  {
    source: oneOf(
      ['scratch', 'hf'],
      'scratch: a small decoder trained from random init with the sizes below. hf: a local ' +
        'directory with config.json, *.safetensors and tokenizer.json (the sizes below are then read from config.json).',
    ).default('scratch'),
    path: pathOrNull('Model directory for source: hf.').default(null),
    init_checkpoint: pathOrNull(
      "Start from the weights of this checkpoint (a run's checkpoints/step-N folder, or a run folder " +
        'for its latest checkpoint) instead of the initial weights, e.g. one SFT warm start shared by every run of a sweep ' +
        '(an addition to design.md#config).',
    ).default(null),
    tokenizer: oneOf(
      ['char', 'bpe'],
      "Tokenizer of a scratch model. char: one token per character of the task's alphabet. " +
        "bpe: a byte-level BPE trained on the task's training split and the chat template's tags (single tokens), saved in " +
        'the run folder as a Hugging Face tokenizer.json and reused on resume, eval and model.init_checkpoint.',
    ).default('char'),
    vocab_size: int(
      262,
      'Largest vocabulary of a bpe tokenizer: 6 special and tag tokens + 256 bytes + the merges (fewer when no pair ' + 'of the training split occurs twice).',
    ).default(512),
    d_model: int(1, 'Hidden size of the scratch model.').default(128),
    n_layers: int(1, 'Transformer blocks of the scratch model.').default(4),
    n_heads: int(1, 'Attention (query) heads; must divide d_model.').default(4),
    n_kv_heads: int(1, 'Key/value heads (grouped-query attention); must divide n_heads.').default(4),
    d_ff: int(1, 'Feed-forward hidden size.').default(512),
    max_seq_len: int(1, 'Longest prompt + completion, in tokens.').default(192),
    rope_theta: num({ gt: 0 }, 'Rotary position embedding base (an addition to design.md#config; RoFormer/Llama use 10000).').default(10000),
    tie_embeddings: bool('Share the input embedding and the output projection (an addition to design.md#config).').default(true),
    lora: allow(
      z
        .strictObject({
          r: z.int().min(1).describe('Rank of each adapter (PEFT r).'),
          alpha: z.number().positive().describe('Scale numerator: the update is (alpha / r)·B·A (PEFT lora_alpha).').optional(),
          targets: z.array(z.enum(LORA_TARGETS)).min(1).describe('Projections that get an adapter (PEFT target_modules).').optional(),
        })
        .nullable()
        .describe(
          'LoRA (an addition to design.md#config): train rank-r adapters on the frozen weights instead of every weight; gradients and ' +
            "Adam's moments then cover the adapters only, and the KL reference is the frozen base (no copy). alpha defaults to 2·r, " +
            'targets to every projection. Checkpoints hold the merged weights and the adapters.',
        ),
      `null, or {r: a positive integer, alpha: a positive number, targets: a list of ${LORA_TARGETS.join(', ')}}`,
    ).default(null),
    freeze_embeddings: bool(
      'Keep the token embeddings (and a tied lm head) fixed: at 0.5B they are 28 % of the weights, and their gradients and ' +
        "Adam's moments are as large (an addition to design.md#config).",
    ).default(false),
    trainable_layers: allow(
      z.int().min(1).nullable().describe('Train only the last k transformer blocks and the final norm; null trains all (an addition to design.md#config).'),
      'null or a positive integer (at most the number of layers)',
    ).default(null),
    torch_dtype: oneOf(
      HALF_DTYPES,
      'How the projections that do not train are stored: the base under model.lora, the blocks model.trainable_layers ' +
        'leaves frozen, the KL reference. float16 or bfloat16: 16 bits each, multiplied into float32 sums, as PyTorch runs a ' +
        "float16 model beside PEFT's float32 adapters (TRL's model_init_kwargs.torch_dtype; bfloat16 keeps a bfloat16 " +
        'checkpoint exactly). On webgpu they take half the memory and half the reads; on host backends they are rounded and ' +
        'kept in float32, which gives the same numbers. Trained weights stay float32. float32 (the default) is the path whose ' +
        'numbers are compared with the cpu backend (an addition to design.md#config).',
    ).default('float32'),
  },
  'The policy model.',
).superRefine((m, ctx) => {
  if (m.source === 'hf' && m.path === null) {
    ctx.addIssue({
      code: 'custom',
      path: ['path'],
      params: { at: ['model', 'source'] },
      message: 'got null; it is required when model.source is hf (a local folder with config.json, *.safetensors and ' + 'tokenizer.json)',
    });
  }
  if (m.lora && (m.freeze_embeddings || m.trainable_layers !== null)) {
    ctx.addIssue({
      code: 'custom',
      path: [m.freeze_embeddings ? 'freeze_embeddings' : 'trainable_layers'],
      params: { at: ['model', 'lora'] },
      message: `got ${m.freeze_embeddings ? 'true' : m.trainable_layers}; with model.lora every weight is already frozen and only the adapters train: leave it ${m.freeze_embeddings ? 'false' : 'null'}`,
    });
  }
  // The sizes only shape a scratch model; an hf model takes its own from config.json.
  if (m.source !== 'scratch') return;
  if (m.n_heads % m.n_kv_heads !== 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['n_kv_heads'],
      message:
        `got ${m.n_kv_heads}, expected a divisor of ` +
        `model.n_heads (${m.n_heads}): grouped-query attention shares each key/value head among n_heads / n_kv_heads query heads`,
    });
  }
  if (m.d_model % m.n_heads !== 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['n_heads'],
      message: `got ${m.n_heads}, expected a divisor of model.d_model ` + `(${m.d_model}): each head gets d_model / n_heads dimensions`,
    });
  } else if ((m.d_model / m.n_heads) % 2 !== 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['n_heads'],
      message:
        `got ${m.n_heads}, but the head size d_model / n_heads = ` + `${m.d_model / m.n_heads} must be even: rotary embeddings rotate pairs of dimensions`,
    });
  }
});

const operand = z.int().min(1).max(6);
const numbersSchema = allow(
  z
    .tuple([operand, operand])
    .refine((p) => p[0] <= p[1], { message: '', params: { expected: '[min, max] with min ≤ max' } })
    .describe('[min, max] count of operands per countdown problem, 1 ≤ min ≤ max ≤ 6.'),
  'a [min, max] pair of integers with 1 ≤ min ≤ max ≤ 6',
);

export const taskSchema = section(
  {
    name: oneOf(TASK_NAMES, `Task generator (tasks/catalog.ts). ${TASKS.map((t) => t.summary).join('. ')}.`).default('countdown'),
    max_steps: int(1, 'word_problems: at most this many operations per problem.', 4).default(3),
    numbers: numbersSchema.default([3, 3]),
    max_number: int(1, 'Largest operand (countdown).').default(20),
    max_target: int(1, 'Largest target (countdown).').default(100),
    reward: oneOf(['grpo_zero', 'tinyzero'], 'grpo_zero: 0.1·format + answer. tinyzero: 0 without an <answer>, 0.1 if ' + 'wrong, 1 if correct.').default(
      'grpo_zero',
    ),
    prompt: oneOf(
      ['compact', 'tinyzero'],
      'compact (e.g. "3 5 2 -> 16\\n<think>") keeps character-level scratch models fast; ' +
        'tinyzero is the verbatim ~300-character TinyZero prompt, for real HF models.',
    ).default('compact'),
    train_size: int(1, 'Training problems generated.').default(4096),
    eval_size: int(1, 'Held-out problems used by evaluation: the test split the README and comparisons report.').default(128),
    val_size: int(
      0,
      'Validation problems, disjoint from train and test: evaluated with the test split and logged as ' +
        'val_success / split "validation", for choices made by looking at results (early stopping, picking lr).',
    ).default(0),
    split_seed: int(
      0,
      'Seed of the train / test / validation draw, independent of the run seed, so that runs of several ' +
        'seeds (and a shared SFT warm start) see the same splits.',
    ).default(1),
    path: pathOrNull('jsonl: a file of lines {"prompt": ..., "answer": ...}.').default(null),
    format: oneOf(
      ['plain', 'gsm8k'],
      'jsonl: plain lines {"prompt", "answer"}, or GSM8K\'s own {"question", "answer"} whose answer ends ' +
        'in "#### N": the question becomes the prompt, the worked answer the SFT demonstration, and N is scored by the final ' +
        'number (commas, ".0" and units tolerated).',
    ).default('plain'),
    reward_module: pathOrNull('jsonl: a JS module exporting reward(completion, example) -> number | {total, parts}.').default(null),
  },
  'The task: prompts, answers and the reward.',
).superRefine((t, ctx) => {
  const issue = taskSpec(t.name)?.check?.(t);
  if (issue) ctx.addIssue({ code: 'custom', path: issue.path, params: { at: ['task', 'name'] }, message: issue.message });
});

export const sftSchema = section(
  {
    steps: int(0, 'Supervised steps on generated demonstrations before GRPO; 0 skips the warm start.').default(0),
    batch_size: int(1, 'Demonstrations per supervised step.').default(32),
    lr: num({ gt: 0 }, 'Supervised learning rate.').default(1.0e-3),
    share: bool(
      'Train the warm start once and share it: every run whose model, task, sft section and backend agree (the runs of ' +
        'a sweep over seeds, strategies or GRPO settings) starts from the same SFT checkpoint, trained with sft.seed in ' +
        '<output_dir>/<task>-warm-start-<key>/ by the first run that needs it while the others wait (an addition to design.md#config).',
    ).default(false),
    seed: int(
      0,
      'Seed of a shared warm start (sft.share): its weights do not follow the run seed, so runs of different seeds start ' +
        'from one policy (an addition to design.md#config).',
    ).default(1),
  },
  'Optional supervised warm start on generated demonstrations.',
);

export const grpoSchema = section(
  {
    steps: int(0, 'GRPO steps (TRL max_steps); 0 makes an SFT-only run whose final checkpoint other runs can start from (model.init_checkpoint).').default(100),
    prompts_per_step: int(1, 'Prompts sampled per step; each gets group_size completions.').default(8),
    group_size: int(2, 'Completions per prompt (TRL num_generations); the group baseline needs at least 2.').default(8),
    max_new_tokens: int(1, 'Completion length cap (TRL max_completion_length).').default(64),
    temperature: num({ gt: 0 }, 'Sampling temperature.').default(1.0),
    top_p: num({ gt: 0, lte: 1 }, 'Nucleus sampling mass; 1 samples the full distribution.').default(1.0),
    lr: num({ gte: 0 }, 'Policy learning rate (TRL learning_rate). 0 leaves the policy as it is: a control run, whose realized credit is exactly 0.').default(
      1.0e-4,
    ),
    epochs_per_step: int(1, 'PPO inner epochs over each batch (mu; TRL num_iterations).').default(1),
    gradient_accumulation_steps: int(
      1,
      "Micro-batches per update (TRL gradient_accumulation_steps): the step's completions are " +
        'split into this many near-equal slices, whose gradients are summed into one update; the loss, advantages and credit ' +
        'are still those of the whole batch (a first pass without a tape reads its log-probs). Peak memory falls to about one ' +
        "slice's activations, for one more forward pass per update. Not with credit.strategy attribution.",
    ).default(1),
    clip_eps: num(
      { gte: 0 },
      'Lower clip: the ratio is clipped at 1 − clip_eps (TRL epsilon). Default 0.2; with importance_sampling_level: sequence, ' +
        "GSPO's 3e-4 (its sequence ratio moves far less than a token's).",
    ).default(0.2),
    clip_eps_high: num(
      { gte: 0 },
      'Upper clip: the ratio is clipped at 1 + clip_eps_high (TRL epsilon_high; DAPO uses 0.28). Default 0.2; with ' +
        "importance_sampling_level: sequence, GSPO's 4e-4.",
    ).default(0.2),
    kl_beta: num({ gte: 0 }, 'Weight of the k3 KL penalty to the reference model (TRL beta); 0 disables it.').default(0.0),
    scale_rewards: oneOf(
      ['group', 'batch', 'none'],
      "Advantage normalisation, as TRL's scale_rewards: group: (r − mean_g)/(std_g + 1e-4); " +
        "batch: (r − mean_g)/(std_batch + 1e-4), the group mean with the whole batch's std; none: r − mean_g (Dr. GRPO).",
    ).default('group'),
    loss_agg: oneOf(
      ['token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm'],
      'Loss aggregation (TRL loss_type): ' +
        'token_mean: Σ m·loss / Σ m; seq_mean_token_mean: mean over episodes of per-episode token means; ' +
        'seq_mean_token_sum_norm: Σ m·loss / (episodes · max_new_tokens).',
    ).default('token_mean'),
    overlong_buffer: allow(
      z
        .strictObject({
          len: z.int().min(1).describe('The buffer: the last this many tokens before max_new_tokens.'),
          penalty: z.number().min(0).describe('The penalty at max_new_tokens (veRL overlong_penalty_factor).'),
        })
        .nullable()
        .describe(
          "DAPO's soft overlong punishment (veRL reward_manager.overlong_buffer): a completion of L tokens that ends inside the last " +
            'len tokens of max_new_tokens gets −penalty·(L − (max_new_tokens − len))/len added to its reward, reaching −penalty at ' +
            'max_new_tokens. null: off.',
        ),
      'a mapping {len: an integer ≥ 1, penalty: a number ≥ 0}, or null',
    ).default(null),
    dynamic_sampling: bool(
      "DAPO's dynamic sampling (veRL algorithm.filter_groups with DAPO's metric acc): drop the groups whose answers are all " +
        "correct or all wrong by the task's success (not by the total reward, whose format part and overlong penalty would keep " +
        'groups with no answer signal) and draw more prompts until prompts_per_step groups carry one, up to ' +
        'max_resample_batches more draws. Logged as groups_drawn and resampled_frac.',
    ).default(false),
    max_resample_batches: int(
      0,
      'With dynamic_sampling: at most this many extra draws of prompts_per_step prompts per step (veRL max_num_gen_batches). ' +
        'When they do not fill the batch the step trains on the groups that carry a signal, where veRL raises an error: a ' +
        'small task runs out of undecided prompts long before a 0.5B model does, and effective_groups logs how full the step was.',
    ).default(4),
    mask_truncated_completions: bool(
      "Leave completions that hit max_new_tokens without ending (no EOS, no </answer>) out of the loss (TRL's " +
        'mask_truncated_completions): their tokens get no gradient and do not count in loss_agg.',
    ).default(false),
    importance_sampling_level: oneOf(
      ['token', 'sequence'],
      "The importance ratio's level (TRL importance_sampling_level): token: ρ_t = π/π_old per token (GRPO); sequence: " +
        "GSPO's s = exp(mean over the completion's tokens of log ρ_t), one ratio and one clip per sequence, the gradient " +
        "flowing through the mean, so every token of a completion gets the mean of its advantages: a credit strategy's " +
        'per-token credit is averaged away, and sequence is refused with any credit.strategy but none. Its clip defaults ' +
        "are GSPO's (clip_eps 3e-4, clip_eps_high 4e-4) unless set. With strategy none and epochs_per_step 1 both levels give the same update.",
    ).default('token'),
    // grpo.policy_loss and each variant's own keys come from the loss catalog: each declares its options once.
    ...lossShape(),
    grad_clip: num({ gt: 0 }, 'Global gradient-norm clip (TRL max_grad_norm).').default(1.0),
    eval_every: int(1, 'Evaluate on the held-out set every this many steps.').default(10),
    checkpoint_every: int(1, 'Write a checkpoint every this many steps.').default(25),
    max_nonfinite_steps: int(
      1,
      'End the run as failed ("diverged at step N") after this many GRPO steps in a row whose loss or ' +
        'gradient was not finite (each such update is skipped).',
    ).default(5),
  },
  'GRPO training.',
);

// The credit section comes from the strategy catalog: each strategy declares its own parameters once (and its checks
// across sections, which run on the whole config: schema.ts).
export const creditSchema = section(creditShape(), 'Credit assignment.');

const loggingSchema = section(
  {
    tokens: bool("Write the per-token Arrow tables (the heatmap's data).").default(true),
    every: int(1, 'Log tables every this many steps.').default(1),
    probe_every: int(
      0,
      "Keep the policy that sampled step 1 and every this many steps (<run>/policies/, the model's weights in float32) so " +
        '`credit-lens probe --step N` can sample from it; checkpoint N − 1 serves too where it is kept. 0 keeps none.',
    ).default(25),
    realized_credit: bool(
      "After each logged update, re-score the step's episodes under the updated policy and log realized = log π_new(y_t) − " +
        "log π_old(y_t) per token (the token table's realized column): what the update did to each token, against what its " +
        'Â told it. One more forward pass over the step (logged as realized_seconds).',
    ).default(false),
    ref_logratio: bool(
      "At each logged step, score the step's episodes under the reference policy (the run's starting policy: after SFT, " +
        'model.init_checkpoint, or the LoRA base; the one grpo.kl_beta uses) and log ref_logratio = log π(y_t) − ' +
        "log π_ref(y_t) per token (the token table's ref_logratio column): how far training so far has moved each sampled " +
        "token, the natural comparator for realized credit. One more forward pass, and the reference's weights in memory.",
    ).default(false),
    ...sinkShape(),
  },
  'What the run directory records.',
);

/** An inference server's API (server_apis/catalog.ts): auto asks it which one it speaks. */
export { SERVER_APIS };

const rolloutSchema = section(
  {
    server: allow(
      z
        .string()
        .regex(/^https?:\/\/\S+$/)
        .nullable()
        .describe(
          'An SGLang server (e.g. http://gpu-box:30000) that samples the GRPO rollouts and evals instead of this process; the ' +
            'updates still run here. After each update the policy is written to <run>/rollout/ and loaded by the server ' +
            '(POST /update_weights_from_disk) before the next step samples. null samples here (an addition to design.md#config).',
        ),
      'null, or an http:// or https:// URL',
    ).default(null),
    api: oneOf(
      SERVER_APIS,
      `The server's API: auto asks it (${SERVER_API_SPECS.map((s) => `${s.identifyRoutes} is ${s.name}'s`).join('; ')}). ${SERVER_API_SPECS.map((s) => s.summary).join('; ')}.`,
    ).default('auto'),
    sync: oneOf(['disk'], 'How the server gets each update: disk writes the policy as a safetensors folder and asks the server to load it.').default('disk'),
    concurrency: int(1, 'Requests in flight at once, one per prompt with its group_size continuations.').default(64),
  },
  'Where GRPO samples its rollouts: here, or on an inference server (an addition to design.md#config).',
);

export const baseSchema = z.strictObject({
  name: allow(
    z
      .string()
      .regex(/^[A-Za-z0-9._-]+$/)
      .describe('Run name; the run goes to <output_dir>/<name>-<yyyymmdd-hhmmss>/.'),
    "letters, digits, '.', '_' or '-' (it names the run's folder)",
  ).default('countdown-baseline'),
  seed: int(0, 'Seed of every random stream of the run.').default(1),
  engine: oneOf(
    ['tfjs', 'trl'],
    'What trains the run. tfjs: this engine (TensorFlow.js, CPU or WebGPU). trl: the Python package credit_lens in ' +
      "TRL's GRPOTrainer on PyTorch (a GPU where one is seen), the model from model.source hf; the task and its rewards " +
      'stay here (a `credit-lens reward` worker). Keys trl does not carry are refused by name.',
  ).default('tfjs'),
  backend: oneOf(
    BACKENDS,
    'TensorFlow.js backend. auto: webgpu on a hardware GPU adapter (never a software one such as llvmpipe; backend webgpu ' +
      'takes one, with a warning), else tfjs-node-gpu if it sees a GPU, else tfjs-node, else wasm-blas ' +
      '(wasm with its matrix products on OpenBLAS, where libopenblas is installed), else wasm, else cpu. Each backend is ' +
      'bit-reproducible with itself; they differ in float rounding.',
  ).default('auto'),
  output_dir: allow(
    z.string().min(1).describe('Folder for runs, relative to the config file.'),
    "a path (relative paths resolve against the config file's folder)",
  ).default('runs'),
  model: modelSchema.prefault({}),
  task: taskSchema.prefault({}),
  sft: sftSchema.prefault({}),
  grpo: grpoSchema.prefault({}),
  credit: creditSchema.prefault({}),
  logging: loggingSchema.prefault({}),
  rollout: rolloutSchema.prefault({}),
});

export const CONFIG_PATHS = collectPaths(baseSchema, '', []);
export const CONFIG_PATH_SET = new Set(CONFIG_PATHS);
export const ARRAY_VALUED_PATHS = new Set(
  CONFIG_PATHS.filter((p) => {
    const t = defOf(core(schemaAt(baseSchema, p.split('.'))!)).type;
    return t === 'tuple' || t === 'array';
  }),
);
/** Keys holding file-system paths: resolved against the config's folder. */
export const PATH_KEYS = [
  'output_dir',
  'model.path',
  'model.init_checkpoint',
  'task.path',
  'task.reward_module',
  'credit.reward_variance.importance_checkpoint',
];
