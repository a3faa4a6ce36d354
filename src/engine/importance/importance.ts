// `credit-lens importance train`: the importance net (net.ts) trained (training.ts) on a config's paired rollouts,
// saved as a checkpoint that `credit.reward_variance.importance_checkpoint` names.
import { existsSync, statSync } from 'node:fs';
import { initBackend } from '../model/backend';
import { loadConfig, type CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { intFlag, numFlag, parseArgs } from '../cli/args';
import { createOutputFolder, readParquetTable } from './paired';
import { childSeed } from '../core/rng';
import { makeTask } from '../tasks';
import { CharTokenizer, HfTokenizer } from '../model/tokenizer';
import type { Tokenizer } from '../core/types';
import { tokenizerId, type ImportanceNetConfig } from './net';
import { pairsFromTable, trainImportance, type ImportanceMetrics } from './training';

export * from './net';
export * from './training';

// ---------------------------------------------------------------------------------------------------------------
// The command

/** The tokenizer a config's runs use, without loading the policy's weights. */
export function configTokenizer(cfg: CreditConfig): Tokenizer {
  if (cfg.model.source === 'hf') {
    if (!cfg.model.path) throw new UserError('model.path: required when model.source is hf');
    return HfTokenizer.fromDir(cfg.model.path);
  }
  return CharTokenizer.fromAlphabet(makeTask(cfg.task, childSeed(cfg.seed, 'task')).alphabet());
}

const USAGE = 'usage: credit-lens importance train <config.credit.yaml> --rollouts <rollouts.parquet> [--out dir] [--steps N] '
  + '[--batch-size N] [--lr x] [--d-model N] [--layers N] [--heads N] [--heldout fraction] [--validation fraction] [--reward column] [--set key=value]...';


export interface ImportanceTrainResult { dir: string; metrics: ImportanceMetrics }

/** `credit-lens importance train`, as a function. */
export async function importanceTrain(o: {
  configPath: string; rollouts: string; out?: string; sets?: string[]; steps?: number; batchSize?: number; lr?: number;
  net?: Partial<ImportanceNetConfig>; heldout?: number; validation?: number; reward?: string; log?: (m: string) => void;
}): Promise<ImportanceTrainResult> {
  const t0 = performance.now();
  const log = o.log ?? (() => {});
  const { config: cfg } = loadConfig(o.configPath, o.sets ?? []);
  if (o.out && existsSync(o.out) && !statSync(o.out).isDirectory()) throw new UserError(`--out ${o.out}: exists and is not a folder`);
  await initBackend(cfg.backend, log);
  const tokenizer = configTokenizer(cfg);
  const table = await readParquetTable(o.rollouts);
  const data = pairsFromTable(table, tokenizer, o.reward ?? 'reward');
  log(`${data.pairs.length} pairs from ${data.groups} groups; ${data.skippedGroups} zero-variance groups (${data.skippedPairs} pairs) skipped`);
  const net = { max_seq_len: cfg.model.max_seq_len, ...o.net };
  const { net: model, metrics } = trainImportance(data, {
    net, steps: o.steps, batchSize: o.batchSize, lr: o.lr, heldout: o.heldout, validation: o.validation, seed: cfg.seed, tokenizer: tokenizerId(tokenizer), log,
  });
  try {
    const dir = o.out ?? createOutputFolder(cfg.output_dir, cfg.name, 'importance', new Date());
    model.save(dir, {
      training: {
        rollouts: o.rollouts, reward: o.reward ?? 'reward', steps: o.steps ?? 300, batch_size: o.batchSize ?? 64, lr: o.lr ?? 1e-3,
        heldout: o.heldout ?? 0.2, validation: o.validation ?? 0.15, seed: cfg.seed, runtime_s: (performance.now() - t0) / 1000,
      },
    });
    return { dir, metrics };
  } finally {
    model.dispose();
  }
}

/** `credit-lens importance train …` (argv after "importance"). Prints the checkpoint folder on stdout. */
export async function cmdImportance(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'train') throw new UserError(`importance: unknown subcommand ${sub === undefined ? '(none)' : JSON.stringify(sub)}\n${USAGE}`);
  const a = parseArgs(rest, { valued: ['rollouts', 'out', 'steps', 'batch-size', 'lr', 'd-model', 'layers', 'heads', 'heldout', 'validation', 'reward', 'set'] }, USAGE);
  if (a.positional.length !== 1) throw new UserError(`importance train needs exactly one config file\n${USAGE}`);
  const rollouts = a.flags.get('rollouts')?.at(-1);
  if (!rollouts) throw new UserError(`importance train needs --rollouts <rollouts.parquet> (from \`credit-lens rollouts paired\`)\n${USAGE}`);
  const net: Partial<ImportanceNetConfig> = {};
  const d = intFlag(a, 'd-model', 2), l = intFlag(a, 'layers', 1), h = intFlag(a, 'heads', 1);
  if (d !== undefined) net.d_model = d;
  if (l !== undefined) net.n_layers = l;
  if (h !== undefined) net.n_heads = h;
  if (d !== undefined) net.d_ff = 2 * d;
  const r = await importanceTrain({
    configPath: a.positional[0], rollouts, out: a.flags.get('out')?.at(-1), sets: a.flags.get('set'), net,
    steps: intFlag(a, 'steps', 1), batchSize: intFlag(a, 'batch-size', 1),
    lr: numFlag(a, 'lr', (x) => x > 0, 'a positive number'),
    heldout: numFlag(a, 'heldout', (x) => x > 0 && x < 1, 'a fraction in (0, 1)'),
    validation: numFlag(a, 'validation', (x) => x >= 0 && x < 1, 'a fraction in [0, 1)'),
    reward: a.flags.get('reward')?.at(-1), log: (m) => process.stderr.write(m + '\n'),
  });
  const m = r.metrics;
  process.stderr.write(`held-out NLL per pair: net ${m.heldout_nll.toFixed(4)}  constant f=${m.constant_f.toFixed(3)} ${m.heldout_nll_constant.toFixed(4)}  `
    + `independent ${m.heldout_nll_independent.toFixed(4)}  (${m.heldout_pairs} pairs of ${m.heldout_prompts} prompts; ${m.train_pairs} training pairs; `
    + `weights of step ${m.selected_step})\n`);
  console.log(r.dir);
  return 0;
}

