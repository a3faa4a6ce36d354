// `credit-lens bench --device`: the GPU machine's figures, for bench/device/run.sh. The engine on webgpu against PyTorch
// on the same machine in the same run (CUDA there; `--local` here: this machine's lavapipe against torch on the CPU, so
// that the script cannot rot between loans). Each stage runs alone: one that fails records its error and the next one
// runs, and the report is written after every stage, so a machine that is taken back half way still returns numbers.
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig } from '../config/config';
import { Adam } from '../model/optim';
import { initBackend } from '../model/backend';
import { describeAdapter, probeAdapter, probeUnsafeFeatures } from '../model/webgpu';
import { buildSession } from '../session/session';
import { grpoStep } from '../train/train';
import { REFERENCE, SMALL, rolloutRunner, timeSteps, trainStepRunner } from './bench';
import { median } from '../core/stats';
import { benchRounds, summarize, TorchServer, type RoundsSummary } from './rounds';
import { benchModelSize } from './size';
import { countDispatches, decodeStepCount, topKernels, type DispatchCount } from './dispatch';

import { Transformer } from '../model/model';
import { generate } from '../model/sampler';
import { makeRng } from '../core/rng';

/** One GRPO step of the bundled example on webgpu launches at most this many kernels and reads back at most this often. */
export const GRPO_STEP_TARGETS = { dispatches: 3000, downloads: 10 };

export interface DeviceBenchOptions {
  /** this machine: a software adapter is accepted, and torch runs on the CPU */
  local: boolean;
  /** one round, the reference model only, and no 0.5B stage (CI's form) */
  quick: boolean;
  torchPython: string;
  torchDevice: string;
  /** the Qwen tokenizer's folder where the dev dependency is not installed */
  tokenizerDir?: string;
  /** where the report goes (also printed as the last line of stdout) */
  out: string | null;
  say(m: string): void;
}

type Stage = Record<string, unknown> | { error: string };

export interface DeviceReport {
  date: string;
  mode: 'device' | 'local';
  quick: boolean;
  machine: { cpus: number; cpu_model: string; mem_gb: number; node: string };
  adapter: Stage | null;
  torch: Stage | null;
  stages: Record<string, Stage>;
  /** seconds each stage took, and the whole run */
  seconds: Record<string, number>;
}

/** A figure measured in alternating rounds, as the report keeps it. */
function paired(p: RoundsSummary, unit: string): Record<string, unknown> {
  return { unit, webgpu: p.ours, torch: p.torch, ratio: p.ratio, ratio_range: p.ratio_range, rounds: p.rounds };
}

/** The versions of the Python packages TRL needs, as the machine's Python sees them (missing ones say so). */
const PACKAGES =
  'import importlib.metadata as m\n' +
  'out = []\n' +
  'for p in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "pyarrow"):\n' +
  '    try: out.append(f"{p} {m.version(p)}")\n' +
  '    except m.PackageNotFoundError: out.append(f"{p} missing")\n' +
  'print(", ".join(out))';

export async function runDeviceBench(o: DeviceBenchOptions): Promise<DeviceReport> {
  const started = performance.now();
  const report: DeviceReport = {
    date: new Date().toISOString(),
    mode: o.local ? 'local' : 'device',
    quick: o.quick,
    machine: { cpus: cpus().length, cpu_model: cpus()[0]?.model ?? '', mem_gb: Math.round(totalmem() / 2 ** 30), node: process.version },
    adapter: null,
    torch: null,
    stages: {},
    seconds: {},
  };
  const save = () => {
    report.seconds.total = (performance.now() - started) / 1000;
    if (o.out) writeFileSync(o.out, JSON.stringify(report, null, 2) + '\n');
  };
  const stage = async (name: string, run: () => Promise<Record<string, unknown>>): Promise<void> => {
    const t = performance.now();
    o.say(`== ${name}`);
    try {
      report.stages[name] = await run();
      o.say(`   ${JSON.stringify(report.stages[name])}`);
    } catch (e) {
      const error = e instanceof Error ? e.message.split('\n')[0] : String(e);
      report.stages[name] = { error };
      o.say(`   failed: ${error}`);
    }
    report.seconds[name] = (performance.now() - t) / 1000;
    save();
  };

  // The adapter first: the figures mean nothing on a CPU in disguise, unless this is the local rehearsal.
  o.say('== adapter');
  const probe = await probeAdapter();
  let gpu = false;
  if (!probe.ok) report.adapter = { error: probe.why };
  else if (probe.info.software && !o.local) report.adapter = { error: `${describeAdapter(probe.info)} is a software adapter, not a GPU`, ...probe.info };
  else {
    try {
      await initBackend('webgpu');
      // what the card offers behind Dawn's unsafe APIs too: the subgroup-matrix feature, which the 0.5B products could use
      report.adapter = { ...probe.info, name: describeAdapter(probe.info), unsafe_apis: probeUnsafeFeatures() };
      gpu = true;
    } catch (e) {
      report.adapter = { error: e instanceof Error ? e.message : String(e), ...probe.info };
    }
  }
  o.say(`   ${JSON.stringify(report.adapter)}`);
  save();

  o.say(`== torch (${o.torchPython}, ${o.torchDevice})`);
  const t = await TorchServer.start(o.torchPython, o.torchDevice);
  const torch = 'error' in t ? null : t.server;
  report.torch = 'error' in t ? { error: t.error } : { version: t.version, device: o.torchDevice, device_name: t.device_name, sgemm_gflops: t.sgemm_gflops };
  o.say(`   ${JSON.stringify(report.torch)}`);
  save();

  const needs = () => {
    if (!gpu) throw new Error(`no webgpu backend (${(report.adapter as { error?: string })?.error ?? 'adapter unavailable'})`);
  };
  /** Ours against torch in alternating rounds, or ours alone where torch is unavailable (still a figure). */
  const against = async (rounds: number, ours: () => Promise<number[]>, theirs: (th: TorchServer) => Promise<number[]>, unit: string) => {
    if (torch) return paired(summarize(await benchRounds(rounds, ours, () => theirs(torch))), unit);
    const all: number[] = [];
    for (let i = 0; i < rounds; i++) all.push(...(await ours()));
    return { unit, webgpu: median(all), torch: null, ratio: null, rounds, torch_error: (report.torch as { error?: string })?.error };
  };
  try {
    const models = o.quick ? (['reference'] as const) : (['reference', 'small'] as const);
    for (const [model, cfg, B, T, steps, rounds] of [
      ['reference', REFERENCE, 32, 64, 4, o.quick ? 1 : 5],
      ['small', SMALL, 16, 128, 2, 3],
    ] as const) {
      if (!(models as readonly string[]).includes(model)) continue;
      await stage(`${model}_train_step`, async () => {
        needs();
        const runner = trainStepRunner(cfg, B, T);
        try {
          await runner.step();
          const timed = (n: number) => timeSteps(runner, n);
          return {
            batch: [B, T],
            ...(await against(
              rounds,
              () => timed(steps),
              (th) => th.train(model, steps, 1),
              'ms',
            )),
          };
        } finally {
          runner.dispose();
        }
      });
    }
    for (const [model, cfg, n, newTokens, rounds] of [
      ['reference', REFERENCE, 64, 64, o.quick ? 1 : 3],
      ['small', SMALL, 32, 128, 2],
    ] as const) {
      if (!(models as readonly string[]).includes(model)) continue;
      await stage(`${model}_rollout`, async () => {
        needs();
        const runner = await rolloutRunner(cfg, n, newTokens);
        try {
          await runner.run();
          const r = await against(
            rounds,
            async () => [await runner.run()],
            (th) => th.rollout(model, 1, 1),
            'tokens/s',
          );
          return { sequences: n, new_tokens: newTokens, ...r };
        } finally {
          runner.dispose();
        }
      });
    }
  } finally {
    torch?.close();
  }

  // One GRPO step of the bundled example on webgpu: what a real step dispatches, uploads and reads back.
  // (12,895 kernels in tf.profile's count and 81 downloads when this was first measured; 8,918 real dispatches.)
  await stage('example_grpo_step', async () => {
    if (!gpu) throw new Error('no webgpu backend');
    const path = [join(__dirname, '../../examples/countdown-tiny.credit.yaml'), resolve('examples/countdown-tiny.credit.yaml')].find(existsSync);
    if (!path) throw new Error('examples/countdown-tiny.credit.yaml not found');
    const { config } = loadConfig(path, ['backend=webgpu']);
    const s = await buildSession(config);
    const opt = new Adam(config.grpo.lr);
    try {
      await grpoStep({ session: s, optimizer: opt, step: 1 });
      // real launches (dispatchWorkgroups), submits and traffic, timed outside tf.profile (bench/dispatch.ts)
      const c = await countDispatches(async () => {
        await grpoStep({ session: s, optimizer: opt, step: 2 });
      });
      o.say(
        `   one GRPO step: ${c.dispatches} dispatches in ${c.submits} submits, ${c.uploads.count} uploads, ${c.downloads.count} downloads; most: ${topKernels(c)}`,
      );
      return {
        rollouts: config.grpo.prompts_per_step * config.grpo.group_size,
        micro_batches: config.grpo.gradient_accumulation_steps,
        // what one step may launch and read back (the same on any adapter); CI holds the count here to it
        targets: GRPO_STEP_TARGETS,
        meets_targets: c.dispatches <= GRPO_STEP_TARGETS.dispatches && c.downloads.count <= GRPO_STEP_TARGETS.downloads,
        dispatches: c.dispatches,
        submits: c.submits,
        kernels: c.kernels,
        uploads: c.uploads,
        downloads: c.downloads,
        seconds: c.ms / 1000,
        by_kernel: c.by_kernel,
      };
    } finally {
      opt.dispose();
      s.model.dispose();
    }
  });

  // What one train step and one decode step of the reference model launch, by kernel: the histogram the dispatch work
  // starts from (the counts are the same on lavapipe and on an H200)
  await stage('reference_dispatch', async () => {
    if (!gpu) throw new Error('no webgpu backend');
    const runner = trainStepRunner(REFERENCE, 32, 64);
    try {
      await runner.step();
      const train = await countDispatches(() => runner.step());
      o.say(`   reference train step [32, 64]: ${train.dispatches} dispatches, ${train.submits} submits; most: ${topKernels(train)}`);
      // the backend's own settings the issue asks about, each on the same step: what stays is decided by a GPU's times
      const brief = (c: DispatchCount) => ({ dispatches: c.dispatches, submits: c.submits, uploads: c.uploads.count, ms: c.ms });
      const settings: Record<string, ReturnType<typeof brief>> = { default: brief(train) };
      for (const [name, flag, value] of [
        ['submit_batch_64', 'WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE', 64],
        ['cpu_forward_off', 'WEBGPU_CPU_FORWARD', false],
      ] as const) {
        const was = tf.env().get(flag);
        tf.env().set(flag, value);
        try {
          await runner.step();
          settings[name] = brief(await countDispatches(() => runner.step()));
        } finally {
          tf.env().set(flag, was);
        }
      }
      o.say(
        `   the same with ${Object.entries(settings)
          .filter(([k]) => k !== 'default')
          .map(([k, v]) => `${k}: ${v.dispatches} dispatches, ${v.submits} submits, ${v.uploads} uploads`)
          .join('; ')}`,
      );
      const model = Transformer.init(REFERENCE, 3);
      try {
        const prompts = Array.from({ length: 8 }, (_, i) => [1, 5 + i, 9, 12]);
        const decode = await decodeStepCount((k) =>
          generate(model, prompts, { maxNewTokens: k, temperature: 1, topP: 1, greedy: false, eosId: -1, rng: makeRng(4) }).then(() => undefined),
        );
        o.say(`   reference decode step (8 rows): ${decode.dispatches} dispatches, ${decode.downloads.count} downloads; most: ${topKernels(decode)}`);
        const half_weights = await halfDecode(model, prompts, decode, o.say);
        return {
          train_step: train,
          decode_step: decode,
          train_step_settings: settings,
          half_weights,
        };
      } finally {
        model.dispose();
      }
    } finally {
      runner.dispose();
    }
  });

  // Dawn's toggles for the engine's device, each setting in a process of its own (Dawn takes them when it is loaded):
  // the reference train step and a rollout, timed with the queue drained, the launches counted. Validation and
  // robustness checks are per-call work on the host, so they show wherever dispatch is what a step pays for.
  await stage('dawn_toggles', async () => {
    if (!gpu) throw new Error('no webgpu backend');
    const out: Record<string, unknown> = {};
    for (const [name, toggles] of [
      ['default', ''],
      ['skip_validation,disable_robustness', 'skip_validation,disable_robustness'],
    ]) {
      const r = spawnSync(process.execPath, [process.argv[1], 'bench', '--toggles-child'], {
        encoding: 'utf8',
        timeout: 300_000,
        env: { ...process.env, CREDIT_LENS_DAWN_TOGGLES: toggles },
      });
      const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
      if (r.status !== 0 || !line.startsWith('{')) throw new Error(`${name}: exit ${r.status} ${(r.stderr ?? '').trim().split('\n').pop() ?? ''}`);
      out[name] = JSON.parse(line);
    }
    return out;
  });

  // The same step in TRL (credit_lens's CreditGRPOTrainer) on PyTorch on this machine's device, where its image has
  // TRL and transformers: credit_lens itself comes from the working tree (python/), nothing is installed.
  await stage('trl_example_step', async () => {
    const path = [join(__dirname, '../../examples/countdown-tiny.credit.yaml'), resolve('examples/countdown-tiny.credit.yaml')].find(existsSync);
    if (!path) throw new Error('examples/countdown-tiny.credit.yaml not found');
    const { config } = loadConfig(path);
    const { trlStepBench } = await import('./trl');
    const { CharTokenizer } = await import('../model/tokenizer');
    const { makeTask } = await import('../tasks');
    const vocab = CharTokenizer.fromAlphabet(makeTask(config.task, 1).alphabet()).vocabSize;
    // here, the Python with the package index's TRL (the reference's Debian Python has none); there, the image's
    const python = o.local ? process.env.CREDIT_LENS_PYTHON || 'python3' : o.torchPython;
    const r = trlStepBench(config, path, o.quick, vocab, process.argv[1], {
      python,
      device: o.torchDevice === 'cuda' ? 'cuda' : 'cpu',
      env: { PYTHONPATH: [resolve('python'), process.env.PYTHONPATH].filter(Boolean).join(':') },
    });
    if ('error' in r) {
      // what the image holds, so that the next loan knows what to carry
      const have = spawnSync(python, ['-c', PACKAGES], { encoding: 'utf8' }).stdout.trim();
      throw new Error(`${r.error} (the image's packages: ${have || 'unknown'})`);
    }
    const engine = report.stages.example_grpo_step as { seconds?: number } | undefined;
    return { ...r, ...(engine?.seconds ? { engine_webgpu_over_trl: engine.seconds / r.trl_step_s } : {}) };
  });

  // The seeds' model size: scoring, greedy decoding and LoRA updates of the Qwen2.5-0.5B-shaped folder.
  if (!o.quick) {
    await stage('qwen05b', async () => {
      if (!gpu) throw new Error('no webgpu backend');
      const r = await benchModelSize({
        quick: false,
        say: (m) => o.say(`   ${m}`),
        backend: 'webgpu',
        torchPython: o.torchPython,
        torchDevice: o.torchDevice,
        loraRows: [1, 8],
        tokenizerDir: o.tokenizerDir,
      });
      if ('error' in r) throw new Error(r.error);
      return r as unknown as Record<string, unknown>;
    });
  }
  tf.disposeVariables();
  save();
  return report;
}

/**
 * model.torch_dtype on the reference model: the decoding of `prompts` again with every projection and the embedding in
 * bfloat16, its launches and its speed against float32's.
 */
async function halfDecode(model: Transformer, prompts: number[][], f32Decode: DispatchCount, say: (m: string) => void): Promise<Record<string, unknown>> {
  const greedy = (k: number) =>
    generate(model, prompts, { maxNewTokens: k, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(4) }).then(() => undefined);
  const rate = async () => {
    await greedy(4);
    const t = performance.now();
    await greedy(48);
    return (prompts.length * 48) / ((performance.now() - t) / 1000);
  };
  const f32Rate = await rate();
  const stored = await model.storeFrozen('bfloat16', { all: true });
  const decode_step = await decodeStepCount(greedy);
  const halfRate = await rate();
  say(
    `   reference decode step with its weights in bfloat16: ${decode_step.dispatches} dispatches (float32: ${f32Decode.dispatches}); greedy ${halfRate.toFixed(0)} tokens/s against ${f32Rate.toFixed(0)} in float32 (${((stored.packed * 2) / 1e6).toFixed(2)} MB saved)`,
  );
  return {
    format: 'bfloat16',
    weights: stored.weights,
    bytes_saved: 2 * stored.packed,
    decode_step,
    greedy_tokens_per_s: { float32: f32Rate, bfloat16: halfRate },
  };
}

/**
 * The toggles stage's child (bench --toggles-child): in this process's Dawn (CREDIT_LENS_DAWN_TOGGLES), the reference
 * model's train step [32, 64] and a rollout of 8 rows × 32 tokens, each the median of 5 after a warm-up, with the step's
 * dispatches. One JSON line.
 */
export async function togglesChild(): Promise<Record<string, unknown>> {
  await initBackend('webgpu');
  const runner = trainStepRunner(REFERENCE, 32, 64);
  const model = Transformer.init(REFERENCE, 3);
  try {
    const prompts = Array.from({ length: 8 }, (_, i) => [1, 5 + i, 9, 12]);
    const rollout = () =>
      generate(model, prompts, { maxNewTokens: 32, temperature: 1, topP: 1, eosId: -1, rng: makeRng(4), rngs: prompts.map((_, i) => makeRng(i)) }).then(
        () => undefined,
      );
    const timed = async (f: () => Promise<void>) => {
      await f();
      const runs: DispatchCount[] = [];
      for (let i = 0; i < 5; i++) runs.push(await countDispatches(f));
      return { ms: median(runs.map((c) => c.ms)), dispatches: runs[0].dispatches, submits: runs[0].submits };
    };
    return { toggles: process.env.CREDIT_LENS_DAWN_TOGGLES || null, train_step: await timed(() => runner.step()), rollout: await timed(rollout) };
  } finally {
    model.dispose();
    runner.dispose();
  }
}
