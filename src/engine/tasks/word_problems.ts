// Word problems: a seeded generator of multi-step grade-school problems, GSM8K-like, whose demonstrations
// reason in words ("Tom has 3 apples and buys 5 more, so he has 3 + 5 = 8."). Quantities, up to four operations
// (task.max_steps) and distractor sentences with numbers that do not matter. The reward is the final number, read
// tolerantly (commas, a trailing ".0", units); format and answer parts are logged as for countdown. GSM8K's own
// `#### N` answers are scored by the same final-number rule (jsonl.ts, task.format: gsm8k).
import { UserError } from '../core/errors';
import { randInt, type Rng } from '../core/rng';
import type { Example, RewardResult, Task } from '../core/types';
import { drawDisjointSplits, formattedReward, THINK_PREFILL, uniqueChars, type GeneratedTaskOptions, type PromptStyle, type RewardKind } from './countdown';

/** The generated tasks' options without `numbers` (operands come from the story), plus the number of operations. */
export interface WordProblemOptions extends Omit<GeneratedTaskOptions, 'numbers'> {
  max_steps: number;
}

const PEOPLE: [name: string, subject: string, object: string][] = [
  ['Tom', 'he', 'him'],
  ['Ana', 'she', 'her'],
  ['Lee', 'he', 'him'],
  ['Mia', 'she', 'her'],
  ['Sam', 'he', 'him'],
  ['Zoe', 'she', 'her'],
  ['Raj', 'he', 'him'],
  ['Ivy', 'she', 'her'],
  ['Ben', 'he', 'him'],
  ['Eva', 'she', 'her'],
];
const ITEMS = ['apples', 'pens', 'books', 'coins', 'stickers', 'marbles', 'cards', 'shells', 'stamps', 'beads'];
const DISTRACTORS = [
  (n: number) => `The shop is ${n} minutes away.`,
  (n: number) => `It rained for ${n} hours that day.`,
  (n: number) => `The bus had ${n} seats.`,
  (n: number) => `The class has ${n} desks.`,
];

export interface WordStep {
  /** the sentence of the problem */
  question: string;
  /** the worked sentence of the demonstration */
  worked: string;
}

export interface WordProblem {
  text: string;
  steps: WordStep[];
  answer: number;
}

const cap = (s: string) => s[0].toUpperCase() + s.slice(1);

/** One operation on `v` that keeps every value a whole number in 0..limit; null when none fits this draw. */
function drawStep(rng: Rng, v: number, he: string, o: WordProblemOptions): { step: WordStep; value: number } | null {
  const subj = cap(he);
  const ops: (() => { step: WordStep; value: number } | null)[] = [
    () => {
      const b = randInt(rng, 1, o.max_number);
      if (v + b > o.max_target) return null;
      return { value: v + b, step: { question: `${subj} buys ${b} more.`, worked: `${subj} buys ${b} more, so ${he} has ${v} + ${b} = ${v + b}.` } };
    },
    () => {
      if (v < 2) return null;
      const b = randInt(rng, 1, Math.min(o.max_number, v - 1));
      return { value: v - b, step: { question: `${subj} gives away ${b}.`, worked: `${subj} gives away ${b}, so ${he} has ${v} - ${b} = ${v - b}.` } };
    },
    () => {
      const k = randInt(rng, 2, 4);
      if (v * k > o.max_target) return null;
      return {
        value: v * k,
        step: { question: `${subj} ends up with ${k} times as many.`, worked: `${subj} ends up with ${k} times as many, so ${he} has ${v} * ${k} = ${v * k}.` },
      };
    },
    () => {
      const ks = [2, 3, 4, 5].filter((k) => v % k === 0 && v / k >= 1);
      if (!ks.length) return null;
      const k = ks[randInt(rng, 0, ks.length - 1)];
      return {
        value: v / k,
        step: {
          question: `${subj} shares them equally among ${k} bags and keeps one bag.`,
          worked: `${subj} keeps one of ${k} equal bags, so ${he} has ${v} / ${k} = ${v / k}.`,
        },
      };
    },
  ];
  return ops[randInt(rng, 0, ops.length - 1)]();
}

/** One problem: a start quantity, 1..max_steps operations, sometimes a distractor sentence, and the question. */
export function drawWordProblem(rng: Rng, o: WordProblemOptions): WordProblem | null {
  const who = PEOPLE[randInt(rng, 0, PEOPLE.length - 1)];
  const item = ITEMS[randInt(rng, 0, ITEMS.length - 1)];
  let v = randInt(rng, 1, o.max_number);
  const start = v;
  const n = randInt(rng, 1, o.max_steps);
  const steps: WordStep[] = [];
  for (let i = 0; i < n; i++) {
    const s = drawStep(rng, v, who[1], o);
    if (!s) return null;
    steps.push(s.step);
    v = s.value;
  }
  const sentences = [`${who[0]} has ${start} ${item}.`, ...steps.map((s) => s.question)];
  if (rng() < 0.5) {
    // A number that must not be used, between two sentences of the story.
    const at = randInt(rng, 1, sentences.length);
    sentences.splice(at, 0, DISTRACTORS[randInt(rng, 0, DISTRACTORS.length - 1)](randInt(rng, 2, o.max_number)));
  }
  const text = `${sentences.join(' ')} How many ${item} does ${who[0]} have now?`;
  // The first worked step names the person and the start: "Tom has 3 apples and buys 5 more, so he has 3 + 5 = 8."
  const worked = steps.map((s, i) => (i === 0 ? `${who[0]} has ${start} ${item} and ${s.worked.slice(cap(who[1]).length + 1)}` : s.worked));
  return { text, steps: steps.map((s, i) => ({ question: s.question, worked: worked[i] })), answer: v };
}

export function wordProblemPrompt(text: string, style: PromptStyle): string {
  if (style === 'compact') return `${text}\n${THINK_PREFILL}`;
  return (
    'A conversation between User and Assistant. The user asks a question, and the Assistant solves it. ' +
    'The assistant first thinks about the reasoning process in the mind and then provides the user with the answer.\n' +
    `User: ${text} Show your work in <think> </think> tags. And return the final answer as a number in ` +
    '<answer> </answer> tags, for example <answer> 42 </answer>.\n' +
    `Assistant: Let me solve this step by step.\n${THINK_PREFILL}`
  );
}

/**
 * The final number of an answer: the last number in it, with thousands commas removed, so "1,200", "8.0",
 * "8 apples" and "$8" all read as their number. Null when there is none.
 */
export function finalNumber(s: string | null): number | null {
  if (s === null) return null;
  const m = s.replace(/(\d),(?=\d{3}\b)/g, '$1').match(/[-+]?\d+(?:\.\d+)?/g);
  if (!m) return null;
  const x = Number(m[m.length - 1]);
  return Number.isFinite(x) ? x : null;
}

/** answer = 1 iff the answer block's final number equals the expected one (1e-9 relative, for "8.0" against 8). */
export function finalNumberReward(text: string, expected: number, kind: RewardKind): RewardResult {
  return formattedReward(text, kind, (c) => {
    const x = finalNumber(c);
    return { correct: x !== null && Math.abs(x - expected) <= 1e-9 * Math.max(1, Math.abs(expected)) };
  });
}

export function makeWordProblemsTask(o: WordProblemOptions, seed: number): Task {
  if (!Number.isInteger(o.max_steps) || o.max_steps < 1 || o.max_steps > 4) {
    throw new UserError(`task.max_steps: ${o.max_steps} must be an integer from 1 to 4`);
  }
  const {
    train,
    eval: evalSet,
    validation,
  } = drawDisjointSplits(
    seed,
    { train: o.train_size, eval: o.eval_size, validation: o.val_size ?? 0 },
    (rng) => {
      const p = drawWordProblem(rng, o);
      return p && { key: p.text, item: p };
    },
    'word problem',
  );
  const toExample = (p: WordProblem, id: number): Example => ({
    id,
    prompt: wordProblemPrompt(p.text, o.prompt),
    answer: String(p.answer),
    record: { problem: p.text, worked: p.steps.map((s) => s.worked) },
  });
  const trainEx = train.map((p, i) => toExample(p, i));
  const evalEx = evalSet.map((p, i) => toExample(p, train.length + i));
  const valEx = validation.map((p, i) => toExample(p, train.length + evalSet.length + i));
  const alphabet = uniqueChars(
    wordProblemPrompt('', o.prompt) + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,?!'$+-*/=()\n</think>\n<answer></answer>",
  );
  return {
    name: 'word_problems',
    prefill: THINK_PREFILL,
    train: trainEx,
    eval: evalEx,
    validation: valEx,
    reward: (completion, ex) => finalNumberReward(THINK_PREFILL + completion, Number(ex.answer), o.reward),
    isSuccess: (r) => r.answer === 1,
    demonstration(ex) {
      const worked = ex.record?.worked;
      if (!Array.isArray(worked)) throw new Error(`word problem ${ex.id} has no worked steps`);
      return `${worked.join(' ')}</think>\n<answer>${ex.answer}</answer>`;
    },
    alphabet: () => alphabet,
  };
}
