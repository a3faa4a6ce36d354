// SGLang's native API (docs/serving.md#sglang): `POST /generate` with `input_ids`, `GET /model_info`, and the weight and
// adapter routes RL trainers sync through. The M continuations of a prefix are M rows of one batch (SGLang's docs
// advise repeating a prompt rather than n > 1), each with its own `sampling_seed`, so every row carries the engine's
// own seed; scoring is `max_new_tokens: 0` with `logprob_start_len`.
import { randomInt } from 'node:crypto';
import { resolve } from 'node:path';
import type { Continuation, SampleRequest, SampleSettings, ScoreItem, ScoredTokens } from '../model/sampling';
import { MAX_ROWS, checkScoreSize, commonRow, idsField, intField, requestObject } from './fields';
import {
  BadRequest,
  RefusedLoad,
  isObj,
  logprobOf,
  type ApiCall,
  type LoadResult,
  type RawContinuation,
  type RowSettings,
  type ServeBackend,
  type ServerApiSpec,
  LazyList,
} from './types';

/** The most log-probs listed per position: SGLang has no limit of its own; 100 is plenty. */
const MAX_TOP = 100;

// ---- the client's side ----------------------------------------------------------------------------------------------

/**
 * One /generate batch for several prefixes: every continuation is a row of its own (the prefix repeated), with its own
 * sampling_seed, in request order then seed order.
 */
export function sglangGenerateBody(reqs: SampleRequest | SampleRequest[], s: SampleSettings, lora: string | null = null): Record<string, unknown> {
  const list = Array.isArray(reqs) ? reqs : [reqs];
  const params = (req: SampleRequest, seed: number) => ({
    max_new_tokens: req.maxNewTokens,
    temperature: s.temperature,
    top_p: s.topP,
    top_k: -1,
    stop_token_ids: s.eosIds,
    stop: s.stop,
    // keep the stop string's tokens in the output: the client cuts by the run's rules and the episode keeps them
    no_stop_trim: true,
    sampling_seed: seed,
    n: 1,
  });
  return {
    input_ids: list.flatMap((req) => req.seeds.map(() => req.prefix)),
    sampling_params: list.flatMap((req) => req.seeds.map((seed) => params(req, seed))),
    return_logprob: true,
    // -1: log-probs of the output tokens only
    logprob_start_len: -1,
    top_logprobs_num: 0,
    // a LoRA adapter loaded with /load_lora_adapter, by its name
    ...(lora !== null ? { lora_path: lora } : {}),
  };
}

/** The rows of a /generate response (a list for a batch), or a message naming what is missing. */
export function parseSglangGenerate(body: unknown, rows: number): RawContinuation[] | string {
  const list = Array.isArray(body) ? body : [body];
  if (list.length !== rows) return `expected ${rows} results, got ${list.length}`;
  const out: RawContinuation[] = [];
  for (const [i, r] of list.entries()) {
    const meta = isObj(r) ? r.meta_info : undefined;
    if (!isObj(meta)) return `result ${i} has no meta_info`;
    const lp = meta.output_token_logprobs;
    if (!Array.isArray(lp)) return `result ${i}'s meta_info has no output_token_logprobs (was return_logprob honoured?)`;
    const ids: number[] = [];
    const logprobs: number[] = [];
    for (const e of lp) {
      if (!Array.isArray(e) || !Number.isInteger(e[1]))
        return `result ${i}'s output_token_logprobs entry ${JSON.stringify(e)} is not [logprob, token_id, text]`;
      ids.push(e[1] as number);
      logprobs.push(logprobOf(e[0]));
    }
    const fr = meta.finish_reason;
    const finish = isObj(fr) && typeof fr.type === 'string' ? fr.type : 'abort';
    const matched = isObj(fr) && (typeof fr.matched === 'number' || typeof fr.matched === 'string') ? fr.matched : null;
    out.push({ ids, logprobs, finish, matched });
  }
  return out;
}

/**
 * SGLang scores with `max_new_tokens: 0` and `logprob_start_len` one before the completion: its input log-probs start
 * with a None entry whatever the start (its scheduler pads the first), so the entry of the last prompt token is the one
 * given up. The prompt stays in its radix cache (the match is capped at logprob_start_len). Temperature 1, at which its
 * log-probs and the original ones agree.
 */
export function sglangScoreBody(list: ScoreItem[], topK: number): Record<string, unknown> {
  return {
    input_ids: list.map((item) => [...item.prefix, ...item.ids]),
    sampling_params: { max_new_tokens: 0, temperature: 1 },
    return_logprob: true,
    logprob_start_len: list.map((item) => item.prefix.length - 1),
    top_logprobs_num: topK,
  };
}

/** Each item's log-probs and top K from a /generate scoring batch, or a message naming what is missing. */
export function parseSglangScore(body: unknown, list: ScoreItem[], topK: number): ScoredTokens[] | string {
  const results = Array.isArray(body) ? body : [body];
  if (results.length !== list.length) return `expected ${list.length} results, got ${results.length}`;
  const out: ScoredTokens[] = [];
  for (const [k, item] of list.entries()) {
    const one = parseOneScore(results[k], item, topK);
    if (typeof one === 'string') return list.length > 1 ? `result ${k}: ${one}` : one;
    out.push(one);
  }
  return out;
}

function parseOneScore(r: unknown, item: ScoreItem, topK: number): ScoredTokens | string {
  const meta = isObj(r) ? r.meta_info : undefined;
  if (!isObj(meta) || !Array.isArray(meta.input_token_logprobs)) return 'no meta_info.input_token_logprobs (was return_logprob honoured?)';
  const C = item.ids.length;
  // entry 0 is the last prompt token's (None: SGLang pads the first entry), then one per completion token
  const lp = meta.input_token_logprobs;
  if (lp.length !== C + 1)
    return `${lp.length} input_token_logprobs for the ${C} completion tokens after logprob_start_len ${item.prefix.length - 1} (expected ${C + 1})`;
  const top = topK > 0 ? meta.input_top_logprobs : [];
  if (topK > 0 && (!Array.isArray(top) || top.length !== C + 1)) return `input_top_logprobs has no list of ${C + 1} positions`;
  const out: ScoredTokens = { logprobs: [], top: [] };
  for (let t = 0; t < C; t++) {
    const e = lp[t + 1];
    if (!Array.isArray(e) || e[1] !== item.ids[t]) return `input_token_logprobs[${t + 1}] is ${JSON.stringify(e)}, not the log-prob of token ${item.ids[t]}`;
    out.logprobs.push(logprobOf(e[0]));
    const entries = topK > 0 ? (top as unknown[])[t + 1] : [];
    if (!Array.isArray(entries)) return `input_top_logprobs[${t + 1}] is not a list`;
    out.top.push({
      ids: entries.map((x) => (Array.isArray(x) ? Number(x[1]) : NaN)),
      logprobs: entries.map((x) => (Array.isArray(x) ? logprobOf(x[0]) : NaN)),
    });
  }
  return out;
}

/** Newer SGLang serves /model_info, older /get_model_info: the newer route first, the older on a 404. */
async function identify(call: ApiCall, tries: number): Promise<{ model: string; weightVersion: string | null } | null> {
  for (const path of ['/model_info', '/get_model_info']) {
    const r = await call('GET', path, undefined, { tries });
    const body = r.body as Record<string, unknown> | null;
    if (r.status === 200 && isObj(body) && 'model_path' in body) {
      const version = typeof body.weight_version === 'string' ? body.weight_version : await olderWeightVersion(call, 1);
      return { model: String(body.model_path), weightVersion: version };
    }
    if (r.status !== 404) break;
  }
  return null;
}

/** Older SGLang builds report the weight version at GET /get_weight_version (newer ones answer 404 there). */
async function olderWeightVersion(call: ApiCall, tries?: number): Promise<string | null> {
  const v = await call('GET', '/get_weight_version', undefined, { tries });
  const vb = v.body as { weight_version?: unknown } | string | null;
  if (v.status !== 200) return null;
  return typeof vb === 'string' ? vb : typeof vb?.weight_version === 'string' ? vb.weight_version : null;
}

async function adapterCall(call: ApiCall, path: string, body: Record<string, string>): Promise<LoadResult> {
  // not retried: a load that the server applied before the connection dropped would fail again as already loaded
  const r = await call('POST', path, body, { tries: 1, ok: true });
  const b = r.body as { success?: unknown; error_message?: unknown; message?: unknown } | null;
  const message = typeof b?.error_message === 'string' ? b.error_message : typeof b?.message === 'string' ? b.message : '';
  return { success: b?.success === true, message };
}

const weights: NonNullable<ServerApiSpec['weights']> = {
  async update(call, dir, version) {
    const path = '/update_weights_from_disk';
    // not retried: a dropped connection may come after the server applied it (resume the run to sync again)
    const r = await call('POST', path, { model_path: dir, load_format: null, flush_cache: true, weight_version: version }, { tries: 1, ok: true });
    const b = r.body as { success?: unknown; message?: unknown } | null;
    return { success: b?.success === true, message: typeof b?.message === 'string' ? b.message : JSON.stringify(b) };
  },
  async version(call) {
    const r = await call('GET', '/model_info', undefined);
    const b = r.body as { weight_version?: unknown } | null;
    if (r.status === 200 && typeof b?.weight_version === 'string') return b.weight_version;
    return olderWeightVersion(call);
  },
  loadAdapter: (call, name, dir) => adapterCall(call, '/load_lora_adapter', { lora_name: name, lora_path: dir }),
  unloadAdapter: (call, name) => adapterCall(call, '/unload_lora_adapter', { lora_name: name }),
};

// ---- serve's side -------------------------------------------------------------------------------------------------

/** A /generate request read: its prompts, each row's settings, adapter, top K and logprob start. */
interface GenerateRequest {
  prompts: number[][];
  /** a list was sent (answer a list), or one prompt (answer one object) */
  batched: boolean;
  rows: (RowSettings & { n: number })[];
  loras: (string | null)[];
  topK: number[];
  startLen: number[];
  returnLogprob: boolean;
}

function readRow(server: ServeBackend, p: Record<string, unknown>): RowSettings & { n: number } {
  if (p.top_k !== undefined && p.top_k !== -1 && !(Number.isInteger(p.top_k) && (p.top_k as number) >= server.vocabSize))
    throw new BadRequest(`sampling_params.top_k: only -1 (the whole vocabulary) is served, got ${JSON.stringify(p.top_k)}`, 'top_k');
  return {
    ...commonRow(server, p, { maxNewTokens: ['max_new_tokens', 0, 128], seed: 'sampling_seed' }),
    // SGLang trims a matched stop string from the text unless told not to (the ids keep it either way)
    trimStop: p.no_stop_trim !== true,
    n: intField(p.n, 'n', 1, 1, MAX_ROWS),
  };
}

function readPrompts(server: ServeBackend, body: Record<string, unknown>): { prompts: number[][]; batched: boolean } {
  if (body.input_ids !== undefined && body.input_ids !== null) {
    const ids = body.input_ids;
    if (!Array.isArray(ids) || ids.length === 0) throw new BadRequest('input_ids must be a list of token ids or a list of such lists', 'input_ids');
    const batched = Array.isArray(ids[0]);
    return { batched, prompts: (batched ? ids : [ids]).map((p: unknown) => idsField(p, 'input_ids', server.vocabSize)) };
  }
  if (typeof body.text === 'string' || (Array.isArray(body.text) && body.text.every((t) => typeof t === 'string'))) {
    const batched = Array.isArray(body.text);
    return { batched, prompts: (batched ? (body.text as string[]) : [body.text as string]).map((t) => server.tokenizer.encode(t)) };
  }
  throw new BadRequest('Either text or input_ids should be provided.', 'input_ids');
}

function readGenerate(server: ServeBackend, raw: unknown): GenerateRequest {
  const body = requestObject(raw);
  const { prompts, batched } = readPrompts(server, body);
  /** a field given once for every prompt, or as a list of one per prompt */
  const perPrompt = (v: unknown, name: string): unknown[] => {
    const xs = Array.isArray(v) ? v : prompts.map(() => v);
    if (xs.length !== prompts.length) throw new BadRequest(`${name} has ${xs.length} entries for ${prompts.length} prompts`, name);
    return xs;
  };
  const params = perPrompt(body.sampling_params ?? {}, 'sampling_params');
  if (!params.every(isObj)) throw new BadRequest('sampling_params must be an object or a list of objects', 'sampling_params');
  const loaded = server.loadedAdapters();
  const loras = perPrompt(body.lora_path ?? null, 'lora_path').map((x) => {
    if (x === null || x === undefined) return null;
    if (typeof x !== 'string' || !(x in loaded))
      throw new BadRequest(`lora_path: ${JSON.stringify(x)} is not a loaded adapter (loaded: ${Object.keys(loaded).join(', ') || 'none'})`, 'lora_path');
    return x;
  });
  return {
    prompts,
    batched,
    rows: params.map((p) => readRow(server, p)),
    loras,
    topK: perPrompt(body.top_logprobs_num, 'top_logprobs_num').map((k) => intField(k, 'top_logprobs_num', 0, 0, MAX_TOP)),
    startLen: perPrompt(body.logprob_start_len, 'logprob_start_len').map((x) => intField(x, 'logprob_start_len', -1, -1)),
    returnLogprob: body.return_logprob === true,
  };
}

async function generateRoute(server: ServeBackend, raw: unknown): Promise<unknown> {
  server.checkReady();
  const g = readGenerate(server, raw);
  const answers = g.rows.some((r) => r.maxNewTokens === 0) ? await scoreAnswers(server, g) : await sampleAnswers(server, g);
  return g.batched || answers.length > 1 ? answers : answers instanceof LazyList ? answers.item(0) : answers[0];
}

/** Scoring: max_new_tokens 0 for every row, the prompt's log-probs from logprob_start_len on. */
async function scoreAnswers(server: ServeBackend, g: GenerateRequest): Promise<LazyList> {
  const { prompts, rows, topK, startLen } = g;
  if (!rows.every((r) => r.maxNewTokens === 0))
    throw new BadRequest('max_new_tokens: 0 (scoring) and sampling rows in one batch are not served together', 'max_new_tokens');
  prompts.forEach((prompt, i) => {
    if (startLen[i] >= prompt.length)
      throw new BadRequest(`logprob_start_len ${startLen[i]} is not inside the prompt of ${prompt.length} tokens`, 'logprob_start_len');
    server.checkLength(prompt, 0, 'input_ids');
  });
  if (g.returnLogprob)
    checkScoreSize(
      prompts.reduce((a, p, i) => a + p.length - Math.max(0, startLen[i]), 0),
      Math.min(Math.max(...topK), server.vocabSize),
      'top_logprobs_num',
    );
  // rows scored together where they share K and temperature (a batch from one client does)
  const scored: ({ lp: (number | null)[]; top: [number, number][][] } | null)[] = prompts.map(() => null);
  const groups = new Map<string, number[]>();
  for (const i of prompts.keys()) {
    if (!g.returnLogprob || startLen[i] < 0) continue;
    const key = `${topK[i]}/${rows[i].temperature}`;
    groups.set(key, [...(groups.get(key) ?? []), i]);
  }
  for (const idx of groups.values()) {
    // as SGLang's scheduler answers: the entry at logprob_start_len is None, whatever it is; real values after it
    const res = await server.scoreRows(
      idx.map((i) => ({ ids: prompts[i], start: startLen[i] + 1 })),
      topK[idx[0]],
      rows[idx[0]].temperature,
      false,
    );
    idx.forEach((i, k) => (scored[i] = { lp: [null, ...res[k].lp], top: [[], ...res[k].top] }));
  }
  return new LazyList(prompts.length, (i) => {
    const prompt = prompts[i];
    const sc = scored[i];
    const meta: Record<string, unknown> = {
      id: `cl-score-${Date.now().toString(36)}-${i}`,
      finish_reason: { type: 'length', length: 0 },
      prompt_tokens: prompt.length,
      completion_tokens: 0,
      cached_tokens: 0,
      weight_version: server.weightVersion,
    };
    if (g.returnLogprob) {
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
}

/** Sampling: each row's n continuations; rows of one prefix with the same settings share its prefill. */
async function sampleAnswers(server: ServeBackend, g: GenerateRequest): Promise<unknown[]> {
  if (g.topK.some((k) => k > 0))
    throw new BadRequest(
      'top_logprobs_num > 0 is served for scoring (max_new_tokens 0) only: sampled tokens come with their own log-probs',
      'top_logprobs_num',
    );
  const started = Date.now();
  const total = g.rows.reduce((a, r) => a + r.n, 0);
  if (total > MAX_ROWS) throw new BadRequest(`${total} continuations in one request is over ${MAX_ROWS}`, 'n');
  const jobs = g.prompts.flatMap((prompt, i) => {
    const r = g.rows[i];
    server.checkLength(prompt, r.maxNewTokens, 'input_ids');
    return Array.from({ length: r.n }, () => ({ prompt, r, lora: g.loras[i] }));
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
      const out = await server.submit({ prefix: m.prompt, tail: [], seeds: m.seeds, maxNewTokens: m.r.maxNewTokens }, server.settingsOf(m.r), m.lora);
      out.forEach((c, k) => (results[m.rows[k]] = c));
    }),
  );
  return results.map((c, row) => {
    const r = jobs[row].r;
    const f = server.finishOf(c, r);
    const meta: Record<string, unknown> = {
      id: `cl-${started.toString(36)}-${row}`,
      finish_reason: f.reason === 'length' ? { type: 'length', length: c.ids.length } : { type: 'stop', matched: f.matched },
      prompt_tokens: jobs[row].prompt.length,
      completion_tokens: c.ids.length,
      cached_tokens: 0,
      weight_version: server.weightVersion,
      e2e_latency: (Date.now() - started) / 1000,
    };
    if (g.returnLogprob) {
      meta.output_token_logprobs = c.ids.map((id, t) => [c.logprobs[t], id, null]);
      meta.input_token_logprobs = [];
    }
    return { text: r.trimStop ? f.withoutStop : f.text, output_ids: c.ids, meta_info: meta };
  });
}

function modelInfo(server: ServeBackend): unknown {
  return {
    model_path: server.path,
    tokenizer_path: server.path,
    is_generation: true,
    preferred_sampling_params: null,
    weight_version: server.weightVersion,
    has_image_understanding: false,
    has_audio_understanding: false,
  };
}

/** Loads new weights between batches: a policy file, a checkpoint folder or a folder with model.safetensors. */
async function updateWeightsRoute(server: ServeBackend, body: unknown): Promise<unknown> {
  if (!isObj(body) || typeof body.model_path !== 'string') throw new BadRequest('model_path must be a folder or a .safetensors file', 'model_path');
  try {
    const file = await server.loadWeights(resolve(body.model_path), typeof body.weight_version === 'string' ? body.weight_version : null);
    return { success: true, message: `loaded ${file}`, num_paused_requests: 0 };
  } catch (e) {
    if (!(e instanceof RefusedLoad)) throw e;
    // SGLang answers a failed update 400, with its success flag and message
    throw new BadRequest(e.message, 'model_path', 400, { success: false, message: e.message, num_paused_requests: 0 });
  }
}

/**
 * POST /load_lora_adapter {lora_name, lora_path}: a PEFT folder on the base weights, selected by requests whose
 * lora_path names it. Loading a name again replaces its adapter.
 */
async function loadAdapterRoute(server: ServeBackend, body: unknown): Promise<unknown> {
  if (!isObj(body) || typeof body.lora_name !== 'string' || body.lora_name === '') throw new BadRequest('lora_name must be a non-empty string', 'lora_name');
  if (typeof body.lora_path !== 'string') throw new BadRequest('lora_path must be the folder of a PEFT adapter', 'lora_path');
  try {
    await server.loadAdapter(body.lora_name, resolve(body.lora_path));
  } catch (e) {
    if (!(e instanceof RefusedLoad)) throw e;
    // SGLang answers a refused load 400 with its success flag and message
    throw new BadRequest(e.message, 'lora_path', 400, { success: false, error_message: e.message, loaded_adapters: server.loadedAdapters() });
  }
  return { success: true, error_message: '', loaded_adapters: server.loadedAdapters() };
}

async function unloadAdapterRoute(server: ServeBackend, body: unknown): Promise<unknown> {
  if (!isObj(body) || typeof body.lora_name !== 'string') throw new BadRequest('lora_name must be a string', 'lora_name');
  if (!(await server.unloadAdapter(body.lora_name))) {
    const m = `no adapter named ${JSON.stringify(body.lora_name)} is loaded`;
    throw new BadRequest(m, 'lora_name', 400, { success: false, error_message: m, loaded_adapters: server.loadedAdapters() });
  }
  return { success: true, error_message: '', loaded_adapters: server.loadedAdapters() };
}

export const sglang = {
  name: 'sglang',
  summary: "sglang: SGLang's native API (POST /generate, GET /model_info; weight sync by /update_weights_from_disk)",
  identify,
  identifyRoutes: 'GET /model_info, /get_model_info',
  seeding:
    'each continuation carries its own sampling_seed; SGLang reproduces a draw only as far as its seeding does (bit-exact with --enable-deterministic-inference)',
  // neighbouring prefixes go together up to this many rows, so a probe's positions reach the server as one batch, not
  // as dozens of requests arriving one by one
  batchRows: 256,
  generate: { path: '/generate', body: (reqs, s, ctx) => sglangGenerateBody(reqs, s, ctx.lora), parse: parseSglangGenerate },
  score: { path: '/generate', body: (items, topK) => sglangScoreBody(items, topK), parse: parseSglangScore },
  weights,
  routes: {
    'GET /health': (server) => server.checkReady(),
    'GET /health_generate': (server) => server.checkReady(),
    'GET /model_info': modelInfo,
    'GET /get_model_info': modelInfo,
    'POST /generate': generateRoute,
    'POST /update_weights_from_disk': updateWeightsRoute,
    'POST /load_lora_adapter': loadAdapterRoute,
    'POST /unload_lora_adapter': unloadAdapterRoute,
    // no prefix cache is kept between batches: there is nothing to flush
    'POST /flush_cache': () =>
      'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n',
  },
  stateRoutes: ['POST /update_weights_from_disk', 'POST /load_lora_adapter', 'POST /unload_lora_adapter', 'POST /flush_cache'],
  errorBody: (_status, message) => ({ error: { message } }),
} as const satisfies ServerApiSpec;
