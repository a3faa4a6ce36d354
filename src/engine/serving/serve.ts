// `credit-lens serve`: the engine's own model behind SGLang's native API and vLLM's OpenAI-compatible completions, so
// the probe's server path is tested here for real and a Credit Lens checkpoint can be served to anything that speaks
// either. Requests that arrive while a batch runs wait for the next one: every request queued at a tick goes into one
// LocalSampler call (generate() in buckets), and the rows of one prefix share its prefill. A malformed request gets a
// 400 in the engine's error shape naming the field, never a crash.
import { randomInt } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { loadConfig } from '../config/config';
import { UserError, isUserError } from '../core/errors';
import type { Tokenizer } from '../core/types';
import type { BackendPreference } from '../model/backend';
import { Transformer } from '../model/model';
import { ALL_LORA_TARGETS, type LoraTarget } from '../model/lora';
import { LocalSampler, type Continuation, type SampleRequest, type SampleSettings } from '../model/sampling';
import { readSafetensors } from '../model/safetensors';
import { WASM_HEAP_BYTES } from '../model/memory';
import { probePolicy } from '../rundir/policies';
import { loadScorer } from '../session/model_path';
import { openSession, useWeights, type Session } from '../session/session';
import { policyBatch } from '../session/rollout';

export interface ServeOptions {
  /** a run folder, one of its checkpoints or a Hugging Face folder */
  spec: string;
  /** with a run folder: serve the policy that sampled this step (as `probe --step` uses), not the newest checkpoint */
  step?: number;
  host?: string;
  port?: number;
  backend?: BackendPreference;
  log?: (m: string) => void;
}

export interface Served {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** A request's fault, answered 400 (or `status`) in the route's error shape. */
class BadRequest extends Error {
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

/** A scored row: log-probs from its start (null where none), the top K at each, and the given token's rank. */
type ScoredRow = { lp: (number | null)[]; top: [number, number][][]; rank: number[] };

interface Job {
  req: SampleRequest;
  settings: SampleSettings;
  /** the LoRA adapter the request names (SGLang's lora_path), or null for the base weights */
  lora: string | null;
  resolve(c: Continuation[]): void;
  reject(e: unknown): void;
}

interface Model {
  model: Transformer;
  tokenizer: Tokenizer;
  path: string;
  /** the model's own end-of-sequence ids: a server stops on them unless told to ignore them */
  eos: number[];
  session: Session | null;
}

async function loadServed(o: ServeOptions): Promise<Model> {
  const log = o.log ?? (() => {});
  const dir = resolve(o.spec);
  if (o.step !== undefined) {
    if (!existsSync(join(dir, 'config.yaml'))) throw new UserError(`serve --step: ${o.spec} is not a run folder (no config.yaml)`);
    const { config } = loadConfig(join(dir, 'config.yaml'));
    if (o.backend) config.backend = o.backend;
    const policy = probePolicy(dir, o.step);
    const { session } = await openSession(config, { runDir: dir, log });
    useWeights(session, policy.weights);
    const t = session.tokenizer;
    return { model: session.model, tokenizer: t, path: policy.source, eos: t.eosIds ?? [t.eosId], session };
  }
  const scorer = await loadScorer(o.spec, { backend: o.backend ?? 'auto' }, log);
  const t = scorer.tokenizer;
  return { model: scorer.model, tokenizer: t, path: scorer.describe, eos: t.eosIds ?? [t.eosId], session: null };
}

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

function intField(v: unknown, name: string, min: number, dflt: number, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined || v === null) return dflt;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max)
    throw new BadRequest(`${name} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ' up'}, got ${JSON.stringify(v)}`, name);
  return v as number;
}

/** The most continuations one request may ask for (n, or rows × n): more is a typo, and would exhaust memory. */
const MAX_ROWS = 16_384;
/** The most log-probs listed per position: vLLM's default max_logprobs is 20; SGLang has none, 100 is plenty. */
const MAX_TOP_SGLANG = 100;
const MAX_TOP_VLLM = 20;

function numField(v: unknown, name: string, ok: (x: number) => boolean, allowed: string, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !ok(v)) throw new BadRequest(`${name} must be ${allowed}, got ${JSON.stringify(v)}`, name);
  return v;
}

function stringsField(v: unknown, name: string): string[] {
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  throw new BadRequest(`${name} must be a string or a list of strings`, name);
}

function idsField(v: unknown, name: string, V: number): number[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new BadRequest(`${name} must be a list of token ids`, name);
  for (const id of v)
    if (!Number.isInteger(id) || id < 0 || id >= V) throw new BadRequest(`${name}: token id ${JSON.stringify(id)} is outside the vocabulary [0, ${V})`, name);
  return v as number[];
}

/** The settings every server route shares, read from one request's sampling fields. */
interface RowSettings {
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

/** A batch starts once no request has arrived for this long, or once it has waited the longest. */
const BATCH_QUIET_MS = 2;
const BATCH_WAIT_MS = 20;
/** Rows per scoring pass: bounds the activations of a long batch (the lm head runs in vocabulary blocks anyway). */
const SCORE_ROWS = 32;

export class CreditLensServer {
  private queue: Job[] = [];
  private lastArrival = 0;
  /** the model work in arrival order (exclusive) */
  private chain: Promise<unknown> = Promise.resolve();
  /** why there is no model to serve (a weight update that failed after the old model was dropped), or null */
  private broken: string | null = null;
  /** LoRA adapters loaded by name (POST /load_lora_adapter): views of the base weights with adapters of their own */
  private adapters = new Map<string, { view: Transformer; sampler: LocalSampler; path: string }>();
  private running: Promise<void> | null = null;
  private weightVersion = 'default';
  private sampler: LocalSampler;

  constructor(
    private m: Model,
    private readonly name: string,
    /** false: the model is the caller's (serveModel), and stays alive until the caller disposes it */
    private owns = true,
  ) {
    this.sampler = new LocalSampler(m.model, m.tokenizer);
  }

  get vocabSize(): number {
    return this.m.model.cfg.vocabSize;
  }

  private dropModel(why: string): void {
    if (this.owns) this.m.model.dispose();
    this.broken = why;
  }

  /** Refuses a request while there is no model (503, as a server that is not ready answers). */
  checkReady(): void {
    if (this.broken) throw new BadRequest(`no model is loaded: ${this.broken}; load one with POST /update_weights_from_disk`, null, 503);
  }

  /** Queues one prefix's continuations; they run in the next batch. */
  private submit(req: SampleRequest, settings: SampleSettings, lora: string | null = null): Promise<Continuation[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, settings, lora, resolve, reject });
      this.lastArrival = performance.now();
      if (!this.running) this.running = this.drain();
    });
  }

  private async drain(): Promise<void> {
    // Requests that a client sends together reach the server over several turns of the event loop (each body is read
    // in its own callbacks, and a client opening connections sends them one by one): the batch waits until no request
    // has arrived for BATCH_QUIET_MS, at most BATCH_WAIT_MS, so they share one call.
    const t0 = performance.now();
    while (performance.now() - this.lastArrival < BATCH_QUIET_MS && performance.now() - t0 < BATCH_WAIT_MS) await new Promise<void>((r) => setTimeout(r, 0));
    while (this.queue.length) {
      const jobs = this.queue;
      this.queue = [];
      const groups = new Map<string, Job[]>();
      for (const j of jobs) {
        const key = JSON.stringify([j.settings, j.lora]);
        groups.set(key, [...(groups.get(key) ?? []), j]);
      }
      for (const group of groups.values()) {
        // shortest prefixes first, as the probe orders its positions: neighbours share a bucket
        const sorted = [...group].sort((a, b) => a.req.prefix.length - b.req.prefix.length);
        try {
          // a stop that never fires still has generate() yield to the event loop every few tokens: requests arriving
          // meanwhile are read and queued for the next batch instead of waiting for this one to end
          const out = await this.exclusive(() => {
            this.checkReady();
            const lora = sorted[0].lora;
            const sampler = lora === null ? this.sampler : this.adapters.get(lora)?.sampler;
            // an adapter unloaded while its request waited
            if (!sampler) throw new BadRequest(`lora_path: the adapter ${JSON.stringify(lora)} is not loaded`, 'lora_path');
            return sampler.sample(
              sorted.map((j) => j.req),
              sorted[0].settings,
              { stop: () => false },
            );
          });
          sorted.forEach((j, k) => j.resolve(out![k]));
        } catch (e) {
          for (const j of sorted) j.reject(e);
        }
      }
    }
    this.running = null;
  }

  /** One row's settings as a sampling call takes them; `eosIds` are the stop ids plus, unless ignored, the model's. */
  private settingsOf(r: RowSettings): SampleSettings {
    const eos = [...new Set([...r.stopIds, ...(r.ignoreEos ? [] : this.m.eos)])];
    // SGLang's route reports log-probs after temperature, as SGLang does by default; vLLM's passes rawLogprobs: true
    return { temperature: r.temperature, topP: r.topP, eosIds: eos, stop: r.stop };
  }

  private checkLength(prefix: number[], maxNew: number, field: string): void {
    if (prefix.length === 0) throw new BadRequest(`${field}: an empty prompt cannot be continued`, field);
    const max = this.m.model.cfg.maxSeqLen;
    if (prefix.length + maxNew > max)
      throw new BadRequest(
        `This model's maximum context length is ${max} tokens. However, you requested ${prefix.length + maxNew} tokens (${prefix.length} in the prompt, ${maxNew} for the completion)`,
        field,
      );
  }

  /** Why a row ended, as each engine reports it. */
  /**
   * Why a row ended, as each engine reports it, and its text (decoded once) with and without the stop string it matched
   * (SGLang trims it unless no_stop_trim; vLLM keeps it with include_stop_str_in_output).
   */
  private finishOf(
    c: Continuation,
    r: RowSettings,
  ): { text: string; withoutStop: string; sglang: Record<string, unknown>; vllm: [string, number | string | null] } {
    const text = this.m.tokenizer.decode(c.ids);
    if (c.finish === 'length') return { text, withoutStop: text, sglang: { type: 'length', length: c.ids.length }, vllm: ['length', null] };
    if (c.finish === 'eos') {
      const id = c.ids[c.ids.length - 1];
      return { text, withoutStop: text, sglang: { type: 'stop', matched: id }, vllm: ['stop', r.stopIds.includes(id) ? id : null] };
    }
    const matched = r.stop.find((x) => text.includes(x)) ?? r.stop[0];
    const withoutStop = text.includes(matched) ? text.slice(0, text.lastIndexOf(matched)) : text;
    return { text, withoutStop, sglang: { type: 'stop', matched }, vllm: ['stop', matched] };
  }

  /**
   * Teacher-forced log-probs of positions [start, T) of each row's `ids` (position 0 has none: null), and with K > 0 the
   * K most likely tokens at each (and, with `rank`, the given token's rank), in batches of SCORE_ROWS rows: each row's
   * scored part right-padded after its left-padded head. Waits for a weight update in progress.
   */
  private scoreRows(rows: { ids: number[]; start: number }[], K: number, temperature: number, rank: boolean): Promise<ScoredRow[]> {
    return this.exclusive(() => this.scoreRowsNow(rows, K, temperature, rank));
  }

  private async scoreRowsNow(rows: { ids: number[]; start: number }[], K: number, temperature: number, rank: boolean): Promise<ScoredRow[]> {
    this.checkReady();
    const out = rows.map((r) => ({
      lp: (r.start === 0 ? [null] : []) as (number | null)[],
      top: (r.start === 0 ? [[]] : []) as [number, number][][],
      rank: r.start === 0 ? [0] : ([] as number[]),
    }));
    const todo = rows.map((r, i) => ({ i, first: Math.max(1, r.start), ids: r.ids })).filter((r) => r.first < r.ids.length);
    for (let s0 = 0; s0 < todo.length; s0 += SCORE_ROWS) {
      const part = todo.slice(s0, s0 + SCORE_ROWS);
      const pb = policyBatch(
        part.map((r) => r.ids.slice(0, r.first)),
        part.map((r) => r.ids.slice(r.first)),
        0,
      );
      try {
        const C = pb.completionLen;
        const sc = await this.m.model.scoreTokens(
          pb.ids,
          pb.keyMask,
          { from: pb.promptLen - 1, count: C },
          (await pb.targets.data()) as Int32Array,
          temperature || 1,
          {
            topK: K,
            rank,
          },
        );
        part.forEach((r, k) => {
          for (let t = 0; t < r.ids.length - r.first; t++) {
            const n = k * C + t;
            out[r.i].lp.push(sc.logp[n]);
            out[r.i].top.push(K > 0 ? Array.from({ length: K }, (_, j): [number, number] => [sc.top!.logp[n * K + j], sc.top!.ids[n * K + j]]) : []);
            out[r.i].rank.push(rank ? sc.top!.rank[n] : 0);
          }
        });
      } finally {
        pb.dispose();
      }
    }
    return out;
  }

  /**
   * The sampling fields both APIs share, read from one request's (or one SGLang row's) fields; the budget's and the
   * seed's names, minimum and default are each API's own.
   */
  private commonRow(p: Record<string, unknown>, names: { maxNewTokens: [string, number, number]; seed: string }): RowSettings {
    const [budget, min, dflt] = names.maxNewTokens;
    const seed = p[names.seed];
    return {
      maxNewTokens: intField(p[budget], budget, min, dflt),
      temperature: numField(p.temperature, 'temperature', (x) => x >= 0, 'a number ≥ 0', 1),
      topP: numField(p.top_p, 'top_p', (x) => x > 0 && x <= 1, 'in (0, 1]', 1),
      stop: stringsField(p.stop, 'stop'),
      stopIds: idsField(p.stop_token_ids, 'stop_token_ids', this.vocabSize),
      ignoreEos: p.ignore_eos === true,
      seed: seed === undefined || seed === null ? null : intField(seed, names.seed, 0, 0),
    };
  }

  // ---- SGLang ----------------------------------------------------------------------------------------------------

  private sglangRow(p: Record<string, unknown>): RowSettings & { n: number } {
    if (p.top_k !== undefined && p.top_k !== -1 && !(Number.isInteger(p.top_k) && (p.top_k as number) >= this.vocabSize))
      throw new BadRequest(`sampling_params.top_k: only -1 (the whole vocabulary) is served, got ${JSON.stringify(p.top_k)}`, 'top_k');
    return {
      ...this.commonRow(p, { maxNewTokens: ['max_new_tokens', 0, 128], seed: 'sampling_seed' }),
      // SGLang trims a matched stop string from the text unless told not to (the ids keep it either way)
      trimStop: p.no_stop_trim !== true,
      n: intField(p.n, 'n', 1, 1, MAX_ROWS),
    };
  }

  async sglangGenerate(body: unknown): Promise<unknown> {
    if (!isObj(body)) throw new BadRequest('the request body must be a JSON object');
    if (body.stream === true) throw new BadRequest('stream: true is not served by credit-lens serve: send stream: false (the default)', 'stream');
    let prompts: number[][];
    let batched: boolean;
    if (body.input_ids !== undefined && body.input_ids !== null) {
      const ids = body.input_ids;
      if (!Array.isArray(ids) || ids.length === 0) throw new BadRequest('input_ids must be a list of token ids or a list of such lists', 'input_ids');
      batched = Array.isArray(ids[0]);
      prompts = (batched ? ids : [ids]).map((p: unknown) => idsField(p, 'input_ids', this.vocabSize));
    } else if (typeof body.text === 'string' || (Array.isArray(body.text) && body.text.every((t) => typeof t === 'string'))) {
      batched = Array.isArray(body.text);
      prompts = (batched ? (body.text as string[]) : [body.text as string]).map((t) => this.m.tokenizer.encode(t));
    } else throw new BadRequest('Either text or input_ids should be provided.', 'input_ids');
    const sp = body.sampling_params ?? {};
    const list = Array.isArray(sp) ? sp : prompts.map(() => sp);
    if (list.length !== prompts.length) throw new BadRequest(`sampling_params has ${list.length} entries for ${prompts.length} prompts`, 'sampling_params');
    if (!list.every(isObj)) throw new BadRequest('sampling_params must be an object or a list of objects', 'sampling_params');
    const perRow = (v: unknown, name: string, dflt: number, min: number) => {
      const xs = Array.isArray(v) ? v : prompts.map(() => v);
      if (xs.length !== prompts.length) throw new BadRequest(`${name} has ${xs.length} entries for ${prompts.length} prompts`, name);
      return xs.map((x) => intField(x, name, min, dflt));
    };
    const topK = perRow(body.top_logprobs_num, 'top_logprobs_num', 0, 0).map((k) => intField(k, 'top_logprobs_num', 0, 0, MAX_TOP_SGLANG));
    const startLen = perRow(body.logprob_start_len, 'logprob_start_len', -1, -1);
    const returnLogprob = body.return_logprob === true;
    const rows = list.map((p) => this.sglangRow(p));
    const loraList = Array.isArray(body.lora_path) ? body.lora_path : prompts.map(() => body.lora_path ?? null);
    if (loraList.length !== prompts.length) throw new BadRequest(`lora_path has ${loraList.length} entries for ${prompts.length} prompts`, 'lora_path');
    const loras = loraList.map((x: unknown) => {
      if (x === null || x === undefined) return null;
      if (typeof x !== 'string' || !this.adapters.has(x))
        throw new BadRequest(
          `lora_path: ${JSON.stringify(x)} is not a loaded adapter (loaded: ${[...this.adapters.keys()].join(', ') || 'none'})`,
          'lora_path',
        );
      return x;
    });
    if (rows.some((r) => r.maxNewTokens === 0)) {
      // scoring: max_new_tokens 0 for every row, the prompt's log-probs from logprob_start_len on
      if (!rows.every((r) => r.maxNewTokens === 0))
        throw new BadRequest('max_new_tokens: 0 (scoring) and sampling rows in one batch are not served together', 'max_new_tokens');
      prompts.forEach((prompt, i) => {
        if (startLen[i] >= prompt.length)
          throw new BadRequest(`logprob_start_len ${startLen[i]} is not inside the prompt of ${prompt.length} tokens`, 'logprob_start_len');
        this.checkLength(prompt, 0, 'input_ids');
      });
      // rows scored together where they share K and temperature (a batch from one client does)
      const scored: ({ lp: (number | null)[]; top: [number, number][][] } | null)[] = prompts.map(() => null);
      const wanted = prompts.map((_, i) => i).filter((i) => returnLogprob && startLen[i] >= 0);
      const groups = new Map<string, number[]>();
      for (const i of wanted) groups.set(`${topK[i]}/${rows[i].temperature}`, [...(groups.get(`${topK[i]}/${rows[i].temperature}`) ?? []), i]);
      for (const idx of groups.values()) {
        // as SGLang's scheduler answers: the entry at logprob_start_len is None, whatever it is; real values after it
        const res = await this.scoreRows(
          idx.map((i) => ({ ids: prompts[i], start: startLen[i] + 1 })),
          topK[idx[0]],
          rows[idx[0]].temperature,
          false,
        );
        idx.forEach((i, k) => (scored[i] = { lp: [null, ...res[k].lp], top: [[], ...res[k].top] }));
      }
      const answers = prompts.map((prompt, i) => {
        const sc = scored[i];
        const meta: Record<string, unknown> = {
          id: `cl-score-${Date.now().toString(36)}-${i}`,
          finish_reason: { type: 'length', length: 0 },
          prompt_tokens: prompt.length,
          completion_tokens: 0,
          cached_tokens: 0,
          weight_version: this.weightVersion,
        };
        if (returnLogprob) {
          const from = Math.max(0, startLen[i]);
          Object.assign(meta, {
            input_token_logprobs: sc ? sc.lp.map((l, t) => [l, prompt[from + t], null]) : [],
            input_top_logprobs: sc && topK[i] > 0 ? sc.top.map((list, t) => (t === 0 ? null : list.map(([l, id]) => [l, id, null]))) : [],
            output_token_logprobs: [],
            output_top_logprobs: [],
          });
        }
        return { text: '', output_ids: [], meta_info: meta };
      });
      return batched || answers.length > 1 ? answers : answers[0];
    }
    if (topK.some((k) => k > 0))
      throw new BadRequest(
        'top_logprobs_num > 0 is served for scoring (max_new_tokens 0) only: sampled tokens come with their own log-probs',
        'top_logprobs_num',
      );
    const started = Date.now();
    const total = rows.reduce((a, r) => a + r.n, 0);
    if (total > MAX_ROWS) throw new BadRequest(`${total} continuations in one request is over ${MAX_ROWS}`, 'n');
    const jobs = prompts.flatMap((prompt, i) => {
      const r = rows[i];
      this.checkLength(prompt, r.maxNewTokens, 'input_ids');
      return Array.from({ length: r.n }, () => ({ prompt, r, lora: loras[i] }));
    });
    // rows of one prefix with the same settings share its prefill: one request with their seeds
    const merged = new Map<string, { prompt: number[]; r: RowSettings; lora: string | null; seeds: number[]; rows: number[] }>();
    jobs.forEach(({ prompt, r, lora }, row) => {
      const { seed, ...rest } = r;
      const key = JSON.stringify([prompt, rest, lora]);
      const m = merged.get(key) ?? { prompt, r, lora, seeds: [], rows: [] };
      m.seeds.push(seed ?? randomInt(2 ** 31));
      m.rows.push(row);
      merged.set(key, m);
    });
    const results: Continuation[] = Array(jobs.length);
    await Promise.all(
      [...merged.values()].map(async (m) => {
        const out = await this.submit({ prefix: m.prompt, tail: [], seeds: m.seeds, maxNewTokens: m.r.maxNewTokens }, this.settingsOf(m.r), m.lora);
        out.forEach((c, k) => (results[m.rows[k]] = c));
      }),
    );
    const answers = results.map((c, row) => {
      const r = jobs[row].r;
      const f = this.finishOf(c, r);
      const meta: Record<string, unknown> = {
        id: `cl-${started.toString(36)}-${row}`,
        finish_reason: f.sglang,
        prompt_tokens: jobs[row].prompt.length,
        completion_tokens: c.ids.length,
        cached_tokens: 0,
        weight_version: this.weightVersion,
        e2e_latency: (Date.now() - started) / 1000,
      };
      if (returnLogprob) {
        meta.output_token_logprobs = c.ids.map((id, t) => [c.logprobs[t], id, null]);
        meta.input_token_logprobs = [];
      }
      return { text: r.trimStop ? f.withoutStop : f.text, output_ids: c.ids, meta_info: meta };
    });
    return batched || answers.length > 1 ? answers : answers[0];
  }

  modelInfo(): unknown {
    return {
      model_path: this.m.path,
      tokenizer_path: this.m.path,
      is_generation: true,
      preferred_sampling_params: null,
      weight_version: this.weightVersion,
      has_image_understanding: false,
      has_audio_understanding: false,
    };
  }

  /** Loads new weights between batches: a policy file, a checkpoint folder or a folder with model.safetensors. */
  async updateWeightsFromDisk(body: unknown): Promise<unknown> {
    if (!isObj(body) || typeof body.model_path !== 'string') throw new BadRequest('model_path must be a folder or a .safetensors file', 'model_path');
    const path = resolve(body.model_path);
    const file = existsSync(path) && statSync(path).isFile() ? path : join(path, 'model.safetensors');
    if (!existsSync(file))
      throw new BadRequest(`no model.safetensors in ${path}`, 'model_path', 400, {
        success: false,
        message: `no model.safetensors in ${path}`,
        num_paused_requests: 0,
      });
    return this.exclusive(async () => {
      const weights = readSafetensors(file).tensors;
      // Two copies of a large model do not fit the wasm heap (4 GiB: a 0.5B model is 2 GB in float32), so the old
      // one goes first there; a load that then fails leaves no model, and the server answers 503 until one loads.
      const bytes = Object.values(weights).reduce((a, t) => a + t.data.length * 4, 0);
      const first = 2 * bytes > 0.75 * WASM_HEAP_BYTES;
      if (first) {
        this.dropAdapters();
        this.dropModel(`the update from ${file} is loading`);
      }
      let next: Transformer;
      try {
        next = Transformer.fromWeights(this.m.model.cfg, weights);
      } catch (e) {
        if (first) this.broken = `the weight update from ${file} failed: ${(e as Error).message}`;
        // SGLang answers a failed update 400, with its success flag and message
        throw new BadRequest(`loading ${file} failed: ${(e as Error).message}`, 'model_path', 400, {
          success: false,
          message: (e as Error).message,
          num_paused_requests: 0,
        });
      }
      // adapters are views of the weights being replaced: they go with them
      this.dropAdapters();
      if (!first && this.owns) this.m.model.dispose();
      // the model loaded here is the server's, whoever held the one it replaces
      this.owns = true;
      this.broken = null;
      this.m = { ...this.m, model: next, path };
      if (this.m.session) this.m.session.model = next;
      this.sampler = new LocalSampler(next, this.m.tokenizer);
      this.weightVersion = typeof body.weight_version === 'string' ? body.weight_version : path;
      return { success: true, message: `loaded ${file}`, num_paused_requests: 0 };
    });
  }

  private dropAdapters(): void {
    for (const a of this.adapters.values()) a.view.dispose();
    this.adapters.clear();
  }

  /** Runs model work one piece at a time, in arrival order: a batch, a scoring pass, a weight or adapter load. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => {});
    return run;
  }

  /**
   * SGLang's POST /load_lora_adapter {lora_name, lora_path}: a PEFT folder (adapter_config.json with r, lora_alpha and
   * target_modules; adapter_model.safetensors) on the base weights, selected by requests whose lora_path names it.
   * Loading a name again replaces its adapter.
   */
  async loadLoraAdapter(body: unknown): Promise<unknown> {
    if (!isObj(body) || typeof body.lora_name !== 'string' || body.lora_name === '') throw new BadRequest('lora_name must be a non-empty string', 'lora_name');
    if (typeof body.lora_path !== 'string') throw new BadRequest('lora_path must be the folder of a PEFT adapter', 'lora_path');
    const name = body.lora_name;
    const dir = resolve(body.lora_path);
    // SGLang answers a refused load 400 with its success flag and message
    const fail = (m: string) => new BadRequest(m, 'lora_path', 400, { success: false, error_message: m, loaded_adapters: this.loadedAdapters() });
    let cfg: { r?: unknown; lora_alpha?: unknown; target_modules?: unknown };
    try {
      cfg = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    } catch (e) {
      throw fail(`no readable adapter_config.json in ${dir}: ${(e as Error).message}`);
    }
    const r = cfg.r;
    const targets = Array.isArray(cfg.target_modules) ? (cfg.target_modules as string[]) : null;
    if (!Number.isInteger(r) || (r as number) < 1 || !targets || !targets.every((t) => (ALL_LORA_TARGETS as string[]).includes(t)))
      throw fail(`adapter_config.json in ${dir}: r must be a positive integer and target_modules a list of ${ALL_LORA_TARGETS.join(', ')}`);
    const file = join(dir, 'adapter_model.safetensors');
    if (!existsSync(file)) throw fail(`no adapter_model.safetensors in ${dir}`);
    // PEFT saves `base_model.model.<module>.lora_A.weight`; the model's names start at <module>
    const weights = Object.fromEntries(Object.entries(readSafetensors(file).tensors).map(([k, v]) => [k.replace(/^base_model\.model\./, ''), v]));
    return this.exclusive(async () => {
      this.checkReady();
      let view: Transformer;
      try {
        view = this.m.model.adaptedView(
          { r: r as number, alpha: typeof cfg.lora_alpha === 'number' ? cfg.lora_alpha : undefined, targets: targets as LoraTarget[] },
          weights,
        );
      } catch (e) {
        throw fail(`the adapter in ${dir} does not fit this model: ${(e as Error).message}`);
      }
      this.adapters.get(name)?.view.dispose();
      this.adapters.set(name, { view, sampler: new LocalSampler(view, this.m.tokenizer), path: dir });
      return { success: true, error_message: '', loaded_adapters: this.loadedAdapters() };
    });
  }

  async unloadLoraAdapter(body: unknown): Promise<unknown> {
    if (!isObj(body) || typeof body.lora_name !== 'string') throw new BadRequest('lora_name must be a string', 'lora_name');
    const name = body.lora_name;
    return this.exclusive(async () => {
      const a = this.adapters.get(name);
      if (!a) {
        const m = `no adapter named ${JSON.stringify(name)} is loaded`;
        throw new BadRequest(m, 'lora_name', 400, { success: false, error_message: m, loaded_adapters: this.loadedAdapters() });
      }
      a.view.dispose();
      this.adapters.delete(name);
      return { success: true, error_message: '', loaded_adapters: this.loadedAdapters() };
    });
  }

  private loadedAdapters(): Record<string, string> {
    return Object.fromEntries([...this.adapters].map(([n, a]) => [n, a.path]));
  }

  // ---- vLLM ------------------------------------------------------------------------------------------------------

  vllmModels(): unknown {
    return {
      object: 'list',
      data: [
        { id: this.name, object: 'model', created: 0, owned_by: 'credit-lens', root: this.m.path, parent: null, max_model_len: this.m.model.cfg.maxSeqLen },
      ],
    };
  }

  async vllmCompletions(body: unknown): Promise<unknown> {
    if (!isObj(body)) throw new BadRequest('the request body must be a JSON object');
    if (body.stream === true) throw new BadRequest('stream: true is not served by credit-lens serve: send stream: false (the default)', 'stream');
    if (body.model !== undefined && body.model !== null && body.model !== this.name)
      throw new BadRequest(`The model \`${String(body.model)}\` does not exist.`, 'model', 404);
    const p = body.prompt;
    let prompts: number[][];
    if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number')) prompts = [idsField(p, 'prompt', this.vocabSize)];
    else if (Array.isArray(p) && p.length > 0 && p.every(Array.isArray)) prompts = p.map((x) => idsField(x, 'prompt', this.vocabSize));
    else if (typeof p === 'string') prompts = [this.m.tokenizer.encode(p)];
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string')) prompts = (p as string[]).map((x) => this.m.tokenizer.encode(x));
    else throw new BadRequest('prompt must be a string, a list of strings, a list of token ids or a list of such lists', 'prompt');
    const promptK =
      body.prompt_logprobs === undefined || body.prompt_logprobs === null ? null : intField(body.prompt_logprobs, 'prompt_logprobs', 0, 0, MAX_TOP_VLLM);
    if (body.max_tokens === 0) return this.vllmScore(body, prompts, promptK);
    if (body.echo === true || promptK !== null)
      throw new BadRequest('echo and prompt_logprobs are served for scoring only, with max_tokens: 0', body.echo === true ? 'echo' : 'prompt_logprobs');
    const logprobs = body.logprobs === undefined || body.logprobs === null ? null : intField(body.logprobs, 'logprobs', 0, 0);
    if (logprobs !== null && logprobs > 0)
      throw new BadRequest('logprobs > 0 (top-k lists) is not served by credit-lens serve: send logprobs: 0 for the sampled tokens', 'logprobs');
    if (body.top_k !== undefined && body.top_k !== null && body.top_k !== -1 && body.top_k !== 0)
      throw new BadRequest('top_k: only -1 (the whole vocabulary) is served', 'top_k');
    const n = intField(body.n, 'n', 1, 1, MAX_ROWS);
    if (prompts.length * n > MAX_ROWS) throw new BadRequest(`${prompts.length} prompts × n ${n} is over ${MAX_ROWS} continuations in one request`, 'n');
    const r = this.commonRow(body, { maxNewTokens: ['max_tokens', 1, 16], seed: 'seed' });
    for (const prompt of prompts) this.checkLength(prompt, r.maxNewTokens, 'prompt');
    const includeStop = body.include_stop_str_in_output === true;
    const started = Math.floor(Date.now() / 1000);
    // vLLM's parallel sampling: child i of a request with a seed samples with seed + i
    const outs = await Promise.all(
      prompts.map((prompt) => {
        const base = r.seed ?? randomInt(2 ** 31);
        return this.submit(
          { prefix: prompt, tail: [], seeds: Array.from({ length: n }, (_, i) => base + i), maxNewTokens: r.maxNewTokens },
          { ...this.settingsOf(r), rawLogprobs: true },
        );
      }),
    );
    let promptTokens = 0;
    let completionTokens = 0;
    const choices = outs.flatMap((cs, i) => {
      promptTokens += prompts[i].length;
      return cs.map((c, j) => {
        completionTokens += c.ids.length;
        const f = this.finishOf(c, r);
        const [finish, stopReason] = f.vllm;
        const text = includeStop ? f.text : f.withoutStop;
        const choice: Record<string, unknown> = { index: i * n + j, text, finish_reason: finish, stop_reason: stopReason, prompt_logprobs: null };
        choice.logprobs =
          logprobs === null
            ? null
            : {
                tokens: c.ids.map((id) => this.m.tokenizer.decode([id])),
                token_logprobs: c.logprobs,
                top_logprobs: c.ids.map((id, t) => ({ [this.m.tokenizer.decode([id])]: c.logprobs[t] })),
                text_offset: [],
              };
        if (body.return_token_ids === true) Object.assign(choice, { token_ids: c.ids, prompt_token_ids: prompts[i] });
        return choice;
      });
    });
    return {
      id: `cmpl-${started.toString(36)}${randomInt(1e9).toString(36)}`,
      object: 'text_completion',
      created: started,
      model: this.name,
      choices,
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    };
  }

  /** vLLM's scoring form: echo the prompt, sample nothing, and give each prompt position's log-probs (`prompt_logprobs`). */
  private async vllmScore(body: Record<string, unknown>, prompts: number[][], K: number | null): Promise<unknown> {
    if (body.echo !== true) throw new BadRequest('max_tokens 0 samples nothing: send echo: true with prompt_logprobs to score the prompt', 'max_tokens');
    const created = Math.floor(Date.now() / 1000);
    for (const prompt of prompts) this.checkLength(prompt, 0, 'prompt');
    // raw log-probs, before temperature (vLLM's default logprobs mode); each entry holds the given token and the top K
    const scored =
      K !== null
        ? await this.scoreRows(
            prompts.map((ids) => ({ ids, start: 0 })),
            K,
            1,
            true,
          )
        : null;
    const choices = prompts.map((prompt, i) => {
      const choice: Record<string, unknown> = {
        index: i,
        text: this.m.tokenizer.decode(prompt),
        logprobs: null,
        finish_reason: 'length',
        stop_reason: null,
        prompt_logprobs: null,
      };
      const sc = scored?.[i];
      if (sc)
        choice.prompt_logprobs = sc.lp.map((l, t) => {
          if (l === null) return null;
          const entry: Record<string, { logprob: number; rank: number; decoded_token: string }> = {};
          sc.top[t].forEach(([lp, id], j) => (entry[String(id)] = { logprob: lp, rank: j + 1, decoded_token: this.m.tokenizer.decode([id]) }));
          entry[String(prompt[t])] = { logprob: l, rank: sc.rank[t], decoded_token: this.m.tokenizer.decode([prompt[t]]) };
          return entry;
        });
      if (body.return_token_ids === true) Object.assign(choice, { token_ids: [], prompt_token_ids: prompt });
      return choice;
    });
    const promptTokens = prompts.reduce((a, p) => a + p.length, 0);
    return {
      id: `cmpl-${created.toString(36)}${randomInt(1e9).toString(36)}`,
      object: 'text_completion',
      created,
      model: this.name,
      choices,
      usage: { prompt_tokens: promptTokens, completion_tokens: 0, total_tokens: promptTokens },
    };
  }

  dispose(): void {
    this.dropAdapters();
    if (this.owns && !this.broken) this.m.model.dispose();
  }
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 256 * 2 ** 20) throw new BadRequest('the request body is over 256 MiB');
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new BadRequest(`the request body is not JSON: ${(e as Error).message}`);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json' });
  res.end(text);
}

/** Starts the server; `port: 0` takes a free port (tests). It listens on 127.0.0.1 unless told otherwise. */
export async function serve(o: ServeOptions): Promise<Served> {
  return listen(await loadServed(o), o, true);
}

/**
 * A model this process already holds, served (the bench's in-process comparison): `path` names it to clients. The model
 * stays the caller's.
 */
export function serveModel(model: Transformer, tokenizer: Tokenizer, path: string, o: Pick<ServeOptions, 'host' | 'port' | 'log'> = {}): Promise<Served> {
  return listen({ model, tokenizer, path, eos: tokenizer.eosIds ?? [tokenizer.eosId], session: null }, o, false);
}

async function listen(m: Model, o: Pick<ServeOptions, 'host' | 'port' | 'log'>, ownsModel: boolean): Promise<Served> {
  const log = o.log ?? (() => {});
  const name = m.path;
  const api = new CreditLensServer(m, name, ownsModel);
  const routes: Record<string, (body: unknown) => Promise<unknown> | unknown> = {
    'GET /health': () => api.checkReady(),
    'GET /health_generate': () => api.checkReady(),
    'GET /model_info': () => api.modelInfo(),
    'GET /get_model_info': () => api.modelInfo(),
    'POST /generate': (b) => (api.checkReady(), api.sglangGenerate(b)),
    'POST /update_weights_from_disk': (b) => api.updateWeightsFromDisk(b),
    'POST /load_lora_adapter': (b) => api.loadLoraAdapter(b),
    'POST /unload_lora_adapter': (b) => api.unloadLoraAdapter(b),
    // no prefix cache is kept between batches: there is nothing to flush
    'POST /flush_cache': () =>
      'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n',
    'GET /v1/models': () => api.vllmModels(),
    'POST /v1/completions': (b) => (api.checkReady(), api.vllmCompletions(b)),
  };
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const route = routes[`${req.method} ${path}`];
    const vllm = path.startsWith('/v1/');
    const fail = (status: number, message: string, param: string | null) =>
      send(
        res,
        status,
        vllm
          ? { error: { message, type: status === 404 ? 'NotFoundError' : status >= 500 ? 'InternalServerError' : 'BadRequestError', param, code: status } }
          : { error: { message } },
      );
    if (!route) {
      fail(404, `${req.method} ${path}: no such route`, null);
      return;
    }
    (async () => {
      const body = req.method === 'POST' ? await readBody(req) : undefined;
      send(res, 200, (await route(body)) ?? '');
    })().catch((e: unknown) => {
      if (e instanceof BadRequest) {
        if (e.body !== null) send(res, e.status, e.body);
        else fail(e.status, e.message, e.param);
      } else if (isUserError(e)) fail(400, e.message, null);
      else {
        log(`error: ${req.method} ${path}: ${(e as Error).stack ?? String(e)}`);
        fail(500, (e as Error).message ?? String(e), null);
      }
    });
  });
  // a batch on a CPU can take longer than Node's default 300 s request limit; the client keeps its own
  server.requestTimeout = 0;
  const host = o.host ?? '127.0.0.1';
  await new Promise<void>((ok, bad) => {
    server.once('error', bad);
    server.listen(o.port ?? 30000, host, () => ok());
  });
  const addr = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
  log(`serving ${m.path} at ${url} (SGLang: /generate, /model_info; vLLM: /v1/completions, /v1/models as model ${JSON.stringify(name)})`);
  return {
    url,
    server,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => {
          api.dispose();
          ok();
        });
      }),
  };
}
