// Batched autoregressive sampling with a KV cache.
//
// Per step the device computes log_softmax(logits / temperature) for the live rows and hands it over with one
// dataSync of a [B, V] tensor; choosing tokens (greedy, temperature, nucleus) happens on the CPU with the
// caller's seeded rng, so a run is reproducible on every backend. Finished rows are dropped from the cache
// (keepCacheRows) so the remaining steps only compute live rows: at once on host backends, and on a GPU once they are
// a quarter of the cache (each drop is a copy per layer; the draws are the same either way).
import * as tf from '@tensorflow/tfjs';
import { UserError } from '../core/errors';
import type { Transformer } from './model';
import type { KvCache } from './shapes';
import { SAMPLE_RECORD_FIELDS, type ModelOps } from './ops/ops';
import { backendCaps } from './ops';

export interface SampleOptions {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  greedy?: boolean;
  /** end-of-sequence id; several ids (e.g. Qwen's <|im_end|> and <|endoftext|>) all stop a row */
  eosId: number | number[];
  /** e.g. ['</answer>']: stop a row once its decoded completion contains one of these */
  stopAfter?: string[];
  /**
   * needed with stopAfter: the text the stop strings are looked for in, from a row's new ids and its index in the
   * output (a continuation of a completion prefix decodes the prefix too, so a stop text across the join is seen)
   */
  decode?: (ids: number[], row: number) => string;
  rng: () => number;
  /** one stream per output row instead of `rng`: a row's draws then do not depend on which rows share its batch */
  rngs?: (() => number)[];
  /**
   * Sample this many continuations of each prompt (output row b·repeat + m): the prompt's prefill is computed once
   * and its keys and values copied to its rows.
   */
  repeat?: number;
  /** per output row, at most this many new tokens (≤ maxNewTokens): a row stops there with 'length' */
  budgets?: number[];
  /**
   * Asked between decode steps (after a macrotask turn, so a signal's handler has run): true ends sampling with
   * SamplingStopped. A long batch (a probe's continuations on a large model) then stops within a few tokens.
   */
  stop?: () => boolean;
  /**
   * Report each token's log-prob under the untempered policy (temperature 1), as vLLM does by default, instead of under
   * the sampling distribution; the draw is the same either way.
   */
  rawLogprobs?: boolean;
}

/** generate() ended early because its `stop` said so; nothing it sampled is returned. */
export class SamplingStopped extends Error {
  constructor() {
    super('sampling stopped');
  }
}

/** What `f` returns, or null when a generate() inside it was ended by its `stop` (SamplingStopped). */
export async function unlessStopped<T>(f: () => Promise<T>): Promise<T | null> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof SamplingStopped) return null;
    throw e;
  }
}

/** Decode steps between two looks at `stop`: a macrotask turn costs microseconds, a decode step milliseconds. */
const STOP_CHECK_EVERY = 4;

/**
 * Steps drawn on the device between two reads of the record (sampleOnDevice): 64 new tokens in 4 reads where there
 * were 64. A row that finishes inside a block is decoded to its end, at most this many steps of one row's work.
 */
const SAMPLE_BLOCK = 16;

export interface SampledSeq {
  ids: number[];
  /** log-prob of each token under log_softmax(logits / temperature), not truncated by top-p (TRL's convention) */
  logprobs: number[];
  /** entropy of that full temperature-scaled distribution */
  entropies: number[];
  /** Σ_j π_j² of that distribution: with π of the token, the size of the log-prob's gradient (token_log.ts gradNorms) */
  probSq: number[];
  stopped: 'eos' | 'stop' | 'length';
}

/**
 * The first mass threshold tried for the nucleus: tokens below it are only sorted when those above it do not
 * already reach top_p (then the exact bound (1 − top_p)/V is used, see nucleus()).
 */
const NUCLEUS_FIRST_THRESHOLD = 1e-3;

export async function generate(model: Transformer, prompts: number[][], opts: SampleOptions): Promise<SampledSeq[]> {
  const P = prompts.length;
  if (P === 0) return [];
  const repeat = opts.repeat ?? 1;
  if (!Number.isInteger(repeat) || repeat < 1) throw new Error(`generate: repeat must be a positive integer, got ${repeat}`);
  const B = P * repeat;
  if (opts.rngs && opts.rngs.length !== B) throw new Error(`generate: ${opts.rngs.length} rngs for ${B} output rows`);
  if (opts.budgets && opts.budgets.length !== B) throw new Error(`generate: ${opts.budgets.length} budgets for ${B} output rows`);
  const { maxNewTokens } = opts;
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1) throw new UserError(`max_new_tokens must be a positive integer, got ${maxNewTokens}`);
  const greedy = !!opts.greedy;
  if (!greedy && !(opts.temperature > 0)) throw new UserError(`temperature must be > 0 (use greedy decoding for temperature 0), got ${opts.temperature}`);
  if (!(opts.topP > 0 && opts.topP <= 1)) throw new UserError(`top_p must be in (0, 1], got ${opts.topP}`);
  const stops = opts.stopAfter ?? [];
  if (stops.length > 0 && !opts.decode) throw new Error('generate: stopAfter needs a decode function');
  const V = model.cfg.vocabSize;
  const T0 = Math.max(...prompts.map((p) => p.length));
  if (prompts.some((p) => p.length === 0)) throw new UserError('cannot sample from an empty prompt');
  if (T0 + maxNewTokens > model.cfg.maxSeqLen) {
    throw new UserError(
      `the longest prompt (${T0} tokens) + max_new_tokens (${maxNewTokens}) = ${T0 + maxNewTokens} exceeds the model's max_seq_len (${model.cfg.maxSeqLen})`,
      'shorten the prompt, lower grpo.max_new_tokens or raise model.max_seq_len',
    );
  }
  for (const p of prompts)
    for (const id of p) if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`generate: prompt token id ${id} outside the vocabulary [0, ${V})`);
  const eos = new Set(Array.isArray(opts.eosId) ? opts.eosId : [opts.eosId]);
  // TRL computes the old/ref log-probs at the sampling temperature; greedy decoding reports the plain policy.
  const temperature = greedy ? 1 : opts.temperature;

  // Left padding (pad id 0, masked) so every row's last prompt token sits at position T0 − 1.
  const ids = new Int32Array(P * T0);
  const mask = new Float32Array(P * T0);
  prompts.forEach((p, b) => {
    const off = b * T0 + (T0 - p.length);
    ids.set(p, off);
    mask.fill(1, off, (b + 1) * T0);
  });
  const idsT = tf.tensor2d(ids, [P, T0], 'int32');
  const maskT = tf.tensor2d(mask, [P, T0], 'float32');
  // room for every new token, so an in-place cache never has to grow
  const first = model.prefill(idsT, maskT, { capacity: T0 + maxNewTokens });
  tf.dispose([idsT, maskT]);
  let logits: tf.Tensor2D | null = first.logits;
  let cache = first.cache;
  if (repeat > 1) {
    const rows = Array.from({ length: B }, (_, r) => Math.floor(r / repeat));
    cache = model.keepCacheRows(cache, rows);
    logits = gatherRows(logits, rows);
  }

  const out: SampledSeq[] = Array.from({ length: B }, () => ({ ids: [], logprobs: [], entropies: [], probSq: [], stopped: 'length' }));
  /** Adds a sampled token to output row o; whether the row goes on (not EOS, no stop text, under its budget). */
  const accept = (o: number, id: number, logprob: number, entropy: number, probSq: number): boolean => {
    const seq = out[o];
    seq.ids.push(id);
    seq.logprobs.push(logprob);
    seq.entropies.push(entropy);
    seq.probSq.push(probSq);
    // EOS stays as the row's last token: choosing to stop is an action of the policy, so it is part of the
    // completion the loss sees (as in TRL and GRPO-Zero).
    if (eos.has(id)) seq.stopped = 'eos';
    else if (stops.length > 0) {
      const text = opts.decode!(seq.ids, o);
      if (stops.some((s) => text.includes(s))) seq.stopped = 'stop';
    }
    return seq.stopped === 'length' && !(opts.budgets && seq.ids.length >= opts.budgets[o]);
  };
  const state: DecodeState = { logits, cache, rows: out.map((_, b) => b) };
  try {
    const draw = model.deviceSampler();
    if (draw) await sampleOnDevice(model, state, draw, opts, accept);
    else await sampleOnHost(model, state, opts, V, temperature, accept);
  } finally {
    state.logits?.dispose();
    model.disposeCache(state.cache);
  }
  return out;
}

/** What the decode loop carries: the next logits, the cache and each cache row's output row (−1: finished). */
interface DecodeState {
  logits: tf.Tensor2D | null;
  cache: KvCache;
  /** the output row of each cache row, or −1 for a finished row the cache still holds (backendCaps().dropFinishedAt) */
  rows: number[];
}

type Accept = (o: number, id: number, logprob: number, entropy: number, probSq: number) => boolean;

/**
 * Drops the finished rows from the cache once they are backendCaps().dropFinishedAt of it: the cache rows kept, in
 * order, or null where it kept them all.
 */
function dropFinished(model: Transformer, st: DecodeState): number[] | null {
  const keep = st.rows.flatMap((o, r) => (o >= 0 ? [r] : []));
  const idle = st.rows.length - keep.length;
  if (idle === 0 || idle < backendCaps().dropFinishedAt * st.rows.length) return null;
  st.cache = model.keepCacheRows(st.cache, keep);
  st.rows = keep.map((r) => st.rows[r]);
  return keep;
}

/** The given rows of t, in that order; disposes t. */
function gatherRows(t: tf.Tensor2D, rows: number[]): tf.Tensor2D {
  const out = tf.tidy(() => tf.gather(t, tf.tensor1d(Int32Array.from(rows), 'int32'), 0) as tf.Tensor2D);
  t.dispose();
  return out;
}

/** Between decode steps: after a macrotask turn (so a signal's handler has run), end sampling if `stop` says so. */
async function checkStop(opts: SampleOptions): Promise<void> {
  if (!opts.stop) return;
  await new Promise<void>((r) => setImmediate(r));
  if (opts.stop()) throw new SamplingStopped();
}

/** The host's loop: each step's logits read, the draw made here with the caller's rng. */
async function sampleOnHost(model: Transformer, st: DecodeState, opts: SampleOptions, V: number, temperature: number, accept: Accept): Promise<void> {
  const greedy = !!opts.greedy;
  for (let step = 0; st.logits; step++) {
    if (step % STOP_CHECK_EVERY === STOP_CHECK_EVERY - 1) await checkStop(opts);
    // The log-softmax of each row, on the host: the logits are read once (they have to come back for the draw anyway),
    // instead of six kernel launches per step for a few thousand numbers. Read asynchronously.
    const raw = (await st.logits.data()) as Float32Array;
    const data = logSoftmaxRows(raw, V, temperature);
    const reported = opts.rawLogprobs && temperature !== 1 ? logSoftmaxRows(raw, V, 1) : data;
    st.logits.dispose();
    st.logits = null;
    // a finished row still in the cache is fed token 0, and what it computes is never read
    const next = new Array<number>(st.rows.length).fill(0);
    for (let r = 0; r < st.rows.length; r++) {
      const o = st.rows[r];
      if (o < 0) continue;
      const row = data.subarray(r * V, (r + 1) * V);
      const { entropy: h, mass, sumSq } = rowStats(row);
      const rng = opts.rngs ? opts.rngs[o] : opts.rng;
      const id = greedy ? argmax(row) : opts.topP < 1 ? nucleus(row, opts.topP, rng()) : sampleFull(row, mass, rng());
      if (accept(o, id, reported[r * V + id], h, sumSq)) next[r] = id;
      else st.rows[r] = -1;
    }
    if (st.rows.every((o) => o < 0) || step === opts.maxNewTokens - 1) break;
    const kept = dropFinished(model, st); // before st.cache is read: a drop replaces it
    ({ logits: st.logits, cache: st.cache } = model.decodeStep(st.cache, kept ? kept.map((r) => next[r]) : next));
  }
}

/**
 * The device's loop (a GPU backend's sampleRows): SAMPLE_BLOCK steps are drawn and decoded on the device, the ids fed
 * back without a read, and their record read once. The draws are the caller's rng's, made ahead for the rows live at
 * the block's start: with a stream per row (opts.rngs, as rollouts pass) a row's t-th token takes its t-th draw as on
 * the host, so at top_p 1 and greedy the device chooses the host's tokens (to float32 rounding at a boundary). A row
 * that finishes inside a block is decoded to the block's end, and what it computes there is never read.
 */
async function sampleOnDevice(
  model: Transformer,
  st: DecodeState,
  draw: NonNullable<ModelOps['sampleRows']>,
  opts: SampleOptions,
  accept: Accept,
): Promise<void> {
  const greedy = !!opts.greedy;
  for (let done = 0; st.logits;) {
    await checkStop(opts);
    const R = st.rows.length;
    const K = Math.min(SAMPLE_BLOCK, opts.maxNewTokens - done);
    const u = new Float32Array(K * R);
    // step by step, row by row, as the host draws: the same numbers while no row ends inside the block
    if (!greedy)
      for (let k = 0; k < K; k++)
        for (let r = 0; r < R; r++) {
          const o = st.rows[r];
          if (o >= 0) u[k * R + r] = (opts.rngs ? opts.rngs[o] : opts.rng)();
        }
    const draws = tf.tensor2d(u, [K, R]);
    const record = tf.zeros([K, R, SAMPLE_RECORD_FIELDS]) as tf.Tensor3D;
    let rec: Float32Array;
    try {
      for (let k = 0; k < K; k++) {
        const ids = draw(st.logits!, draws, record, { step: k, temperature: opts.temperature, topP: opts.topP, greedy, rawLogprobs: !!opts.rawLogprobs });
        st.logits!.dispose();
        st.logits = null;
        if (k < K - 1 || done + K < opts.maxNewTokens) ({ logits: st.logits, cache: st.cache } = model.decodeStep(st.cache, ids));
        ids.dispose();
      }
      rec = (await record.data()) as Float32Array;
    } finally {
      tf.dispose([draws, record]);
    }
    for (let k = 0; k < K; k++)
      for (let r = 0; r < R; r++) {
        const o = st.rows[r];
        if (o < 0) continue;
        const f = (k * R + r) * SAMPLE_RECORD_FIELDS;
        if (!accept(o, rec[f], rec[f + 2], rec[f + 3], rec[f + 4])) st.rows[r] = -1;
      }
    done += K;
    if (st.rows.every((o) => o < 0) || done >= opts.maxNewTokens) break;
    // the logits of the block's last step are the next block's first: a dropped row's go with it
    const kept = dropFinished(model, st);
    if (kept) st.logits = gatherRows(st.logits!, kept);
  }
}

/**
 * log softmax(x / temperature) of each row of V logits, in float64 and rounded once to float32: x/T − max − log Σ exp(x/T − max).
 * Rows whose every logit is −∞ come out −∞ (as tf.logSoftmax gives NaN there, neither can be sampled).
 */
export function logSoftmaxRows(logits: Float32Array, V: number, temperature: number): Float32Array {
  const out = new Float32Array(logits.length);
  const inv = 1 / temperature;
  for (let r = 0; r < logits.length; r += V) {
    let max = -Infinity;
    for (let i = 0; i < V; i++) max = Math.max(max, logits[r + i] * inv);
    let sum = 0;
    for (let i = 0; i < V; i++) sum += Math.exp(logits[r + i] * inv - max);
    const lse = max + Math.log(sum);
    for (let i = 0; i < V; i++) out[r + i] = logits[r + i] * inv - lse;
  }
  return out;
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** Entropy −Σ p log p of a row of log-probs, its total mass Σ p (≈ 1) and Σ p², accumulated in float64. */
export function rowStats(logp: Float32Array): { entropy: number; mass: number; sumSq: number } {
  let h = 0;
  let mass = 0;
  let sumSq = 0;
  for (let i = 0; i < logp.length; i++) {
    const l = logp[i];
    if (l === -Infinity) continue;
    const p = Math.exp(l);
    mass += p;
    sumSq += p * p;
    h -= p * l;
  }
  return { entropy: h, mass, sumSq };
}

/** Inverse-CDF draw from the full distribution. */
function sampleFull(logp: Float32Array, mass: number, u: number): number {
  const target = u * mass;
  let acc = 0;
  let last = 0;
  for (let i = 0; i < logp.length; i++) {
    const p = Math.exp(logp[i]);
    if (p === 0) continue;
    acc += p;
    last = i;
    if (acc > target) return i;
  }
  return last; // rounding: u·mass fell past the accumulated mass
}

/**
 * Nucleus (top-p) draw: the smallest set of most likely tokens whose mass reaches top_p, renormalised.
 * Sorting a 150k vocabulary every step is slow, so only tokens with p ≥ τ are sorted: if their mass already
 * reaches top_p the nucleus lies among them. τ = (1 − top_p)/V always qualifies, because the tokens below it
 * hold less than V·τ = 1 − top_p of the mass.
 */
export function nucleus(logp: Float32Array, topP: number, u: number): number {
  const V = logp.length;
  for (const tau of [NUCLEUS_FIRST_THRESHOLD, (1 - topP) / V]) {
    const cand: number[] = [];
    let mass = 0;
    for (let i = 0; i < V; i++) {
      const p = Math.exp(logp[i]);
      if (p >= tau) {
        cand.push(i);
        mass += p;
      }
    }
    if (mass < topP && tau > (1 - topP) / V) continue;
    // ties broken by id so that a vanishing top_p picks argmax's token
    cand.sort((a, b) => logp[b] - logp[a] || a - b);
    let kept = 0;
    let keptMass = 0;
    while (kept < cand.length && keptMass < topP) keptMass += Math.exp(logp[cand[kept++]]);
    const target = u * keptMass;
    let acc = 0;
    for (let j = 0; j < kept; j++) {
      acc += Math.exp(logp[cand[j]]);
      if (acc > target) return cand[j];
    }
    return cand[kept - 1];
  }
  throw new Error('unreachable: the second nucleus threshold always qualifies');
}
