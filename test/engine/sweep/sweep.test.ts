import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type CreditConfig, getDotted, parseConfigText, STRATEGIES } from '../../../src/engine/config/config';
import { isUserError } from '../../../src/engine/core/errors';
import { expandSweep, STRATEGY_PARAMS } from '../../../src/engine/sweep/sweep';

function config(text: string): CreditConfig {
  const r = parseConfigText(text);
  assert.deepEqual(r.issues, []);
  return r.config!;
}

// Seed doc 001's "Compare All Mitigations" list: 1 baseline + 3 think_discounts + 3 epsilons + 1 credit_scale
// + 1 entropy_temp + 3 mask_percentiles = 12 runs.
const SEED_DOC_001 = `name: countdown-baseline
sweep:
  grid:
    - {credit.strategy: none}
    - {credit.strategy: outcome_conditional, credit.think_discount: [0.25, 0.5, 0.75]}
    - {credit.strategy: inverse_logprob, credit.epsilon: [0.01, 0.1, 0.5]}
    - {credit.strategy: attention_credit, credit.credit_scale: 2.0}
    - {credit.strategy: entropy_weighted, credit.entropy_temp: 1.0}
    - {credit.strategy: entropy_mask, credit.mask_percentile: [70, 80, 90]}
`;

test("seed doc 001's mitigation list expands to exactly its 12 runs, named by strategy and parameter", () => {
  const runs = expandSweep(config(SEED_DOC_001));
  assert.deepEqual(
    runs.map((r) => r.name),
    [
      'countdown-baseline-none',
      'countdown-baseline-outcome_conditional-td0.25',
      'countdown-baseline-outcome_conditional-td0.5',
      'countdown-baseline-outcome_conditional-td0.75',
      'countdown-baseline-inverse_logprob-eps0.01',
      'countdown-baseline-inverse_logprob-eps0.1',
      'countdown-baseline-inverse_logprob-eps0.5',
      'countdown-baseline-attention_credit-cs2',
      'countdown-baseline-entropy_weighted-et1',
      'countdown-baseline-entropy_mask-mp70',
      'countdown-baseline-entropy_mask-mp80',
      'countdown-baseline-entropy_mask-mp90',
    ],
  );
  const td = runs[2];
  assert.deepEqual(td.overrides, { 'credit.strategy': 'outcome_conditional', 'credit.think_discount': 0.5 });
  assert.equal(td.config.credit.strategy, 'outcome_conditional');
  assert.equal(td.config.name, td.name, 'each run is named for its folder');
  assert.equal(td.config.sweep, undefined, 'a run is not itself a sweep');
  assert.equal(runs[9].config.credit.mask_percentile, 70);
  assert.equal(runs[4].config.credit.epsilon, 0.01);
  // Untouched keys keep the base config's values.
  assert.equal(runs[4].config.credit.think_discount, 0.5);
});

test('a mapping grid is a cartesian product; parameters the strategy ignores are dropped with their duplicates', () => {
  // design.md#config's example: 2 strategies × 3 discounts = 6 combinations, but `none` ignores think_discount, so its
  // three combinations are one run: 1 + 3 = 4.
  const cfg = config('sweep:\n  grid: {credit.strategy: [none, outcome_conditional], credit.think_discount: [0.25, 0.5, 0.75]}\n');
  const runs = expandSweep(cfg);
  assert.deepEqual(
    runs.map((r) => r.name),
    [
      'countdown-baseline-none',
      'countdown-baseline-outcome_conditional-td0.25',
      'countdown-baseline-outcome_conditional-td0.5',
      'countdown-baseline-outcome_conditional-td0.75',
    ],
  );
  assert.deepEqual(runs[0].overrides, { 'credit.strategy': 'none' });
  assert.equal(runs[0].config.credit.think_discount, 0.5, 'the dropped override does not leak into the config');
});

test('a full product of keys every strategy uses: 2 × 3 = 6 runs with distinct names', () => {
  const runs = expandSweep(config('name: lr\n'), { 'grpo.lr': [1e-4, 3e-4], seed: [1, 2, 3] });
  assert.equal(runs.length, 6);
  assert.deepEqual(
    runs.map((r) => r.name),
    ['lr-lr0.0001-seed1', 'lr-lr0.0001-seed2', 'lr-lr0.0001-seed3', 'lr-lr0.0003-seed1', 'lr-lr0.0003-seed2', 'lr-lr0.0003-seed3'],
  );
  assert.deepEqual(
    runs.map((r) => [r.config.grpo.lr, r.config.seed]),
    [
      [1e-4, 1],
      [1e-4, 2],
      [1e-4, 3],
      [3e-4, 1],
      [3e-4, 2],
      [3e-4, 3],
    ],
  );
});

test('names: clashing abbreviations get their section, booleans and pairs read plainly, constants are left out', () => {
  const runs = expandSweep(config('name: x\n'), {
    'sft.lr': [0.1, 0.2],
    'grpo.lr': 0.01,
    'task.numbers': [
      [3, 3],
      [3, 4],
    ],
    'logging.tokens': [true, false],
  });
  // 2 × 1 × 2 × 2 = 8 runs; grpo.lr has one value everywhere, so it names nothing.
  assert.equal(runs.length, 8);
  assert.equal(runs[0].name, 'x-sft_lr0.1-n3-3-tokens');
  assert.equal(runs[7].name, 'x-sft_lr0.2-n3-4-no_tokens');
  assert.equal(new Set(runs.map((r) => r.name)).size, 8);
  assert.ok(runs.every((r) => r.config.grpo.lr === 0.01 && r.overrides['grpo.lr'] === 0.01));
  // A bare pair for an array-valued key is one value, not two.
  const one = expandSweep(config('name: x\n'), { 'task.numbers': [3, 4] });
  assert.equal(one.length, 1);
  assert.deepEqual(one[0].config.task.numbers, [3, 4]);
});

test('no grid: the config itself is the one run', () => {
  const cfg = config('name: solo\n');
  const runs = expandSweep(cfg);
  assert.equal(runs.length, 1);
  assert.equal(runs[0].name, 'solo');
  assert.deepEqual(runs[0].config, cfg);
});

test('bad grids throw a UserError naming the key, with did-you-mean', () => {
  const cfg = config('name: x\n');
  assert.throws(
    () => expandSweep(cfg, { 'grpo.num_generations': [4, 8] }),
    (e: unknown) => isUserError(e) && /did you mean `grpo\.group_size`\?/.test((e as Error).message),
  );
  assert.throws(
    () => expandSweep(cfg, { 'credit.strategy': ['none', 'entropy_masking'] }),
    (e: unknown) => isUserError(e) && /sweep\.grid\.credit\.strategy\[1\]: got "entropy_masking".*did you mean `entropy_mask`\?/.test((e as Error).message),
  );
});

test('each run is re-validated, so a strategy missing its requirements is reported by run name', () => {
  assert.throws(
    () => expandSweep(config('name: x\n'), [{ 'credit.strategy': 'none' }, { 'credit.strategy': 'reward_variance' }]),
    (e: unknown) => isUserError(e) && /x-reward_variance: credit\.reward_variance\.importance_checkpoint: got null; it is required/.test((e as Error).message),
  );
  assert.throws(
    () => expandSweep(config('name: x\n'), { 'model.n_heads': [3, 4] }),
    (e: unknown) => isUserError(e) && /x-nh3: model\.n_heads: got 3, expected a divisor of model\.d_model/.test((e as Error).message),
  );
});

test('STRATEGY_PARAMS covers every strategy and names real config keys', () => {
  assert.deepEqual(Object.keys(STRATEGY_PARAMS).sort(), [...STRATEGIES].sort());
  const defaults = config('name: x\n');
  for (const [strategy, params] of Object.entries(STRATEGY_PARAMS)) {
    for (const p of params) {
      assert.ok(p.startsWith('credit.'), `${strategy}: ${p}`);
      assert.notEqual(getDotted(defaults, p), undefined, `${strategy}: ${p} is a config key`);
    }
  }
  assert.deepEqual(STRATEGY_PARAMS.outcome_conditional, ['credit.think_discount']);
  assert.deepEqual(STRATEGY_PARAMS.entropy_mask, ['credit.mask_percentile', 'credit.entropy_mask_norm']);
  assert.deepEqual(STRATEGY_PARAMS.inverse_logprob, ['credit.epsilon', 'credit.inverse_logprob_form']);
});

test('sweep.seeds runs every grid point once per seed (a list, or a count from the config seed), named -seed<N>', () => {
  const listed = expandSweep(config('name: m\nseed: 1\nsweep:\n  grid: {credit.strategy: [none, entropy_mask]}\n  seeds: [1, 2, 3]\n'));
  assert.deepEqual(
    listed.map((r) => r.name),
    ['m-none-seed1', 'm-none-seed2', 'm-none-seed3', 'm-entropy_mask-seed1', 'm-entropy_mask-seed2', 'm-entropy_mask-seed3'],
  );
  assert.deepEqual(
    listed.map((r) => r.config.seed),
    [1, 2, 3, 1, 2, 3],
  );
  assert.deepEqual(listed[4].overrides, { 'credit.strategy': 'entropy_mask', seed: 2 });
  assert.equal(listed[4].config.credit.strategy, 'entropy_mask');
  // A count starts at the config's seed; no grid means the config itself, once per seed.
  const counted = expandSweep(config('name: m\nseed: 7\nsweep:\n  seeds: 2\n'));
  assert.deepEqual(
    counted.map((r) => [r.name, r.config.seed]),
    [
      ['m-seed7', 7],
      ['m-seed8', 8],
    ],
  );
  assert.equal(parseConfigText('name: m\nsweep: {seeds: 0}\n').issues[0].path, 'sweep.seeds');
});

test('sweep.warm_starts crosses every grid point and seed with K shared SFT starts, named -start<sft seed>-seed<N>', async () => {
  const { warmStartDir } = await import('../../../src/engine/train/warm_start');
  const { runGroup } = await import('../../../src/protocol/compare');
  const runs = expandSweep(
    config('name: m\nseed: 1\nsft:\n  steps: 10\n  seed: 4\nsweep:\n  grid: {credit.strategy: [none, entropy_mask]}\n  seeds: [1, 2]\n  warm_starts: 3\n'),
  );
  assert.equal(runs.length, 2 * 3 * 2);
  assert.deepEqual(
    runs.slice(0, 6).map((r) => [r.name, r.config.sft.seed, r.config.seed]),
    [
      ['m-none-start4-seed1', 4, 1],
      ['m-none-start4-seed2', 4, 2],
      ['m-none-start5-seed1', 5, 1],
      ['m-none-start5-seed2', 5, 2],
      ['m-none-start6-seed1', 6, 1],
      ['m-none-start6-seed2', 6, 2],
    ],
  );
  // every run shares its start (sft.share), and the starts are three different SFT runs; the strategies of one start
  // share it (the warm start's key holds no credit setting)
  assert.ok(runs.every((r) => r.config.sft.share));
  assert.equal(new Set(runs.map((r) => warmStartDir(r.config))).size, 3);
  assert.equal(warmStartDir(runs[0].config), warmStartDir(runs[6].config));
  assert.deepEqual(runs[8].overrides, { 'credit.strategy': 'entropy_mask', 'sft.seed': 5, seed: 1 });
  // compare groups every start and seed of one grid point together
  assert.deepEqual([...new Set(runs.map((r) => runGroup(r.name)))], ['m-none', 'm-entropy_mask']);
  // a list names the sft seeds
  assert.deepEqual(
    expandSweep(config('name: m\nsft: {steps: 10}\nsweep:\n  warm_starts: [2, 9]\n')).map((r) => r.name),
    ['m-start2', 'm-start9'],
  );
  // a start is an SFT run: with none to train, the field is refused, naming why
  const bad = parseConfigText('name: m\nsft:\n  steps: 0\nsweep:\n  warm_starts: 3\n').issues;
  assert.equal(bad[0].path, 'sweep.warm_starts');
  assert.match(bad[0].message, /sft\.steps: 0/);
  assert.equal(parseConfigText('name: m\nsweep: {warm_starts: 0}\n').issues[0].path, 'sweep.warm_starts');
});

test('sweep.executor and sweep.slurm: validated, with sbatch-style values', () => {
  const c = config('name: m\nsweep:\n  executor: slurm\n  slurm: {partition: gpu, time: "2:00:00", mem: 8G, max_parallel: 4, extra_args: ["--gres=gpu:1"]}\n');
  assert.equal(c.sweep!.executor, 'slurm');
  assert.deepEqual([c.sweep!.slurm!.partition, c.sweep!.slurm!.signal, c.sweep!.slurm!.requeue], ['gpu', 'B:TERM@120', true]);
  const bad = parseConfigText('name: m\nsweep:\n  executor: pbs\n  slurm: {time: "two hours", extra_args: ["rm -rf /"]}\n').issues.map((i) => i.path);
  assert.deepEqual(bad.sort(), ['sweep.executor', 'sweep.slurm.extra_args', 'sweep.slurm.time']);
});
