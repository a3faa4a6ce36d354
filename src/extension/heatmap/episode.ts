// An episode as the heatmap shows it: its step's token and episode tables (design.md#run-directory), the rows of its tokens
// in position order, their character ranges in the completion, and the document text laid out around them.
// Pure (no vscode): unit-tested on tables written with the engine's own writers.
//
// The engine's decoder guarantees the completion text is the concatenation of its tokens' texts in position order
// (Tokenizer.decodeWithOffsets); the token table stores each token's start (char_start), and runs written before it
// get the starts from that concatenation (protocol's charStarts). A completion that does not equal the concatenation
// (a table from another writer) is shown as the tokens' text instead, so that every painted range covers its token.
import type { EpisodeColumns, TokenColumnsRead } from '../../engine/rundir/arrow_tables';
import { listLoggedSteps, readRunInfo } from '../../engine/rundir/rundir';
import { basename } from 'node:path';
import { METRICS, formatValue, metricDef, quantileRange, type BuiltinMetricId, type MetricId, type Range } from './scales';
import { probeReliability } from './probe_reliability';
import { formatCount } from '../../protocol/number_format';
import { charStarts, TOKEN_COLUMNS, type TokenColumnDef } from '../../protocol/token_columns';
import type { EpisodeRef } from '../types';

export type { EpisodeRef };

/** One logged step of a run, both tables, with each episode's token rows in position order. */
export class StepTables {
  private readonly rowsOf = new Map<number, Int32Array>();
  private readonly ranges = new Map<MetricId, Range | null>();
  private readonly episodeRanges = new Map<string, Range | null>();
  private trainedMask: Uint8Array | null = null;
  private availableMetrics: MetricId[] | null = null;

  constructor(
    readonly runDir: string,
    readonly step: number,
    readonly tokens: TokenColumnsRead,
    readonly episodes: EpisodeColumns,
  ) {
    const lists = new Map<number, number[]>();
    for (let i = 0; i < tokens.episode.length; i++) {
      const e = tokens.episode[i];
      let l = lists.get(e);
      if (!l) lists.set(e, (l = []));
      l.push(i);
    }
    for (const [e, l] of lists) {
      const rows = Int32Array.from(l);
      // The engine writes rows in position order; another writer may not.
      let sorted = true;
      for (let i = 1; i < rows.length && sorted; i++) sorted = tokens.position[rows[i - 1]] <= tokens.position[rows[i]];
      if (!sorted) rows.sort((a, b) => tokens.position[a] - tokens.position[b]);
      this.rowsOf.set(e, rows);
    }
  }

  /** Token-table rows of an episode in position order (empty when the episode has no logged tokens). */
  rows(episode: number): Int32Array {
    return this.rowsOf.get(episode) ?? new Int32Array(0);
  }

  /** Index of an episode in the episode table, or −1. */
  episodeIndex(episode: number): number {
    return this.episodes.episode.indexOf(episode);
  }

  /** A metric's column; null when the run does not produce it (attribution, importance). */
  column(metric: MetricId): Float32Array | null {
    if (metric.startsWith('extra.')) return this.tokens.extra?.[metric.slice('extra.'.length)] ?? null;
    return this.tokens[metric as BuiltinMetricId];
  }

  /**
   * Whether the token of `row` trained: the strategy gave it a weight (entropy masking and the like give 0) and the loss
   * counted it (an IS weight of 0: a truncated completion under grpo.mask_truncated_completions). Tokens that did not
   * train stay out of every scale's range, so a masked span never flattens the real values. Worked out once per step:
   * every paint and range reads it.
   */
  trained(row: number): boolean {
    if (!this.trainedMask) {
      const { weight, is_weight } = this.tokens;
      this.trainedMask = Uint8Array.from(weight, (w, r) => (w !== 0 && is_weight?.[r] !== 0 ? 1 : 0));
    }
    return this.trainedMask[row] === 1;
  }

  /** The rows of `rows` (all of the step's by default) whose tokens trained. */
  trainedRows(rows?: ArrayLike<number>): Int32Array {
    const n = rows ? rows.length : this.tokens.weight.length;
    const out = new Int32Array(n);
    let k = 0;
    for (let i = 0; i < n; i++) {
      const r = rows ? rows[i] : i;
      if (this.trained(r)) out[k++] = r;
    }
    return out.subarray(0, k);
  }

  /** Value range (quantileRange) of a metric over the whole step's trained tokens (per-step normalisation), cached. */
  stepRange(metric: MetricId): Range | null {
    if (!this.ranges.has(metric)) {
      const col = this.column(metric);
      this.ranges.set(metric, col ? quantileRange(col, this.trainedRows()) : null);
    }
    return this.ranges.get(metric)!;
  }

  /**
   * Value range of a metric over one episode's trained tokens (per-episode normalisation), cached: a paint and the
   * status bar after it both ask.
   */
  episodeRange(episode: number, metric: MetricId): Range | null {
    const key = `${episode}\u0000${metric}`;
    if (!this.episodeRanges.has(key)) {
      const col = this.column(metric);
      this.episodeRanges.set(key, col ? quantileRange(col, this.trainedRows(this.rows(episode))) : null);
    }
    return this.episodeRanges.get(key)!;
  }

  /** Metrics with at least one value in this step, in METRICS order, then the extra columns in table order. */
  available(): MetricId[] {
    if (!this.availableMetrics) {
      const has = (col: Float32Array | null) => {
        if (col) for (let i = 0; i < col.length; i++) if (!Number.isNaN(col[i])) return true;
        return false;
      };
      const extras = Object.keys(this.tokens.extra ?? {}).map((k): MetricId => `extra.${k}`);
      this.availableMetrics = [...METRICS.map((m) => m.id), ...extras].filter((m) => has(this.column(m)));
    }
    return this.availableMetrics;
  }
}

/** Value range (quantileRange) of a metric over one episode's trained tokens (per-episode normalisation); null without values. */
export function valueRangeOfEpisode(tables: StepTables, episode: number, metric: MetricId): Range | null {
  return tables.episodeRange(episode, metric);
}

/**
 * Character ranges [starts[i], ends[i]) of the tokens `rows` in the concatenation of their texts, from the table's
 * char_start where it has one (charStarts).
 */
export function rebuildOffsets(
  tokens: readonly string[],
  rows: ArrayLike<number>,
  charStart: Int32Array | null = null,
): { text: string; starts: Int32Array; ends: Int32Array } {
  const starts = charStarts({ token: tokens, char_start: charStart }, rows);
  const ends = new Int32Array(rows.length);
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    parts[i] = tokens[rows[i]];
    ends[i] = starts[i] + parts[i].length;
  }
  return { text: parts.join(''), starts, ends };
}

/** Index of the token whose range holds character `offset`, or −1; zero-width tokens hold nothing. */
export function tokenAt(starts: Int32Array, ends: Int32Array, offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (ends[mid] <= offset) lo = mid + 1;
    else if (starts[mid] > offset) hi = mid - 1;
    else {
      // ends[mid] > offset >= starts[mid]; zero-width neighbours never satisfy that
      return mid;
    }
  }
  return -1;
}

/** Offsets where each line of `text` starts (after \n; a \r\n ends a line at its \n). */
export function lineStarts(text: string): number[] {
  const out = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) out.push(i + 1);
  return out;
}

/** (line, character) of an offset, by binary search over lineStarts. */
export function positionOf(starts: readonly number[], offset: number): [number, number] {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return [lo, offset - starts[lo]];
}

/** What a header line says about the episode that is compared with this one. */
export interface PairNote extends EpisodeRef {
  runName: string;
}

/** The document an episode is shown as, with everything the painter and the hover need. */
export interface HeatmapEpisode {
  ref: EpisodeRef;
  runName: string;
  strategy: string;
  tables: StepTables;
  /** index into tables.episodes */
  index: number;
  /** token-table rows in position order */
  rows: Int32Array;
  /** token ranges relative to the completion */
  starts: Int32Array;
  ends: Int32Array;
  /** false: the episode table's completion is not the concatenation of its tokens; the tokens are shown */
  textMatches: boolean;
  pair: PairNote | null;
  header: string;
  text: string;
  /** document offsets where the prompt and the completion start */
  promptOffset: number;
  completionOffset: number;
  lineStarts: number[];
}

const signed = (v: number, digits = 3) => `${v > 0 ? '+' : v < 0 ? '−' : ''}${Math.abs(v).toFixed(digits)}`;

export function runStrategy(runDir: string): string {
  return readRunInfo(runDir)?.strategy ?? '?';
}

/**
 * Lay out an episode: the header line, an empty line, then the prompt immediately followed by the completion,
 * as the model read them (the prompt ends with the task's prefill, e.g. "<think>", that the completion continues).
 */
export function buildHeatmapEpisode(
  tables: StepTables,
  ref: EpisodeRef,
  opts: { runName?: string; strategy?: string; pair?: PairNote | null } = {},
): HeatmapEpisode {
  const index = tables.episodeIndex(ref.episode);
  if (index < 0) throw new Error(`step ${ref.step} of ${ref.runDir} has no episode ${ref.episode}`);
  const ep = tables.episodes;
  const rows = tables.rows(ref.episode);
  const { text: tokenText, starts, ends } = rebuildOffsets(tables.tokens.token, rows, tables.tokens.char_start);
  // A run whose logging wrote no token rows for this episode still shows its text, unpainted.
  const textMatches = rows.length === 0 || tokenText === ep.completion[index];
  const completion = rows.length === 0 ? ep.completion[index] : tokenText;
  const runName = opts.runName ?? basename(ref.runDir);
  const strategy = opts.strategy ?? runStrategy(ref.runDir);
  const pair = opts.pair ?? null;
  const parts = [
    `${runName} · step ${ref.step} · episode ${ref.episode}`,
    // An imported run knows the total reward only (format and answer parts are NaN; the reward itself can be too).
    `${Number.isNaN(ep.reward[index]) ? 'no reward' : `reward ${ep.reward[index].toFixed(3)}`}${Number.isNaN(ep.reward_format[index]) ? '' : ` (format ${ep.reward_format[index].toFixed(3)}, answer ${ep.reward_answer[index].toFixed(3)})`} ${ep.success[index] ? '✓ solved' : '✗ not solved'}`,
    `advantage ${signed(ep.advantage[index])}`,
    `strategy ${strategy}`,
    `${formatCount(rows.length)} tokens`,
  ];
  if (pair) parts.push(`same colour scale as ${pair.runName} step ${pair.step} episode ${pair.episode}`);
  if (!textMatches) parts.push('⚠ the logged completion differs from its tokens: showing the tokens');
  const header = parts.join(' · ');
  const prompt = ep.prompt[index];
  const promptOffset = header.length + 2;
  const text = `${header}\n\n${prompt}${completion}`;
  return {
    ref,
    runName,
    strategy,
    tables,
    index,
    rows,
    starts,
    ends,
    textMatches,
    pair,
    header,
    text,
    promptOffset,
    completionOffset: promptOffset + prompt.length,
    lineStarts: lineStarts(text),
  };
}

export interface TokenFields {
  text: string;
  id: number;
  position: number;
  section: string;
  tokenType: string;
  /**
   * The hover's rows: every column protocol/token_columns.ts gives a hover label, in catalog order, then the extra
   * columns (an imported trainer's per-token values); a nullable column's row only where it has a value here.
   */
  values: { column: string; label: string; value: number; metric: MetricId | null }[];
  /** what the hover says besides the values (a probed step's token without a Monte Carlo value) */
  notes: string[];
}

const HOVER_COLUMNS = (TOKEN_COLUMNS as readonly TokenColumnDef[]).filter((c) => c.hover !== undefined && c.type === 'float32');

/** Every logged field of the i-th token of a view. */
export function tokenFields(view: HeatmapEpisode, i: number): TokenFields {
  const t = view.tables.tokens;
  const r = view.rows[i];
  const values: TokenFields['values'] = [];
  for (const c of HOVER_COLUMNS) {
    const col = t[c.name as keyof typeof t] as Float32Array | null;
    if (!col || Number.isNaN(col[r])) continue;
    values.push({ column: c.name, label: c.hover!, value: col[r], metric: c.heatmap ? (c.name as MetricId) : null });
  }
  for (const [name, col] of Object.entries(t.extra ?? {})) {
    if (!Number.isNaN(col[r])) values.push({ column: name, label: metricDef(`extra.${name}`).label, value: col[r], metric: `extra.${name}` });
  }
  const notes: string[] = [];
  const mc = t.extra?.mc_value;
  if (mc && Number.isNaN(mc[r])) notes.push('not probed: this step has Monte Carlo values, but not for this token (Probe This Episode…)');
  const delta = t.extra?.mc_delta;
  const se = t.extra?.mc_delta_se;
  if (delta && se && Number.isFinite(delta[r]) && Number.isFinite(se[r])) {
    const m = t.extra?.mc_rollouts?.[r];
    const noise = Math.abs(delta[r]) < 2 * se[r];
    notes.push(
      `δ = ${formatValue(delta[r])} ± ${formatValue(se[r])}` +
        (noise ? `: within 2 se of 0, noise at M = ${m ?? '?'} (unpainted)` : `: ${(Math.abs(delta[r]) / se[r]).toFixed(1)} se from 0`),
    );
  }
  if (mc && !Number.isNaN(mc[r])) {
    const rel = probeReliability(view.ref.runDir, view.ref.step);
    if (rel) notes.push(`this step's probe: split-half reliability ${rel.full === null ? '—' : rel.full.toFixed(2)}${rel.warning ? ` (${rel.warning})` : ''}`);
  }
  return { text: t.token[r], id: t.token_id[r], position: t.position[r], section: t.section[r], tokenType: t.token_type[r], values, notes };
}

/** Steps of a run with an episode table, ascending. */
export function episodeSteps(runDir: string): number[] {
  return listLoggedSteps(runDir, 'episodes');
}

/**
 * Where the episode of `prompt` is in another run: the logged step nearest to `step` (the earlier one on a
 * tie) that has an episode with exactly this prompt text; within it, `episode` itself if its prompt matches
 * (runs with the same seed sample the same prompts in the same order), else the one whose reward is
 * closest to `reward` (so a solved episode is compared with a solved one where there is one).
 */
export async function findSamePrompt(
  runDir: string,
  prompt: string,
  step: number,
  episode: number,
  reward: number,
  read: (runDir: string, step: number) => Promise<EpisodeColumns>,
): Promise<EpisodeRef | null> {
  const steps = episodeSteps(runDir).sort((a, b) => Math.abs(a - step) - Math.abs(b - step) || a - b);
  for (const s of steps) {
    let t: EpisodeColumns;
    try {
      t = await read(runDir, s);
    } catch {
      continue; // a step file being written, or corrupted: look further
    }
    let best = -1;
    for (let i = 0; i < t.episode.length; i++) {
      if (t.prompt[i] !== prompt) continue;
      if (t.episode[i] === episode) {
        best = i;
        break;
      }
      if (best < 0 || Math.abs(t.reward[i] - reward) < Math.abs(t.reward[best] - reward)) best = i;
    }
    if (best >= 0) return { runDir, step: s, episode: t.episode[best] };
  }
  return null;
}

export type Move = 'nextEpisode' | 'previousEpisode' | 'nextStep' | 'previousStep';

/**
 * Where a navigation move lands, or null at either end of the run. Episodes go in episode order and run on into
 * the neighbouring logged step; a step move keeps the episode number.
 */
export async function neighbour(
  ref: EpisodeRef,
  move: Move,
  steps: readonly number[],
  episodesOf: (step: number) => Promise<readonly number[]>,
): Promise<EpisodeRef | null> {
  const si = steps.indexOf(ref.step);
  if (si < 0) return null;
  if (move === 'nextStep' || move === 'previousStep') {
    const s = steps[si + (move === 'nextStep' ? 1 : -1)];
    if (s === undefined) return null;
    const eps = await episodesOf(s);
    if (!eps.length) return null;
    // The same episode number when the step has it (the same group member), else the last one there is.
    return { runDir: ref.runDir, step: s, episode: eps.includes(ref.episode) ? ref.episode : eps[eps.length - 1] };
  }
  const dir = move === 'nextEpisode' ? 1 : -1;
  const eps = await episodesOf(ref.step);
  const ei = eps.indexOf(ref.episode);
  const e = eps[ei + dir];
  if (ei >= 0 && e !== undefined) return { ...ref, episode: e };
  for (let k = si + dir; k >= 0 && k < steps.length; k += dir) {
    const other = await episodesOf(steps[k]);
    if (other.length) return { runDir: ref.runDir, step: steps[k], episode: dir > 0 ? other[0] : other[other.length - 1] };
  }
  return null;
}
