// Request fields as `credit-lens serve` validates them, for every API: each refusal names the field, the value and
// what is allowed, and answers 400 in the route's shape, never a crash.
import { BadRequest, type RowSettings, type ServeBackend } from './types';

/** The most continuations one request may ask for (n, or rows × n): more is a typo, and would exhaust memory. */
export const MAX_ROWS = 16_384;

/**
 * The most entries one scoring request may ask for, positions × (K + 1): each is a log-prob and an id in the answer, about
 * 30 bytes of JSON, so the largest answer is about 60 MB. Past it one request could take the server's whole heap.
 */
export const MAX_SCORED_ENTRIES = 2_000_000;

/** Refuses (413) a scoring request over MAX_SCORED_ENTRIES, saying how far over and what to do. */
export function checkScoreSize(positions: number, K: number, field: string): void {
  const entries = positions * (K + 1);
  if (entries > MAX_SCORED_ENTRIES)
    throw new BadRequest(
      `this request scores ${positions} positions with ${field} ${K}: ${entries} entries, over the ${MAX_SCORED_ENTRIES} one request may ask for; send fewer rows per request`,
      field,
      413,
    );
}

export function intField(v: unknown, name: string, min: number, dflt: number, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined || v === null) return dflt;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max)
    throw new BadRequest(`${name} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ' up'}, got ${JSON.stringify(v)}`, name);
  return v as number;
}

export function numField(v: unknown, name: string, ok: (x: number) => boolean, allowed: string, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !ok(v)) throw new BadRequest(`${name} must be ${allowed}, got ${JSON.stringify(v)}`, name);
  return v;
}

export function stringsField(v: unknown, name: string): string[] {
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  throw new BadRequest(`${name} must be a string or a list of strings`, name);
}

export function idsField(v: unknown, name: string, V: number): number[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new BadRequest(`${name} must be a list of token ids`, name);
  for (const id of v)
    if (!Number.isInteger(id) || id < 0 || id >= V) throw new BadRequest(`${name}: token id ${JSON.stringify(id)} is outside the vocabulary [0, ${V})`, name);
  return v as number[];
}

/**
 * The sampling fields both APIs share, read from one request's (or one SGLang row's) fields; the budget's and the
 * seed's names, minimum and default are each API's own.
 */
export function commonRow(server: ServeBackend, p: Record<string, unknown>, names: { maxNewTokens: [string, number, number]; seed: string }): RowSettings {
  const [budget, min, dflt] = names.maxNewTokens;
  const seed = p[names.seed];
  return {
    maxNewTokens: intField(p[budget], budget, min, dflt),
    temperature: numField(p.temperature, 'temperature', (x) => x >= 0, 'a number ≥ 0', 1),
    topP: numField(p.top_p, 'top_p', (x) => x > 0 && x <= 1, 'in (0, 1]', 1),
    stop: stringsField(p.stop, 'stop'),
    stopIds: idsField(p.stop_token_ids, 'stop_token_ids', server.vocabSize),
    ignoreEos: p.ignore_eos === true,
    seed: seed === undefined || seed === null ? null : intField(seed, names.seed, 0, 0),
  };
}

/** A request body that must be an object and must not ask for streaming (every answer is sent whole). */
export function requestObject(body: unknown): Record<string, unknown> {
  if (!(typeof body === 'object' && body !== null && !Array.isArray(body))) throw new BadRequest('the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (b.stream === true) throw new BadRequest('stream: true is not served by credit-lens serve: send stream: false (the default)', 'stream');
  return b;
}
