// A results book: the tables of a results document, each rebuilt from committed run records by the command that made
// it. Re-training to check a table is no check at all (a float-order change moved a warm start from 9.0 to 10.5 %), so
// the parts of each run that a comparison reads are kept in the repository (`results keep`), and `results <book>`
// prints every table from them, checks that the document holds exactly those tables (`--check`), or writes them in
// (`--write`). In the document each table sits between `<!-- results: <id> -->` and `<!-- /results -->`.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { UserError } from '../core/errors';
import { evalFile, listEvalSteps } from '../rundir/eval_table';
import { readRunInfo } from '../rundir/rundir';
import { runTokenTypeContributions, TOKEN_TYPES_FILE } from './compare';

/**
 * One table: its id (the document's marker) and the command that makes it: `compare`'s arguments, or `analyze`'s
 * (probes pooled over runs: `analyze --probe <run> …`, the run folders only).
 */
export interface BookTable {
  id: string;
  compare?: string[];
  analyze?: string[];
}

export interface Book {
  /** the document the tables belong in, relative to the book */
  doc: string;
  tables: BookTable[];
  /** the folder paths in `compare` are relative to (the book's own) */
  root: string;
}

export function readBook(path: string): Book {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new UserError(`results: cannot read the book ${path}: ${(e as Error).message}`);
  }
  const o = raw as { doc?: unknown; tables?: unknown };
  if (typeof o?.doc !== 'string') throw new UserError(`results: ${path}: doc: expected the results document's path, got ${JSON.stringify(o?.doc)}`);
  if (!Array.isArray(o.tables) || !o.tables.length) throw new UserError(`results: ${path}: tables: expected a list of {id, compare}`);
  const ids = new Set<string>();
  const tables = o.tables.map((t: { id?: unknown; compare?: unknown; analyze?: unknown }, i) => {
    if (typeof t?.id !== 'string' || !/^[a-z0-9-]+$/.test(t.id))
      throw new UserError(`results: ${path}: tables[${i}].id: expected lower-case letters, digits and -, got ${JSON.stringify(t?.id)}`);
    if (ids.has(t.id)) throw new UserError(`results: ${path}: tables[${i}].id: ${t.id} is used twice`);
    ids.add(t.id);
    const args = (key: 'compare' | 'analyze') => Array.isArray(t[key]) && (t[key] as unknown[]).every((a) => typeof a === 'string');
    if (args('analyze')) return { id: t.id, analyze: t.analyze as string[] };
    if (!args('compare'))
      throw new UserError(
        `results: ${path}: tables[${i}]: expected compare (the compare command's arguments) or analyze (run folders whose probes are pooled), a list of strings`,
      );
    return { id: t.id, compare: t.compare as string[] };
  });
  return { doc: o.doc, tables, root: dirname(resolve(path)) };
}

/** A path whose last part may hold `*` (as a shell expands it), sorted; a pattern matching nothing is an error. */
export function expandPattern(root: string, pattern: string): string[] {
  if (!pattern.includes('*')) return [pattern];
  const dir = dirname(pattern);
  if (dir.includes('*')) throw new UserError(`results: ${pattern}: only the last part of a path may hold *`);
  const re = new RegExp(
    `^${basename(pattern)
      .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')}$`,
  );
  const abs = resolve(root, dir);
  const hits = existsSync(abs) ? readdirSync(abs).filter((n) => re.test(n) && statSync(join(abs, n)).isDirectory()) : [];
  if (!hits.length) throw new UserError(`results: ${pattern} matches no folder under ${abs}`);
  return hits.sort().map((n) => join(dir, n));
}

/**
 * What a comparison reads of a run, copied into `<into>/<run folder>/`: run.json, config.yaml, the eval tables at step 0
 * and at the last step, the run's mean |c| by token type (token_types.json: its token tables are megabytes), and its
 * probes' records (probes/step-N.json).
 */
export function keepRun(runDir: string, into: string): string {
  const info = readRunInfo(runDir);
  if (!info) throw new UserError(`results keep: ${runDir} is not a run directory (no readable run.json)`);
  const steps = listEvalSteps(runDir);
  if (!steps.length) throw new UserError(`results keep: ${runDir} has no eval tables (eval/step-*.arrow)`);
  const out = join(into, basename(resolve(runDir)));
  mkdirSync(join(out, 'eval'), { recursive: true });
  for (const f of ['run.json', 'config.yaml']) if (existsSync(join(runDir, f))) copyFileSync(join(runDir, f), join(out, f));
  for (const s of new Set([steps[0], steps[steps.length - 1]])) copyFileSync(evalFile(runDir, s), evalFile(out, s));
  // each probe's record (its accuracy, reliability and cancellation test), not the probe's table of values
  const probes = join(runDir, 'probes');
  const records = existsSync(probes) ? readdirSync(probes).filter((n) => /^step-\d+\.json$/.test(n)) : [];
  if (records.length) mkdirSync(join(out, 'probes'), { recursive: true });
  for (const n of records) copyFileSync(join(probes, n), join(out, 'probes', n));
  const types = runTokenTypeContributions(runDir);
  if (types) writeFileSync(join(out, TOKEN_TYPES_FILE), `${JSON.stringify({ ...types, from: 'the run\u2019s token tables, all logged steps' }, null, 1)}\n`);
  return out;
}

const OPEN = (id: string) => `<!-- results: ${id} -->`;
const CLOSE = '<!-- /results -->';

/** The document's text with each table's block replaced by `tables` (id → markdown); a missing marker is an error. */
export function writeTables(doc: string, tables: ReadonlyMap<string, string>): string {
  let out = doc;
  for (const [id, md] of tables) {
    const at = out.indexOf(OPEN(id));
    if (at < 0) throw new UserError(`results: the document has no ${OPEN(id)} … ${CLOSE} block for table ${id}`);
    const end = out.indexOf(CLOSE, at);
    if (end < 0) throw new UserError(`results: the block of table ${id} has no ${CLOSE}`);
    out = `${out.slice(0, at)}${OPEN(id)}\n${md}\n${out.slice(end)}`;
  }
  return out;
}

/** The tables whose block in the document differs from the rebuilt one (empty: the document is what the data say). */
export function staleTables(doc: string, tables: ReadonlyMap<string, string>): string[] {
  const rebuilt = writeTables(doc, tables);
  if (rebuilt === doc) return [];
  return [...tables.keys()].filter((id) => writeTables(doc, new Map([[id, tables.get(id)!]])) !== doc);
}
