// makeTask: the `task:` section of a run config (design.md#config) → a Task with seeded, disjoint train/eval splits.
import { UserError } from '../core/errors';
import type { Task } from '../core/types';
import { TASKS, taskSpec, type TaskOptions } from './catalog';

export { countdownReward } from './countdown';
export type { PromptStyle, RewardKind } from './countdown';
export type { TaskOptions } from './catalog';

/** Build the task; `seed` fixes both splits (eval does not depend on train_size for generated tasks). */
export function makeTask(opts: TaskOptions, seed: number): Task {
  if (!Number.isInteger(opts.train_size) || opts.train_size < 1) {
    throw new UserError(`task.train_size: ${opts.train_size} must be an integer >= 1`);
  }
  if (!Number.isInteger(opts.eval_size) || opts.eval_size < 0) {
    throw new UserError(`task.eval_size: ${opts.eval_size} must be an integer >= 0`);
  }
  if (!Number.isInteger(opts.val_size ?? 0) || (opts.val_size ?? 0) < 0) {
    throw new UserError(`task.val_size: ${opts.val_size} must be an integer >= 0`);
  }
  const spec = taskSpec(opts.name);
  if (!spec) throw new UserError(`task.name: '${String(opts.name)}' is not one of ${TASKS.map((t) => t.name).join(', ')}`);
  return spec.make(opts, seed);
}
