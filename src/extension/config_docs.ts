// What the config editor says about a key: its description, default and allowed values, from the config's own JSON
// Schema (built from the same catalogs the engine validates with), and where the cursor is in the YAML. Pure (no
// vscode): the hover, completion and quick-fix providers (config_assist.ts) call it, and unit tests drive it directly.
import { isMap, isPair, isScalar, parseDocument, type Node } from 'yaml';

interface JsonSchema {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  pattern?: string;
  properties?: Record<string, JsonSchema>;
  anyOf?: JsonSchema[];
  items?: JsonSchema;
  prefixItems?: JsonSchema[];
}

export interface KeyDoc {
  path: string;
  description: string;
  /** the default, as YAML would write it; undefined where the key has none */
  default?: string;
  /** what the value may be, in words: "one of a, b", "an integer ≥ 2", "a list of …" */
  allowed: string;
}

const show = (v: unknown): string => (v === null ? 'null' : typeof v === 'string' ? v : JSON.stringify(v));

/** The object schema inside a nullable or union schema (logging.mlflow: null or {tracking_uri, experiment}). */
function objectOf(s: JsonSchema | undefined): JsonSchema | undefined {
  if (!s) return undefined;
  if (s.properties) return s;
  return s.anyOf?.find((x) => x.properties);
}

function allowedOf(s: JsonSchema): string {
  const parts = (s.anyOf ?? [s]).map((x): string => {
    if (x.enum) return `one of ${x.enum.map(show).join(', ')}`;
    const t = Array.isArray(x.type) ? x.type.join(' or ') : x.type;
    if (t === 'null') return 'null';
    if (t === 'integer' || t === 'number') {
      const what = t === 'integer' ? 'an integer' : 'a number';
      const lo = x.minimum !== undefined ? ` ≥ ${x.minimum}` : x.exclusiveMinimum !== undefined ? ` > ${x.exclusiveMinimum}` : '';
      const hi = x.maximum !== undefined ? ` ≤ ${x.maximum}` : x.exclusiveMaximum !== undefined ? ` < ${x.exclusiveMaximum}` : '';
      return `${what}${lo}${lo && hi ? ',' : ''}${hi}`;
    }
    if (t === 'boolean') return 'true or false';
    if (t === 'string') return x.pattern ? `a string matching ${x.pattern}` : 'a string';
    if (t === 'array') return x.prefixItems ? `a list of ${x.prefixItems.length}` : `a list${x.items ? ` of ${allowedOf(x.items)}` : ''}`;
    if (t === 'object' || x.properties) return `a map of ${Object.keys(x.properties ?? {}).join(', ')}`;
    return t ?? 'any value';
  });
  return [...new Set(parts)].join(', or ');
}

export class ConfigDocs {
  constructor(private readonly root: JsonSchema) {}

  private schemaAt(path: readonly string[]): JsonSchema | undefined {
    let s: JsonSchema | undefined = this.root;
    for (const k of path) s = objectOf(s)?.properties?.[k];
    return s;
  }

  /** The key at `path`, or null where the schema has none. */
  doc(path: readonly string[]): KeyDoc | null {
    const s = this.schemaAt(path);
    if (!s || !path.length) return null;
    const isObject = !!objectOf(s) && !(s.anyOf ?? []).some((x) => x.type === 'null');
    return {
      path: path.join('.'),
      description: s.description ?? objectOf(s)?.description ?? '',
      default: s.default === undefined || (isObject && typeof s.default === 'object') ? undefined : show(s.default),
      allowed: allowedOf(s),
    };
  }

  /** The keys a mapping at `path` may hold ([] for a leaf or an unknown path). */
  children(path: readonly string[]): string[] {
    return Object.keys(objectOf(this.schemaAt(path))?.properties ?? {});
  }
}

/** The hover's text: the dotted path, what it does, its default and what is allowed. */
export function hoverMarkdown(d: KeyDoc): string {
  const lines = [`**\`${d.path}\`**`, '', d.description];
  lines.push('', `Allowed: ${d.allowed}`);
  if (d.default !== undefined) lines.push('', `Default: \`${d.default}\``);
  return lines.join('\n');
}

/**
 * The key the offset is on, as a path from the document's root (block and flow mappings alike); null off a key. A value
 * counts as its key's, so hovering `8` in `group_size: 8` explains `grpo.group_size`.
 */
export function keyPathAt(text: string, offset: number): { path: string[]; range: [number, number] } | null {
  const doc = parseDocument(text, { keepSourceTokens: false });
  const walk = (node: Node | null | undefined, path: string[]): { path: string[]; range: [number, number] } | null => {
    if (!isMap(node)) return null;
    for (const pair of node.items) {
      if (!isPair(pair) || !isScalar(pair.key) || !pair.key.range) continue;
      const key = String(pair.key.value);
      const [ks, ke] = pair.key.range;
      const value = pair.value as Node | null;
      if (offset >= ks && offset <= ke) return { path: [...path, key], range: [ks, ke] };
      if (isMap(value)) {
        const inner = walk(value, [...path, key]);
        if (inner) return inner;
      } else if (value && value.range && offset >= value.range[0] && offset <= value.range[1]) {
        return { path: [...path, key], range: [ks, ke] };
      }
    }
    return null;
  };
  return walk(doc.contents as Node, []);
}

/**
 * Where a new key typed on `line` (0-based) would go in a block-style YAML document: the path of the mapping it belongs
 * to (by indentation: the nearest line above with less indent that opens a mapping, `key:` with nothing after it), and
 * the keys that mapping already holds. A line in a flow mapping (`grpo: { … }`) or under a list has no such path: null.
 */
export function mappingAt(lines: readonly string[], line: number, column: number): { path: string[]; present: string[] } | null {
  const indentOf = (s: string) => s.length - s.trimStart().length;
  const indent = Math.min(column, indentOf(lines[line] ?? ''));
  const before = (lines[line] ?? '').slice(0, column);
  // after a colon the cursor is on a value; in braces or brackets, in a flow collection; after a dash, in a list
  if (/[{}[\]:]/.test(before) || before.trim().startsWith('-')) return null;
  const path: string[] = [];
  let want = indent;
  for (let i = line - 1; i >= 0 && want > 0; i--) {
    const s = lines[i];
    if (!s.trim() || s.trimStart().startsWith('#')) continue;
    const d = indentOf(s);
    if (d >= want) continue;
    const m = /^([A-Za-z_][\w.-]*)\s*:\s*(#.*)?$/.exec(s.trim());
    if (!m) return null;
    path.unshift(m[1]);
    want = d;
  }
  // the keys beside the cursor: same indent, in the same block
  const present: string[] = [];
  const siblings = (from: number, step: 1 | -1) => {
    for (let i = from; i >= 0 && i < lines.length; i += step) {
      const s = lines[i];
      if (!s.trim() || s.trimStart().startsWith('#')) continue;
      const d = indentOf(s);
      if (d < indent) break;
      if (d > indent) continue;
      const m = /^([A-Za-z_][\w.-]*)\s*:/.exec(s.trim());
      if (m) present.push(m[1]);
    }
  };
  siblings(line - 1, -1);
  siblings(line + 1, 1);
  return { path, present };
}

/** The key a "did you mean `x`?" diagnostic proposes, where it is a key of the same mapping (no dots); else null. */
export function suggestedKey(message: string): string | null {
  const m = /did you mean `([A-Za-z_][\w-]*)`\?/.exec(message);
  return m ? m[1] : null;
}
