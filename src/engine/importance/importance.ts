// `credit-lens importance train`: the importance net (model/importance_net.ts) trained (training.ts) on a config's paired rollouts,
// saved as a checkpoint that `credit.reward_variance.importance_checkpoint` names.
import { existsSync, statSync } from 'node:fs';
import { initBackend } from '../model/backend';
import { loadConfig, type CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { createOutputFolder } from './paired';
import { readParquetTable } from './parquet';
import { childSeed } from '../core/rng';
import { makeTask } from '../tasks';
import { CharTokenizer, HfTokenizer } from '../model/tokenizer';
import type { Tokenizer } from '../core/types';
import { tokenizerId, type ImportanceNetConfig } from '../model/importance_net';
import { pairsFromTable, trainImportance, type ImportanceMetrics } from './training';

export * from '../model/importance_net';
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

export interface ImportanceTrainResult {
  dir: string;
  metrics: ImportanceMetrics;
}

/** `credit-lens importance train`, as a function. */
export async function importanceTrain(o: {
  configPath: string;
  rollouts: string;
  out?: string;
  sets?: string[];
  steps?: number;
  batchSize?: number;
  lr?: number;
  net?: Partial<ImportanceNetConfig>;
  heldout?: number;
  validation?: number;
  reward?: string;
  log?: (m: string) => void;
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
  const { net: model, metrics } = await trainImportance(data, {
    net,
    steps: o.steps,
    batchSize: o.batchSize,
    lr: o.lr,
    heldout: o.heldout,
    validation: o.validation,
    seed: cfg.seed,
    tokenizer: tokenizerId(tokenizer),
    log,
  });
  try {
    const dir = o.out ?? createOutputFolder(cfg.output_dir, cfg.name, 'importance', new Date());
    await model.save(dir, {
      training: {
        rollouts: o.rollouts,
        reward: o.reward ?? 'reward',
        steps: o.steps ?? 300,
        batch_size: o.batchSize ?? 64,
        lr: o.lr ?? 1e-3,
        heldout: o.heldout ?? 0.2,
        validation: o.validation ?? 0.15,
        seed: cfg.seed,
        runtime_s: (performance.now() - t0) / 1000,
      },
    });
    return { dir, metrics };
  } finally {
    model.dispose();
  }
}

/** `credit-lens importance train …` (argv after "importance"). Prints the checkpoint folder on stdout. */
