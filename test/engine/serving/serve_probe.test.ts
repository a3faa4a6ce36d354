// The probe through a server, for real: `credit-lens serve` of a run's step-2 policy over HTTP on 127.0.0.1, probed
// with each API, against the in-process probe of the same step.
// - SGLang: every continuation carries the engine's own seed (sampling_seed), so the values are bit-identical.
// - vLLM: continuation m samples with seed + m, other draws of the same policy, so the values agree within their
//   standard errors (a coverage check over positions).
// Then the faults: a server killed mid-probe (the probe fails naming the URL, keeps its finished episodes, and the same
// command resumes once the server is back), a server that answers malformed JSON, a model on another vocabulary, and a
// stop while connecting to a server that never answers.
// The faults come from stand-ins around or beside `credit-lens serve` (their comments say which), because no real server
// answers malformed JSON or hangs on demand; the real vLLM's answers are checked in vllm_cpu.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { probeRun, readProbeRecord } from '../../../src/engine/probe/probe';
import { readProbeTable } from '../../../src/engine/rundir/arrow_tables';
import { StoppedError, isUserError } from '../../../src/engine/core/errors';
import { serve } from '../../../src/engine/serving/serve';
import { sevensConfig } from '../fixtures';

async function trainedRun(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'cl-serve-'));
  const cfg = sevensConfig(dir, {
    name: 'serve',
    seed: 5,
    backend: 'wasm',
    grpo: '{ steps: 2, prompts_per_step: 4, group_size: 4, max_new_tokens: 8, eval_every: 2, checkpoint_every: 2 }\nlogging: { probe_every: 2 }',
  });
  return (await train({ configPath: cfg })).runDir;
}

const table = (runDir: string) => {
  const t = readProbeTable(join(runDir, 'probes', 'step-000002.arrow'));
  return [...t.episode.keys()].map((i) => ({ e: t.episode[i], t: t.position[i], v: t.value[i], se: t.value_se[i] }));
};

test('probe through credit-lens serve: SGLang bit-identical to in-process, vLLM within standard errors; provenance recorded', async () => {
  const runDir = await trainedRun();
  const opts = { runDir, step: 2, episodes: 6, rollouts: 8 };
  const local = await probeRun(opts);
  assert.equal(local.sampler?.api, 'local');
  const here = table(runDir);

  const s = await serve({ spec: runDir, step: 2, port: 0, backend: 'wasm' });
  try {
    const viaSglang = await probeRun({ ...opts, replace: true, server: { url: s.url, api: 'auto', concurrency: 8 } });
    assert.equal(viaSglang.sampler?.api, 'sglang', 'auto asks /model_info first');
    assert.equal(viaSglang.sampler?.url, s.url);
    assert.match(viaSglang.sampler!.model!, /policies\/step-000002\.safetensors$/);
    assert.equal(viaSglang.sampler?.weight_version, 'default');
    // the served weights were checked against the step's policy kept here: the same weights, so rounding only
    assert.ok(viaSglang.sampler!.weights_check!.tokens > 10);
    assert.ok(viaSglang.sampler!.weights_check!.max_abs_diff < 1e-4, JSON.stringify(viaSglang.sampler!.weights_check));
    assert.match(viaSglang.sampler!.seeding, /sampling_seed/);
    assert.deepEqual(table(runDir), here, 'the same seeds, the same draws: bit-identical values');
    assert.equal(viaSglang.continuations, local.continuations);
    // the step's policy is kept by the run, so every strategy is scored as in-process
    assert.deepEqual(Object.keys(viaSglang.accuracy!).sort(), Object.keys(local.accuracy!).sort());

    // a probe on another engine is not mixed into this one's table
    await assert.rejects(
      probeRun({ ...opts, episodes: 8, server: { url: s.url, api: 'vllm' } }),
      (e: unknown) => isUserError(e) && /was probed on sglang .* this probe samples on vllm/.test(e.message),
    );
    const viaVllm = await probeRun({ ...opts, replace: true, server: { url: s.url, api: 'vllm' } });
    assert.equal(viaVllm.sampler?.api, 'vllm');
    assert.match(viaVllm.sampler!.seeding, /seed \+ m/);
    const there = table(runDir);
    assert.equal(there.length, here.length);
    let inside = 0;
    let open = 0;
    let differ = 0;
    there.forEach((r, i) => {
      assert.equal(r.e, here[i].e);
      assert.equal(r.t, here[i].t);
      if (here[i].se === 0 && r.se === 0 && r.v === here[i].v) return; // V_n, or a position whose every continuation agrees
      open++;
      if (r.v !== here[i].v) differ++;
      if (Math.abs(r.v - here[i].v) <= 2.5 * Math.hypot(r.se, here[i].se) + 1e-6) inside++;
    });
    assert.ok(open > 10, `${open} positions with sampling noise`);
    assert.ok(differ > 0, 'vLLM seeds children with seed + m: other draws');
    assert.ok(inside / open >= 0.9, `${inside} of ${open} positions agree within 2.5 standard errors`);
  } finally {
    await s.close();
  }
});

test('a server killed mid-probe: the probe fails naming the URL, keeps its finished episodes, and resumes once the server is back', async () => {
  const runDir = await trainedRun();
  let s = await serve({ spec: runDir, step: 2, port: 0, backend: 'wasm' });
  const port = new URL(s.url).port;
  let saved = 0;
  await assert.rejects(
    probeRun({
      runDir,
      step: 2,
      episodes: 8,
      rollouts: 4,
      server: { url: s.url, concurrency: 2 },
      log: (m) => {
        void m;
      },
      progress: () => {
        // after the first episode is saved, the server goes away
        const r = readProbeRecord(runDir, 2);
        if (r && r.episodes.length > 0 && saved === 0) {
          saved = r.episodes.length;
          void s.close();
        }
      },
    }),
    (e: unknown) => isUserError(e) && e.message.includes(s.url) && /failed \d+ times?|answered/.test(e.message),
  );
  const kept = readProbeRecord(runDir, 2)!;
  assert.ok(kept.episodes.length >= 1 && kept.pending.length >= 1, `kept ${kept.episodes.length}, pending ${kept.pending.length}`);
  s = await serve({ spec: runDir, step: 2, port: Number(port), backend: 'wasm' });
  try {
    const logs: string[] = [];
    const r = await probeRun({ runDir, step: 2, episodes: 8, rollouts: 4, server: { url: s.url }, log: (m) => logs.push(m) });
    assert.ok(
      logs.some((m) => /resuming: \d+ episodes? already probed/.test(m)),
      logs.join('\n'),
    );
    assert.equal(r.complete, true);
    assert.equal(r.episodes.length, 8);
  } finally {
    await s.close();
  }
});

test('a stop (Ctrl-C) during a probe through a server ends it within a batch, keeps its finished episodes, and the same command resumes', async () => {
  const runDir = await trainedRun();
  const s = await serve({ spec: runDir, step: 2, port: 0, backend: 'wasm' });
  try {
    const abort = new AbortController();
    let stoppedAt = 0;
    const r = await probeRun({
      runDir,
      step: 2,
      episodes: 8,
      rollouts: 4,
      server: { url: s.url },
      signal: abort.signal,
      progress: () => {
        const rec = readProbeRecord(runDir, 2);
        if (rec && rec.episodes.length > 0 && !abort.signal.aborted) {
          stoppedAt = performance.now();
          abort.abort();
        }
      },
    });
    assert.equal(r.complete, false);
    assert.ok(r.episodes.length >= 1 && r.pending.length >= 1);
    assert.equal(r.accuracy, null, 'a stopped probe leaves the accuracy to the probe that finishes');
    assert.ok(performance.now() - stoppedAt < 5000, `stopped ${(performance.now() - stoppedAt).toFixed(0)} ms after the signal`);
    const again = await probeRun({ runDir, step: 2, episodes: 8, rollouts: 4, server: { url: s.url } });
    assert.equal(again.complete, true);
    assert.equal(again.episodes.length, 8);
  } finally {
    await s.close();
  }
});

/** A stand-in, since no real server answers this way on demand: an HTTP server on 127.0.0.1 that answers each route with a fixed status and body. */
async function fake(routes: Record<string, [number, string]>): Promise<{ url: string; server: Server; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    const key = `${req.method} ${req.url}`;
    seen.push(key);
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const r = routes[key] ?? [404, JSON.stringify({ detail: 'Not Found' })];
      res.writeHead(r[0], { 'content-type': 'application/json' });
      res.end(r[1]);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

test('a server answering malformed JSON, or refusing the run tokenizer’s ids, is a clear error naming the URL and both vocabularies', async () => {
  const runDir = await trainedRun();
  const info = JSON.stringify({ model_path: '/models/x', tokenizer_path: '/models/x', is_generation: true, weight_version: 'v1' });
  const broken = await fake({ 'GET /model_info': [200, info], 'POST /generate': [200, '{"text": "abc", "meta_info": '] });
  try {
    await assert.rejects(
      probeRun({ runDir, step: 2, episodes: 2, rollouts: 2, server: { url: broken.url } }),
      (e: unknown) => isUserError(e) && e.message.includes(`${broken.url}/generate answered with malformed JSON`),
    );
  } finally {
    broken.server.close();
  }
  // SGLang refuses an id outside its vocabulary with a 400 in its error shape
  const small = await fake({
    'GET /model_info': [200, info],
    'POST /generate': [400, JSON.stringify({ error: { message: 'The input_ids 63 is out of vocabulary (vocab_size 32).' } })],
  });
  try {
    await assert.rejects(
      probeRun({ runDir, step: 2, episodes: 2, rollouts: 2, server: { url: small.url, api: 'sglang' } }),
      (e: unknown) =>
        isUserError(e) &&
        e.message.includes(small.url) &&
        /refuses token id \d+, which the run's tokenizer has \(its vocabulary: \d+ ids, EOS \d+\)/.test(e.message) &&
        e.message.includes('vocab_size 32'),
    );
  } finally {
    small.server.close();
  }
  // nothing was probed by either
  const rec = readProbeRecord(runDir, 2);
  assert.equal(rec, null);
  void readFileSync;
});

test('a stop while the client connects to a server that accepts and never answers ends the probe at once', async () => {
  const runDir = await trainedRun();
  // a stand-in: a socket that is accepted and never answered, which no real server does on demand
  const held: import('node:net').Socket[] = [];
  const silent = createNetServer((sock) => held.push(sock));
  await new Promise<void>((ok) => silent.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  try {
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 300);
    const t0 = performance.now();
    await assert.rejects(
      probeRun({ runDir, step: 2, episodes: 2, rollouts: 2, server: { url, api: 'sglang' }, signal: stop.signal }),
      (e: unknown) => e instanceof StoppedError && e.message === `stopped while connecting to ${url}`,
    );
    assert.ok(performance.now() - t0 < 5000, `ended ${Math.round(performance.now() - t0)} ms after it began, not at the 10-minute timeout`);
    assert.equal(readProbeRecord(runDir, 2), null, 'nothing probed');
  } finally {
    held.forEach((s) => s.destroy());
    silent.close();
  }
});

test("a server holding another step's policy is refused: the step's tokens scored there and here differ past rounding", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-serve-other-step-'));
  const cfg = sevensConfig(dir, {
    name: 'steps',
    seed: 5,
    backend: 'wasm',
    grpo: '{ steps: 2, prompts_per_step: 4, group_size: 4, max_new_tokens: 8, eval_every: 2, checkpoint_every: 2, lr: 0.05 }\nlogging: { probe_every: 1 }',
  });
  const runDir = (await train({ configPath: cfg })).runDir;
  const s = await serve({ spec: runDir, step: 2, port: 0, backend: 'wasm' });
  try {
    await assert.rejects(
      probeRun({ runDir, step: 1, episodes: 2, rollouts: 2, server: { url: s.url, api: 'sglang' } }),
      (e: unknown) =>
        isUserError(e) &&
        /does not hold the policy that sampled step 1: \d+ of its tokens scored there and with .*step-000001\.safetensors here differ by \d\.\d+ nats on average/.test(
          e.message,
        ),
    );
    assert.equal(readProbeRecord(runDir, 1), null, 'nothing probed');
  } finally {
    await s.close();
  }
});
