// The openai and gemini oracles against a real HTTP server on 127.0.0.1: wire formats, faults (500, 429 with
// retry-after, a hang past the timeout, truncated JSON, a span that is not in the completion), the disk cache and the
// concurrency limit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../../../src/engine/config/config';
import { isUserError } from '../../../src/engine/core/errors';
import { createOracle, type CalConfig, type OracleQuery } from '../../../src/engine/oracle';
import { firstLineSpan, geminiAnswer, incorrectOf, openaiAnswer, startLlmServer, type Action, type Received } from './llm_server';

const KEY_ENV = 'CREDIT_LENS_ORACLE_TEST_KEY';
const KEY = `sk-test-${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
process.env[KEY_ENV] = KEY;

function calConfig(over: Record<string, unknown>): CalConfig {
  const { config, issues } = validateConfig({ credit: { strategy: 'cal', cal: over } });
  assert.deepEqual(issues, []);
  return config!.credit.cal;
}

function oracleFor(url: string, over: Record<string, unknown> = {}, cacheDir: string | null = null) {
  const cal = calConfig({ provider: 'openai', model: 'judge-1', base_url: url, api_key_env: KEY_ENV, max_retries: 2, ...over });
  return createOracle({ cal, task: 'countdown', reward: 'grpo_zero', cacheDir, backoffBaseMs: 5 });
}

// 3 5 2 -> 16: the second step is wrong (8*2 is 16, not 17).
const WRONG = '<think>5+3=8\n8*2=17</think>\n<answer>(5+3)*2+1</answer>';
const RIGHT = '<think>5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>';
const Q: OracleQuery = { question: 'Using the numbers [3, 5, 2], create an equation that equals 16.', correct: RIGHT, incorrect: WRONG };

const blame = (_r: Received): Action => ({ body: openaiAnswer(JSON.stringify({ error_span: '8*2=17' })) });

function cacheFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(dir);
  return out;
}

test('openai: POST /v1/chat/completions with a bearer key; the span is located in the completion', async () => {
  const srv = await startLlmServer(blame);
  try {
    const [o] = await oracleFor(srv.url).ask([Q]);
    // "8*2=17" starts after "<think>5+3=8\n": 7 + 6 = 13, and is 6 characters long.
    assert.deepEqual(o, { span: { start: 13, end: 19 }, cached: false, requests: 1 });
    const r = srv.received[0];
    assert.equal(r.method, 'POST');
    assert.equal(r.path, '/v1/chat/completions');
    assert.equal(r.headers.authorization, `Bearer ${KEY}`);
    const body = r.body as { model: string; messages: { role: string; content: string }[] };
    assert.equal(body.model, 'judge-1');
    assert.deepEqual(
      body.messages.map((m) => m.role),
      ['system', 'user'],
    );
    // The prompt carries the question, the correct completion and the incorrect one.
    assert.ok(r.prompt.includes(Q.question) && r.prompt.includes(RIGHT));
    assert.equal(incorrectOf(r.prompt), WRONG);
    assert.match(r.prompt, /\{"error_span": "\.\.\."\}/);
  } finally {
    await srv.close();
  }
});

test('openai: a base_url ending in /v1 is not given a second /v1', async () => {
  const srv = await startLlmServer(blame);
  try {
    await oracleFor(`${srv.url}/v1/`).ask([Q]);
    assert.equal(srv.received[0].path, '/v1/chat/completions');
  } finally {
    await srv.close();
  }
});

test('gemini: POST /v1beta/models/{model}:generateContent, key in x-goog-api-key and not in the URL', async () => {
  const srv = await startLlmServer(() => ({ body: geminiAnswer('```json\n{"error_span": "8 * 2 = 17"}\n```') }));
  try {
    const cal = calConfig({ provider: 'gemini', model: 'models/gemini-test', base_url: srv.url, api_key_env: KEY_ENV });
    const [o] = await createOracle({ cal, task: 'countdown', reward: 'grpo_zero', cacheDir: null }).ask([{ ...Q, correct: null }]);
    // Re-spaced by the model; located ignoring whitespace at the same offsets 13..19.
    assert.deepEqual(o.span, { start: 13, end: 19 });
    const r = srv.received[0];
    assert.equal(r.path, '/v1beta/models/gemini-test:generateContent');
    assert.equal(r.headers['x-goog-api-key'], KEY);
    assert.ok(!r.path.includes(KEY) && r.headers.authorization === undefined);
    const body = r.body as { systemInstruction: unknown; contents: { role: string }[] };
    assert.ok(body.systemInstruction);
    assert.equal(body.contents[0].role, 'user');
    // No correct completion in the group: the prompt has no correct-solution section.
    assert.ok(!r.prompt.includes('<correct_solution>'));
  } finally {
    await srv.close();
  }
});

test('500 then success: retried, 2 requests', async () => {
  const srv = await startLlmServer((r, n) => (n === 0 ? { status: 500, body: '{"error":"overloaded"}' } : blame(r)));
  try {
    const [o] = await oracleFor(srv.url).ask([Q]);
    assert.deepEqual(o, { span: { start: 13, end: 19 }, cached: false, requests: 2 });
  } finally {
    await srv.close();
  }
});

test('429 with retry-after: 1 waits at least a second, then succeeds', async () => {
  const srv = await startLlmServer((r, n) => (n === 0 ? { status: 429, headers: { 'retry-after': '1' }, body: '{}' } : blame(r)));
  try {
    const t0 = performance.now();
    const [o] = await oracleFor(srv.url).ask([Q]);
    const waited = performance.now() - t0;
    assert.equal(o.requests, 2);
    assert.deepEqual(o.span, { start: 13, end: 19 });
    // The own backoff is 5 ms·(0.5..1), so only retry-after explains ≥ 1 s (minus timer slack).
    assert.ok(waited >= 990, `waited ${waited} ms`);
  } finally {
    await srv.close();
  }
});

test('a hang past timeout_s is abandoned and retried; hanging every time is a failure after 1 + max_retries attempts', async () => {
  const srv = await startLlmServer((r, n) => (n === 0 ? { hang: true } : blame(r)));
  try {
    const t0 = performance.now();
    const [o] = await oracleFor(srv.url, { timeout_s: 0.2 }).ask([Q]);
    assert.deepEqual(o.span, { start: 13, end: 19 });
    assert.equal(o.requests, 2);
    assert.ok(performance.now() - t0 >= 190);
  } finally {
    await srv.close();
  }
  const always = await startLlmServer(() => ({ hang: true }));
  try {
    const [o] = await oracleFor(always.url, { timeout_s: 0.2, max_retries: 1 }).ask([Q]);
    assert.equal(o.span, null);
    assert.equal(o.requests, 2);
    assert.equal(always.received.length, 2);
    assert.match(o.failure!, /^request failed: no complete answer within 0\.2 s \(gave up after 2 attempts\)$/);
  } finally {
    await always.close();
  }
});

test('truncated JSON bodies (complete or cut mid-transfer) are retried, and fail once retries run out', async () => {
  const full = openaiAnswer(JSON.stringify({ error_span: '8*2=17' }));
  const half = full.slice(0, Math.floor(full.length / 2));
  const srv = await startLlmServer((r, n) => (n === 0 ? { body: half } : n === 1 ? { cut: half } : blame(r)));
  try {
    const [o] = await oracleFor(srv.url).ask([Q]);
    assert.deepEqual(o, { span: { start: 13, end: 19 }, cached: false, requests: 3 });
  } finally {
    await srv.close();
  }
  const always = await startLlmServer(() => ({ body: half }));
  try {
    const [o] = await oracleFor(always.url, { max_retries: 1 }).ask([Q]);
    assert.equal(o.span, null);
    assert.match(o.failure!, /not valid JSON .*gave up after 2 attempts/);
  } finally {
    await always.close();
  }
});

test('a span that does not occur in the completion is a failure, and the run goes on', async () => {
  const srv = await startLlmServer(() => ({ body: openaiAnswer('{"error_span": "9*9=81"}') }));
  try {
    const outs = await oracleFor(srv.url).ask([Q, { ...Q, incorrect: `${WRONG} ` }]);
    assert.deepEqual(
      outs.map((o) => o.failure),
      ['span not found', 'span not found'],
    );
    assert.deepEqual(
      outs.map((o) => o.span),
      [null, null],
    );
  } finally {
    await srv.close();
  }
});

test('malformed replies and a reply with no text are failures; a 4xx other than 401/403/404 is not retried', async () => {
  const replies: Action[] = [
    { body: openaiAnswer('I cannot tell {') },
    { body: JSON.stringify({ choices: [] }) },
    { status: 400, body: '{"error":"context too long"}' },
  ];
  const srv = await startLlmServer((r) => replies[Number(/#(\d)/.exec(r.prompt)![1])]);
  try {
    const outs = await oracleFor(srv.url, { cache: false }).ask([0, 1, 2].map((i) => ({ ...Q, question: `#${i}` })));
    assert.deepEqual(
      outs.map((o) => o.failure),
      ['malformed reply', 'reply without text', 'request failed: HTTP 400: {"error":"context too long"}'],
    );
    assert.deepEqual(
      outs.map((o) => o.requests),
      [1, 1, 1],
    );
  } finally {
    await srv.close();
  }
});

test('cache: a rerun with the same queries sends no request; the cache holds neither key nor URL', async () => {
  const cacheDir = mkdtempSync(join(tmpdir(), 'cl-oracle-cache-'));
  const srv = await startLlmServer((r) => ({ body: openaiAnswer(JSON.stringify({ error_span: firstLineSpan(incorrectOf(r.prompt)) })) }));
  try {
    const qs = [Q, { ...Q, incorrect: '<think>2*3=7</think>\n<answer>2*3</answer>' }, Q];
    const first = await oracleFor(srv.url, {}, cacheDir).ask(qs);
    // The third query repeats the first: answered by the first one's request.
    assert.equal(srv.received.length, 2);
    assert.deepEqual(
      first.map((o) => [o.cached, o.requests]),
      [
        [false, 1],
        [false, 1],
        [true, 0],
      ],
    );
    const again = await oracleFor(srv.url, {}, cacheDir).ask(qs);
    assert.equal(srv.received.length, 2, 'the rerun reached the server');
    assert.deepEqual(
      again.map((o) => o.cached),
      [true, true, true],
    );
    assert.deepEqual(
      again.map((o) => o.span),
      first.map((o) => o.span),
    );
    // First lines "5+3=8" at 7..12 and "2*3=7" at 7..12 of their completions.
    assert.deepEqual(
      first.map((o) => o.span),
      [
        { start: 7, end: 12 },
        { start: 7, end: 12 },
        { start: 7, end: 12 },
      ],
    );
    const files = cacheFiles(cacheDir);
    assert.equal(files.length, 2);
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      assert.ok(!text.includes(KEY) && !text.includes(srv.url), f);
      // <dir>/<first two hex digits>/<sha256>.json
      assert.match(f.slice(cacheDir.length), /^\/([0-9a-f]{2})\/\1[0-9a-f]{62}\.json$/);
    }
    // cache: false neither reads nor writes it.
    await oracleFor(srv.url, { cache: false }, null).ask([Q]);
    assert.equal(srv.received.length, 3);
  } finally {
    await srv.close();
  }
});

test('concurrency: never more requests in flight than credit.cal.concurrency', async () => {
  const srv = await startLlmServer((r) => ({ ...blame(r), delayMs: 40 }));
  try {
    const qs = Array.from({ length: 9 }, (_, i) => ({ ...Q, question: `q${i}` }));
    const outs = await oracleFor(srv.url, { concurrency: 3, cache: false }).ask(qs);
    assert.equal(srv.received.length, 9);
    assert.ok(outs.every((o) => o.span !== null));
    // Exactly 3: the limit holds, and the 9 distinct queries do overlap up to it.
    assert.equal(srv.maxInFlight, 3);
  } finally {
    await srv.close();
  }
});

test('the key: a missing variable is a UserError naming it; a 401 stops with a UserError; echoes are redacted', async () => {
  const srv = await startLlmServer((r, n) => {
    const echo = JSON.stringify({ error: `bad request, you sent authorization: ${r.headers.authorization}` });
    return n === 0 ? { status: 500, body: echo } : { status: 401, body: echo };
  });
  try {
    await assert.rejects(
      oracleFor(srv.url, { api_key_env: 'CREDIT_LENS_UNSET_VAR_KEY' }).ask([Q]),
      (e: Error) => isUserError(e) && /CREDIT_LENS_UNSET_VAR_KEY is not set/.test(e.message),
    );
    assert.equal(srv.received.length, 0);
    const [o] = await oracleFor(srv.url, { max_retries: 0 }).ask([Q]);
    assert.ok(o.failure!.startsWith('request failed: HTTP 500: {"error":"bad request, you sent authorization: Bearer [redacted]"}'), o.failure);
    assert.ok(!o.failure!.includes(KEY));
    await assert.rejects(oracleFor(srv.url).ask([Q]), (e: Error) => {
      assert.ok(isUserError(e), String(e));
      assert.match(e.message, /HTTP 401/);
      assert.ok(!e.message.includes(KEY) && !String(e.stack).includes(KEY) && !String((e as { hint?: string }).hint).includes(KEY));
      return true;
    });
  } finally {
    await srv.close();
  }
});

test('an unwritable cache folder stops with a UserError that says how to fix it', async () => {
  const parent = mkdtempSync(join(tmpdir(), 'cl-oracle-ro-'));
  // A file where the cache folder should be: mkdir fails for any user, root included.
  writeFileSync(join(parent, 'cache'), '');
  const srv = await startLlmServer(blame);
  try {
    await assert.rejects(
      oracleFor(srv.url, {}, join(parent, 'cache')).ask([Q]),
      (e: Error) => isUserError(e) && /cannot write the oracle cache/.test(e.message) && /XDG_CACHE_HOME/.test((e as { hint?: string }).hint ?? ''),
    );
  } finally {
    await srv.close();
  }
});
