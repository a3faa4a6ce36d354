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

/** Replies larger than this are refused: an oracle's span fits in a few KB, and a hostile server must not fill memory. */
export const MAX_REPLY_BYTES = 256 * 1024;

/** The body as text, read until MAX_REPLY_BYTES and no further. */
async function readCapped(res: Response): Promise<{ text: string } | { tooLarge: true }> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > MAX_REPLY_BYTES) {
    await res.body?.cancel().catch(() => {});
    return { tooLarge: true };
  }
  if (!res.body) return { text: '' };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > MAX_REPLY_BYTES) {
      await reader.cancel().catch(() => {});
      return { tooLarge: true };
    }
    chunks.push(value);
  }
  return { text: Buffer.concat(chunks).toString('utf8') };
}

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

async function attempt(req: HttpRequest, timeoutMs: number, secrets: string[], cancel?: AbortSignal): Promise<Attempt> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  const onCancel = () => ctl.abort();
  cancel?.addEventListener('abort', onCancel);
  const timedOut = { error: `no complete answer within ${timeoutMs / 1000} s`, retryable: true };
  try {
    let res: Response;
    try {
      res = await fetch(req.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...req.headers },
        body: JSON.stringify(req.body),
        signal: ctl.signal,
        // A redirect would carry the key header to wherever the server points: never follow one.
        redirect: 'manual',
      });
    } catch (e) {
      if (cancel?.aborted) return { error: 'cancelled', retryable: false };
      if (ctl.signal.aborted) return timedOut;
      // fetch's own message quotes the URL, so only the cause's code is used. No cause at all means the request
      // could not be built (e.g. user:password@ in the URL).
      if (!(e as { cause?: unknown }).cause || causeCode(e) === 'ERR_INVALID_URL') {
        return { error: 'the endpoint URL is not usable (check credit.cal.base_url)', retryable: false };
      }
      return { error: `connection failed (${causeCode(e)})`, retryable: true };
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => {});
      return {
        error: `HTTP ${res.status}: the endpoint redirects; the key is never sent on to another address (set credit.cal.base_url to the final URL)`,
        status: res.status,
        retryable: false,
      };
    }
    let text: string;
    try {
      const body = await readCapped(res);
      if ('tooLarge' in body)
        return { error: `HTTP ${res.status} with a reply over ${MAX_REPLY_BYTES / 1024} KB; refused`, status: res.status, retryable: false };
      text = body.text;
    } catch (e) {
      if (cancel?.aborted) return { error: 'cancelled', retryable: false };
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
    cancel?.removeEventListener('abort', onCancel);
  }
}

/** Resolves after `ms`, or at once when `cancel` fires (a Stop must not wait out a back-off). */
function sleep(ms: number, cancel?: AbortSignal): Promise<void> {
  return new Promise<void>((r) => {
    if (cancel?.aborted) return r();
    const done = () => {
      clearTimeout(t);
      cancel?.removeEventListener('abort', done);
      r();
    };
    const t = setTimeout(done, ms);
    cancel?.addEventListener('abort', done);
  });
}

/** POST a JSON body and parse the JSON answer, retrying transient failures per `policy`. Never throws. */
export async function postJson(
  req: HttpRequest,
  policy: RetryPolicy,
  secrets: string[],
  random: () => number = Math.random,
  cancel?: AbortSignal,
): Promise<HttpResult> {
  for (let k = 0; ; k++) {
    if (cancel?.aborted) return { ok: false, error: 'cancelled', fatal: false, attempts: k };
    const a = await attempt(req, policy.timeoutMs, secrets, cancel);
    const attempts = k + 1;
    if (a.json !== undefined) return { ok: true, json: a.json, attempts };
    const error = redact(a.error ?? 'failed', secrets);
    const fatal = a.status !== undefined && (FATAL.has(a.status) || (a.status >= 300 && a.status < 400));
    if (!a.retryable || k >= policy.maxRetries) {
      const tail = a.retryable && attempts > 1 ? ` (gave up after ${attempts} attempts)` : '';
      return { ok: false, error: error + tail, status: a.status, fatal, attempts };
    }
    if (a.retryAfterMs !== undefined && a.retryAfterMs > RETRY_AFTER_CAP_MS) {
      return {
        ok: false,
        error: `${error} (the server asks to wait ${Math.round(a.retryAfterMs / 1000)} s; giving up)`,
        status: a.status,
        fatal: false,
        attempts,
      };
    }
    const backoff = Math.min(policy.backoffCapMs, policy.backoffBaseMs * 2 ** k) * (0.5 + 0.5 * random());
    await sleep(Math.max(backoff, a.retryAfterMs ?? 0), cancel);
  }
}
