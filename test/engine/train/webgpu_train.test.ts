// Training on the webgpu backend (tfjs-backend-webgpu on Mesa's lavapipe here, a software Vulkan adapter that .ci/run
// installs; correctness only). One GRPO step of every credit strategy on webgpu must be the step on cpu: the same
// rollouts, loss, gradient norm, credit and updated parameters, to 1e-4 relative (webgpu.test.ts says why 1e-4). The
// webgpu step reads every micro-batch ahead of its taped pass (no synchronous reads there), so this also checks that
// reading ahead gives the update the in-tape read gives. Then a 2-step run on webgpu from a config, with checkpoints,
// and its seeded reproducibility.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../src/engine/config/config';
import { getStrategy, strategyNames } from '../../../src/engine/credit';
import { creditParams } from '../../../src/engine/credit/types';
import { Adam } from '../../../src/engine/model/optim';
import { grpoStep } from '../../../src/engine/train/grpo_step';
import { buildSession, storeFrozenWeights } from '../../../src/engine/session/session';
import { Transformer } from '../../../src/engine/model/model';
import { train } from '../../../src/engine/train/train';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { relErr, sevensConfig, tinyConfig } from '../fixtures';

const TOL = 1e-4;
const rel = (a: number, b: number) => Math.abs(a - b) / Math.max(1e-6, Math.abs(b));

/** A GRPO step on webgpu against the step on cpu: the same rollouts, and loss and gradient norm within TOL (not 0). */
function sameStep(gpu: Awaited<ReturnType<typeof grpoStep>>, cpu: Awaited<ReturnType<typeof grpoStep>>): void {
  assert.deepEqual(
    gpu.episodes.map((e) => e.text),
    cpu.episodes.map((e) => e.text),
    'same rollouts',
  );
  assert.ok(cpu.row.grad_norm! > 0, 'a zero gradient would make the comparison vacuous');
  assert.ok(rel(gpu.row.loss!, cpu.row.loss!) < TOL, `loss ${gpu.row.loss} vs ${cpu.row.loss}`);
  assert.ok(rel(gpu.row.grad_norm!, cpu.row.grad_norm!) < TOL, `grad_norm ${gpu.row.grad_norm} vs ${cpu.row.grad_norm}`);
}

const sevens = (dir: string, backend: string) =>
  sevensConfig(dir, {
    name: `wg-${backend}`,
    seed: 3,
    backend,
    grpo: '{ steps: 1, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, lr: 0.01, epochs_per_step: 2, eval_every: 1, gradient_accumulation_steps: 2 }',
  });

/** Strategies that need more than the sevens task gives: cal's rule oracle checks countdown / arithmetic, reward_variance a trained importance net. */
const ELSEWHERE = new Set(['cal', 'reward_variance']);

for (const strategy of strategyNames().filter((n) => !ELSEWHERE.has(n))) {
  test(`one GRPO step of ${strategy} on webgpu equals the step on cpu (2 micro-batches, 2 PPO epochs)`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-webgpu-'));
    try {
      const sets = [`credit.strategy=${strategy}`, ...(strategy === 'mc_value' ? ['credit.mc_value.segment_len=4', 'credit.mc_value.rollouts=2'] : [])];
      const run = async (backend: 'cpu' | 'webgpu') => {
        const { config } = loadConfig(sevens(dir, backend), sets);
        const s = await buildSession(config);
        assert.equal(s.backend.backend, backend);
        const opt = new Adam(config.grpo.lr);
        const head = getStrategy(strategy).createHead?.(s.modelCfg.dModel, 7, { ...creditParams(config.credit), init_std: 0.5 }) ?? null;
        const r = await grpoStep({ session: s, optimizer: opt, step: 1, head });
        const params = new Map<string, Float32Array>();
        for (const [n, v] of [...s.model.params, ...(head?.params ?? [])]) params.set(n, Float32Array.from(await v.data()));
        opt.dispose();
        head?.dispose();
        s.model.dispose();
        return { r, params };
      };
      const cpu = await run('cpu');
      const gpu = await run('webgpu');
      sameStep(gpu.r, cpu.r);
      for (const key of ['logprobs', 'weights', 'effAdv'] as const)
        cpu.r.tok[key].forEach((row, i) =>
          row.forEach((v, t) =>
            assert.ok(Math.abs(gpu.r.tok[key][i][t] - v) < TOL * Math.max(1, Math.abs(v)), `${key}[${i}][${t}] ${gpu.r.tok[key][i][t]} vs ${v}`),
          ),
        );
      for (const [name, w] of cpu.params) {
        // the head's bias has an exact gradient of 0 (softmax ignores a shift): its float one is rounding noise
        if (name === 'attribution_head.bias') continue;
        const e = relErr(gpu.params.get(name)!, w);
        assert.ok(e < TOL, `${name} after the update: relative difference ${e}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

// model.torch_dtype: webgpu packs the frozen projections and multiplies them with its 16-bit kernel, cpu rounds them in
// place; the step must be the same. Under LoRA every projection is frozen; with trainable_layers the first block's are,
// and the KL reference (kl_beta > 0) holds all of its projections in 16 bits.
for (const sets of [
  ['model.lora={r: 4}', 'model.torch_dtype=float16'],
  ['model.n_layers=2', 'model.trainable_layers=1', 'model.torch_dtype=bfloat16', 'grpo.kl_beta=0.1'],
]) {
  test(`one GRPO step with ${sets.join(', ')} on webgpu equals the step on cpu`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cl-webgpu-half-'));
    try {
      const run = async (backend: 'cpu' | 'webgpu') => {
        const { config } = loadConfig(sevens(dir, backend), sets);
        const logs: string[] = [];
        const s = await buildSession(config, (m) => logs.push(m));
        let ref: Transformer | null = null;
        if (config.grpo.kl_beta > 0) {
          ref = Transformer.fromWeights(s.modelCfg, await s.model.readWeights());
          await storeFrozenWeights(config, ref, (m) => logs.push(`reference: ${m}`), { all: true });
        }
        const opt = new Adam(config.grpo.lr);
        const r = await grpoStep({ session: s, optimizer: opt, step: 1, ref });
        const params = new Map<string, Float32Array>();
        for (const [n, v] of s.model.trainable) params.set(n, Float32Array.from(await v.data()));
        opt.dispose();
        ref?.dispose();
        s.model.dispose();
        return { r, params, logs: logs.filter((l) => l.includes('torch_dtype')) };
      };
      const cpu = await run('cpu');
      const gpu = await run('webgpu');
      const frozen = sets.includes('model.torch_dtype=float16') ? 'float16' : 'bfloat16';
      assert.ok(gpu.logs.length >= 1 && gpu.logs.every((l) => /stored in 16 bits, [\d.]+ (GB|MB|KB|B) saved/.test(l)), gpu.logs.join('\n'));
      assert.ok(cpu.logs.length >= 1 && cpu.logs.every((l) => l.includes(`rounded to ${frozen} and kept in float32`)), cpu.logs.join('\n'));
      assert.equal(gpu.logs.length, storedModels(sets), 'the policy, and the reference where there is one');
      sameStep(gpu.r, cpu.r);
      for (const [name, w] of cpu.params) {
        const e = relErr(gpu.params.get(name)!, w);
        assert.ok(e < TOL, `${name} after the update: relative difference ${e}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** How many models a step with these sets stores in 16 bits: the policy, and a KL reference with kl_beta > 0. */
function storedModels(sets: string[]): number {
  return sets.some((x) => x.startsWith('grpo.kl_beta=')) ? 2 : 1;
}

test('a 2-step run on webgpu from a config (SFT, GRPO with cal and its rule oracle, checkpoints): run.json records the adapter; the same seed gives the same run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-webgpu-run-'));
  try {
    const cfg = tinyConfig(dir, 'arithmetic', 'credit: { strategy: cal, cal: { provider: rule } }\n');
    const go = (name: string) => train({ configPath: cfg, sets: ['backend=webgpu', 'grpo.steps=2', 'sft.steps=3', `name=${name}`] });
    const a = await go('a');
    assert.equal(a.status, 'completed');
    const run = JSON.parse(readFileSync(join(a.runDir, 'run.json'), 'utf8'));
    assert.equal(run.backend, 'webgpu');
    assert.match(run.backend_reason, /software adapter/);
    assert.match(run.adapter.description, /llvmpipe/);
    assert.equal(run.adapter.software, true);
    const rows = readMetrics(a.runDir);
    assert.deepEqual(
      rows.filter((m) => m.phase === 'grpo').map((m) => m.step),
      [1, 2],
    );
    for (const m of rows) for (const [k, v] of Object.entries(m)) if (typeof v === 'number') assert.ok(Number.isFinite(v), `${k} finite`);
    const b = await go('b');
    const strip = (m: Record<string, unknown>) => Object.fromEntries(Object.entries(m).filter(([k]) => !/time|per_s|seconds/.test(k)));
    assert.deepEqual(readMetrics(b.runDir).map(strip), rows.map(strip), 'seeded runs on one adapter are reproducible');
    const ta = readTokenTable(join(a.runDir, 'tokens', 'step-000002.arrow'));
    const tb = readTokenTable(join(b.runDir, 'tokens', 'step-000002.arrow'));
    assert.deepEqual(Array.from(tb.logprob), Array.from(ta.logprob));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
