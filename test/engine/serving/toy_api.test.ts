// What adding a server API takes, shown by doing it: on a copy of src/, the test adds a toy JSON API in exactly two
// places (its file in src/engine/server_apis/, one line in apis/catalog.ts), builds the engine CLI from that copy,
// and then `credit-lens serve` answers the toy's routes and `credit-lens probe --server --server-api plain` samples and
// scores through them. The toy's rows carry the engine's own seeds, so its probe values equal the in-process probe's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { addServerApi, buildCli, copySources, writeToyConfig } from '../source_copy';
import { readProbeTable } from '../../../src/engine/rundir/arrow_tables';

const API_FILE = `// Toy: a minimal JSON API. GET /plain/info names the model; POST /plain/generate takes rows of {prefix, seed, max_new};
// POST /plain/score takes {prefix, ids} items and answers each completion token's log-prob and top K.
import type { Continuation } from '../model/sampling';
import { idsField, intField, requestObject } from './fields';
import { BadRequest, isObj, type RowSettings, type ServeBackend, type ServerApiSpec } from './types';

type Row = { prefix: number[]; seed: number; max_new: number };

async function generate(server: ServeBackend, raw: unknown): Promise<unknown> {
  server.checkReady();
  const b = requestObject(raw);
  if (!Array.isArray(b.rows) || !b.rows.every(isObj)) throw new BadRequest('rows must be a list of {prefix, seed, max_new}', 'rows');
  const rows = (b.rows as Record<string, unknown>[]).map((r) => ({
    prefix: idsField(r.prefix, 'prefix', server.vocabSize),
    seed: intField(r.seed, 'seed', 0, 0),
    max_new: intField(r.max_new, 'max_new', 1, 16),
  }));
  const settings = (r: Row): RowSettings => ({
    maxNewTokens: r.max_new,
    temperature: typeof b.temperature === 'number' ? b.temperature : 1,
    topP: typeof b.top_p === 'number' ? b.top_p : 1,
    stop: Array.isArray(b.stop) ? (b.stop as string[]) : [],
    stopIds: Array.isArray(b.stop_ids) ? (b.stop_ids as number[]) : [],
    ignoreEos: false,
    seed: r.seed,
  });
  const out: Continuation[] = await Promise.all(
    rows.map(async (r) => {
      server.checkLength(r.prefix, r.max_new, 'prefix');
      const [c] = await server.submit({ prefix: r.prefix, tail: [], seeds: [r.seed], maxNewTokens: r.max_new }, server.settingsOf(settings(r)));
      return c;
    }),
  );
  return {
    rows: out.map((c, i) => {
      const f = server.finishOf(c, settings(rows[i]));
      return { ids: c.ids, logprobs: c.logprobs, finish: f.reason === 'length' ? 'length' : 'stop', matched: f.matched };
    }),
  };
}

async function score(server: ServeBackend, raw: unknown): Promise<unknown> {
  server.checkReady();
  const b = requestObject(raw);
  const items = (Array.isArray(b.items) ? b.items : []) as { prefix: number[]; ids: number[] }[];
  const K = intField(b.top_k, 'top_k', 0, 0, 20);
  const rows = await server.scoreRows(items.map((it) => ({ ids: [...it.prefix, ...it.ids], start: it.prefix.length })), K, 1, false);
  return { items: rows.map((r) => ({ logprobs: r.lp, top: r.top.map((list) => ({ ids: list.map((x) => x[1]), logprobs: list.map((x) => x[0]) })) })) };
}

export const plain = {
  name: 'plain',
  summary: 'plain: a test toy (GET /plain/info, POST /plain/generate)',
  identifyRoutes: 'GET /plain/info',
  seeding: 'each row carries its own seed',
  async identify(call, tries) {
    const r = await call('GET', '/plain/info', undefined, { tries });
    const body = r.body as { api?: unknown; model?: unknown } | null;
    return r.status === 200 && body?.api === 'plain' ? { model: String(body.model), weightVersion: null } : null;
  },
  batchRows: 64,
  generate: {
    path: '/plain/generate',
    body: (reqs, s) => ({
      rows: reqs.flatMap((r) => r.seeds.map((seed) => ({ prefix: r.prefix, seed, max_new: r.maxNewTokens }))),
      temperature: s.temperature,
      top_p: s.topP,
      stop_ids: s.eosIds,
      stop: s.stop,
    }),
    parse: (body, rows) => {
      const out = (body as { rows?: unknown } | null)?.rows;
      if (!Array.isArray(out) || out.length !== rows) return \`expected \${rows} rows\`;
      return out as { ids: number[]; logprobs: number[]; finish: string; matched: number | string | null }[];
    },
  },
  score: {
    path: '/plain/score',
    body: (items, topK) => ({ items: items.map((it) => ({ prefix: it.prefix, ids: it.ids })), top_k: topK }),
    parse: (body, items) => {
      const out = (body as { items?: unknown } | null)?.items;
      if (!Array.isArray(out) || out.length !== items.length) return \`expected \${items.length} items\`;
      return out as { logprobs: number[]; top: { ids: number[]; logprobs: number[] }[] }[];
    },
  },
  routes: {
    'GET /plain/info': (server: ServeBackend) => ({ api: 'plain', model: server.path }),
    'POST /plain/generate': generate,
    'POST /plain/score': score,
  },
  stateRoutes: [],
  routePrefix: '/plain/',
  errorBody: (_status, message) => ({ error: message }),
} as const satisfies ServerApiSpec;
`;

test('a new server API is one file and one catalog line: serve answers it and the probe samples through it', { timeout: 300_000 }, async () => {
  const dir = copySources('cl-toy-api-');
  addServerApi(dir, { file: 'plain.ts', source: API_FILE, exportName: 'plain' });
  const cli = await buildCli(dir);
  writeToyConfig(dir, {
    grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 12, eval_every: 2, checkpoint_every: 2 }',
    extra: 'logging: { probe_every: 2, tensorboard: false }',
  });
  // the config and the CLI take the new API's name from the list
  const schema = JSON.parse(cli('schema').stdout);
  assert.ok(schema.properties.rollout.properties.api.enum.includes('plain'), "rollout.api offers the toy's name");
  const tr = cli('train', 'toy.credit.yaml');
  assert.equal(tr.status, 0, tr.stderr);
  const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);

  const probe = (...extra: string[]) => cli('probe', runDir, '--step', '2', '--episodes', '3', '--rollouts', '4', '--json', ...extra);
  const local = probe();
  assert.equal(local.status, 0, local.stderr);
  const table = () => {
    const t = readProbeTable(join(runDir, 'probes', 'step-000002.arrow'));
    return [...t.episode.keys()].map((i) => [t.episode[i], t.position[i], t.value[i]]);
  };
  const here = table();
  assert.ok(here.length > 0, 'the in-process probe valued positions');

  const server = spawn(process.execPath, [join(dir, 'dist/engine/cli.js'), 'serve', runDir, '--step', '2', '--port', '0', '--backend', 'wasm'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  server.stderr.on('data', (c: Buffer) => (log += c.toString()));
  try {
    const url = await new Promise<string>((ok, bad) => {
      let out = '';
      server.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        const m = /^(http:\/\/\S+)\n/m.exec(out);
        if (m) ok(m[1]);
      });
      server.once('exit', (code) => bad(new Error(`serve exited ${code}: ${log}`)));
    });
    assert.match(log, /plain: \/plain\/generate/, "serve lists the toy's routes");
    const info = (await (await fetch(`${url}/plain/info`)).json()) as { api: string; model: string };
    assert.equal(info.api, 'plain');
    // a refusal in the toy's own error shape
    const bad = await fetch(`${url}/plain/generate`, { method: 'POST', body: JSON.stringify({ rows: 3 }), headers: { 'content-type': 'application/json' } });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: string }).error, /rows must be a list/);

    const via = await new Promise<{ status: number | null; stdout: string; stderr: string }>((ok) => {
      const p = spawn(
        process.execPath,
        [
          join(dir, 'dist/engine/cli.js'),
          'probe',
          runDir,
          '--step',
          '2',
          '--episodes',
          '3',
          '--rollouts',
          '4',
          '--json',
          '--replace',
          '--server',
          url,
          '--server-api',
          'plain',
        ],
        { cwd: dir },
      );
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      p.on('exit', (status) => ok({ status, stdout, stderr }));
    });
    assert.equal(via.status, 0, via.stderr);
    const record = JSON.parse(readFileSync(join(runDir, 'probes', 'step-000002.json'), 'utf8')) as { sampler: { api: string; url: string; seeding: string } };
    assert.equal(record.sampler.api, 'plain');
    assert.equal(record.sampler.url, url);
    assert.equal(record.sampler.seeding, 'each row carries its own seed');
    // the toy passes each continuation's own seed, as SGLang's sampling_seed does: the same draws as in-process
    assert.deepEqual(table(), here);
  } finally {
    server.kill('SIGTERM');
  }
});
