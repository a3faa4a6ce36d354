// The whole config schema: the base sections plus `sweep` (grid, seeds, executor, Slurm options), whose grid keys
// are checked against the base schema with the did-you-mean of suggest.ts.
import { z } from 'zod';
import { ARRAY_VALUED_PATHS, baseSchema } from './base';
import { allow, allowedOf, bool, oneOf, schemaAt, section } from '../core/fields';
import { checkConfigKey, enumHint } from './suggest';
import { strategySpec } from '../credit/catalog';
import { lossSpec } from '../losses/catalog';

// ---------------------------------------------------------------------------------------------------------
// Sweep grid: `{dotted.key: [values]}` (a cartesian product) or a list of such mappings (each its own product,
// the runs concatenated), e.g. seed doc 001's mitigation list. A scalar stands for a one-value list.

const GRID_DESCRIPTION =
  'Runs of the sweep command. Either a mapping {dotted.key: [values]}: every combination ' +
  '(cartesian product) is one run, e.g. {credit.strategy: [none, outcome_conditional], credit.think_discount: ' +
  '[0.25, 0.5]}. Or a list of such mappings, each expanded on its own and the runs concatenated, for sweeps that ' +
  'are not one product, e.g. [{credit.strategy: none}, {credit.strategy: outcome_conditional, ' +
  'credit.think_discount: [0.25, 0.5, 0.75]}]. A scalar stands for a one-value list. A credit.* parameter that ' +
  "the run's strategy does not use is dropped (and duplicate runs with it). Keys are config paths.";

const gridEntry = z.record(z.string(), z.unknown());
export const gridSchema = allow(
  z.union([gridEntry, z.array(gridEntry).min(1)]).describe(GRID_DESCRIPTION),
  'a mapping of dotted config keys to lists of values, or a list of such mappings',
);

export type SweepGrid = Record<string, unknown> | Record<string, unknown>[];

/** Whether `v` is a list of candidate values for `key`, or one value (a bare array for an array-valued key). */
export function gridValues(key: string, v: unknown): unknown[] {
  if (!Array.isArray(v)) return [v];
  if (ARRAY_VALUED_PATHS.has(key) && !v.some(Array.isArray)) return [v];
  return v;
}

// Every sweep.slurm string becomes part of an #SBATCH line or a line of the job script: a newline or other control
// character would start a line of its own (an option, or a command, that the config does not show).
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /^[^\u0000-\u001f\u007f]*$/;
const ONE_LINE = 'with no newline or other control character';
const slurmText = (description: string) => allow(z.string().min(1).regex(CONTROL).nullable().describe(description), `a non-empty string ${ONE_LINE}, or null`);

export const slurmSchema = section(
  {
    partition: slurmText('sbatch --partition.').default(null),
    time: allow(
      z
        .string()
        .regex(/^(\d+-)?\d+(:\d{1,2}){0,2}$/)
        .nullable()
        .describe('sbatch --time per run, e.g. "2:00:00", "30", "1-12:00:00".'),
      'a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS) or null',
    ).default(null),
    cpus_per_task: allow(z.int().min(1).nullable().describe('sbatch --cpus-per-task.'), 'an integer ≥ 1 or null').default(null),
    mem: allow(
      z
        .string()
        .regex(/^\d+[KMGT]?$/)
        .nullable()
        .describe('sbatch --mem, e.g. "8G".'),
      'a size like 4000, 8G or 512M, or null',
    ).default(null),
    account: slurmText('sbatch --account.').default(null),
    qos: slurmText('sbatch --qos.').default(null),
    max_parallel: allow(z.int().min(1).nullable().describe("The array's %N throttle: at most this many runs at once."), 'an integer ≥ 1 or null').default(null),
    extra_args: allow(
      z
        .array(
          z
            .string()
            .regex(/^--?[A-Za-z]/)
            .regex(CONTROL),
        )
        .describe('Further sbatch flags, one per item, e.g. ["--gres=gpu:1"].'),
      `a list of sbatch flags, each starting with - or -- and ${ONE_LINE}`,
    ).default([]),
    setup: allow(
      z.array(z.string().regex(CONTROL)).describe('Shell lines run before the engine on the compute node, e.g. ["module load node/20"].'),
      `a list of shell lines, each one line (${ONE_LINE})`,
    ).default([]),
    signal: allow(
      z
        .string()
        .regex(/^(B:)?[A-Z0-9]+(@\d+)?$/)
        .describe('sbatch --signal: B:TERM@120 asks the engine to checkpoint and stop 120 s before the time limit.'),
      'a Slurm signal spec like B:TERM@120',
    ).default('B:TERM@120'),
    requeue: bool('sbatch --requeue: a preempted or requeued run starts again and resumes from its last checkpoint.').default(true),
    engine: oneOf(
      ['bundled', 'path'],
      'bundled: node + the engine shipped with the extension (a path the compute nodes must see). ' + "path: `credit-lens` on the compute nodes' PATH.",
    ).default('bundled'),
    node: allow(
      z.string().min(1).regex(CONTROL).describe('The Node.js executable on the compute nodes (engine: bundled).'),
      `a command or path ${ONE_LINE}`,
    ).default('node'),
  },
  'Slurm options for sweep.executor: slurm (one job array per sweep). output_dir must be on storage the login node and ' + 'the compute nodes share.',
);

/** sweep.slurm with every default (what an absent block means). */
export function slurmDefaults(): z.output<typeof slurmSchema> {
  return slurmSchema.parse({});
}

export const seedsSchema = allow(
  z
    .union([z.int().min(1).max(100), z.array(z.int().min(0)).min(1)])
    .describe('Train every grid point once per seed: a list of seeds, or a count n for seeds seed, seed+1, …, seed+n−1.'),
  'a list of seeds (integers ≥ 0) or a count from 1 to 100',
);

export const warmStartsSchema = allow(
  z
    .union([z.int().min(1).max(20), z.array(z.int().min(0)).min(1)])
    .describe(
      'Cross every grid point and seed with K shared SFT warm starts, each trained once with its own sft.seed (a list of ' +
        'sft seeds, or a count K for sft.seed, sft.seed+1, …, sft.seed+K−1) and shared by the runs that start from it ' +
        '(sft.share). Run names get -start<sft seed> before -seed<N>, and compare tests over the starts: a verdict ' +
        'from one start is about that start.',
    ),
  'a list of sft seeds (integers ≥ 0) or a count from 1 to 20',
);

export const sweepSchema = section(
  {
    grid: gridSchema.optional(),
    seeds: seedsSchema.optional(),
    warm_starts: warmStartsSchema.optional(),
    executor: oneOf(
      ['local', 'slurm'],
      'Where the sweep runs: local (this machine, one run after another) or slurm (one ' +
        'job array; see sweep.slurm). The creditLens.executor setting applies when this is not set.',
    ).optional(),
    slurm: slurmSchema.optional(),
  },
  'Optional; used by the sweep command.',
).superRefine((sw, ctx) => {
  if (sw.grid === undefined) return;
  const entries = Array.isArray(sw.grid) ? sw.grid : [sw.grid];
  entries.forEach((entry, i) => {
    const at = Array.isArray(sw.grid) ? ['grid', i] : ['grid'];
    for (const [key, v] of Object.entries(entry)) {
      const bad = key === 'sweep' || key.startsWith('sweep.') ? `\`${key}\`: a sweep cannot set the sweep` : checkConfigKey(key);
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
          ctx.addIssue({ code: 'custom', path: p, params: { expected: (allowedOf(leaf) ?? r.error.issues[0].message) + hint }, message: '' });
        }
      });
    }
  });
});

/** The config schema (zod): snake_case keys, every default from design.md#config, unknown keys rejected. */
export const creditConfigSchema = baseSchema
  .extend({ sweep: sweepSchema.optional() })
  .superRefine((c, ctx) => {
    // Settings of one section that mean something only with a setting of another. The chosen strategy's and loss's own
    // checks are their catalog entries'.
    const checks = [
      ...(strategySpec(c.credit.strategy)?.check?.(c as CreditConfig) ?? []),
      ...(lossSpec(c.grpo.policy_loss)?.check?.(c as CreditConfig) ?? []),
    ];
    for (const issue of checks)
      ctx.addIssue({
        code: 'custom',
        path: issue.path,
        params: { ...(issue.expected !== undefined && { expected: issue.expected }), ...(issue.at && { at: issue.at }) },
        message: issue.message ?? '',
      });
    // GSPO's one ratio per sequence hands every token the mean of its completion's advantages: a strategy's per-token
    // credit would be averaged away while the run is labelled with it.
    if (c.grpo.importance_sampling_level === 'sequence' && c.credit.strategy !== 'none')
      ctx.addIssue({
        code: 'custom',
        path: ['grpo', 'importance_sampling_level'],
        params: {
          expected: `token with credit.strategy: ${c.credit.strategy} (a sequence-level ratio gives every token its completion's mean advantage, averaging the strategy's per-token credit away), or credit.strategy: none for GSPO`,
        },
        message: '',
      });
    // a warm start is an SFT run: without SFT (or from a given checkpoint) every "start" would be the same policy
    if (c.sweep?.warm_starts !== undefined && (c.sft.steps === 0 || c.model.init_checkpoint))
      ctx.addIssue({
        code: 'custom',
        path: ['sweep', 'warm_starts'],
        params: {
          expected: `no sweep.warm_starts here: each warm start is an SFT run of sft.steps > 0 from scratch, and this config ${c.sft.steps === 0 ? 'has sft.steps: 0' : `starts from model.init_checkpoint ${c.model.init_checkpoint}`}`,
        },
        message: '',
      });
    if (c.grpo.overlong_buffer && c.grpo.overlong_buffer.len > c.grpo.max_new_tokens)
      ctx.addIssue({
        code: 'custom',
        path: ['grpo', 'overlong_buffer', 'len'],
        params: { expected: `at most grpo.max_new_tokens (${c.grpo.max_new_tokens}): the buffer is the last len tokens before it` },
        message: '',
      });
  })
  .describe('Credit Lens run config (*.credit.yaml). design.md#config.');

export type CreditConfig = z.output<typeof creditConfigSchema>;
/**
 * The same config as an interface, for the catalogs' checks, secrets and warnings, which take the whole config while the
 * config's type is built from the catalogs: an interface is resolved lazily, so that loop is a reference and not a
 * circular type. Every CreditConfig is one.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface WholeConfig extends CreditConfig {}
