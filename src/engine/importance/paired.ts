// Seed doc 004, part 1: paired rollouts. For each prompt, G rollouts in G/2 pairs; the two members of a pair share
// the completion's first t tokens and are then sampled independently (drawPairs: t uniform in 0..max_new_tokens − 1,
// drawn before any continuation, a prefix that already ended redrawn, both members fresh from the prefix, so the two
// are exchangeable). The rewards of the pairs are what the importance network (importance.ts) learns a correlation
// from. ρ after the final token is defined, not trained: ρ_n = 1, since the completion then fixes the reward; the net
// is trained on t < n only (a pair always has at least one token after its shared prefix).
//
// Output (design.md#run-directory): `<output_dir>/<name>-paired-<ts>/rollouts_g<G>.parquet` with the seed's columns, plus
// `rollouts_metadata.json`. Beyond the seed's columns the file has `pair_id` (which two rows share a prefix) and
// `completion_token_ids` (the sampled ids: re-encoding the text does not give them back for a BPE tokenizer).
import { meanVar } from '../core/stats';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { latestCheckpoint } from '../rundir/checkpoint';
import { loadConfig, type CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import { Transformer } from '../model/model';
import { childSeed, makeRng, shuffle, type Rng } from '../core/rng';
import { claimFolder, runTimestamp } from '../rundir/rundir';
import { writeFileAtomic } from '../core/files';
import { generate } from '../model/sampler';
import { openSession } from '../session/session';
import type { Example, RewardResult, Task, Tokenizer } from '../core/types';
import { ENGINE_VERSION } from '../core/version';
import { encodeParquet } from './parquet';

export interface PairedCompletion {
  /** 1..G; pair k holds completions 2k−1 (sampled first) and 2k (re-generated from the shared prefix) */
  completionId: number;
  pairId: number;
  /** tokens shared with the sister rollout: both continue independently from completion token t */
  split: number;
  ids: number[];
  text: string;
  reward: RewardResult;
}

export interface PairedGroup {
  groupId: number;
  example: Example;
  completions: PairedCompletion[];
}

export interface PairedSampling {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  rng: Rng;
  /** rows per generate() call, to bound memory */
  chunk?: number;
}

const STOP = '</answer>';

/** Cut a completion at the first EOS or at the token that completes "</answer>", as the sampler stops rows. */
function stopCompletion(tokenizer: Tokenizer, ids: number[], maxLen: number): number[] {
  const eos = new Set(tokenizer.eosIds ?? [tokenizer.eosId]);
  let out = ids.slice(0, maxLen);
  const e = out.findIndex((id) => eos.has(id));
  if (e >= 0) out = out.slice(0, e + 1);
  const { text, tokens } = tokenizer.decodeWithOffsets(out);
  const at = text.indexOf(STOP);
  if (at >= 0) {
    const k = tokens.findIndex((t) => t.end >= at + STOP.length);
    out = out.slice(0, k + 1);
  }
  return out;
}

/**
 * Rows with different shared prefixes go through one generate() call when the longest prompt + prefix plus the
 * largest remaining budget fits max_seq_len (each row alone always fits: prompt + max_new_tokens does).
 * Rows sorted by remaining budget (largest first, i.e. shortest shared prefix first), cut greedily into such buckets.
 */
function budgetBuckets(rows: { len: number; budget: number }[], maxSeqLen: number): number[][] {
  const order = rows.map((_, i) => i).sort((a, b) => rows[b].budget - rows[a].budget);
  const buckets: number[][] = [];
  let cur: number[] = [];
  let maxLen = 0;
  let maxBudget = 0;
  for (const i of order) {
    const len = Math.max(maxLen, rows[i].len);
    const budget = Math.max(maxBudget, rows[i].budget);
    if (cur.length > 0 && len + budget > maxSeqLen) {
      buckets.push(cur);
      cur = [];
      maxLen = rows[i].len;
      maxBudget = rows[i].budget;
    } else {
      maxLen = len;
      maxBudget = budget;
    }
    cur.push(i);
  }
  if (cur.length) buckets.push(cur);
  return buckets;
}

/** One row to sample: a prefix (prompt + shared completion tokens) and how many new tokens it may add. */
export interface SampleRow {
  prefix: number[];
  budget: number;
}
/** Samples one continuation per row, each stopped as the sampler stops rows (EOS, "</answer>", its budget). */
export type RowSampler = (rows: SampleRow[]) => Promise<number[][]>;

/**
 * After this many rounds a pair whose prefixes all ended falls back to t = 0 (the prompt alone; always valid). A
 * round is accepted with probability P(length > t), at least 1/max_new_tokens, so 64 rounds leave a fallback only for a
 * policy that nearly always stops within a token or two.
 */
export const MAX_PREFIX_ROUNDS = 64;

export interface PairDraw {
  /** shared completion tokens */
  split: number;
  first: number[];
  second: number[];
}

/**
 * Seed doc 004's pairs, drawn so that the two members are exchangeable: for each pair, t is drawn uniformly in
 * 0..max_new_tokens − 1 with no look at any continuation; a prefix of t tokens is sampled from the prompt (a full
 * sample cut at t: sampling is autoregressive, so its first t tokens are a sample of t tokens); a prefix that already
 * ended (the sample stopped within its first t tokens) is rejected and both t and the prefix are drawn again; then BOTH
 * members are sampled fresh from prompt + prefix. The sample that gave the prefix contributes nothing past t. (Before
 * this, t was uniform over the first member's own length and the first member kept its continuation, which tied R1 to
 * t and broke the exchangeability the bivariate-Gaussian model of the net assumes; a test shows both.)
 * Returns, per pair row, its split and both members' completion ids, and how many pairs fell back to t = 0.
 */
export async function drawPairs(
  prompts: number[][],
  maxNewTokens: number,
  sample: RowSampler,
  rng: Rng,
  ended: (ids: number[]) => boolean,
): Promise<{ pairs: PairDraw[]; fallbacks: number }> {
  const prefix: (number[] | null)[] = prompts.map(() => null);
  let pending = prompts.map((_, r) => r);
  for (let round = 0; round < MAX_PREFIX_ROUNDS && pending.length; round++) {
    const ts = pending.map(() => Math.floor(rng() * maxNewTokens));
    // Only t tokens are sampled: the prefix. It had ended when the sampler stopped it short of t, or at its t-th token.
    const got = await sample(pending.map((r, j) => ({ prefix: prompts[r], budget: ts[j] })));
    const still: number[] = [];
    pending.forEach((r, j) => {
      if (got[j].length === ts[j] && !(ts[j] > 0 && ended(got[j]))) prefix[r] = got[j];
      else still.push(r);
    });
    pending = still;
  }
  for (const r of pending) prefix[r] = [];
  const rows = prompts.flatMap((p, r) => [0, 1].map(() => ({ prefix: [...p, ...prefix[r]!], budget: maxNewTokens - prefix[r]!.length })));
  const cont = await sample(rows);
  return {
    pairs: prompts.map((_, r) => ({ split: prefix[r]!.length, first: [...prefix[r]!, ...cont[2 * r]], second: [...prefix[r]!, ...cont[2 * r + 1]] })),
    fallbacks: pending.length,
  };
}

/** The Transformer as a RowSampler: rows bucketed by prefix length and budget, each stopped as if sampled alone. */
function modelSampler(model: Transformer, tokenizer: Tokenizer, o: PairedSampling): RowSampler {
  const sampleOpts = {
    temperature: o.temperature,
    topP: o.topP,
    eosId: tokenizer.eosIds ?? tokenizer.eosId,
    stopAfter: [STOP],
    decode: (ids: number[]) => tokenizer.decode(ids),
    rng: o.rng,
  };
  return async (rows) => {
    const out: number[][] = new Array(rows.length);
    const sized = rows.map((r) => ({ len: r.prefix.length, budget: r.budget }));
    for (const bucket of budgetBuckets(sized, model.cfg.maxSeqLen)) {
      const maxNew = Math.max(...bucket.map((r) => rows[r].budget));
      if (maxNew === 0) {
        // every row of the bucket asks for no token (a prefix of length 0 was drawn): nothing to sample
        for (const r of bucket) out[r] = [];
        continue;
      }
      const cont = await generate(
        model,
        bucket.map((r) => rows[r].prefix),
        { ...sampleOpts, maxNewTokens: maxNew },
      );
      // A row with a smaller budget than its bucket's ran on: its first `budget` tokens are what it alone would have
      // sampled (sampling is autoregressive), the rest is cut.
      bucket.forEach((r, j) => {
        out[r] = cont[j].ids.slice(0, rows[r].budget);
      });
    }
    return out;
  };
}

/**
 * G completions per example (G even) in G/2 exchangeable pairs (drawPairs). `groupIds[k]` numbers the group of
 * examples[k] (one prompt can be drawn for several groups). `fallbacks` counts pairs that shared the prompt only.
 */
export async function generatePairedGroups(
  model: Transformer,
  tokenizer: Tokenizer,
  task: Task,
  examples: Example[],
  groupIds: number[],
  G: number,
  o: PairedSampling,
  stats: { fallbacks: number } = { fallbacks: 0 },
): Promise<PairedGroup[]> {
  if (!Number.isInteger(G) || G < 2 || G % 2 !== 0)
    throw new UserError(`grpo.group_size: got ${G}; paired rollouts need an even group size ≥ 2 (G/2 pairs per prompt)`);
  const half = G / 2;
  const chunkRows = o.chunk ?? 128;
  const groupsPerChunk = Math.max(1, Math.floor(chunkRows / half));
  const out: PairedGroup[] = [];
  const sampler = modelSampler(model, tokenizer, o);
  // A member whose "</answer>" straddles prefix and continuation, or whose rows shared a longer budget, stops where
  // the sampler would have stopped it alone.
  const stop = (ids: number[]) => stopCompletion(tokenizer, ids, o.maxNewTokens);
  for (let g0 = 0; g0 < examples.length; g0 += groupsPerChunk) {
    const exs = examples.slice(g0, g0 + groupsPerChunk);
    const prompts = exs.map((ex) => tokenizer.encodePrompt(ex.prompt));
    const rowPrompt = exs.flatMap((_, k) => Array.from({ length: half }, () => k));
    const eos = new Set(tokenizer.eosIds ?? [tokenizer.eosId]);
    const ended = (ids: number[]) => eos.has(ids[ids.length - 1]) || tokenizer.decode(ids).includes(STOP);
    const { pairs, fallbacks } = await drawPairs(
      rowPrompt.map((k) => prompts[k]),
      o.maxNewTokens,
      async (rows) => (await sampler(rows)).map(stop),
      o.rng,
      ended,
    );
    stats.fallbacks += fallbacks;
    exs.forEach((ex, k) => {
      const completions: PairedCompletion[] = [];
      for (let p = 0; p < half; p++) {
        const d = pairs[k * half + p];
        for (const [m, ids] of [stop(d.first), stop(d.second)].entries()) {
          const text = tokenizer.decode(ids);
          completions.push({ completionId: 2 * p + m + 1, pairId: p + 1, split: d.split, ids, text, reward: task.reward(text, ex) });
        }
      }
      out.push({ groupId: groupIds[g0 + k], example: ex, completions });
    });
  }
  return out;
}

/** Mean and unbiased (N−1) variance, as pandas' groupby().var() gives (the seed's reference loads pandas). */
export { meanVar } from '../core/stats';

/** The seed's partial-reward dictionary: the task's named parts (countdown: format, answer, uses_all_numbers, valid_expression). */
export function partialRewards(r: RewardResult): Record<string, number> {
  return r.parts ?? { format: r.format, answer: r.answer };
}

export interface PairedTable {
  columns: Record<string, unknown[]>;
  /** partial_reward_k (k from 1) ↔ name */
  partialNames: string[];
  zeroVarianceGroups: number;
}

/** Rows of the parquet file, one per completion, with the group statistics repeated on each row (as the seed asks). */
export function pairedRows(groups: PairedGroup[]): PairedTable {
  const names: string[] = [];
  for (const g of groups) for (const c of g.completions) for (const k of Object.keys(partialRewards(c.reward))) if (!names.includes(k)) names.push(k);
  const cols: Record<string, unknown[]> = {
    prompt_id: [],
    prompt_text: [],
    group_id: [],
    completion_id: [],
    pair_id: [],
    split_token_idx: [],
    completion_text: [],
    completion_token_ids: [],
    reward: [],
    reward_group_mean: [],
    reward_group_var: [],
  };
  names.forEach((_, j) => {
    for (const s of ['', '_group_mean', '_group_var']) cols[`partial_reward_${j + 1}${s}`] = [];
  });
  let zeroVar = 0;
  for (const g of groups) {
    const total = meanVar(g.completions.map((c) => c.reward.total));
    if (total.var === 0) zeroVar++;
    // A part missing from some completions' dictionaries is null there and left out of the group's statistics.
    const parts = names.map((n) => g.completions.map((c) => partialRewards(c.reward)[n]));
    const partStats = parts.map((vs) => {
      const present = vs.filter((v) => v !== undefined);
      return present.length ? meanVar(present) : null;
    });
    g.completions.forEach((c, i) => {
      cols.prompt_id.push(g.example.id);
      cols.prompt_text.push(g.example.prompt);
      cols.group_id.push(g.groupId);
      cols.completion_id.push(c.completionId);
      cols.pair_id.push(c.pairId);
      cols.split_token_idx.push(c.split);
      cols.completion_text.push(c.text);
      cols.completion_token_ids.push(Int32Array.from(c.ids));
      cols.reward.push(c.reward.total);
      cols.reward_group_mean.push(total.mean);
      cols.reward_group_var.push(total.var);
      names.forEach((_, j) => {
        const k = `partial_reward_${j + 1}`;
        cols[k].push(parts[j][i] ?? null);
        cols[`${k}_group_mean`].push(partStats[j]?.mean ?? null);
        cols[`${k}_group_var`].push(partStats[j]?.var ?? null);
      });
    });
  }
  return { columns: cols, partialNames: names, zeroVarianceGroups: zeroVar };
}

/** A run folder (its newest checkpoint) or a checkpoint folder → the checkpoint folder. */
export function resolveCheckpointDir(p: string): string {
  if (!existsSync(p) || !statSync(p).isDirectory())
    throw new UserError(`--checkpoint ${p}: no such folder (give a run folder or one of its checkpoints/step-N folders)`);
  if (existsSync(join(p, 'meta.json'))) return p;
  const latest = latestCheckpoint(p);
  if (!latest) throw new UserError(`--checkpoint ${p}: neither a checkpoint folder (meta.json) nor a run folder with checkpoints`);
  return latest;
}

/** `<output_dir>/<name>-<kind>-<yyyymmdd-hhmmss>`, claimed as a new folder as a run's is (a `-2`, `-3` … if taken). */
export function createOutputFolder(outputDir: string, name: string, kind: string, now: Date): string {
  mkdirSync(outputDir, { recursive: true });
  return claimFolder(join(outputDir, `${name}-${kind}-${runTimestamp(now)}`));
}

export interface PairedOptions {
  configPath: string;
  sets?: string[];
  /** groups of G rollouts (default 64) */
  groups?: number;
  /** a run folder or checkpoint folder whose trained policy generates (default: the config's model as built) */
  checkpoint?: string;
  /** replaces the config's output_dir */
  outputDir?: string;
  /** the command line, recorded in the metadata */
  argv?: string[];
  log?: (m: string) => void;
}

export interface PairedResult {
  dir: string;
  parquet: string;
  metadata: string;
  rows: number;
  groups: number;
  zeroVarianceGroups: number;
}

function modelDescription(cfg: CreditConfig, checkpoint: string | null): Record<string, unknown> {
  const m = cfg.model;
  return m.source === 'hf'
    ? { source: 'hf', path: m.path, checkpoint }
    : {
        source: 'scratch',
        d_model: m.d_model,
        n_layers: m.n_layers,
        n_heads: m.n_heads,
        n_kv_heads: m.n_kv_heads,
        d_ff: m.d_ff,
        max_seq_len: m.max_seq_len,
        checkpoint,
      };
}

/** `credit-lens rollouts paired`: generate the groups and write the parquet file and its metadata. */
/** How the pairs were drawn, for rollouts_metadata.json. */
const PAIRING = {
  split: 'uniform in 0..max_new_tokens-1, drawn before any continuation; a prefix that had already ended is redrawn (t and prefix)',
  members: 'both sampled fresh from prompt + the shared prefix: exchangeable',
  rho_after_final_token: 'defined as 1 (the finished completion fixes the reward), not trained',
};

/** What the parquet's columns mean where the seed's names do not say, for rollouts_metadata.json. */
const COLUMN_NOTES = {
  pair_id: 'completions 2k-1 and 2k form pair k: they share the first split_token_idx completion tokens',
  split_token_idx: 'number of completion tokens the pair shares; both are sampled independently from that token on',
  completion_token_ids: 'the sampled token ids (EOS included when sampled)',
  reward_group_var: "unbiased (N-1) variance over the group's G rewards",
};

export async function pairedRollouts(o: PairedOptions): Promise<PairedResult> {
  const t0 = performance.now();
  const started = new Date();
  const log = o.log ?? (() => {});
  const { config: cfg, configPath } = loadConfig(o.configPath, o.sets ?? []);
  const G = cfg.grpo.group_size;
  if (G % 2 !== 0) throw new UserError(`grpo.group_size: got ${G}; paired rollouts need an even group size (G/2 pairs share a prefix)`);
  const nGroups = o.groups ?? 64;
  if (!Number.isInteger(nGroups) || nGroups < 1) throw new UserError(`--groups: got ${o.groups}; expected a positive integer`);
  const ckDir = o.checkpoint ? resolveCheckpointDir(o.checkpoint) : null;
  const { session: s } = await openSession(cfg, { checkpoint: ckDir, log });
  try {
    if (ckDir) {
      log(`policy weights from ${ckDir}`);
    } else if (cfg.model.source === 'scratch') {
      log('warning: a freshly initialised scratch policy; without trained weights (--checkpoint) the rewards barely vary');
    }
    // Prompts cycle through a seeded shuffle of the training split, so a prompt gets several groups only once
    // every prompt has one.
    const rng = makeRng(childSeed(cfg.seed, 'paired'));
    const order = shuffle(rng, s.task.train.slice());
    const examples = Array.from({ length: nGroups }, (_, k) => order[k % order.length]);
    const stats = { fallbacks: 0 };
    const groups = await generatePairedGroups(
      s.model,
      s.tokenizer,
      s.task,
      examples,
      examples.map((_, k) => k),
      G,
      {
        maxNewTokens: cfg.grpo.max_new_tokens,
        temperature: cfg.grpo.temperature,
        topP: cfg.grpo.top_p,
        rng,
      },
      stats,
    );
    if (stats.fallbacks) log(`${stats.fallbacks} pairs shared the prompt only: every prefix drawn for them had ended (${MAX_PREFIX_ROUNDS} draws)`);
    const table = pairedRows(groups);
    const partials = Object.fromEntries(table.partialNames.map((n, j) => [`partial_reward_${j + 1}`, n]));
    const bytes = await encodeParquet(table.columns, { partial_rewards: JSON.stringify(partials), group_size: String(G) });
    const dir = createOutputFolder(o.outputDir ?? cfg.output_dir, cfg.name, 'paired', started);
    const parquet = join(dir, `rollouts_g${G}.parquet`);
    writeFileAtomic(parquet, bytes);
    const rows = table.columns.reward.length;
    const metadata = {
      arguments: {
        argv: o.argv ?? null,
        config: configPath,
        sets: o.sets ?? [],
        groups: nGroups,
        checkpoint: ckDir,
        output_dir: o.outputDir ?? cfg.output_dir,
      },
      date: started.toISOString(),
      runtime_s: (performance.now() - t0) / 1000,
      engine_version: ENGINE_VERSION,
      backend: s.backend.backend,
      seed: cfg.seed,
      model: modelDescription(cfg, ckDir),
      task: cfg.task,
      sampling: { group_size: G, max_new_tokens: cfg.grpo.max_new_tokens, temperature: cfg.grpo.temperature, top_p: cfg.grpo.top_p },
      pairing: { ...PAIRING, prefix_fallbacks: stats.fallbacks },
      file: basename(parquet),
      rows,
      groups: nGroups,
      distinct_prompts: new Set(examples.map((e) => e.id)).size,
      zero_variance_groups: table.zeroVarianceGroups,
      reward_mean: table.columns.reward.reduce((a: number, b) => a + (b as number), 0) / rows,
      partial_rewards: partials,
      columns: COLUMN_NOTES,
    };
    const metaPath = join(dir, 'rollouts_metadata.json');
    writeFileAtomic(metaPath, JSON.stringify(metadata, null, 2) + '\n');
    return { dir, parquet, metadata: metaPath, rows, groups: nGroups, zeroVarianceGroups: table.zeroVarianceGroups };
  } finally {
    s.model.dispose();
  }
}
