// Task registry: the `task:` section of a run config (DESIGN §3) → a Task with seeded, disjoint train/eval splits.
import { UserError } from '../core/errors';
import type { RewardResult, Task } from '../core/types';
import { makeArithmeticTask } from './arithmetic';
import { makeCountdownTask, type GeneratedTaskOptions } from './countdown';
import { makeJsonlTask } from './jsonl';
import { makeWordProblemsTask } from './word_problems';

export { countdownReward } from './countdown';
export type { PromptStyle, RewardKind } from './countdown';

/** Mirrors the YAML `task:` keys (DESIGN §3). Paths are already absolute. */
export interface TaskOptions extends GeneratedTaskOptions {
  name: 'countdown' | 'arithmetic' | 'jsonl' | 'word_problems';
  /** word_problems: operations per problem, 1..max_steps */
  max_steps: number;
  /** validation problems, disjoint from train and eval */
  val_size?: number;
  /** seed of the splits (the caller derives the task seed from it, not from the run seed) */
  split_seed: number;
  /** jsonl: lines {"prompt": ..., "answer": ...} */
  path: string | null;
  /** jsonl: plain {"prompt", "answer"} lines or GSM8K's {"question", "answer": "... #### N"} */
  format: 'plain' | 'gsm8k';
  /** jsonl: module exporting reward(completion, example) -> number | {total, parts} */
  reward_module: string | null;
}

/** Success means the answer part is fully correct (DESIGN §4). */
export function isSuccess(r: RewardResult): boolean {
  return r.answer === 1;
}

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
  switch (opts.name) {
    case 'countdown': return makeCountdownTask(opts, seed);
    case 'arithmetic': return makeArithmeticTask(opts, seed);
    case 'jsonl': return makeJsonlTask(opts, seed);
    case 'word_problems': return makeWordProblemsTask(opts, seed);
    default: throw new UserError(`task.name: '${String(opts.name)}' is not one of countdown, arithmetic, jsonl, word_problems`);
  }
}
