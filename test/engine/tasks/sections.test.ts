import { test } from 'node:test';
import assert from 'node:assert/strict';
import { computeSections, REASONING_TOKEN_RE, tokenType } from '../../../src/engine/tasks/sections';
import type { TokenSpan } from '../../../src/engine/core/types';

/** Tokens from piece strings laid end to end, with their character offsets. */
function spans(pieces: string[], shift = 0): TokenSpan[] {
  let at = shift;
  return pieces.map((text, id) => {
    const t = { id, text, start: at, end: at + text.length };
    at += text.length;
    return t;
  });
}

test('multi-character tokens straddling tag boundaries', () => {
  // Offsets: <think> 0–7, "5+3=8" 7–12, </think> 12–20, "\n" 20–21, <answer> 21–29, "(5+3)*2" 29–36,
  // </answer> 36–45, " ok" 45–48.
  const pieces = ['<thi', 'nk>5+3', '=8</', 'think>', '\n', '<ans', 'wer>(5', '+3)*2</answer', '>', ' ok'];
  const text = pieces.join('');
  assert.equal(text, '<think>5+3=8</think>\n<answer>(5+3)*2</answer> ok');
  assert.deepEqual(computeSections(text, spans(pieces)), [
    'think',
    'think',
    'think',
    'think', // everything up to and including "</think>" (ends at 20)
    'other', // "\n" [20, 21) touches neither span
    'answer',
    'answer',
    'answer',
    'answer', // "<ans" starts the answer span; ">" [44, 45) closes it
    'other', // " ok" is after "</answer>"
  ]);
  // A token holding the end of </think>, the newline and the start of <answer> touches both: answer wins.
  const merged = ['<think>5+3=8</thi', 'nk>\n<an', 'swer>16</answer>'];
  assert.deepEqual(computeSections(merged.join(''), spans(merged)), ['think', 'answer', 'answer']);
});

test('no answer block; an unclosed answer runs to the end', () => {
  const noAnswer = ['<think>', 'abc', '</think>', ' then'];
  assert.deepEqual(computeSections(noAnswer.join(''), spans(noAnswer)), ['think', 'think', 'think', 'other']);
  // "<answer>" never closed: its tokens, and an empty EOS token at the very end, are answer.
  const unclosed = ['<think>x</think>\n', '<answer>', '12', '+3'];
  const toks = spans(unclosed);
  const end = toks[toks.length - 1].end;
  toks.push({ id: 99, text: '', start: end, end });
  assert.deepEqual(computeSections(unclosed.join(''), toks), ['think', 'answer', 'answer', 'answer', 'answer']);
  // An unclosed think likewise: everything after <think> is think.
  assert.deepEqual(computeSections('pre<think>abc', spans(['pre', '<think>', 'abc'])), ['other', 'think', 'think']);
  // A stray closing tag opens nothing.
  assert.deepEqual(computeSections('a</answer>b', spans(['a', '</answer>', 'b'])), ['other', 'other', 'other']);
});

test('completion starting inside the prefilled <think>, offsets shifted by the prefill', () => {
  // As the trainer calls it: text = prefill + completion, token offsets + prefill.length (7).
  const completion = ['5', '+', '3', '</think>', '\n<answer>8</answer>'];
  const text = '<think>' + completion.join('');
  assert.deepEqual(computeSections(text, spans(completion, 7)), ['think', 'think', 'think', 'think', 'answer']);
});

test('several answer blocks each count', () => {
  const pieces = ['<answer>1</answer>', ' x ', '<answer>2</answer>'];
  assert.deepEqual(computeSections(pieces.join(''), spans(pieces)), ['answer', 'other', 'answer']);
});

test('token types (seed doc 002): digits, + - * / = ( ) . × ÷ are reasoning after trimming', () => {
  for (const t of ['1', ' 12', ' -', '=', '(5+3)*2', '3.5', '\u00d7', '\u00f7', ' 8/2 \n']) {
    assert.equal(tokenType(t), 'reasoning', JSON.stringify(t));
  }
  // Seed doc 002's top filler tokens, plus empty / whitespace-only, letters mixed in, and the unicode minus (not listed).
  for (const t of [' ', '>', 'answer', ',', ' </', ' to', '>\n', '', '\n', '3a', '\u2212', '<think>']) {
    assert.equal(tokenType(t), 'filler', JSON.stringify(t));
  }
  assert.ok(REASONING_TOKEN_RE.test('1+1=2'));
});

test('a configured regex replaces the default; a /g regex gives the same answer every call', () => {
  assert.equal(tokenType(' wait', /^[a-z]+$/), 'reasoning');
  assert.equal(tokenType('12', /^[a-z]+$/), 'filler');
  const g = /^[0-9]+$/g;
  assert.deepEqual([tokenType('7', g), tokenType('7', g), tokenType('7', g)], ['reasoning', 'reasoning', 'reasoning']);
});
