// Config problems as the CLI, the extension's diagnostics and the Problems panel show them: the dotted path, the
// value found, what is allowed, and the position in the YAML file.
import { dirname, resolve as resolvePath } from 'node:path';
import { Document, isMap, isNode, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { UserError } from '../core/errors';
import { getAt } from './dotted';
import { allowedOf, schemaAt, shapeOf } from '../core/fields';
import { resolveConfigPaths } from './paths';
import { creditConfigSchema, type CreditConfig } from './schema';
import { enumHint, looksSecret, suggestFor } from './suggest';

// ---------------------------------------------------------------------------------------------------------
// Issues.

export interface ConfigIssue {
  /** Dotted path of the offending key (`grpo.group_size`, `task.numbers`); '' for the whole document. */
  path: string;
  /** Names the path, the value given and what is allowed. */
  message: string;
  value?: unknown;
  /** [start, end) character offsets of the offending YAML node (the key for an unknown key). */
  offset?: [number, number];
  /** 1-based line and column of offset[0]. */
  line?: number;
  col?: number;
}

export type Seg = string | number;

export function pathString(path: readonly Seg[]): string {
  let s = '';
  for (const seg of path) s += typeof seg === 'number' ? `[${seg}]` : s ? `.${seg}` : seg;
  return s;
}

export function fmtValue(v: unknown): string {
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** Whether a value must not be echoed: it may be a credential. */
function hideValue(path: readonly Seg[]): boolean {
  const last = path[path.length - 1];
  return typeof last === 'string' && (looksSecret(last) || last === 'api_key_env');
}

interface RawIssue {
  path: Seg[];
  message: string;
  value?: unknown;
  isKey?: boolean;
  at?: Seg[];
}

function zodToRawIssues(issues: readonly z.core.$ZodIssue[], raw: unknown): RawIssue[] {
  const out: RawIssue[] = [];
  for (const iss of issues) {
    const path = iss.path.filter((p): p is Seg => typeof p !== 'symbol');
    if (iss.code === 'unrecognized_keys') {
      for (const key of iss.keys) {
        const p = [...path, key];
        const name = pathString(p);
        let message: string;
        if (looksSecret(key)) {
          message = `${name}: secrets never go in the config; put the value in an environment variable and name ` + 'that variable in credit.cal.api_key_env';
        } else {
          const s = path.every((x) => typeof x === 'string') ? suggestFor(path as string[], key, creditConfigSchema) : undefined;
          if (s) {
            const parentPrefix = path.length ? `${path.join('.')}.` : '';
            const shown = s.path.startsWith(parentPrefix) && !s.path.includes('`') ? s.path.slice(parentPrefix.length) : s.path;
            message = `${name}: unknown key; did you mean \`${shown}\`?${s.note ? ` (${s.note})` : ''}`;
          } else {
            const parentSchema = schemaAt(creditConfigSchema, path);
            const keys = parentSchema ? Object.keys(shapeOf(parentSchema) ?? {}) : [];
            message = `${name}: unknown key; allowed keys here: ${keys.join(', ')}`;
          }
        }
        out.push({ path: p, message, value: looksSecret(key) ? undefined : getAt(raw, p), isKey: true });
      }
      continue;
    }
    if (iss.code === 'custom') {
      const params = (iss as { params?: { at?: Seg[]; expected?: string; key?: boolean } }).params ?? {};
      const value = getAt(raw, path);
      const name = pathString(path);
      const message =
        params.expected !== undefined
          ? `${name}: got ${hideValue(path) ? 'a value' : fmtValue(value)}, expected ${params.expected}`
          : params.key
            ? `${pathString(path.slice(0, -1))}: ${iss.message}`
            : `${name}: ${iss.message}`;
      out.push({ path, message, value: hideValue(path) ? undefined : value, isKey: params.key, at: params.at });
      continue;
    }
    // Errors inside a pair like task.numbers read better about the pair as a whole.
    const firstIndex = path.findIndex((p) => typeof p === 'number');
    const p = firstIndex >= 0 ? path.slice(0, firstIndex) : path;
    const value = getAt(raw, p);
    const leaf = schemaAt(creditConfigSchema, p);
    let expected = allowedOf(leaf) ?? iss.message;
    if (iss.code === 'invalid_value' && typeof value === 'string' && leaf) expected += enumHint(leaf, value);
    if (iss.code === 'invalid_type' && value === null && shapeOf(leaf ?? z.never())) {
      expected += ' (an empty section is written `{}` or left out)';
    }
    const shown = hideValue(p) ? 'a value' : fmtValue(value);
    out.push({ path: p, message: `${pathString(p) || 'the config'}: got ${shown}, expected ${expected}`, value: hideValue(p) ? undefined : value });
  }
  // One problem per node: a tuple's two bad items, or a pattern and a refinement of one string, would otherwise
  // say the same thing twice.
  const seen = new Set<string>();
  return out.filter((i) => {
    const id = `${i.isKey ? 'key' : 'value'}:${JSON.stringify(i.path)}`;
    return seen.has(id) ? false : (seen.add(id), true);
  });
}

// ---------------------------------------------------------------------------------------------------------
// YAML positions.

interface Located {
  range: [number, number];
  exact: boolean;
}

function locate(doc: Document, path: readonly Seg[], isKey: boolean): Located | undefined {
  let node: unknown = doc.contents;
  let fallback: [number, number] | undefined;
  const rangeOf = (n: unknown): [number, number] | undefined => {
    if (!isNode(n) || !n.range) return undefined;
    return n.range[1] > n.range[0] ? [n.range[0], n.range[1]] : undefined;
  };
  for (let i = 0; i < path.length; i++) {
    const seg = path[i];
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find((it) => isScalar(it.key) && String(it.key.value) === String(seg));
      if (!pair) return fallback && { range: fallback, exact: false };
      const keyRange = rangeOf(pair.key) ?? fallback;
      if (last && isKey) return keyRange && { range: keyRange, exact: true };
      fallback = keyRange;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === 'number' && seg < node.items.length) {
      fallback = rangeOf(node.items[seg]) ?? fallback;
      node = node.items[seg];
    } else {
      return fallback && { range: fallback, exact: false };
    }
  }
  const r = rangeOf(node) ?? fallback;
  return r && { range: r, exact: true };
}

export interface Source {
  doc: Document;
  lines: LineCounter;
  overridden: string[];
}

function finish(raw: RawIssue[], src: Source | undefined): ConfigIssue[] {
  const issues = raw.map((r): ConfigIssue => {
    const path = pathString(r.path);
    const issue: ConfigIssue = { path, message: r.message };
    if (r.value !== undefined) issue.value = r.value;
    if (!src) return issue;
    const dotted = r.path.filter((s) => typeof s === 'string').join('.');
    if (src.overridden.some((o) => dotted === o || dotted.startsWith(`${o}.`) || o.startsWith(`${dotted}.`))) {
      issue.message += ' (set by --set)';
      return issue;
    }
    let loc = locate(src.doc, r.path, !!r.isKey);
    if ((!loc || !loc.exact) && r.at) loc = locate(src.doc, r.at, false) ?? loc;
    if (loc) {
      issue.offset = loc.range;
      const { line, col } = src.lines.linePos(loc.range[0]);
      issue.line = line;
      issue.col = col;
    }
    return issue;
  });
  // Document order reads best in a terminal; issues without a position (from --set) go last.
  return issues
    .map((x, i) => [x, i] as const)
    .sort((a, b) => (a[0].offset?.[0] ?? Infinity) - (b[0].offset?.[0] ?? Infinity) || a[1] - b[1])
    .map((x) => x[0]);
}

/** Validates an already-parsed config object (defaults filled). Paths are returned as written. */
export function validateConfig(raw: unknown): { config: CreditConfig | null; issues: ConfigIssue[] } {
  return validateWith(raw, undefined);
}

/**
 * Defaults that depend on another key, filled in before the schema's own: GSPO's clip range (Zheng et al. 2025, 3e-4 and
 * 4e-4) when importance_sampling_level is sequence or policy_loss is gspo (GSPO-token), since a sequence ratio (the geometric mean of the token ratios)
 * stays within a few 1e-4 of 1 where a token ratio moves by tenths, and the token default 0.2 would never clip.
 */
export function dependentDefaults(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const grpo = (raw as Record<string, unknown>).grpo;
  if (!grpo || typeof grpo !== 'object' || Array.isArray(grpo)) return raw;
  const g = grpo as Record<string, unknown>;
  if (g.importance_sampling_level !== 'sequence' && g.policy_loss !== 'gspo') return raw;
  return { ...raw, grpo: { clip_eps: 3e-4, clip_eps_high: 4e-4, ...g } };
}

export function validateWith(raw: unknown, src: Source | undefined): { config: CreditConfig | null; issues: ConfigIssue[] } {
  const r = creditConfigSchema.safeParse(dependentDefaults(raw));
  if (r.success) return { config: r.data, issues: [] };
  return { config: null, issues: finish(zodToRawIssues(r.error.issues, raw), src) };
}

export function parseSource(text: string): { raw: unknown; doc: Document; lines: LineCounter; issues: ConfigIssue[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const issues = doc.errors.map((e): ConfigIssue => {
    const { line, col } = lines.linePos(e.pos[0]);
    return { path: '', message: `YAML syntax error: ${e.message}`, offset: [e.pos[0], e.pos[1]], line, col };
  });
  // A file of only comments or whitespace is a mistake (an unsaved buffer, a truncated copy), not a run of all defaults.
  if (!issues.length && (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null))) {
    issues.push({
      path: '',
      message: 'empty config: nothing to run (a config sets at least name and the parts it changes, e.g. task and grpo)',
      offset: [0, text.length],
      line: 1,
      col: 1,
    });
  }
  const raw = issues.length ? undefined : (doc.toJS() ?? {});
  if (!issues.length && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) {
    issues.push({
      path: '',
      message: `the config must be a YAML mapping of keys (name, model, grpo, ...), got ${fmtValue(raw)}`,
      offset: [0, text.length],
      line: 1,
      col: 1,
    });
  }
  return { raw, doc, lines, issues };
}

/**
 * Parses and validates config text without touching the file system. When `file` is given, relative paths in the
 * returned config are resolved against its folder, as loadConfig does.
 */
export function parseConfigText(text: string, opts: { file?: string } = {}): { config: CreditConfig | null; issues: ConfigIssue[] } {
  const src = parseSource(text);
  if (src.issues.length) return { config: null, issues: src.issues };
  const res = validateWith(src.raw, { doc: src.doc, lines: src.lines, overridden: [] });
  if (res.config && opts.file) resolveConfigPaths(res.config, dirname(resolvePath(opts.file)));
  return res;
}

export function issuesError(file: string, issues: ConfigIssue[]): UserError {
  const lines = issues.map((i) => `  ${i.line !== undefined ? `${file}:${i.line}:${i.col}: ` : ''}${i.message}`);
  const n = issues.length;
  return new UserError(`Invalid config ${file} (${n} problem${n === 1 ? '' : 's'}):\n${lines.join('\n')}`);
}
