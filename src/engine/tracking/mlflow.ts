// An MLflow tracking server as a second home for a run's metrics (logging.mlflow), over its REST API with plain fetch:
// the npm clients are not worth a dependency, and one logs every request body. Nothing here may stop or slow training:
// calls go through one background queue, bounded, retried with backoff; metrics.jsonl stays the run's record.
// The calls and limits: https://mlflow.org/docs/latest/api_reference/rest-api.html (runs/log-batch: at most 1,000
// metrics, 100 params and 1,000 entities in all, and 1 MB per request).

export interface MlflowSettings {
  tracking_uri: string;
  experiment: string;
}

/** Where a run's MLflow twin lives, kept in run.json so a resume logs to the same MLflow run (no secrets in it). */
export interface MlflowRunRef {
  tracking_uri: string;
  experiment_id: string;
  run_id: string;
}

export type MlflowStatus = 'FINISHED' | 'FAILED' | 'KILLED';

export interface MlflowMetric {
  key: string;
  value: number;
  timestamp: number;
  step: number;
}

const LOG_BATCH_LIMITS = { metrics: 1000, params: 100, entities: 1000, bytes: 1_000_000 };
/** MLflow's longest param value (6,000 characters since MLflow 2.x; a longer one is refused with a 400) */
const MAX_PARAM_VALUE = 6000;
const MAX_PARAM_KEY = 250;
/** metrics held while the server does not answer; past it the oldest go (metrics.jsonl keeps them all) */
const QUEUE_BOUND = 100_000;

export interface MlflowOptions {
  runName: string;
  /** the run directory, recorded as a tag */
  runDir: string;
  /** the MLflow run this run logged to before (a resume): logging goes on there */
  existing?: MlflowRunRef | null;
  /** a resume that abandoned logged steps: a new MLflow run, tagged as this one's child and where it resumed from */
  parent?: (MlflowRunRef & { resumed_from: string }) | null;
  /** the config, flattened with dotted keys; sent once, when the MLflow run is created */
  params: Record<string, string>;
  log: (level: 'info' | 'warn', message: string) => void;
  /** called once the MLflow run is known (created or resumed), to record it in run.json */
  onRun?: (ref: MlflowRunRef) => void;
  /** the environment holding MLFLOW_TRACKING_TOKEN / _USERNAME / _PASSWORD (process.env) */
  env?: NodeJS.ProcessEnv;
  /** backoff between retries, first and largest (ms) */
  backoffMs?: [number, number];
  /** one request's limit (ms) */
  requestTimeoutMs?: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** a 429, a 5xx or no answer at all (refused, dropped, timed out): worth another try */
const retryable = (e: unknown) => !(e instanceof HttpError) || e.status === 429 || e.status >= 500;

type Op = { kind: 'metrics'; metrics: MlflowMetric[] } | { kind: 'artifact'; name: string; body: string } | { kind: 'end'; status: MlflowStatus };

/** Flattens a config object into MLflow params: dotted keys, scalars as text, lists as JSON, cut to MLflow's limits. */
export function flattenParams(obj: unknown, prefix = '', out: Record<string, string> = {}): Record<string, string> {
  if (obj !== null && typeof obj === 'object' && !Array.isArray(obj)) {
    for (const [k, v] of Object.entries(obj)) flattenParams(v, prefix ? `${prefix}.${k}` : k, out);
    return out;
  }
  if (!prefix) return out;
  const text = typeof obj === 'string' ? obj : JSON.stringify(obj ?? null);
  out[prefix.slice(0, MAX_PARAM_KEY)] = text.length > MAX_PARAM_VALUE ? text.slice(0, MAX_PARAM_VALUE - 1) + '…' : text;
  return out;
}

/**
 * Splits metrics and params into log-batch bodies within the limits (params first, in batches of their own), each with
 * the number of metrics it carries.
 */
export function logBatches(runId: string, metrics: MlflowMetric[], params: { key: string; value: string }[] = []): { body: string; metrics: number }[] {
  const out: { body: string; metrics: number }[] = [];
  for (let i = 0; i < params.length; i += LOG_BATCH_LIMITS.params)
    out.push({ body: JSON.stringify({ run_id: runId, params: params.slice(i, i + LOG_BATCH_LIMITS.params) }), metrics: 0 });
  let cur: MlflowMetric[] = [];
  let bytes = 0;
  const flush = () => {
    if (cur.length) out.push({ body: JSON.stringify({ run_id: runId, metrics: cur }), metrics: cur.length });
    cur = [];
    bytes = 0;
  };
  for (const m of metrics) {
    const size = JSON.stringify(m).length + 1;
    if (cur.length >= LOG_BATCH_LIMITS.metrics || bytes + size > LOG_BATCH_LIMITS.bytes - 200) flush();
    cur.push(m);
    bytes += size;
  }
  flush();
  return out;
}

/** a backoff does not keep the process alive (end() waits, with timers that do) */
const sleep = (ms: number, keepAlive = false) =>
  new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    if (!keepAlive) t.unref();
  });

export class MlflowTracker {
  private ref: MlflowRunRef | null;
  private artifactUri: string | null = null;
  private readonly queue: Op[] = [];
  private queuedMetrics = 0;
  private dropped = 0;
  private worker: Promise<void> | null = null;
  private inFlight: Op | null = null;
  /** params of a new MLflow run not sent yet */
  private paramsLeft: { key: string; value: string }[] = [];
  private warned = false;
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly backoff: [number, number];
  private readonly timeoutMs: number;
  /** set by end(): the worker gives up its retries */
  private closing = false;
  /** whether the server has answered anything (an error included) */
  private answered = false;

  constructor(
    readonly settings: MlflowSettings,
    private readonly o: MlflowOptions,
  ) {
    this.base = settings.tracking_uri.replace(/\/+$/, '');
    this.ref = o.existing && o.existing.tracking_uri === settings.tracking_uri ? o.existing : null;
    const env = o.env ?? process.env;
    this.headers = { 'content-type': 'application/json' };
    if (env.MLFLOW_TRACKING_TOKEN) this.headers.authorization = `Bearer ${env.MLFLOW_TRACKING_TOKEN}`;
    else if (env.MLFLOW_TRACKING_USERNAME)
      this.headers.authorization = `Basic ${Buffer.from(`${env.MLFLOW_TRACKING_USERNAME}:${env.MLFLOW_TRACKING_PASSWORD ?? ''}`).toString('base64')}`;
    this.backoff = o.backoffMs ?? [500, 30_000];
    this.timeoutMs = o.requestTimeoutMs ?? 30_000;
  }

  /** metrics waiting for the server */
  get pending(): number {
    return this.queuedMetrics;
  }

  logMetrics(metrics: MlflowMetric[]): void {
    if (!metrics.length) return;
    this.queue.push({ kind: 'metrics', metrics });
    this.queuedMetrics += metrics.length;
    // over the bound, the oldest metrics go first: the latest are what a person watching the run wants to see
    while (this.queuedMetrics > QUEUE_BOUND) {
      // never from the request in flight: it removes what it sent as it goes
      const i = this.queue.findIndex((op) => op.kind === 'metrics' && op !== this.inFlight);
      if (i < 0) break;
      const op = this.queue[i] as Extract<Op, { kind: 'metrics' }>;
      const cut = Math.min(op.metrics.length, this.queuedMetrics - QUEUE_BOUND);
      op.metrics.splice(0, cut);
      if (!op.metrics.length) this.queue.splice(i, 1);
      this.queuedMetrics -= cut;
      this.dropped += cut;
    }
    this.kick();
  }

  logArtifact(name: string, body: string): void {
    this.queue.push({ kind: 'artifact', name, body });
    this.kick();
  }

  /**
   * Sets the run's final status after what is queued, and waits up to `waitMs` for the queue to empty. What has not gone
   * by then is given up, with a warning: the run's own files hold it.
   */
  async end(status: MlflowStatus, waitMs?: number): Promise<void> {
    this.queue.push({ kind: 'end', status });
    this.kick();
    // a server that never answered gets a short wait: the run's end is not held up for it
    const deadline = Date.now() + (waitMs ?? (this.answered ? 10_000 : 2_000));
    while ((this.queue.length || this.worker) && Date.now() < deadline) await sleep(20, true);
    this.closing = true;
    if (this.queue.length)
      this.o.log(
        'warn',
        `MLflow at ${this.base}: ${this.queuedMetrics} metrics and the run's status were not sent before the run ended; metrics.jsonl holds them`,
      );
    if (this.dropped)
      this.o.log('warn', `MLflow at ${this.base}: ${this.dropped} metrics were dropped while the server did not answer; metrics.jsonl holds them`);
  }

  private kick(): void {
    if (this.worker || this.closing) return;
    this.worker = this.drain().finally(() => {
      this.worker = null;
      if (this.queue.length && !this.closing) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length && !this.closing) {
      const op = (this.inFlight = this.queue[0]);
      // a refused request (a 4xx other than 429) is dropped, so one bad value cannot hold up the rest
      await this.attempt(() => this.send(op));
      this.inFlight = null;
      this.queue.shift();
      if (op.kind === 'metrics') {
        this.queuedMetrics -= op.metrics.length;
        op.metrics.length = 0;
      }
    }
  }

  /** Runs `f` until it succeeds, is refused for good (false, warned) or the tracker closes. */
  private async attempt(f: () => Promise<void>): Promise<boolean> {
    let wait = this.backoff[0];
    for (;;) {
      try {
        await f();
        return true;
      } catch (e) {
        if (!retryable(e)) {
          this.o.log('warn', `MLflow at ${this.base} refused a request: ${(e as Error).message}`);
          return false;
        }
        if (!this.warned) {
          this.warned = true;
          this.o.log(
            'warn',
            `MLflow at ${this.base} is not answering (${(e as Error).message}); its metrics queue and are retried, and training goes on (metrics.jsonl stays the record)`,
          );
        }
        if (this.closing) return false;
        await sleep(wait);
        wait = Math.min(this.backoff[1], wait * 2);
      }
    }
  }

  private async send(op: Op): Promise<void> {
    const ref = await this.ensureRun();
    await this.sendParams(ref.run_id);
    if (op.kind === 'metrics') {
      // each batch leaves the queue once sent, so a retry after a later one failed does not send it twice
      for (const b of logBatches(ref.run_id, op.metrics)) {
        await this.call('POST', 'runs/log-batch', b.body);
        op.metrics.splice(0, b.metrics);
        this.queuedMetrics -= b.metrics;
      }
    } else if (op.kind === 'artifact') {
      await this.putArtifact(op.name, op.body);
    } else {
      await this.call('POST', 'runs/update', JSON.stringify({ run_id: ref.run_id, status: op.status, end_time: Date.now() }));
    }
  }

  /** The MLflow run: the one run.json names (set RUNNING again), else a new one in the experiment, created if missing. */
  private async ensureRun(): Promise<MlflowRunRef> {
    if (this.ref) {
      if (this.artifactUri === null) {
        const got = (await this.call('GET', `runs/get?run_id=${encodeURIComponent(this.ref.run_id)}`)) as { run?: { info?: { artifact_uri?: string } } };
        this.artifactUri = got.run?.info?.artifact_uri ?? '';
        await this.call('POST', 'runs/update', JSON.stringify({ run_id: this.ref.run_id, status: 'RUNNING' }));
        this.o.onRun?.(this.ref);
      }
      return this.ref;
    }
    const experimentId = await this.experimentId();
    const created = (await this.call(
      'POST',
      'runs/create',
      JSON.stringify({
        experiment_id: experimentId,
        run_name: this.o.runName,
        start_time: Date.now(),
        tags: [
          { key: 'mlflow.runName', value: this.o.runName },
          { key: 'mlflow.source.name', value: 'credit-lens' },
          { key: 'credit_lens.run_dir', value: this.o.runDir },
          ...(this.o.parent
            ? [
                { key: 'mlflow.parentRunId', value: this.o.parent.run_id },
                { key: 'credit_lens.resumed_from', value: this.o.parent.resumed_from },
              ]
            : []),
        ],
      }),
    )) as { run?: { info?: { run_id?: string; run_uuid?: string; artifact_uri?: string } } };
    const runId = created.run?.info?.run_id ?? created.run?.info?.run_uuid;
    if (!runId) throw new HttpError(502, 'BAD_RESPONSE', `runs/create answered without a run id`);
    this.ref = { tracking_uri: this.settings.tracking_uri, experiment_id: experimentId, run_id: runId };
    this.artifactUri = created.run?.info?.artifact_uri ?? '';
    this.o.onRun?.(this.ref);
    this.o.log('info', `MLflow: logging to run ${runId} of experiment ${this.settings.experiment} at ${this.base}`);
    this.paramsLeft = Object.entries(this.o.params).map(([key, value]) => ({ key, value }));
    return this.ref;
  }

  /**
   * The params, once, in batches of their own (a refused one must not take metrics down with it), each leaving the list
   * once sent, so a retry after a failure sends the rest.
   */
  private async sendParams(runId: string): Promise<void> {
    while (this.paramsLeft.length) {
      const batch = this.paramsLeft.slice(0, LOG_BATCH_LIMITS.params);
      try {
        await this.call('POST', 'runs/log-batch', logBatches(runId, [], batch)[0].body);
      } catch (e) {
        if (retryable(e)) throw e;
        this.o.log('warn', `MLflow at ${this.base} refused the run's params: ${(e as Error).message}`);
      }
      this.paramsLeft.splice(0, batch.length);
    }
  }

  private async experimentId(): Promise<string> {
    const byName = async () =>
      (
        (await this.call('GET', `experiments/get-by-name?experiment_name=${encodeURIComponent(this.settings.experiment)}`)) as {
          experiment: { experiment_id: string };
        }
      ).experiment.experiment_id;
    try {
      return await byName();
    } catch (e) {
      if (!(e instanceof HttpError && e.code === 'RESOURCE_DOES_NOT_EXIST')) throw e;
    }
    try {
      return ((await this.call('POST', 'experiments/create', JSON.stringify({ name: this.settings.experiment }))) as { experiment_id: string }).experiment_id;
    } catch (e) {
      // another run created it meanwhile
      if (e instanceof HttpError && e.code === 'RESOURCE_ALREADY_EXISTS') return byName();
      throw e;
    }
  }

  /** An artifact, where the server proxies artifacts (artifact_uri mlflow-artifacts:/…); elsewhere it is skipped, once said. */
  private async putArtifact(name: string, body: string): Promise<void> {
    const uri = this.artifactUri ?? '';
    if (!uri.startsWith('mlflow-artifacts:')) {
      this.o.log('info', `MLflow: ${name} not uploaded: the server does not proxy artifacts (artifact_uri ${uri || 'unknown'})`);
      return;
    }
    const path = uri.replace(/^mlflow-artifacts:(\/\/[^/]*)?/, '').replace(/^\/+/, '');
    const url = `${this.base}/api/2.0/mlflow-artifacts/artifacts/${path.split('/').map(encodeURIComponent).join('/')}/${encodeURIComponent(name)}`;
    await this.request('PUT', url, body);
  }

  private call(method: 'GET' | 'POST', endpoint: string, body?: string): Promise<unknown> {
    return this.request(method, `${this.base}/api/2.0/mlflow/${endpoint}`, body);
  }

  private async request(method: string, url: string, body?: string): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(url, { method, headers: this.headers, body, signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new Error(`${method} ${url.replace(this.base, '')}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
    }
    this.answered = true;
    const text = await res.text().catch(() => '');
    if (!res.ok) {
      let code = '';
      let message = text.slice(0, 300);
      try {
        const j = JSON.parse(text) as { error_code?: string; message?: string };
        code = j.error_code ?? '';
        message = j.message ?? message;
      } catch {
        /* not MLflow's JSON error: the text as it came */
      }
      throw new HttpError(res.status, code, `${method} ${url.replace(this.base, '')}: HTTP ${res.status}${code ? ` ${code}` : ''}: ${message}`);
    }
    if (!text) return {};
    try {
      return JSON.parse(text);
    } catch {
      // an artifact PUT may answer with an empty or non-JSON body
      return {};
    }
  }
}
