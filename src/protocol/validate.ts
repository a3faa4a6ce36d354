// Runtime checks of webview messages. A webview's messages cross a process boundary as plain JSON, and a
// webview's page can be made to post anything (a hostile run name rendered into it, a stale bundle after an
// update), so both ends check a message's shape before they act on it, instead of only casting it.
// Pure and dependency-free, like the rest of src/protocol: the extension and the webviews import it alike.
// A check is `(v) => v is T`; each protocol module builds one per message from these few pieces.

export type Check<T> = (v: unknown) => v is T;

export const isString: Check<string> = (v): v is string => typeof v === 'string';
export const isNumber: Check<number> = (v): v is number => typeof v === 'number' && Number.isFinite(v);
export const isBoolean: Check<boolean> = (v): v is boolean => typeof v === 'boolean';
export const isNull: Check<null> = (v): v is null => v === null;

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function nullable<T>(c: Check<T>): Check<T | null> {
  return (v): v is T | null => v === null || c(v);
}

export function oneOf<const T extends readonly string[]>(...values: T): Check<T[number]> {
  return (v): v is T[number] => typeof v === 'string' && values.includes(v);
}

export function arrayOf<T>(c: Check<T>): Check<T[]> {
  return (v): v is T[] => Array.isArray(v) && v.every(c);
}

/** An object with at least these fields of these types (extra fields are allowed: added fields are not breaking). */
export function shape<T>(fields: { [K in keyof T]-?: Check<T[K]> }): Check<T> {
  return (v): v is T => isRecord(v) && Object.entries(fields).every(([k, c]) => (c as Check<unknown>)(v[k]));
}

export const isEmpty: Check<Record<string, never>> = (v): v is Record<string, never> => isRecord(v);

/**
 * One check for a whole direction of a protocol: `kind` must match, `method` must be one of the table's, and
 * the params must pass that method's check. Returns the method name of a rejected message for the log.
 */
export function messageCheck<M extends { kind: string; method: string; params: unknown }>(
  kind: M['kind'],
  params: { [K in M['method']]: Check<Extract<M, { method: K }>['params']> },
): (v: unknown) => { ok: true; message: M } | { ok: false; why: string } {
  const table = params as Record<string, Check<unknown>>;
  return (v) => {
    if (!isRecord(v) || v.kind !== kind) return { ok: false, why: 'not a message of this protocol' };
    const method = v.method;
    if (typeof method !== 'string' || !Object.hasOwn(table, method)) return { ok: false, why: `unknown method ${String(method)}` };
    if (!table[method](v.params)) return { ok: false, why: `${method}: params of the wrong shape` };
    return { ok: true, message: v as M };
  };
}
