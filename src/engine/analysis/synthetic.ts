// A synthetic run of a given size for `credit-lens bench`: the analysis timed on a million rows without training.
import { analyzeRun } from './analysis';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allocTokenColumns, writeEpisodeTable, writeTokenTable } from '../rundir/arrow_tables';
import { makeRng, randNormal } from '../core/rng';
import { METRICS_JSONL, stepFile, writeRunInfo } from '../rundir/rundir';
import { tokenType } from '../tasks/sections';

// ---- benchmark ----

const BENCH_VOCAB = [
  ' ',
  '<think>',
  '</think>',
  '\n',
  '<answer>',
  '</answer>',
  'so',
  ' the',
  ' try',
  ',',
  '>',
  ' to',
  'answer',
  '0',
  '1',
  '2',
  '3',
  '4',
  '5',
  '6',
  '7',
  '8',
  '9',
  '+',
  '-',
  '*',
  '/',
  '=',
  '(',
  ')',
  ' 12',
  ' -',
];

/**
 * Write a synthetic run directory of `rows` token rows (steps of 64 episodes, 8 per prompt, lengths 8–64,
 * group-normalised advantages, think then answer sections) with writeTokenTable/writeEpisodeTable.
 */
export function writeSyntheticRun(dir: string, rows: number, seed = 1): void {
  for (const sub of ['tokens', 'episodes', 'checkpoints']) mkdirSync(join(dir, sub), { recursive: true });
  writeRunInfo(dir, {
    id: 'synthetic',
    name: 'synthetic',
    status: 'completed',
    started: new Date(0).toISOString(),
    ended: null,
    backend: 'none',
    engine_version: '0',
    strategy: 'none',
  });
  const rng = makeRng(seed);
  const types = BENCH_VOCAB.map((t) => tokenType(t));
  const metrics: string[] = [JSON.stringify({ step: 0, phase: 'eval', eval_success: 0.1 })];
  let left = rows;
  for (let step = 1; left > 0; step++) {
    const lengths: number[] = [];
    const adv: number[] = [];
    for (let g = 0; g < 8; g++) {
      const rewards = Array.from({ length: 8 }, () => (rng() < 0.3 ? 1 : 0.1));
      const m = rewards.reduce((a, b) => a + b, 0) / 8;
      const sd = Math.sqrt(rewards.reduce((a, b) => a + (b - m) ** 2, 0) / 7);
      for (const r of rewards) {
        adv.push((r - m) / (sd + 1e-4));
        lengths.push(Math.min(left - lengths.reduce((a, b) => a + b, 0), 8 + Math.floor(rng() * 57)));
      }
    }
    const eps = lengths.filter((l) => l > 0).length;
    const n = lengths.reduce((a, b) => a + b, 0);
    left -= n;
    const cols = allocTokenColumns(n);
    cols.step.fill(step);
    cols.weight.fill(1);
    let i = 0;
    for (let e = 0; e < eps; e++) {
      for (let p = 0, at = 0; p < lengths[e]; p++, i++) {
        const id = Math.floor(rng() * BENCH_VOCAB.length);
        cols.char_start[i] = at;
        at += BENCH_VOCAB[id].length;
        cols.episode[i] = e;
        cols.prompt_idx[i] = Math.floor(e / 8);
        cols.position[i] = p;
        cols.token_id[i] = id;
        cols.token[i] = BENCH_VOCAB[id];
        cols.logprob[i] = -Math.abs(randNormal(rng)) * 0.6;
        cols.entropy[i] = rng();
        cols.advantage[i] = adv[e];
        cols.effective_advantage[i] = adv[e];
        cols.contribution[i] = Math.fround(cols.effective_advantage[i] * cols.logprob[i]);
        cols.section[i] = p < lengths[e] * 0.8 ? 'think' : 'answer';
        cols.token_type[i] = types[id];
      }
    }
    writeTokenTable(stepFile(dir, 'tokens', step), { ...cols, attribution: null, importance: null });
    writeEpisodeTable(stepFile(dir, 'episodes', step), {
      step: new Int32Array(eps).fill(step),
      episode: Int32Array.from({ length: eps }, (_, e) => e),
      prompt_idx: Int32Array.from({ length: eps }, (_, e) => Math.floor(e / 8)),
      prompt: new Array<string>(eps).fill('3 5 2 -> 16'),
      completion: new Array<string>(eps).fill(''),
      reward: Float32Array.from(adv.slice(0, eps), (a) => (a > 0 ? 1 : 0.1)),
      reward_format: new Float32Array(eps).fill(1),
      reward_answer: Float32Array.from(adv.slice(0, eps), (a) => (a > 0 ? 1 : 0)),
      success: adv.slice(0, eps).map((a) => a > 0),
      advantage: Float32Array.from(adv.slice(0, eps)),
      length: Int32Array.from(lengths.slice(0, eps)),
      oracle_span: new Array<null>(eps).fill(null),
    });
    metrics.push(JSON.stringify({ step, phase: 'grpo', reward_mean: 0.4 }));
  }
  writeFileSync(join(dir, METRICS_JSONL), metrics.join('\n') + '\n');
}

/**
 * Seconds `analyzeRun` takes on a synthetic run of `rows` token rows: the median of 3 timed calls after one
 * untimed warm-up (a cold call adds the JIT's first compile). Writing the run is not timed.
 */
export async function benchAnalysis(rows = 1_000_000): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'credit-lens-analysis-'));
  try {
    writeSyntheticRun(dir, rows);
    analyzeRun(dir);
    const times: number[] = [];
    for (let k = 0; k < 3; k++) {
      const t0 = performance.now();
      analyzeRun(dir);
      times.push((performance.now() - t0) / 1000);
    }
    return times.sort((a, b) => a - b)[1];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
