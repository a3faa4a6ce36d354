// A shared SFT warm start (`sft.share: true`). Seed doc 001's comparisons, and any sweep over seeds, should start every
// run from one policy: otherwise a difference between strategies mixes with a difference between SFT warm starts.
// The warm start is an ordinary SFT-only run (grpo.steps 0) in `<output_dir>/<task>-warm-start-<key>/`, where the
// key hashes exactly what determines its weights: model, task, sft section (with sft.seed) and backend. The first
// run that needs it trains it under the run lock; runs that find it locked wait for it, and runs that find it
// finished start from its checkpoint at once. This works the same for a sweep in one shell, in VS Code (several
// runs at a time) and on Slurm (tasks on shared storage), with no ordering between the runs.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { latestCheckpoint } from '../rundir/checkpoint';
import { readRunInfo } from '../rundir/rundir';
import { LOCK_STALE_MS, RunLockedError } from '../rundir/run_lock';
import type { Reporter, RunController, TrainResult } from './run_control';

/** Canonical JSON (sorted keys), so that the key does not depend on the order a config was written in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** What determines the warm start's weights, and nothing else (the run seed, credit and grpo are not in it). */
export function warmStartIdentity(cfg: CreditConfig): Record<string, unknown> {
  const { init_checkpoint: _i, torch_dtype, ...rest } = cfg.model;
  // 16-bit storage changes SFT's weights only where SFT trains beside frozen ones (model.lora, frozen blocks or
  // embeddings); float32, the default, adds nothing, so the warm starts made before the option existed keep their key
  const frozen = rest.lora !== null || rest.freeze_embeddings || rest.trainable_layers !== null;
  const model = torch_dtype !== 'float32' && frozen ? { ...rest, torch_dtype } : rest;
  const { share: _s, ...sft } = cfg.sft;
  return { model, task: cfg.task, sft, backend: cfg.backend };
}

export function warmStartKey(cfg: CreditConfig): string {
  return createHash('sha256')
    .update(canonical(warmStartIdentity(cfg)))
    .digest('hex')
    .slice(0, 12);
}

export function warmStartDir(cfg: CreditConfig): string {
  return join(cfg.output_dir, `${cfg.task.name}-warm-start-${warmStartKey(cfg)}`);
}

/** The SFT-only run that trains the warm start: the run's model, task and sft, seeded by sft.seed. */
export function warmStartConfig(cfg: CreditConfig): CreditConfig {
  const c = structuredClone(cfg);
  delete c.sweep;
  c.name = `${cfg.task.name}-warm-start`;
  c.seed = cfg.sft.seed;
  c.sft.share = false;
  c.grpo.steps = 0;
  c.grpo.kl_beta = 0;
  c.credit = { ...c.credit, strategy: 'none' };
  return c;
}

/** The run's own config once the warm start exists: it starts from the warm start's checkpoint and skips SFT. */
export function fromWarmStart(cfg: CreditConfig, dir: string): CreditConfig {
  return { ...cfg, model: { ...cfg.model, init_checkpoint: dir }, sft: { ...cfg.sft, steps: 0 } };
}

export interface WarmStartDeps {
  train: (o: { config: CreditConfig; runDir: string; reporter: Reporter; controller: RunController }) => Promise<TrainResult>;
  reporter: Reporter;
  controller: RunController;
  /** how long to wait between looks at a warm start another engine trains (ms) */
  pollMs?: number;
}

function finished(dir: string): boolean {
  return readRunInfo(dir)?.status === 'completed' && latestCheckpoint(dir) !== null;
}

/**
 * The shared warm start's folder, trained here if no engine has and none is training it. Progress goes to the
 * caller's reporter as progress lines only (its own run has not started yet). Resolves null when a Stop arrives
 * while it trains or waits.
 */
export async function ensureWarmStart(cfg: CreditConfig, d: WarmStartDeps): Promise<string | null> {
  const dir = warmStartDir(cfg);
  const sftCfg = warmStartConfig(cfg);
  const say = (m: string) => d.reporter.log('info', m);
  const quiet: Reporter = {
    started: () => say(`shared warm start: training ${cfg.sft.steps} SFT steps in ${dir} (sft.seed ${cfg.sft.seed})`),
    progress: (p) => d.reporter.progress({ ...p, message: `shared warm start${p.message ? `: ${p.message}` : ''}` }),
    metrics: () => {},
    log: (l, m) => d.reporter.log(l, `warm start: ${m}`),
    finished: () => {},
  };
  let waited = false;
  for (;;) {
    if (finished(dir)) {
      say(`shared warm start: ${dir}`);
      return dir;
    }
    if (d.controller.stopRequested) return null;
    try {
      const r = await d.train({ config: sftCfg, runDir: dir, reporter: quiet, controller: d.controller });
      if (r.status === 'completed') continue;
      if (r.status === 'stopped') return null;
      const why = readRunInfo(dir)?.error;
      throw new UserError(
        `the shared warm start in ${dir} ended ${r.status}${why ? `: ${why}` : ''}`,
        'fix the cause and start again: the warm start resumes from its last checkpoint',
      );
    } catch (e) {
      if (!(e instanceof RunLockedError)) throw e;
      // The wait is bounded by the holder's life: the lock's heartbeat stops with it, and once the heartbeat is
      // LOCK_STALE_MS old the next look takes the lock over and resumes the warm start here.
      if (!waited) {
        const h = e.holder;
        say(
          `shared warm start: ${h ? `pid ${h.pid} on ${h.host}` : 'another engine'} is training ${dir}; waiting for it ` +
            `(if its heartbeat stops for ${Math.round(LOCK_STALE_MS / 60_000)} min, this run takes the warm start over and resumes it)`,
        );
      }
      waited = true;
      await new Promise((res) => setTimeout(res, d.pollMs ?? 2000));
    }
  }
}
