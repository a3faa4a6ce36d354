// The sampling engine behind the probe: given token-id prefixes, M seeded continuations of each. `LocalSampler` runs
// generate() in this process; serving/client.ts sends the same requests to an SGLang or vLLM server (or to
// `credit-lens serve`). Both hand back what the probe needs, cut by the same rules:
// - a continuation ends at the first end-of-sequence id (kept: choosing to stop is the policy's action), or once the
//   text of the completion so far plus the continuation contains a stop string ("</answer>" split across the join of
//   prefix and continuation included), or at its budget of new tokens;
// - its log-probs are the sampler's own (generate(): under the sampling temperature; a server: as it reports them).
import * as tf from '@tensorflow/tfjs';
import { UserError } from '../core/errors';
import type { Tokenizer } from '../core/types';
import { makeRng } from '../core/rng';
import type { Transformer } from './model';
import { generate, unlessStopped } from './sampler';

export interface SampleRequest {
  /** the ids the model continues: the prompt and the completion so far */
  prefix: number[];
  /**
   * the completion's last ids before the continuation: stop strings are looked for in decode(tail + continuation), so a
   * stop text split across the join is seen, and one inside the prompt (its instructions may quote it) is not
   */
  tail: number[];
  /** one seed per continuation: M = seeds.length */
  seeds: number[];
  /** at most this many new tokens */
  maxNewTokens: number;
}

export interface SampleSettings {
  temperature: number;
  topP: number;
  /** every id that ends a completion */
  eosIds: number[];
  /** stop strings, e.g. ['</answer>'] */
  stop: string[];
  /**
   * Report the continuations' log-probs under the policy at temperature 1 (vLLM's convention) rather than under the
   * sampling distribution (SGLang's, and the default). The draw is the same either way; at a temperature other than 1
   * it costs one more log-softmax over the vocabulary per row and token, so only a caller that reads them asks.
   */
  rawLogprobs?: boolean;
}

export type FinishReason = 'eos' | 'stop' | 'length';

export interface Continuation {
  ids: number[];
  /**
   * As the sampler reports them: under the sampling distribution (in-process, and SGLang unless it runs with
   * SGLANG_RETURN_ORIGINAL_LOGPROB=1), or at temperature 1 (vLLM; rawLogprobs). Nothing downstream reads them: a run's
   * rollouts are scored again here, and a probe uses the ids.
   */
  logprobs: number[];
  finish: FinishReason;
}

/** Where the continuations came from, for the probe's record. */
export interface SamplerProvenance {
  /** 'local', or the server API's name (server_apis/catalog.ts) */
  api: string;
  url: string | null;
  /** the model name the server reports */
  model: string | null;
  /** the weight version the server reports, where it gives one */
  weight_version: string | null;
  /** how far a seed makes a continuation reproducible */
  seeding: string;
  /**
   * A server's weights checked against the step's policy kept here: the same tokens scored both ways (mean and largest
   * |Δ log-prob| over `tokens`); absent where no policy is kept here to check against.
   */
  weights_check?: { tokens: number; mean_abs_diff: number; max_abs_diff: number };
}

export interface SampleHooks {
  /** asked between batches (and, locally, every few decode steps): true ends sampling, and sample() resolves null */
  stop?: () => boolean;
  /** continuations finished so far in this call */
  progress?: (rows: number) => void;
}

/** A completion to score after its prompt: the log-prob of each of `ids`, and the K most likely tokens at each. */
export interface ScoreItem {
  prefix: number[];
  ids: number[];
}

export interface ScoredTokens {
  logprobs: number[];
  /** per completion position, the K most likely ids and their log-probs, most likely first */
  top: { ids: number[]; logprobs: number[] }[];
}

export interface Sampler {
  readonly provenance: SamplerProvenance;
  /** the continuations of each request, in request order and seed order; null when `stop` ended the call */
  sample(reqs: SampleRequest[], settings: SampleSettings, hooks?: SampleHooks): Promise<Continuation[][] | null>;
  /**
   * The log-prob of each given completion token under the policy at temperature 1, and the K most likely tokens at each
   * position (K = 0: none); null when `stop` ended the call.
   */
  score(items: ScoreItem[], topK: number, hooks?: SampleHooks): Promise<ScoredTokens[] | null>;
  /**
   * A sampler outside this process (an inference server) loads the policy of `step` before anything samples again, and
   * resolves once it has; it throws SamplerLost when it cannot. A sampler here samples from the model itself and has
   * nothing to follow.
   */
  follow?(step: number, model: Transformer): Promise<void>;
  close(): Promise<void>;
}

/**
 * A sampler outside this process that can no longer sample (a server gone, refusing, or out of sync): a run stops with a
 * checkpoint of its last finished step and resumes once it is back; a probe keeps its finished episodes.
 */
export class SamplerLost extends UserError {}

/** The first index of `xs` for which `ok(i)` holds, where ok is false then true; xs.length when it never holds. */
function firstTrue(n: number, ok: (i: number) => boolean): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ok(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * A continuation cut by the run's rules, whatever the sampler stopped on: the first end-of-sequence id (kept), else the
 * shortest head whose text with the tail contains a stop string, else its budget of new tokens.
 */
export function cutContinuation(
  ids: number[],
  logprobs: number[],
  tail: number[],
  maxNewTokens: number,
  s: SampleSettings,
  decode: (ids: number[]) => string,
): Continuation {
  const eos = new Set(s.eosIds);
  const end = Math.min(ids.length, maxNewTokens);
  const eosAt = ids.slice(0, end).findIndex((id) => eos.has(id));
  const tailText = decode(tail);
  const has = (k: number) => stopAfterTail(decode([...tail, ...ids.slice(0, k)]), tailText.length, s.stop);
  const head = (k: number, finish: FinishReason): Continuation => ({ ids: ids.slice(0, k), logprobs: logprobs.slice(0, k), finish });
  // As generate() decides token by token: an end-of-sequence id ends the row first, else a stop string in the text so
  // far. A head that holds a stop string stays holding it as it grows, so the shortest one is found by bisection.
  const before = eosAt >= 0 ? eosAt : end;
  if (s.stop.length > 0 && before > 0 && has(before)) return head(1 + firstTrue(before, (i) => has(i + 1)), 'stop');
  if (eosAt >= 0) return head(eosAt + 1, 'eos');
  return head(end, 'length');
}

/**
 * Whether `text` (the tail's text, then the continuation's) holds a stop string that ends after the tail's first
 * `tailLength` characters: one that lies wholly in the tail was not produced by the continuation (an imported episode's
 * text may go on past its "</answer>"), and a server, which scans its output only, would not stop on it.
 */
export function stopAfterTail(text: string, tailLength: number, stops: string[]): boolean {
  return stops.some((x) => text.indexOf(x, Math.max(0, tailLength - x.length + 1)) >= 0);
}

/** The KV cache of one sampled row at its full length (keys and values, every layer, float32), in bytes. */
export function kvBytesPerRow(cfg: { nLayers: number; nKvHeads: number; nHeads: number; dModel: number; headDim?: number }, length: number): number {
  const hd = cfg.headDim ?? cfg.dModel / cfg.nHeads;
  return 2 * cfg.nLayers * cfg.nKvHeads * hd * length * 4;
}

/** Rows per generate() call for rows of `length` tokens: their KV caches within 256 MiB, at most 256 rows, at least 1. */
export function probeRowsPerBatch(cfg: Parameters<typeof kvBytesPerRow>[0], length: number): number {
  return Math.max(1, Math.min(256, Math.floor((256 * 2 ** 20) / kvBytesPerRow(cfg, length))));
}

/**
 * generate() in this process. Consecutive requests with the same number of continuations share a call while their rows
 * stay under `rowsPerBatch` (by default from the KV cache's size: probeRowsPerBatch) and their longest prefix plus
 * largest budget fits max_seq_len; a request with more rows than that goes in parts. Each prefix is prefilled once and
 * its keys and values copied to its rows (generate's `repeat`); each row draws from its own seeded stream, so how rows
 * are batched never changes what is drawn.
 */
export class LocalSampler implements Sampler {
  readonly provenance: SamplerProvenance = {
    api: 'local',
    url: null,
    model: null,
    weight_version: null,
    seeding: "bit-reproducible: continuation m draws from its own stream, seeded by the request's seed m",
  };

  constructor(
    readonly model: Transformer,
    readonly tokenizer: Tokenizer,
    private readonly rowsPerBatch?: number,
  ) {}

  async sample(reqs: SampleRequest[], s: SampleSettings, hooks: SampleHooks = {}): Promise<Continuation[][] | null> {
    const out: Continuation[][] = reqs.map(() => []);
    const maxSeqLen = this.model.cfg.maxSeqLen;
    // each tail's text length: a stop string must end after it (stopAfterTail)
    const tails = reqs.map((r) => (r.tail.length && s.stop.length ? this.tokenizer.decode(r.tail).length : 0));
    const longestStop = Math.max(1, ...s.stop.map((x) => x.length));
    let done = 0;
    for (let i = 0; i < reqs.length;) {
      const M = reqs[i].seeds.length;
      // every row's KV cache holds the bucket's longest prefix plus its largest budget (generate's capacity)
      const rowsFor = (length: number) => Math.max(1, this.rowsPerBatch ?? probeRowsPerBatch(this.model.cfg, length));
      const rowsPerBatch = rowsFor(reqs[i].prefix.length + reqs[i].maxNewTokens);
      const bucket = [i];
      let maxPrefix = reqs[i].prefix.length;
      let maxBudget = reqs[i].maxNewTokens;
      for (let j = i + 1; j < reqs.length && reqs[j].seeds.length === M; j++) {
        const p = Math.max(maxPrefix, reqs[j].prefix.length);
        const b = Math.max(maxBudget, reqs[j].maxNewTokens);
        if (p + b > maxSeqLen || (bucket.length + 1) * M > rowsFor(p + b)) break;
        bucket.push(j);
        maxPrefix = p;
        maxBudget = b;
      }
      i += bucket.length;
      // a bucket of several requests holds all their M rows; one request with more than rowsPerBatch rows goes in parts
      const part = bucket.length > 1 ? M : Math.min(M, rowsPerBatch);
      for (let m0 = 0; m0 < M; m0 += part) {
        // Sampling runs synchronously between its awaits: a macrotask turn before each batch lets a SIGINT's handler
        // run, so a stop is seen within a batch, not after the whole call.
        await new Promise<void>((r) => setImmediate(r));
        if (hooks.stop?.()) return null;
        const k = Math.min(part, M - m0);
        const rowReq = bucket.flatMap((q) => Array<number>(k).fill(q));
        const got = await unlessStopped(() =>
          generate(
            this.model,
            bucket.map((q) => reqs[q].prefix),
            {
              maxNewTokens: maxBudget,
              // temperature 0 is greedy decoding, as the servers read it
              greedy: s.temperature === 0,
              temperature: s.temperature || 1,
              topP: s.topP,
              eosId: s.eosIds,
              stopAfter: s.stop,
              // the text after the tail's, less the last stop's length − 1 characters, where a stop across the join starts
              decode: (ids, row) => {
                const tail = tails[rowReq[row]];
                return this.tokenizer.decode([...reqs[rowReq[row]].tail, ...ids]).slice(Math.max(0, tail - longestStop + 1));
              },
              rng: () => {
                throw new Error('unreachable: every row has its own stream');
              },
              rngs: rowReq.map((q, r) => makeRng(reqs[q].seeds[m0 + (r % k)])),
              repeat: k,
              budgets: rowReq.map((q) => reqs[q].maxNewTokens),
              stop: hooks.stop,
              rawLogprobs: s.rawLogprobs,
            },
          ),
        );
        if (!got) return null;
        got.forEach((seq, r) => out[rowReq[r]].push({ ids: seq.ids, logprobs: seq.logprobs, finish: seq.stopped }));
        done += got.length;
        hooks.progress?.(done);
      }
    }
    return out;
  }

  async score(items: ScoreItem[], topK: number, hooks: SampleHooks = {}): Promise<ScoredTokens[] | null> {
    const out: ScoredTokens[] = [];
    for (const item of items) {
      await new Promise<void>((r) => setImmediate(r));
      if (hooks.stop?.()) return null;
      const ids = [...item.prefix, ...item.ids];
      const idsT = tf.tensor2d(Int32Array.from(ids), [1, ids.length], 'int32');
      const mask = tf.ones([1, ids.length], 'float32') as tf.Tensor2D;
      try {
        const C = item.ids.length;
        const r = await this.model.scoreTokens(idsT, mask, { from: item.prefix.length - 1, count: C }, Int32Array.from(item.ids), 1, { topK });
        out.push({
          logprobs: Array.from(r.logp),
          top: Array.from({ length: C }, (_, t) => ({
            ids: topK > 0 ? Array.from(r.top!.ids.subarray(t * topK, (t + 1) * topK)) : [],
            logprobs: topK > 0 ? Array.from(r.top!.logp.subarray(t * topK, (t + 1) * topK)) : [],
          })),
        });
      } finally {
        tf.dispose([idsT, mask]);
      }
      hooks.progress?.(out.length);
    }
    return out;
  }

  async close(): Promise<void> {}
}
