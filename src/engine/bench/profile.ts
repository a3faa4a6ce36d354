// `credit-lens bench --profile` ("profile first"): where the time of one train step and of one rollout goes,
// per tfjs kernel, from tf.profile on the chosen backend (auto by default: wasm-blas where OpenBLAS is installed). Kernel times are each kernel's own wall time as the backend
// measures it; "outside kernels" is the rest of the step's wall time: JS around the ops, gradient bookkeeping, host
// round-trips (arraySync of the log-probs), allocation. The tables go to bench/PROFILE.md.
import * as tf from '@tensorflow/tfjs';
import { initBackend, type BackendPreference } from '../model/backend';
import { makeRng } from '../core/rng';
import { Transformer, type ModelConfig } from '../model/model';
import { generate } from '../model/sampler';
import { REFERENCE, trainStepRunner } from './bench';

export interface OpRow {
  op: string;
  calls: number;
  ms: number;
  share: number;
}
export interface ProfileTable {
  what: string;
  wallMs: number;
  kernelMs: number;
  rows: OpRow[];
}

/** Kernels grouped by name, largest total first; `share` is of the whole wall time. */
export async function aggregate(what: string, wallMs: number, kernels: { name: string; kernelTimeMs: unknown }[]): Promise<ProfileTable> {
  const by = new Map<string, { calls: number; ms: number }>();
  for (const k of kernels) {
    const t = await k.kernelTimeMs;
    const ms = typeof t === 'number' ? t : 0;
    const e = by.get(k.name) ?? { calls: 0, ms: 0 };
    e.calls++;
    e.ms += ms;
    by.set(k.name, e);
  }
  const rows = [...by].map(([op, e]) => ({ op, calls: e.calls, ms: e.ms, share: e.ms / wallMs })).sort((a, b) => b.ms - a.ms);
  return { what, wallMs, kernelMs: rows.reduce((a, r) => a + r.ms, 0), rows };
}

export function profileMarkdown(t: ProfileTable, top = 14): string {
  const fmt = (x: number) => x.toFixed(x < 10 ? 2 : 1);
  const lines = [
    `**${t.what}**: ${fmt(t.wallMs)} ms wall, ${fmt(t.kernelMs)} ms in kernels`,
    '',
    '| op | calls | total ms | % of wall |',
    '|---|---:|---:|---:|',
  ];
  for (const r of t.rows.slice(0, top)) lines.push(`| ${r.op} | ${r.calls} | ${fmt(r.ms)} | ${(100 * r.share).toFixed(1)} |`);
  const rest = t.rows.slice(top);
  if (rest.length) {
    const ms = rest.reduce((a, r) => a + r.ms, 0);
    lines.push(`| ${rest.length} other ops | ${rest.reduce((a, r) => a + r.calls, 0)} | ${fmt(ms)} | ${((100 * ms) / t.wallMs).toFixed(1)} |`);
  }
  const outside = Math.max(0, t.wallMs - t.kernelMs);
  lines.push(`| outside kernels (JS, gradient bookkeeping, host round-trips) | | ${fmt(outside)} | ${((100 * outside) / t.wallMs).toFixed(1)} |`);
  return lines.join('\n');
}

/** One train step and one rollout (64 sequences × 16 new tokens with the KV cache) of the reference model, profiled. */
export async function profileReference(cfg: ModelConfig = REFERENCE, backend: BackendPreference = 'auto'): Promise<ProfileTable[]> {
  const chosen = (await initBackend(backend)).backend;
  const runner = trainStepRunner(cfg, 32, 64);
  for (let i = 0; i < 3; i++) await runner.step();
  let t0 = performance.now();
  const train = await tf.profile(async () => {
    await runner.step();
  });
  const trainWall = performance.now() - t0;
  // tf.profile hands back the engine's one profile record, which the next tf.profile call empties: read it now.
  const trainTable = await aggregate(`train step, reference model, [32, 64], Adam, ${chosen}`, trainWall, train.kernels);
  runner.dispose();
  const model = Transformer.init(cfg, 1);
  const prompts = Array.from({ length: 64 }, (_, i) => Array.from({ length: 8 }, (_, j) => 3 + ((i * 7 + j * 3) % 60)));
  const rng = makeRng(3);
  await generate(model, prompts, { maxNewTokens: 4, temperature: 1, topP: 1, eosId: -1, rng });
  t0 = performance.now();
  const decode = await tf.profile(async () => {
    await generate(model, prompts, { maxNewTokens: 16, temperature: 1, topP: 1, eosId: -1, rng });
  });
  const decodeWall = performance.now() - t0;
  model.dispose();
  return [
    trainTable,
    await aggregate(`rollout, reference model, 64 sequences × 16 new tokens (prefill + 16 decode steps), ${chosen}`, decodeWall, decode.kernels),
  ];
}
