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
  const perSeq = 64;
  const seqs = Math.ceil(tokens / perSeq);
  const perStep = 256;
  for (let s = 0; s * perStep < seqs; s++) {
    const folder = join(dir, 'token_exports', `step_${s + 1}`);
    mkdirSync(folder, { recursive: true });
    const lines: string[] = [];
    for (let k = 0; k < perStep && s * perStep + k < seqs; k++) {
      const prompt = Array.from({ length: 12 }, () => 1 + Math.floor(rng() * 500));
      const comp = Array.from({ length: perSeq }, () => 1 + Math.floor(rng() * 500));
      const n = prompt.length + perSeq;
      const on = <T>(v: T[], fill: T) => [...prompt.map(() => fill), ...v];
      const adv = rng() - 0.5;
      lines.push(
        JSON.stringify({
          step: s + 1,
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
