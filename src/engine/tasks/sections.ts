// Which part of a completion a token belongs to (think / answer / other) and whether it is a filler or a
// reasoning token (seed doc 002). Both work on the decoded text's character offsets (design.md#semantics).
import type { Section, TokenSpan, TokenType } from '../core/types';

interface Span {
  start: number;
  /** exclusive; Infinity when the closing tag never comes, so the span runs to the end */
  end: number;
}

/** Spans from each `open` tag through its next `close` tag, tags included. */
function tagSpans(text: string, open: string, close: string): Span[] {
  const spans: Span[] = [];
  let from = 0;
  for (;;) {
    const start = text.indexOf(open, from);
    if (start < 0) return spans;
    const c = text.indexOf(close, start + open.length);
    if (c < 0) {
      spans.push({ start, end: Infinity });
      return spans;
    }
    spans.push({ start, end: c + close.length });
    from = c + close.length;
  }
}

// A token overlaps a span when they share a character. An empty token (start = end, e.g. EOS decoded to "")
// shares none, so it counts as inside when its position is.
function overlaps(t: TokenSpan, s: Span): boolean {
  if (t.end <= t.start) return t.start >= s.start && t.start < s.end;
  return t.start < s.end && t.end > s.start;
}

/**
 * Section of every token. `answer`: tokens overlapping `<answer>`…`</answer>` (tags included; to the end when
 * unclosed). `think`: likewise for `<think>`…`</think>`. Answer wins when a token touches both. The trainer passes
 * prefill + completion with offsets shifted by the prefill, so a completion that starts inside think is covered.
 */
export function computeSections(text: string, tokens: TokenSpan[]): Section[] {
  const answer = tagSpans(text, '<answer>', '</answer>');
  const think = tagSpans(text, '<think>', '</think>');
  return tokens.map((t) => {
    if (answer.some((s) => overlaps(t, s))) return 'answer';
    if (think.some((s) => overlaps(t, s))) return 'think';
    return 'other';
  });
}

/**
 * Seed doc 002's reasoning tokens: made of digits, + - * / = ( ) . × ÷ only, with at least one digit or operator.
 * Punctuation alone — a sentence-final ".", a bare "(" or ")" — is filler, as seed doc 002 counts it ("."
 * counted as reasoning before); "3." and "(4" stay reasoning. Configurable in analysis (--reasoning-regex).
 */
export const REASONING_TOKEN_RE = /^(?=.*[0-9+\-*/=×÷])[0-9+\-*/=().×÷]+$/;

/** `reasoning` iff the trimmed token text is non-empty and matches `re`; everything else is `filler`. */
export function tokenType(text: string, re: RegExp = REASONING_TOKEN_RE): TokenType {
  const t = text.trim();
  if (t === '') return 'filler';
  re.lastIndex = 0; // a /g or /y regex keeps state between test() calls
  return re.test(t) ? 'reasoning' : 'filler';
}

/** What became of an episode's answer, as Browse Rollouts filters by it. */
export const STATUSES = ['correct', 'wrong', 'truncated', 'no_answer'] as const;
export type AnswerStatus = (typeof STATUSES)[number];

/**
 * correct where the task scored it a success; else truncated where the completion stopped at max_new_tokens; else
 * no_answer where it holds no `<answer>` tag (the answer section's start, as computeSections finds it); else wrong.
 */
export function answerStatus(text: string, success: boolean, truncated: boolean): AnswerStatus {
  return success ? 'correct' : truncated ? 'truncated' : !text.includes('<answer>') ? 'no_answer' : 'wrong';
}
