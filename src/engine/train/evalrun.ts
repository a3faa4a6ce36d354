// `credit-lens eval <run> [--checkpoint N]`: greedy success of a checkpoint on the run's eval split.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { latestCheckpoint } from '../rundir/checkpoint';
import { loadConfig } from '../config/config';
import { UserError } from '../core/errors';
import { openSession } from '../session/session';
import { evaluate } from './train';

export async function evalRun(runDir: string, step?: number): Promise<{ checkpoint: string; success: number; reward: number; n: number }> {
  if (!existsSync(join(runDir, 'config.yaml'))) throw new UserError(`${runDir}: not a run directory (no config.yaml)`);
  const ckDir = step === undefined ? latestCheckpoint(runDir) : join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`);
  if (!ckDir || !existsSync(ckDir)) throw new UserError(`${runDir}: no checkpoint ${step === undefined ? '' : `for step ${step} `}to evaluate`);
  const { config } = loadConfig(join(runDir, 'config.yaml'));
  const { session: s } = await openSession(config, { runDir, checkpoint: ckDir });
  const r = await evaluate(s);
  s.model.dispose();
  return { checkpoint: ckDir, success: r.success, reward: r.reward, n: s.task.eval.length };
}
