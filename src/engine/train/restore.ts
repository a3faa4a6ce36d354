// Where a run's policy starts and how it is kept: model.init_checkpoint and a resume's checkpoint (weights, optimizer
// state, head, progress, and metrics.jsonl cut back to it), the checkpoints the loop writes, and the KL reference.
import * as tf from '@tensorflow/tfjs';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CreditConfig } from '../config/config';
import type { CreditHead } from '../credit/types';
import { UserError } from '../core/errors';
import { writeFileAtomic } from '../core/files';
import { ENGINE_VERSION } from '../core/version';
import { Transformer } from '../model/model';
import type { Adam } from '../model/optim';
import { checkpointDir, latestCheckpoint, loadCheckpoint, loadLatestGoodCheckpoint, saveCheckpoint } from '../rundir/checkpoint';
import { readMetrics, setAsideTablesAfter } from '../rundir/rundir';
import { storeFrozenWeights, useWeights, type Session } from '../session/session';
import { checkTaskIdentity, taskIdentity } from '../tasks/identity';

export interface Progress {
  phase: 'sft' | 'grpo';
  step: number;
}

async function exportVars(vars: Map<string, tf.Variable>): Promise<Record<string, { shape: number[]; data: Float32Array }>> {
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const [k, v] of vars) out[k] = { shape: v.shape, data: (await v.data()) as Float32Array };
  return out;
}

export async function checkpoint(
  runDir: string,
  s: Session,
  head: CreditHead | null,
  sftOpt: Adam,
  grpoOpt: Adam,
  p: Progress,
  initialEval: number | null,
  metricsRows: number,
): Promise<string> {
  const opt = p.phase === 'sft' ? sftOpt : grpoOpt;
  return saveCheckpoint(runDir, p.phase === 'sft' ? 0 : p.step, {
    model: await s.model.readWeights(),
    ...(s.cfg.model.lora ? { adapters: await s.model.readAdapters() } : {}),
    ...(head ? { head: await exportVars(head.params) } : {}),
    optimizer: { name: 'adam', step: opt.step, state: s.model.joinOptimizerState(await opt.exportState()) },
    meta: {
      phase: p.phase,
      step: p.step,
      initial_eval: initialEval,
      metrics_rows: metricsRows,
      engine_version: ENGINE_VERSION,
      strategy: s.cfg.credit.strategy,
      task: taskIdentity(s.task, s.cfg.task.split_seed),
    },
  });
}

/** On resume, drop metrics rows written after the checkpoint so no step appears twice. */
/** metrics.jsonl cut back to its first `n` rows; how many it dropped (the abandoned trajectory's). */
function keepFirstMetrics(runDir: string, n: number): number {
  const all = readMetrics(runDir);
  const rows = all.slice(0, n);
  // Through a temporary file and a rename, like every other write: a crash here must not cost the rows kept.
  writeFileAtomic(join(runDir, 'metrics.jsonl'), rows.map((r) => JSON.stringify(r) + '\n').join(''));
  return all.length - rows.length;
}

export interface Restored {
  progress: Progress;
  initialEval: number | null;
  metricsRows: number;
  /** on a resume: the metrics rows logged after the checkpoint, which it dropped (0 where the run stopped there) */
  abandonedRows: number;
  startWeights: ReturnType<Transformer['exportWeights']> | null;
}

/**
 * The policy a run starts or resumes from: model.init_checkpoint's weights, then on a resume the checkpoint's weights,
 * optimizer state and head, its progress, and metrics.jsonl cut back to the checkpoint's rows.
 */
export async function restore(o: {
  s: Session;
  cfg: CreditConfig;
  head: CreditHead | null;
  sftOpt: Adam;
  grpoOpt: Adam;
  runDir: string;
  resumeFrom: string | null;
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>;
  log: (level: 'info' | 'warn', m: string) => void;
}): Promise<Restored> {
  const { s, cfg, head, resumeFrom, resumed, log } = o;
  const out: Restored = { progress: { phase: 'sft', step: 0 }, initialEval: null, metricsRows: 0, abandonedRows: 0, startWeights: null };
  if (cfg.model.init_checkpoint) {
    const dir = existsSync(join(cfg.model.init_checkpoint, 'run.json')) ? latestCheckpoint(cfg.model.init_checkpoint) : cfg.model.init_checkpoint;
    if (!dir) throw new UserError(`model.init_checkpoint: ${cfg.model.init_checkpoint} is a run without checkpoints`);
    const init = loadCheckpoint(dir);
    checkTaskIdentity(`model.init_checkpoint ${dir}`, init.meta.task, taskIdentity(s.task, cfg.task.split_seed), (m) => log('warn', m));
    await useWeights(s, init.model);
    if (!resumeFrom) log('info', `initial weights from ${dir}`);
  }
  // The run's starting policy (seeded init, HF weights or init_checkpoint), kept for the KL reference of a run
  // without SFT that resumes in GRPO: the reference must not be the resumed weights.
  out.startWeights = resumeFrom && needsReference(cfg) && cfg.sft.steps === 0 && !cfg.model.lora ? await s.model.readWeights() : null;
  for (const sk of resumed?.skipped ?? []) log('warn', `skipped a damaged checkpoint: ${sk.reason}`);
  if (resumeFrom && resumed) {
    const ck = resumed.checkpoint;
    const meta = ck.meta as { phase: 'sft' | 'grpo'; step: number; initial_eval: number | null };
    checkTaskIdentity(`--resume ${resumeFrom}`, ck.meta.task, taskIdentity(s.task, cfg.task.split_seed), (m) => log('warn', m));
    // LoRA: the base stays the config's (or init_checkpoint's) and the trained adapters come back; ck.model holds the
    // merged weights, which as a base would count the adapters twice
    if (cfg.model.lora) {
      if (!ck.adapters)
        throw new UserError(`${resumeFrom}: checkpoint has no adapters.safetensors, but model.lora is set (was it written by a run without LoRA?)`);
      s.model.loadAdapters(ck.adapters);
    } else await useWeights(s, ck.model);
    (meta.phase === 'sft' ? o.sftOpt : o.grpoOpt).importState(ck.optimizer.step, s.model.splitOptimizerState(ck.optimizer.state));
    if (head) {
      if (!ck.head) throw new UserError(`${resumeFrom}: checkpoint has no head.safetensors, but credit.strategy ${cfg.credit.strategy} needs its trained head`);
      for (const [name, v] of head.params) {
        const w = ck.head[name];
        if (!w) throw new UserError(`${resumeFrom}: head.safetensors lacks ${name}`);
        v.assign(tf.tensor(w.data, w.shape));
      }
    }
    out.progress = { phase: meta.phase, step: meta.step };
    out.initialEval = meta.initial_eval ?? null;
    out.abandonedRows = keepFirstMetrics(o.runDir, (ck.meta as { metrics_rows?: number }).metrics_rows ?? 0);
    // The tables past the checkpoint are the abandoned trajectory's: out of the way before this one writes its own.
    const grpoStep = meta.phase === 'grpo' ? meta.step : 0;
    const aside = setAsideTablesAfter(o.runDir, { tables: grpoStep, eval: meta.phase === 'grpo' || meta.initial_eval !== null ? grpoStep : -1 });
    if (aside) log('info', `the tables written after ${meta.phase} step ${meta.step} belong to the trajectory this resume abandons: moved to ${aside}`);
    out.metricsRows = (ck.meta as { metrics_rows?: number }).metrics_rows ?? 0;
    log('info', `resumed from ${resumeFrom} (${meta.phase} step ${meta.step})`);
  }
  return out;
}

/** The run keeps a frozen reference policy: for the KL penalty (grpo.kl_beta), or for the ref_logratio column. */
export function needsReference(cfg: CreditConfig): boolean {
  return cfg.grpo.kl_beta > 0 || cfg.logging.ref_logratio;
}

/**
 * The KL reference: the policy GRPO started from. The weights now, when GRPO starts in this process; on a resume inside
 * GRPO, the post-SFT checkpoint (step 0) or, without SFT, the run's starting weights.
 */
export async function klReference(
  s: Session,
  runDir: string,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>,
  startWeights: Restored['startWeights'],
): Promise<Transformer> {
  // LoRA: the frozen base, shared (TRL's reference for a PEFT model: the model with its adapters disabled)
  if (s.cfg.model.lora) return s.model.baseView();
  // a reference never trains: model.torch_dtype stores all its projections in 16 bits
  const ref = await referenceWeights(s, runDir, resumed, startWeights);
  await storeFrozenWeights(s.cfg, ref, () => {}, { all: true });
  return ref;
}

/** The KL reference's weights, as a new model (klReference). */
async function referenceWeights(
  s: Session,
  runDir: string,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>,
  startWeights: Restored['startWeights'],
): Promise<Transformer> {
  const resumedInGrpo = (resumed?.checkpoint.meta as { phase?: string } | undefined)?.phase === 'grpo';
  if (!resumedInGrpo) return Transformer.fromWeights(s.modelCfg, await s.model.readWeights());
  if (s.cfg.sft.steps > 0) {
    const start = checkpointDir(runDir, 0);
    if (!existsSync(start))
      throw new UserError(
        `${runDir}: ${s.cfg.grpo.kl_beta > 0 ? 'kl_beta > 0' : 'logging.ref_logratio'} needs the post-SFT checkpoint ${start} as the reference policy on resume, and it is missing`,
      );
    return Transformer.fromWeights(s.modelCfg, loadCheckpoint(start).model);
  }
  return Transformer.fromWeights(s.modelCfg, startWeights!);
}
