import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  applyOverrides,
  type ConfigIssue,
  configJsonSchema,
  configToYaml,
  type CreditConfig,
  getDotted,
  loadConfig,
  parseConfigText,
  redactConfig,
  setDotted,
  STRATEGIES,
} from '../../../src/engine/config/config';
import { isUserError } from '../../../src/engine/core/errors';

// design.md#config's example, verbatim (flow mappings re-indented), minus `sweep`: it is also the list of defaults.
const DESIGN_DEFAULTS = `
name: countdown-baseline
seed: 1
backend: auto
output_dir: runs
model:
  source: scratch
  path: null
  d_model: 128
  n_layers: 4
  n_heads: 4
  n_kv_heads: 4
  d_ff: 512
  max_seq_len: 192
task:
  name: countdown
  numbers: [3, 3]
  max_number: 20
  max_target: 100
  reward: grpo_zero
  prompt: compact
  train_size: 4096
  eval_size: 128
  path: null
  reward_module: null
sft:
  steps: 0
  batch_size: 32
  lr: 1.0e-3
grpo:
  steps: 100
  prompts_per_step: 8
  group_size: 8
  max_new_tokens: 64
  temperature: 1.0
  top_p: 1.0
  lr: 1.0e-4
  epochs_per_step: 1
  clip_eps: 0.2
  clip_eps_high: 0.2
  kl_beta: 0.0
  scale_rewards: group
  loss_agg: token_mean
  grad_clip: 1.0
  eval_every: 10
  checkpoint_every: 25
credit:
  strategy: none
  think_discount: 0.5
  epsilon: 0.1
  credit_scale: 2.0
  entropy_temp: 1.0
  mask_percentile: 80
  attribution: { init_std: 0.01, detach_hidden: true }
  cal: { provider: rule, model: null, base_url: null, api_key_env: null, negative_reward: -1.0,
         max_error_span: 64, timeout_s: 30, max_retries: 3, concurrency: 4, cache: true }
  reward_variance: { importance_checkpoint: null, mode: variance_drop, temp: 1.0 }
logging:
  tokens: true
  every: 1
`;

function issuesOf(text: string): ConfigIssue[] {
  const r = parseConfigText(text);
  assert.equal(r.config, null, 'expected the config to be rejected');
  return r.issues;
}

function only(issues: ConfigIssue[], path: string): ConfigIssue {
  const hits = issues.filter((i) => i.path === path);
  assert.equal(hits.length, 1, `one issue at ${path}; got ${JSON.stringify(issues, null, 1)}`);
  return hits[0];
}

test('a config that sets only its name gets every default of design.md#config, plus the additions documented below', () => {
  const { config, issues } = parseConfigText('name: countdown-baseline\n');
  assert.deepEqual(issues, []);
  const expected = parseYaml(DESIGN_DEFAULTS);
  expected.model.rope_theta = 10000;
  expected.model.tie_embeddings = true;
  expected.model.init_checkpoint = null;
  // LoRA and the frozen-weights options (the smaller footprints of the seeds' model size)
  expected.model.lora = null;
  expected.model.freeze_embeddings = false;
  expected.model.trainable_layers = null;
  expected.model.torch_dtype = 'float32';
  expected.grpo.max_nonfinite_steps = 5;
  // which engine trains (TRL through the Python package is the other)
  expected.engine = 'tfjs';
  expected.credit.inverse_logprob_form = 'clean';
  expected.credit.entropy_mask_norm = 'valid';
  // the scratch model's tokenizer, the word-problem task, GSM8K lines
  expected.model.tokenizer = 'char';
  expected.model.vocab_size = 512;
  expected.task.max_steps = 3;
  expected.task.format = 'plain';
  // splits of their own, a validation split, CAL's scale and placement
  expected.task.split_seed = 1;
  expected.task.val_size = 0;
  expected.credit.cal.scale = 'raw';
  expected.credit.cal.placement = 'span';
  // a shared SFT warm start, the attribution head's objective
  expected.sft.share = false;
  expected.sft.seed = 1;
  expected.credit.attribution.objective = 'contribution';
  expected.credit.attribution.entropy_coef = 0.1;
  // micro-batched updates
  expected.grpo.gradient_accumulation_steps = 1;
  // the peers' losses (TRL's and veRL's names), all off by default
  expected.grpo.importance_sampling_level = 'token';
  expected.grpo.policy_loss = 'ppo';
  expected.grpo.cispo_clip = 'two_sided';
  expected.grpo.overlong_buffer = null;
  expected.grpo.mask_truncated_completions = false;
  expected.grpo.dynamic_sampling = false;
  expected.grpo.max_resample_batches = 4;
  // the sampling policies probes need
  expected.logging.probe_every = 25;
  // what each update did to each token (the realized credit column), off by default: it costs a forward pass
  expected.logging.realized_credit = false;
  // the shift of each token from the reference policy (the ref_logratio column), off by default: a forward pass and the reference's weights
  expected.logging.ref_logratio = false;
  // metrics beside metrics.jsonl: TensorBoard event files on by default (design.md#sampling-and-metrics), an MLflow server only when named
  expected.logging.tensorboard = true;
  expected.logging.mlflow = null;
  // the literature's methods, each with its block
  expected.credit.gtpo = { form: 'seed', alpha1: 1, alpha2: 0.1, entropy_clip: null };
  expected.credit.ktae = { alpha: 1, beta: 1, tf: true };
  expected.credit.reward_decomposition = { reasoning: true };
  expected.credit.otb = { handle_zero_tail: true };
  expected.credit.mc_value = { segments: 'fixed', segment_len: 8, cutpoint_tau: 0.5, cutpoints_per_segment: 1, rollouts: 4, prob_mask: false };
  // rollouts sampled here unless an inference server is named
  expected.rollout = { server: null, api: 'auto', sync: 'disk', concurrency: 64 };
  assert.deepEqual(config, expected);
});

test('the design.md#config example itself (with its sweep) is valid and keeps what it says', () => {
  const text = `${DESIGN_DEFAULTS}sweep:\n  grid: { credit.strategy: [none, outcome_conditional], credit.think_discount: [0.25, 0.5, 0.75] }\n`;
  const { config, issues } = parseConfigText(text);
  assert.deepEqual(issues, []);
  assert.deepEqual(config!.sweep, { grid: { 'credit.strategy': ['none', 'outcome_conditional'], 'credit.think_discount': [0.25, 0.5, 0.75] } });
});

test('partial sections keep their other defaults', () => {
  const { config } = parseConfigText('grpo:\n  group_size: 4\ncredit:\n  cal: {provider: rule, concurrency: 2}\n');
  assert.equal(config!.grpo.group_size, 4);
  assert.equal(config!.grpo.steps, 100);
  assert.equal(config!.credit.cal.concurrency, 2);
  assert.equal(config!.credit.cal.max_retries, 3);
  assert.equal(config!.credit.reward_variance.mode, 'variance_drop');
});

test('unknown keys name their path and suggest the sibling (edit distance) or the TRL name', () => {
  const issues = issuesOf('grpo:\n  group_sise: 4\n  num_generations: 8\n  beta: 0.04\n  epsilon_high: 0.28\n  loss_type: token_mean\n');
  assert.match(only(issues, 'grpo.group_sise').message, /^grpo\.group_sise: unknown key; did you mean `group_size`\?/);
  assert.match(only(issues, 'grpo.num_generations').message, /did you mean `group_size`\? \(TRL's num_generations\)/);
  assert.match(only(issues, 'grpo.beta').message, /did you mean `kl_beta`\?/);
  assert.match(only(issues, 'grpo.epsilon_high').message, /did you mean `clip_eps_high`\?/);
  assert.match(only(issues, 'grpo.loss_type').message, /did you mean `loss_agg`\?/);
  assert.equal(only(issues, 'grpo.num_generations').value, 8);
});

test('a key in the wrong section points at the right one; a hopeless one lists the allowed keys', () => {
  const issues = issuesOf('grpo:\n  think_discount: 0.3\nsft:\n  learning_rate: 0.1\nfrobnicate: 1\n');
  assert.match(only(issues, 'grpo.think_discount').message, /did you mean `credit\.think_discount`\?/);
  // sft has its own lr, so TRL's learning_rate under sft means sft.lr, not grpo.lr.
  assert.match(only(issues, 'sft.learning_rate').message, /did you mean `lr`\?/);
  assert.match(only(issues, 'frobnicate').message, /allowed keys here: name, seed, engine, backend, output_dir, model/);
});

test('a wrong enum value names the path, the value, the choices and the nearest choice', () => {
  const issues = issuesOf('grpo:\n  scale_rewards: grop\ncredit:\n  strategy: entropy_masking\n');
  const sr = only(issues, 'grpo.scale_rewards');
  assert.equal(sr.message, 'grpo.scale_rewards: got "grop", expected one of: group, batch, none; did you mean `group`?');
  assert.equal(sr.value, 'grop');
  // Seed doc 001 calls it entropy_masking.
  assert.match(only(issues, 'credit.strategy').message, /one of: none, outcome_conditional, .*did you mean `entropy_mask`\?/);
  // PyTorch spells it torch.half too; the 16-bit formats are the choices
  assert.equal(
    only(issuesOf('model:\n  torch_dtype: half\n'), 'model.torch_dtype').message,
    'model.torch_dtype: got "half", expected one of: float32, float16, bfloat16',
  );
});

test('sizes must be positive integers and ranges are stated', () => {
  const issues = issuesOf(
    'model:\n  d_model: -8\ngrpo:\n  group_size: 1\n  top_p: 0\n  prompts_per_step: 2.5\n' + 'credit:\n  mask_percentile: 101\n  epsilon: 0\n',
  );
  assert.equal(only(issues, 'model.d_model').message, 'model.d_model: got -8, expected an integer ≥ 1');
  assert.equal(only(issues, 'grpo.group_size').message, 'grpo.group_size: got 1, expected an integer ≥ 2');
  assert.equal(only(issues, 'grpo.top_p').message, 'grpo.top_p: got 0, expected a number > 0 and ≤ 1');
  assert.equal(only(issues, 'grpo.prompts_per_step').message, 'grpo.prompts_per_step: got 2.5, expected an integer ≥ 1');
  assert.equal(only(issues, 'credit.mask_percentile').message, 'credit.mask_percentile: got 101, expected a number ≥ 0 and ≤ 100');
  assert.equal(only(issues, 'credit.epsilon').message, 'credit.epsilon: got 0, expected a number > 0');
  assert.equal(issues.length, 6, 'all errors are reported, not only the first');
});

test('a wrong type names the path and the value', () => {
  const issues = issuesOf('grpo:\n  steps: ten\nlogging:\n  tokens: "yes"\n');
  assert.equal(only(issues, 'grpo.steps').message, 'grpo.steps: got "ten", expected an integer ≥ 0');
  assert.equal(only(issues, 'logging.tokens').message, 'logging.tokens: got "yes", expected true or false');
});

test('an empty section (YAML null) says how to write one', () => {
  const issues = issuesOf('sft:\n');
  assert.match(only(issues, 'sft').message, /^sft: got null, expected a mapping with keys: steps, batch_size, lr, share, seed .*`\{\}`/);
});

test('task.numbers is a [min, max] pair with 1 ≤ min ≤ max ≤ 6', () => {
  for (const bad of ['[5, 3]', '[0, 3]', '[3, 7]', '[3]', '3']) {
    const issue = only(issuesOf(`task:\n  numbers: ${bad}\n`), 'task.numbers');
    assert.match(issue.message, /^task\.numbers: got .*, expected /, bad);
  }
  assert.deepEqual(parseConfigText('task:\n  numbers: [1, 6]\n').config!.task.numbers, [1, 6]);
});

test('head counts must divide: n_heads | d_model (even head size), n_kv_heads | n_heads', () => {
  // 128 / 3 is not an integer.
  assert.match(
    only(issuesOf('model:\n  n_heads: 3\n  n_kv_heads: 1\n'), 'model.n_heads').message,
    /^model\.n_heads: got 3, expected a divisor of model\.d_model \(128\)/,
  );
  // 4 query heads cannot share 3 key/value heads.
  assert.match(
    only(issuesOf('model:\n  n_kv_heads: 3\n'), 'model.n_kv_heads').message,
    /^model\.n_kv_heads: got 3, expected a divisor of model\.n_heads \(4\)/,
  );
  // 96 / 32 = 3 dimensions per head: odd, so rotary pairs do not fit.
  assert.match(
    only(issuesOf('model:\n  d_model: 96\n  n_heads: 32\n  n_kv_heads: 8\n'), 'model.n_heads').message,
    /head size d_model \/ n_heads = 3 must be even/,
  );
  // GQA that divides is fine: 8 heads over 2 kv heads, 128 / 8 = 16 per head.
  assert.deepEqual(parseConfigText('model:\n  n_heads: 8\n  n_kv_heads: 2\n').issues, []);
});

test('conditionally required keys: hf path, jsonl path, reward_variance checkpoint, cal provider settings', () => {
  const hf = 'model:\n  source: hf\n';
  const issue = only(issuesOf(hf), 'model.path');
  assert.match(issue.message, /^model\.path: got null; it is required when model\.source is hf/);
  // model.path is absent, so the position falls back to the value that made it required.
  assert.equal(hf.slice(...issue.offset!), 'hf');
  assert.match(only(issuesOf('task:\n  name: jsonl\n'), 'task.path').message, /required when task\.name is jsonl/);
  assert.match(
    only(issuesOf('credit:\n  strategy: reward_variance\n'), 'credit.reward_variance.importance_checkpoint').message,
    /required when credit\.strategy is reward_variance/,
  );
  const openai = issuesOf('credit:\n  cal: {provider: openai}\n');
  assert.deepEqual(openai.map((i) => i.path).sort(), ['credit.cal.api_key_env', 'credit.cal.base_url', 'credit.cal.model']);
  const gemini = issuesOf('credit:\n  cal: {provider: gemini, model: gemini-2.0-flash}\n');
  assert.deepEqual(
    gemini.map((i) => i.path),
    ['credit.cal.api_key_env'],
  );
  assert.deepEqual(parseConfigText('model:\n  source: hf\n  path: ./qwen\n').issues, []);
});

test('a key pasted into api_key_env, or under a secret-looking name, is never echoed', () => {
  const text = 'credit:\n  cal:\n    api_key_env: sk-proj-abc123\n    api_key: sk-proj-xyz789\n';
  const issues = issuesOf(text);
  assert.match(only(issues, 'credit.cal.api_key_env').message, /NAME of an environment variable/);
  assert.match(only(issues, 'credit.cal.api_key').message, /secrets never go in the config/);
  for (const i of issues) {
    assert.doesNotMatch(i.message + JSON.stringify(i.value ?? null), /abc123|xyz789/);
  }
});

test('offsets, line and col point at the offending node', () => {
  const text = 'name: demo\ngrpo:\n  steps: 10\n  group_size: 1\n  num_generations: 4\ncredit: {strategy: nope}\n';
  const issues = issuesOf(text);
  const gs = only(issues, 'grpo.group_size');
  assert.equal(text.slice(...gs.offset!), '1');
  // Line 4 is "  group_size: 1"; the value starts after 2 spaces + "group_size: " (12 chars), at column 15.
  assert.deepEqual([gs.line, gs.col], [4, 15]);
  const unknown = only(issues, 'grpo.num_generations');
  assert.equal(text.slice(...unknown.offset!), 'num_generations');
  assert.deepEqual([unknown.line, unknown.col], [5, 3]);
  const strat = only(issues, 'credit.strategy');
  assert.equal(text.slice(...strat.offset!), 'nope');
  assert.equal(strat.line, 6);
  // Document order.
  assert.deepEqual(
    issues.map((i) => i.line),
    [4, 5, 6],
  );
});

test('YAML syntax errors and a non-mapping document are issues with a position', () => {
  const bad = parseConfigText('grpo:\n  steps: [1, 2\n');
  assert.equal(bad.config, null);
  assert.ok(bad.issues.length >= 1);
  assert.match(bad.issues[0].message, /^YAML syntax error/);
  assert.equal(typeof bad.issues[0].line, 'number');
  const dup = parseConfigText('seed: 1\nseed: 2\n');
  assert.equal(dup.config, null);
  assert.equal(dup.issues[0].line, 2);
  const list = parseConfigText('- a\n- b\n');
  assert.match(list.issues[0].message, /must be a YAML mapping/);
});

test('sweep grid keys must be config paths; values are checked against their key', () => {
  const text = 'sweep:\n  grid:\n    - {credit.strategy: [none, outcom_conditional]}\n    - {credit.think_discont: [0.1]}\n';
  const issues = issuesOf(text);
  const value = only(issues, 'sweep.grid[0].credit.strategy[1]');
  assert.match(value.message, /got "outcom_conditional", expected one of: .*did you mean `outcome_conditional`\?/);
  assert.equal(text.slice(...value.offset!), 'outcom_conditional');
  const key = only(issues, 'sweep.grid[1].credit.think_discont');
  assert.match(key.message, /`credit\.think_discont` is not a config key; did you mean `credit\.think_discount`\?/);
  assert.equal(text.slice(...key.offset!), 'credit.think_discont');
  assert.match(only(issuesOf('sweep:\n  grid: {sweep.grid: [1]}\n'), 'sweep.grid.sweep.grid').message, /cannot set the sweep/);
  assert.match(only(issuesOf('sweep:\n  grid: {seed: []}\n'), 'sweep.grid.seed').message, /at least one value/);
});

test('setDotted / getDotted / applyOverrides', () => {
  const o: Record<string, unknown> = { grpo: { steps: 5 } };
  setDotted(o, 'grpo.lr', 0.1);
  setDotted(o, 'credit.cal.provider', 'rule');
  assert.deepEqual(o, { grpo: { steps: 5, lr: 0.1 }, credit: { cal: { provider: 'rule' } } });
  assert.equal(getDotted(o, 'credit.cal.provider'), 'rule');
  assert.equal(getDotted(o, 'credit.nope.x'), undefined);

  const raw = { grpo: { steps: 100 } };
  const out = applyOverrides(raw, [
    'grpo.steps=3',
    'task.numbers=[3,4]',
    'model.path=null',
    'name=run-a',
    'credit.attribution={init_std: 0.5}',
    'sweep.grid.seed=[1, 2]',
    'sweep.seeds=[1, 2, 3]',
    'sweep.slurm.partition=debug',
  ]);
  assert.deepEqual(out, {
    grpo: { steps: 3 },
    task: { numbers: [3, 4] },
    model: { path: null },
    name: 'run-a',
    credit: { attribution: { init_std: 0.5 } },
    sweep: { grid: { seed: [1, 2] }, seeds: [1, 2, 3], slurm: { partition: 'debug' } },
  });
  assert.deepEqual(raw, { grpo: { steps: 100 } }, 'the input is not modified');
});

test('bad overrides: all reported at once, with did-you-mean', () => {
  try {
    applyOverrides({}, ['grpo.num_generations=4', 'think_discount=0.2', 'grpo.steps', 'grpo.lr.x=1', 'sweep.seed=3']);
    assert.fail('expected a UserError');
  } catch (e) {
    assert.ok(isUserError(e));
    const m = (e as Error).message;
    assert.match(m, /grpo\.num_generations=4: .*did you mean `grpo\.group_size`\?/);
    assert.match(m, /think_discount=0\.2: .*did you mean `credit\.think_discount`\?/);
    assert.match(m, /--set grpo\.steps: expected key=value/);
    assert.match(m, /`grpo\.lr` has no sub-keys/);
    assert.match(m, /sweep\.seed=3: .*did you mean `sweep\.seeds`\?/);
  }
});

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'credit-config-'));
}

test('loadConfig: overrides, validation and relative paths against the config folder', () => {
  const dir = tempDir();
  try {
    mkdirSync(join(dir, 'exp'));
    const file = join(dir, 'exp', 'a.credit.yaml');
    // Every path key must name something that exists (checked before a run directory is made), so make them.
    mkdirSync(join(dir, 'models', 'qwen'), { recursive: true });
    mkdirSync(join(dir, 'exp', 'ckpt', 'imp'), { recursive: true });
    mkdirSync(join(dir, 'abs'));
    writeFileSync(join(dir, 'exp', 'data.jsonl'), '');
    writeFileSync(join(dir, 'abs', 'reward.js'), '');
    writeFileSync(
      file,
      'name: a\nmodel:\n  source: hf\n  path: ../models/qwen\ntask:\n  name: jsonl\n  path: data.jsonl\n' +
        `  reward_module: ${join(dir, 'abs', 'reward.js')}\ncredit:\n  reward_variance: {importance_checkpoint: ckpt/imp}\n`,
    );
    const { config, configPath, configDir } = loadConfig(file, ['grpo.steps=3', 'task.numbers=[3,4]']);
    assert.equal(configPath, file);
    assert.equal(configDir, join(dir, 'exp'));
    assert.equal(config.grpo.steps, 3);
    assert.deepEqual(config.task.numbers, [3, 4]);
    assert.equal(config.output_dir, join(dir, 'exp', 'runs'));
    assert.equal(config.model.path, join(dir, 'models', 'qwen'));
    assert.equal(config.task.path, join(dir, 'exp', 'data.jsonl'));
    assert.equal(config.task.reward_module, join(dir, 'abs', 'reward.js'));
    assert.equal(config.credit.reward_variance.importance_checkpoint, join(dir, 'exp', 'ckpt', 'imp'));
    // parseConfigText with `file` resolves the same way, without reading it.
    const parsed = parseConfigText('model: {source: hf, path: m}\n', { file: file });
    assert.equal(parsed.config!.model.path, join(dir, 'exp', 'm'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('loadConfig errors: missing file, invalid values (with file:line:col), bad --set values', () => {
  const dir = tempDir();
  try {
    assert.throws(
      () => loadConfig(join(dir, 'nope.credit.yaml')),
      (e: unknown) => isUserError(e) && /Cannot read config .*nope\.credit\.yaml: no such file/.test((e as Error).message),
    );
    const file = join(dir, 'b.credit.yaml');
    writeFileSync(file, 'grpo:\n  group_size: 1\n  scale_rewards: group\n');
    assert.throws(
      () => loadConfig(file, ['grpo.scale_rewards=bach']),
      (e: unknown) => {
        const m = (e as Error).message;
        assert.ok(isUserError(e));
        assert.match(m, /Invalid config .*b\.credit\.yaml \(2 problems\)/);
        assert.match(m, /b\.credit\.yaml:2:15: grpo\.group_size: got 1, expected an integer ≥ 2/);
        // The bad value came from the command line, so no file position and a note saying so.
        assert.match(m, /\n {2}grpo\.scale_rewards: got "bach", expected one of: group, batch, none; did you mean `batch`\? \(set by --set\)/);
        return true;
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The part of a JSON Schema node these checks read. */
interface JsonSchemaNode {
  type?: string;
  description?: string;
  default?: unknown;
  minimum?: number;
  enum?: unknown[];
  additionalProperties?: boolean;
  properties: Record<string, JsonSchemaNode>;
}

test('JSON Schema: draft-07, strict, enum for credit.strategy, defaults and descriptions', () => {
  const s = configJsonSchema() as { $schema: string; additionalProperties: boolean; properties: Record<string, JsonSchemaNode> };
  assert.equal(s.$schema, 'http://json-schema.org/draft-07/schema#');
  assert.equal(s.additionalProperties, false);
  const strategy = s.properties.credit.properties.strategy;
  assert.deepEqual(strategy.enum, [...STRATEGIES]);
  assert.equal(strategy.default, 'none');
  const gs = s.properties.grpo.properties.group_size;
  assert.equal(gs.default, 8);
  assert.equal(gs.minimum, 2);
  assert.equal(gs.type, 'integer');
  assert.match(gs.description!, /num_generations/);
  assert.equal(s.properties.grpo.additionalProperties, false);
  assert.match(s.properties.sweep.properties.grid.description!, /cartesian product.*list of such mappings/s);
  // Every key the YAML extension hovers has a description.
  const walk = (props: Record<string, JsonSchemaNode>, prefix: string): void => {
    for (const [k, v] of Object.entries(props)) {
      assert.equal(typeof v.description, 'string', `${prefix}${k} has a description`);
      if (v.properties) walk(v.properties, `${prefix}${k}.`);
    }
  };
  walk(s.properties, '');
});

test('redactConfig drops secret-named keys but keeps api_key_env and logging.tokens', () => {
  const cfg = parseConfigText('credit:\n  cal: {provider: gemini, model: g, api_key_env: GEMINI_API_KEY}\n').config!;
  const tampered = structuredClone(cfg) as CreditConfig & { credit: { cal: Record<string, unknown> } };
  tampered.credit.cal.api_key = 'AIzaSECRET';
  (tampered as Record<string, unknown>).password = 'hunter2';
  const red = redactConfig(tampered);
  assert.equal((red.credit.cal as Record<string, unknown>).api_key, undefined);
  assert.equal((red as Record<string, unknown>).password, undefined);
  assert.equal(red.credit.cal.api_key_env, 'GEMINI_API_KEY');
  assert.equal(red.logging.tokens, true);
  assert.doesNotMatch(configToYaml(red), /AIzaSECRET|hunter2/);
  assert.deepEqual(redactConfig(cfg), cfg, 'a validated config loses nothing');
});

test('configToYaml round-trips and writes short lists inline', () => {
  const cfg = parseConfigText('task: {numbers: [2, 4]}\nsweep:\n  grid: [{credit.strategy: none}, {seed: [1, 2]}]\n').config!;
  const text = configToYaml(cfg);
  assert.match(text, /numbers: \[2, 4\]/);
  assert.deepEqual(parseConfigText(text).config, cfg);
});

test('an empty config is an error, not a run of all defaults; every path key must exist before anything is written', () => {
  for (const text of ['', '\n# only a comment\n', '---\n']) {
    const { config, issues } = parseConfigText(text);
    assert.equal(config, null);
    assert.match(issues[0].message, /^empty config: nothing to run/);
  }
  const dir = tempDir();
  try {
    const file = join(dir, 'a.credit.yaml');
    writeFileSync(join(dir, 'data.jsonl'), '');
    writeFileSync(
      file,
      'name: a\nmodel: {source: hf, path: nowhere}\ntask: {name: jsonl, path: data.jsonl, reward_module: data.jsonl}\n' +
        'sweep:\n  grid: {model.init_checkpoint: [ck1, .]}\n',
    );
    assert.throws(
      () => loadConfig(file),
      (e: Error) => {
        assert.match(e.message, new RegExp(`model.path: got "${join(dir, 'nowhere')}", no such folder`));
        assert.match(e.message, new RegExp(`sweep.grid.model.init_checkpoint: got "${join(dir, 'ck1')}", no such folder`));
        assert.doesNotMatch(e.message, /task.path|sweep.grid.model.init_checkpoint: got "[^"]*\/\."/);
        return true;
      },
    );
    assert.deepEqual(readdirSync(dir).sort(), ['a.credit.yaml', 'data.jsonl'], 'nothing was written');
    writeFileSync(file, 'name: a\ntask: {name: jsonl, path: .}\n');
    assert.throws(() => loadConfig(file), /task.path: got ".*", expected a file/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('credit.cal: a key goes only over https or to this machine, and api_key_env must name a key variable', () => {
  const cal = (over: string) => parseConfigText(`name: a\ncredit: {strategy: cal, cal: {provider: openai, model: m, ${over}}}\n`).issues.map((i) => i.message);
  assert.deepEqual(cal('base_url: "https://api.example.com/v1", api_key_env: OPENAI_API_KEY'), []);
  assert.deepEqual(cal('base_url: "http://127.0.0.1:8000", api_key_env: VLLM_TOKEN'), []);
  assert.deepEqual(cal('base_url: "http://localhost:11434", api_key_env: my_key'), []);
  assert.match(
    cal('base_url: "http://collector.example.com", api_key_env: OPENAI_API_KEY')[0],
    /^credit.cal.base_url: got "http:\/\/collector.example.com"; the API key is only sent over https, or over http to this machine/,
  );
  assert.match(cal('base_url: "https://user:pw@api.example.com", api_key_env: OPENAI_API_KEY')[0], /credentials in the URL/);
  assert.match(cal('base_url: "https://api.example.com", api_key_env: HOME')[0], /^credit.cal.api_key_env: got "HOME", expected the name of a key variable/);
  assert.match(cal('base_url: "https://api.example.com", api_key_env: AWS_REGION')[0], /api_key_env/);
});

test('settings that only mean something with another section are refused with the combination that works', () => {
  const base = 'name: x\ntask: {name: countdown}\n';
  const msgs = (t: string) => parseConfigText(t).issues.map((i) => i.message);
  // CAL's group_std divides span credit by the group std; with scale_rewards none the other advantages are not divided.
  assert.deepEqual(msgs(base + 'credit: {strategy: cal, cal: {scale: group_std, provider: rule}}\ngrpo: {scale_rewards: none}\n'), [
    'credit.cal.scale: got "group_std", expected raw with grpo.scale_rewards: none (group_std divides span credit by the group\'s reward std, which this run\'s advantages are not divided by), or grpo.scale_rewards: group',
  ]);
  assert.deepEqual(msgs(base + 'credit: {strategy: cal, cal: {scale: group_std, provider: rule}}\n'), [], 'group_std with scale_rewards group');
  // entropy_mask_norm kept is seed doc 001's normalisation only under token_mean.
  assert.deepEqual(msgs(base + 'credit: {strategy: entropy_mask, entropy_mask_norm: kept}\ngrpo: {loss_agg: seq_mean_token_mean}\n'), [
    'credit.entropy_mask_norm: got "kept", expected valid with grpo.loss_agg: seq_mean_token_mean (kept reproduces the GRPO credit-assignment mitigations\' average over the kept tokens only under token_mean), or grpo.loss_agg: token_mean',
  ]);
  assert.deepEqual(msgs(base + 'credit: {strategy: entropy_mask, entropy_mask_norm: kept}\n'), []);
});

test('GSPO and CISPO settings: the combinations that mean nothing are refused with what works', () => {
  const base = 'name: x\ntask: {name: countdown}\n';
  const msgs = (t: string) => parseConfigText(t).issues.map((i) => i.message);
  assert.deepEqual(msgs(base + 'grpo: {policy_loss: cispo, importance_sampling_level: sequence}\n'), [
    'grpo.importance_sampling_level: got "sequence", expected token with grpo.policy_loss: cispo (CISPO weighs each token by its own ratio), or grpo.policy_loss: ppo for GSPO',
  ]);
  assert.deepEqual(msgs(base + 'grpo: {policy_loss: cispo, cispo_clip: top}\n'), [
    'grpo.cispo_clip: got "top", expected two_sided with grpo.clip_eps_high: 0.2, or grpo.clip_eps_high of at least 1 (with top it is the ratio\'s absolute ceiling, as in TRL; 5.0 recommended; 0.2 would scale every token\'s gradient down)',
  ]);
  assert.deepEqual(msgs(base + 'grpo: {policy_loss: cispo, cispo_clip: top, clip_eps_high: 5}\n'), []);
  assert.deepEqual(msgs(base + 'grpo: {importance_sampling_level: sequence}\n'), []);
  // GSPO's clip range by default (its paper: 3e-4 and 4e-4); the token level keeps 0.2; an explicit clip stays
  const clips = (t: string) => {
    const g = parseConfigText(base + t).config!.grpo;
    return [g.clip_eps, g.clip_eps_high];
  };
  assert.deepEqual(clips('grpo: {importance_sampling_level: sequence}\n'), [3e-4, 4e-4]);
  assert.deepEqual(clips('grpo: {importance_sampling_level: token}\n'), [0.2, 0.2]);
  assert.deepEqual(clips('grpo: {importance_sampling_level: sequence, clip_eps_high: 1e-3}\n'), [3e-4, 1e-3]);
  // a sequence-level ratio averages a strategy's per-token credit away: refused, with what works
  assert.deepEqual(msgs(base + 'grpo: {importance_sampling_level: sequence}\ncredit: {strategy: entropy_weighted}\n'), [
    'grpo.importance_sampling_level: got "sequence", expected token with credit.strategy: entropy_weighted (a sequence-level ratio gives every token its completion\'s mean advantage, averaging the strategy\'s per-token credit away), or credit.strategy: none for GSPO',
  ]);
  // DAPO's overlong buffer lies inside max_new_tokens
  assert.deepEqual(msgs(base + 'grpo: {max_new_tokens: 32, overlong_buffer: {len: 40, penalty: 1}}\n'), [
    'grpo.overlong_buffer.len: got 40, expected at most grpo.max_new_tokens (32): the buffer is the last len tokens before it',
  ]);
  assert.deepEqual(msgs(base + 'grpo: {max_new_tokens: 32, overlong_buffer: {len: 8, penalty: 1}, mask_truncated_completions: true}\n'), []);
  assert.match(msgs(base + 'grpo: {policy_loss: sapo}\n')[0], /^grpo.policy_loss: got "sapo", expected one of: ppo, cispo/);
});
