// `credit-lens bench` / `npm run bench`: the engine's figures next to a PyTorch CPU reference measured in the
// same invocation (bench/torch_ref.py under Debian's /usr/bin/python3), printed as ratios to it.
import { chooseOpenblasCore } from '../model/kernels/blas';
import * as tf from '@tensorflow/tfjs';
import { existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { initBackend } from '../model/backend';
import { loadConfig } from '../config/config';
import { Transformer, type ModelConfig } from '../model/model';
import { Adam } from '../model/optim';
import { makeRng } from '../core/rng';
import { policyBatch } from '../session/rollout';
import { generate } from '../model/sampler';
import { buildSession } from '../session/session';
import { grpoStep } from '../train/train';
import { median } from '../core/stats';
import { benchRounds, summarize, TorchServer, type RoundsSummary } from './rounds';
import { ANCHOR_PYTHON, torchRows, type TorchRow } from './torch_rows';
import { benchUpdate } from './step';

// The reference config of the issue: 2 layers, d_model 128, 4 heads, d_ff 512, vocab 64, sequence 64, batch 32.
export const REFERENCE: ModelConfig = {
  arch: 'qwen2',
  vocabSize: 64,
  dModel: 128,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 4,
  dFf: 512,
  maxSeqLen: 160,
  ropeTheta: 10000,
  rmsEps: 1e-6,
  tieEmbeddings: true,
  qkvBias: true,
};

/** The small model: 4 layers, d_model 256, 8 heads, d_ff 1024, vocab 512 (train [16, 128], rollout 32 × 128). */
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

/**
 * One training step exactly as GRPO runs it (forward, log-probs, loss + grad from grpo.ts, backward, clip, Adam) on a
 * fixed random batch, as a closure: timed by trainStepTimes, profiled per kernel by profile.ts.
 */
export function trainStepRunner(cfg: ModelConfig = REFERENCE, B = 32, T = 64): { step(): Promise<void>; dispose(): void } {
  const model = Transformer.init(cfg, 1);
  const rng = makeRng(2);
  const prompts = Array.from({ length: B }, () => [1]);
  const comps = Array.from({ length: B }, () => Array.from({ length: T - 1 }, () => 3 + Math.floor(rng() * (cfg.vocabSize - 4))));
  const adv = Array.from({ length: B }, () => rng() * 2 - 1);
  const opt = new Adam(1e-4);
  return {
    async step() {
      const pb = policyBatch(prompts, comps, 0);
      await benchUpdate(model, model.params, pb, adv, opt);
      pb.dispose();
    },
    dispose() {
      opt.dispose();
      model.dispose();
    },
  };
}

/** The step's median and its spread (min, max) over `iters` timed repetitions after `warmup`. */
export async function trainStepTimes(
  iters: number,
  warmup: number,
  cfg: ModelConfig = REFERENCE,
  B = 32,
  T = 64,
): Promise<{ median: number; min: number; max: number }> {
  const runner = trainStepRunner(cfg, B, T);
  await timeSteps(runner, warmup);
  const times = await timeSteps(runner, iters);
  runner.dispose();
  return { median: median(times), min: Math.min(...times), max: Math.max(...times) };
}

/** Times of n steps of the runner, in ms. */
export async function timeSteps(runner: { step(): Promise<void> }, n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await runner.step();
    times.push(performance.now() - t0);
  }
  return times;
}

/**
 * `n` sequences × `newTokens` new tokens with the KV cache from prompts of 8 tokens, as a closure that returns the
 * tokens per second of one rollout (warmed up on a short one).
 */
export async function rolloutRunner(cfg: ModelConfig = REFERENCE, n = 64, newTokens = 64): Promise<{ run(): Promise<number>; dispose(): void }> {
  const model = Transformer.init(cfg, 1);
  const prompts = Array.from({ length: n }, (_, i) => Array.from({ length: 8 }, (_, j) => 3 + ((i * 7 + j * 3) % 60)));
  const rng = makeRng(3);
  await generate(model, prompts.slice(0, 4), { maxNewTokens: 4, temperature: 1, topP: 1, eosId: -1, rng });
  return {
    async run() {
      const t0 = performance.now();
      const out = await generate(model, prompts, { maxNewTokens: newTokens, temperature: 1, topP: 1, eosId: -1, rng });
      return out.reduce((a, s) => a + s.ids.length, 0) / ((performance.now() - t0) / 1000);
    },
    dispose() {
      model.dispose();
    },
  };
}

/** The median tokens/s of `reps` rollouts (rolloutRunner). */
export async function rolloutTokensPerS(reps: number, cfg: ModelConfig = REFERENCE, n = 64, newTokens = 64): Promise<number> {
  const runner = await rolloutRunner(cfg, n, newTokens);
  const rates: number[] = [];
  for (let i = 0; i < reps; i++) rates.push(await runner.run());
  runner.dispose();
  return median(rates);
}

/**
 * Peak live tensor bytes (tf.profile) of one GRPO step of the example: `none` as the example runs it (its
 * grpo.gradient_accumulation_steps), and the attribution head against plain GRPO both in one pass (the head trains on the
 * whole batch), for seed doc 000's ~15–20 % extra memory of the head.
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
    const info = await tf.profile(async () => {
      await grpoStep({ session: s, optimizer: opt, step: 2, head });
    });
    out[key] = info.peakBytes / 2 ** 20;
    head?.dispose();
    opt.dispose();
    s.model.dispose();
  }
  return out;
}

/** The bench's JSON: `npm run bench -- --json` prints one of these. */
function emptyResult() {
  return {
    // wasm_blas: the wasm backend with its products on OpenBLAS (what `auto` picks where OpenBLAS is installed)
    train_step_ms: { wasm_blas: null as number | null, wasm: null as number | null, cpu: null as number | null, torch: null as number | null },
    rollout_tokens_per_s: { wasm_blas: null as number | null, wasm: null as number | null, cpu: null as number | null, torch: null as number | null },
    /** one GRPO step of the example as its config runs it (backend auto), and the backend that was */
    grpo_step_s: null as number | null,
    grpo_step_backend: null as string | null,
    /**
     * TRL's GRPO step (credit_lens's CreditGRPOTrainer, PyTorch on the CPU) for the same model shape and batch, and the
     * engine's step without its realized-credit pass (the work TRL's step does) over it
     */
    trl_step: null as (import('./trl').TrlStepBench & { engine_over_trl: number }) | { error: string } | null,
    /** logging.realized_credit's extra forward pass in that step: its seconds and its share of the step */
    realized_credit: null as { seconds: number; share_of_step: number } | null,
    /** logging.tensorboard's cost in that step: histograms and scalars encoded and appended, and its share of the step */
    tensorboard: null as { seconds: number; share_of_step: number } | null,
    analysis_1m_rows_s: null as number | null,
    /** Browse Rollouts' queries on a million token rows */
    rollouts_1m: null as import('./query').RolloutsBench | null,
    /** importing a prime-rl export without a model at two sizes (linear: the same seconds per million) */
    import_prime: null as { tokens: number; seconds: number; s_per_million: number }[] | null,
    /** import --follow: from a step whole (the next one's file written) to its tables and metrics row written */
    follow_latency_s: null as { completions_per_step: number; median_s: number; max_s: number; steps: number } | null,
    /** the probe's target: 32 episodes × every position × 8 rollouts of the countdown example (≤ 60 s) */
    probe: null as { episodes: number; continuations: number; mean_length: number; seconds: number; backend: string } | null,
    /** that probe through `credit-lens serve` (SGLang's API on 127.0.0.1), and its time over the in-process probe's */
    probe_served: null as { seconds: number; ratio: number } | null,
    attribution_peak_mb: null as { none: number; attribution: number; none_one_pass: number } | null,
    /** the webgpu backend's train-step profile (kernels, dispatches, submits, uploads, downloads) on the adapter Dawn offers */
    webgpu: null as import('./size').WebgpuProfile | { error: string } | null,
    /** the seeds' model size (Qwen2.5-0.5B shape) on wasm-blas, paired with PyTorch on the same folder */
    size_05b: null as import('./size').SizeBench | { error: string } | null,
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
      reference_wasm_blas: null as [number, number] | null,
      reference_wasm: null as [number, number] | null,
      small_wasm_blas: null as [number, number] | null,
      small_wasm: null as [number, number] | null,
    },
    machine: { cpus: cpus().length, cpu_model: cpus()[0]?.model ?? '', mem_gb: Math.round(totalmem() / 2 ** 30), node: process.version },
    torch: null as unknown,
    /**
     * PyTorch's other rows beside the anchor (PyTorch 2.x from the package index, paired above): Debian's 1.13, and the
     * anchor's torch with the train step's forward through torch.compile; each with wasm-blas's time over it
     */
    torch_rows: {} as Record<'debian' | 'compiled', TorchRow | { error: string }>,
    /** wasm-blas against torch in alternating rounds (paired.ts): the figures above for both come from these */
    paired: {
      reference_train: null as RoundsSummary | null,
      reference_rollout: null as RoundsSummary | null,
      small_train: null as RoundsSummary | null,
      small_rollout: null as RoundsSummary | null,
    },
  };
}
type BenchResult = ReturnType<typeof emptyResult>;

/**
 * Torch's figures. With wasm-blas (`paired`): in alternating rounds with wasm-blas's, and wasm-blas's figures from the
 * same rounds; the ratios are the medians of the rounds' ratios. Without: torch alone.
 */
async function benchTorch(torch: TorchServer, paired: boolean, quick: boolean, result: BenchResult, say: (m: string) => void): Promise<void> {
  const ms = (x: number) => `${x.toFixed(1)} ms`,
    rate = (x: number) => `${x.toFixed(0)} tok/s`;
  const report = (label: string, p: RoundsSummary, unit: (x: number) => string) =>
    say(
      `wasm-blas${label}: ${unit(p.ours)} vs torch ${unit(p.torch)}: ${p.ratio.toFixed(2)}× torch (rounds ${p.ratio_range[0].toFixed(2)}–${p.ratio_range[1].toFixed(2)}, ${p.rounds} paired rounds)`,
    );
  if (!paired) {
    result.train_step_ms.torch = median(await torch.train('reference', quick ? 3 : 10));
    result.rollout_tokens_per_s.torch = median(await torch.rollout('reference', quick ? 1 : 3));
    result.small.train_step_ms.torch = median(await torch.train('small', quick ? 2 : 5));
    result.small.rollout_tokens_per_s.torch = median(await torch.rollout('small', quick ? 1 : 2));
    result.gflops.reference.torch = trainStepFlops(REFERENCE, 32, 64) / (result.train_step_ms.torch / 1000) / 1e9;
    result.gflops.small.torch = trainStepFlops(SMALL, 16, 128) / (result.small.train_step_ms.torch / 1000) / 1e9;
  } else {
    await initBackend('wasm-blas');
    for (const [model, cfg, B, T, steps, rounds] of [
      ['reference', REFERENCE, 32, 64, 4, quick ? 2 : 8],
      ['small', SMALL, 16, 128, 2, quick ? 1 : 4],
    ] as const) {
      const runner = trainStepRunner(cfg, B, T);
      await timeSteps(runner, 2);
      // each block: one untimed step (cold caches and pools after the other side's block), then the timed ones
      const r = await benchRounds(
        rounds,
        async () => {
          await timeSteps(runner, 1);
          return timeSteps(runner, steps);
        },
        () => torch.train(model, steps, 1),
      );
      runner.dispose();
      const p = summarize(r);
      const into = model === 'reference' ? result : result.small;
      into.train_step_ms.wasm_blas = p.ours;
      into.train_step_ms.torch = p.torch;
      result.spread_ms[`${model}_wasm_blas`] = [Math.min(...r.ours), Math.max(...r.ours)];
      result.gflops[model].wasm_blas = trainStepFlops(cfg, B, T) / (p.ours / 1000) / 1e9;
      result.gflops[model].torch = trainStepFlops(cfg, B, T) / (p.torch / 1000) / 1e9;
      result.paired[`${model}_train`] = p;
      report(`${model === 'small' ? ', small model' : ''}: train step`, p, ms);
    }
    for (const [model, cfg, n, newTokens, rounds] of [
      ['reference', REFERENCE, 64, 64, quick ? 1 : 4],
      ['small', SMALL, 32, 128, quick ? 1 : 3],
    ] as const) {
      const runner = await rolloutRunner(cfg, n, newTokens);
      const r = await benchRounds(
        rounds,
        async () => {
          await runner.run();
          return [await runner.run()];
        },
        () => torch.rollout(model, 1, 1),
      );
      runner.dispose();
      const p = summarize(r);
      const into = model === 'reference' ? result : result.small;
      into.rollout_tokens_per_s.wasm_blas = p.ours;
      into.rollout_tokens_per_s.torch = p.torch;
      result.paired[`${model}_rollout`] = p;
      report(`${model === 'small' ? ', small model' : ''}: rollout`, p, rate);
    }
  }
}

export async function runBench(o: { json: boolean; quick: boolean }): Promise<void> {
  const say = (m: string) => {
    if (!o.json) console.log(m);
    else process.stderr.write(m + '\n');
  };
  // Both sides on the same OpenBLAS kernels: the core named from the CPU's flags (blas.ts), inherited by the PyTorch
  // reference's process, which would otherwise be left to OpenBLAS's detection on its own.
  const core = chooseOpenblasCore();
  if (core) say(`OpenBLAS core ${core} (from the CPU's flags; set OPENBLAS_CORETYPE to choose another)`);
  const iters = o.quick ? 3 : 10;
  const result = emptyResult();
  const anchor = ANCHOR_PYTHON();
  say(`PyTorch reference, the anchor (bench/torch_ref.py --serve, ${anchor}: PyTorch 2.x from the package index)…`);
  const started = await TorchServer.start(anchor);
  const torch = 'error' in started ? null : started.server;
  if ('error' in started) {
    result.torch = { error: started.error };
    say(`  unavailable: ${started.error} (install: pip install -c python/constraints.txt -e "python[trl]")`);
  } else {
    result.torch = { torch_version: started.version, threads: started.threads, sgemm_gflops: started.sgemm_gflops, blas: started.blas, python: anchor };
    result.gflops.sgemm_torch = started.sgemm_gflops;
    say(
      `  torch ${started.version}, BLAS ${started.blas} on ${started.threads} threads, sgemm 1024³ ${started.sgemm_gflops.toFixed(1)} GFLOP/s (its products' ceiling)`,
    );
  }
  const backends: ('wasm-blas' | 'wasm' | 'cpu')[] = ['wasm', 'cpu'];
  try {
    await initBackend('wasm-blas');
    backends.unshift('wasm-blas');
  } catch (e) {
    say(`wasm-blas: unavailable (${e instanceof Error ? e.message : String(e)})`);
  }
  try {
    // Torch's figures: from rounds paired with wasm-blas's (paired.ts), or alone where wasm-blas cannot run.
    if (torch) await benchTorch(torch, backends[0] === 'wasm-blas', o.quick, result, say);
    // PyTorch's second rows: Debian's 1.13 (the anchor until 2026-11-29), and the anchor with torch.compile
    result.torch_rows = await torchRows(anchor, o.quick, result, say);
    const ratio = (x: number | null, t: number | null) => (x && t ? ` (${(x / t).toFixed(2)}× torch)` : '');
    for (const backend of backends) {
      if (backend === 'wasm-blas' && torch) continue; // measured in the paired rounds
      await initBackend(backend);
      const key = backend === 'wasm-blas' ? 'wasm_blas' : backend;
      const st = await trainStepTimes(backend === 'cpu' ? Math.min(iters, 3) : iters, backend === 'cpu' ? 1 : 2);
      const ms = st.median;
      result.train_step_ms[key] = ms;
      if (key !== 'cpu') {
        result.spread_ms[`reference_${key}`] = [st.min, st.max];
        result.gflops.reference[key] = trainStepFlops(REFERENCE, 32, 64) / (ms / 1000) / 1e9;
      }
      say(`${backend}: train step ${ms.toFixed(1)} ms (${st.min.toFixed(0)}–${st.max.toFixed(0)})${ratio(ms, result.train_step_ms.torch)}`);
      const tps = await rolloutTokensPerS(backend === 'cpu' ? 1 : o.quick ? 1 : 3);
      result.rollout_tokens_per_s[key] = tps;
      say(`${backend}: rollout ${tps.toFixed(0)} tok/s${ratio(tps, result.rollout_tokens_per_s.torch)}`);
      if (key === 'cpu') continue;
      // The small model: train step [16, 128] and rollout 32 × 128.
      const sm = await trainStepTimes(o.quick ? 2 : Math.max(5, Math.round(iters / 2)), 1, SMALL, 16, 128);
      result.small.train_step_ms[key] = sm.median;
      result.spread_ms[`small_${key}`] = [sm.min, sm.max];
      result.gflops.small[key] = trainStepFlops(SMALL, 16, 128) / (sm.median / 1000) / 1e9;
      say(
        `${backend}, small model: train step ${sm.median.toFixed(1)} ms (${sm.min.toFixed(0)}–${sm.max.toFixed(0)})${ratio(sm.median, result.small.train_step_ms.torch)}, ${result.gflops.small[key]!.toFixed(1)} GFLOP/s`,
      );
      const stps = await rolloutTokensPerS(o.quick ? 1 : 2, SMALL, 32, 128);
      result.small.rollout_tokens_per_s[key] = stps;
      say(`${backend}, small model: rollout ${stps.toFixed(0)} tok/s${ratio(stps, result.small.rollout_tokens_per_s.torch)}`);
    }
  } finally {
    torch?.close();
  }
  const exampleCfg = [join(__dirname, '../../examples/countdown-tiny.credit.yaml'), resolve('examples/countdown-tiny.credit.yaml')].find(existsSync);
  if (exampleCfg) {
    // with realized credit on, as every example but the first-run one logs it: its re-scoring pass is timed inside the step
    const { config } = loadConfig(exampleCfg, ['logging.realized_credit=true']);
    const s = await buildSession(config);
    result.grpo_step_backend = s.backend.backend;
    const opt = new Adam(config.grpo.lr);
    await grpoStep({ session: s, optimizer: opt, step: 1 });
    const times: number[] = [];
    const realized: number[] = [];
    let last = null;
    for (let i = 2; i < 2 + (o.quick ? 1 : 3); i++) {
      const t0 = performance.now();
      last = await grpoStep({ session: s, optimizer: opt, step: i });
      times.push((performance.now() - t0) / 1000);
      if (last.row.realized_seconds !== undefined) realized.push(last.row.realized_seconds);
    }
    result.grpo_step_s = median(times);
    if (realized.length) result.realized_credit = { seconds: median(realized), share_of_step: median(realized) / result.grpo_step_s };
    say(
      `countdown example: one GRPO step (${config.grpo.prompts_per_step}×${config.grpo.group_size} rollouts + update in ${config.grpo.gradient_accumulation_steps} micro-batches, ${s.backend.backend}) ${result.grpo_step_s.toFixed(2)} s` +
        (result.realized_credit
          ? `, of which realized credit's re-scoring pass ${result.realized_credit.seconds.toFixed(3)} s (${(100 * result.realized_credit.share_of_step).toFixed(1)} %)`
          : ''),
    );
    const { trlRow } = await import('./trl');
    result.trl_step = trlRow(
      config,
      exampleCfg,
      o.quick,
      s.model.cfg.vocabSize,
      result.grpo_step_s - (result.realized_credit?.seconds ?? 0),
      s.backend.backend,
      say,
    );
    // logging.tensorboard's share of the step: the step's histograms and scalars encoded and appended to an event file
    // (the token table itself is written either way), the median of 20 writes of the last step's columns
    if (last) {
      const { mkdirSync, mkdtempSync, rmSync } = await import('node:fs');
      const { tmpdir } = await import('node:os');
      const { logTables } = await import('../session/token_log');
      const { RunTrackers } = await import('../tracking/trackers');
      const dir = mkdtempSync(join(tmpdir(), 'cl-bench-tb-'));
      try {
        for (const sub of ['tokens', 'episodes']) mkdirSync(join(dir, sub));
        const cols = logTables(dir, 2, last.episodes, last.tok);
        const trackers = new RunTrackers({ runDir: dir, runName: 'bench', logging: { tensorboard: true }, log: () => {} });
        const tb: number[] = [];
        for (let i = 0; i < 20; i++) {
          const t0 = performance.now();
          trackers.tokens(2 + i, cols);
          trackers.metrics({ ...last.row, step: 2 + i });
          tb.push((performance.now() - t0) / 1000);
        }
        trackers.close();
        result.tensorboard = { seconds: median(tb), share_of_step: median(tb) / result.grpo_step_s };
        say(
          `TensorBoard logging of that step (histograms of ${cols.contribution.length} tokens, ${Object.keys(last.row).length} scalars): ${(1000 * result.tensorboard.seconds).toFixed(2)} ms, ${(100 * result.tensorboard.share_of_step).toFixed(2)} % of the step`,
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    // A probe of that step's completions, as `credit-lens probe --episodes 32 --rollouts 8` runs it. The example's
    // policy here is untrained (no SFT), so completions run long: a harder case than a trained run's.
    if (last) {
      const { probeBench } = await import('./probe');
      result.probe = { ...(await probeBench(s, last.episodes, 32, 8)), backend: s.backend.backend };
      const p = result.probe;
      say(
        `probe: ${p.episodes} episodes × every position (mean length ${p.mean_length.toFixed(1)}) × 8 rollouts = ${p.continuations} continuations in ${p.seconds.toFixed(1)} s (${s.backend.backend}; target ≤ 60 s)`,
      );
      // The same probe through `credit-lens serve` of the same weights on 127.0.0.1 (SGLang's API, one request per
      // prefix with its 8 rows and seeds): the serving path's overhead, HTTP and JSON and the per-tick batching.
      const { serveModel } = await import('../serving/serve');
      const { ServerSampler } = await import('../serving/client');
      const served = await serveModel(s.model, s.tokenizer, 'bench');
      try {
        const client = await ServerSampler.connect({ url: served.url, api: 'sglang' }, s.tokenizer);
        const viaServe = await probeBench(s, last.episodes, 32, 8, client);
        await client.close();
        result.probe_served = { seconds: viaServe.seconds, ratio: viaServe.seconds / p.seconds };
        say(
          `the same probe through credit-lens serve (SGLang API, 127.0.0.1): ${viaServe.seconds.toFixed(1)} s, ${result.probe_served.ratio.toFixed(2)}× in-process (target ≤ 1.15×)`,
        );
      } finally {
        await served.close();
      }
    }
    opt.dispose();
    s.model.dispose();
    result.attribution_peak_mb = await attributionMemory(exampleCfg);
    const m = result.attribution_peak_mb;
    say(
      `peak tensor memory of a GRPO step: ${m.none.toFixed(1)} MB as the example runs it; in one pass: none ${m.none_one_pass.toFixed(1)} MB, attribution ${m.attribution.toFixed(1)} MB (+${((m.attribution / m.none_one_pass - 1) * 100).toFixed(1)}%)`,
    );
  }
  const { benchAnalysis } = await import('../analysis/synthetic');
  result.analysis_1m_rows_s = await benchAnalysis();
  say(`credit analysis of 1,000,000 token rows (the GRPO credit-assignment analysis tables): ${result.analysis_1m_rows_s.toFixed(2)} s`);
  const { benchImport, benchFollow } = await import('./import');
  result.import_prime = await benchImport();
  result.follow_latency_s = await benchFollow();
  say(
    `import --follow: a step of ${result.follow_latency_s.completions_per_step} prime-rl completions imported ${result.follow_latency_s.median_s.toFixed(2)} s (median; largest ${result.follow_latency_s.max_s.toFixed(2)} s) after it was whole`,
  );
  say(
    `credit-lens import of a prime-rl export, no model: ${result.import_prime.map((r) => `${r.tokens} tokens ${r.seconds.toFixed(1)} s (${r.s_per_million.toFixed(1)} s per million)`).join('; ')}`,
  );
  const { benchRollouts } = await import('./query');
  result.rollouts_1m = benchRollouts();
  const b = result.rollouts_1m;
  say(
    `Browse Rollouts on ${b.rows} token rows (${b.episodes} episodes): first table ${b.first_table_s.toFixed(2)} s, filter ${b.filter_ms.toFixed(0)} ms, search ${b.search_ms.toFixed(0)} ms, token aggregate ${b.aggregate_ms.toFixed(0)} ms, +${b.memory_mb.toFixed(0)} MB resident`,
  );
  const { benchModelSize, profileWebgpu } = await import('./size');
  result.webgpu = await profileWebgpu(() => trainStepRunner(REFERENCE, 32, 64));
  const w = result.webgpu;
  say(
    'error' in w
      ? `webgpu: unavailable (${w.error}); no GPU figure measured`
      : `webgpu on ${w.adapter}: one train step of the reference model [32, 64] runs ${w.kernels} kernels making ${w.dispatches} dispatches in ${w.submits} submits (most: ${w.top}), ${w.uploads.count} uploads (${w.uploads.mb.toFixed(2)} MB), ${w.downloads.count} downloads (${w.downloads.mb.toFixed(3)} MB); ${w.step_ms.toFixed(0)} ms${w.software ? ' (a software adapter: a CPU figure, not a GPU one)' : ''}`,
  );
  result.size_05b = await benchModelSize({ quick: o.quick, say });
  if ('error' in result.size_05b) say(`0.5B rows: unavailable (${result.size_05b.error})`);
  if (o.json) console.log(JSON.stringify(result));
}
