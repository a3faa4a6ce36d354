// What a server API is, for both sides of the wire: the client (ServerSampler, which the probe, import scoring and
// GRPO rollouts sample and score through) and `credit-lens serve` (the engine's model behind the API). One file per
// API in this folder holds its identification, its request bodies and their parsing for generate and score, its routes
// with their validation, and what else it can do (weight sync, adapters), as vLLM's entrypoints/openai/<api>/ folders
// do. client.ts and serve.ts iterate catalog.ts's list; neither names an API.
import type { Tokenizer } from '../core/types';
import type { Continuation, SampleRequest, SampleSettings, ScoreItem, ScoredTokens } from '../model/sampling';

export type { ScoreItem, ScoredTokens };

/** A continuation as the server sent it, before the run's stop rules cut it. */
export interface RawContinuation {
  ids: number[];
  logprobs: number[];
  /** 'stop' (an id or a string the server matched), 'length' or 'abort' */
  finish: string;
  /** what the server says it matched: a token id, a stop string, or null (vLLM: the model's own EOS) */
  matched: number | string | null;
}

/** A server's answer: its status and its body (parsed JSON, or the text where it is not JSON). */
export interface Reply {
  status: number;
  body: unknown;
}

/**
 * One HTTP request of the client's, with its retries (`tries`) and its stop (`signal`); with `ok`, an answer other than
 * 200 is thrown as the client's error naming the URL, the status and the server's message.
 */
export type ApiCall = (method: 'GET' | 'POST', path: string, body?: unknown, o?: { tries?: number; signal?: AbortSignal; ok?: boolean }) => Promise<Reply>;

/** A route's answer to a state-changing request (SGLang's weight and adapter routes). */
export interface LoadResult {
  success: boolean;
  message: string;
}

/** What the client asks of the served model (in the request bodies): its name, and the adapter requests name. */
export interface RequestContext {
  model: string;
  lora: string | null;
}

export interface ServerApiSpec {
  /** `--server-api` and `rollout.api` take it */
  readonly name: string;
  /** one clause for the option's description */
  readonly summary: string;

  // ---- the client's side ----
  /**
   * The served model's name and weight version, where the server speaks this API; null where it answers this API's
   * identifying route with something else (auto then asks the next API).
   */
  identify(call: ApiCall, tries: number): Promise<{ model: string; weightVersion: string | null } | null>;
  /** the routes identify asks, for the message when no API answers */
  readonly identifyRoutes: string;
  /** how far the server reproduces a seeded draw (the probe record's provenance) */
  readonly seeding: string;
  /**
   * The most continuations one generate request carries: several prefixes go together, each continuation a row of its
   * own. null: one prefix per request, its continuations fanned out by the server (vLLM's n with seed + i).
   */
  readonly batchRows: number | null;
  readonly generate: {
    readonly path: string;
    body(reqs: SampleRequest[], s: SampleSettings, ctx: RequestContext): Record<string, unknown>;
    /** each row's continuation, in request order then seed order, or a message naming what is missing */
    parse(body: unknown, rows: number): RawContinuation[] | string;
  };
  readonly score: {
    readonly path: string;
    body(items: ScoreItem[], topK: number, ctx: RequestContext): Record<string, unknown>;
    parse(body: unknown, items: ScoreItem[], topK: number): ScoredTokens[] | string;
    /** what scoring through this API costs that the user should know (logged once by the importer) */
    readonly note?: string;
  };
  /** Loading weights and adapters while serving, where the API can (the rollout server syncs each update this way). */
  readonly weights?: {
    update(call: ApiCall, dir: string, version: string): Promise<LoadResult>;
    version(call: ApiCall): Promise<string | null>;
    loadAdapter(call: ApiCall, name: string, dir: string): Promise<LoadResult>;
    unloadAdapter(call: ApiCall, name: string): Promise<LoadResult>;
  };

  // ---- serve's side ----
  /** `METHOD /path` → the answer's body (a string is sent as text); a refused request throws BadRequest */
  readonly routes: Readonly<Record<string, (server: ServeBackend, body: unknown) => unknown>>;
  /** the routes that change the server's state (weights, adapters, caches): they need a key off loopback, and no Origin */
  readonly stateRoutes: readonly string[];
  /** the prefix of every path of this API's, where it has one (vLLM's /v1/): an unknown route there gets its error shape */
  readonly routePrefix?: string;
  /** the API's error body for a refused request */
  errorBody(status: number, message: string, param: string | null): unknown;
}

// ---- what the routes call on the server ----

/** The sampling fields every API's rows have, validated. */
export interface RowSettings {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  stop: string[];
  stopIds: number[];
  ignoreEos: boolean;
  seed: number | null;
  /** drop a matched stop string from the returned text (SGLang's default, vLLM's include_stop_str_in_output: false) */
  trimStop?: boolean;
}

/** Why a row ended, and its text (decoded once) with and without the stop string it matched. */
export interface Finish {
  text: string;
  withoutStop: string;
  reason: 'length' | 'eos' | 'stop';
  /** eos: the id it stopped on; stop: the string it matched */
  matched: number | string | null;
}

/** A scored row: log-probs from its start (null where none), the top K at each, and the given token's rank. */
export interface ScoredRow {
  lp: (number | null)[];
  top: [number, number][][];
  rank: number[];
}

/** The server the routes answer for: the model, its queue and its scoring, its weights and adapters. */
export interface ServeBackend {
  /** the name clients address the model by (vLLM's `model`) */
  readonly name: string;
  /** where the weights came from */
  readonly path: string;
  readonly vocabSize: number;
  readonly maxSeqLen: number;
  readonly weightVersion: string;
  readonly tokenizer: Tokenizer;
  /** refuses (503) while no model is loaded */
  checkReady(): void;
  /** refuses a prompt that is empty or that, with its budget, is over the model's context */
  checkLength(prefix: number[], maxNew: number, field: string): void;
  settingsOf(r: RowSettings): SampleSettings;
  finishOf(c: Continuation, r: RowSettings): Finish;
  /** queues one prefix's continuations for the next batch */
  submit(req: SampleRequest, settings: SampleSettings, lora?: string | null): Promise<Continuation[]>;
  /** teacher-forced log-probs of positions [start, T) of each row, the top K at each, and the given token's rank */
  scoreRows(rows: { ids: number[]; start: number }[], K: number, temperature: number, rank: boolean): Promise<ScoredRow[]>;
  loadedAdapters(): Record<string, string>;
  /** new weights between batches (throws RefusedLoad with the reason); the file loaded */
  loadWeights(path: string, version: string | null): Promise<string>;
  /** a PEFT adapter folder on the base weights, by name (throws RefusedLoad with the reason) */
  loadAdapter(name: string, dir: string): Promise<void>;
  /** false where no adapter has that name */
  unloadAdapter(name: string): Promise<boolean>;
}

/** A request's fault, answered 400 (or `status`) in the route's error shape, or with the route's own `body`. */
export class BadRequest extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
    readonly status = 400,
    /** the route's own failure body (SGLang's weight routes answer {success: false, message}), else the error shape */
    readonly body: unknown = null,
  ) {
    super(message);
  }
}

/** Weights or an adapter that could not be loaded; the message says why. */
export class RefusedLoad extends Error {}

export const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * A log-prob as a number: −inf comes clamped, to −999999999 by some SGLang versions and to −9999.0 by vLLM, and the first
 * prompt entry may be null.
 */
export function logprobOf(x: unknown): number {
  if (typeof x !== 'number') return NaN;
  return x <= -9999 ? -Infinity : x;
}

/** The message of an error response in either engine's shape ({"error": {"message"}} or {"object": "error", "message"}). */
export function errorMessage(body: unknown): string | null {
  if (!isObj(body)) return null;
  if (isObj(body.error) && typeof body.error.message === 'string') return body.error.message;
  if (typeof body.error === 'string') return body.error;
  if (typeof body.message === 'string') return body.message;
  // SGLang's LoRA routes
  if (typeof body.error_message === 'string') return body.error_message;
  if (typeof body.detail === 'string') return body.detail;
  return null;
}

/**
 * Entropy and Σπ² from a top-K distribution. The entropy counts the K listed tokens plus one bucket for the mass they
 * leave; Σπ² counts the K only. Both are lower bounds of the whole distribution's (merging tokens lowers the entropy;
 * the unlisted tokens' p² are left out), exact where the K hold all the mass.
 */
export function topKStats(logprobs: number[]): { entropy: number; probSq: number; rest: number } {
  let h = 0;
  let sq = 0;
  let mass = 0;
  for (const l of logprobs) {
    if (!Number.isFinite(l)) continue;
    const p = Math.exp(l);
    mass += p;
    h -= p * l;
    sq += p * p;
  }
  const rest = Math.max(0, 1 - mass);
  if (rest > 0) h -= rest * Math.log(rest);
  return { entropy: h, probSq: sq, rest };
}

/**
 * A list in an answer whose items are made and written one at a time: a scoring answer's rows (top-K lists at every
 * position) never exist as one object tree or one string, so a large answer costs the server one row's memory.
 */
export class LazyList {
  constructor(
    readonly length: number,
    readonly item: (i: number) => unknown,
  ) {}

  toJSON(): unknown[] {
    return Array.from({ length: this.length }, (_, i) => this.item(i));
  }
}

/**
 * Why a server's log-probs for these tokens cannot be the model's, or null: one missing (SGLang's JSON encoder writes
 * -inf and NaN as null) or above 0 (a probability over 1; 1e-4 allows for rounding at p = 1).
 */
export function impossibleLogprob(logprobs: readonly number[], ids: readonly number[]): string | null {
  const t = logprobs.findIndex((l) => !Number.isFinite(l) || l > 1e-4);
  if (t < 0) return null;
  const l = logprobs[t];
  return l > 1e-4
    ? `the server's log-prob of token ${ids[t]} at completion position ${t} is +${l.toPrecision(3)}, above 0 (a probability over 1)`
    : `the server gave no finite log-prob for token ${ids[t]} at completion position ${t} (${Number.isNaN(l) ? 'null or NaN' : String(l)})`;
}
