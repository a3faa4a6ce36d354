// The oracle against hostile or careless servers on 127.0.0.1: a redirect never carries the key on, a
// huge reply is refused without being read whole, a malformed reply is not cached, two endpoints serving one model
// name keep separate cache entries, and a Stop ends a back-off wait at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../../../src/engine/config/config';
import { isUserError } from '../../../src/engine/core/errors';
import { cacheKey, normalizeBaseUrl } from '../../../src/engine/oracle/cache';
import { MAX_REPLY_BYTES } from '../../../src/engine/oracle/http';
import { createOracle, type OracleQuery } from '../../../src/engine/oracle';
import { openaiAnswer, startLlmServer } from './llm_server';

const KEY_ENV = 'CREDIT_LENS_HOSTILE_TEST_KEY';
const KEY = `sk-hostile-${Date.now().toString(16)}`;
process.env[KEY_ENV] = KEY;

function oracleFor(url: string, over: Record<string, unknown> = {}, cacheDir: string | null = null, backoffBaseMs = 5) {
  const { config, issues } = validateConfig({
    credit: { strategy: 'cal', cal: { provider: 'openai', model: 'judge-1', base_url: url, api_key_env: KEY_ENV, max_retries: 2, ...over } },
  });
  assert.deepEqual(issues, []);
  return createOracle({ cal: config!.credit.cal, task: 'countdown', reward: 'grpo_zero', cacheDir, backoffBaseMs });
}

const Q: OracleQuery = {
  question: 'Using the numbers [3, 5, 2], create an equation that equals 16.',
  correct: '<think>5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>',
  incorrect: '<think>5+3=8\n8*2=17</think>\n<answer>(5+3)*2+1</answer>',
};
const good = () => ({ body: openaiAnswer(JSON.stringify({ error_span: '8*2=17' })) });

function countFiles(d: string): number {
  let n = 0;
  const walk = (x: string) => {
    for (const f of readdirSync(x)) {
      const p = join(x, f);
      if (statSync(p).isDirectory()) walk(p);
      else n++;
    }
  };
  try {
    walk(d);
  } catch {
    return 0;
  }
  return n;
}

test('a redirect is not followed: the key never reaches the other address, and the run is told to fix base_url', async () => {
  const elsewhere = await startLlmServer(good);
  const srv = await startLlmServer(() => ({ status: 307, headers: { location: `${elsewhere.url}/v1/chat/completions` }, body: '' }));
  try {
    await assert.rejects(oracleFor(srv.url).ask([Q]), (e: unknown) => {
      assert.ok(isUserError(e));
      assert.match(e.message, /HTTP 307: the endpoint redirects; the key is never sent on/);
      assert.ok(!e.message.includes(KEY));
      return true;
    });
    assert.equal(elsewhere.received.length, 0, 'nothing reached the redirect target');
    assert.equal(srv.received.length, 1, 'a redirect is not retried');
  } finally {
    await srv.close();
    await elsewhere.close();
  }
});

test(`a reply over ${MAX_REPLY_BYTES / 1024} KB is refused, announced or streamed`, async () => {
  const huge = openaiAnswer(JSON.stringify({ error_span: '8*2=17', pad: 'x'.repeat(MAX_REPLY_BYTES) }));
  const srv = await startLlmServer(() => ({ body: huge }));
  try {
    const [o] = await oracleFor(srv.url).ask([Q]);
    assert.equal(o.span, null);
    assert.match(o.failure ?? '', /reply over 256 KB; refused/);
    assert.equal(srv.received.length, 1, 'not retried');
  } finally {
    await srv.close();
  }
});

test('only replies that parsed are cached; the base URL is part of the key', async () => {
  const cacheDir = mkdtempSync(join(tmpdir(), 'cl-hostile-cache-'));
  const bad = await startLlmServer(() => ({ body: openaiAnswer(JSON.stringify({ verdict: 'wrong somewhere' })) }));
  const ok1 = await startLlmServer(good);
  const ok2 = await startLlmServer(good);
  try {
    const [b] = await oracleFor(bad.url, {}, cacheDir).ask([Q]);
    assert.equal(b.span, null);
    assert.equal(countFiles(cacheDir), 0, 'a malformed reply is not kept');
    await oracleFor(bad.url, {}, cacheDir).ask([Q]);
    assert.equal(bad.received.length, 2, 'so it is asked again');
    await oracleFor(ok1.url, {}, cacheDir).ask([Q]);
    const [again] = await oracleFor(ok1.url + '/', {}, cacheDir).ask([Q]);
    assert.equal(again.cached, true, 'a trailing slash is the same endpoint');
    const [other] = await oracleFor(ok2.url, {}, cacheDir).ask([Q]);
    assert.equal(other.cached, false, 'another server with the same model name is asked itself');
    assert.equal(countFiles(cacheDir), 2);
    assert.equal(normalizeBaseUrl('HTTPS://API.Example.com:443/v1/'), 'https://api.example.com/v1');
    const p = { system: 's', user: 'u' };
    assert.notEqual(cacheKey('openai', 'http://127.0.0.1:1', 'm', p), cacheKey('openai', 'http://127.0.0.1:2', 'm', p));
  } finally {
    await bad.close();
    await ok1.close();
    await ok2.close();
  }
});

test('a Stop ends the back-off wait of a rate-limited query at once', async () => {
  const srv = await startLlmServer(() => ({ status: 429, headers: { 'retry-after': '60' }, body: '{}' }));
  try {
    const ctl = new AbortController();
    const t0 = Date.now();
    const pending = oracleFor(srv.url, { max_retries: 5 }, null, 5).ask([Q], ctl.signal);
    setTimeout(() => ctl.abort(), 300);
    const [o] = await pending;
    const waited = Date.now() - t0;
    assert.equal(o.span, null);
    assert.match(o.failure ?? '', /cancelled/);
    // Without the cancel the retry-after of 60 s would hold it; 5 s is far above the 300 ms plus a request.
    assert.ok(waited < 5000, `returned after ${waited} ms`);
  } finally {
    await srv.close();
  }
});

test('reply parsing is linear: 256 KB of unclosed braces, quotes and fences parse in well under a second', async () => {
  const { parseErrorSpan } = await import('../../../src/engine/oracle/prompt');
  // Each of these took the old quadratic scan tens of seconds or more; a linear parser does them in milliseconds.
  const n = MAX_REPLY_BYTES;
  for (const text of ['{'.repeat(n), '{"a":'.repeat(n / 5), '```'.repeat(n / 3) + 'x', '{"error_span": "'.repeat(n / 16)]) {
    const t0 = performance.now();
    const r = parseErrorSpan(text);
    const ms = performance.now() - t0;
    assert.ok(ms < 1000, `${text.slice(0, 12)}… took ${ms.toFixed(0)} ms`);
    assert.ok(r.span === null || typeof r.span === 'string');
  }
  // Nested objects are still found, and prose quotes around the object do not hide it.
  assert.deepEqual(parseErrorSpan('The "error" is here: {"result": {"error_span": "8*2=17"}}'), { span: '8*2=17' });
});
