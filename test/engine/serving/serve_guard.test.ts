// Who may drive `credit-lens serve`: each request below is one a web page, a DNS-rebinding page or a stranger on the
// network could send, made over real HTTP to a served Qwen-shaped folder, and each is refused with its reason; the
// weights the server holds are checked unchanged after every refused load. Then the key: refused without it or with a
// wrong one, accepted with it (the client sends $CREDIT_LENS_API_KEY), and never in the server's log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '../../../src/engine/serving/serve';
import { ServerSampler } from '../../../src/engine/serving/client';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { qwenBase, randomWeights, writeCheckpoint } from '../model/hf_reference';

interface Answer {
  status: number;
  body: string;
}

/** One raw request: every header as given (fetch would not let a test set Host). */
function raw(url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((ok, bad) => {
    const req = request(
      new URL(path, url),
      { method, headers: { ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}), ...headers } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', bad);
    req.end(body);
  });
}

const json = { 'content-type': 'application/json' };

function models(): { dir: string; hf: string; other: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cl-serve-guard-'));
  const cfg = { ...qwenBase, num_hidden_layers: 1 };
  const hf = join(dir, 'model');
  writeCheckpoint(hf, cfg, randomWeights(cfg, 3), 'F32', false);
  // another model, outside the served folder
  const other = join(mkdtempSync(join(tmpdir(), 'cl-serve-elsewhere-')), 'model');
  writeCheckpoint(other, cfg, randomWeights(cfg, 4), 'F32', false);
  return { dir, hf, other };
}

const version = async (url: string) => JSON.parse((await raw(url, 'GET', '/model_info', {})).body).weight_version as string;

test('serve without a key: Origin, Host, content type and paths outside the allowed folders are refused; the weights stay', async () => {
  const { hf, other } = models();
  const s = await serve({ spec: hf, port: 0, backend: 'cpu' });
  try {
    const port = new URL(s.url).port;
    const load = (path: string, headers: Record<string, string> = json) =>
      raw(s.url, 'POST', '/update_weights_from_disk', headers, JSON.stringify({ model_path: path, weight_version: 'swapped' }));
    assert.equal(await version(s.url), 'default');

    // a page in the user's browser: a "simple" cross-origin POST (text/plain, no preflight)
    let r = await load(hf, { 'content-type': 'text/plain', origin: 'https://evil.example' });
    assert.equal(r.status, 403);
    assert.match(JSON.parse(r.body).error.message, /refused from a web page .*Origin "https:\/\/evil.example"/);
    // the same POST without an Origin but not JSON: a browser could not send it without a preflight
    r = await load(hf, { 'content-type': 'text/plain' });
    assert.equal(r.status, 415);
    assert.match(JSON.parse(r.body).error.message, /must be application\/json \(got "text\/plain"\)/);
    r = await raw(s.url, 'POST', '/generate', { 'content-type': 'text/plain' }, JSON.stringify({ input_ids: [1, 2], sampling_params: { max_new_tokens: 1 } }));
    assert.equal(r.status, 415, 'generation too: a cross-origin page gets no work done');
    // a DNS-rebinding page: the right address, another name in Host
    r = await raw(s.url, 'GET', '/model_info', { host: `evil.example:${port}` });
    assert.equal(r.status, 403);
    assert.match(JSON.parse(r.body).error.message, /Host "evil.example:\d+" is not a name of this server/);
    assert.equal((await raw(s.url, 'GET', '/model_info', { host: `localhost:${port}` })).status, 200, 'localhost is a name of a loopback server');

    // weights from outside the served folder, directly or through a link inside it
    r = await load(other);
    assert.equal(r.status, 400);
    assert.match(JSON.parse(r.body).message, /is outside the folders this server loads from .*--allow-path/);
    const link = join(hf, 'linked');
    symlinkSync(other, link);
    r = await load(link);
    assert.equal(r.status, 400, 'a link inside the folder to a model outside it');
    assert.match(JSON.parse(r.body).message, /outside the folders/);
    assert.equal(await version(s.url), 'default', 'no refused load changed the weights');

    // an allowed load, as a client of SGLang's sends it
    r = await load(hf);
    assert.equal(r.status, 200, r.body);
    assert.equal(await version(s.url), 'swapped');
  } finally {
    await s.close();
  }
  // --allow-path lets the other folder in
  const t = await serve({ spec: hf, port: 0, backend: 'cpu', allowPaths: [join(other, '..')] });
  try {
    const r = await raw(t.url, 'POST', '/update_weights_from_disk', json, JSON.stringify({ model_path: other, weight_version: 'other' }));
    assert.equal(r.status, 200, r.body);
  } finally {
    await t.close();
  }
});

test('serve on every address without a key generates and scores, and loads no weights', async () => {
  const { hf } = models();
  const s = await serve({ spec: hf, host: '0.0.0.0', port: 0, backend: 'cpu' });
  const url = s.url.replace('0.0.0.0', '127.0.0.1');
  try {
    const r = await raw(url, 'POST', '/update_weights_from_disk', json, JSON.stringify({ model_path: hf }));
    assert.equal(r.status, 403);
    assert.match(r.body, /needs an API key on a non-loopback address: start serve with --api-key/);
    const g = await raw(url, 'POST', '/generate', json, JSON.stringify({ input_ids: [1, 2], sampling_params: { max_new_tokens: 2, temperature: 0 } }));
    assert.equal(g.status, 200, g.body);
  } finally {
    await s.close();
  }
});

test('serve with a key: every request but /health needs it, the client sends $CREDIT_LENS_API_KEY, and no log line holds it', async () => {
  const { hf } = models();
  const key = 'sk-guard-7f3a91c2e4';
  const lines: string[] = [];
  const s = await serve({ spec: hf, port: 0, backend: 'cpu', apiKey: key, log: (m) => lines.push(m) });
  const saved = process.env.CREDIT_LENS_API_KEY;
  try {
    assert.equal((await raw(s.url, 'GET', '/health', {})).status, 200);
    let r = await raw(s.url, 'GET', '/model_info', {});
    assert.equal(r.status, 401);
    assert.match(r.body, /needs an API key: send Authorization: Bearer <key> \(the client reads \$CREDIT_LENS_API_KEY\)/);
    r = await raw(s.url, 'GET', '/model_info', { authorization: 'Bearer not-the-key' });
    assert.equal(r.status, 401);
    assert.match(r.body, /the API key is wrong/);
    r = await raw(s.url, 'GET', '/v1/models', { authorization: `Bearer ${key}` });
    assert.equal(r.status, 200);
    // with the key, a name other than the bound address is the client's business (a tunnel, a DNS name)
    r = await raw(s.url, 'GET', '/model_info', { authorization: `Bearer ${key}`, host: 'gpu-box.lab:30000' });
    assert.equal(r.status, 200);

    const tok = HfTokenizer.fromDir(hf, { useChatTemplate: false });
    delete process.env.CREDIT_LENS_API_KEY;
    await assert.rejects(ServerSampler.connect({ url: s.url, api: 'sglang', tries: 1 }, tok), /answered 401: this server needs an API key/);
    process.env.CREDIT_LENS_API_KEY = key;
    const client = await ServerSampler.connect({ url: s.url, api: 'auto', tries: 1 }, tok);
    try {
      const scored = await client.score([{ prefix: [1, 2, 3], ids: [4, 5] }], 0);
      assert.equal(scored![0].logprobs.length, 2);
    } finally {
      await client.close();
    }
    assert.ok(lines.some((l) => /API key required/.test(l)));
    assert.ok(!lines.some((l) => l.includes(key)), 'the key is in no log line');
  } finally {
    if (saved === undefined) delete process.env.CREDIT_LENS_API_KEY;
    else process.env.CREDIT_LENS_API_KEY = saved;
    await s.close();
  }
});
