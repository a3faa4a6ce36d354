// `credit-lens import` of a prime-rl token export without a model, timed at two sizes for `npm run bench`:
// the time per token should not grow with the export (the import is linear: one pass to bucket records by step).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRng } from '../core/rng';
import { importRollouts } from '../import/import';

/** A prime-rl export of about `tokens` completion tokens: 64-token sequences, 256 per step, one rank file per step. */
function writePrimeExport(dir: string, tokens: number, seed = 1): void {
  const rng = makeRng(seed);
  const seqs = Math.ceil(tokens / 64);
  const perStep = 256;
  for (let s = 0; s * perStep < seqs; s++) writePrimeStep(dir, s + 1, Math.min(perStep, seqs - s * perStep), rng);
}

/** One step of a prime-rl export: `seqs` sequences of a 12-token prompt and 64 completion tokens, one rank file. */
function writePrimeStep(dir: string, step: number, seqs: number, rng: () => number): void {
  const perSeq = 64;
  const folder = join(dir, 'token_exports', `step_${step}`);
  mkdirSync(folder, { recursive: true });
  const lines: string[] = [];
  for (let k = 0; k < seqs; k++) {
    const prompt = Array.from({ length: 12 }, () => 1 + Math.floor(rng() * 500));
    const comp = Array.from({ length: perSeq }, () => 1 + Math.floor(rng() * 500));
    const n = prompt.length + perSeq;
    const on = <T>(v: T[], fill: T) => [...prompt.map(() => fill), ...v];
    const adv = rng() - 0.5;
    lines.push(
      JSON.stringify({
        step,
        token_ids: [...prompt, ...comp],
        loss_mask: on(
          comp.map(() => true),
          false,
        ),
        advantages: on(
          comp.map(() => adv),
          0,
        ),
        rewards: on(
          comp.map(() => (adv > 0 ? 1 : 0)),
          null,
        ),
        trainer_logprobs: on(
          comp.map(() => -rng()),
          0,
        ),
        entropy: on(
          comp.map(() => rng()),
          0,
        ),
        mismatch_kl: on(
          comp.map(() => rng() * 1e-3),
          null,
        ),
        position_ids: Array.from({ length: n }, (_, i) => i),
      }),
    );
  }
  writeFileSync(join(folder, 'rank_0.jsonl'), lines.join('\n') + '\n');
}

/**
 * import --follow's latency: a prime-rl trainer writes a step of 64 completions every 1.5 s; from the moment step N is
 * whole (step N + 1's file written) to step N's tables and metrics row written, at the default poll of 1 s. The
 * median and the largest of `steps` steps.
 */
export async function benchFollow(steps = 5): Promise<{ completions_per_step: number; median_s: number; max_s: number; steps: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'credit-lens-follow-'));
  const rng = makeRng(2);
  const whole = new Map<number, number>();
  const latencies: number[] = [];
  const stop = new AbortController();
  try {
    const { followImport } = await import('../import/follow');
    const src = join(dir, 'src');
    writePrimeStep(src, 1, 64, rng);
    const follow = followImport({
      source: src,
      out: join(dir, 'runs'),
      name: 'bench',
      signal: stop.signal,
      log: () => {},
      onStep: (step) => {
        const t = whole.get(step);
        if (t !== undefined) latencies.push((performance.now() - t) / 1000);
      },
    });
    for (let step = 2; step <= steps + 1; step++) {
      await new Promise((r) => setTimeout(r, 1500));
      writePrimeStep(src, step, 64, rng);
      whole.set(step - 1, performance.now());
    }
    await new Promise((r) => setTimeout(r, 2500));
    stop.abort();
    await follow;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const sorted = [...latencies].sort((a, b) => a - b);
  return { completions_per_step: 64, median_s: sorted[Math.floor(sorted.length / 2)], max_s: sorted[sorted.length - 1], steps: sorted.length };
}

/** Seconds to import exports of `sizes` completion tokens (no model), and the time per million tokens of each. */
export async function benchImport(sizes = [250_000, 1_000_000]): Promise<{ tokens: number; seconds: number; s_per_million: number }[]> {
  const out: { tokens: number; seconds: number; s_per_million: number }[] = [];
  for (const tokens of sizes) {
    const dir = mkdtempSync(join(tmpdir(), 'credit-lens-import-'));
    try {
      writePrimeExport(join(dir, 'src'), tokens);
      const t0 = performance.now();
      await importRollouts({ source: join(dir, 'src'), out: join(dir, 'runs'), name: 'bench', log: () => {} });
      const seconds = (performance.now() - t0) / 1000;
      out.push({ tokens, seconds, s_per_million: seconds / (tokens / 1e6) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}
