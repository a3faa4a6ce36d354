// The offline `rule` oracle (design.md#semantics `cal`), for countdown and arithmetic: the first wrong arithmetic step in the
// think section, else the answer expression. Steps are checked in exact rational arithmetic with the task's own
// expression grammar (tasks/expr.ts), never eval: model output is untrusted text.
import type { RewardKind } from '../tasks/countdown';
import { evalExact, evaluateExpression, type BigRational } from '../tasks/expr';
import type { CharSpan } from './locate';

// A step is a run of arithmetic characters holding an '=' (e.g. "5+3=8", "(7/2)*(-3)=-21/2"), so a step inside prose
// ("so 5 + 3 = 8, then") is found too. A step stays on its line; '.' is included for decimals such as "7/2=3.5".
const STEP_RE = /[0-9+\-*/×÷−(). \t]*=[0-9+\-*/×÷−(). \t=]*/g;

/**
 * The step's value as an exact rational; null when it is not an expression of the grammar or divides by zero.
 * The grammar has no unary minus and no decimals; a leading minus ("-21/2", "(-3)") is read as 0 − x, and a decimal
 * "3.5" as (35/10), which keep the value exactly.
 */
function exactValue(side: string): BigRational | null {
  const text = side.replace(/(\d+)\.(\d+)/g, (_, a: string, b: string) => `(${BigInt(a + b)}/1${'0'.repeat(b.length)})`).replace(/(^|\()(\s*)[-−]/g, '$1$20-');
  const r = evaluateExpression(text);
  return r.ok ? evalExact(r.ast) : null;
}

/**
 * Whether a step "a op b = v" (or a chain "x = y = z") holds exactly. Every side must parse; a truncated "5+3=" or a
 * garbled "5+=8" is a wrong step too.
 */
export function stepHolds(step: string): boolean {
  const sides = step.split('=');
  let first: BigRational | null = null;
  for (const s of sides) {
    const v = exactValue(s);
    if (!v) return false;
    if (first && (v.num !== first.num || v.den !== first.den)) return false;
    first ??= v;
  }
  return true;
}

/** Offsets of the think section's content: after the first `<think>` to `</think>` (or `<answer>`, or the end). */
function thinkContent(text: string): CharSpan | null {
  const open = text.indexOf('<think>');
  if (open < 0) return null;
  const start = open + '<think>'.length;
  const ends = [text.indexOf('</think>', start), text.indexOf('<answer>', start), text.length].filter((i) => i >= 0);
  return { start, end: Math.min(...ends) };
}

/** The arithmetic steps of the think section (as firstWrongStep reads them), and how many of them hold. */
export function thinkSteps(text: string): { steps: number; holding: number } {
  const think = thinkContent(text);
  if (!think) return { steps: 0, holding: 0 };
  let steps = 0;
  let holding = 0;
  for (const m of text.slice(think.start, think.end).matchAll(STEP_RE)) {
    if (!/[0-9]/.test(m[0])) continue;
    steps++;
    if (stepHolds(m[0].trim().replace(/\.+$/, ''))) holding++;
  }
  return { steps, holding };
}

/** The first step of the think section that does not hold, as trimmed offsets in `text`. */
export function firstWrongStep(text: string): CharSpan | null {
  const think = thinkContent(text);
  if (!think) return null;
  const body = text.slice(think.start, think.end);
  for (const m of body.matchAll(STEP_RE)) {
    const raw = m[0];
    if (!/[0-9]/.test(raw)) continue;
    const lead = raw.length - raw.trimStart().length;
    // A sentence's full stop is not part of the step ("5+3=8.").
    const step = raw.trim().replace(/\.+$/, '');
    if (!stepHolds(step)) {
      const start = think.start + m.index + lead;
      return { start, end: start + step.length };
    }
  }
  return null;
}

/**
 * The answer expression: the content of the answer block the reward reads (the first for grpo_zero, the last for
 * tinyzero; see tasks/countdown.ts), trimmed; the whole block, tags included, when it is empty. Null without a
 * complete block: then there is no answer to blame (design.md#semantics: such an episode keeps A_i).
 */
export function answerExpression(text: string, kind: RewardKind): CharSpan | null {
  const blocks = [...text.matchAll(/<answer>([\s\S]*?)<\/answer>/g)];
  const m = kind === 'grpo_zero' ? blocks[0] : blocks[blocks.length - 1];
  if (!m) return null;
  const content = m[1];
  if (content.trim() === '') return { start: m.index, end: m.index + m[0].length };
  const start = m.index + '<answer>'.length + (content.length - content.trimStart().length);
  return { start, end: start + content.trim().length };
}

/**
 * The rule oracle's error span in `text` (prefill + completion): the first wrong step in the think section, else
 * the answer expression, else null.
 */
export function ruleErrorSpan(text: string, kind: RewardKind): CharSpan | null {
  return firstWrongStep(text) ?? answerExpression(text, kind);
}
