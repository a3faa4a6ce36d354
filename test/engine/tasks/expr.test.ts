import { test } from 'node:test';
import assert from 'node:assert/strict';
import { evalExact, evaluateExpression, exprSteps, formatExpr, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_LENGTH } from '../../../src/engine/tasks/expr';

function ok(src: string): { value: number; numbers: number[] } {
  const r = evaluateExpression(src);
  assert.ok(r.ok, `${src}: ${r.ok ? '' : r.error}`);
  return { value: r.value, numbers: r.numbers };
}

function bad(src: string, why: RegExp): void {
  const r = evaluateExpression(src);
  assert.equal(r.ok, false, `${JSON.stringify(src)} should not parse`);
  if (!r.ok) assert.match(r.error, why);
}

test('precedence, left associativity, parentheses and the literals used', () => {
  // 2 + 3·4 = 14 (× before +); (2+3)·4 = 20.
  assert.deepEqual(ok('2+3*4'), { value: 14, numbers: [2, 3, 4] });
  assert.deepEqual(ok('(2+3)*4'), { value: 20, numbers: [2, 3, 4] });
  // Left to right: (8−3)−2 = 3, not 8−(3−2) = 7; (8/4)/2 = 1, not 8/(4/2) = 4.
  assert.equal(ok('8-3-2').value, 3);
  assert.equal(ok('8/4/2').value, 1);
  // Whitespace anywhere between tokens, including newlines.
  assert.deepEqual(ok(' ( 5 + 3 )\n* 2 '), { value: 16, numbers: [5, 3, 2] });
  // True division as Python's eval: 7/2 = 3.5.
  assert.equal(ok('7/2').value, 3.5);
  assert.equal(ok('0').value, 0);
});

test('unicode × ÷ − are the same operators as * / -', () => {
  // (5−3)×2 = 4; 12÷4 = 3.
  assert.equal(ok('(5\u22123)\u00d72').value, 4);
  assert.equal(ok('12\u00f74').value, 3);
});

test('everything outside the grammar is refused, never evaluated', () => {
  bad('', /empty/);
  bad('   ', /empty/);
  bad('5**2', /unexpected '\*'/); // no power operator
  bad('-3+5', /unexpected '-'/); // no unary minus
  bad('3.5*2', /unexpected '\.'/); // no decimals
  bad('2(3)', /unexpected '\('/); // no implicit multiplication
  bad('(1+2', /expected '\)'/);
  bad('1+2)', /unexpected '\)'/);
  bad('1+', /unexpected end/);
  bad('07+1', /leading zero/); // Python 3 rejects 07 too
  bad('1234567890123456', /too long/);
  bad('process.exit(1)', /unexpected 'p'/);
  bad("require('fs')", /unexpected 'r'/);
  bad('1;2', /unexpected ';'/);
  bad('\u0661+\u0662', /unexpected/); // Arabic-Indic digits are not ASCII integers
  bad('\uff15+3', /unexpected/); // full-width 5
  bad('1\u00a0+2', /unexpected/); // no-break space is not whitespace here
});

test('division by an exact zero is an error', () => {
  bad('1/0', /division by zero/);
  bad('2/(4-4)', /division by zero/);
  bad('(3/0)*0', /division by zero/);
});

test('length and nesting caps', () => {
  // 1+1+...: 100 ones and 99 pluses = 199 chars is accepted; one more term exceeds the cap.
  assert.equal(ok(Array(100).fill('1').join('+')).value, 100);
  bad(Array(101).fill('1').join('+'), new RegExp(`longer than ${MAX_EXPRESSION_LENGTH}`));
  const nest = (d: number) => '('.repeat(d) + '1' + ')'.repeat(d);
  assert.equal(ok(nest(MAX_EXPRESSION_DEPTH)).value, 1);
  bad(nest(MAX_EXPRESSION_DEPTH + 1), /too deep/);
});

test('formatExpr keeps meaning with the fewest parentheses', () => {
  const cases: [string, string][] = [
    ['(1+2)+3', '1+2+3'],
    ['1+(2+3)', '1+2+3'], // + is associative, value unchanged
    ['1-(2-3)', '1-(2-3)'], // 1−(2−3) = 2 ≠ 1−2−3 = −4
    ['1-(2+3)', '1-(2+3)'],
    ['(1*2)/3', '1*2/3'],
    ['1/(2*3)', '1/(2*3)'], // 1/6 ≠ 1/2·3 = 1.5
    ['(1+2)*3', '(1+2)*3'],
    ['((7))', '7'],
  ];
  for (const [src, want] of cases) {
    const r = evaluateExpression(src);
    assert.ok(r.ok);
    const s = formatExpr(r.ast);
    assert.equal(s, want);
    const back = evaluateExpression(s);
    assert.ok(back.ok);
    assert.deepEqual(evalExact(back.ast), evalExact(r.ast));
  }
});

test('exact evaluation and steps', () => {
  // 8/(3−8/3): 8/3 is not an integer, 3 − 8/3 = 1/3, 8/(1/3) = 24 exactly; float gives 24.000000000000004.
  const r = evaluateExpression('8/(3-8/3)');
  assert.ok(r.ok);
  assert.deepEqual(evalExact(r.ast), { num: 24n, den: 1n });
  assert.ok(Math.abs(r.value - 24) < 1e-12 && r.value !== 24);
  // Fraction operands are parenthesised: "8/1/3" would read as (8/1)/3.
  assert.deepEqual(exprSteps(r.ast), ['8/3=8/3', '3-(8/3)=1/3', '8/(1/3)=24']);
  const s = evaluateExpression('(3+4)*2-5');
  assert.ok(s.ok);
  assert.deepEqual(exprSteps(s.ast), ['3+4=7', '7*2=14', '14-5=9']);
  // Steps go left subtree, right subtree, node: 2*3 before 4*5 before the sum.
  const t = evaluateExpression('2*3+4*5');
  assert.ok(t.ok);
  assert.deepEqual(exprSteps(t.ast), ['2*3=6', '4*5=20', '6+20=26']);
});
