// The tasks, declared once: name, one clause for the config's description, the function that builds it, and
// any check the config runs when it is chosen. The config schema's `task.name` and its description, and makeTask
// (index.ts), come from this list. It loads no TensorFlow.js, so the extension's config diagnostics read it too.
//
// A new task is: its file in this folder (a function (options, seed) → Task) and one entry below.
import type { Task } from '../core/types';
import { makeArithmeticTask } from './arithmetic';
import { makeCountdownTask, type GeneratedTaskOptions } from './countdown';
import { makeJsonlTask } from './jsonl';
import { makeWordProblemsTask } from './word_problems';

/** Mirrors the YAML `task:` keys (design.md#config). Paths are already absolute. */
export interface TaskOptions extends GeneratedTaskOptions {
  name: string;
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

export interface TaskSpec {
  readonly name: string;
  /** one clause for the task list in the config's description */
  readonly summary: string;
  /** the task with seeded, disjoint train / test / validation splits; `seed` fixes the splits */
  readonly make: (o: TaskOptions, seed: number) => Task;
  /** a check of the `task:` block, run when this task is chosen (a required file): the key and the message */
  readonly check?: (task: Record<string, unknown>) => { path: string[]; message: string } | null;
}

export const TASKS = [
  { name: 'countdown', summary: 'countdown: reach a target from given numbers with + − × ÷ (TinyZero)', make: makeCountdownTask },
  { name: 'arithmetic', summary: 'arithmetic: evaluate an expression', make: makeArithmeticTask },
  {
    name: 'jsonl',
    summary: 'jsonl: prompts and answers read from task.path',
    make: makeJsonlTask,
    check: (t) =>
      t.path === null ? { path: ['path'], message: 'got null; it is required when task.name is jsonl (a file of lines {"prompt": ..., "answer": ...})' } : null,
  },
  { name: 'word_problems', summary: 'word_problems: GSM8K-like multi-step problems in words, rewarded by the final number', make: makeWordProblemsTask },
] as const satisfies readonly TaskSpec[];

export type TaskName = (typeof TASKS)[number]['name'];
export const TASK_NAMES = TASKS.map((t) => t.name) as unknown as readonly [TaskName, ...TaskName[]];

export function taskSpec(name: string): TaskSpec | undefined {
  return (TASKS as readonly TaskSpec[]).find((t) => t.name === name);
}
