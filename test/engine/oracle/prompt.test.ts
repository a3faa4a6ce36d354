// The oracle prompt, reading replies as models really write them, and the transport's small pure parts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redact, retryAfterMs, Semaphore } from '../../../src/engine/oracle/http';
import { buildOraclePrompt, oracleQuestion, parseErrorSpan } from '../../../src/engine/oracle/prompt';
import { geminiReply, openaiReply } from '../../../src/engine/oracle/providers';

test('parseErrorSpan: JSON, fenced JSON, JSON in prose, broken JSON, quoted text, bare text', () => {
  assert.deepEqual(parseErrorSpan('{"error_span": "8*2=17"}'), { span: '8*2=17' });
  assert.deepEqual(parseErrorSpan('```json\n{"error_span": "8*2=17"}\n```'), { span: '8*2=17' });
  assert.deepEqual(parseErrorSpan('```\n{"error_span":"a\\nb"}\n```'), { span: 'a\nb' });
  assert.deepEqual(parseErrorSpan('Sure! Here it is: {"error_span": "x {y}"} Hope that helps.'), { span: 'x {y}' });
  // A missing closing brace: the "error_span": "..." pair is still read, escapes included.
  assert.deepEqual(parseErrorSpan('{"error_span": "say \\"hi\\"", "why": "'), { span: 'say "hi"' });
  assert.deepEqual(parseErrorSpan('The first error is "8*2=17" in line two.'), { span: '8*2=17' });
  assert.deepEqual(parseErrorSpan('The first error is “8*2=17”.'), { span: '8*2=17' });
  assert.deepEqual(parseErrorSpan('error: `8*2=17`'), { span: '8*2=17' });
  assert.deepEqual(parseErrorSpan('8*2=17'), { span: '8*2=17' });
  assert.deepEqual(parseErrorSpan('"8*2=17"'), { span: '8*2=17' });
});

test('parseErrorSpan: no span named vs malformed', () => {
  assert.deepEqual(parseErrorSpan('{"error_span": null}'), { span: null, reason: 'no span named' });
  assert.deepEqual(parseErrorSpan('{"error_span": ""}'), { span: null, reason: 'no span named' });
  assert.deepEqual(parseErrorSpan('{"error_span": '), { span: null, reason: 'malformed reply' });
  assert.deepEqual(parseErrorSpan('{"span": 3}'), { span: null, reason: 'malformed reply' });
  assert.deepEqual(parseErrorSpan(''), { span: null, reason: 'malformed reply' });
  assert.deepEqual(parseErrorSpan('line one\nline two'), { span: null, reason: 'malformed reply' });
});

test('the prompt: question in words, correct solution when there is one, the incorrect one, the JSON request', () => {
  const q = oracleQuestion('countdown', { id: 0, prompt: '3 5 2 -> 16\n<think>', numbers: [3, 5, 2], target: 16 });
  assert.match(q, /^Using the numbers \[3, 5, 2\], create an equation that equals 16\./);
  assert.match(oracleQuestion('arithmetic', { id: 0, prompt: '(3+4)*2=\n<think>', record: { expression: '(3+4)*2' } }), /^Compute the value of \(3\+4\)\*2 /);
  assert.equal(oracleQuestion('jsonl', { id: 0, prompt: 'What is 2+2?' }), 'What is 2+2?');
  const p = buildOraclePrompt({ question: 'Q?', correct: 'RIGHT', incorrect: 'WRONG' });
  assert.equal(
    p.user,
    'Problem:\nQ?\n\nCorrect solution:\n<correct_solution>\nRIGHT\n</correct_solution>\n\n' +
      'Incorrect solution:\n<incorrect_solution>\nWRONG\n</incorrect_solution>\n\nQuote the shortest substring of the ' +
      'incorrect solution that contains its first error, copied character for character (same spacing and symbols). ' +
      'Reply with JSON only: {"error_span": "..."}',
  );
  assert.ok(!buildOraclePrompt({ question: 'Q?', correct: null, incorrect: 'WRONG' }).user.includes('Correct solution'));
});

test('reply text from each wire format', () => {
  assert.equal(openaiReply({ choices: [{ message: { content: 'x' } }] }), 'x');
  assert.equal(
    openaiReply({
      choices: [
        {
          message: {
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
          },
        },
      ],
    }),
    'ab',
  );
  assert.equal(openaiReply({ choices: [] }), null);
  assert.equal(openaiReply(null), null);
  assert.equal(geminiReply({ candidates: [{ content: { parts: [{ text: 'plan', thought: true }, { text: 'a' }, { text: 'b' }] } }] }), 'ab');
  assert.equal(geminiReply({ promptFeedback: { blockReason: 'SAFETY' } }), null);
});

test('retry-after as seconds or an HTTP date; Gemini retryDelay in the body', () => {
  assert.equal(retryAfterMs('2', ''), 2000);
  assert.equal(retryAfterMs('0.5', ''), 500);
  // 10 s after "now".
  const now = Date.parse('Wed, 21 Oct 2026 07:28:00 GMT');
  assert.equal(retryAfterMs('Wed, 21 Oct 2026 07:28:10 GMT', '', now), 10_000);
  assert.equal(retryAfterMs(null, '{"error":{"details":[{"retryDelay": "12s"}]}}'), 12_000);
  assert.equal(retryAfterMs(null, '{}'), undefined);
});

test('redact: the secret and anything shaped like a bearer token', () => {
  assert.equal(redact('key=abc123xyz; again abc123xyz', ['abc123xyz']), 'key=[redacted]; again [redacted]');
  assert.equal(redact('Authorization: Bearer other-token-1', []), 'Authorization: Bearer [redacted]');
});

test('Semaphore: at most n at once, all complete, FIFO hand-over', async () => {
  const sem = new Semaphore(2);
  let active = 0,
    peak = 0;
  const order: number[] = [];
  await Promise.all(
    [0, 1, 2, 3, 4].map((i) =>
      sem.run(async () => {
        active++;
        peak = Math.max(peak, active);
        await new Promise((r) => setTimeout(r, 5));
        order.push(i);
        active--;
      }),
    ),
  );
  assert.equal(peak, 2);
  assert.deepEqual([...order].sort(), [0, 1, 2, 3, 4]);
  // A task that throws still frees its slot.
  await assert.rejects(
    sem.run(async () => {
      throw new Error('x');
    }),
  );
  assert.equal(await sem.run(async () => 7), 7);
});
