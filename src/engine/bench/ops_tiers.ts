// Do all three tiers of each fused op earn their place? Run by hand after `npm run build`:
// `node --import tsx src/engine/bench/ops_tiers.ts [--rounds N] [--small]`.
//
// An op of src/engine/model/ops can run as the plain tfjs composition (composed.ts), as a hand-assembled SIMD
// WebAssembly kernel (the wasm table) or as C (the wasm-blas table). This bench times the bench's two workloads —
// the reference model's train step and its rollout (src/engine/bench/bench.ts, the figures `npm run bench` reports
// against PyTorch) — with each backend's whole table, and with one op at a time taken down a tier: on wasm, to the
// composition; on wasm-blas, to the SIMD kernel where one exists, and to the composition. Variants run in
// interleaved rounds (the machine drifts 20–30 % over minutes); each figure is the median over rounds, and the
// spread of the full table's rounds says what is noise. An op earns its tier when taking it away costs more than that.
import { initBackend } from '../model/backend';
import { median } from '../core/stats';
import { REFERENCE, SMALL, rolloutRunner, trainStepRunner } from './bench';
import { tableFor, useOpsTable, type BackendOps } from '../model/ops';
import { WASM_BLAS_ALTERNATIVES } from '../model/ops/wasm_blas';

const arg = (name: string, dflt: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt);
const rounds = arg('--rounds', 3);
const small = process.argv.includes('--small');
const cfg = small ? SMALL : REFERENCE;
const [B, T] = small ? [16, 128] : [32, 64];
const [nSeq, newTokens] = small ? [32, 128] : [64, 64];

interface Variant {
  backend: 'wasm' | 'wasm-blas';
  /** which op was taken down, and to what; null for the backend's whole table */
  op: string | null;
  tier: string;
  table: BackendOps;
}

function without(t: BackendOps, op: string): BackendOps {
  const ops = { ...t.ops } as Record<string, unknown>;
  delete ops[op];
  return { ...t, name: `${t.name} − ${op}`, ops: ops as BackendOps['ops'] };
}

function withOp(t: BackendOps, op: string, from: BackendOps): BackendOps {
  return { ...t, name: `${t.name} (${op} from ${from.name})`, ops: { ...t.ops, [op]: (from.ops as Record<string, unknown>)[op] } as BackendOps['ops'] };
}

function variants(backend: 'wasm' | 'wasm-blas'): Variant[] {
  const own = tableFor(backend);
  const out: Variant[] = [{ backend, op: null, tier: backend === 'wasm' ? 'SIMD wasm' : 'native C', table: own }];
  const simd = tableFor('wasm');
  for (const op of Object.keys(own.ops)) {
    if (backend === 'wasm-blas' && op in simd.ops) out.push({ backend, op, tier: 'SIMD wasm', table: withOp(own, op, simd) });
    out.push({ backend, op, tier: 'composition', table: without(own, op) });
  }
  // the native kernels the table leaves out, taken *up* a tier: the measurement that decided it
  if (backend === 'wasm-blas') {
    const alt: BackendOps = { ...own, name: 'alternatives', ops: WASM_BLAS_ALTERNATIVES };
    for (const op of Object.keys(WASM_BLAS_ALTERNATIVES)) out.push({ backend, op, tier: 'native C (not in the table)', table: withOp(own, op, alt) });
  }
  return out;
}

async function measure(v: Variant): Promise<{ stepMs: number; tokS: number }> {
  useOpsTable(v.table);
  const step = trainStepRunner(cfg, B, T);
  for (let i = 0; i < 3; i++) await step.step();
  const times: number[] = [];
  for (let i = 0; i < (small ? 8 : 15); i++) {
    const t0 = performance.now();
    await step.step();
    times.push(performance.now() - t0);
  }
  step.dispose();
  const roll = await rolloutRunner(cfg, nSeq, newTokens);
  const rates = [await roll.run(), await roll.run()];
  roll.dispose();
  return { stepMs: median(times), tokS: Math.max(...rates) };
}

async function main(): Promise<void> {
  const all: Variant[] = [];
  const results = new Map<Variant, { stepMs: number[]; tokS: number[] }>();
  for (const backend of ['wasm', 'wasm-blas'] as const) {
    await initBackend(backend);
    all.push(...variants(backend));
  }
  for (let r = 0; r < rounds; r++) {
    // one backend at a time (initBackend switches), its variants in an order that alternates between rounds
    for (const backend of ['wasm', 'wasm-blas'] as const) {
      await initBackend(backend);
      const vs = all.filter((v) => v.backend === backend);
      for (const v of r % 2 ? [...vs].reverse() : vs) {
        const m = await measure(v);
        const acc = results.get(v) ?? { stepMs: [], tokS: [] };
        acc.stepMs.push(m.stepMs);
        acc.tokS.push(m.tokS);
        results.set(v, acc);
        process.stderr.write(
          `round ${r + 1}/${rounds} ${backend} ${v.op ?? '(whole table)'} → ${v.tier}: ${m.stepMs.toFixed(1)} ms, ${m.tokS.toFixed(0)} tok/s\n`,
        );
      }
    }
  }
  const model = small ? 'small model, train [16, 128], rollout 32 × 128' : 'reference model, train [32, 64], rollout 64 × 64';
  console.log(`\n**${model}; ${rounds} interleaved rounds, medians (full table: min–max over rounds)**\n`);
  console.log('| backend | op | runs as | train step ms | vs table | rollout tok/s | vs table |');
  console.log('|---|---|---|---:|---:|---:|---:|');
  for (const backend of ['wasm', 'wasm-blas'] as const) {
    const base = all.find((v) => v.backend === backend && v.op === null)!;
    const b = results.get(base)!;
    const bStep = median(b.stepMs);
    const bTok = median(b.tokS);
    for (const v of all.filter((x) => x.backend === backend)) {
      const m = results.get(v)!;
      const step = median(m.stepMs);
      const tok = median(m.tokS);
      if (v.op === null) {
        const range = (xs: number[], d: number) => `${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}`;
        console.log(
          `| ${backend} | (its table) | ${v.tier} | ${step.toFixed(1)} (${range(m.stepMs, 1)}) | 1.00 | ${tok.toFixed(0)} (${range(m.tokS, 0)}) | 1.00 |`,
        );
      } else {
        console.log(
          `| ${backend} | ${v.op} | ${v.tier} | ${step.toFixed(1)} | ${(step / bStep).toFixed(2)} | ${tok.toFixed(0)} | ${(tok / bTok).toFixed(2)} |`,
        );
      }
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
