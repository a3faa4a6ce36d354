// What a checkpoint was trained on: the task, its split seed and a hash of each split's instances, stored
// in checkpoint metadata. A run that starts from another run's weights (model.init_checkpoint) or resumes one must
// evaluate on a test split the checkpoint never trained on; comparing the test split's hash catches a sweep whose
// runs would otherwise draw other splits than their shared warm start.
import { createHash } from 'node:crypto';
import type { Example, Task } from '../core/types';
import { UserError } from '../core/errors';
import type { TaskIdentity } from '../../protocol';

export type { TaskIdentity } from '../../protocol';

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
    validation_hash: splitHash(task.validation),
  };
}

const describe = (t: TaskIdentity) => `task ${t.name} with split_seed ${t.split_seed} (${t.sizes[0]} train / ${t.sizes[1]} test, test split ${t.test_hash})`;

/**
 * Refuses a checkpoint whose test split is not this run's: its training data could then be in this run's test split.
 * A checkpoint without an identity (an older engine's) is accepted with a warning. A different training split with the
 * same test split is refused when this run has a validation split (the checkpoint's training data could be in it), and
 * only warns without one (the test split stays clean: every split is drawn disjoint from it).
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
  // Validation is drawn disjoint from this run's train and test splits, so a checkpoint trained on this run's train split
  // cannot hold a validation instance; one trained on another train split (a larger train_size, another split_seed)
  // can, and choices made on validation would then be made on its training data.
  if (s.train_hash !== current.train_hash && current.sizes[2] > 0) {
    throw new UserError(
      `${where}: the checkpoint trained on another training split (${s.sizes[0]} instances, ${s.train_hash}) than this run's ` +
        `(${current.sizes[0]}, ${current.train_hash}), which may hold instances of this run's validation split (${current.sizes[2]} instances)`,
      `use the checkpoint's task settings (train_size, task.split_seed: ${s.split_seed}), train a new warm start, or set task.val_size: 0`,
    );
  }
  if (s.train_hash !== current.train_hash)
    warn(
      `${where}: the checkpoint trained on another training split (${s.sizes[0]} instances) than this run (${current.sizes[0]}); the test split is the same`,
    );
}
