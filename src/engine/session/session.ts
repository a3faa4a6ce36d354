// Everything a run needs before its first step: backend, task, tokenizer, model. Shared by train, eval,
// bench and paired rollouts so they all build the same objects from a config.
import { backendInfo, initBackend } from '../model/backend';
import { backendCaps } from '../model/ops';
import { backendCapacity, checkFits, describeEstimate, estimateTrainingMemory, gb, isHalfable, paramCount, type MemoryEstimate } from '../model/memory';
import type { CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { loadHfModel } from '../model/hf';
import { loadCheckpoint, type LoadedCheckpoint } from '../rundir/checkpoint';
import { isTrainable, Transformer, type ModelConfig } from '../model/model';
import { loraParamCount } from '../model/lora';
import { childSeed } from '../core/rng';
import { makeTask } from '../tasks';
import { scratchTokenizer } from './tokenizer';
import type { Task, Tokenizer } from '../core/types';
import type { Sampler } from '../model/sampling';

export interface Session {
  cfg: CreditConfig;
  backend: { backend: string; reason: string };
  task: Task;
  tokenizer: Tokenizer;
  model: Transformer;
  modelCfg: ModelConfig;
  /** where rollouts and evals are sampled when not by `model` (rollout.server): the train loop keeps it in sync */
  rolloutSampler?: Sampler | null;
}

export function scratchModelConfig(cfg: CreditConfig, vocabSize: number): ModelConfig {
  const m = cfg.model;
  return {
    arch: 'qwen2',
    vocabSize,
    dModel: m.d_model,
    nLayers: m.n_layers,
    nHeads: m.n_heads,
    nKvHeads: m.n_kv_heads,
    dFf: m.d_ff,
    maxSeqLen: m.max_seq_len,
    ropeTheta: m.rope_theta,
    rmsEps: 1e-6,
    tieEmbeddings: m.tie_embeddings,
    qkvBias: true,
  };
}

/**
 * `runDir`: the run this session trains or reads, where a bpe tokenizer is saved and found again (tokenizer.ts).
 */
export async function buildSession(cfg: CreditConfig, log: (m: string) => void = () => {}, runDir?: string, o: { training?: boolean } = {}): Promise<Session> {
  const backend = await initBackend(cfg.backend, log);
  // The splits follow task.split_seed, not the run seed: runs of several seeds, and every run started from a shared
  // warm start, evaluate on the same test instances, none of which the warm start trained on.
  const task = makeTask(cfg.task, childSeed(cfg.task.split_seed, 'task'));
  // a run that cannot fit stops here, before the weights are read and before step 1 (model/memory.ts)
  const preflight = (modelCfg: ModelConfig, tokenizer: Tokenizer) => {
    if (o.training) checkTrainingMemory(cfg, modelCfg, tokenizer, task, log);
    else checkInferenceMemory(modelCfg, log);
  };
  if (cfg.model.source === 'hf') {
    if (!cfg.model.path) throw new UserError('model.path: required when model.source is hf (a local Hugging Face directory)');
    const { model, tokenizer, cfg: modelCfg } = loadHfModel(cfg.model.path, { beforeWeights: preflight });
    configureTrainable(cfg, model);
    await storeFrozenWeights(cfg, model, log);
    return { cfg, backend, task, tokenizer, model, modelCfg };
  }
  const tokenizer = scratchTokenizer(cfg, task, runDir, log);
  const modelCfg = scratchModelConfig(cfg, tokenizer.vocabSize);
  preflight(modelCfg, tokenizer);
  const model = Transformer.init(modelCfg, childSeed(cfg.seed, 'init'));
  configureTrainable(cfg, model);
  await storeFrozenWeights(cfg, model, log);
  return { cfg, backend, task, tokenizer, model, modelCfg };
}

/**
 * What trains (model.lora's adapters, model.freeze_embeddings, model.trainable_layers; everything by default). LoRA's
 * adapters are seeded by the run seed, so a resumed run or one started from model.init_checkpoint gets the same fresh ones.
 */
export function configureTrainable(cfg: CreditConfig, model: Transformer): void {
  const m = cfg.model;
  if (m.lora) {
    model.enableLora({ r: m.lora.r, alpha: m.lora.alpha, targets: m.lora.targets }, childSeed(cfg.seed, 'lora'));
    return;
  }
  if (m.trainable_layers !== null && m.trainable_layers > model.cfg.nLayers)
    throw new UserError(`model.trainable_layers: got ${m.trainable_layers}, the model has ${model.cfg.nLayers} layers`);
  if (m.freeze_embeddings || m.trainable_layers !== null) model.setTrainable({ freezeEmbeddings: m.freeze_embeddings, lastLayers: m.trainable_layers });
}

/**
 * model.torch_dtype: the weights that do not train stored in 16 bits (Transformer.storeFrozen), logged with what it
 * saved; `all` for a model that never trains (the KL reference).
 */
export async function storeFrozenWeights(cfg: CreditConfig, model: Transformer, log: (m: string) => void, o: { all?: boolean } = {}): Promise<void> {
  const format = cfg.model.torch_dtype;
  if (format === 'float32') return;
  const r = await model.storeFrozen(format, o);
  const mv = (n: number) => `${(n / 1e6).toFixed(2)} M values`;
  if (!r.weights) log(`model.torch_dtype ${format}: every weight trains, so none is stored in 16 bits`);
  const parts = [
    ...(r.packed ? [`${mv(r.packed)} stored in 16 bits, ${gb(2 * r.packed)} saved`] : []),
    ...(r.rounded
      ? [`${mv(r.rounded)} rounded to ${format} and kept in float32${r.packed ? ' (an odd last axis)' : ' (this backend has no 16-bit product)'}`]
      : []),
  ];
  if (r.weights) log(`model.torch_dtype ${format}: ${r.weights} frozen weight${r.weights === 1 ? '' : 's'}: ${parts.join('; ')}`);
}

/** The run's training memory (memory.ts) against the backend's: a UserError with the numbers when it does not fit. */
export function checkTrainingMemory(cfg: CreditConfig, modelCfg: ModelConfig, tokenizer: Tokenizer, task: Task, log: (m: string) => void): MemoryEstimate {
  const g = cfg.grpo;
  const prompts = [...task.train, ...task.validation];
  const promptLen = prompts.reduce((a, ex) => Math.max(a, tokenizer.encodePrompt(ex.prompt).length), 1);
  // GRPO's micro-batch, or SFT's batch (demonstrations no longer than max_new_tokens) where that is larger
  const rows = Math.max(Math.ceil((g.prompts_per_step * g.group_size) / g.gradient_accumulation_steps), cfg.sft.steps > 0 ? cfg.sft.batch_size : 0);
  const m = cfg.model;
  const adapters = m.lora ? loraParamCount(modelCfg, { r: m.lora.r, targets: m.lora.targets }) : 0;
  const spec = { freezeEmbeddings: m.freeze_embeddings, lastLayers: m.trainable_layers };
  const trainable = m.lora ? adapters : paramCount(modelCfg, (name) => isTrainable(modelCfg, name, spec));
  const est = estimateTrainingMemory(modelCfg, {
    rows,
    promptLen,
    completionLen: g.max_new_tokens,
    klReference: g.kl_beta > 0 || cfg.logging.ref_logratio,
    trainableParams: trainable,
    adapterParams: adapters,
    ...(m.lora ? { lora: { r: m.lora.r, targets: m.lora.targets } } : {}),
    ...(m.torch_dtype !== 'float32' && backendCaps().halfWeights
      ? {
          halfParams: {
            policy: paramCount(modelCfg, (n) => isHalfable(modelCfg, n) && (m.lora !== null || !isTrainable(modelCfg, n, spec))),
            reference: paramCount(modelCfg, (n) => isHalfable(modelCfg, n)),
          },
        }
      : {}),
  });
  const info = backendInfo();
  const where = `${rows} rows × ${promptLen + g.max_new_tokens} tokens per micro-batch`;
  if (info) checkFits(est, backendCapacity(info), info.backend, where);
  log(`memory: ${gb(est.total)} estimated for training (${describeEstimate(est)}; ${where})`);
  return est;
}

/**
 * A model that only samples or scores (probe, eval, import --model, paired rollouts) against the backend's memory: its
 * float32 weights and one row's pass, before any weight is read. A config.json describing a 30B model fails here, with
 * the numbers, not gigabytes into the allocation.
 */
export function checkInferenceMemory(modelCfg: ModelConfig, log: (m: string) => void): MemoryEstimate {
  const est = estimateTrainingMemory(modelCfg, { rows: 1, promptLen: 1, completionLen: 1, klReference: false, trainableParams: 0 });
  const info = backendInfo();
  if (info)
    checkFits(est, backendCapacity(info), info.backend, 'scoring and sampling, one row', 'use backend webgpu on a GPU that holds it, or a smaller model');
  log(`memory: ${gb(est.total)} estimated for scoring and sampling (${describeEstimate(est)})`);
  return est;
}

/** Replaces the session's policy with a model holding these weights (a checkpoint's, a warm start's). */
export async function useWeights(s: Session, weights: LoadedCheckpoint['model']): Promise<void> {
  const model = Transformer.fromWeights(s.modelCfg, weights);
  configureTrainable(s.cfg, model);
  await storeFrozenWeights(s.cfg, model, () => {});
  s.model.dispose();
  s.model = model;
}

/**
 * A session whose policy holds the weights of a checkpoint folder (eval, scoring imported runs, paired rollouts), or
 * the config's own starting policy without one. The checkpoint comes back too, for its metadata.
 */
export async function openSession(
  cfg: CreditConfig,
  o: { runDir?: string; checkpoint?: string | LoadedCheckpoint | null; log?: (m: string) => void } = {},
): Promise<{ session: Session; checkpoint: LoadedCheckpoint | null }> {
  const session = await buildSession(cfg, o.log, o.runDir);
  if (!o.checkpoint) return { session, checkpoint: null };
  const checkpoint = typeof o.checkpoint === 'string' ? loadCheckpoint(o.checkpoint) : o.checkpoint;
  await useWeights(session, checkpoint.model);
  return { session, checkpoint };
}
