// An SGLang or vLLM server (or `credit-lens serve`) as the probe's sampler. What a server cannot give, the client does:
// the run's stop rules (cutContinuation, across the join of prefix and continuation), the rewards (the caller's task),
// and the tokenizer (the run's own, checked against the server's vocabulary before the first continuation is used).
//
// Requests go out concurrently, at most `concurrency` at a time, one per prefix with all its M continuations, so the
// server's prefix cache shares the prefill. Connection errors and 5xx answers are retried with backoff, nothing else:
// a 4xx is the request's fault and would fail again. A stop aborts what is in flight.
import { setMaxListeners } from 'node:events';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { StoppedError, UserError } from '../core/errors';
import { sleep } from '../core/files';
import type { Tokenizer } from '../core/types';
import {
  cutContinuation,
  type Continuation,
  type SampleHooks,
  type SampleRequest,
  type Sampler,
  type SampleSettings,
  type SamplerProvenance,
  SamplerLost,
} from '../model/sampling';
import { SERVER_API_SPECS, type ServerApi } from '../server_apis/catalog';
import { API_KEY_ENV } from './guard';
import {
  errorMessage,
  type ApiCall,
  type LoadResult,
  type RawContinuation,
  type Reply,
  type ScoreItem,
  type ScoredTokens,
  type ServerApiSpec,
} from '../server_apis/types';

export interface ServerOptions {
  url: string;
  api?: ServerApi | 'auto';
  /** requests in flight at once (default 64) */
  concurrency?: number;
  /** one request's limit in ms (default 10 minutes: a batch of long continuations on a busy server) */
  timeoutMs?: number;
  /** tries of a request that fails on the connection or with a 5xx (default 5), with backoff from `backoffMs` */
  tries?: number;
  backoffMs?: number;
  /** a stop (Ctrl-C, the extension's Cancel): aborts whatever is in flight, the connection's first questions included */
  signal?: AbortSignal;
  /** sent as Authorization: Bearer (SGLang's and vLLM's --api-key, serve's); default $CREDIT_LENS_API_KEY */
  apiKey?: string | null;
  log?: (m: string) => void;
}

/** The most completions one scoring request carries, and the most positions × (K + 1) (half serve's limit). */
const SCORE_ITEMS = 32;
const SCORE_ENTRIES = 1_000_000;

/** A request that ran past the client's limit. */
class TimedOut extends Error {}

/** A kept-alive connection that the server had closed: the request never reached it. */
class StaleSocket extends Error {}

/** A reply that is not the request's to retry: the server is unreachable, or it answered with a 5xx, or the connection dropped. */
class Transient extends Error {}

/** The server's answer to a request that failed for good (a 4xx, malformed JSON, a timeout), naming the URL. */
export class ServerError extends SamplerLost {}

function baseUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UserError(`--server: ${JSON.stringify(url)} is not a URL; expected e.g. http://127.0.0.1:30000`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UserError(`--server: ${url} is not http:// or https://`);
  return u.toString().replace(/\/+$/, '');
}

export class ServerSampler implements Sampler {
  readonly provenance: SamplerProvenance;
  private readonly url: string;
  private readonly concurrency: number;
  private readonly timeoutMs: number;
  readonly tries: number;
  private readonly backoffMs: number;
  private closed = new AbortController();
  private readonly agents: { http: HttpAgent; https: HttpsAgent };
  private readonly apiKey: string | null;
  /** SGLang: the LoRA adapter every sampling request names (rollout.server with model.lora), or null for the base */
  lora: string | null = null;

  private constructor(
    o: ServerOptions,
    private readonly spec: ServerApiSpec,
    private readonly modelName: string,
    weightVersion: string | null,
    private readonly tokenizer: Tokenizer,
  ) {
    this.url = baseUrl(o.url);
    this.concurrency = Math.max(1, o.concurrency ?? 64);
    this.timeoutMs = o.timeoutMs ?? 600_000;
    this.tries = Math.max(1, o.tries ?? 5);
    this.backoffMs = o.backoffMs ?? 500;
    this.apiKey = o.apiKey ?? (process.env[API_KEY_ENV] || null);
    this.agents = {
      http: new HttpAgent({ keepAlive: true, maxSockets: this.concurrency }),
      https: new HttpsAgent({ keepAlive: true, maxSockets: this.concurrency }),
    };
    // a stop ends this client's requests at once, the first questions of connect() too (a server that accepts and
    // never answers would otherwise hold a stop for the whole timeout)
    o.signal?.addEventListener('abort', () => this.closed.abort(), { once: true });
    this.provenance = { api: spec.name, url: this.url, model: modelName, weight_version: weightVersion, seeding: spec.seeding };
  }

  /** The API the server speaks. */
  get api(): ServerApi {
    return this.spec.name as ServerApi;
  }

  /** Whether the server loads new weights and adapters while it serves (the rollout server syncs each update). */
  get syncsWeights(): boolean {
    return this.spec.weights !== undefined;
  }

  /** What scoring through this API costs that the user should know, or null. */
  get scoringNote(): string | null {
    return this.spec.score.note ?? null;
  }

  /**
   * Connects: the API (auto asks the server which one it speaks), the model name, the weight version, and a check that
   * the server's vocabulary holds the run tokenizer's ids.
   */
  static async connect(o: ServerOptions, tokenizer: Tokenizer): Promise<ServerSampler> {
    const url = baseUrl(o.url);
    const specs = SERVER_API_SPECS as readonly ServerApiSpec[];
    const asked = o.api ?? 'auto';
    const candidates = asked === 'auto' ? specs : specs.filter((s) => s.name === asked);
    if (!candidates.length) throw new UserError(`--server-api ${asked}: expected auto, ${specs.map((s) => s.name).join(', ')}`);
    // one client for the questions: its calls need no API
    const asker = new ServerSampler(o, candidates[0], '', null, tokenizer);
    try {
      return await ServerSampler.identified(o, url, asked, candidates, asker, tokenizer);
    } catch (e) {
      if (o.signal?.aborted) throw new StoppedError(`stopped while connecting to ${url}`);
      throw e;
    } finally {
      await asker.close();
    }
  }

  private static async identified(
    o: ServerOptions,
    url: string,
    asked: string,
    candidates: readonly ServerApiSpec[],
    asker: ServerSampler,
    tokenizer: Tokenizer,
  ): Promise<ServerSampler> {
    const specs = SERVER_API_SPECS as readonly ServerApiSpec[];
    for (const spec of candidates) {
      // auto asks each API once; an API named by the user is asked with its retries
      const info = await spec.identify(asker.caller(), asked === 'auto' ? 1 : asker.tries);
      if (!info) continue;
      const s = new ServerSampler(o, spec, info.model, info.weightVersion, tokenizer);
      o.log?.(`server ${url}: ${spec.name}, model ${info.model}${info.weightVersion ? `, weights ${info.weightVersion}` : ''}`);
      try {
        await s.checkVocabulary();
      } catch (e) {
        await s.close();
        throw e;
      }
      return s;
    }
    throw new ServerError(
      asked === 'auto'
        ? `${url} speaks none of ${specs.map((s) => `${s.name} (${s.identifyRoutes})`).join(', ')}; pass --server-api if it does`
        : `${url} does not answer ${asked}'s ${candidates[0].identifyRoutes}: is it a ${asked} server?`,
    );
  }

  /** The client's request as an API's spec makes it. */
  private caller(): ApiCall {
    return async (method, path, body, o = {}) => {
      const r = await this.call(method, path, body, { ...o, signal: o.signal ?? this.closed.signal });
      // a server that wants a key answers every route so: that, not "does not speak this API", is the news
      if (r.status === 401 || (o.ok && r.status !== 200)) throw this.refusal(path, r);
      return r;
    };
  }

  /**
   * The run's tokenizer and the server's model must share a vocabulary: the top id of the run's must be one the server
   * accepts (servers refuse ids outside theirs), and the server must return ids inside the run's.
   */
  private async checkVocabulary(): Promise<void> {
    const V = this.tokenizer.vocabSize;
    const eos = this.tokenizer.eosIds ?? [this.tokenizer.eosId];
    const req: SampleRequest = { prefix: [V - 1], tail: [], seeds: [0], maxNewTokens: 1 };
    const settings: SampleSettings = { temperature: 1, topP: 1, eosIds: eos, stop: [] };
    try {
      await this.one([req], settings, this.closed.signal);
    } catch (e) {
      if (!(e instanceof ServerError) || !/ answered 4\d\d/.test(e.message)) throw e;
      throw new ServerError(
        `the server's vocabulary does not hold the run's: ${this.url} refuses token id ${V - 1}, which the run's tokenizer has ` +
          `(its vocabulary: ${V} ids, EOS ${eos.join(', ')}). The server said: ${e.message.replace(/^.*? answered /, '')}`,
        'serve the policy the run sampled with (its tokenizer and weights), or probe another run',
      );
    }
  }

  async sample(reqs: SampleRequest[], s: SampleSettings, hooks: SampleHooks = {}): Promise<Continuation[][] | null> {
    const batchRows = this.spec.batchRows;
    if (batchRows === null)
      return this.pool(
        reqs,
        (r, signal) => this.one([r], s, signal).then((x) => x[0]),
        (c) => c.length,
        hooks,
      );
    // an API that takes a batch of prompts: neighbouring prefixes go together up to its batchRows rows
    const batches: number[][] = [];
    let rows = Infinity;
    reqs.forEach((r, q) => {
      if (rows + r.seeds.length > batchRows) {
        batches.push([]);
        rows = 0;
      }
      batches[batches.length - 1].push(q);
      rows += r.seeds.length;
    });
    const out = await this.pool(
      batches,
      (b, signal) =>
        this.one(
          b.map((q) => reqs[q]),
          s,
          signal,
        ),
      (cs) => cs.reduce((n, c) => n + c.length, 0),
      hooks,
    );
    return out && out.flat();
  }

  /**
   * The log-prob of each given completion token under the served policy at temperature 1, and the K most likely tokens
   * at each position (K = 0: none). Null when `stop` ended the call.
   */
  async score(items: ScoreItem[], topK: number, hooks: SampleHooks = {}): Promise<ScoredTokens[] | null> {
    // a batch of completions per request (both engines take a list of prompts), small enough that its answer (every
    // scored position's top K) stays a few tens of MB: serve refuses more, and a real server would build it whole too
    const batches: ScoreItem[][] = [];
    let entries = Infinity;
    for (const item of items) {
      const n = (item.prefix.length + item.ids.length) * (topK + 1);
      if (entries + n > SCORE_ENTRIES || batches[batches.length - 1].length >= SCORE_ITEMS) {
        batches.push([]);
        entries = 0;
      }
      batches[batches.length - 1].push(item);
      entries += n;
    }
    const out = await this.pool(
      batches,
      async (batch, signal) => {
        const { path } = this.spec.score;
        const r = await this.call('POST', path, this.spec.score.body(batch, topK, { model: this.modelName, lora: null }), { signal });
        if (r.status !== 200) throw this.refusal(path, r);
        const scored = this.spec.score.parse(r.body, batch, topK);
        if (typeof scored === 'string') throw new ServerError(`${this.url}${path} answered a scoring request in a shape this client does not know: ${scored}`);
        return scored;
      },
      (b) => b.length,
      hooks,
    );
    return out && out.flat();
  }

  /**
   * `fn` over the items, at most `concurrency` at a time, results in item order; `rows` counts an item's results for the
   * progress. A stop (polled: the probe's signal handler only sets a flag) or a failure aborts what is in flight.
   */
  private async pool<T, R>(items: T[], fn: (item: T, signal: AbortSignal) => Promise<R>, rows: (r: R) => number, hooks: SampleHooks): Promise<R[] | null> {
    const out: R[] = Array(items.length);
    const abort = new AbortController();
    // each request in flight listens on it (its socket and its retry's wait): `concurrency` of them is no leak
    setMaxListeners(2 * this.concurrency + 8, abort.signal);
    const onClose = () => abort.abort();
    this.closed.signal.addEventListener('abort', onClose);
    const poll = setInterval(() => hooks.stop?.() && abort.abort(), 50);
    let next = 0;
    let done = 0;
    let failure: unknown = null;
    const worker = async () => {
      while (next < items.length && !abort.signal.aborted) {
        const q = next++;
        try {
          out[q] = await fn(items[q], abort.signal);
          done += rows(out[q]);
          hooks.progress?.(done);
        } catch (e) {
          if (!abort.signal.aborted) {
            failure = e;
            abort.abort();
          }
        }
      }
    };
    try {
      if (hooks.stop?.()) return null;
      await Promise.all(Array.from({ length: Math.min(this.concurrency, items.length) }, worker));
    } finally {
      clearInterval(poll);
      this.closed.signal.removeEventListener('abort', onClose);
    }
    if (failure) throw failure;
    if (abort.signal.aborted) return null;
    return out;
  }

  /** The M continuations of each prefix (one prefix per request where the API fans out), cut by the run's rules. */
  private async one(reqs: SampleRequest[], s: SampleSettings, signal: AbortSignal): Promise<Continuation[][]> {
    const rows = reqs.reduce((n, r) => n + r.seeds.length, 0);
    const { path } = this.spec.generate;
    const r = await this.call('POST', path, this.spec.generate.body(reqs, s, { model: this.modelName, lora: this.lora }), { signal });
    if (r.status !== 200) throw this.refusal(path, r);
    const raw = this.spec.generate.parse(r.body, rows);
    if (typeof raw === 'string') throw new ServerError(`${this.url}${path} answered in a shape this client does not know: ${raw}`);
    let at = 0;
    return reqs.map((req) => raw.slice(at, (at += req.seeds.length)).map((c) => this.cut(c, req, s)));
  }

  private cut(c: RawContinuation, req: SampleRequest, s: SampleSettings): Continuation {
    const V = this.tokenizer.vocabSize;
    const bad = c.ids.find((id) => !(id >= 0 && id < V));
    if (bad !== undefined)
      throw new ServerError(
        `the server's vocabulary does not match the run's: ${this.url} returned token id ${bad}, outside the run tokenizer's ${V} ids`,
        'serve the policy the run sampled with (its tokenizer and weights)',
      );
    // a sampled token's missing log-prob is NaN, as everywhere (SGLang writes -inf as null); one above 0 is no model's
    const over = c.logprobs.findIndex((l) => l > 1e-4);
    if (over >= 0)
      throw new ServerError(
        `${this.url} reported log-prob +${c.logprobs[over].toPrecision(3)} for sampled token ${c.ids[over]}, above 0 (a probability over 1): its answers are not a model's`,
        'check the server (its version, its sampling settings) or probe in-process',
      );
    if (c.finish === 'abort') throw new ServerError(`${this.url} aborted a request (a pause, a weight update or its memory): the continuations are incomplete`);
    const ids = [...c.ids];
    const logprobs = [...c.logprobs];
    // a server may leave the end-of-sequence id it stopped on out of the ids; the episode keeps it, as the engine's do
    if (c.finish === 'stop' && typeof c.matched === 'number' && s.eosIds.includes(c.matched) && ids[ids.length - 1] !== c.matched) {
      ids.push(c.matched);
      logprobs.push(NaN);
    }
    const cut = cutContinuation(ids, logprobs, req.tail, req.maxNewTokens, s, (x) => this.tokenizer.decode(x));
    if (c.finish === 'stop' && cut.finish === 'length' && cut.ids.length < req.maxNewTokens) {
      const what = typeof c.matched === 'number' ? `id ${c.matched}` : c.matched === null ? `id ${ids[ids.length - 1]}` : JSON.stringify(c.matched);
      throw new ServerError(
        `the server's vocabulary does not match the run's: ${this.url} stopped a continuation on ${what}, which is not one of the run ` +
          `tokenizer's EOS ids (${s.eosIds.join(', ')}) nor its stop strings`,
        "serve the policy the run sampled with, whose tokenizer's end-of-sequence ids are the run's",
      );
    }
    return cut;
  }

  private refusal(path: string, r: Reply): ServerError {
    const msg = errorMessage(r.body) ?? (typeof r.body === 'string' ? r.body.slice(0, 300) : JSON.stringify(r.body).slice(0, 300));
    const hint = r.status === 401 ? `put the server's API key in $${API_KEY_ENV} (${this.apiKey ? 'the one there is refused' : 'it is not set'})` : undefined;
    return new ServerError(`${this.url}${path} answered ${r.status}: ${msg}`, hint);
  }

  /**
   * One HTTP request, retried with exponential backoff on a connection error or a 5xx; a timeout names the URL; a body
   * that is not JSON is an error (a 200 with malformed JSON is not retried: the server would send it again).
   */
  private async call(method: 'GET' | 'POST', path: string, body: unknown, o: { signal?: AbortSignal; tries?: number } = {}): Promise<Reply> {
    const tries = o.tries ?? this.tries;
    let last = '';
    for (let k = 0; k < tries; k++) {
      if (k > 0) await sleep(this.backoffMs * 2 ** (k - 1), o.signal);
      if (o.signal?.aborted) throw new Transient('aborted');
      let res: { status: number; contentType: string; text: string };
      try {
        res = await this.http(method, path, body, o.signal);
      } catch (e) {
        if (o.signal?.aborted) throw new Transient('aborted');
        if (e instanceof TimedOut) throw new ServerError(`${method} ${this.url}${path} timed out after ${Math.round(this.timeoutMs / 1000)} s`);
        last = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
        continue;
      }
      if (res.status >= 500) {
        last = `${res.status} ${res.text.slice(0, 200)}`;
        continue;
      }
      let parsed: unknown = res.text;
      if (res.contentType.includes('json') || res.status === 200) {
        try {
          parsed = res.text === '' ? null : JSON.parse(res.text);
        } catch {
          if (res.status === 200 && method === 'POST') throw new ServerError(`${this.url}${path} answered with malformed JSON: ${res.text.slice(0, 200)}`);
          parsed = res.text;
        }
      }
      return { status: res.status, body: parsed };
    }
    throw new ServerError(
      `${method} ${this.url}${path} failed ${tries} time${tries === 1 ? '' : 's'}: ${last}`,
      'is the server running and reachable from here? (`curl ' + this.url + '/health`)',
    );
  }

  /**
   * One request over node:http(s), with keep-alive connections (at most `concurrency`). Its limit is the client's own:
   * fetch's undici would end a response whose headers take over 300 s (a long non-streaming batch sends none until it
   * is done) and the client would take that for a dropped connection.
   */
  private async http(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<{ status: number; contentType: string; text: string }> {
    try {
      return await this.httpOnce(method, path, body, signal);
    } catch (e) {
      // A kept-alive connection the server closed while it sat idle (uvicorn's keep-alive is 5 s) fails at once with
      // ECONNRESET before the server read anything: the request goes again on a new connection, whatever its method.
      if (!(e instanceof StaleSocket)) throw e;
      return this.httpOnce(method, path, body, signal);
    }
  }

  private httpOnce(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<{ status: number; contentType: string; text: string }> {
    const target = new URL(this.url + path);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(
        target,
        {
          method,
          agent: target.protocol === 'https:' ? this.agents.https : this.agents.http,
          headers: {
            ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
            ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') }),
          );
          res.on('error', reject);
        },
      );
      const timer = setTimeout(() => req.destroy(new TimedOut()), this.timeoutMs);
      const onAbort = () => req.destroy(new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (e: NodeJS.ErrnoException) => reject(req.reusedSocket && e.code === 'ECONNRESET' ? new StaleSocket() : e));
      req.on('close', () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      });
      req.end(payload);
    });
  }

  /** Loads a policy folder on the server (flushing its prefix cache) under `version`. */
  async updateWeightsFromDisk(dir: string, version: string): Promise<LoadResult> {
    return this.weights().update(this.caller(), dir, version);
  }

  /** Loads a PEFT adapter folder under `name` (an SGLang server needs --enable-lora). */
  async loadLoraAdapter(name: string, dir: string): Promise<LoadResult> {
    return this.weights().loadAdapter(this.caller(), name, dir);
  }

  async unloadLoraAdapter(name: string): Promise<LoadResult> {
    return this.weights().unloadAdapter(this.caller(), name);
  }

  /** The weight version the server reports. */
  async weightVersion(): Promise<string | null> {
    return this.weights().version(this.caller());
  }

  private weights(): NonNullable<ServerApiSpec['weights']> {
    if (!this.spec.weights) throw new ServerError(`${this.url} speaks ${this.spec.name}, which loads no weights while it serves`);
    return this.spec.weights;
  }

  async close(): Promise<void> {
    this.closed.abort();
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}
