// From an oracle's error span to completion tokens (design.md#semantics `cal`): find the substring in the text, then mark the
// tokens whose characters overlap it, cut to max_error_span tokens from its start.
import type { TokenSpan } from '../core/types';

/** Character offsets [start, end) in some text. */
export interface CharSpan {
  start: number;
  end: number;
}

const WS = /\s/;

/**
 * Where `span` occurs in `text`: the first exact occurrence, else the first occurrence ignoring whitespace on both
 * sides (LLMs re-space arithmetic, "3 + 4 = 8" for "3+4=8", and join or split lines), mapped back to the original
 * characters from the first to the last non-space one. Null when it does not occur or is only whitespace.
 */
export function locateSpan(text: string, span: string): CharSpan | null {
  if (span.trim() === '') return null;
  const at = text.indexOf(span);
  if (at >= 0) return { start: at, end: at + span.length };
  let squeezed = '';
  const origin: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (!WS.test(text[i])) {
      squeezed += text[i];
      origin.push(i);
    }
  }
  const needle = span.replace(/\s+/g, '');
  const k = squeezed.indexOf(needle);
  if (k < 0) return null;
  return { start: origin[k], end: origin[k + needle.length - 1] + 1 };
}

/**
 * 1 on the tokens overlapping [start, end) (offsets in the tokens' text), at most `maxTokens` of them from the span's
 * start, else 0. A token with an empty span (the leading bytes of a multi-byte character in byte-level BPE, see
 * HfTokenizer.decodeWithOffsets) belongs to the character at its position, so it counts when that character is inside.
 */
export function spanTokenMask(tokens: TokenSpan[], span: CharSpan, maxTokens: number): number[] {
  let left = maxTokens;
  return tokens.map((t) => {
    const inside = t.start === t.end ? t.start >= span.start && t.start < span.end : t.start < span.end && t.end > span.start;
    if (!inside || left <= 0) return 0;
    left--;
    return 1;
  });
}
