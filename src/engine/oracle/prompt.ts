// What the LLM oracle is asked (seed doc 003: the question, a correct completion of the same group when one exists, the
// incorrect completion, and a request for the exact erroneous substring as JSON), and how its reply is read.
import type { Example, Task } from '../core/types';

export interface OracleQuery {
  /** the problem in words (the compact training prompt "3 5 2 -> 16" means nothing to an LLM) */
  question: string;
  /** a correct completion of the same group, prefill included; null when the group has none */
  correct: string | null;
  /** the incorrect completion, prefill included: the text the span is looked up in */
  incorrect: string;
}

export interface OraclePrompt {
  system: string;
  user: string;
}

/** The problem in words for the oracle; jsonl tasks have no structure to rephrase, so their prompt is used. */
export function oracleQuestion(task: Task['name'], ex: Example): string {
  if (task === 'countdown' && ex.numbers && ex.target !== undefined) {
    return (
      `Using the numbers [${ex.numbers.join(', ')}], create an equation that equals ${ex.target}. Each number must ` +
      'be used exactly once; the operations are +, -, * and /. The solution reasons inside <think> </think> and gives ' +
      'the equation inside <answer> </answer>.'
    );
  }
  const expression = ex.record?.expression;
  if (task === 'arithmetic' && typeof expression === 'string') {
    return (
      `Compute the value of ${expression} (* and / before + and -, left to right otherwise). The solution reasons ` +
      'inside <think> </think> and gives the integer inside <answer> </answer>.'
    );
  }
  return ex.prompt;
}

const SYSTEM =
  'You find mistakes in solutions to problems. You are shown a problem, sometimes a correct solution, and an ' +
  'incorrect solution. You point at the first place where the incorrect solution goes wrong by quoting it exactly.';

export function buildOraclePrompt(q: OracleQuery): OraclePrompt {
  const parts = [`Problem:\n${q.question}`];
  if (q.correct !== null) parts.push(`Correct solution:\n<correct_solution>\n${q.correct}\n</correct_solution>`);
  parts.push(`Incorrect solution:\n<incorrect_solution>\n${q.incorrect}\n</incorrect_solution>`);
  parts.push(
    'Quote the shortest substring of the incorrect solution that contains its first error, copied character ' +
      'for character (same spacing and symbols). Reply with JSON only: {"error_span": "..."}',
  );
  return { system: SYSTEM, user: parts.join('\n\n') };
}

export type ParsedReply = { span: string } | { span: null; reason: 'no span named' | 'malformed reply' };

function spanOf(v: unknown): ParsedReply | undefined {
  if (typeof v === 'string') return v.trim() ? { span: v } : { span: null, reason: 'no span named' };
  return deepSpan(v);
}

/** The first `error_span` in a parsed value, breadth-first (`{"result": {"error_span": …}}` counts); linear in its size. */
function deepSpan(root: unknown): ParsedReply | undefined {
  const queue: unknown[] = [root];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    if (!v || typeof v !== 'object') continue;
    if (!Array.isArray(v) && Object.prototype.hasOwnProperty.call(v, 'error_span')) {
      const s = (v as { error_span: unknown }).error_span;
      if (typeof s === 'string' && s.trim()) return { span: s };
      if (s === null || typeof s === 'string') return { span: null, reason: 'no span named' };
    }
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x && typeof x === 'object') queue.push(x);
  }
  return undefined;
}

/** undefined: not JSON. null: JSON, but not a span (an object without error_span, a number). */
function tryJson(text: string): ParsedReply | null | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  return spanOf(v) ?? null;
}

/**
 * The top-level balanced {...} of `text`, in order, skipping braces inside JSON strings; quotes in the prose between
 * objects do not count. One pass: a reply is untrusted input, and the old scan from every '{' to its match was
 * quadratic ("{{{{…" of 256 KB took minutes). Objects nested inside these are searched after parsing (deepSpan).
 */
function braceObjects(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let j = 0; j < text.length; j++) {
    const c = text[j];
    if (depth === 0) {
      if (c === '{') {
        depth = 1;
        start = j;
        inString = false;
      }
      continue;
    }
    if (inString) {
      if (c === '\\') j++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) out.push(text.slice(start, j + 1));
  }
  return out;
}

/**
 * The error span named by an oracle's reply, read as leniently as models answer: the whole reply as JSON, JSON in a
 * ``` code fence, a JSON object inside prose, an "error_span": "..." pair in broken JSON, and last the first
 * double-quoted (or “curly-quoted”, or `backticked`) text, or a bare one-line reply.
 */
export function parseErrorSpan(reply: string): ParsedReply {
  const text = reply.trim();
  const candidates = [text];
  for (const m of text.matchAll(/```[a-zA-Z]*\s*\n?([\s\S]*?)```/g)) candidates.push(m[1].trim());
  candidates.push(...braceObjects(text));
  let wrongShape = false;
  for (const c of candidates) {
    const r = tryJson(c);
    if (r) return r;
    if (r === null) wrongShape = true;
  }
  // Valid JSON of another shape: its strings are keys and values of something else, not a quoted span.
  if (wrongShape) return { span: null, reason: 'malformed reply' };
  const pair = /"error_span"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(text);
  if (pair) {
    const r = tryJson(`"${pair[1]}"`);
    if (r) return r;
  }
  if (/"error_span"\s*:\s*null/.test(text)) return { span: null, reason: 'no span named' };
  for (const m of text.matchAll(/"([^"\n]+)"|“([^”\n]+)”|`([^`\n]+)`/g)) {
    const q = m[1] ?? m[2] ?? m[3];
    if (q !== 'error_span' && q.trim()) return { span: q };
  }
  // Small local models sometimes reply with the bare substring; locating it in the completion is the real check.
  if (text && !text.includes('\n') && !/[{}"]/.test(text) && text.length <= 200) return { span: text };
  return { span: null, reason: 'malformed reply' };
}
