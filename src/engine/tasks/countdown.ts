// Countdown (TinyZero / GRPO-Zero): combine the given numbers, each exactly once, with + − × ÷ to reach the target.
// This file also holds the <think>/<answer> format reward of GRPO-Zero's countdown task, which the arithmetic
// and jsonl tasks reuse, and the seeded disjoint train/eval split drawing that the generated tasks share.
import { UserError } from '../core/errors';
import { childSeed, makeRng, randInt, shuffle, type Rng } from '../core/rng';
import type { Example, RewardResult, Task } from '../core/types';
import { evaluateExpression, exprSteps, formatExpr, type BinaryOp, type ExprNode } from './expr';

export type RewardKind = 'grpo_zero' | 'tinyzero';
export type PromptStyle = 'compact' | 'tinyzero';

/** The `task:` keys (design.md#config) that the generated tasks (countdown, arithmetic) read. */
export interface GeneratedTaskOptions {
  numbers: [number, number];
  max_number: number;
  max_target: number;
  reward: RewardKind;
  prompt: PromptStyle;
  train_size: number;
  eval_size: number;
  /** validation problems (task.val_size), drawn after train; absent = none */
  val_size?: number;
}

export const THINK_PREFILL = '<think>';

// ---------------------------------------------------------------------------------------------------------------
// Format reward (GRPO-Zero countdown_task.format_reward_function, design.md#semantics)

// GRPO-Zero uses Python's re.match with '$' and no MULTILINE flag; there '$' also matches just before one final
// "\n", so a completion ending "</answer>\n" still earns the full format score. `\n?$` reproduces that.
const FULL_FORMAT_RE = /^<think>[\s\S]*?<\/think>\n<answer>[\s\S]*?<\/answer>\n?$/;
const THINK_BLOCK_RE = /<think>[\s\S]*?<\/think>/;
const ANSWER_BLOCK_RE = /<answer>([\s\S]*?)<\/answer>/;

/** 1 on the full format, else 0.1 if a think block is present plus 0.5 if an answer block is present. */
export function grpoZeroFormat(text: string): number {
  if (FULL_FORMAT_RE.test(text)) return 1;
  let r = 0;
  if (THINK_BLOCK_RE.test(text)) r += 0.1;
  if (ANSWER_BLOCK_RE.test(text)) r += 0.5;
  return r;
}

/** Content of the first complete <answer>…</answer> block (GRPO-Zero reads the first, via re.search). */
export function firstAnswer(text: string): string | null {
  const m = ANSWER_BLOCK_RE.exec(text);
  return m ? m[1] : null;
}

/** Content of the last complete <answer>…</answer> block (TinyZero reads the last). */
export function lastAnswer(text: string): string | null {
  let last: string | null = null;
  // A fresh /g regex per call: matchAll starts at the regex's lastIndex, so a shared one would carry state.
  for (const m of text.matchAll(/<answer>([\s\S]*?)<\/answer>/g)) last = m[1];
  return last;
}

export interface AnswerJudgement {
  correct: boolean;
  /** extra named partial rewards, 0/1 each (seed doc 004's partial_reward_k) */
  parts?: Record<string, number>;
}

/**
 * The two reward schemes of design.md#semantics around a task-specific answer check. `judge` receives the answer block's
 * content, or null when there is none.
 * - grpo_zero: total = 0.1·format + answer, on the first answer block; parts.format is 1 only on the full format.
 * - tinyzero: on the last answer block, 0 if missing, 0.1 if present but wrong, 1 if correct; `format` reports
 *   whether the block is present. TinyZero also only looks at the text's last line; we read the last block
 *   wherever it is, as design.md#semantics states.
 */
export function formattedReward(text: string, kind: RewardKind, judge: (content: string | null) => AnswerJudgement): RewardResult {
  if (kind === 'grpo_zero') {
    const format = grpoZeroFormat(text);
    const j = judge(firstAnswer(text));
    const answer = j.correct ? 1 : 0;
    // Partial rewards are 0/1 each (seed doc 004), so parts.format is the full-format match, not the graded score.
    const parts = { format: format === 1 ? 1 : 0, answer, ...j.parts };
    return { total: 0.1 * format + answer, format, answer, parts };
  }
  const content = lastAnswer(text);
  const j = judge(content);
  const format = content === null ? 0 : 1;
  const answer = content !== null && j.correct ? 1 : 0;
  const total = answer === 1 ? 1 : format === 1 ? 0.1 : 0;
  return { total, format, answer, parts: { format, answer, ...j.parts } };
}

// ---------------------------------------------------------------------------------------------------------------
// Countdown reward (library contract, design.md#library-api)

function sameMultiset(a: number[], b: number[]): boolean {
  if (a.length !== b.length) return false;
  const x = [...a].sort((p, q) => p - q);
  const y = [...b].sort((p, q) => p - q);
  return x.every((v, i) => v === y[i]);
}

/** Answer check shared by both schemes; parts uses_all_numbers/valid_expression are seed doc 004's partial rewards. */
export function judgeCountdownAnswer(content: string | null, numbers: number[], target: number): AnswerJudgement {
  if (content === null) return { correct: false, parts: { uses_all_numbers: 0, valid_expression: 0 } };
  // Both references collect the integers with a \d+ regex before evaluating, so "uses all numbers" is judged
  // on the digit runs even when the expression does not parse.
  const used = (content.match(/[0-9]+/g) ?? []).map(Number);
  const usesAll = sameMultiset(used, numbers);
  const r = evaluateExpression(content);
  const correct = r.ok && usesAll && Math.abs(r.value - target) < 1e-5;
  return { correct, parts: { uses_all_numbers: usesAll ? 1 : 0, valid_expression: r.ok ? 1 : 0 } };
}

/**
 * Countdown reward of `completion`, the full text starting at the prefilled "<think>" (design.md#semantics, #library-api).
 * parts: format, answer, uses_all_numbers, valid_expression.
 */
export function countdownReward(completion: string, numbers: number[], target: number, kind: RewardKind): RewardResult {
  return formattedReward(completion, kind, (c) => judgeCountdownAnswer(c, numbers, target));
}

// ---------------------------------------------------------------------------------------------------------------
// Exhaustive solver

// Values are exact rationals n/d in doubles. Stored intermediates are kept within 2^24 so every cross product
// stays far below 2^53 (exact) and (n, d) packs into one exact numeric Map key; larger ones are pruned. Pruning
// can only miss solutions, never invent one, so every instance the generator emits is solvable; with operands
// ≤ 100 it only bites at five or more numbers.
const RAT_LIMIT = 2 ** 24;

interface Reach {
  n: number;
  d: number;
  /** every intermediate result is a non-negative integer: a solution a person (or a demo) can write as steps */
  clean: boolean;
  leaf?: number;
  op?: BinaryOp;
  l?: Reach;
  r?: Reach;
}

function gcd(a: number, b: number): number {
  a = Math.abs(a);
  while (b) [a, b] = [b, a % b];
  return a;
}

function toExpr(x: Reach): ExprNode {
  if (x.leaf !== undefined) return { kind: 'num', value: x.leaf };
  return { kind: 'bin', op: x.op!, left: toExpr(x.l!), right: toExpr(x.r!) };
}

/**
 * Every integer target in 1..maxTarget reachable from `numbers` (each used exactly once, + − × ÷, any rational
 * intermediate), with one solution each. Solutions whose intermediates are all non-negative integers are
 * preferred, so demonstrations read as plain arithmetic steps. Subset dynamic programming: the values reachable
 * from a set are the combinations of the values reachable from the two halves of each of its splits.
 */
export function solveCountdown(numbers: number[], maxTarget: number): Map<number, string> {
  const k = numbers.length;
  if (k < 1 || k > 6) throw new Error(`solveCountdown: ${k} numbers (1..6 supported)`);
  const full = (1 << k) - 1;
  const table: Reach[][] = new Array(full + 1);
  const targets = new Map<number, Reach>();
  for (let i = 0; i < k; i++) table[1 << i] = [{ n: numbers[i], d: 1, clean: true, leaf: numbers[i] }];
  if (k === 1 && numbers[0] >= 1 && numbers[0] <= maxTarget) targets.set(numbers[0], table[1][0]);
  for (let mask = 3; mask <= full; mask++) {
    if ((mask & (mask - 1)) === 0) continue;
    const top = mask === full;
    const seen = new Map<number, Reach>();
    // Allocation only for results that are kept: this loop runs ~10^5 times for five numbers.
    const keep = (op: BinaryOp, a: Reach, b: Reach): void => {
      let n: number;
      let d: number;
      if (op === '+') {
        n = a.n * b.d + b.n * a.d;
        d = a.d * b.d;
      } else if (op === '-') {
        n = a.n * b.d - b.n * a.d;
        d = a.d * b.d;
      } else if (op === '*') {
        n = a.n * b.n;
        d = a.d * b.d;
      } else {
        if (b.n === 0) return;
        n = a.n * b.d;
        d = a.d * b.n;
        if (d < 0) {
          n = -n;
          d = -d;
        }
      }
      const g = gcd(n, d) || 1;
      n /= g;
      d /= g;
      const clean = a.clean && b.clean && d === 1 && n >= 0;
      if (top) {
        if (d !== 1 || n < 1 || n > maxTarget) return;
        const old = targets.get(n);
        if (!old || (!old.clean && clean)) targets.set(n, { n, d, clean, op, l: a, r: b });
        return;
      }
      if (Math.abs(n) > RAT_LIMIT || d > RAT_LIMIT) return;
      const key = (n + RAT_LIMIT) * (2 * RAT_LIMIT + 1) + d;
      const old = seen.get(key);
      if (!old || (!old.clean && clean)) seen.set(key, { n, d, clean, op, l: a, r: b });
    };
    for (let sub = (mask - 1) & mask; sub > 0; sub = (sub - 1) & mask) {
      const other = mask ^ sub;
      if (sub < other) continue; // each unordered split once; both orders of − and ÷ are tried below
      for (const a of table[sub]) {
        for (const b of table[other]) {
          keep('+', a, b);
          keep('*', a, b);
          keep('-', a, b);
          keep('-', b, a);
          keep('/', a, b);
          keep('/', b, a);
        }
      }
    }
    if (!top) table[mask] = [...seen.values()];
  }
  const out = new Map<number, string>();
  for (const t of [...targets.keys()].sort((a, b) => a - b)) out.set(t, formatExpr(toExpr(targets.get(t)!)));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Instances, prompts, demonstrations

export interface CountdownInstance {
  numbers: number[];
  target: number;
  /** one solution, e.g. "(5+3)*2" */
  solution: string;
}

/** Canonical key of an instance: the numbers as a multiset, and the target. */
export function countdownKey(numbers: number[], target: number): string {
  return `${[...numbers].sort((a, b) => a - b).join(',')}->${target}`;
}

/**
 * One uniformly drawn solvable instance: operand count in numbers[0..1], operands in 1..max_number, then a target
 * drawn uniformly from the integers in 1..max_target those operands can reach. Null when they reach none.
 * `cache` maps a sorted multiset to its solutions, since the same multiset comes back often.
 */
export function drawCountdownInstance(
  rng: Rng,
  o: Pick<GeneratedTaskOptions, 'numbers' | 'max_number' | 'max_target'>,
  cache?: Map<string, Map<number, string>>,
): CountdownInstance | null {
  const count = randInt(rng, o.numbers[0], o.numbers[1]);
  const numbers = Array.from({ length: count }, () => randInt(rng, 1, o.max_number));
  const key = [...numbers].sort((a, b) => a - b).join(',');
  let sols = cache?.get(key);
  if (!sols) {
    sols = solveCountdown(numbers, o.max_target);
    cache?.set(key, sols);
  }
  if (sols.size === 0) return null;
  const targets = [...sols.keys()];
  const target = targets[randInt(rng, 0, targets.length - 1)];
  return { numbers, target, solution: sols.get(target)! };
}

/** Prompt text, ending with the "<think>" prefill. `tinyzero` is TinyZero's countdown "base" template verbatim. */
export function countdownPrompt(numbers: number[], target: number, style: PromptStyle): string {
  if (style === 'compact') return `${numbers.join(' ')} -> ${target}\n${THINK_PREFILL}`;
  return (
    'A conversation between User and Assistant. The user asks a question, and the Assistant solves it. ' +
    'The assistant first thinks about the reasoning process in the mind and then provides the user with the answer.\n' +
    `User: Using the numbers [${numbers.join(', ')}], create an equation that equals ${target}. ` +
    'You can use basic arithmetic operations (+, -, *, /) and each number can only be used once. ' +
    'Show your work in <think> </think> tags. And return the final answer in <answer> </answer> tags, ' +
    'for example <answer> (1 + 2) / 3 </answer>.\n' +
    `Assistant: Let me solve this step by step.\n${THINK_PREFILL}`
  );
}

/**
 * A wrong try written as steps over the numbers in a random order, each step a random operation whose result is
 * a non-negative integer. Null when the try happens to hit the target (it would not be abandoned).
 */
function abandonedAttempt(numbers: number[], target: number, rng: Rng): string[] | null {
  const order = shuffle(rng, [...numbers]);
  let acc = order[0];
  const steps: string[] = [];
  for (const x of order.slice(1)) {
    const options: [number, BinaryOp, number, number][] = [
      [acc, '+', x, acc + x],
      [acc, '*', x, acc * x],
    ];
    options.push(acc >= x ? [acc, '-', x, acc - x] : [x, '-', acc, x - acc]);
    if (x !== 0 && acc % x === 0) options.push([acc, '/', x, acc / x]);
    const [a, op, b, v] = options[randInt(rng, 0, options.length - 1)];
    steps.push(`${a}${op}${b}=${v}`);
    acc = v;
  }
  return acc === target ? null : steps;
}

/** Probability that a demonstration first shows one abandoned attempt. */
export const ABANDON_PROBABILITY = 0.25;
/** An abandoned attempt is only shown if the whole demonstration stays within this many characters. */
export const DEMO_BUDGET = 64;

/**
 * A short demonstration (without the prefill): the steps of `solution`, sometimes after one abandoned attempt,
 * then the answer. E.g. for 3 5 2 -> 16: "5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>". Scratch models
 * learn from these one character per token, so they are kept near max_new_tokens (64 by default).
 */
export function countdownDemonstration(numbers: number[], target: number, solution: string, rng: Rng): string {
  const parsed = evaluateExpression(solution);
  if (!parsed.ok) throw new Error(`countdown solution '${solution}' does not parse: ${parsed.error}`);
  const tail = `</think>\n<answer>${solution}</answer>`;
  const steps = exprSteps(parsed.ast)!;
  const plain = `${steps.join('\n')}${tail}`;
  if (rng() >= ABANDON_PROBABILITY) return plain;
  const tried = abandonedAttempt(numbers, target, rng);
  const longer = tried && `${[...tried, ...steps].join('\n')}${tail}`;
  return longer && longer.length <= DEMO_BUDGET ? longer : plain;
}

/** Unique characters of `text`, sorted by code point. */
export function uniqueChars(text: string): string {
  return [...new Set(text)].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!).join('');
}

// ---------------------------------------------------------------------------------------------------------------
// Splits and task

/** Range checks shared by the generated tasks; messages name the YAML path (design.md#config). */
export function checkGeneratedOptions(o: GeneratedTaskOptions, task: string, maxCount: number): void {
  const [lo, hi] = o.numbers;
  if (!Number.isInteger(lo) || !Number.isInteger(hi) || lo < 2 || hi < lo || hi > maxCount) {
    throw new UserError(`task.numbers: [${lo}, ${hi}] is not a valid operand count range for ${task}`, `use [min, max] with 2 <= min <= max <= ${maxCount}`);
  }
  if (!Number.isInteger(o.max_number) || o.max_number < 1) {
    throw new UserError(`task.max_number: ${o.max_number} must be an integer >= 1`);
  }
  if (!Number.isInteger(o.max_target) || o.max_target < 1) {
    throw new UserError(`task.max_target: ${o.max_target} must be an integer >= 1`);
  }
}

/**
 * Draws eval_size, then train_size, then validation distinct items by canonical key, each from its own seeded
 * stream: the eval set does not change with train_size or val_size, and train does not change with val_size; each
 * split skips the keys drawn before it, so the three are disjoint. Gives up with a UserError after a long run of
 * draws that bring nothing new: the space is (nearly) exhausted.
 */
export function drawDisjointSplits<T>(
  seed: number,
  sizes: { train: number; eval: number; validation?: number },
  draw: (rng: Rng) => { key: string; item: T } | null,
  describe: string,
): { train: T[]; eval: T[]; validation: T[] } {
  const seen = new Set<string>();
  const fill = (rng: Rng, size: number, split: string): T[] => {
    const out: T[] = [];
    let misses = 0;
    while (out.length < size) {
      const x = draw(rng);
      if (x && !seen.has(x.key)) {
        seen.add(x.key);
        out.push(x.item);
        misses = 0;
        continue;
      }
      // Generous enough that coupon-collecting the last few items of a space only just big enough succeeds.
      if (++misses > Math.max(5000, 20 * seen.size)) {
        throw new UserError(
          `task: could only draw ${seen.size} distinct ${describe} instances, but train_size + eval_size + val_size = ` +
            `${sizes.train + sizes.eval + (sizes.validation ?? 0)} (stopped in the ${split} split after ${misses} draws found nothing new)`,
          'raise task.max_number or task.max_target, widen task.numbers, or lower task.train_size / task.eval_size / task.val_size',
        );
      }
    }
    return out;
  };
  const evalItems = fill(makeRng(childSeed(seed, 'task/eval')), sizes.eval, 'eval');
  const trainItems = fill(makeRng(childSeed(seed, 'task/train')), sizes.train, 'train');
  const validation = fill(makeRng(childSeed(seed, 'task/validation')), sizes.validation ?? 0, 'validation');
  return { train: trainItems, eval: evalItems, validation };
}

function countdownOf(ex: Example): { numbers: number[]; target: number } {
  if (!ex.numbers || ex.target === undefined) throw new Error(`countdown example ${ex.id} has no numbers/target`);
  return { numbers: ex.numbers, target: ex.target };
}

export function makeCountdownTask(o: GeneratedTaskOptions, seed: number): Task {
  checkGeneratedOptions(o, 'countdown', 5);
  const cache = new Map<string, Map<number, string>>();
  const {
    train,
    eval: evalSet,
    validation,
  } = drawDisjointSplits(
    seed,
    { train: o.train_size, eval: o.eval_size, validation: o.val_size ?? 0 },
    (rng) => {
      const inst = drawCountdownInstance(rng, o, cache);
      return inst && { key: countdownKey(inst.numbers, inst.target), item: inst };
    },
    'countdown',
  );
  // Train ids first, then eval, so ids are unique across the task.
  const toExample = (inst: CountdownInstance, id: number): Example => ({
    id,
    prompt: countdownPrompt(inst.numbers, inst.target, o.prompt),
    numbers: inst.numbers,
    target: inst.target,
    answer: inst.solution,
  });
  const trainEx = train.map((x, i) => toExample(x, i));
  const evalEx = evalSet.map((x, i) => toExample(x, train.length + i));
  const valEx = validation.map((x, i) => toExample(x, train.length + evalSet.length + i));
  const alphabet = uniqueChars(countdownPrompt([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0, o.prompt) + '0123456789+-*/()=\n</think>\n<answer></answer>');
  return {
    name: 'countdown',
    prefill: THINK_PREFILL,
    train: trainEx,
    eval: evalEx,
    validation: valEx,
    reward(completion, ex) {
      const { numbers, target } = countdownOf(ex);
      return countdownReward(THINK_PREFILL + completion, numbers, target, o.reward);
    },
    isSuccess: (r) => r.answer === 1,
    demonstration(ex, rng) {
      const { numbers, target } = countdownOf(ex);
      const solution = ex.answer ?? solveCountdown(numbers, target).get(target);
      if (!solution) throw new Error(`countdown example ${ex.id} has no solution`);
      return countdownDemonstration(numbers, target, solution, rng);
    },
    alphabet: () => alphabet,
  };
}
