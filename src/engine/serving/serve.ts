// `credit-lens serve`: the engine's own model behind SGLang's native API and vLLM's OpenAI-compatible completions, so
// the probe's server path is tested here for real and a Credit Lens checkpoint can be served to anything that speaks
// either. Requests that arrive while a batch runs wait for the next one: every request queued at a tick goes into one
// LocalSampler call (generate() in buckets), and the rows of one prefix share its prefill. A malformed request gets a
// 400 in the engine's error shape naming the field, never a crash.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
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
import { SERVER_API_SPECS } from '../server_apis/catalog';
import { Guard } from './guard';
import { bindError, checkBind, ClientGone, current, holdsLazy, readBody, send, sendStream } from './http_io';
import { BadRequest, LazyList, RefusedLoad, type Finish, type RowSettings, type ScoredRow, type ServeBackend, type ServerApiSpec } from '../server_apis/types';

export interface ServeOptions {
  /** a run folder, one of its checkpoints or a Hugging Face folder */
  spec: string;
  /** with a run folder: serve the policy that sampled this step (as `probe --step` uses), not the newest checkpoint */
  step?: number;
  host?: string;
  port?: number;
  backend?: BackendPreference;
  /** the key every request must carry (Authorization: Bearer); null or absent: none (loopback only changes state) */
  apiKey?: string | null;
  /** folders weights and adapters may be loaded from, besides the served model's own */
  allowPaths?: string[];
  log?: (m: string) => void;
}

export interface Served {
  url: string;
  server: Server;
  /** how many requests were dropped because their client closed the connection first */
  abandoned(): number;
  close(): Promise<void>;
}

interface Job {
  req: SampleRequest;
  /** aborted once the client that asked has closed its connection */
  gone: AbortSignal | null;
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
    await useWeights(session, policy.weights);
    const t = session.tokenizer;
    return { model: session.model, tokenizer: t, path: policy.source, eos: t.eosIds ?? [t.eosId], session };
  }
  const scorer = await loadScorer(o.spec, { backend: o.backend ?? 'auto' }, log);
  const t = scorer.tokenizer;
  return { model: scorer.model, tokenizer: t, path: scorer.describe, eos: t.eosIds ?? [t.eosId], session: null };
}

/** A batch starts once no request has arrived for this long, or once it has waited the longest. */
const BATCH_QUIET_MS = 2;
const BATCH_WAIT_MS = 20;
/** Rows per scoring pass: bounds the activations of a long batch (the lm head runs in vocabulary blocks anyway). */
const SCORE_ROWS = 32;

export class CreditLensServer implements ServeBackend {
  private queue: Job[] = [];
  private lastArrival = 0;
  /** the model work in arrival order (exclusive) */
  private chain: Promise<unknown> = Promise.resolve();
  /** why there is no model to serve (a weight update that failed after the old model was dropped), or null */
  private broken: string | null = null;
  /** LoRA adapters loaded by name (POST /load_lora_adapter): views of the base weights with adapters of their own */
  private adapters = new Map<string, { view: Transformer; sampler: LocalSampler; path: string }>();
  private running: Promise<void> | null = null;
  weightVersion = 'default';
  private sampler: LocalSampler;

  constructor(
    private m: Model,
    readonly name: string,
    /** false: the model is the caller's (serveModel), and stays alive until the caller disposes it */
    private owns = true,
    /** where weights and adapters may load from */
    private readonly guard: Guard | null = null,
  ) {
    this.sampler = new LocalSampler(m.model, m.tokenizer);
  }

  get vocabSize(): number {
    return this.m.model.cfg.vocabSize;
  }

  get maxSeqLen(): number {
    return this.m.model.cfg.maxSeqLen;
  }

  get path(): string {
    return this.m.path;
  }

  get tokenizer(): Tokenizer {
    return this.m.tokenizer;
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
  submit(req: SampleRequest, settings: SampleSettings, lora: string | null = null): Promise<Continuation[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, settings, lora, gone: current.getStore()?.gone ?? null, resolve, reject });
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
      // a client that has gone gets nothing: its rows are not sampled (a stopped probe leaves thousands queued)
      const jobs = this.queue.filter((j) => {
        if (j.gone?.aborted) j.reject(new ClientGone());
        return !j.gone?.aborted;
      });
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
            // a batch whose every client has gone stops within a few tokens
            return sampler.sample(
              sorted.map((j) => j.req),
              sorted[0].settings,
              { stop: () => sorted.every((j) => j.gone?.aborted) },
            );
          });
          if (!out) throw new ClientGone();
          sorted.forEach((j, k) => j.resolve(out[k]));
        } catch (e) {
          for (const j of sorted) j.reject(e);
        }
      }
    }
    this.running = null;
  }

  /** One row's settings as a sampling call takes them; `eosIds` are the stop ids plus, unless ignored, the model's. */
  settingsOf(r: RowSettings): SampleSettings {
    const eos = [...new Set([...r.stopIds, ...(r.ignoreEos ? [] : this.m.eos)])];
    // SGLang's route reports log-probs after temperature, as SGLang does by default; vLLM's passes rawLogprobs: true
    return { temperature: r.temperature, topP: r.topP, eosIds: eos, stop: r.stop };
  }

  checkLength(prefix: number[], maxNew: number, field: string): void {
    if (prefix.length === 0) throw new BadRequest(`${field}: an empty prompt cannot be continued`, field);
    const max = this.m.model.cfg.maxSeqLen;
    if (prefix.length + maxNew > max)
      throw new BadRequest(
        `This model's maximum context length is ${max} tokens. However, you requested ${prefix.length + maxNew} tokens (${prefix.length} in the prompt, ${maxNew} for the completion)`,
        field,
      );
  }

  /**
   * Why a row ended, and its text (decoded once) with and without the stop string it matched (SGLang trims it unless
   * no_stop_trim; vLLM keeps it with include_stop_str_in_output).
   */
  finishOf(c: Continuation, r: RowSettings): Finish {
    const text = this.m.tokenizer.decode(c.ids);
    if (c.finish === 'length') return { text, withoutStop: text, reason: 'length', matched: null };
    if (c.finish === 'eos') return { text, withoutStop: text, reason: 'eos', matched: c.ids[c.ids.length - 1] };
    const matched = r.stop.find((x) => text.includes(x)) ?? r.stop[0];
    const withoutStop = text.includes(matched) ? text.slice(0, text.lastIndexOf(matched)) : text;
    return { text, withoutStop, reason: 'stop', matched };
  }

  /**
   * Teacher-forced log-probs of positions [start, T) of each row's `ids` (position 0 has none: null), and with K > 0 the
   * K most likely tokens at each (and, with `rank`, the given token's rank), in batches of SCORE_ROWS rows: each row's
   * scored part right-padded after its left-padded head. Waits for a weight update in progress.
   */
  scoreRows(rows: { ids: number[]; start: number }[], K: number, temperature: number, rank: boolean): Promise<ScoredRow[]> {
    return this.exclusive(() => this.scoreRowsNow(rows, K, temperature, rank));
  }

  private async scoreRowsNow(rows: { ids: number[]; start: number }[], K: number, temperature: number, rank: boolean): Promise<ScoredRow[]> {
    this.checkReady();
    // a position has at most the vocabulary to list: more asked for is the whole vocabulary, and the lists are read
    // with the width the scoring returns
    K = Math.min(K, this.vocabSize);
    const out = rows.map((r) => ({
      lp: (r.start === 0 ? [null] : []) as (number | null)[],
      top: (r.start === 0 ? [[]] : []) as [number, number][][],
      rank: r.start === 0 ? [0] : ([] as number[]),
    }));
    const todo = rows.map((r, i) => ({ i, first: Math.max(1, r.start), ids: r.ids })).filter((r) => r.first < r.ids.length);
    const gone = current.getStore()?.gone;
    for (let s0 = 0; s0 < todo.length; s0 += SCORE_ROWS) {
      if (gone?.aborted) throw new ClientGone();
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

  /** Loads new weights between batches: a policy file, a checkpoint folder or a folder with model.safetensors. */
  async loadWeights(path: string, version: string | null): Promise<string> {
    if (this.guard) path = this.guard.allowedPath(path);
    const file = existsSync(path) && statSync(path).isFile() ? path : join(path, 'model.safetensors');
    if (!existsSync(file)) throw new RefusedLoad(`no model.safetensors in ${path}`);
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
        throw new RefusedLoad((e as Error).message);
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
      this.weightVersion = version ?? path;
      return file;
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
   * A PEFT folder (adapter_config.json with r, lora_alpha and target_modules; adapter_model.safetensors) on the base
   * weights, by name; loading a name again replaces its adapter.
   */
  async loadAdapter(name: string, dir: string): Promise<void> {
    if (this.guard) dir = this.guard.allowedPath(dir);
    let cfg: { r?: unknown; lora_alpha?: unknown; target_modules?: unknown };
    try {
      cfg = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    } catch (e) {
      throw new RefusedLoad(`no readable adapter_config.json in ${dir}: ${(e as Error).message}`);
    }
    const r = cfg.r;
    const targets = Array.isArray(cfg.target_modules) ? (cfg.target_modules as string[]) : null;
    if (!Number.isInteger(r) || (r as number) < 1 || !targets || !targets.every((t) => (ALL_LORA_TARGETS as string[]).includes(t)))
      throw new RefusedLoad(`adapter_config.json in ${dir}: r must be a positive integer and target_modules a list of ${ALL_LORA_TARGETS.join(', ')}`);
    const file = join(dir, 'adapter_model.safetensors');
    if (!existsSync(file)) throw new RefusedLoad(`no adapter_model.safetensors in ${dir}`);
    // PEFT saves `base_model.model.<module>.lora_A.weight`; the model's names start at <module>
    const weights = Object.fromEntries(Object.entries(readSafetensors(file).tensors).map(([k, v]) => [k.replace(/^base_model\.model\./, ''), v]));
    await this.exclusive(async () => {
      this.checkReady();
      let view: Transformer;
      try {
        view = this.m.model.adaptedView(
          { r: r as number, alpha: typeof cfg.lora_alpha === 'number' ? cfg.lora_alpha : undefined, targets: targets as LoraTarget[] },
          weights,
        );
      } catch (e) {
        throw new RefusedLoad(`the adapter in ${dir} does not fit this model: ${(e as Error).message}`);
      }
      this.adapters.get(name)?.view.dispose();
      this.adapters.set(name, { view, sampler: new LocalSampler(view, this.m.tokenizer), path: dir });
    });
  }

  async unloadAdapter(name: string): Promise<boolean> {
    return this.exclusive(async () => {
      const a = this.adapters.get(name);
      if (!a) return false;
      a.view.dispose();
      this.adapters.delete(name);
      return true;
    });
  }

  loadedAdapters(): Record<string, string> {
    return Object.fromEntries([...this.adapters].map(([n, a]) => [n, a.path]));
  }

  dispose(): void {
    this.dropAdapters();
    if (this.owns && !this.broken) this.m.model.dispose();
  }
}

/** Starts the server; `port: 0` takes a free port (tests). It listens on 127.0.0.1 unless told otherwise. */
export async function serve(o: ServeOptions): Promise<Served> {
  // the address first: loading a 0.5B model takes minutes, and a taken port would be found only after them
  await checkBind(o.host ?? '127.0.0.1', o.port ?? 30000);
  // the served model's own folder (a run's policies and checkpoints) is always a place to load from
  const own = existsSync(o.spec) && statSync(o.spec).isFile() ? dirname(resolve(o.spec)) : resolve(o.spec);
  return listen(await loadServed(o), { ...o, allowPaths: [own, ...(o.allowPaths ?? [])] }, true);
}

/**
 * A model this process already holds, served (the bench's in-process comparison): `path` names it to clients. The model
 * stays the caller's.
 */
export function serveModel(
  model: Transformer,
  tokenizer: Tokenizer,
  path: string,
  o: Pick<ServeOptions, 'host' | 'port' | 'log' | 'apiKey' | 'allowPaths'> = {},
): Promise<Served> {
  return listen({ model, tokenizer, path, eos: tokenizer.eosIds ?? [tokenizer.eosId], session: null }, o, false);
}

type ListenOptions = Pick<ServeOptions, 'host' | 'port' | 'log' | 'apiKey' | 'allowPaths'>;

async function listen(m: Model, o: ListenOptions, ownsModel: boolean): Promise<Served> {
  const log = o.log ?? (() => {});
  const name = m.path;
  const host = o.host ?? '127.0.0.1';
  const guard = new Guard({ host, apiKey: o.apiKey ?? null, allowPaths: o.allowPaths ?? [] });
  const backend = new CreditLensServer(m, name, ownsModel, guard);
  const specs = SERVER_API_SPECS as readonly ServerApiSpec[];
  // every API's routes, each with the API whose error shape its refusals take
  const routes = new Map<string, { spec: ServerApiSpec; answer: (server: ServeBackend, body: unknown) => unknown }>();
  for (const spec of specs) for (const [key, answer] of Object.entries(spec.routes)) routes.set(key, { spec, answer });
  /** requests whose client closed its connection before the answer: their work dropped */
  let aborted = 0;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const route = routes.get(`${req.method} ${path}`);
    // an unknown route is refused in the shape of the API whose paths it looks like (vLLM's /v1/), else the first's
    const spec = route?.spec ?? specs.find((s) => s.routePrefix && path.startsWith(s.routePrefix)) ?? specs[0];
    const fail = (status: number, message: string, param: string | null) => send(res, status, spec.errorBody(status, message, param));
    if (!route) {
      fail(404, `${req.method} ${path}: no such route`, null);
      return;
    }
    const refused = guard.check(req, `${req.method} ${path}`, route.spec.stateRoutes.includes(`${req.method} ${path}`));
    if (refused) {
      // the body is left unread: the connection closes with the answer
      res.setHeader('connection', 'close');
      fail(refused.status, refused.message, null);
      return;
    }
    const gone = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    current
      .run({ gone: gone.signal }, async () => {
        const body = req.method === 'POST' ? await readBody(req) : undefined;
        const answer = (await route.answer(backend, body)) ?? '';
        if (answer instanceof LazyList || holdsLazy(answer)) await sendStream(res, answer);
        else send(res, 200, answer);
      })
      .catch((e: unknown) => {
        if (e instanceof ClientGone) {
          aborted += 1;
          return;
        }
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
  await new Promise<void>((ok, bad) => {
    // taken between the check and now: the same error, after all
    server.once('error', (e: NodeJS.ErrnoException) => bad(bindError(host, o.port ?? 30000, e)));
    server.listen(o.port ?? 30000, host, () => ok());
  });
  const addr = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
  const apis = specs.map((s) => `${s.name}: ${s.generate.path}`).join('; ');
  log(`serving ${m.path} at ${url} (${apis}; as model ${JSON.stringify(name)}); ${guard.describe()}`);
  return {
    url,
    server,
    abandoned: () => aborted,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => {
          backend.dispose();
          ok();
        });
      }),
  };
}
