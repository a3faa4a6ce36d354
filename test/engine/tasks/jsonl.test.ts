import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isUserError } from '../../../src/engine/core/errors';
import { makeTask, type TaskOptions } from '../../../src/engine/tasks';

const dir = mkdtempSync(join(tmpdir(), 'credit-lens-jsonl-'));
function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const lines = [
  { prompt: 'Q1 <think>', answer: 'a' },
  { prompt: 'Q2 <think>', answer: 'b' },
  { prompt: 'Q3 <think>', answer: 42 },
  { prompt: 'Q4 <think>', answer: 'd', extra: 'kept in record' },
  { prompt: 'Q5 <think>', answer: 'e' },
  { prompt: 'Q1 <think>', answer: 'duplicate prompt' },
];
// Line 4 is blank and skipped, so the six records sit on lines 1, 2, 3, 5, 6, 7.
const goodText =
  lines
    .slice(0, 3)
    .map((l) => JSON.stringify(l))
    .join('\n') +
  '\n\n' +
  lines
    .slice(3)
    .map((l) => JSON.stringify(l))
    .join('\n') +
  '\n';
const good = file('good.jsonl', goodText);

const opts = (over: Partial<TaskOptions>): TaskOptions => ({
  name: 'jsonl',
  numbers: [3, 3],
  max_number: 20,
  max_target: 100,
  reward: 'grpo_zero',
  prompt: 'compact',
  train_size: 3,
  eval_size: 2,
  path: good,
  reward_module: null,
  max_steps: 3,
  format: 'plain',
  split_seed: 1,
  ...over,
});

const userErr = (re: RegExp) => (e: unknown) => isUserError(e) && re.test((e as Error).message);

test('reads records, dedupes prompts, splits disjointly and reproducibly', () => {
  const t = makeTask(opts({}), 1);
  assert.equal(t.prefill, '<think>'); // every prompt ends with <think>
  assert.equal(t.train.length, 3);
  assert.equal(t.eval.length, 2);
  const all = [...t.train, ...t.eval];
  // 5 distinct prompts (the duplicate Q1 on line 7 is dropped, the first one kept), all used.
  assert.deepEqual(all.map((e) => e.prompt).sort(), ['Q1 <think>', 'Q2 <think>', 'Q3 <think>', 'Q4 <think>', 'Q5 <think>']);
  assert.equal(all.find((e) => e.prompt === 'Q1 <think>')!.answer, 'a');
  // ids are line numbers; a number answer becomes text; the raw record is kept.
  const q3 = all.find((e) => e.prompt === 'Q3 <think>')!;
  assert.equal(q3.id, 3);
  assert.equal(q3.answer, '42');
  assert.equal(all.find((e) => e.prompt === 'Q4 <think>')!.id, 5);
  assert.equal(all.find((e) => e.prompt === 'Q4 <think>')!.record!.extra, 'kept in record');
  const again = makeTask(opts({}), 1);
  assert.deepEqual([again.train, again.eval], [t.train, t.eval]);
  const train = new Set(t.train.map((e) => e.prompt));
  assert.ok(t.eval.every((e) => !train.has(e.prompt)));
  assert.throws(() => makeTask(opts({ train_size: 4 }), 1), userErr(/5 distinct prompts, fewer than train_size \+ eval_size \+ val_size = 6/));
});

test('default reward: GRPO-Zero format plus exact match of the answer block', () => {
  const t = makeTask(opts({}), 1);
  const q3 = [...t.train, ...t.eval].find((e) => e.id === 3)!;
  // Completion after the prefill; full format 1 and " 42 " trims to "42" → 0.1 + 1 = 1.1.
  const r = t.reward('x</think>\n<answer> 42 </answer>', q3);
  assert.ok(Math.abs(r.total - 1.1) < 1e-12);
  assert.ok(t.isSuccess(r));
  // "42.0" is not the same text → only the format: 0.1.
  assert.ok(Math.abs(t.reward('x</think>\n<answer>42.0</answer>', q3).total - 0.1) < 1e-12);
  assert.equal(
    t.demonstration(q3, () => 0),
    '</think>\n<answer>42</answer>',
  );
  assert.ok(
    Math.abs(
      t.reward(
        t.demonstration(q3, () => 0),
        q3,
      ).total - 1.1,
    ) < 1e-12,
  );
  for (const ch of q3.prompt + t.demonstration(q3, () => 0)) assert.ok(t.alphabet().includes(ch));
});

test('prefill is empty unless every prompt ends with <think>', () => {
  const p = file('plain.jsonl', '{"prompt":"2+2=","answer":"4"}\n{"prompt":"3+3=","answer":"6"}\n');
  const t = makeTask(opts({ path: p, train_size: 1, eval_size: 1 }), 1);
  assert.equal(t.prefill, '');
  const ex = t.train[0];
  // Nothing is prepended, so the completion must open the think block itself for the full format.
  assert.equal(t.reward(`<think></think>\n<answer>${ex.answer}</answer>`, ex).format, 1);
  assert.equal(
    t.demonstration(ex, () => 0),
    `<think></think>\n<answer>${ex.answer}</answer>`,
  );
});

test('bad files are UserErrors naming the file and line', () => {
  const badJson = file('bad.jsonl', '{"prompt":"a","answer":"1"}\n{"prompt":"b","answer":"2"}\n{"prompt": "c", answer: 3}\n');
  assert.throws(() => makeTask(opts({ path: badJson }), 1), userErr(new RegExp(`${badJson.replace(/[.\\]/g, '\\$&')}:3: invalid JSON`)));
  const noAnswer = file('noanswer.jsonl', '{"prompt":"a","answer":"1"}\n{"prompt":"b"}\n');
  assert.throws(() => makeTask(opts({ path: noAnswer }), 1), userErr(/noanswer\.jsonl:2: missing field "answer"/));
  const noPrompt = file('noprompt.jsonl', '{"question":"a","answer":"1"}\n');
  assert.throws(() => makeTask(opts({ path: noPrompt }), 1), userErr(/noprompt\.jsonl:1: missing string field "prompt"/));
  const arr = file('array.jsonl', '["a","b"]\n');
  assert.throws(() => makeTask(opts({ path: arr }), 1), userErr(/array\.jsonl:1: expected a JSON object/));
  assert.throws(() => makeTask(opts({ path: join(dir, 'absent.jsonl') }), 1), userErr(/task\.path: cannot read .*absent\.jsonl/));
  assert.throws(() => makeTask(opts({ path: null }), 1), userErr(/task\.path: required/));
});

test('user reward modules: numbers, {total, parts}, ESM, and failures as UserErrors', () => {
  const cjs = file('reward.cjs', 'exports.reward = (c, ex) => (c.includes(ex.answer) ? 1 : 0.25);\n');
  const t = makeTask(opts({ reward_module: cjs }), 1);
  const ex = t.train[0];
  // The module sees prefill + completion: "<think>" + "… <answer>" + answer → contains the answer → 1.
  assert.deepEqual(t.reward(`</think>\n<answer>${ex.answer}</answer>`, ex), { total: 1, format: 0, answer: 1, parts: undefined });
  // 0.25 < 1 → answer 0, not a success.
  const miss = t.reward('zzz', ex);
  assert.deepEqual([miss.total, miss.answer, t.isSuccess(miss)], [0.25, 0, false]);

  const parts = file('parts.cjs', 'module.exports = { reward: () => ({ total: 0.7, parts: { format: 1, answer: 0, style: 0.5 } }) };\n');
  assert.deepEqual(makeTask(opts({ reward_module: parts }), 1).reward('x', ex), {
    total: 0.7,
    format: 1,
    answer: 0,
    parts: { format: 1, answer: 0, style: 0.5 },
  });

  const esm = file('reward.mjs', 'export function reward(c, ex) { return ex.id; }\n');
  assert.equal(makeTask(opts({ reward_module: esm }), 1).reward('x', ex).total, ex.id);

  const throwing = file('throws.cjs', 'exports.reward = (c, ex) => { throw new Error("boom"); };\n');
  const tt = makeTask(opts({ reward_module: throwing }), 1);
  assert.throws(() => tt.reward('x', ex), userErr(new RegExp(`throws\\.cjs threw on example ${ex.id}: boom`)));

  const nan = file('nan.cjs', 'exports.reward = () => NaN;\n');
  assert.throws(
    () => makeTask(opts({ reward_module: nan }), 1).reward('x', ex),
    userErr(new RegExp(`nan\\.cjs returned a non-finite total NaN for example ${ex.id}`)),
  );
  const str = file('str.cjs', 'exports.reward = () => "1";\n');
  assert.throws(() => makeTask(opts({ reward_module: str }), 1).reward('x', ex), userErr(/str\.cjs returned a non-finite total 1/));

  const none = file('none.cjs', 'exports.score = () => 1;\n');
  assert.throws(() => makeTask(opts({ reward_module: none }), 1), userErr(/none\.cjs exports no function reward/));
  const syntax = file('syntax.cjs', 'exports.reward = (;\n');
  assert.throws(() => makeTask(opts({ reward_module: syntax }), 1), userErr(/task\.reward_module: cannot load .*syntax\.cjs/));
});
