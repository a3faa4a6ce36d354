// Leaf builders of the config schema and the helpers that walk it by path. Each builder registers the sentence an
// error message uses for "what is allowed", so a wrong value reads `grpo.group_size: got 1, expected an integer ≥ 2`
// rather than zod's generic text. No tfjs, no file system: the extension and the strategy catalog import this.
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------------------
// Leaf builders. Each registers the sentence that an error message uses for "what is allowed", so a wrong
// value reads `grpo.group_size: got 1, expected an integer ≥ 2` rather than zod's generic text.

export const allowedText = new WeakMap<object, string>();

export function allow<T extends z.ZodType>(schema: T, text: string): T {
  allowedText.set(schema, text);
  return schema;
}

export function int(min: number, description: string, max?: number) {
  const s = max === undefined ? z.int().min(min) : z.int().min(min).max(max);
  return allow(s.describe(description), max === undefined ? `an integer ≥ ${min}` : `an integer from ${min} to ${max}`);
}

export interface NumRange {
  gt?: number;
  gte?: number;
  lte?: number;
}

export function num(range: NumRange, description: string) {
  let s = z.number();
  const parts: string[] = [];
  if (range.gt !== undefined) {
    s = s.gt(range.gt);
    parts.push(`> ${range.gt}`);
  }
  if (range.gte !== undefined) {
    s = s.gte(range.gte);
    parts.push(`≥ ${range.gte}`);
  }
  if (range.lte !== undefined) {
    s = s.lte(range.lte);
    parts.push(`≤ ${range.lte}`);
  }
  return allow(s.describe(description), parts.length ? `a number ${parts.join(' and ')}` : 'a number');
}

export function oneOf<const T extends readonly [string, ...string[]]>(values: T, description: string) {
  return allow(z.enum(values).describe(description), `one of: ${values.join(', ')}`);
}

export function bool(description: string) {
  return allow(z.boolean().describe(description), 'true or false');
}

export function pathOrNull(description: string) {
  return allow(z.string().min(1).nullable().describe(description), "a path (relative paths resolve against the config file's folder) or null");
}

export function strOrNull(description: string) {
  return allow(z.string().min(1).nullable().describe(description), 'a non-empty string or null');
}

export function section<T extends z.core.$ZodLooseShape>(shape: T, description: string) {
  return allow(z.strictObject(shape).describe(description), `a mapping with keys: ${Object.keys(shape).join(', ')}`);
}

// ---------------------------------------------------------------------------------------------------------
// Walking the schema by path (for messages, did-you-mean, overrides and sweep keys).

export interface Def {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  items?: z.ZodType[];
  element?: z.ZodType;
}

export function defOf(s: z.ZodType): Def {
  return (s as unknown as { _zod: { def: Def } })._zod.def;
}

const WRAPPERS = new Set(['default', 'prefault', 'optional', 'nullable', 'readonly', 'catch', 'nonoptional']);

/** The schema and its wrappers, outermost first, ending at the core type. */
export function unwrapChain(s: z.ZodType): z.ZodType[] {
  const chain = [s];
  for (;;) {
    const d = defOf(chain[chain.length - 1]);
    if (WRAPPERS.has(d.type) && d.innerType) chain.push(d.innerType);
    else if (d.type === 'pipe' && d.in) chain.push(d.in);
    else return chain;
  }
}

export function core(s: z.ZodType): z.ZodType {
  const c = unwrapChain(s);
  return c[c.length - 1];
}

export function shapeOf(s: z.ZodType): Record<string, z.ZodType> | undefined {
  const d = defOf(core(s));
  return d.type === 'object' ? d.shape : undefined;
}

export function schemaAt(root: z.ZodType, path: readonly (string | number)[]): z.ZodType | undefined {
  let s: z.ZodType | undefined = root;
  for (const seg of path) {
    if (!s) return undefined;
    const d = defOf(core(s));
    if (d.type === 'object' && typeof seg === 'string') s = Object.hasOwn(d.shape!, seg) ? d.shape![seg] : undefined;
    else if (d.type === 'tuple' && typeof seg === 'number') s = d.items![seg];
    else if (d.type === 'array' && typeof seg === 'number') s = d.element;
    else return undefined;
  }
  return s;
}

export function allowedOf(s: z.ZodType | undefined): string | undefined {
  if (!s) return undefined;
  for (const x of unwrapChain(s)) {
    const t = allowedText.get(x);
    if (t) return t;
  }
  return undefined;
}

/** Every dotted path of the config proper (sections and leaves; not `sweep`). */
export function collectPaths(s: z.ZodType, prefix: string, out: string[]): string[] {
  const shape = shapeOf(s);
  if (shape) {
    for (const [k, v] of Object.entries(shape)) {
      const p = prefix ? `${prefix}.${k}` : k;
      out.push(p);
      collectPaths(v, p, out);
    }
  }
  return out;
}
