// `credit-lens bench` / `npm run bench`: the engine's figures next to a PyTorch CPU reference measured in the
// same invocation (bench/torch_ref.py under Debian's /usr/bin/python3), printed as ratios to it.
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { initBackend } from '../model/backend';
import { loadConfig } from '../config/config';
import { policyLossAndGrad } from '../train/grpo';
import { Transformer, type ModelConfig } from '../model/model';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { makeRng } from '../core/rng';
import { completionLogprobs, policyBatch } from '../train/rollout';
import { generate } from '../model/sampler';
import { buildSession } from '../train/session';
import { grpoStep } from '../train/train';

// The reference config of the issue: 2 layers, d_model 128, 4 heads, d_ff 512, vocab 64, sequence 64, batch 32.
export const REFERENCE: ModelConfig = {
  arch: 'qwen2', vocabSize: 64, dModel: 128, nLayers: 2, nHeads: 4, nKvHeads: 4, dFf: 512, maxSeqLen: 160,
  ropeTheta: 10000, rmsEps: 1e-6, tieEmbeddings: true, qkvBias: true,
};

/** The small model of issue 13: 4 layers, d_model 256, 8 heads, d_ff 1024, vocab 512 (train [16, 128], rollout 32 × 128). */
export const SMALL: ModelConfig = { ...REFERENCE, vocabSize: 512, dModel: 256, nLayers: 4, nHeads: 8, nKvHeads: 8, dFf: 1024, maxSeqLen: 160 };

/**
 * FLOPs of one training step counted from the shapes, the same count as bench/torch_ref.py: per token and layer the
 * q/k/v/o projections (2d² + 2d·kv), the MLP (3d·ff) and the attention products as executed (2T·d), plus the tied
 * LM head (d·V); ×2 for multiply-adds, ×3 for forward and backward.
 */
export function trainStepFlops(c: ModelConfig, B: number, T: number): number {
  const d = c.dModel;
  const kv = c.nKvHeads * (d / c.nHeads);
  const perToken = c.nLayers * (2 * d * d + 2 * d * kv + 3 * d * c.dFf + 2 * T * d) + d * c.vocabSize;
  return 3 * 2 * B * T * perToken;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** One training step exactly as GRPO runs it: forward, log-probs, loss + grad from grpo.ts, backward, clip, Adam. */
export function trainStepMs(iters: number, warmup: number, cfg: ModelConfig = REFERENCE, B = 32, T = 64): number {
  return trainStepTimes(iters, warmup, cfg, B, T).median;
}

/**
 * One training step exactly as GRPO runs it (forward, log-probs, loss + grad from grpo.ts, backward, clip, Adam) on a
 * fixed random batch, as a closure: timed by trainStepTimes, profiled per kernel by profile.ts.
 */
export function trainStepRunner(cfg: ModelConfig = REFERENCE, B = 32, T = 64): { step(): void; dispose(): void } {
  const model = Transformer.init(cfg, 1);
  const rng = makeRng(2);
  const prompts = Array.from({ length: B }, () => [1]);
  const comps = Array.from({ length: B }, () => Array.from({ length: T - 1 }, () => 3 + Math.floor(rng() * (cfg.vocabSize - 4))));
  const adv = Array.from({ length: B }, () => rng() * 2 - 1);
  const opt = new Adam(1e-4);
  return {
    step() {
      const pb = policyBatch(prompts, comps, 0);
      const { grads } = tf.variableGrads(() => {
        const { logp } = completionLogprobs(model, pb, 1);
        const lp = logp.arraySync();
        const r = policyLossAndGrad(
          { logprobs: lp, oldLogprobs: lp, advantages: pb.mask.map((row, b) => row.map((m) => m * adv[b])), mask: pb.mask },
          { clipEps: 0.2, clipEpsHigh: 0.2, klBeta: 0, lossAgg: 'token_mean', maxNewTokens: T },
        );
        return logp.mul(tf.tensor2d(r.grad)).sum() as tf.Scalar;
      }, [...model.params.values()]);
      const byVar = new Map([...model.params].map(([n, v]) => [v.name, n]));
      const named = Object.fromEntries(Object.entries(grads).map(([k, g]) => [byVar.get(k)!, g]));
      const { grads: clipped } = clipByGlobalNorm(named, 1.0);
      opt.apply(model.params, clipped);
      tf.dispose(Object.values(clipped));
      pb.dispose();
    },
    dispose() {
      opt.dispose();
      model.dispose();
    },
  };
}

/** The step's median and its spread (min, max) over `iters` timed repetitions after `warmup`. */
export function trainStepTimes(iters: number, warmup: number, cfg: ModelConfig = REFERENCE, B = 32, T = 64): { median: number; min: number; max: number } {
  const runner = trainStepRunner(cfg, B, T);
  const times: number[] = [];
  for (let i = 0; i < warmup + iters; i++) {
    const t0 = performance.now();
    runner.step();
    if (i >= warmup) times.push(performance.now() - t0);
  }
  runner.dispose();
  return { median: median(times), min: Math.min(...times), max: Math.max(...times) };
}

/** `n` sequences × `newTokens` new tokens with the KV cache, prompt of 8 tokens: tokens per second. */
export function rolloutTokensPerS(reps: number, cfg: ModelConfig = REFERENCE, n = 64, newTokens = 64): number {
  const model = Transformer.init(cfg, 1);
  const prompts = Array.from({ length: n }, (_, i) => Array.from({ length: 8 }, (_, j) => 3 + ((i * 7 + j * 3) % 60)));
  const rng = makeRng(3);
  generate(model, prompts.slice(0, 4), { maxNewTokens: 4, temperature: 1, topP: 1, eosId: -1, rng });
  const times: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    const out = generate(model, prompts, { maxNewTokens: newTokens, temperature: 1, topP: 1, eosId: -1, rng });
    const n = out.reduce((a, s) => a + s.ids.length, 0);
    times.push(n / ((performance.now() - t0) / 1000));
  }
  model.dispose();
  return median(times);
}

interface TorchFigures { train_step_ms: number; rollout_tokens_per_s: number; train_step_gflops?: number; train_step_spread_ms?: [number, number] }
function torchReference(): (TorchFigures & { torch_version: string; small?: TorchFigures; sgemm_gflops?: number }) | { error: string } {
  const py = '/usr/bin/python3';
  const script = [join(__dirname, '../../bench/torch_ref.py'), resolve('bench/torch_ref.py')].find(existsSync);
  if (!existsSync(py) || !script) return { error: 'no /usr/bin/python3 or bench/torch_ref.py' };
  const r = spawnSync(py, [script, '--json'], { encoding: 'utf8', timeout: 600_000 });
  const last = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(last);
  } catch {
    return { error: `torch_ref.py printed no JSON (exit ${r.status}): ${(r.stderr ?? '').slice(-300)}` };
  }
}

/**
 * Peak live tensor bytes (tf.profile) of one GRPO step of the example: `none` as the example runs it (its
 * grpo.gradient_accumulation_steps), and the attribution head against plain GRPO both in one pass (the head trains on the
 * whole batch), for seed 000's ~15–20 % extra memory of the head.
 */
export async function attributionMemory(configPath: string): Promise<{ none: number; attribution: number; none_one_pass: number }> {
  const out = { none: 0, attribution: 0, none_one_pass: 0 };
  const runs: [keyof typeof out, string, string[]][] = [
    ['none', 'none', []],
    ['none_one_pass', 'none', ['grpo.gradient_accumulation_steps=1']],
    ['attribution', 'attribution', ['grpo.gradient_accumulation_steps=1']],
  ];
  for (const [key, strategy, sets] of runs) {
    const { config } = loadConfig(configPath, [`credit.strategy=${strategy}`, ...sets]);
    const s = await buildSession(config);
    const opt = new Adam(config.grpo.lr);
    const { getStrategy } = await import('../credit');
    const head = getStrategy(strategy).createHead?.(s.modelCfg.dModel, 1, { ...(await import('../credit/types')).DEFAULT_CREDIT_PARAMS }) ?? null;
    await grpoStep({ session: s, optimizer: opt, step: 1, head });
    const info = await tf.profile(async () => { await grpoStep({ session: s, optimizer: opt, step: 2, head }); });
    out[key] = info.peakBytes / 2 ** 20;
    head?.dispose();
    opt.dispose();
    s.model.dispose();
  }
  return out;
}

export async function runBench(o: { json: boolean; quick: boolean }): Promise<void> {
  const say = (m: string) => { if (!o.json) console.log(m); else process.stderr.write(m + '\n'); };
  const iters = o.quick ? 3 : 10;
  const result = {
    // wasm_blas: the wasm backend with its products on OpenBLAS (what `auto` picks where OpenBLAS is installed)
    train_step_ms: { wasm_blas: null as number | null, wasm: null as number | null, cpu: null as number | null, torch: null as number | null },
    rollout_tokens_per_s: { wasm_blas: null as number | null, wasm: null as number | null, cpu: null as number | null, torch: null as number | null },
    /** one GRPO step of the example as its config runs it (backend auto), and the backend that was */
    grpo_step_s: null as number | null,
    grpo_step_backend: null as string | null,
    analysis_1m_rows_s: null as number | null,
    attribution_peak_mb: null as { none: number; attribution: number; none_one_pass: number } | null,
    small: {
      train_step_ms: { wasm_blas: null as number | null, wasm: null as number | null, torch: null as number | null },
      rollout_tokens_per_s: { wasm_blas: null as number | null, wasm: null as number | null, torch: null as number | null },
    },
    /** achieved GFLOP/s of the train steps (FLOPs counted from the shapes) and the OpenBLAS sgemm ceiling */
    gflops: {
      reference: { wasm_blas: null as number | null, wasm: null as number | null, torch: null as number | null },
      small: { wasm_blas: null as number | null, wasm: null as number | null, torch: null as number | null },
      sgemm_torch: null as number | null,
    },
    spread_ms: {
      reference_wasm_blas: null as [number, number] | null, reference_wasm: null as [number, number] | null,
      small_wasm_blas: null as [number, number] | null, small_wasm: null as [number, number] | null,
    },
    machine: { cpus: cpus().length, cpu_model: cpus()[0]?.model ?? '', mem_gb: Math.round(totalmem() / 2 ** 30), node: process.version },
    torch: null as unknown,
  };
  say('PyTorch reference (bench/torch_ref.py, /usr/bin/python3)…');
  const ref = torchReference();
  result.torch = ref;
  if ('error' in ref) say(`  unavailable: ${ref.error} (install: bash bench/install_torch.sh)`);
  else {
    result.train_step_ms.torch = ref.train_step_ms;
    result.rollout_tokens_per_s.torch = ref.rollout_tokens_per_s;
    result.gflops.reference.torch = ref.train_step_gflops ?? null;
    result.gflops.sgemm_torch = ref.sgemm_gflops ?? null;
    if (ref.small) {
      result.small.train_step_ms.torch = ref.small.train_step_ms;
      result.small.rollout_tokens_per_s.torch = ref.small.rollout_tokens_per_s;
      result.gflops.small.torch = ref.small.train_step_gflops ?? null;
    }
    say(`  torch ${ref.torch_version}: train step ${ref.train_step_ms.toFixed(1)} ms, rollout ${ref.rollout_tokens_per_s.toFixed(0)} tok/s` +
      (ref.small ? `; small model: train step ${ref.small.train_step_ms.toFixed(1)} ms, rollout ${ref.small.rollout_tokens_per_s.toFixed(0)} tok/s` : '') +
      (ref.sgemm_gflops ? `; sgemm ${ref.sgemm_gflops.toFixed(1)} GFLOP/s` : ''));
  }
  const ratio = (x: number | null, t: number | null) => (x && t ? ` (${(x / t).toFixed(2)}× torch)` : '');
  const backends: ('wasm-blas' | 'wasm' | 'cpu')[] = ['wasm', 'cpu'];
  try {
    await initBackend('wasm-blas');
    backends.unshift('wasm-blas');
  } catch (e) {
    say(`wasm-blas: unavailable (${e instanceof Error ? e.message : String(e)})`);
  }
  for (const backend of backends) {
    await initBackend(backend);
    const key = backend === 'wasm-blas' ? 'wasm_blas' : backend;
    const st = trainStepTimes(backend === 'cpu' ? Math.min(iters, 3) : iters, backend === 'cpu' ? 1 : 2);
    const ms = st.median;
    result.train_step_ms[key] = ms;
    if (key !== 'cpu') {
      result.spread_ms[`reference_${key}`] = [st.min, st.max];
      result.gflops.reference[key] = trainStepFlops(REFERENCE, 32, 64) / (ms / 1000) / 1e9;
    }
    say(`${backend}: train step ${ms.toFixed(1)} ms (${st.min.toFixed(0)}–${st.max.toFixed(0)})${ratio(ms, result.train_step_ms.torch)}`);
    const tps = rolloutTokensPerS(backend === 'cpu' ? 1 : o.quick ? 1 : 3);
    result.rollout_tokens_per_s[key] = tps;
    say(`${backend}: rollout ${tps.toFixed(0)} tok/s${ratio(tps, result.rollout_tokens_per_s.torch)}`);
    if (key === 'cpu') continue;
    // The small model (issue 13's new rows): train step [16, 128] and rollout 32 × 128.
    const sm = trainStepTimes(o.quick ? 2 : Math.max(5, Math.round(iters / 2)), 1, SMALL, 16, 128);
    result.small.train_step_ms[key] = sm.median;
    result.spread_ms[`small_${key}`] = [sm.min, sm.max];
    result.gflops.small[key] = trainStepFlops(SMALL, 16, 128) / (sm.median / 1000) / 1e9;
    say(`${backend}, small model: train step ${sm.median.toFixed(1)} ms (${sm.min.toFixed(0)}–${sm.max.toFixed(0)})${ratio(sm.median, result.small.train_step_ms.torch)}, ${result.gflops.small[key]!.toFixed(1)} GFLOP/s`);
    const stps = rolloutTokensPerS(o.quick ? 1 : 2, SMALL, 32, 128);
    result.small.rollout_tokens_per_s[key] = stps;
    say(`${backend}, small model: rollout ${stps.toFixed(0)} tok/s${ratio(stps, result.small.rollout_tokens_per_s.torch)}`);
  }
  const exampleCfg = [join(__dirname, '../../examples/countdown-tiny.credit.yaml'), resolve('examples/countdown-tiny.credit.yaml')].find(existsSync);
  if (exampleCfg) {
    const { config } = loadConfig(exampleCfg);
    const s = await buildSession(config);
    result.grpo_step_backend = s.backend.backend;
    const opt = new Adam(config.grpo.lr);
    await grpoStep({ session: s, optimizer: opt, step: 1 });
    const times: number[] = [];
    for (let i = 2; i < 2 + (o.quick ? 1 : 3); i++) {
      const t0 = performance.now();
      await grpoStep({ session: s, optimizer: opt, step: i });
      times.push((performance.now() - t0) / 1000);
    }
    result.grpo_step_s = median(times);
    say(`countdown example: one GRPO step (${config.grpo.prompts_per_step}×${config.grpo.group_size} rollouts + update in ${config.grpo.gradient_accumulation_steps} micro-batches, ${s.backend.backend}) ${result.grpo_step_s.toFixed(2)} s`);
    opt.dispose();
    s.model.dispose();
    result.attribution_peak_mb = await attributionMemory(exampleCfg);
    const m = result.attribution_peak_mb;
    say(`peak tensor memory of a GRPO step: ${m.none.toFixed(1)} MB as the example runs it; in one pass: none ${m.none_one_pass.toFixed(1)} MB, attribution ${m.attribution.toFixed(1)} MB (+${(((m.attribution / m.none_one_pass) - 1) * 100).toFixed(1)}%)`);
  }
  const { benchAnalysis } = await import('../analysis/synthetic');
  result.analysis_1m_rows_s = await benchAnalysis();
  say(`credit analysis of 1,000,000 token rows (seed 002 tables): ${result.analysis_1m_rows_s.toFixed(2)} s`);
  if (o.json) console.log(JSON.stringify(result));
}
