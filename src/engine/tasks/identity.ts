// What a checkpoint was trained on (issue 9): the task, its split seed and a hash of each split's instances, stored
// in checkpoint metadata. A run that starts from another run's weights (model.init_checkpoint) or resumes one must
// evaluate on a test split the checkpoint never trained on; comparing the test split's hash catches a sweep whose
// runs would otherwise draw other splits than their shared warm start.
import { createHash } from 'node:crypto';
import type { Example, Task } from '../core/types';
import { UserError } from '../core/errors';

export interface TaskIdentity {
  name: string;
  split_seed: number;
  /** sizes of train / test / validation */
  sizes: [number, number, number];
  /** sha256 (first 16 hex digits) of each split's prompts and answers, in order */
  train_hash: string;
  test_hash: string;
}

function splitHash(xs: readonly Example[]): string {
  const h = createHash('sha256');
  for (const ex of xs) h.update(`${ex.prompt}\u0000${ex.answer ?? ''}\n`);
  return h.digest('hex').slice(0, 16);
}

export function taskIdentity(task: Task, splitSeed: number): TaskIdentity {
  return {
    name: task.name,
    split_seed: splitSeed,
    sizes: [task.train.length, task.eval.length, task.validation.length],
    train_hash: splitHash(task.train),
    test_hash: splitHash(task.eval),
  };
}

const describe = (t: TaskIdentity) => `task ${t.name} with split_seed ${t.split_seed} (${t.sizes[0]} train / ${t.sizes[1]} test, test split ${t.test_hash})`;

/**
 * Refuses a checkpoint whose test split is not this run's: its training data could then be in this run's test split.
 * A checkpoint without an identity (an older engine's) is accepted with a warning; a different training split with
 * the same test split only warns (the test split stays clean: every split is drawn disjoint from it).
 */
export function checkTaskIdentity(where: string, saved: unknown, current: TaskIdentity, warn: (m: string) => void): void {
  const t = saved as Partial<TaskIdentity> | undefined;
  if (!t || typeof t !== 'object' || typeof t.test_hash !== 'string') {
    warn(`${where}: the checkpoint does not record its task and splits (an older engine); make sure it was trained on ${describe(current)}`);
    return;
  }
  const s = t as TaskIdentity;
  if (s.name !== current.name || s.test_hash !== current.test_hash) {
    throw new UserError(
      `${where}: the checkpoint was trained on ${describe(s)}, but this run draws ${describe(current)}: ` +
        'its test split could hold instances the checkpoint trained on',
      `use the checkpoint's task settings and task.split_seed: ${s.split_seed}, or train a new warm start for these`,
    );
  }
  if (s.train_hash !== current.train_hash)
    warn(
      `${where}: the checkpoint trained on another training split (${s.sizes[0]} instances) than this run (${current.sizes[0]}); the test split is the same`,
    );
}
