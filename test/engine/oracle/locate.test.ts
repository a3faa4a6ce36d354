// Locating the oracle's substring and mapping it to tokens by character offsets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { locateSpan, spanTokenMask } from '../../../src/engine/oracle/locate';
import type { TokenSpan } from '../../../src/engine/core/types';

function tokensOf(pieces: string[]): TokenSpan[] {
  let at = 0;
  return pieces.map((text, id) => {
    const t = { id, text, start: at, end: at + text.length };
    at += text.length;
    return t;
  });
}

test('locateSpan: exact first, then ignoring whitespace; mapped back to the original characters', () => {
  const text = '5+3=8\n8*2=17</think>';
  assert.deepEqual(locateSpan(text, '8*2=17'), { start: 6, end: 12 });
  // Re-spaced by the oracle: "8 * 2 = 17" → same characters 6..12.
  assert.deepEqual(locateSpan(text, ' 8 * 2 = 17 '), { start: 6, end: 12 });
  // Two lines joined with a space: 0..12 covers "5+3=8\n8*2=17".
  assert.deepEqual(locateSpan(text, '5+3=8 8*2=17'), { start: 0, end: 12 });
  assert.equal(locateSpan(text, '9*9=81'), null);
  assert.equal(locateSpan(text, '  \n'), null);
  // The first occurrence wins.
  assert.deepEqual(locateSpan('1+1=2\n1+1=2', '1+1=2'), { start: 0, end: 5 });
});

test('spanTokenMask: tokens overlapping the span, cut to max tokens from its start', () => {
  // "5+3" "=8\n" "8*2" "=17" "</think>" : characters 0-3, 3-6, 6-9, 9-12, 12-20.
  const toks = tokensOf(['5+3', '=8\n', '8*2', '=17', '</think>']);
  assert.deepEqual(spanTokenMask(toks, { start: 6, end: 12 }, 64), [0, 0, 1, 1, 0]);
  // A span starting inside a token (character 4, in "=8\n") includes that token.
  assert.deepEqual(spanTokenMask(toks, { start: 4, end: 7 }, 64), [0, 1, 1, 0, 0]);
  // max_error_span 1 keeps the first token from the span's start.
  assert.deepEqual(spanTokenMask(toks, { start: 4, end: 12 }, 1), [0, 1, 0, 0, 0]);
  // Nothing overlaps a span past the text.
  assert.deepEqual(spanTokenMask(toks, { start: 30, end: 40 }, 64), [0, 0, 0, 0, 0]);
});

test('spanTokenMask: empty-span tokens (bytes of one character, EOS) count by their position', () => {
  // "a", then 2 empty tokens at 1 and the token completing "é" at 1..2, then "b", then EOS (empty at 3).
  const toks: TokenSpan[] = [
    { id: 0, text: 'a', start: 0, end: 1 },
    { id: 1, text: '', start: 1, end: 1 },
    { id: 2, text: '', start: 1, end: 1 },
    { id: 3, text: 'é', start: 1, end: 2 },
    { id: 4, text: 'b', start: 2, end: 3 },
    { id: 5, text: '', start: 3, end: 3 },
  ];
  assert.deepEqual(spanTokenMask(toks, { start: 1, end: 2 }, 64), [0, 1, 1, 1, 0, 0]);
  assert.deepEqual(spanTokenMask(toks, { start: 2, end: 3 }, 64), [0, 0, 0, 0, 1, 0]);
});
