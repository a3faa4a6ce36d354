// The run config (`*.credit.yaml`): one zod schema is the source of the CLI's validation, the extension's
// diagnostics and the JSON Schema contributed to the YAML extension, so the three can never disagree.
// Keys and defaults are design.md#config (a contract). Keys added here that the contract does not list:
//   model.rope_theta      the scratch model uses rotary position embeddings; 10000 is the RoFormer/Llama base.
//   model.tie_embeddings  the scratch model shares input and output embeddings (GPT-2/nanoGPT style).
//   model.init_checkpoint start from a checkpoint's weights (share one SFT warm start across a sweep).
// This module loads a config (file → overrides → validation → resolved paths) and writes one back out; the schema is
// in base.ts and schema.ts, the leaf builders in fields.ts, did-you-mean in suggest.ts, messages and YAML positions
// in issues.ts. Everything a caller needs is exported from here.
import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { Document, isMap, isScalar, isSeq, parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { UserError } from '../core/errors';
import { CONFIG_PATHS } from './base';
import { getDotted, setDotted } from './dotted';
import { configPathIssues, resolveConfigPaths } from './paths';
import { issuesError, parseSource, validateWith } from './issues';
import { creditConfigSchema, type CreditConfig } from './schema';
import { checkConfigKey, looksSecret } from './suggest';

export { BACKENDS, STRATEGIES, KEY_LIKE_ENV, keySafeUrl, type StrategyName } from './base';
export { creditConfigSchema, gridValues, slurmDefaults, type CreditConfig, type SweepGrid, type WholeConfig } from './schema';
export { parseConfigText, validateConfig, type ConfigIssue } from './issues';
export { getDotted, setDotted } from './dotted';
export { configPathIssues } from './paths';

// ---------------------------------------------------------------------------------------------------------
// Overrides and paths.

function parseOverride(set: string): { key: string; value: unknown } | string {
  const eq = set.indexOf('=');
  if (eq <= 0) return `--set ${set}: expected key=value, e.g. --set grpo.steps=3`;
  const key = set.slice(0, eq).trim();
  const text = set.slice(eq + 1);
  try {
    return { key, value: parseYaml(text) };
  } catch (e) {
    return `--set ${set}: the value is not valid YAML (${(e as Error).message.split('\n')[0]})`;
  }
}

/**
 * Returns a copy of `raw` with each `--set key=value` applied; the value is read as YAML (`3`, `null`, `[3, 4]`,
 * `{init_std: 0.1}`). `sweep.grid.<dotted key>=[...]` sets one key of a mapping grid. Unknown keys throw a
 * UserError with a did-you-mean, all bad overrides at once.
 */
export function applyOverrides(raw: object, sets: string[]): object {
  const out = structuredClone(raw) as Record<string, unknown>;
  const errors: string[] = [];
  for (const set of sets) {
    const o = parseOverride(set);
    if (typeof o === 'string') {
      errors.push(o);
      continue;
    }
    if (o.key.startsWith('sweep.grid.')) {
      const gridKey = o.key.slice('sweep.grid.'.length);
      const bad = checkConfigKey(gridKey);
      const grid = getDotted(out, 'sweep.grid');
      if (bad) errors.push(`--set ${set}: ${bad}`);
      else if (Array.isArray(grid)) errors.push(`--set ${set}: sweep.grid is a list; replace it whole with --set sweep.grid=[...]`);
      else {
        const g = grid && typeof grid === 'object' ? (grid as Record<string, unknown>) : {};
        g[gridKey] = o.value;
        setDotted(out, 'sweep.grid', g);
      }
      continue;
    }
    // The sweep section is the whole schema's, not the base sections': `--set sweep.seeds=3` turns a run config
    // into a sweep over seeds.
    const bad = o.key === 'sweep' || o.key === 'sweep.grid' ? undefined : checkConfigKey(o.key, o.key.startsWith('sweep.') ? creditConfigSchema : undefined);
    if (bad) {
      errors.push(`--set ${set}: ${bad}`);
      continue;
    }
    setDotted(out, o.key, o.value);
  }
  if (errors.length) throw new UserError(`Invalid --set (${errors.length}):\n${errors.map((e) => `  ${e}`).join('\n')}`);
  return out;
}

/** Reads, overrides, validates and resolves a config file. Every problem throws one UserError. */
export function loadConfig(path: string, sets: string[] = []): { config: CreditConfig; configPath: string; configDir: string } {
  const configPath = resolvePath(path);
  const configDir = dirname(configPath);
  let text: string;
  try {
    text = readFileSync(configPath, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(`Cannot read config ${path}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a folder' : (e as Error).message}`);
  }
  const src = parseSource(text);
  if (src.issues.length) throw issuesError(path, src.issues);
  const raw = applyOverrides(src.raw as object, sets);
  const overridden = sets.map((s) => s.slice(0, Math.max(0, s.indexOf('='))).trim());
  const { config, issues } = validateWith(raw, { doc: src.doc, lines: src.lines, overridden });
  if (!config) throw issuesError(path, issues);
  resolveConfigPaths(config, configDir);
  const missing = configPathIssues(config);
  if (missing.length)
    throw new UserError(`Invalid config ${path} (${missing.length} problem${missing.length === 1 ? '' : 's'}):\n${missing.map((m) => `  ${m}`).join('\n')}`);
  return { config, configPath, configDir };
}

// ---------------------------------------------------------------------------------------------------------
// Output.

/** JSON Schema (draft-07) for the YAML extension's yamlValidation: descriptions, defaults, enums. */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(creditConfigSchema, { target: 'draft-07', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  schema.title = 'Credit Lens run config';
  // Completion for the grid's dotted keys, which zod models as a free-form record.
  const grid = getDotted(schema, 'properties.sweep.properties.grid') as { anyOf?: Record<string, unknown>[] } | undefined;
  const keyEnum = { enum: CONFIG_PATHS };
  for (const alt of grid?.anyOf ?? []) {
    if (alt.type === 'object') alt.propertyNames = keyEnum;
    const items = alt.items as Record<string, unknown> | undefined;
    if (alt.type === 'array' && items) items.propertyNames = keyEnum;
  }
  stripIntLimits(schema);
  return schema;
}

// zod writes ±Number.MAX_SAFE_INTEGER bounds on every integer; they only clutter hovers.
function stripIntLimits(node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach(stripIntLimits);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const o = node as Record<string, unknown>;
  if (o.maximum === Number.MAX_SAFE_INTEGER) delete o.maximum;
  if (o.minimum === Number.MIN_SAFE_INTEGER) delete o.minimum;
  Object.values(o).forEach(stripIntLimits);
}

function dropSecrets(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropSecrets);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (!looksSecret(k)) out[k] = dropSecrets(x);
  return out;
}

/**
 * The config as written to a run directory. API keys are never config values (only api_key_env, a variable
 * NAME), but a deep copy without any secret-named key guards against objects that skipped validation.
 */
export function redactConfig(cfg: CreditConfig): CreditConfig {
  return dropSecrets(cfg) as CreditConfig;
}

export function configToYaml(cfg: CreditConfig): string {
  const doc = new Document(cfg);
  // Short lists of scalars (task.numbers, grid values) read best inline, as design.md#config writes them.
  const flowSeqs = (n: unknown): void => {
    if (isSeq(n)) {
      if (n.items.every((it) => isScalar(it))) n.flow = true;
      n.items.forEach(flowSeqs);
    } else if (isMap(n)) {
      n.items.forEach((it) => flowSeqs(it.value));
    }
  };
  flowSeqs(doc.contents);
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}
