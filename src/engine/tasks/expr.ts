// Arithmetic expressions for rewards and task generation. Rewards parse model output, which is untrusted text,
// so this is a real recursive-descent grammar and never eval/Function (design.md#semantics):
//   expr   := term (('+' | '-' | '−') term)*
//   term   := factor (('*' | '×' | '/' | '÷') factor)*
//   factor := integer | '(' expr ')'
//   integer:= ASCII digits, no leading zero (Python 3, which GRPO-Zero's eval uses, rejects "07")
// There is no unary minus and no '**'; whitespace is ASCII space, tab, CR or LF.

export type BinaryOp = '+' | '-' | '*' | '/';

export type ExprNode = { kind: 'num'; value: number } | { kind: 'bin'; op: BinaryOp; left: ExprNode; right: ExprNode };

export type ExprResult = { ok: true; value: number; numbers: number[]; ast: ExprNode } | { ok: false; error: string };

/** Longer input is refused before parsing: an answer block is a short formula, not an essay. */
export const MAX_EXPRESSION_LENGTH = 200;
/** Parenthesis nesting limit, so hostile input cannot exhaust the stack. */
export const MAX_EXPRESSION_DEPTH = 32;
/** Longer literals would lose integer precision in a double. */
const MAX_LITERAL_DIGITS = 15;

const OPS: Record<string, BinaryOp> = { '+': '+', '-': '-', '\u2212': '-', '*': '*', '\u00d7': '*', '/': '/', '\u00f7': '/' };

class ParseError extends Error {}

class Parser {
  private pos = 0;
  private depth = 0;
  readonly numbers: number[] = [];

  constructor(private readonly src: string) {}

  parse(): ExprNode {
    const node = this.expr();
    this.skipSpace();
    if (this.pos < this.src.length) this.fail(`unexpected '${this.src[this.pos]}'`);
    return node;
  }

  private fail(msg: string): never {
    throw new ParseError(`${msg} at ${this.pos}`);
  }

  private skipSpace(): void {
    while (this.pos < this.src.length && ' \t\r\n'.includes(this.src[this.pos])) this.pos++;
  }

  private peekOp(allowed: string): BinaryOp | null {
    this.skipSpace();
    const c = this.src[this.pos];
    if (c === undefined || !allowed.includes(c)) return null;
    this.pos++;
    return OPS[c];
  }

  private expr(): ExprNode {
    let left = this.term();
    for (let op = this.peekOp('+-\u2212'); op; op = this.peekOp('+-\u2212')) {
      left = { kind: 'bin', op, left, right: this.term() };
    }
    return left;
  }

  private term(): ExprNode {
    let left = this.factor();
    for (let op = this.peekOp('*\u00d7/\u00f7'); op; op = this.peekOp('*\u00d7/\u00f7')) {
      left = { kind: 'bin', op, left, right: this.factor() };
    }
    return left;
  }

  private factor(): ExprNode {
    this.skipSpace();
    const c = this.src[this.pos];
    if (c === undefined) this.fail('unexpected end');
    if (c === '(') {
      if (++this.depth > MAX_EXPRESSION_DEPTH) this.fail('parentheses nested too deep');
      this.pos++;
      const inner = this.expr();
      this.skipSpace();
      if (this.src[this.pos] !== ')') this.fail("expected ')'");
      this.pos++;
      this.depth--;
      return inner;
    }
    if (c >= '0' && c <= '9') {
      const start = this.pos;
      while (this.pos < this.src.length && this.src[this.pos] >= '0' && this.src[this.pos] <= '9') this.pos++;
      const digits = this.src.slice(start, this.pos);
      if (digits.length > 1 && digits[0] === '0') this.fail(`integer with a leading zero '${digits}'`);
      if (digits.length > MAX_LITERAL_DIGITS) this.fail('integer too long');
      const value = Number(digits);
      this.numbers.push(value);
      return { kind: 'num', value };
    }
    this.fail(`unexpected '${c}'`);
  }
}

/** Parse `src` and evaluate it in double precision, as Python's eval does for GRPO-Zero and TinyZero. */
export function evaluateExpression(src: string): ExprResult {
  if (src.length > MAX_EXPRESSION_LENGTH) return { ok: false, error: `longer than ${MAX_EXPRESSION_LENGTH} characters` };
  if (src.trim() === '') return { ok: false, error: 'empty expression' };
  const parser = new Parser(src);
  let ast: ExprNode;
  try {
    ast = parser.parse();
  } catch (e) {
    if (e instanceof ParseError) return { ok: false, error: e.message };
    throw e;
  }
  const value = evalFloat(ast);
  if (value === null) return { ok: false, error: 'division by zero' };
  return { ok: true, value, numbers: parser.numbers, ast };
}

/** Float evaluation; null on a division by an exact zero (Python raises ZeroDivisionError there). */
export function evalFloat(node: ExprNode): number | null {
  if (node.kind === 'num') return node.value;
  const a = evalFloat(node.left);
  if (a === null) return null;
  const b = evalFloat(node.right);
  if (b === null) return null;
  switch (node.op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      return b === 0 ? null : a / b;
  }
}

/** An exact rational with BigInt parts; den > 0 and gcd(|num|, den) = 1. */
export interface BigRational {
  num: bigint;
  den: bigint;
}

function bigGcd(a: bigint, b: bigint): bigint {
  if (a < 0n) a = -a;
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

function bigRat(num: bigint, den: bigint): BigRational {
  if (den < 0n) [num, den] = [-num, -den];
  const g = bigGcd(num, den) || 1n;
  return { num: num / g, den: den / g };
}

/** Exact evaluation (no rounding at all); null on division by zero. Used to verify solutions and write steps. */
export function evalExact(node: ExprNode): BigRational | null {
  if (node.kind === 'num') return { num: BigInt(node.value), den: 1n };
  const a = evalExact(node.left);
  const b = a && evalExact(node.right);
  return a && b ? applyExact(node.op, a, b) : null;
}

/** a op b exactly; null on division by zero. */
export function applyExact(op: BinaryOp, a: BigRational, b: BigRational): BigRational | null {
  switch (op) {
    case '+':
      return bigRat(a.num * b.den + b.num * a.den, a.den * b.den);
    case '-':
      return bigRat(a.num * b.den - b.num * a.den, a.den * b.den);
    case '*':
      return bigRat(a.num * b.num, a.den * b.den);
    case '/':
      return b.num === 0n ? null : bigRat(a.num * b.den, a.den * b.num);
  }
}

/** "7", "-3", "7/2": how a step's result is written in a demonstration. */
export function formatRational(r: BigRational): string {
  return r.den === 1n ? `${r.num}` : `${r.num}/${r.den}`;
}

const PREC: Record<BinaryOp, number> = { '+': 1, '-': 1, '*': 2, '/': 2 };

/** ASCII text with the fewest parentheses that keep the tree's meaning under left-associative precedence. */
export function formatExpr(node: ExprNode): string {
  if (node.kind === 'num') return String(node.value);
  const p = PREC[node.op];
  const wrap = (child: ExprNode, right: boolean): string => {
    const s = formatExpr(child);
    if (child.kind === 'num') return s;
    const cp = PREC[child.op];
    // A right operand of '-' or '/' at the same level needs parentheses: a-(b+c) ≠ a-b+c, a/(b*c) ≠ a/b*c.
    const needs = cp < p || (right && cp === p && (node.op === '-' || node.op === '/'));
    return needs ? `(${s})` : s;
  };
  return `${wrap(node.left, false)}${node.op}${wrap(node.right, true)}`;
}

// A fraction or negative operand is parenthesised so the step reads right: "8/(1/3)=24", not "8/1/3=24".
function operand(r: BigRational): string {
  return r.den === 1n && r.num >= 0n ? `${r.num}` : `(${formatRational(r)})`;
}

/**
 * One line per operation in evaluation order (left subtree, right subtree, node), e.g. "3+4=7", "7*2=14".
 * Null if some step divides by zero.
 */
export function exprSteps(node: ExprNode): string[] | null {
  const steps: string[] = [];
  const walk = (n: ExprNode): BigRational | null => {
    if (n.kind === 'num') return { num: BigInt(n.value), den: 1n };
    const a = walk(n.left);
    const b = a && walk(n.right);
    const v = a && b && applyExact(n.op, a, b);
    if (!a || !b || !v) return null;
    steps.push(`${operand(a)}${n.op}${operand(b)}=${formatRational(v)}`);
    return v;
  };
  return walk(node) ? steps : null;
}
