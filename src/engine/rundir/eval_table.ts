// Per-instance eval tables (design.md#statistics): `<run>/eval/step-NNNNNN.arrow`, one row per eval instance, so two runs can be
// compared on the same instances (McNemar, paired bootstrap) instead of by their means alone. Columns: instance_id
// utf8, split utf8 (validation | test), success bool, reward float32, completion utf8. Written atomically like every
// table; read through the same structural checks as the token and episode tables.
import { Bool, Table, Utf8, makeVector, tableToIPC, vectorFromArray } from 'apache-arrow';
import { mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { UserError } from '../core/errors';
import { readTable } from './arrow_tables';
import { writeFileAtomic } from '../core/files';

export type EvalSplit = 'validation' | 'test';

export interface EvalRows {
  instance_id: string[];
  split: EvalSplit[];
  success: boolean[];
  reward: Float32Array;
  completion: string[];
}

export const EVAL_DIR = 'eval';

export function evalFile(runDir: string, step: number): string {
  return join(runDir, EVAL_DIR, `step-${String(step).padStart(6, '0')}.arrow`);
}

export function writeEvalTable(path: string, rows: EvalRows): void {
  const n = rows.instance_id.length;
  for (const [k, v] of Object.entries(rows)) if (v.length !== n) throw new Error(`eval table: column ${k} has ${v.length} rows, expected ${n}`);
  const table = new Table({
    instance_id: vectorFromArray(rows.instance_id, new Utf8()),
    split: vectorFromArray(rows.split, new Utf8()),
    success: vectorFromArray(rows.success, new Bool()),
    reward: makeVector(rows.reward),
    completion: vectorFromArray(rows.completion, new Utf8()),
  });
  mkdirSync(dirname(path), { recursive: true });
  writeFileAtomic(path, tableToIPC(table, 'file'));
}

export function readEvalTable(path: string): EvalRows {
  const { table: t } = readTable(path);
  const col = (name: string) => {
    const v = t.getChild(name);
    if (!v) throw new UserError(`${path} has no column ${name} (design.md#statistics requires it)`);
    return v;
  };
  const strings = (name: string) => Array.from(col(name) as Iterable<unknown>, (x) => (x == null ? '' : String(x)));
  const split = strings('split');
  for (const s of new Set(split))
    if (s !== 'validation' && s !== 'test') throw new UserError(`${path}: split ${JSON.stringify(s)}; expected validation or test`);
  return {
    instance_id: strings('instance_id'),
    split: split as EvalSplit[],
    success: Array.from(col('success') as Iterable<unknown>, (x) => x === true),
    reward: Float32Array.from(col('reward') as Iterable<number | null>, (x) => (x == null ? NaN : Number(x))),
    completion: strings('completion'),
  };
}

/** Steps with an eval table, ascending. */
export function listEvalSteps(runDir: string): number[] {
  let names: string[];
  try {
    names = readdirSync(join(runDir, EVAL_DIR));
  } catch {
    return [];
  }
  return names
    .map((n) => /^step-(\d+)\.arrow$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}
