// The model a command names by path (`import --model`, `serve`): a Hugging Face folder (config.json + safetensors +
// tokenizer.json), a Credit Lens run folder (its newest readable checkpoint) or one of its checkpoints.
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { CreditConfig } from '../config/config';
import { loadConfig } from '../config/config';
import { UserError } from '../core/errors';
import type { Tokenizer } from '../core/types';
import { initBackend } from '../model/backend';
import { loadHfModel } from '../model/hf';
import type { Transformer } from '../model/model';
import { HfTokenizer } from '../model/tokenizer';
import { loadLatestGoodCheckpoint, type LoadedCheckpoint } from '../rundir/checkpoint';
import { checkInferenceMemory, openSession } from './session';

export interface Scorer {
  model: Transformer;
  tokenizer: Tokenizer;
  /** what was loaded, for run.json and messages */
  describe: string;
  dispose(): void;
}

const isDir = (p: string) => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

/**
 * The model named by `--model`: an HF directory (config.json + safetensors + tokenizer.json), a run directory
 * (config.yaml; its newest readable checkpoint) or a checkpoint directory `<run>/checkpoints/step-N`.
 */
export async function loadScorer(spec: string, cfg: Pick<CreditConfig, 'backend'>, log: (m: string) => void): Promise<Scorer> {
  const dir = resolve(spec);
  if (!isDir(dir)) throw new UserError(`--model ${spec}: no such folder (expected a Hugging Face model folder, a run folder or a checkpoint folder)`);
  if (existsSync(join(dir, 'config.json'))) {
    await initBackend(cfg.backend, log);
    // Imported prompts are already templated by the trainer that sampled them: no chat template here.
    const { model, tokenizer } = loadHfModel(dir, { useChatTemplate: false, beforeWeights: (modelCfg) => void checkInferenceMemory(modelCfg, log) });
    return { model, tokenizer, describe: dir, dispose: () => model.dispose() };
  }
  const ckptOfRun = basename(dirname(dir)) === 'checkpoints' && existsSync(join(dir, '..', '..', 'config.yaml'));
  const runDir = ckptOfRun ? resolve(dir, '..', '..') : dir;
  if (!existsSync(join(runDir, 'config.yaml'))) {
    throw new UserError(`--model ${spec}: neither a Hugging Face model folder (no config.json) nor a run folder (no config.yaml) nor a checkpoint of one`);
  }
  const { config } = loadConfig(join(runDir, 'config.yaml'));
  let checkpoint: string | LoadedCheckpoint = dir;
  if (!ckptOfRun) {
    const latest = loadLatestGoodCheckpoint(runDir);
    if (!latest) throw new UserError(`--model ${spec}: the run has no readable checkpoint`);
    for (const sk of latest.skipped) log(`skipped checkpoint ${sk.dir}: ${sk.reason}`);
    // already read (and checked) while looking for it: handed on, not read again
    checkpoint = latest.checkpoint;
  }
  const { session: s } = await openSession(config, { runDir, checkpoint, log });
  const model = s.model;
  const describe = typeof checkpoint === 'string' ? checkpoint : checkpoint.dir;
  return { model, tokenizer: s.tokenizer, describe, dispose: () => model.dispose() };
}

/** A tokenizer alone, to show prime-rl token ids as text: an HF folder or its tokenizer.json. */
export function loadTokenizerOnly(spec: string): Tokenizer {
  const p = resolve(spec);
  const dir = isDir(p) ? p : dirname(p);
  if (!existsSync(join(dir, 'tokenizer.json')))
    throw new UserError(`--tokenizer ${spec}: no tokenizer.json ${isDir(p) ? 'in that folder' : 'next to that file'}`);
  return HfTokenizer.fromDir(dir, { useChatTemplate: false });
}
