// vLLM's OpenAI-compatible completions (docs/serving.md#vllm): `POST /v1/completions` with a token-id `prompt` and
// `GET /v1/models`. The M continuations of a prefix are one request with `n: M` and `seed`: child i samples with
// seed + i, and the children share the prefix's cached blocks, so continuation m's seed is the first seed + m. Scoring
// is `echo` with `max_tokens: 0` and `prompt_logprobs`.
import { randomInt } from 'node:crypto';
import type { Continuation, SampleRequest, SampleSettings, ScoreItem, ScoredTokens } from '../model/sampling';
import { MAX_ROWS, checkScoreSize, commonRow, idsField, intField, requestObject } from './fields';
import { BadRequest, LazyList, isObj, logprobOf, type ApiCall, type RawContinuation, type RowSettings, type ServeBackend, type ServerApiSpec } from './types';

/** The most log-probs listed per position: vLLM's default max_logprobs. */
const MAX_TOP = 20;

// ---- the client's side ----------------------------------------------------------------------------------------------

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
    const ids = choiceIds(c);
    if (typeof ids === 'string') return `choice ${index} ${ids}`;
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

/** A choice's sampled ids, or what is wrong with them. */
function choiceIds(c: Record<string, unknown>): number[] | string {
  let ids: number[];
  if (Array.isArray(c.token_ids)) ids = c.token_ids as number[];
  else {
    // older versions lack return_token_ids; with return_tokens_as_token_ids the tokens read "token_id:123"
    const toks = isObj(c.logprobs) && Array.isArray(c.logprobs.tokens) ? c.logprobs.tokens : null;
    const parsed = toks?.map((t) => (typeof t === 'string' && /^token_id:\d+$/.test(t) ? Number(t.slice(9)) : NaN));
    if (!parsed || parsed.some((x) => !Number.isInteger(x)))
      return 'has no token_ids (a vLLM without return_token_ids: start it with --return-tokens-as-token-ids)';
    ids = parsed;
  }
  if (!ids.every((x) => Number.isInteger(x))) return "'s token_ids are not all integers";
  return ids;
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

async function identify(call: ApiCall, tries: number): Promise<{ model: string; weightVersion: string | null } | null> {
  const r = await call('GET', '/v1/models', undefined, { tries });
  const data = (r.body as { data?: { id?: unknown }[] } | null)?.data;
  return r.status === 200 && Array.isArray(data) && typeof data[0]?.id === 'string' ? { model: data[0].id, weightVersion: null } : null;
}

// ---- serve's side -------------------------------------------------------------------------------------------------

function modelsRoute(server: ServeBackend): unknown {
  return {
    object: 'list',
    data: [{ id: server.name, object: 'model', created: 0, owned_by: 'credit-lens', root: server.path, parent: null, max_model_len: server.maxSeqLen }],
  };
}

function readPrompts(server: ServeBackend, p: unknown): number[][] {
  if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number')) return [idsField(p, 'prompt', server.vocabSize)];
  if (Array.isArray(p) && p.length > 0 && p.every(Array.isArray)) return p.map((x) => idsField(x, 'prompt', server.vocabSize));
  if (typeof p === 'string') return [server.tokenizer.encode(p)];
  if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string')) return (p as string[]).map((x) => server.tokenizer.encode(x));
  throw new BadRequest('prompt must be a string, a list of strings, a list of token ids or a list of such lists', 'prompt');
}

/** A text_completion response, with the token counts of its usage. */
function completion(
  server: ServeBackend,
  created: number,
  choices: unknown[] | LazyList,
  prompts: number[][],
  completionTokens: number,
): Record<string, unknown> {
  const promptTokens = prompts.reduce((a, p) => a + p.length, 0);
  return {
    id: `cmpl-${created.toString(36)}${randomInt(1e9).toString(36)}`,
    object: 'text_completion',
    created,
    model: server.name,
    choices,
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}

async function completionsRoute(server: ServeBackend, raw: unknown): Promise<unknown> {
  server.checkReady();
  const body = requestObject(raw);
  if (body.model !== undefined && body.model !== null && body.model !== server.name)
    throw new BadRequest(`The model \`${String(body.model)}\` does not exist.`, 'model', 404);
  const prompts = readPrompts(server, body.prompt);
  const promptK = body.prompt_logprobs === undefined || body.prompt_logprobs === null ? null : intField(body.prompt_logprobs, 'prompt_logprobs', 0, 0, MAX_TOP);
  if (body.max_tokens === 0) return scoreRoute(server, body, prompts, promptK);
  if (body.echo === true || promptK !== null)
    throw new BadRequest('echo and prompt_logprobs are served for scoring only, with max_tokens: 0', body.echo === true ? 'echo' : 'prompt_logprobs');
  const logprobs = body.logprobs === undefined || body.logprobs === null ? null : intField(body.logprobs, 'logprobs', 0, 0);
  if (logprobs !== null && logprobs > 0)
    throw new BadRequest('logprobs > 0 (top-k lists) is not served by credit-lens serve: send logprobs: 0 for the sampled tokens', 'logprobs');
  if (body.top_k !== undefined && body.top_k !== null && body.top_k !== -1 && body.top_k !== 0)
    throw new BadRequest('top_k: only -1 (the whole vocabulary) is served', 'top_k');
  const n = intField(body.n, 'n', 1, 1, MAX_ROWS);
  if (prompts.length * n > MAX_ROWS) throw new BadRequest(`${prompts.length} prompts × n ${n} is over ${MAX_ROWS} continuations in one request`, 'n');
  const r = commonRow(server, body, { maxNewTokens: ['max_tokens', 1, 16], seed: 'seed' });
  for (const prompt of prompts) server.checkLength(prompt, r.maxNewTokens, 'prompt');
  const created = Math.floor(Date.now() / 1000);
  // vLLM's parallel sampling: child i of a request with a seed samples with seed + i
  const outs = await Promise.all(
    prompts.map((prompt) => {
      const base = r.seed ?? randomInt(2 ** 31);
      return server.submit(
        { prefix: prompt, tail: [], seeds: Array.from({ length: n }, (_, i) => base + i), maxNewTokens: r.maxNewTokens },
        { ...server.settingsOf(r), rawLogprobs: true },
      );
    }),
  );
  const choices = outs.flatMap((cs, i) => cs.map((c, j) => choiceOf(server, body, r, c, prompts[i], i * n + j, logprobs !== null)));
  return completion(
    server,
    created,
    choices,
    prompts,
    outs.flat().reduce((a, c) => a + c.ids.length, 0),
  );
}

/** One sampled choice, as vLLM writes it. */
function choiceOf(
  server: ServeBackend,
  body: Record<string, unknown>,
  r: RowSettings,
  c: Continuation,
  prompt: number[],
  index: number,
  withLogprobs: boolean,
): Record<string, unknown> {
  const f = server.finishOf(c, r);
  // the id it stopped on is reported only where the request named it (vLLM leaves the model's own EOS unnamed)
  const stopReason = f.reason === 'length' ? null : f.reason === 'eos' ? (r.stopIds.includes(f.matched as number) ? f.matched : null) : f.matched;
  const decode = (id: number) => server.tokenizer.decode([id]);
  const choice: Record<string, unknown> = {
    index,
    text: body.include_stop_str_in_output === true ? f.text : f.withoutStop,
    finish_reason: f.reason === 'length' ? 'length' : 'stop',
    stop_reason: stopReason,
    prompt_logprobs: null,
    logprobs: withLogprobs
      ? {
          tokens: c.ids.map(decode),
          token_logprobs: c.logprobs,
          top_logprobs: c.ids.map((id, t) => ({ [decode(id)]: c.logprobs[t] })),
          text_offset: [],
        }
      : null,
  };
  if (body.return_token_ids === true) Object.assign(choice, { token_ids: c.ids, prompt_token_ids: prompt });
  return choice;
}

/** vLLM's scoring form: echo the prompt, sample nothing, and give each prompt position's log-probs (`prompt_logprobs`). */
async function scoreRoute(server: ServeBackend, body: Record<string, unknown>, prompts: number[][], K: number | null): Promise<unknown> {
  if (body.echo !== true) throw new BadRequest('max_tokens 0 samples nothing: send echo: true with prompt_logprobs to score the prompt', 'max_tokens');
  const created = Math.floor(Date.now() / 1000);
  for (const prompt of prompts) server.checkLength(prompt, 0, 'prompt');
  if (K !== null)
    checkScoreSize(
      prompts.reduce((a, p) => a + p.length, 0),
      Math.min(K, server.vocabSize),
      'prompt_logprobs',
    );
  // raw log-probs, before temperature (vLLM's default logprobs mode); each entry holds the given token and the top K
  const scored =
    K !== null
      ? await server.scoreRows(
          prompts.map((ids) => ({ ids, start: 0 })),
          K,
          1,
          true,
        )
      : null;
  const decode = (id: number) => server.tokenizer.decode([id]);
  const choices = new LazyList(prompts.length, (i) => {
    const prompt = prompts[i];
    const choice: Record<string, unknown> = {
      index: i,
      text: server.tokenizer.decode(prompt),
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
        sc.top[t].forEach(([lp, id], j) => (entry[String(id)] = { logprob: lp, rank: j + 1, decoded_token: decode(id) }));
        entry[String(prompt[t])] = { logprob: l, rank: sc.rank[t], decoded_token: decode(prompt[t]) };
        return entry;
      });
    if (body.return_token_ids === true) Object.assign(choice, { token_ids: [], prompt_token_ids: prompt });
    return choice;
  });
  return completion(server, created, choices, prompts, 0);
}

export const vllm = {
  name: 'vllm',
  summary: "vllm: vLLM's OpenAI-compatible completions (POST /v1/completions, GET /v1/models)",
  identify,
  identifyRoutes: 'GET /v1/models',
  seeding: "vLLM: continuation m samples with the request's seed + m; reproducible only as far as vLLM's seeding is",
  batchRows: null,
  generate: { path: '/v1/completions', body: (reqs, s, ctx) => vllmCompletionBody(reqs[0], s, ctx.model), parse: parseVllmCompletion },
  score: {
    path: '/v1/completions',
    body: (items, topK, ctx) => vllmScoreBody(items, topK, ctx.model),
    parse: parseVllmScore,
    note: 'vLLM scores with prompt_logprobs, which skips its prefix cache: every prompt is prefilled again',
  },
  routes: { 'GET /v1/models': modelsRoute, 'POST /v1/completions': completionsRoute },
  stateRoutes: [],
  routePrefix: '/v1/',
  errorBody: (status, message, param) => ({
    error: { message, type: status === 404 ? 'NotFoundError' : status >= 500 ? 'InternalServerError' : 'BadRequestError', param, code: status },
  }),
} as const satisfies ServerApiSpec;
