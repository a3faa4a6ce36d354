// The offline rule oracle on hand-made countdown and arithmetic completions (prefill "<think>" included, as the
// strategy passes them). Expected offsets are counted by hand in the comments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { answerExpression, firstWrongStep, ruleErrorSpan, stepHolds } from '../../../src/engine/oracle/rule';

const marked = (text: string, kind: 'grpo_zero' | 'tinyzero' = 'grpo_zero') => {
  const s = ruleErrorSpan(text, kind);
  return s && text.slice(s.start, s.end);
};

test('stepHolds: exact rational arithmetic, parenthesised fractions and negatives, chains', () => {
  // Steps as exprSteps writes them for countdown: 8/(1/3) = 24; (7/2)·(−3) = −21/2; 3 − 5 = −2.
  assert.equal(stepHolds('8/(1/3)=24'), true);
  assert.equal(stepHolds('(7/2)*(-3)=-21/2'), true);
  assert.equal(stepHolds('3-5=-2'), true);
  assert.equal(stepHolds('(-2)+5=3'), true);
  // 1/3 + 1/3 + 1/3 is exactly 1 (floats would also say so, but 0.1+0.2 = 0.3 only holds exactly):
  assert.equal(stepHolds('(1/3)+(1/3)+(1/3)=1'), true);
  assert.equal(stepHolds('0.1+0.2=0.3'), true);
  assert.equal(stepHolds('7/2=3.5'), true);
  assert.equal(stepHolds('3+4=7=7'), true);
  assert.equal(stepHolds('5 × 3 = 15'), true);
  // Wrong value, wrong sign, wrong chain, truncated, garbled, division by zero.
  assert.equal(stepHolds('8*2=17'), false);
  assert.equal(stepHolds('3-5=2'), false);
  assert.equal(stepHolds('3+4=7=8'), false);
  assert.equal(stepHolds('5+3='), false);
  assert.equal(stepHolds('5+=8'), false);
  assert.equal(stepHolds('4/0=4'), false);
  // Integer division is not what / means here: 7/2 = 3 is wrong.
  assert.equal(stepHolds('7/2=3'), false);
});

test('countdown: the first wrong step of the think section', () => {
  // 3 5 2 -> 16. "<think>" 0..7, "5+3=8\n" 7..13, "8*2=17" 13..19.
  const t = '<think>5+3=8\n8*2=17\n17-1=16</think>\n<answer>(5+3)*2</answer>';
  assert.deepEqual(ruleErrorSpan(t, 'grpo_zero'), { start: 13, end: 19 });
  assert.equal(marked(t), '8*2=17');
  // Fractions and negatives in steps; the wrong one is the third: 12 + (−5/2) = 19/2, not 10.
  assert.equal(marked('<think>5/2=5/2\n3*4=12\n12+(-5/2)=10</think>\n<answer>3*4-5/2</answer>'), '12+(-5/2)=10');
  // A step inside prose, with a full stop after it.
  assert.equal(marked('<think>first 6 + 4 = 10, then 10 * 2 = 21.</think>\n<answer>(6+4)*2</answer>'), '10 * 2 = 21');
});

test('all steps right: the answer expression (first block for grpo_zero, last for tinyzero)', () => {
  // Right steps, but the answer repeats a number (numbers 3 5 2).
  const t = '<think>5+3=8\n8*2=16</think>\n<answer> (5+3)*2*2 </answer>';
  // "<answer>" starts at 28 (7 + 6 + 6 + 9 for "</think>\n"), its content " (5+3)*2*2 " at 36, trimmed at 37..46.
  assert.deepEqual(ruleErrorSpan(t, 'grpo_zero'), { start: 37, end: 46 });
  const two = '<think>1+1=2</think>\n<answer>1+1</answer>\n<answer>2*1</answer>';
  assert.equal(marked(two, 'grpo_zero'), '1+1');
  assert.equal(marked(two, 'tinyzero'), '2*1');
  // An empty answer block is blamed whole.
  assert.equal(marked('<think>1+1=2</think>\n<answer> </answer>'), '<answer> </answer>');
});

test('no wrong step and no complete answer block: no span (the episode keeps A_i)', () => {
  assert.equal(ruleErrorSpan('<think>5+3=8\n8*2=16</think>\n<answer>(5+3)*2', 'grpo_zero'), null);
  assert.equal(ruleErrorSpan('<think>hmm', 'grpo_zero'), null);
});

test('steps outside the think section are not checked; an unclosed think stops at <answer>', () => {
  // "9=8" sits in the answer, not in think: the answer expression is blamed, not a step.
  assert.equal(marked('<think>2+2=4</think>\n<answer>9=8</answer>'), '9=8');
  assert.equal(firstWrongStep('<think>2+2=4\n<answer>2+3=6</answer>'), null);
  // A step cut by the think's end tag is checked as written.
  assert.equal(marked('<think>2+2=4\n4*4=1</think>\n<answer>2*2*4</answer>'), '4*4=1');
});

test('arithmetic: the first wrong step, else the integer answer', () => {
  // (3+4)*2-5 = 9
  assert.equal(marked('<think>3+4=7\n7*2=15\n15-5=10</think>\n<answer>10</answer>'), '7*2=15');
  // "<think>" 7 + "3+4=7\n" 6 + "7*2=14\n" 7 + "14-5=9" 6 + "</think>\n" 9 + "<answer>" 8: the "8" is at 43..44.
  assert.deepEqual(answerExpression('<think>3+4=7\n7*2=14\n14-5=9</think>\n<answer>8</answer>', 'grpo_zero'), { start: 43, end: 44 });
});
