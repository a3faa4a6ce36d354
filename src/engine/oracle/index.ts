// The CAL error-span oracle (seed doc 003): given a wrong completion (and a right one from its group, when there is one),
// name the span where it goes wrong, as character offsets in the wrong completion. Providers: `rule` (offline),
// `openai` (any OpenAI-compatible server) and `gemini`. Failures are outcomes, not exceptions, so a run goes on
// without the span; only what the user must fix (a missing key variable, a rejected key, an unknown model) throws.
import { UserError } from '../core/errors';
import type { RewardKind } from '../tasks/countdown';
import type { Task } from '../core/types';
import { cacheKey, OracleCache } from './cache';
import { postJson, redact, Semaphore, type HttpRequest } from './http';
import { locateSpan, type CharSpan } from './locate';
import { buildOraclePrompt, parseErrorSpan, type OracleQuery } from './prompt';
import { geminiReply, geminiRequest, openaiReply, openaiRequest } from './providers';
import { ruleErrorSpan } from './rule';

/** What the oracle reads of `credit.cal` (its schema is the cal entry of credit/catalog.ts, which checks every value). */
export interface CalConfig {
  readonly provider: 'rule' | 'openai' | 'gemini';
  readonly model: string | null;
  readonly base_url: string | null;
  readonly api_key_env: string | null;
  readonly timeout_s: number;
  readonly max_retries: number;
  readonly concurrency: number;
  readonly cache: boolean;
}
export type { OracleQuery } from './prompt';
export type { CharSpan } from './locate';

export interface OracleOutcome {
  /** offsets in `query.incorrect`; null when the oracle named no usable span */
  span: CharSpan | null;
  /** why there is no span: 'span not found', 'malformed reply', 'no span named', 'request failed: …', … */
  failure?: string;
  /** answered from the disk cache (or by an identical query earlier in the same call) without a request */
  cached: boolean;
  /** HTTP requests sent for this query, retries included */
  requests: number;
}

export interface Oracle {
  readonly provider: CalConfig['provider'];
  /** `cancel` (a Stop) ends pending requests and back-off waits at once; their queries fail as 'cancelled' */
  ask(queries: OracleQuery[], cancel?: AbortSignal): Promise<OracleOutcome[]>;
}

export interface OracleOptions {
  cal: CalConfig;
  task: Task['name'];
  /** which answer block the reward reads (rule oracle) */
  reward: RewardKind;
  /** null: no disk cache */
  cacheDir: string | null;
  /** first retry's backoff; tests shorten it */
  backoffBaseMs?: number;
}

export const BACKOFF_BASE_MS = 500;
export const BACKOFF_CAP_MS = 30_000;

/** The key, read from the environment at call time and never stored. */
export function readApiKey(variable: string | null, provider: string): string {
  if (!variable) throw new UserError(`credit.cal.api_key_env: required for provider ${provider} (the NAME of the environment variable holding the key)`);
  const key = process.env[variable];
  if (!key || !key.trim()) {
    throw new UserError(
      `credit.cal.api_key_env: the environment variable ${variable} is not set (or empty); the ${provider} oracle reads its API key from it`,
      `export ${variable}=... in the shell that starts the engine (or VS Code)`,
    );
  }
  return key.trim();
}

function ruleOracle(o: OracleOptions): Oracle {
  if (o.task !== 'countdown' && o.task !== 'arithmetic') {
    throw new UserError(
      `credit.cal.provider: rule checks arithmetic steps, so it works for the countdown and arithmetic tasks, not ${o.task}`,
      'use provider openai or gemini for a jsonl task',
    );
  }
  return {
    provider: 'rule',
    ask: async (queries) =>
      queries.map((q) => {
        const span = ruleErrorSpan(q.incorrect, o.reward);
        return span ? { span, cached: false, requests: 0 } : { span: null, failure: 'no wrong step and no answer', cached: false, requests: 0 };
      }),
  };
}

function remoteOracle(o: OracleOptions): Oracle {
  const { cal } = o;
  const provider = cal.provider as 'openai' | 'gemini';
  if (!cal.model) throw new UserError(`credit.cal.model: required for provider ${provider}`);
  if (provider === 'openai' && !cal.base_url) throw new UserError('credit.cal.base_url: required for provider openai');
  const model = cal.model;
  const cache = o.cacheDir ? new OracleCache(o.cacheDir) : null;
  const policy = {
    timeoutMs: cal.timeout_s * 1000,
    maxRetries: cal.max_retries,
    backoffBaseMs: o.backoffBaseMs ?? BACKOFF_BASE_MS,
    backoffCapMs: BACKOFF_CAP_MS,
  };

  return {
    provider,
    async ask(queries, cancel) {
      const key = readApiKey(cal.api_key_env, provider);
      const secrets = [key];
      const sem = new Semaphore(cal.concurrency);
      // Identical prompts in one call (a group's identical wrong completions) share one request.
      const inFlight = new Map<string, Promise<{ reply: string | null; failure?: string; requests: number }>>();

      const fetchReply = async (prompt: ReturnType<typeof buildOraclePrompt>) => {
        const req: HttpRequest = provider === 'openai' ? openaiRequest(cal.base_url!, model, key, prompt) : geminiRequest(cal.base_url, model, key, prompt);
        // A query keeps its slot through its retries' backoff, so a rate-limited server never sees more than
        // `concurrency` clients from us.
        const r = await sem.run(() => postJson(req, policy, secrets, Math.random, cancel));
        if (!r.ok) {
          if (r.fatal) {
            throw new UserError(
              `credit.cal: the ${provider} oracle refused the request: ${r.error}`,
              r.status === 404
                ? `check credit.cal.model (${model}) and credit.cal.base_url`
                : `check the key in $${cal.api_key_env} and its access to model ${model}`,
            );
          }
          return { reply: null, failure: `request failed: ${r.error}`, requests: r.attempts };
        }
        const text = provider === 'openai' ? openaiReply(r.json) : geminiReply(r.json);
        if (text === null) return { reply: null, failure: 'reply without text', requests: r.attempts };
        return { reply: redact(text, secrets), requests: r.attempts };
      };

      return Promise.all(
        queries.map(async (q): Promise<OracleOutcome> => {
          const prompt = buildOraclePrompt(q);
          const k = cacheKey(provider, cal.base_url, model, prompt);
          let reply = cache?.get(k) ?? null;
          let cached = reply !== null;
          let requests = 0;
          let fresh = false;
          if (reply === null) {
            let pending = cache ? inFlight.get(k) : undefined;
            if (pending) cached = true;
            else {
              pending = fetchReply(prompt);
              inFlight.set(k, pending);
            }
            const r = await pending;
            if (!cached) {
              requests = r.requests;
              fresh = true;
            }
            if (r.reply === null) return { span: null, failure: r.failure, cached, requests };
            reply = r.reply;
          }
          const parsed = parseErrorSpan(reply);
          if (parsed.span === null) return { span: null, failure: parsed.reason, cached, requests };
          // Only replies that parsed are kept: a malformed one is asked again next time, not replayed forever.
          if (fresh) cache?.put(k, { provider, model, prompt, reply, created: new Date().toISOString() });
          const span = locateSpan(q.incorrect, parsed.span);
          return span ? { span, cached, requests } : { span: null, failure: 'span not found', cached, requests };
        }),
      );
    },
  };
}

export function createOracle(o: OracleOptions): Oracle {
  return o.cal.provider === 'rule' ? ruleOracle(o) : remoteOracle(o);
}
