// The oracle's HTTP transport: Node's fetch with a per-attempt timeout, exponential backoff with jitter on 429, 5xx,
// timeouts, dropped connections and unreadable bodies, `retry-after` honoured, and a semaphore for `concurrency`.
// Every message it produces is built here from the status, an error code and a redacted body snippet, never from
// the request, so neither the key (a header) nor the URL can reach logs or thrown errors through it.

/** At most `n` tasks run at once; the others wait in FIFO order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly n: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.n) await new Promise<void>((r) => this.waiting.push(r));
    else this.active++;
    try {
      return await task();
    } finally {
      // Hand the slot straight to the next waiter, so `active` never drops below the number running.
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** Replaces every occurrence of the secrets, and anything shaped like a bearer token, with [redacted]. */
export function redact(text: string, secrets: string[]): string {
  let out = text;
  for (const s of secrets) if (s) out = out.split(s).join('[redacted]');
  return out.replace(/\b(Bearer)\s+[^\s"',;]+/gi, '$1 [redacted]');
}

export interface RetryPolicy {
  /** per attempt, body included */
  timeoutMs: number;
  maxRetries: number;
  /** first backoff; attempt k waits base·2^k scaled by a jitter factor in [0.5, 1) */
  backoffBaseMs: number;
  backoffCapMs: number;
}

/** A server asking for a longer pause than this is not waited for: the query fails instead of stalling the step. */
export const RETRY_AFTER_CAP_MS = 300_000;

export interface HttpRequest {
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

export type HttpResult =
  | { ok: true; json: unknown; attempts: number }
  /** fatal: a status no retry can fix (bad key, unknown model or endpoint) */
  | { ok: false; error: string; status?: number; fatal: boolean; attempts: number };

interface Attempt {
  json?: unknown;
  error?: string;
  status?: number;
  retryable: boolean;
  retryAfterMs?: number;
}

const FATAL = new Set([401, 403, 404]);

/** `retry-after` as seconds or an HTTP date (RFC 9110 §10.2.3); Gemini puts a "retryDelay": "12s" in the body. */
export function retryAfterMs(header: string | null, body: string, now = Date.now()): number | undefined {
  if (header) {
    const s = header.trim();
    if (/^\d+(\.\d+)?$/.test(s)) return Number(s) * 1000;
    const t = Date.parse(s);
    if (!Number.isNaN(t)) return Math.max(0, t - now);
  }
  const m = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(body);
  return m ? Number(m[1]) * 1000 : undefined;
}

function snippet(body: string, secrets: string[]): string {
  const s = redact(body, secrets).replace(/\s+/g, ' ').trim();
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}

function causeCode(e: unknown): string {
  const c = (e as { cause?: { code?: unknown; name?: unknown } }).cause;
  const code = c?.code ?? c?.name;
  return typeof code === 'string' && /^[A-Za-z0-9_]+$/.test(code) ? code : 'unknown cause';
}

async function attempt(req: HttpRequest, timeoutMs: number, secrets: string[]): Promise<Attempt> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  const timedOut = { error: `no complete answer within ${timeoutMs / 1000} s`, retryable: true };
  try {
    let res: Response;
    try {
      res = await fetch(req.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...req.headers },
        body: JSON.stringify(req.body),
        signal: ctl.signal,
      });
    } catch (e) {
      if (ctl.signal.aborted) return timedOut;
      // fetch's own message quotes the URL, so only the cause's code is used. No cause at all means the request
      // could not be built (e.g. user:password@ in the URL).
      if (!(e as { cause?: unknown }).cause || causeCode(e) === 'ERR_INVALID_URL') {
        return { error: 'the endpoint URL is not usable (check credit.cal.base_url)', retryable: false };
      }
      return { error: `connection failed (${causeCode(e)})`, retryable: true };
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      if (ctl.signal.aborted) return timedOut;
      return { error: `HTTP ${res.status}, connection closed while reading the body (${causeCode(e)})`, status: res.status, retryable: true };
    }
    if (!res.ok) {
      const retryable = res.status === 408 || res.status === 429 || res.status >= 500;
      return {
        error: `HTTP ${res.status}${text ? `: ${snippet(text, secrets)}` : ''}`,
        status: res.status,
        retryable,
        retryAfterMs: retryable ? retryAfterMs(res.headers.get('retry-after'), text) : undefined,
      };
    }
    try {
      return { json: JSON.parse(text), retryable: false, status: res.status };
    } catch {
      // A 200 whose JSON does not parse is a body cut short on the way (proxy, dropped connection): worth a retry.
      return { error: `HTTP ${res.status} with a body that is not valid JSON (${text.length} bytes; truncated?)`, status: res.status, retryable: true };
    }
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** POST a JSON body and parse the JSON answer, retrying transient failures per `policy`. Never throws. */
export async function postJson(req: HttpRequest, policy: RetryPolicy, secrets: string[], random: () => number = Math.random): Promise<HttpResult> {
  for (let k = 0; ; k++) {
    const a = await attempt(req, policy.timeoutMs, secrets);
    const attempts = k + 1;
    if (a.json !== undefined) return { ok: true, json: a.json, attempts };
    const error = redact(a.error ?? 'failed', secrets);
    const fatal = a.status !== undefined && FATAL.has(a.status);
    if (!a.retryable || k >= policy.maxRetries) {
      const tail = a.retryable && attempts > 1 ? ` (gave up after ${attempts} attempts)` : '';
      return { ok: false, error: error + tail, status: a.status, fatal, attempts };
    }
    if (a.retryAfterMs !== undefined && a.retryAfterMs > RETRY_AFTER_CAP_MS) {
      return { ok: false, error: `${error} (the server asks to wait ${Math.round(a.retryAfterMs / 1000)} s; giving up)`, status: a.status, fatal: false, attempts };
    }
    const backoff = Math.min(policy.backoffCapMs, policy.backoffBaseMs * 2 ** k) * (0.5 + 0.5 * random());
    await sleep(Math.max(backoff, a.retryAfterMs ?? 0));
  }
}
