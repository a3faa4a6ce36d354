// The seeds' model size: a Qwen2.5-0.5B-shaped folder (24 layers, d 896, 14 heads over 2 kv heads, d_ff 4864,
// vocabulary 151,936, tied embeddings, rope θ 1e6, random BF16 weights, the real Qwen tokenizer) loads, scores an
// imported veRL dump and samples, on CPU (wasm-blas). The expected numbers come from PyTorch running the same folder
// (bench/torch_hf.py: its own safetensors reader and a plain-PyTorch Qwen2 with repeat_kv), not from this engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../../../src/engine/model/backend';
import { loadHfModel } from '../../../src/engine/model/hf';
import { generate } from '../../../src/engine/model/sampler';
import { makeRng } from '../../../src/engine/core/rng';
import { importRollouts } from '../../../src/engine/import/import';
import { readMetrics, stepFile } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { probeRun } from '../../../src/engine/probe/probe';
import { readEpisodeTable, readProbeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { pairedRollouts } from '../../../src/engine/importance/paired';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { qwen05bFolder, TorchHf } from './qwen05b';

const { dir: MODEL, params } = qwen05bFolder();

test('the 0.5B-shaped folder: 494,032,768 parameters (Qwen2.5-0.5B’s count), read by config.json as the model is', () => {
  assert.equal(params, 494_032_768);
});

test('credit-lens import of a veRL dump with --model the 0.5B folder: log-probs and entropies over the full vocabulary equal PyTorch’s (blocked lm head)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-05b-import-'));
  const torch = TorchHf.start();
  try {
    const src = join(dir, 'verl');
    mkdirSync(src);
    const rows = [
      { input: 'Using 3, 5: make 8.', output: ' 3 + 5 = 8', score: 1, step: 1 },
      { input: 'Using 3, 5: make 8.', output: ' 5 - 3 = 2, so no.', score: 0, step: 1 },
    ];
    writeFileSync(join(src, 'gen.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    // a small block budget: the lm head and log-softmax run in pieces of 2^20 logits (7 vocabulary blocks per row)
    const r = await importRollouts({
      source: src,
      model: MODEL,
      out: join(dir, 'runs'),
      sets: ['backend=wasm-blas'],
      chatTemplate: 'as-logged',
      batchBudget: 1 << 20,
      log: () => {},
    });
    assert.equal(r.records, 2);
    const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', 1));
    const tt = readTokenTable(stepFile(r.runDir, 'tokens', 1));
    const tok = HfTokenizer.fromDir(MODEL, { useChatTemplate: false });
    await torch.ask({ op: 'load', dir: MODEL });
    const prompt = tok.encodePrompt(rows[0].input);
    const comps = [0, 1].map((e) => tok.encode(ep.completion[e]));
    const ref = await torch.ask<{ logp: number[][]; entropy: number[][] }>({ op: 'score', prompt, completions: comps });
    let n = 0;
    for (let e = 0; e < 2; e++) {
      const idx = [...tt.episode.keys()].filter((i) => tt.episode[i] === e);
      assert.equal(idx.length, comps[e].length);
      idx.forEach((row, t) => {
        assert.equal(tt.token_id[row], comps[e][t]);
        // float32 on both sides, summed in different orders over 24 layers and 151,936 logits
        assert.ok(Math.abs(tt.logprob[row] - ref.logp[e][t]) < 2e-3, `episode ${e} token ${t}: ℓ ${tt.logprob[row]} vs PyTorch ${ref.logp[e][t]}`);
        assert.ok(Math.abs(tt.entropy[row] - ref.entropy[e][t]) < 2e-3, `episode ${e} token ${t}: H ${tt.entropy[row]} vs PyTorch ${ref.entropy[e][t]}`);
        n++;
      });
    }
    assert.ok(n >= 15, `${n} tokens compared`);
  } finally {
    torch.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('sampling at 0.5B: greedy decoding with the KV cache gives PyTorch’s tokens and log-probs', async () => {
  const torch = TorchHf.start();
  try {
    await initBackend('wasm-blas');
    const { model, tokenizer } = loadHfModel(MODEL, { useChatTemplate: false });
    const prompts = [tokenizer.encode('Using 3, 5: make 8.'), tokenizer.encode('Using 2, 7: make 9.')];
    assert.equal(prompts[0].length, prompts[1].length, 'PyTorch side decodes prompts of one length');
    const ours = await generate(model, prompts, { maxNewTokens: 6, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(1) });
    model.dispose();
    await torch.ask({ op: 'load', dir: MODEL });
    const ref = await torch.ask<{ ids: number[][]; logp: number[][] }>({ op: 'decode', prompts, new: 6, greedy: true });
    ours.forEach((s, b) => {
      assert.deepEqual(s.ids, ref.ids[b], `row ${b}`);
      s.logprobs.forEach((l, t) => assert.ok(Math.abs(l - ref.logp[b][t]) < 2e-3, `row ${b} token ${t}: ${l} vs ${ref.logp[b][t]}`));
    });
  } finally {
    torch.stop();
  }
});

test('at 0.5B on CPU: a LoRA GRPO run trains and keeps its policy, credit-lens probe samples continuations of its episodes, and rollouts paired samples pairs', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-05b-run-'));
  try {
    const cfg = join(dir, 'lora.credit.yaml');
    writeFileSync(
      cfg,
      [
        'name: lora05b',
        'seed: 1',
        'backend: wasm-blas',
        `model: { source: hf, path: ${MODEL}, lora: { r: 8 } }`,
        'task: { name: countdown, train_size: 16, eval_size: 2 }',
        'sft: { steps: 0 }',
        'grpo: { steps: 1, prompts_per_step: 1, group_size: 2, max_new_tokens: 8, eval_every: 100, checkpoint_every: 100 }',
        'logging: { probe_every: 1 }',
        '',
      ].join('\n'),
    );
    const run = await train({ configPath: cfg });
    assert.equal(run.status, 'completed');
    const m = readMetrics(run.runDir).find((r) => r.phase === 'grpo')!;
    assert.ok(Number.isFinite(m.loss!) && Number.isFinite(m.grad_norm!) && (m.step_time_s as number) > 0);
    assert.ok(existsSync(join(run.runDir, 'policies', 'step-000001.safetensors')), 'the policy that sampled step 1 is kept for the probe');
    const probe = await probeRun({ runDir: run.runDir, step: 1, episodeList: [0], rollouts: 2, positions: 'segments:2' });
    assert.equal(probe.complete, true);
    const table = readProbeTable(probe.table);
    assert.ok(table.position.length >= 3, 'positions 0, a segment boundary and n');
    assert.ok([...table.value].every((v) => v >= 0 && v <= 1));
    const paired = await pairedRollouts({ configPath: cfg, groups: 1, outputDir: join(dir, 'paired'), log: () => {} });
    assert.equal(paired.groups, 1);
    assert.equal(paired.rows, 2, 'one row per member of the group’s one pair');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
