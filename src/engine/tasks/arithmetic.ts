// Multi-step integer arithmetic: evaluate a printed expression such as "(3+4)*2-5". The demonstration computes
// it one operation per line, so the think section holds checkable steps (what the `cal` rule oracle inspects).
import { randInt, type Rng } from '../core/rng';
import type { Example, RewardResult, Task } from '../core/types';
import {
  checkGeneratedOptions,
  drawDisjointSplits,
  formattedReward,
  THINK_PREFILL,
  uniqueChars,
  type GeneratedTaskOptions,
  type PromptStyle,
  type RewardKind,
} from './countdown';
import { evalExact, evaluateExpression, exprSteps, formatExpr, type BinaryOp, type ExprNode } from './expr';

export interface ArithmeticInstance {
  expression: string;
  value: number;
}

// A random tree built bottom-up: each operation is drawn among those whose result is an integer in 0..limit
// given the two operands already drawn. Null when no operation fits.
function randomTree(rng: Rng, count: number, maxNumber: number, limit: number): { node: ExprNode; value: number } | null {
  if (count === 1) {
    const value = randInt(rng, 1, maxNumber);
    return { node: { kind: 'num', value }, value };
  }
  const leftCount = randInt(rng, 1, count - 1);
  const l = randomTree(rng, leftCount, maxNumber, limit);
  const r = l && randomTree(rng, count - leftCount, maxNumber, limit);
  if (!l || !r) return null;
  const fits: [BinaryOp, number][] = [];
  if (l.value + r.value <= limit) fits.push(['+', l.value + r.value]);
  if (l.value >= r.value) fits.push(['-', l.value - r.value]);
  if (l.value * r.value <= limit) fits.push(['*', l.value * r.value]);
  if (r.value !== 0 && l.value % r.value === 0) fits.push(['/', l.value / r.value]);
  if (fits.length === 0) return null;
  const [op, value] = fits[randInt(rng, 0, fits.length - 1)];
  return { node: { kind: 'bin', op, left: l.node, right: r.node }, value };
}

/** Every operation of `node` yields an integer in 0..limit (so no negatives, fractions or division by zero). */
function stepsInRange(node: ExprNode, limit: number): boolean {
  if (node.kind === 'num') return true;
  if (!stepsInRange(node.left, limit) || !stepsInRange(node.right, limit)) return false;
  const v = evalExact(node);
  return v !== null && v.den === 1n && v.num >= 0n && v.num <= BigInt(limit);
}

/**
 * One random expression: operand count in numbers[0..1], operands in 1..max_number, a random tree shape and
 * operations. Every intermediate and the result must be an integer in 0..max_target, checked on the tree that the
 * printed text parses back to (printing drops redundant parentheses, which can regroup a*(b/c) as a*b/c).
 * Null when the draw breaks that rule; the caller draws again.
 */
export function drawArithmeticInstance(rng: Rng, o: Pick<GeneratedTaskOptions, 'numbers' | 'max_number' | 'max_target'>): ArithmeticInstance | null {
  const count = randInt(rng, o.numbers[0], o.numbers[1]);
  const tree = randomTree(rng, count, o.max_number, o.max_target);
  if (!tree) return null;
  const expression = formatExpr(tree.node);
  const parsed = evaluateExpression(expression);
  if (!parsed.ok || !stepsInRange(parsed.ast, o.max_target)) return null;
  return { expression, value: Math.round(parsed.value) };
}

export function arithmeticPrompt(expression: string, style: PromptStyle): string {
  if (style === 'compact') return `${expression}=\n${THINK_PREFILL}`;
  return (
    'A conversation between User and Assistant. The user asks a question, and the Assistant solves it. ' +
    'The assistant first thinks about the reasoning process in the mind and then provides the user with the answer.\n' +
    `User: Compute the value of ${expression}. Use the usual order of operations: * and / before + and -, ` +
    'left to right otherwise; every intermediate result is a whole number. ' +
    'Show your work in <think> </think> tags. And return the final answer as a single integer in ' +
    '<answer> </answer> tags, for example <answer> 42 </answer>.\n' +
    `Assistant: Let me solve this step by step.\n${THINK_PREFILL}`
  );
}

/** answer = 1 iff the answer block holds exactly the expected integer (surrounding whitespace allowed). */
export function arithmeticReward(text: string, expected: number, kind: RewardKind): RewardResult {
  return formattedReward(text, kind, (c) => {
    const t = c?.trim() ?? '';
    return { correct: /^[+-]?[0-9]{1,15}$/.test(t) && Number(t) === expected };
  });
}

/** E.g. for (3+4)*2-5: "3+4=7\n7*2=14\n14-5=9</think>\n<answer>9</answer>" (without the prefill). */
export function arithmeticDemonstration(expression: string): string {
  const parsed = evaluateExpression(expression);
  if (!parsed.ok) throw new Error(`arithmetic expression '${expression}' does not parse: ${parsed.error}`);
  const steps = exprSteps(parsed.ast)!;
  return `${steps.join('\n')}</think>\n<answer>${Math.round(parsed.value)}</answer>`;
}

function expressionOf(ex: Example): string {
  const e = ex.record?.expression;
  if (typeof e !== 'string') throw new Error(`arithmetic example ${ex.id} has no record.expression`);
  return e;
}

export function makeArithmeticTask(o: GeneratedTaskOptions, seed: number): Task {
  checkGeneratedOptions(o, 'arithmetic', 8);
  const {
    train,
    eval: evalSet,
    validation,
  } = drawDisjointSplits(
    seed,
    { train: o.train_size, eval: o.eval_size, validation: o.val_size ?? 0 },
    (rng) => {
      const inst = drawArithmeticInstance(rng, o);
      return inst && { key: inst.expression, item: inst };
    },
    'arithmetic',
  );
  const toExample = (inst: ArithmeticInstance, id: number): Example => ({
    id,
    prompt: arithmeticPrompt(inst.expression, o.prompt),
    answer: String(inst.value),
    record: { expression: inst.expression },
  });
  const trainEx = train.map((x, i) => toExample(x, i));
  const evalEx = evalSet.map((x, i) => toExample(x, train.length + i));
  const valEx = validation.map((x, i) => toExample(x, train.length + evalSet.length + i));
  const alphabet = uniqueChars(arithmeticPrompt('0123456789+-*/()', o.prompt) + '0123456789+-*/()=\n</think>\n<answer></answer>');
  return {
    name: 'arithmetic',
    prefill: THINK_PREFILL,
    train: trainEx,
    eval: evalEx,
    validation: valEx,
    reward(completion, ex) {
      if (ex.answer === undefined) throw new Error(`arithmetic example ${ex.id} has no answer`);
      return arithmeticReward(THINK_PREFILL + completion, Number(ex.answer), o.reward);
    },
    isSuccess: (r) => r.answer === 1,
    demonstration: (ex) => arithmeticDemonstration(expressionOf(ex)),
    alphabet: () => alphabet,
  };
}
