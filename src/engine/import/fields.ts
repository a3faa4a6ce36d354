// The fields of an imported record, read with the errors that name the key and what it holds: a row whose field
// cannot be read is skipped with that reason, and the import goes on.
export type Obj = Record<string, unknown>;

export interface ImportedTokens {
  /** the prompt's token ids (the sequence before the first completion token) */
  promptIds: number[];
  /** completion token ids (loss_mask true), in order */
  ids: number[];
  logprob: number[];
  entropy: number[] | null;
  /** per-token advantage as the trainer used it */
  advantage: number[];
  /** extra per-token columns (importance_ratio, …), null where the source has no value */
  extra: Record<string, (number | null)[]>;
  /** the tokens' texts where the source decoded them (no tokenizer needed to show them) */
  texts?: string[];
  /** the prompt's text where the source decoded it */
  promptText?: string;
}

export interface ImportedRecord {
  /** where it came from, for messages: file relative to the import root, 1-based line (or row) */
  file: string;
  line: number;
  step: number;
  /** the source's group id; null: grouped by prompt within the step */
  group: string | null;
  prompt: string;
  completion: string;
  reward: number | null;
  /** the episode advantage the trainer logged (TRL), used instead of recomputing it */
  advantage: number | null;
  success: boolean | null;
  tokens?: ImportedTokens;
}

export function isObj(v: unknown): v is Obj {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** Field errors of one row: the message names the key and what it holds. */
export class RowError extends Error {}
/**
 * A row that is not whole yet rather than wrong: a prime-rl trace whose ship annotation (the step that trained it) has
 * not been written. A plain import skips it as a problem; a follow holds it until the annotation arrives.
 */
export class PendingRowError extends RowError {}
export const show = (v: unknown) => (v === undefined ? 'nothing' : (JSON.stringify(v)?.slice(0, 60) ?? String(v)));

export function text(o: Obj, key: string): string {
  const v = o[key];
  if (typeof v === 'string') return v;
  // Conversational prompts and completions (TRL): a list of {role, content} messages.
  if (Array.isArray(v) && v.every((m) => isObj(m) && typeof m.content === 'string')) {
    return v.map((m) => ((m as Obj).role ? `${(m as Obj).role}: ${(m as Obj).content}` : (m as Obj).content)).join('\n');
  }
  throw new RowError(`${key}: expected text, got ${show(v)}`);
}

export function num(o: Obj, key: string, required: boolean): number | null {
  const v = o[key];
  if (v === undefined || v === null) {
    if (required) throw new RowError(`${key}: missing`);
    return null;
  }
  const n = typeof v === 'boolean' ? Number(v) : typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new RowError(`${key}: expected a finite number, got ${show(v)}`);
  return n;
}

export function step(o: Obj, fallback: number): number {
  const s = num(o, 'step', false) ?? fallback;
  if (!Number.isInteger(s) || s < 0) throw new RowError(`step: expected an integer >= 0, got ${show(o.step)}`);
  return s;
}

export function successOf(o: Obj): boolean | null {
  for (const k of ['success', 'acc', 'correct', 'accuracy']) {
    const v = o[k];
    if (typeof v === 'boolean') return v;
    if (typeof v === 'number' && Number.isFinite(v)) return v > 0;
  }
  return null;
}

export function groupOf(o: Obj): string | null {
  for (const k of ['group', 'group_id', 'uid']) {
    const v = o[k];
    if (typeof v === 'string' || typeof v === 'number') return String(v);
  }
  return null;
}

/**
 * The step a file is named after, when its lines lack one: prime-rl's `step_<N>/` folder (whose files are
 * `rank_<R>.jsonl`: a rank, not a step), else a veRL dump's `<N>.jsonl`.
 */
export function fileStep(path: string): number {
  const m = /(?:^|[/\\])step_(\d+)(?:[/\\]|$)/.exec(path) ?? /(?:^|[/\\])(\d+)\.jsonl$/i.exec(path);
  return m ? Number(m[1]) : 0;
}

export function numList(o: Obj, key: string, n: number, required: boolean, nullable = false): (number | null)[] | null {
  const v = o[key];
  if (v === undefined || v === null) {
    if (required) throw new RowError(`${key}: missing`);
    return null;
  }
  if (!Array.isArray(v) || v.length !== n)
    throw new RowError(`${key}: expected a list of ${n} numbers (one per token), got ${Array.isArray(v) ? `${v.length} items` : show(v)}`);
  return v.map((x, i) => {
    if (x === null && nullable) return null;
    if (typeof x !== 'number' || !Number.isFinite(x)) throw new RowError(`${key}[${i}]: expected a finite number, got ${show(x)}`);
    return x;
  });
}
