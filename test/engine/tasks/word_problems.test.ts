// Word problems: seeded, disjoint splits, demonstrations that compute the answer in words, and a final-number
// reward whose edge cases are worked by hand. GSM8K's own format, read by the jsonl task, scored by the same rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTask, type TaskOptions } from '../../../src/engine/tasks';
import { drawWordProblem, finalNumber, finalNumberReward } from '../../../src/engine/tasks/word_problems';
import { makeRng } from '../../../src/engine/core/rng';
import { isUserError } from '../../../src/engine/core/errors';
import { evaluateExpression } from '../../../src/engine/tasks/expr';

const base: TaskOptions = {
  name: 'word_problems',
  numbers: [3, 3],
  max_number: 12,
  max_target: 100,
  reward: 'grpo_zero',
  prompt: 'compact',
  train_size: 300,
  eval_size: 60,
  path: null,
  reward_module: null,
  max_steps: 3,
  format: 'plain',
  split_seed: 1,
};

test('final number: commas, a trailing .0, units and currency are tolerated; the last number counts', () => {
  assert.equal(finalNumber('8'), 8);
  assert.equal(finalNumber(' 1,200 apples'), 1200);
  assert.equal(finalNumber('$8.0'), 8);
  assert.equal(finalNumber('3 + 5 = 8'), 8);
  assert.equal(finalNumber('-4'), -4);
  assert.equal(finalNumber('no number'), null);
  assert.equal(finalNumber(null), null);
  // grpo_zero: 0.1·format + answer (format needs <think>…</think>\n<answer>…</answer>)
  assert.equal(finalNumberReward('<think>x</think>\n<answer>8 apples</answer>', 8, 'grpo_zero').total, 1.1);
  assert.equal(finalNumberReward('<think>x</think>\n<answer>8.0</answer>', 8, 'grpo_zero').answer, 1);
  assert.equal(finalNumberReward('<think>x</think>\n<answer>9</answer>', 8, 'grpo_zero').total, 0.1);
  assert.equal(finalNumberReward('<think>x</think>\n<answer>8.5</answer>', 8, 'grpo_zero').answer, 0);
  assert.equal(finalNumberReward('<think>x</think>', 8, 'grpo_zero').answer, 0);
});

test('generator: seeded, 1..max_steps operations, every worked step is true arithmetic and ends at the answer', () => {
  const o = { ...base };
  const a = Array.from({ length: 50 }, (_, i) => drawWordProblem(makeRng(i), o));
  const b = Array.from({ length: 50 }, (_, i) => drawWordProblem(makeRng(i), o));
  assert.deepEqual(a, b, 'the same seed draws the same problem');
  let distractors = 0;
  for (const p of a) {
    if (!p) continue;
    assert.ok(p.steps.length >= 1 && p.steps.length <= 3);
    assert.match(p.text, /How many \w+ does \w+ have now\?$/);
    if (/minutes|hours|seats|desks/.test(p.text)) distractors++;
    // Each worked sentence states "x op y = z" with z right; the last z is the answer.
    let last = NaN;
    for (const s of p.steps) {
      const m = /(\d+) ([-+*/]) (\d+) = (\d+)\.$/.exec(s.worked);
      assert.ok(m, s.worked);
      const r = evaluateExpression(`${m[1]}${m[2]}${m[3]}`);
      assert.ok(r.ok && r.value === Number(m[4]), s.worked);
      assert.ok(Number(m[4]) >= 0 && Number(m[4]) <= 100);
      last = Number(m[4]);
    }
    assert.equal(last, p.answer);
    assert.match(p.steps[0].worked, /^\w+ has \d+ \w+ and /, 'the first step names the person and the start');
  }
  assert.ok(distractors > 5 && distractors < 45, `${distractors} of 50 with a distractor`);
});

test('task: disjoint splits, eval independent of train_size, demonstrations rewarded 1.1, max_steps checked', () => {
  const t = makeTask(base, 7);
  assert.equal(t.train.length, 300);
  assert.equal(t.eval.length, 60);
  const trainPrompts = new Set(t.train.map((e) => e.prompt));
  assert.ok(t.eval.every((e) => !trainPrompts.has(e.prompt)));
  assert.deepEqual(
    makeTask({ ...base, train_size: 100 }, 7).eval.map((e) => e.prompt),
    t.eval.map((e) => e.prompt),
  );
  assert.notDeepEqual(makeTask(base, 8).eval, t.eval);
  for (const ex of [...t.train.slice(0, 30), ...t.eval.slice(0, 10)]) {
    const demo = t.demonstration(ex, makeRng(1));
    assert.equal(t.reward(demo, ex).total, 1.1, demo);
    // Every character of prompt and demonstration is in the char tokenizer's alphabet.
    for (const c of ex.prompt + demo) assert.ok(t.alphabet().includes(c), JSON.stringify(c));
  }
  assert.match(t.demonstration(t.train[0], makeRng(1)), /^\w+ has \d+ \w+ and .* = \d+\.<\/think>\n<answer>\d+<\/answer>$/);
  assert.throws(
    () => makeTask({ ...base, max_steps: 5 }, 1),
    (e: unknown) => isUserError(e) && /task\.max_steps/.test((e as Error).message),
  );
});

test('jsonl with task.format gsm8k: question → prompt, worked answer → demonstration, "#### N" scored by the final number', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-gsm8k-'));
  try {
    // Two lines in GSM8K's own format (train.jsonl of openai/gsm8k): calculator annotations <<…>> and "#### N".
    const rows = [
      {
        question:
          'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?',
        answer: 'Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72',
      },
      {
        question: 'A shop sold 1,000 pens and then 250 more. How many pens did it sell?',
        answer: 'It sold 1,000 + 250 = <<1000+250=1250>>1,250 pens.\n#### 1,250',
      },
      { question: 'Q3', answer: '#### 3' },
    ];
    const path = join(dir, 'gsm8k.jsonl');
    writeFileSync(path, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const t = makeTask({ ...base, name: 'jsonl', path, format: 'gsm8k', train_size: 2, eval_size: 1 }, 1);
    const all = [...t.train, ...t.eval];
    const nat = all.find((e) => e.prompt.startsWith('Natalia'))!;
    assert.equal(nat.answer, '72');
    assert.equal(nat.prompt.endsWith('<think>'), true);
    const demo = t.demonstration(nat, makeRng(1));
    assert.equal(demo, 'Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.</think>\n<answer>72</answer>');
    assert.equal(t.reward(demo, nat).total, 1.1);
    const pens = all.find((e) => e.prompt.startsWith('A shop'))!;
    assert.equal(pens.answer, '1250');
    assert.equal(t.reward('x</think>\n<answer>1,250 pens</answer>', pens).answer, 1);
    writeFileSync(path, JSON.stringify({ question: 'Q', answer: 'no final line' }) + '\n');
    assert.throws(
      () => makeTask({ ...base, name: 'jsonl', path, format: 'gsm8k', train_size: 1, eval_size: 0 }, 1),
      /:1: "answer" does not end in "#### <number>"/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
