// The two wire formats the probe samples through (docs/serving.md, from the engines' sources): SGLang's native
// `POST /generate` with `input_ids`, and vLLM's `POST /v1/completions` with a token-id `prompt`. Pure functions, one
// request per prefix, so the clients and `credit-lens serve` are tested against the same recorded pairs.
//
// - SGLang: the M continuations of a prefix are M rows of one batch (its docs advise repeating a prompt rather than
//   n > 1), each with its own `sampling_seed`, so every row can carry the engine's own seed.
// - vLLM: one request with `n: M` and `seed`: child i samples with seed + i, and the children share the prefix's cached
//   blocks. So continuation m's seed is the first seed + m.
import type { SampleRequest, SampleSettings, ScoreItem, ScoredTokens } from '../model/sampling';

export type { ScoreItem, ScoredTokens };

export type ServerApi = 'sglang' | 'vllm';

/** A continuation as the server sent it, before the run's stop rules cut it. */
export interface RawContinuation {
  ids: number[];
  logprobs: number[];
  /** 'stop' (an id or a string the server matched), 'length' or 'abort' */
  finish: string;
  /** what the server says it matched: a token id, a stop string, or null (vLLM: the model's own EOS) */
  matched: number | string | null;
}

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

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * A log-prob as a number: −inf comes clamped, to −999999999 by some SGLang versions and to −9999.0 by vLLM, and the first
 * prompt entry may be null.
 */
function logprobOf(x: unknown): number {
  if (typeof x !== 'number') return NaN;
  return x <= -9999 ? -Infinity : x;
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

export function vllmCompletionBody(req: SampleRequest, s: SampleSettings, model: string): Record<string, unknown> {
  return {
    model,
    prompt: req.prefix,
    n: req.seeds.length,
    // vLLM's default is 16: always sent
    max_tokens: req.maxNewTokens,
    temperature: s.temperature,
    top_p: s.topP,
    seed: req.seeds[0],
    stop: s.stop,
    stop_token_ids: s.eosIds,
    include_stop_str_in_output: true,
    logprobs: 0,
    return_token_ids: true,
    add_special_tokens: false,
    skip_special_tokens: false,
  };
}

/** The continuation m of each choice's `index`, or a message naming what is missing. */
export function parseVllmCompletion(body: unknown, rows: number): RawContinuation[] | string {
  if (!isObj(body) || !Array.isArray(body.choices)) return 'no choices';
  const choices = body.choices.filter(isObj);
  if (choices.length !== rows) return `expected ${rows} choices, got ${body.choices.length}`;
  const out: (RawContinuation | undefined)[] = Array(rows);
  for (const c of choices) {
    const index = c.index;
    if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= rows) return `choice index ${JSON.stringify(index)} outside 0–${rows - 1}`;
    let ids: number[];
    if (Array.isArray(c.token_ids)) ids = c.token_ids as number[];
    else {
      // older versions lack return_token_ids; with return_tokens_as_token_ids the tokens read "token_id:123"
      const toks = isObj(c.logprobs) && Array.isArray(c.logprobs.tokens) ? c.logprobs.tokens : null;
      const parsed = toks?.map((t) => (typeof t === 'string' && /^token_id:\d+$/.test(t) ? Number(t.slice(9)) : NaN));
      if (!parsed || parsed.some((x) => !Number.isInteger(x)))
        return `choice ${index} has no token_ids (a vLLM without return_token_ids: start it with --return-tokens-as-token-ids)`;
      ids = parsed;
    }
    if (!ids.every((x) => Number.isInteger(x))) return `choice ${index}'s token_ids are not all integers`;
    const tl = isObj(c.logprobs) && Array.isArray(c.logprobs.token_logprobs) ? c.logprobs.token_logprobs : null;
    const logprobs = ids.map((_, t) => logprobOf(tl?.[t]));
    const finish = typeof c.finish_reason === 'string' ? c.finish_reason : 'abort';
    const sr = c.stop_reason;
    out[index as number] = { ids, logprobs, finish, matched: typeof sr === 'number' || typeof sr === 'string' ? sr : null };
  }
  // a duplicate index leaves another unfilled (a hole, which some() would skip)
  for (let m = 0; m < rows; m++) if (!out[m]) return `a choice index appears twice (none has index ${m})`;
  return out as RawContinuation[];
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

// ---- Scoring given tokens -----------------------------------------------------------------------------------------

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

/**
 * vLLM scores with `echo` and `max_tokens: 0`, the prompt's log-probs from `prompt_logprobs: K` (each position's entry
 * holds the given token, with its rank, and the top K). Such a request skips the prefix cache (serving.md#vllm): its whole
 * prefill is recomputed.
 */
export function vllmScoreBody(list: ScoreItem[], topK: number, model: string): Record<string, unknown> {
  const prompts = list.map((item) => [...item.prefix, ...item.ids]);
  return {
    model,
    // one token-id prompt, or a batch of them (one choice each, by index)
    prompt: prompts.length === 1 ? prompts[0] : prompts,
    max_tokens: 0,
    echo: true,
    temperature: 1,
    prompt_logprobs: topK,
    return_token_ids: true,
    add_special_tokens: false,
  };
}

/** Each item's log-probs and top K from the choices (by index) of a scoring request, or a message naming what is missing. */
export function parseVllmScore(body: unknown, list: ScoreItem[], topK: number): ScoredTokens[] | string {
  const choices = isObj(body) && Array.isArray(body.choices) ? body.choices.filter(isObj) : [];
  if (choices.length !== list.length) return `expected ${list.length} choices with prompt_logprobs, got ${choices.length}`;
  const byIndex = new Map(choices.map((c, k) => [Number.isInteger(c.index) ? (c.index as number) : k, c]));
  const out: ScoredTokens[] = [];
  for (const [k, item] of list.entries()) {
    const c = byIndex.get(k);
    if (!c || !Array.isArray(c.prompt_logprobs)) return `no choices[${k}].prompt_logprobs`;
    const P = item.prefix.length;
    const all = c.prompt_logprobs;
    if (all.length !== P + item.ids.length) return `prompt_logprobs has ${all.length} positions for a prompt of ${P + item.ids.length} tokens`;
    const one: ScoredTokens = { logprobs: [], top: [] };
    for (let t = 0; t < item.ids.length; t++) {
      const entry = all[P + t];
      if (!isObj(entry)) return `prompt_logprobs[${P + t}] is not an object`;
      const own = entry[String(item.ids[t])];
      if (!isObj(own) || typeof own.logprob !== 'number') return `prompt_logprobs[${P + t}] lacks token ${item.ids[t]}`;
      one.logprobs.push(logprobOf(own.logprob));
      const ranked = Object.entries(entry)
        .filter(([, v]) => isObj(v) && typeof v.rank === 'number' && v.rank <= topK)
        .map(([id, v]) => ({ id: Number(id), lp: logprobOf((v as { logprob: unknown }).logprob), rank: (v as { rank: number }).rank }))
        .sort((x, y) => x.rank - y.rank || x.id - y.id);
      one.top.push({ ids: ranked.map((x) => x.id), logprobs: ranked.map((x) => x.lp) });
    }
    out.push(one);
  }
  return out;
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
