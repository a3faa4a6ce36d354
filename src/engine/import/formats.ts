// Readers for rollouts logged by other trainers (`credit-lens import`). Each turns its source's records into
// ImportedRecords; a record that cannot be read is reported with its file and line and skipped, and the reading goes on.
//
// The formats, with the keys each trainer documents:
//   verl   trainer.rollout_data_dir: `<dir>/<step>.jsonl`, one object per completion with `input` (the templated
//          prompt), `output`, `score`, `step`, and optionally `gts` and the reward function's extra infos.
//   trl    GRPOTrainer's completions table (log_completions): columns `step`, `prompt`, `completion`, one column per
//          reward function (or `reward`), `advantage`. Read as JSONL rows, as a W&B table file (`{"columns": [...],
//          "data": [[...]]}`) or as CSV (the W&B "export as CSV" of the table).
//   prime  prime-rl trainer.enable_token_export: `token_exports/step_<N>/rank_<R>.jsonl`, one object per sequence
//          with `token_ids`, `loss_mask` (true on completion tokens), `advantages`, `inference_logprobs`,
//          `trainer_logprobs`, `entropy`, and per token `importance_ratio`, `log_importance_ratio`, `mismatch_kl`,
//          `prob_delta`, `rewards` where the trainer computed them. These carry per-token values already.
//   jsonl  plain JSONL of `prompt`, `completion`, `reward` (optional `step`, `group`, `advantage`, `success`).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, extname, join, relative } from 'node:path';
import { UserError } from '../core/errors';
import { readCsv } from './csv';

import { IMPORT_FORMATS, type ImportFormat } from '../../protocol/import_formats';
export { IMPORT_FORMATS, type ImportFormat };

/** prime-rl's per-token columns beyond log-prob, entropy and advantage, kept as extra token columns. */
export const PRIME_EXTRA_COLUMNS = ['inference_logprobs', 'importance_ratio', 'log_importance_ratio', 'mismatch_kl', 'prob_delta'] as const;

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

export interface ImportProblem {
  file: string;
  line: number;
  reason: string;
}

export interface ReadResult {
  format: ImportFormat;
  files: string[];
  records: ImportedRecord[];
  problems: ImportProblem[];
}

const DATA_EXT = new Set(['.jsonl', '.json', '.csv']);
const MAX_FILES = 100_000;

/** Natural order: step_2 before step_10, 9.jsonl before 10.jsonl. */
function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, undefined, { numeric: true, sensitivity: 'base' });
}

const relativeTo = (root: string, f: string) => relative(root, f) || f;

/** The data files of a file or folder (recursively; hidden folders skipped), in natural order. */
export function listImportFiles(source: string): string[] {
  let st;
  try {
    st = statSync(source);
  } catch (e) {
    throw new UserError(`import: cannot read ${source}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or folder' : (e as Error).message}`);
  }
  if (st.isFile()) return [source];
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((x, y) => naturalCompare(x.name, y.name))) {
      if (e.name.startsWith('.')) continue;
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && DATA_EXT.has(extname(e.name).toLowerCase())) out.push(p);
      if (out.length > MAX_FILES) throw new UserError(`import: more than ${MAX_FILES} data files under ${source}; point at the rollout folder itself`);
    }
  };
  walk(source);
  if (!out.length) throw new UserError(`import: no .jsonl, .json or .csv files under ${source}`);
  // A prime-rl output folder also holds logs and configs: when it has token exports, those are the rollouts.
  const exports = out.filter((f) => /(^|[/\\])token_exports[/\\]/.test(relativeTo(source, f)));
  if (exports.length) return exports;
  const traces = primeTrainTraces(out.filter((f) => PRIME_TRACES.test(relativeTo(source, f))));
  if (traces.length) return traces;
  // a trainer's metrics log beside its rollouts (prime-rl's output folder, a veRL file logger's) is not rollouts
  const data = out.filter((f) => !isTrainerMetricsFile(f));
  return data.length ? data : out;
}

/** `metrics.jsonl`: where prime-rl (and a veRL file logger pointed there) logs a step's metrics, never rollouts. */
export const isTrainerMetricsFile = (f: string) => basename(f) === 'metrics.jsonl';

/**
 * prime-rl's episode files: `rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl` (its FileMonitor), one verifiers
 * Episode record per line.
 */
const PRIME_TRACES = /(^|[/\\])rollouts[/\\]step_\d+[/\\](train|eval)[/\\](all|effective)[/\\]traces\.jsonl$/;

/**
 * The training episodes of each step: the `effective` subset (the episodes the step trained on) where the step has
 * one, else `all`; eval episodes are not training steps.
 */
function primeTrainTraces(files: string[]): string[] {
  const byStep = new Map<string, string[]>();
  for (const f of files) {
    const m = PRIME_TRACES.exec(f);
    if (!m || m[2] !== 'train') continue;
    const stepDir = f.replace(/[/\\](train|eval)[/\\](all|effective)[/\\]traces\.jsonl$/, '');
    byStep.set(stepDir, [...(byStep.get(stepDir) ?? []), f]);
  }
  return [...byStep.values()].map((fs) => fs.find((f) => /[/\\]effective[/\\]/.test(f)) ?? fs[0]).sort(naturalCompare);
}

type Obj = Record<string, unknown>;
export interface Row {
  line: number;
  value: Obj;
}

/** The rows of a data file: JSONL lines, a W&B table's rows, or CSV rows (header → keys). Bad lines are problems. */
export async function readRows(path: string, shown: string, problems: ImportProblem[], o: { wholeLinesOnly?: boolean } = {}): Promise<Row[]> {
  const ext = extname(path).toLowerCase();
  if (ext === '.csv') {
    // streamed from the file: a CSV export can be larger than the text a string may hold
    const { rows, error } = await readCsv(path);
    if (error) problems.push({ file: shown, line: error.line, reason: error.reason });
    if (!rows.length) return [];
    const header = rows[0].cells;
    return rows.slice(1).map((r) => ({ line: r.line, value: Object.fromEntries(header.map((h, i) => [h, csvValue(r.cells[i] ?? '')])) }));
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    problems.push({ file: shown, line: 0, reason: `cannot read the file: ${(e as Error).message}` });
    return [];
  }
  if (ext === '.json') {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      problems.push({ file: shown, line: 1, reason: `not valid JSON: ${(e as Error).message}` });
      return [];
    }
    const t = v as Obj;
    if (t && Array.isArray(t.columns) && Array.isArray(t.data)) {
      const cols = t.columns.map(String);
      return (t.data as unknown[]).flatMap((row, i): Row[] => {
        if (!Array.isArray(row)) {
          problems.push({ file: shown, line: i + 1, reason: 'table row is not a list' });
          return [];
        }
        return [{ line: i + 1, value: Object.fromEntries(cols.map((c, k) => [c, row[k]])) }];
      });
    }
    if (Array.isArray(v)) {
      return v.flatMap((x, i): Row[] =>
        isObj(x) ? [{ line: i + 1, value: x }] : (problems.push({ file: shown, line: i + 1, reason: 'array item is not an object' }), []),
      );
    }
    problems.push({ file: shown, line: 1, reason: 'a .json file must be a W&B table ({"columns": [...], "data": [[...]]}) or an array of objects' });
    return [];
  }
  // a file still being written (import --follow): its last line counts once it ends
  if (o.wholeLinesOnly) text = text.slice(0, text.lastIndexOf('\n') + 1);
  // a file still being written (import --follow): its last line counts once it ends
  if (o.wholeLinesOnly) text = text.slice(0, text.lastIndexOf('\n') + 1);
  const rows: Row[] = [];
  let line = 0;
  for (const raw of text.split('\n')) {
    line++;
    const s = raw.trim();
    if (!s) continue;
    let v: unknown;
    try {
      v = JSON.parse(s);
    } catch (e) {
      problems.push({ file: shown, line, reason: `not valid JSON (${(e as Error).message})` });
      continue;
    }
    if (!isObj(v)) {
      problems.push({ file: shown, line, reason: 'not a JSON object' });
      continue;
    }
    rows.push({ line, value: v });
  }
  return rows;
}

function isObj(v: unknown): v is Obj {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** A CSV cell: numbers and booleans as such, the rest as text. */
function csvValue(s: string): unknown {
  if (s === '') return null;
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) return Number(s);
  if (s === 'true' || s === 'True') return true;
  if (s === 'false' || s === 'False') return false;
  return s;
}

/** The format of a source, from its paths and its first readable row. */
export function detectFormat(files: string[], first: Obj | null): ImportFormat {
  if (files.some((f) => /(^|[/\\])token_exports[/\\]/.test(f)) || (first && 'token_ids' in first && 'loss_mask' in first)) return 'prime';
  if (files.some((f) => PRIME_TRACES.test(f)) || (first && Array.isArray(first.traces) && 'task' in first)) return 'prime';
  if (first && 'input' in first && 'output' in first) return 'verl';
  if (files.some((f) => /\.(csv|json)$/i.test(f))) return 'trl';
  if (first && 'completion' in first && ('advantage' in first || !('reward' in first))) return 'trl';
  if (first && 'prompt' in first && 'completion' in first) return 'jsonl';
  const keys = first ? Object.keys(first).slice(0, 8).join(', ') : 'no readable rows';
  throw new UserError(`import: cannot tell the format (first row has ${keys}); pass --format verl|trl|prime|jsonl`);
}

/** Field errors of one row: the message names the key and what it holds. */
class RowError extends Error {}
const show = (v: unknown) => (v === undefined ? 'nothing' : (JSON.stringify(v)?.slice(0, 60) ?? String(v)));

function text(o: Obj, key: string): string {
  const v = o[key];
  if (typeof v === 'string') return v;
  // Conversational prompts and completions (TRL): a list of {role, content} messages.
  if (Array.isArray(v) && v.every((m) => isObj(m) && typeof m.content === 'string')) {
    return v.map((m) => ((m as Obj).role ? `${(m as Obj).role}: ${(m as Obj).content}` : (m as Obj).content)).join('\n');
  }
  throw new RowError(`${key}: expected text, got ${show(v)}`);
}

function num(o: Obj, key: string, required: boolean): number | null {
  const v = o[key];
  if (v === undefined || v === null) {
    if (required) throw new RowError(`${key}: missing`);
    return null;
  }
  const n = typeof v === 'boolean' ? Number(v) : typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new RowError(`${key}: expected a finite number, got ${show(v)}`);
  return n;
}

function step(o: Obj, fallback: number): number {
  const s = num(o, 'step', false) ?? fallback;
  if (!Number.isInteger(s) || s < 0) throw new RowError(`step: expected an integer >= 0, got ${show(o.step)}`);
  return s;
}

function successOf(o: Obj): boolean | null {
  for (const k of ['success', 'acc', 'correct', 'accuracy']) {
    const v = o[k];
    if (typeof v === 'boolean') return v;
    if (typeof v === 'number' && Number.isFinite(v)) return v > 0;
  }
  return null;
}

function groupOf(o: Obj): string | null {
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

const TRL_NON_REWARD = new Set(['step', 'prompt', 'completion', 'advantage', 'image', 'images', 'group', 'group_id', 'success']);

function verlRecord(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'> {
  return {
    step: step(o, fileStep(path)),
    group: groupOf(o),
    prompt: text(o, 'input'),
    completion: text(o, 'output'),
    reward: num(o, 'score', true),
    advantage: null,
    success: successOf(o),
  };
}

function trlRecord(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'> {
  let reward = num(o, 'reward', false);
  if (reward === null) {
    // One column per reward function, summed with TRL's default reward_weights of 1.
    const parts = Object.entries(o).filter(([k, v]) => !TRL_NON_REWARD.has(k) && typeof v === 'number' && Number.isFinite(v));
    if (!parts.length) throw new RowError('no reward: expected a reward column or one numeric column per reward function');
    reward = parts.reduce((a, [, v]) => a + (v as number), 0);
  }
  return {
    step: step(o, fileStep(path)),
    group: groupOf(o),
    prompt: text(o, 'prompt'),
    completion: text(o, 'completion'),
    reward,
    advantage: num(o, 'advantage', false),
    success: successOf(o),
  };
}

function jsonlRecord(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'> {
  return {
    step: step(o, fileStep(path)),
    group: groupOf(o),
    prompt: text(o, 'prompt'),
    completion: text(o, 'completion'),
    reward: num(o, 'reward', true),
    advantage: num(o, 'advantage', false),
    success: successOf(o),
  };
}

function numList(o: Obj, key: string, n: number, required: boolean, nullable = false): (number | null)[] | null {
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

/** A prime-rl token export line: one sequence, prompt and completion tokens, completion tokens where loss_mask. */
function primeRecord(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'> {
  const ids = o.token_ids;
  if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x) && x >= 0)) throw new RowError(`token_ids: expected a list of token ids, got ${show(ids)}`);
  const n = ids.length;
  const mask = o.loss_mask;
  if (!Array.isArray(mask) || mask.length !== n) throw new RowError(`loss_mask: expected ${n} booleans (one per token), got ${show(mask)}`);
  const on = mask.map((m) => m === true || m === 1);
  const first = on.indexOf(true);
  if (first < 0) throw new RowError('loss_mask: no completion token (every entry false)');
  const pick = <T>(xs: T[]) => xs.filter((_, i) => on[i]);
  const lp = numList(o, 'trainer_logprobs', n, false) ?? numList(o, 'inference_logprobs', n, true)!;
  const adv = numList(o, 'advantages', n, true)!;
  const ent = numList(o, 'entropy', n, false);
  const rewards = numList(o, 'rewards', n, false, true);
  const extra: Record<string, (number | null)[]> = {};
  for (const k of PRIME_EXTRA_COLUMNS) {
    const col = numList(o, k, n, false, true);
    if (col && col.some((x) => x !== null)) extra[k === 'inference_logprobs' ? 'inference_logprob' : k] = pick(col);
  }
  const reward = rewards ? (pick(rewards).find((x) => x !== null) ?? null) : num(o, 'reward', false);
  return {
    step: step({ step: o.export_step ?? o.step }, fileStep(path)),
    group: null,
    prompt: '',
    completion: '',
    reward,
    advantage: null,
    success: null,
    tokens: {
      promptIds: ids.slice(0, first) as number[],
      ids: pick(ids as number[]),
      logprob: pick(lp as number[]),
      entropy: ent ? pick(ent as number[]) : null,
      advantage: pick(adv as number[]),
      extra,
    },
  };
}

/** A message's text: a string, or the text parts of a content list (OpenAI's chat shape). */
function messageText(m: unknown): string {
  const c = isObj(m) ? m.content : undefined;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (isObj(p) && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

/**
 * The samples of one verifiers Episode record (prime-rl's traces.jsonl): one per branch (root-to-leaf path of a trace's
 * message nodes), as verifiers makes one training sample per branch. With token ids, the branch's tokens are the nodes'
 * spans concatenated, the completion the sampled (mask true) tokens, with the nodes' log-probs and advantages over them
 * (NaN advantages where the trainer assigned none: recomputed from the rewards); without, the text of the messages
 * before the first sampled one and of the sampled ones, to be scored. Reward: Σ score × weight of the trace's rewards.
 */
function primeEpisodeRecords(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'>[] {
  const traces = o.traces;
  if (!Array.isArray(traces)) throw new RowError(`traces: expected a list of traces, got ${show(traces)}`);
  if (!traces.length) {
    const err = Array.isArray(o.errors) && isObj(o.errors.at(-1)) ? (o.errors.at(-1) as Obj).message : undefined;
    throw new RowError(`the episode has no trace${err ? ` (${String(err).slice(0, 120)})` : ''}`);
  }
  const run = isObj(o.run) ? o.run : {};
  const work = isObj(run.work) ? run.work : {};
  const stepNo = step({ step: work.step }, fileStep(path));
  const group = isObj(o.group) && o.group.id !== undefined ? String(o.group.id) : null;
  const out: Omit<ImportedRecord, 'file' | 'line'>[] = [];
  for (const t of traces) {
    if (!isObj(t) || !Array.isArray(t.nodes)) throw new RowError(`traces[]: expected {nodes: [...]}, got ${show(t)}`);
    const nodes = t.nodes as Obj[];
    const rewards = isObj(t.rewards) ? Object.values(t.rewards) : [];
    const scored = rewards.filter(isObj);
    const reward = scored.length ? scored.reduce((a, r) => a + Number(r.score ?? 0) * Number(r.weight ?? 1), 0) : null;
    const parents = new Set(nodes.map((n) => n.parent).filter((x) => typeof x === 'number'));
    for (let leaf = 0; leaf < nodes.length; leaf++) {
      if (parents.has(leaf)) continue;
      const pathNodes: Obj[] = [];
      for (let at: unknown = leaf, hops = 0; typeof at === 'number' && hops <= nodes.length; hops++) {
        const n = nodes[at];
        if (!isObj(n)) throw new RowError(`nodes[${at}]: missing`);
        pathNodes.unshift(n);
        at = n.parent;
      }
      const ids: number[] = [];
      const mask: boolean[] = [];
      const logprob: number[] = [];
      const advantage: number[] = [];
      for (const n of pathNodes) {
        const tid = Array.isArray(n.token_ids) ? (n.token_ids as unknown[]) : [];
        const m = Array.isArray(n.mask) ? (n.mask as unknown[]) : [];
        if (tid.length && m.length !== tid.length) throw new RowError(`nodes: mask has ${m.length} entries for ${tid.length} token ids`);
        const sampled = m.filter((x) => x === true).length;
        const lp = Array.isArray(n.logprobs) ? (n.logprobs as unknown[]) : [];
        const adv = Array.isArray(n.advantages) ? (n.advantages as unknown[]) : null;
        if (sampled && lp.length !== sampled) throw new RowError(`nodes: ${lp.length} logprobs for ${sampled} sampled tokens`);
        tid.forEach((x, i) => {
          if (!Number.isInteger(x) || (x as number) < 0) throw new RowError(`nodes: token id ${show(x)} is not a token id`);
          ids.push(x as number);
          mask.push(m[i] === true);
        });
        for (let k = 0; k < sampled; k++) {
          logprob.push(Number(lp[k]));
          advantage.push(adv && typeof adv[k] === 'number' ? (adv[k] as number) : NaN);
        }
      }
      const sampledNodes = pathNodes.filter((n) => n.sampled === true);
      if (!sampledNodes.length) continue;
      const first = mask.indexOf(true);
      if (first >= 0) {
        out.push({
          step: stepNo,
          group,
          prompt: '',
          completion: '',
          reward,
          advantage: null,
          success: null,
          tokens: { promptIds: ids.slice(0, first), ids: ids.filter((_, i) => mask[i]), logprob, entropy: null, advantage, extra: {} },
        });
      } else {
        // a relayed turn without token ids: text, scored by --model or --score-server
        const firstSampled = pathNodes.indexOf(sampledNodes[0]);
        out.push({
          step: stepNo,
          group,
          prompt: pathNodes
            .slice(0, firstSampled)
            .map((n) => messageText(n.message))
            .join('\n'),
          completion: sampledNodes.map((n) => messageText(n.message)).join('\n'),
          reward,
          advantage: null,
          success: null,
        });
      }
    }
  }
  if (!out.length) throw new RowError('the episode has no sampled message');
  return out;
}

const RECORD: Record<ImportFormat, (o: Obj, path: string) => Omit<ImportedRecord, 'file' | 'line'>> = {
  verl: verlRecord,
  trl: trlRecord,
  jsonl: jsonlRecord,
  prime: primeRecord,
};

/** Read every record of `source` (file or folder) in `format` ('auto': detected). */
export async function readImport(source: string, format: ImportFormat | 'auto' = 'auto'): Promise<ReadResult> {
  const files = listImportFiles(source);
  const root = statSync(source).isDirectory() ? source : join(source, '..');
  const problems: ImportProblem[] = [];
  const records: ImportedRecord[] = [];
  let fmt: ImportFormat | null = format === 'auto' ? null : format;
  for (const f of files) {
    const shown = relative(root, f) || f;
    const rows = await readRows(f, shown, problems);
    if (!rows.length) continue; // an empty file (a step that logged nothing) tells nothing about the format
    if (!fmt) fmt = detectFormat(files, rows[0].value);
    records.push(...recordsOf(rows, fmt, f, shown, problems));
  }
  if (!fmt) fmt = detectFormat(files, null);
  return { format: fmt, files, records, problems };
}

/** A file's rows as records of `fmt`; a row that is not one is a problem naming the file and line. */
export function recordsOf(rows: Row[], fmt: ImportFormat, path: string, shown: string, problems: ImportProblem[]): ImportedRecord[] {
  const records: ImportedRecord[] = [];
  for (const r of rows) {
    try {
      const recs = fmt === 'prime' && Array.isArray(r.value.traces) ? primeEpisodeRecords(r.value, path) : [RECORD[fmt](r.value, path)];
      for (const rec of recs) records.push({ file: shown, line: r.line, ...rec });
    } catch (e) {
      if (!(e instanceof RowError)) throw e;
      problems.push({ file: shown, line: r.line, reason: e.message });
    }
  }
  return records;
}
