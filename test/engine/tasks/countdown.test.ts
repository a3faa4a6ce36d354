import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isUserError } from '../../../src/engine/core/errors';
import { makeRng } from '../../../src/engine/core/rng';
import { countdownDemonstration, countdownKey, countdownPrompt, countdownReward, solveCountdown } from '../../../src/engine/tasks/countdown';
import { applyExact, evalExact, evaluateExpression, type BigRational } from '../../../src/engine/tasks/expr';
import { makeTask, type TaskOptions } from '../../../src/engine/tasks';

const N = [3, 5, 2];
const T = 16;
const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-12, `${a} != ${b}`);

function grpo(completion: string, numbers = N, target = T) {
  return countdownReward(completion, numbers, target, 'grpo_zero');
}
function tiny(completion: string, numbers = N, target = T) {
  return countdownReward(completion, numbers, target, 'tinyzero');
}

test('grpo_zero: full format and a correct answer', () => {
  // format 1 (full match), answer 1 → total 0.1·1 + 1 = 1.1.
  const r = grpo('<think>5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>');
  close(r.total, 1.1);
  assert.equal(r.format, 1);
  assert.equal(r.answer, 1);
  assert.deepEqual(r.parts, { format: 1, answer: 1, uses_all_numbers: 1, valid_expression: 1 });
  // Python's '$' (GRPO-Zero's re.match) also matches before one final newline → still the full format: 1.1.
  close(grpo('<think>x</think>\n<answer>(5+3)*2</answer>\n').total, 1.1);
  // Two final newlines are past what '$' allows: think 0.1 + answer 0.5 = 0.6 → 0.06 + 1 = 1.06.
  close(grpo('<think>x</think>\n<answer>(5+3)*2</answer>\n\n').total, 1.06);
  // Whitespace inside the answer is fine: same 1.1.
  close(grpo('<think>x</think>\n<answer> ( 5 + 3 ) * 2 </answer>').total, 1.1);
});

test('grpo_zero: partial format scores', () => {
  // No newline between the blocks → no full match; think 0.1 + answer 0.5 = 0.6 → 0.06 + 1 = 1.06.
  const a = grpo('<think>x</think><answer>(5+3)*2</answer>');
  close(a.format, 0.6);
  close(a.total, 1.06);
  assert.deepEqual(a.parts, { format: 0, answer: 1, uses_all_numbers: 1, valid_expression: 1 });
  // Think never closed (so no think block), answer present: format 0.5 → 0.05 + 1 = 1.05.
  close(grpo('<think>5+3=8 <answer>(5+3)*2</answer>').total, 1.05);
  // Think only, no answer block: format 0.1, answer 0 → 0.01.
  const c = grpo('<think>hmm</think>');
  close(c.total, 0.01);
  assert.equal(c.format, 0.1);
  // parts are 0/1 (seed doc 004): parts.format is the full-format match, which this is not.
  assert.deepEqual(c.parts, { format: 0, answer: 0, uses_all_numbers: 0, valid_expression: 0 });
  // Unclosed answer is no answer block: format 0.1 → 0.01.
  close(grpo('<think>x</think>\n<answer>(5+3)*2').total, 0.01);
  // Nothing at all: 0.
  assert.equal(grpo('').total, 0);
});

test('grpo_zero: wrong answers keep only the format part', () => {
  const wrong = (answer: string, parts: { uses_all_numbers: number; valid_expression: number }, numbers = N, target = T) => {
    const r = grpo(`<think>x</think>\n<answer>${answer}</answer>`, numbers, target);
    // Full format (1) but answer 0 → total 0.1·1 + 0 = 0.1.
    close(r.total, 0.1);
    assert.equal(r.answer, 0, answer);
    assert.deepEqual(r.parts, { format: 1, answer: 0, ...parts }, answer);
  };
  wrong('5*3+3-2', { uses_all_numbers: 0, valid_expression: 1 }); // 3 reused: {5,3,3,2} ≠ {3,5,2} (value 16)
  wrong('3*5', { uses_all_numbers: 0, valid_expression: 1 }, N, 15); // value 15 = target but 2 unused
  wrong('5*2+3', { uses_all_numbers: 1, valid_expression: 1 }); // all numbers, value 13 ≠ 16
  wrong('2/(4-4)', { uses_all_numbers: 1, valid_expression: 0 }, [4, 4, 2], 2); // division by zero
  wrong('((5+3)*2', { uses_all_numbers: 1, valid_expression: 0 }); // unbalanced parentheses
  wrong('(5+3)*2)', { uses_all_numbers: 1, valid_expression: 0 });
  wrong('', { uses_all_numbers: 0, valid_expression: 0 }); // empty answer
  // Python's eval would accept these and GRPO-Zero would pay 1; the grammar of design.md#semantics has no power, unary minus
  // or decimals, so they score 0: 7+3**2 = 16 with {7,3,2}; -3+5*2... = 7 needs unary minus.
  wrong('7+3**2', { uses_all_numbers: 1, valid_expression: 0 }, [7, 3, 2], 16);
  wrong('-3+5*2', { uses_all_numbers: 1, valid_expression: 0 }, N, 7);
  wrong('(5+3)*2.0', { uses_all_numbers: 0, valid_expression: 0 }); // digit runs 5,3,2,0
  // Full-width ５ is not an ASCII integer: digit runs are 3,2 only, and it does not parse.
  wrong('(\uff15+3)*2', { uses_all_numbers: 0, valid_expression: 0 });
  // Code-injection strings are just invalid text: digit runs [1] and [] ≠ {3,5,2}; nothing is executed.
  wrong('process.exit(1)', { uses_all_numbers: 0, valid_expression: 0 });
  wrong("require('fs').writeFileSync('/tmp/pwned','')", { uses_all_numbers: 0, valid_expression: 0 });
  wrong('(5+3)*2;process.exit(1)', { uses_all_numbers: 0, valid_expression: 0 }); // runs 5,3,2,1
  wrong('constructor.constructor("return process")()', { uses_all_numbers: 0, valid_expression: 0 });
});

test('grpo_zero: unicode operators, float tolerance, first answer block', () => {
  // (5+3)×2 = 16 with the unicode sign: correct → 1.1.
  close(grpo('<think>x</think>\n<answer>(5+3)\u00d72</answer>').total, 1.1);
  // 24 game {8,3,8,3}: 8/(3−8/3) is 24.000000000000004 in floats, within 1e-5 → correct, 1.1.
  close(grpo('<think>x</think>\n<answer>8/(3-8/3)</answer>', [8, 3, 8, 3], 24).total, 1.1);
  // GRPO-Zero reads the first block: 5+3+2 = 10 is wrong. The full-format regex still matches (the lazy
  // answer body stretches to the last </answer>), so format 1 → total 0.1.
  const r = grpo('<think>x</think>\n<answer>5+3+2</answer><answer>(5+3)*2</answer>');
  assert.equal(r.format, 1);
  close(r.total, 0.1);
});

test('tinyzero: 0 when the last answer is missing, 0.1 when wrong, 1 when correct', () => {
  assert.deepEqual(tiny('<think>x</think>'), {
    total: 0,
    format: 0,
    answer: 0,
    parts: { format: 0, answer: 0, uses_all_numbers: 0, valid_expression: 0 },
  });
  assert.equal(tiny('<think>x</think>\n<answer>(5+3)*2').total, 0); // unclosed → missing
  assert.equal(tiny('<think>x</think>\n<answer>5*2+3</answer>').total, 0.1); // 13 ≠ 16
  assert.equal(tiny('<answer>5*3+3-2</answer>').total, 0.1); // 3 reused
  assert.equal(tiny('<answer>process.exit(1)</answer>').total, 0.1); // invalid expression
  assert.equal(tiny('<answer>2/(4-4)</answer>', [4, 4, 2], 2).total, 0.1); // division by zero
  const ok = tiny('<think>x</think>\n<answer>(5+3)*2</answer>');
  assert.deepEqual(ok, {
    total: 1,
    format: 1,
    answer: 1,
    parts: { format: 1, answer: 1, uses_all_numbers: 1, valid_expression: 1 },
  });
  // No think needed, text around is ignored: correct → 1.
  assert.equal(tiny('blah <answer>2*(3+5)</answer> trailing').total, 1);
  // The last block counts: wrong then right → 1; right then wrong → 0.1.
  assert.equal(tiny('<answer>5+3+2</answer><answer>(5+3)*2</answer>').total, 1);
  assert.equal(tiny('<answer>(5+3)*2</answer><answer>5+3+2</answer>').total, 0.1);
});

// Independent brute force: repeatedly replace two values by one combination, exact BigInt rationals.
function bruteTargets(numbers: number[], maxTarget: number): number[] {
  const found = new Set<number>();
  const rec = (vals: BigRational[]): void => {
    if (vals.length === 1) {
      const v = vals[0];
      if (v.den === 1n && v.num >= 1n && v.num <= BigInt(maxTarget)) found.add(Number(v.num));
      return;
    }
    for (let i = 0; i < vals.length; i++) {
      for (let j = 0; j < vals.length; j++) {
        if (i === j) continue;
        const rest = vals.filter((_, k) => k !== i && k !== j);
        for (const op of ['+', '-', '*', '/'] as const) {
          const v = applyExact(op, vals[i], vals[j]);
          if (v) rec([...rest, v]);
        }
      }
    }
  };
  rec(numbers.map((n) => ({ num: BigInt(n), den: 1n })));
  return [...found].sort((a, b) => a - b);
}

test('solver: reachable targets match an independent brute force, and each solution checks out', () => {
  const rng = makeRng(7);
  const cases = [
    [1, 1],
    [3, 5, 2],
    [1, 5, 5, 5],
    [8, 3, 8, 3],
  ];
  for (let i = 0; i < 6; i++) cases.push(Array.from({ length: 3 + (i % 2) }, () => 1 + Math.floor(rng() * 20)));
  for (const nums of cases) {
    const sols = solveCountdown(nums, 100);
    assert.deepEqual([...sols.keys()], bruteTargets(nums, 100), `targets of ${nums}`);
    for (const [t, s] of sols) {
      const r = evaluateExpression(s);
      assert.ok(r.ok, s);
      assert.deepEqual(
        [...r.numbers].sort((a, b) => a - b),
        [...nums].sort((a, b) => a - b),
        s,
      );
      assert.deepEqual(evalExact(r.ast), { num: BigInt(t), den: 1n }, s);
    }
  }
  // {1,1}: 1+1 = 2, 1·1 = 1/1 = 1, 1−1 = 0 (not in 1..100) → exactly {1, 2}.
  assert.deepEqual([...solveCountdown([1, 1], 100).keys()], [1, 2]);
  // {1,5,5,5} → 24 only through a fraction: 5·(5 − 1/5).
  assert.ok(solveCountdown([1, 5, 5, 5], 24).has(24));
});

const base: TaskOptions = {
  name: 'countdown',
  numbers: [3, 4],
  max_number: 20,
  max_target: 100,
  reward: 'grpo_zero',
  prompt: 'compact',
  train_size: 300,
  eval_size: 40,
  path: null,
  reward_module: null,
  max_steps: 3,
  format: 'plain',
  split_seed: 1,
};

test('generated instances are solvable: the stored solution re-parses to the target with the numbers', () => {
  const task = makeTask(base, 11);
  for (const ex of [...task.train, ...task.eval]) {
    const nums = ex.numbers!;
    assert.ok(nums.length >= 3 && nums.length <= 4);
    assert.ok(nums.every((n) => Number.isInteger(n) && n >= 1 && n <= 20));
    assert.ok(Number.isInteger(ex.target) && ex.target! >= 1 && ex.target! <= 100);
    const r = evaluateExpression(ex.answer!);
    assert.ok(r.ok);
    assert.deepEqual(evalExact(r.ast), { num: BigInt(ex.target!), den: 1n });
    // The reward with the solution as the answer is the full 1.1.
    close(task.reward(`x</think>\n<answer>${ex.answer}</answer>`, ex).total, 1.1);
    assert.equal(ex.prompt, `${nums.join(' ')} -> ${ex.target}\n<think>`);
  }
});

test('splits are disjoint, sized, seed-reproducible, and eval does not move with train_size', () => {
  const a = makeTask(base, 5);
  assert.equal(a.train.length, 300);
  assert.equal(a.eval.length, 40);
  const key = (e: { numbers?: number[]; target?: number }) => countdownKey(e.numbers!, e.target!);
  const trainKeys = new Set(a.train.map(key));
  assert.equal(trainKeys.size, 300, 'train has no duplicates');
  assert.ok(
    a.eval.every((e) => !trainKeys.has(key(e))),
    'no eval instance is in train',
  );
  assert.equal(new Set([...a.train, ...a.eval].map((e) => e.id)).size, 340, 'ids are unique');
  assert.deepEqual(makeTask(base, 5).train, a.train);
  assert.notDeepEqual(makeTask(base, 6).train.map(key), a.train.map(key));
  assert.deepEqual(makeTask({ ...base, train_size: 120 }, 5).eval.map(key), a.eval.map(key));
});

test('a space too small for train_size + eval_size is a UserError; an exact fit works', () => {
  // numbers [2,2] from 1..2, targets ≤ 4: {1,1} reaches 1,2; {1,2} reaches 1,2,3; {2,2} reaches 1,4
  // (2−2 = 0 is out of range) → 7 distinct instances.
  const tiny: TaskOptions = { ...base, numbers: [2, 2], max_number: 2, max_target: 4, train_size: 5, eval_size: 2 };
  const t = makeTask(tiny, 1);
  const all = [...t.train, ...t.eval].map((e) => countdownKey(e.numbers!, e.target!)).sort();
  assert.deepEqual(all, ['1,1->1', '1,1->2', '1,2->1', '1,2->2', '1,2->3', '2,2->1', '2,2->4']);
  assert.throws(
    () => makeTask({ ...tiny, train_size: 6 }, 1),
    (e) => isUserError(e) && /only draw 7 distinct/.test(e.message),
  );
  assert.throws(
    () => makeTask({ ...base, numbers: [1, 3] }, 1),
    (e) => isUserError(e) && /task\.numbers/.test(e.message),
  );
});

test('prompts: compact, and the verbatim TinyZero template', () => {
  assert.equal(countdownPrompt([3, 5, 2], 16, 'compact'), '3 5 2 -> 16\n<think>');
  // TinyZero examples/data_preprocess/countdown.py make_prefix, template_type 'base' ({numbers} is a Python list).
  assert.equal(
    countdownPrompt([3, 5, 2], 16, 'tinyzero'),
    'A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The assistant ' +
      'first thinks about the reasoning process in the mind and then provides the user with the answer.\nUser: Using ' +
      'the numbers [3, 5, 2], create an equation that equals 16. You can use basic arithmetic operations (+, -, *, /) ' +
      'and each number can only be used once. Show your work in <think> </think> tags. And return the final answer in ' +
      '<answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>.\nAssistant: Let me solve this step by ' +
      'step.\n<think>',
  );
});

test('demonstrations: steps of the solution, sometimes after an abandoned attempt', () => {
  // rng 0.99 ≥ 0.25: no abandoned attempt, just the post-order steps 5+3 = 8, 8·2 = 16.
  assert.equal(
    countdownDemonstration(N, T, '(5+3)*2', () => 0.99),
    '5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>',
  );
  // rng ≡ 0: abandon (0 < 0.25). Fisher–Yates with j = 0 turns [3,5,2] into [2,5,3] then [5,2,3]; each step picks
  // the first option (+): 5+2 = 7, 7+3 = 10 ≠ 16, then the solution. 6+7+6+6 step characters + 9 for
  // "</think>\n" + 24 for the answer block = 58, within the 64 budget.
  const d = countdownDemonstration(N, T, '(5+3)*2', () => 0);
  assert.equal(d, '5+2=7\n7+3=10\n5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>');
  assert.equal(d.length, 58);
});

test('task demonstrations score 1.1, are short, and stay inside the alphabet', () => {
  for (const prompt of ['compact', 'tinyzero'] as const) {
    const task = makeTask({ ...base, numbers: [3, 3], prompt, train_size: 200, eval_size: 10 }, 3);
    const alphabet = new Set(task.alphabet());
    const rng = makeRng(9);
    let longest = 0;
    for (const ex of task.train) {
      const demo = task.demonstration(ex, rng);
      longest = Math.max(longest, demo.length);
      const r = task.reward(demo, ex);
      close(r.total, 1.1);
      assert.ok(task.isSuccess(r));
      for (const ch of ex.prompt + demo) assert.ok(alphabet.has(ch), `'${ch}' missing from the alphabet`);
    }
    assert.ok(longest <= 64, `longest 3-number demo ${longest} > 64`);
  }
});
