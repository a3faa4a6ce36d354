// `credit-lens reward <config>`: the task of a run as a worker on stdin/stdout, one JSON object a line each way, so that a
// Python trainer (engine: trl) samples the engine's own prompts and scores its completions with the engine's own reward:
// one implementation of every task. Requests and answers:
//   {"op": "examples", "split": "train" | "eval" | "validation"} → {"prefill", "alphabet", "examples": [{"id", "prompt"}]}
//   {"op": "reward", "items": [{"split", "id", "completion"}]}     → {"rewards": [{"total", "format", "answer",
//                                                                       "reasoning", "success"}]}
// format, answer and reasoning are reward_decomposition's parts (credit/reward_decomposition.ts): total = format + answer.
// A bad request is answered {"error": "..."} naming what was wrong, and the worker goes on.
import { createInterface } from 'node:readline';
import { rewardParts } from '../credit/reward_decomposition';
import { childSeed } from '../core/rng';
import { makeTask } from '../tasks';
import type { Example, Task } from '../core/types';
import type { CreditConfig } from '../config/schema';

type Split = 'train' | 'eval' | 'validation';
const SPLITS: readonly Split[] = ['train', 'eval', 'validation'];

function splitOf(task: Task, v: unknown): Example[] {
  if (!SPLITS.includes(v as Split)) throw new Error(`split: got ${JSON.stringify(v)}; expected train, eval or validation`);
  return task[v as Split];
}

/** The answer to one request line. */
export function answer(task: Task, line: string): unknown {
  let req: Record<string, unknown>;
  try {
    req = JSON.parse(line);
  } catch {
    return { error: `not a JSON object: ${line.slice(0, 80)}` };
  }
  try {
    if (req.op === 'examples')
      return { prefill: task.prefill, alphabet: task.alphabet(), examples: splitOf(task, req.split).map((e, id) => ({ id, prompt: e.prompt })) };
    if (req.op === 'reward') {
      if (!Array.isArray(req.items)) throw new Error('items: expected a list of {split, id, completion}');
      return {
        rewards: req.items.map((it: Record<string, unknown>, k: number) => {
          const split = splitOf(task, it.split);
          const ex = split[it.id as number];
          if (!Number.isInteger(it.id) || !ex) throw new Error(`items[${k}].id: got ${JSON.stringify(it.id)}; expected 0 to ${split.length - 1}`);
          if (typeof it.completion !== 'string') throw new Error(`items[${k}].completion: expected a string`);
          const reward = task.reward(it.completion, ex);
          const parts = rewardParts({ prefill: task.prefill, completion: it.completion, reward });
          return { total: reward.total, ...parts, success: task.isSuccess(reward) };
        }),
      };
    }
    throw new Error(`op: got ${JSON.stringify(req.op)}; expected examples or reward`);
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/** Answers stdin's requests on stdout until stdin closes. */
export async function serveRewards(cfg: CreditConfig): Promise<void> {
  // the splits the engine's own runs of this config draw (session.ts)
  const task = makeTask(cfg.task, childSeed(cfg.task.split_seed, 'task'));
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) if (line.trim()) process.stdout.write(JSON.stringify(answer(task, line)) + '\n');
}
