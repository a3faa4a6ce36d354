import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isUserError } from '../../../src/engine/core/errors';
import { makeRng } from '../../../src/engine/core/rng';
import { arithmeticDemonstration, arithmeticPrompt, arithmeticReward } from '../../../src/engine/tasks/arithmetic';
import { makeTask, type TaskOptions } from '../../../src/engine/tasks';

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-12, `${a} != ${b}`);

test('prompt and demonstration of (3+4)*2-5', () => {
  assert.equal(arithmeticPrompt('(3+4)*2-5', 'compact'), '(3+4)*2-5=\n<think>');
  assert.ok(arithmeticPrompt('(3+4)*2-5', 'tinyzero').includes('Compute the value of (3+4)*2-5.'));
  assert.ok(arithmeticPrompt('(3+4)*2-5', 'tinyzero').endsWith('Assistant: Let me solve this step by step.\n<think>'));
  // 3+4 = 7, 7·2 = 14, 14−5 = 9.
  assert.equal(arithmeticDemonstration('(3+4)*2-5'), '3+4=7\n7*2=14\n14-5=9</think>\n<answer>9</answer>');
});

test('reward: GRPO-Zero format plus an exact integer answer', () => {
  const r = (c: string) => arithmeticReward(c, 9, 'grpo_zero');
  // Full format 1, correct → 0.1 + 1 = 1.1; surrounding spaces are fine.
  close(r('<think>3+4=7</think>\n<answer>9</answer>').total, 1.1);
  close(r('<think>3+4=7</think>\n<answer> 9 </answer>').total, 1.1);
  // Wrong or non-integer content → only the format part: 0.1.
  for (const a of ['8', '9.0', '4+5', 'nine', '', '9 9']) close(r(`<think>x</think>\n<answer>${a}</answer>`).total, 0.1);
  // Negative expected values parse with their sign: −3 → 1.1.
  close(arithmeticReward('<think>x</think>\n<answer>-3</answer>', -3, 'grpo_zero').total, 1.1);
  // tinyzero scheme: last block, 0 / 0.1 / 1.
  assert.equal(arithmeticReward('<think>x</think>', 9, 'tinyzero').total, 0);
  assert.equal(arithmeticReward('<answer>8</answer>', 9, 'tinyzero').total, 0.1);
  assert.equal(arithmeticReward('<answer>8</answer><answer>9</answer>', 9, 'tinyzero').total, 1);
});

const base: TaskOptions = {
  name: 'arithmetic',
  numbers: [2, 5],
  max_number: 20,
  max_target: 100,
  reward: 'grpo_zero',
  prompt: 'compact',
  train_size: 400,
  eval_size: 50,
  path: null,
  reward_module: null,
  max_steps: 3,
  format: 'plain',
  split_seed: 1,
};

test('instances: every written step is correct integer arithmetic within 0..max_target', () => {
  const task = makeTask(base, 4);
  const alphabet = new Set(task.alphabet());
  for (const ex of [...task.train, ...task.eval]) {
    const demo = task.demonstration(ex, makeRng(0));
    const [think, rest] = demo.split('</think>');
    // Check each "a op b=v" line with plain JS arithmetic, independent of the parser.
    let last = NaN;
    for (const line of think.split('\n')) {
      const m = /^(\d+)([+\-*/])(\d+)=(\d+)$/.exec(line);
      assert.ok(m, `step '${line}' of ${ex.prompt}`);
      const [a, b, v] = [Number(m[1]), Number(m[3]), Number(m[4])];
      const want = m[2] === '+' ? a + b : m[2] === '-' ? a - b : m[2] === '*' ? a * b : a / b;
      assert.equal(v, want, line);
      assert.ok(v >= 0 && v <= 100, line);
      last = v;
    }
    assert.equal(String(last), ex.answer);
    assert.equal(rest, `\n<answer>${ex.answer}</answer>`);
    assert.equal(ex.prompt, `${ex.record!.expression}=\n<think>`);
    const operands = (ex.record!.expression as string).match(/[0-9]+/g)!.map(Number);
    assert.ok(operands.length >= 2 && operands.length <= 5 && operands.every((n) => n >= 1 && n <= 20));
    close(task.reward(demo, ex).total, 1.1);
    for (const ch of ex.prompt + demo) assert.ok(alphabet.has(ch), `'${ch}' missing from the alphabet`);
  }
});

test('splits: disjoint by expression, seed-reproducible', () => {
  const a = makeTask(base, 8);
  const expr = (e: { record?: Record<string, unknown> }) => e.record!.expression as string;
  const train = new Set(a.train.map(expr));
  assert.equal(train.size, 400);
  assert.ok(a.eval.every((e) => !train.has(expr(e))));
  assert.deepEqual(makeTask(base, 8).eval, a.eval);
  assert.notDeepEqual(makeTask(base, 9).eval.map(expr), a.eval.map(expr));
});

test('a too small expression space is a UserError', () => {
  // Two operands from 1..1: 1+1, 1-1, 1*1, 1/1 are the only 4 expressions; 3 + 2 cannot be filled, 2 + 2 can.
  const small: TaskOptions = { ...base, numbers: [2, 2], max_number: 1, train_size: 3, eval_size: 2 };
  assert.throws(
    () => makeTask(small, 1),
    (e) => isUserError(e) && /only draw 4 distinct arithmetic/.test(e.message),
  );
  const fit = makeTask({ ...small, train_size: 2 }, 1);
  assert.deepEqual([...fit.train, ...fit.eval].map((e) => e.record!.expression).sort(), ['1*1', '1+1', '1-1', '1/1']);
});
