// The filter language of Browse Rollouts and `credit-lens rollouts --where`: comparisons of an episode's
// fields joined by and / or / not, with parentheses, as a pandas `query` or a SQL WHERE reads.
//   reward < 0.5 and status = wrong
//   step in 10:50 and (truncated or zero_var)
//   not success and mismatch_kl_max > 0.01
// Numbers compare with = != < <= > >=; `in a:b` is the inclusive range a ≤ x ≤ b; strings (status) with = and !=, quoted
// or bare; a boolean field alone is true when set. Errors name the character and the part that is wrong.
import { UserError } from '../core/errors';

export type FieldKind = { kind: 'number' } | { kind: 'bool' } | { kind: 'string'; values: readonly string[] };

export type Expr =
  | { op: 'and' | 'or'; left: Expr; right: Expr }
  | { op: 'not'; arg: Expr }
  | { op: 'cmp'; field: string; cmp: '=' | '!=' | '<' | '<=' | '>' | '>='; value: number | string }
  | { op: 'in'; field: string; lo: number; hi: number }
  | { op: 'flag'; field: string };

interface Tok {
  t: 'word' | 'num' | 'str' | 'op' | 'lp' | 'rp' | 'colon' | 'end';
  v: string;
  at: number;
}

function lex(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const at = i;
    if (c === '(' || c === ')') {
      out.push({ t: c === '(' ? 'lp' : 'rp', v: c, at });
      i++;
    } else if (c === ':') {
      out.push({ t: 'colon', v: c, at });
      i++;
    } else if (/[<>=!]/.test(c)) {
      const two = src.slice(i, i + 2);
      const op = ['<=', '>=', '!=', '=='].includes(two) ? two : c;
      if (op === '!') throw bad(src, at, `"!" alone is not an operator (use != or not)`);
      out.push({ t: 'op', v: op === '==' ? '=' : op, at });
      i += op.length;
    } else if (c === '"' || c === "'") {
      const end = src.indexOf(c, i + 1);
      if (end < 0) throw bad(src, at, 'the quoted string is never closed');
      out.push({ t: 'str', v: src.slice(i + 1, end), at });
      i = end + 1;
    } else if (/[-+0-9.]/.test(c)) {
      const m = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?/i.exec(src.slice(i));
      if (!m) throw bad(src, at, `"${c}" does not start a number`);
      out.push({ t: 'num', v: m[0], at });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(src.slice(i))!;
      out.push({ t: 'word', v: m[0], at });
      i += m[0].length;
    } else throw bad(src, at, `unexpected "${c}"`);
  }
  out.push({ t: 'end', v: '', at: src.length });
  return out;
}

function bad(src: string, at: number, what: string): UserError {
  const near = src.slice(at, at + 20);
  return new UserError(`--where: at character ${at + 1}${near ? ` ("${near}")` : ' (the end)'}: ${what}`);
}

/** The most a filter may nest (parentheses and `not`) and the most comparisons it may hold: the parser and the
 *  compiled predicate recurse once a level, and a filter of thousands of terms is a mistake, not a query. */
export const WHERE_MAX_DEPTH = 64;
export const WHERE_MAX_TERMS = 1000;

type CmpOp = '=' | '!=' | '<' | '<=' | '>' | '>=';

function numberOf(src: string, t: Tok, what: string): number {
  if (t.t !== 'num') throw bad(src, t.at, `expected a number ${what}`);
  return Number(t.v);
}

/** `field op value`, the value read as the field's kind says: a number, true or false, or one of the field's values. */
function comparison(src: string, field: string, kind: FieldKind, op: CmpOp, v: Tok): Expr {
  if (kind.kind === 'number') {
    if (v.t !== 'num') throw bad(src, v.at, `${field} is a number: expected a number after ${op}`);
    return { op: 'cmp', field, cmp: op, value: Number(v.v) };
  }
  if (kind.kind === 'bool') {
    if (!(v.t === 'word' && /^(true|false)$/i.test(v.v)) || (op !== '=' && op !== '!='))
      throw bad(src, v.at, `${field} is true or false: write ${field}, not ${field}, or ${field} = true`);
    const want = v.v.toLowerCase() === 'true' ? op === '=' : op === '!=';
    return want ? { op: 'flag', field } : { op: 'not', arg: { op: 'flag', field } };
  }
  if (op !== '=' && op !== '!=') throw bad(src, v.at, `${field} is text: compare it with = or !=`);
  if (v.t !== 'word' && v.t !== 'str') throw bad(src, v.at, `expected one of ${kind.values.join(', ')} after ${field} ${op}`);
  if (!kind.values.includes(v.v)) throw bad(src, v.at, `${field} is one of ${kind.values.join(', ')}, not "${v.v}"`);
  return { op: 'cmp', field, cmp: op, value: v.v };
}

/** Parse `src` against the known fields; a UserError names the part that is wrong and what is allowed. */
export function parseWhere(src: string, fields: Readonly<Record<string, FieldKind>>): Expr {
  const toks = lex(src);
  let p = 0;
  let depth = 0;
  let terms = 0;
  const deeper = (at: number) => {
    if (++depth > WHERE_MAX_DEPTH) throw bad(src, at, `the filter nests more than ${WHERE_MAX_DEPTH} levels of parentheses and "not"`);
  };
  const peek = () => toks[p];
  const next = () => toks[p++];
  const isWord = (w: string) => peek().t === 'word' && peek().v.toLowerCase() === w;
  const names = () => Object.keys(fields).sort().join(', ');

  const or = (): Expr => {
    let left = and();
    while (isWord('or')) {
      next();
      left = { op: 'or', left, right: and() };
    }
    return left;
  };
  const and = (): Expr => {
    let left = not();
    while (isWord('and')) {
      next();
      left = { op: 'and', left, right: not() };
    }
    return left;
  };
  const not = (): Expr => {
    if (isWord('not')) {
      deeper(next().at);
      const e: Expr = { op: 'not', arg: not() };
      depth--;
      return e;
    }
    return atom();
  };
  const number = (what: string): number => numberOf(src, next(), what);
  const atom = (): Expr => {
    const t = next();
    if (t.t === 'lp') {
      deeper(t.at);
      const e = or();
      const r = next();
      if (r.t !== 'rp') throw bad(src, r.at, 'expected ")"');
      depth--;
      return e;
    }
    if (t.t !== 'word') throw bad(src, t.at, `expected a field (${names()})`);
    if (++terms > WHERE_MAX_TERMS) throw bad(src, t.at, `the filter has more than ${WHERE_MAX_TERMS} comparisons`);
    const field = t.v;
    // own fields only: "constructor" or "toString" are names of every object's prototype, not fields
    const kind = Object.hasOwn(fields, field) ? fields[field] : undefined;
    if (!kind) throw bad(src, t.at, `unknown field "${field}"; the fields are ${names()}`);
    if (isWord('in')) {
      next();
      if (kind.kind !== 'number') throw bad(src, t.at, `"in a:b" needs a number field; ${field} is a ${kind.kind}`);
      const lo = number(`for the start of ${field}'s range`);
      const c = next();
      if (c.t !== 'colon') throw bad(src, c.at, 'expected ":" between the range\'s ends (e.g. step in 10:50)');
      const hi = number(`for the end of ${field}'s range`);
      return { op: 'in', field, lo, hi };
    }
    if (peek().t !== 'op') {
      if (kind.kind === 'bool') return { op: 'flag', field };
      throw bad(src, peek().at, `expected a comparison after ${field} (= != < <= > >= or "in a:b")`);
    }
    const op = next().v as CmpOp;
    return comparison(src, field, kind, op, next());
  };

  if (peek().t === 'end') throw bad(src, 0, 'the expression is empty');
  const e = or();
  if (peek().t !== 'end') throw bad(src, peek().at, 'expected "and", "or" or the end');
  return e;
}

/** A row predicate: `get(field, row)` reads a field (NaN for a number the row lacks, which no comparison matches). */
export function compileWhere(e: Expr, get: (field: string, row: number) => number | string | boolean): (row: number) => boolean {
  switch (e.op) {
    case 'and': {
      const l = compileWhere(e.left, get);
      const r = compileWhere(e.right, get);
      return (i) => l(i) && r(i);
    }
    case 'or': {
      const l = compileWhere(e.left, get);
      const r = compileWhere(e.right, get);
      return (i) => l(i) || r(i);
    }
    case 'not': {
      const a = compileWhere(e.arg, get);
      return (i) => !a(i);
    }
    case 'flag':
      return (i) => get(e.field, i) === true;
    case 'in':
      return (i) => {
        const v = get(e.field, i) as number;
        return v >= e.lo && v <= e.hi;
      };
    case 'cmp': {
      const { field, value } = e;
      switch (e.cmp) {
        case '=':
          return (i) => get(field, i) === value;
        case '!=':
          return (i) => {
            const v = get(field, i);
            return v === v && v !== value; // NaN (a missing number) matches nothing, != included
          };
        case '<':
          return (i) => (get(field, i) as number) < (value as number);
        case '<=':
          return (i) => (get(field, i) as number) <= (value as number);
        case '>':
          return (i) => (get(field, i) as number) > (value as number);
        case '>=':
          return (i) => (get(field, i) as number) >= (value as number);
      }
    }
  }
}
