// One file although long: the index's columns and the queries over them are one structure; the queries are its methods.
// The query engine of Browse Rollouts and `credit-lens rollouts`: a run's episodes and tokens, loaded once
// as columns, then filtered (the `--where` language, query/expr.ts), searched (a regex over each completion's text,
// mapped back to the token it starts in), sorted, grouped and aggregated. No per-token objects: features are computed
// in one pass over the token columns at load, and every query is a pass over typed arrays, so a million token rows
// answer in tens of milliseconds once loaded.
import { niceStep } from '../../protocol/number_format';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import { UserError } from '../core/errors';
import {
  joinProbeColumns,
  orderTokenRows,
  readEpisodeTable,
  readProbeTable,
  readTokenTables,
  type EpisodeColumns,
  type TokenColumnsRead,
} from '../rundir/arrow_tables';
import { listLoggedSteps, stepFile } from '../rundir/rundir';
import { probeFitsTokens } from '../rundir/probe_record';
import { readRunConfig } from '../rundir/run_config';
import { compileWhere, parseWhere, type FieldKind } from './expr';
import { answerStatus, STATUSES, type AnswerStatus } from '../tasks/sections';
import type { EpisodeSummary } from '../../protocol/browse_view';
import { charStarts } from '../../protocol/token_columns';

export { STATUSES };
export type Status = AnswerStatus;

/** One episode's row as the CLI shows it: Browse Rollouts' row (protocol's EpisodeSummary) and what only the CLI prints. */
export interface EpisodeRow extends EpisodeSummary<number> {
  status: Status;
  mean_weight: number;
  /** per extra column (imported runs: mismatch_kl, …), its mean and max over the episode's tokens */
  extra: Record<string, { mean: number; max: number }>;
}

export interface SearchHit {
  step: number;
  episode: number;
  /** the token the match starts in */
  position: number;
  match: string;
  before: string;
  after: string;
}

/** A statistic of a token string's occurrences: mean and its 95 % t interval (null with fewer than 2 values). */
export interface MeanCi {
  mean: number | null;
  lo: number | null;
  hi: number | null;
  n: number;
}

export interface TokenAggregate {
  token: string;
  count: number;
  effective_advantage: MeanCi;
  abs_contribution: MeanCi;
  entropy: MeanCi;
  grad_norm: MeanCi;
  mc_delta: MeanCi;
}

/** A run's rollouts in memory: the token and episode columns of every logged step in a range, and each episode's features. */
export class RolloutIndex {
  readonly episodes: number;
  /** token rows of episode e: [start[e], start[e] + len[e]) in position order */
  readonly start: Int32Array;
  readonly len: Int32Array;
  readonly step: Int32Array;
  readonly episode: Int32Array;
  readonly prompt: Int32Array;
  readonly reward: Float32Array;
  readonly advantage: Float32Array;
  readonly status: Uint8Array;
  readonly zeroVar: Uint8Array;
  readonly meanAbsC: Float32Array;
  readonly maxEntropy: Float32Array;
  readonly meanWeight: Float32Array;
  readonly extraStats: Record<string, { mean: Float32Array; max: Float32Array }>;
  readonly completion: string[];
  readonly promptText: string[];
  readonly fields: Record<string, FieldKind>;
  private texts: string[] | null = null;
  private gists: Map<string, string> | null = null;

  constructor(
    readonly runDir: string,
    readonly tokens: TokenColumnsRead,
    eps: EpisodeColumns,
    readonly maxNewTokens: number | null,
  ) {
    const n = eps.episode.length;
    this.episodes = n;
    this.step = eps.step;
    this.episode = eps.episode;
    this.prompt = eps.prompt_idx;
    this.reward = eps.reward;
    this.advantage = eps.advantage;
    this.completion = eps.completion;
    this.promptText = eps.prompt;
    ({ start: this.start, len: this.len } = tokenSpans(tokens, eps));
    this.status = new Uint8Array(n);
    this.meanAbsC = new Float32Array(n);
    this.maxEntropy = new Float32Array(n);
    this.meanWeight = new Float32Array(n);
    const extraNames = Object.keys(tokens.extra ?? {});
    this.extraStats = Object.fromEntries(extraNames.map((x) => [x, { mean: new Float32Array(n).fill(NaN), max: new Float32Array(n).fill(NaN) }]));
    for (let i = 0; i < n; i++) {
      // What the writer recorded (the sampler knew whether it stopped at max_new_tokens); for runs of older engines and
      // imports, inferred: max_new_tokens reached without a closing </answer>.
      const text = eps.completion[i];
      const recorded = eps.status?.[i];
      const truncated = eps.truncated?.[i] ?? (this.maxNewTokens !== null && eps.length[i] >= this.maxNewTokens && !text.includes('</answer>'));
      const rec = STATUSES.indexOf(recorded as AnswerStatus);
      this.status[i] = rec >= 0 ? rec : STATUSES.indexOf(answerStatus(text, eps.success[i], truncated));
      let sc = 0;
      let sw = 0;
      let mh = -Infinity;
      const a = this.start[i];
      const b = a + this.len[i];
      for (let k = a; k < b; k++) {
        sc += Math.abs(tokens.contribution[k]);
        sw += tokens.weight[k];
        if (tokens.entropy[k] > mh) mh = tokens.entropy[k];
      }
      const m = this.len[i];
      this.meanAbsC[i] = m ? sc / m : NaN;
      this.meanWeight[i] = m ? sw / m : NaN;
      this.maxEntropy[i] = m ? mh : NaN;
      for (const x of extraNames) {
        const [mean, max] = meanMax(tokens.extra[x], a, b);
        this.extraStats[x].mean[i] = mean;
        this.extraStats[x].max[i] = max;
      }
    }
    this.zeroVar = zeroVariance(eps);
    const num = { kind: 'number' } as const;
    this.fields = {
      step: num,
      episode: num,
      prompt: num,
      reward: num,
      advantage: num,
      abs_advantage: num,
      length: num,
      mean_abs_c: num,
      max_entropy: num,
      mean_weight: num,
      status: { kind: 'string', values: STATUSES },
      success: { kind: 'bool' },
      truncated: { kind: 'bool' },
      zero_var: { kind: 'bool' },
      ...Object.fromEntries(extraNames.flatMap((x) => [`${x}_mean`, `${x}_max`].map((f) => [f, num]))),
    };
  }

  /** A field of episode row i (NaN where a number is missing). */
  get(field: string, i: number): number | string | boolean {
    switch (field) {
      case 'step':
        return this.step[i];
      case 'episode':
        return this.episode[i];
      case 'prompt':
        return this.prompt[i];
      case 'reward':
        return this.reward[i];
      case 'advantage':
        return this.advantage[i];
      case 'abs_advantage':
        return Math.abs(this.advantage[i]);
      case 'length':
        return this.len[i];
      case 'mean_abs_c':
        return this.meanAbsC[i];
      case 'max_entropy':
        return this.maxEntropy[i];
      case 'mean_weight':
        return this.meanWeight[i];
      case 'status':
        return STATUSES[this.status[i]];
      case 'success':
        return this.status[i] === 0;
      case 'truncated':
        return this.status[i] === 2;
      case 'zero_var':
        return this.zeroVar[i] === 1;
    }
    const m = /^(.+)_(mean|max)$/.exec(field);
    const x = m ? this.extraStats[m[1]] : undefined;
    if (x) return x[m![2] as 'mean' | 'max'][i];
    throw new Error(`unknown field ${field}`);
  }

  /** Episode rows matching `where` (all when empty), in table order. */
  filter(where?: string): Int32Array {
    const keep = where?.trim() ? compileWhere(parseWhere(where, this.fields), (f, i) => this.get(f, i)) : null;
    const out = new Int32Array(this.episodes);
    let k = 0;
    for (let i = 0; i < this.episodes; i++) if (!keep || keep(i)) out[k++] = i;
    return out.subarray(0, k);
  }

  /** Sort rows by a numeric field ("-reward" descending); NaN last either way. Stable. */
  sort(rows: Int32Array, by: string): Int32Array {
    const desc = by.startsWith('-');
    const field = desc ? by.slice(1) : by;
    const kind = this.fields[field];
    if (!kind || kind.kind !== 'number') {
      const numeric = Object.keys(this.fields).filter((f) => this.fields[f].kind === 'number');
      throw new UserError(`--sort: "${by}" is not a number field; sort by one of ${numeric.join(', ')} (a leading "-" sorts descending)`);
    }
    const v = Float64Array.from(rows, (i) => this.get(field, i) as number);
    const order = Array.from(rows.keys()).sort((a, b) => {
      const x = v[a];
      const y = v[b];
      if (Number.isNaN(x) || Number.isNaN(y)) return Number.isNaN(x) ? (Number.isNaN(y) ? a - b : 1) : -1;
      return (desc ? y - x : x - y) || a - b;
    });
    return Int32Array.from(order, (o) => rows[o]);
  }

  row(i: number): EpisodeRow {
    const first = this.completion[i].split('\n').find((l) => l.trim()) ?? '';
    return {
      step: this.step[i],
      episode: this.episode[i],
      prompt: this.prompt[i],
      reward: this.reward[i],
      advantage: this.advantage[i],
      length: this.len[i],
      status: STATUSES[this.status[i]],
      zero_var: this.zeroVar[i] === 1,
      mean_abs_c: this.meanAbsC[i],
      max_entropy: this.maxEntropy[i],
      mean_weight: this.meanWeight[i],
      snippet: first.length > 120 ? `${first.slice(0, 119)}…` : first,
      prompt_text: this.promptGist(i),
      extra: Object.fromEntries(Object.entries(this.extraStats).map(([x, s]) => [x, { mean: s.mean[i], max: s.max[i] }])),
    };
  }

  /** Episode i's prompt without the template the run's prompts share (promptGists; built on first use). */
  promptGist(i: number): string {
    this.gists ??= promptGists(this.promptText);
    return this.gists.get(this.promptText[i]) ?? '';
  }

  /**
   * A histogram over round bin edges (1, 2, 2.5 or 5 × 10^k wide, about `target` bins), so its axis reads 0, 0.5, 1
   * rather than 0.0137, 0.2876; integers get bins of at least 1. NaN is skipped.
   */
  niceHistogram(values: ArrayLike<number>, target = 20): { lo: number; hi: number; counts: number[] } {
    let lo = Infinity;
    let hi = -Infinity;
    let integers = true;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (Number.isNaN(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
      if (integers && !Number.isInteger(v)) integers = false;
    }
    if (lo === Infinity) return { lo: 0, hi: 0, counts: new Array<number>(target).fill(0) };
    let width = niceStep(hi > lo ? (hi - lo) / target : Math.abs(lo) / 10 || 1);
    if (integers) width = Math.max(1, Math.round(width));
    const start = Math.floor(lo / width) * width;
    // [start + k·width, start + (k + 1)·width): the maximum gets a bin of its own when it sits on an edge
    const bins = Math.max(1, Math.floor((hi - start) / width + 1e-9) + 1);
    const counts = new Array<number>(bins).fill(0);
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (Number.isNaN(v)) continue;
      counts[Math.min(bins - 1, Math.floor((v - start) / width + 1e-9))]++;
    }
    return { lo: start, hi: start + bins * width, counts };
  }

  /** The completion text of each episode as its tokens spell it (search runs over these; built on first use). */
  private completionTexts(): string[] {
    if (!this.texts) {
      const tok = this.tokens.token;
      this.texts = Array.from({ length: this.episodes }, (_, i) => {
        let s = '';
        for (let k = this.start[i]; k < this.start[i] + this.len[i]; k++) s += tok[k];
        return s;
      });
    }
    return this.texts;
  }

  /**
   * Matches of `pattern` (a regular expression, or plain text with `plain`) in the completions of `rows`, each with the
   * token it starts in and 40 characters of context either side; at most `limit` hits.
   */
  search(pattern: string, rows: Int32Array, o: { plain?: boolean; ignoreCase?: boolean; limit?: number } = {}): { hits: SearchHit[]; total: number } {
    let re: RegExp;
    try {
      re = new RegExp(o.plain ? pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : pattern, `g${o.ignoreCase ? 'i' : ''}`);
    } catch (e) {
      throw new UserError(`--search: ${JSON.stringify(pattern)} is not a regular expression: ${(e as Error).message}`);
    }
    if (re.test('')) throw new UserError(`--search: ${JSON.stringify(pattern)} matches the empty string, so it would match everywhere`);
    const limit = o.limit ?? 1000;
    const texts = this.completionTexts();
    const hits: SearchHit[] = [];
    let total = 0;
    for (const i of rows) {
      const text = texts[i];
      re.lastIndex = 0;
      let starts: Int32Array | null = null;
      for (let m = re.exec(text); m; m = re.exec(text)) {
        total++;
        if (hits.length < limit) {
          // the token the match starts in: the last whose start is at or before it
          starts ??= charStarts(
            this.tokens,
            Int32Array.from({ length: this.len[i] }, (_, k) => this.start[i] + k),
          );
          let position = 0;
          while (position + 1 < starts.length && starts[position + 1] <= m.index) position++;
          hits.push({
            step: this.step[i],
            episode: this.episode[i],
            position: Math.min(position, Math.max(0, this.len[i] - 1)),
            match: m[0],
            before: text.slice(Math.max(0, m.index - 40), m.index),
            after: text.slice(m.index + m[0].length, m.index + m[0].length + 40),
          });
        }
        if (m[0].length === 0) re.lastIndex++;
      }
    }
    return { hits, total };
  }

  /**
   * Per token string over the tokens of `rows` (and only those of a token type / section when given): count and the
   * mean of Â, |c|, entropy, grad_norm and MC δ (where probed), each with its 95 % t interval. Sorted by count, then text.
   */
  aggregateTokens(rows: Int32Array, o: { tokenType?: string; section?: string } = {}): TokenAggregate[] {
    const t = this.tokens;
    const { key, names } = this.tokenKeys();
    // per string, 16 slots: the count, then Σx, Σx² and n for Â, |c|, entropy, grad_norm and MC δ
    const S = 16;
    const acc = new Float64Array(names.length * S);
    const delta = t.extra?.mc_delta;
    const grad = t.grad_norm;
    const ea = t.effective_advantage;
    const c = t.contribution;
    const h = t.entropy;
    const add = (base: number, v: number) => {
      if (v !== v) return; // NaN: not logged here
      acc[base] += v;
      acc[base + 1] += v * v;
      acc[base + 2]++;
    };
    for (const i of rows) {
      const end = this.start[i] + this.len[i];
      for (let k = this.start[i]; k < end; k++) {
        if (o.tokenType && t.token_type[k] !== o.tokenType) continue;
        if (o.section && t.section[k] !== o.section) continue;
        const b = key[k] * S;
        acc[b]++;
        add(b + 1, ea[k]);
        add(b + 4, Math.abs(c[k]));
        add(b + 7, h[k]);
        if (grad) add(b + 10, grad[k]);
        if (delta) add(b + 13, delta[k]);
      }
    }
    const ci = (b: number): MeanCi => {
      const n = acc[b + 2];
      if (!n) return { mean: null, lo: null, hi: null, n: 0 };
      const mean = acc[b] / n;
      if (n < 2) return { mean, lo: null, hi: null, n };
      const v = Math.max(0, (acc[b + 1] - n * mean * mean) / (n - 1));
      const half = tQuantile(0.975, n - 1) * Math.sqrt(v / n);
      return { mean, lo: mean - half, hi: mean + half, n };
    };
    const out: TokenAggregate[] = [];
    names.forEach((token, id) => {
      const b = id * S;
      if (!acc[b]) return;
      out.push({
        token,
        count: acc[b],
        effective_advantage: ci(b + 1),
        abs_contribution: ci(b + 4),
        entropy: ci(b + 7),
        grad_norm: ci(b + 10),
        mc_delta: ci(b + 13),
      });
    });
    return out.sort((x, y) => y.count - x.count || (x.token < y.token ? -1 : x.token > y.token ? 1 : 0));
  }

  private keys: { key: Int32Array; names: string[] } | null = null;

  /** Each token row's string as a dense id (built once: the aggregation then indexes typed arrays). */
  private tokenKeys(): { key: Int32Array; names: string[] } {
    if (!this.keys) {
      const tok = this.tokens.token;
      const ids = new Map<string, number>();
      const names: string[] = [];
      const key = new Int32Array(tok.length);
      for (let k = 0; k < tok.length; k++) {
        let id = ids.get(tok[k]);
        if (id === undefined) {
          id = names.length;
          ids.set(tok[k], id);
          names.push(tok[k]);
        }
        key[k] = id;
      }
      this.keys = { key, names };
    }
    return this.keys;
  }

  /** Episodes of `rows` grouped by step or by prompt: count, mean reward, success rate, and (by step) the share of groups with a reward spread. */
  groupBy(
    rows: Int32Array,
    by: 'step' | 'prompt',
  ): { key: number; episodes: number; reward_mean: number; success_rate: number; effective_groups: number | null }[] {
    const acc = new Map<number, { n: number; r: number; s: number; groups: Set<string>; live: Set<string> }>();
    for (const i of rows) {
      const key = by === 'step' ? this.step[i] : this.prompt[i];
      let a = acc.get(key);
      if (!a) acc.set(key, (a = { n: 0, r: 0, s: 0, groups: new Set(), live: new Set() }));
      a.n++;
      a.r += this.reward[i];
      if (this.status[i] === 0) a.s++;
      const g = `${this.step[i]}:${this.prompt[i]}`;
      a.groups.add(g);
      if (!this.zeroVar[i]) a.live.add(g);
    }
    return [...acc.entries()]
      .sort((x, y) => x[0] - y[0])
      .map(([key, a]) => ({
        key,
        episodes: a.n,
        reward_mean: a.r / a.n,
        success_rate: a.s / a.n,
        effective_groups: by === 'step' ? a.live.size / a.groups.size : null,
      }));
  }

  /** The episodes of one prompt at one step (its group), in episode order. */
  group(step: number, prompt: number): Int32Array {
    return this.filter(`step = ${step} and prompt = ${prompt}`);
  }

  /** Bins of a value over `rows`: an episode field, or a token column (|c|, entropy) split by token type. */
  histogram(values: ArrayLike<number>, bins = 20): { lo: number; hi: number; counts: number[] } {
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (Number.isNaN(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    const counts = new Array<number>(bins).fill(0);
    if (lo === Infinity) return { lo: 0, hi: 0, counts };
    const w = hi > lo ? (hi - lo) / bins : 1;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (Number.isNaN(v)) continue;
      counts[Math.min(bins - 1, Math.floor((v - lo) / w))]++;
    }
    return { lo, hi, counts };
  }

  /** A token column's values over the tokens of `rows`, optionally of one token type. */
  tokenValues(rows: Int32Array, column: 'abs_contribution' | 'entropy', tokenType?: string): Float32Array {
    const t = this.tokens;
    let n = 0;
    for (const i of rows) n += this.len[i];
    const out = new Float32Array(n);
    let k = 0;
    for (const i of rows)
      for (let r = this.start[i]; r < this.start[i] + this.len[i]; r++) {
        if (tokenType && t.token_type[r] !== tokenType) continue;
        out[k++] = column === 'entropy' ? t.entropy[r] : Math.abs(t.contribution[r]);
      }
    return out.subarray(0, k);
  }
}

export { niceStep };

/**
 * Each distinct prompt's gist: the text without the beginning and the end every prompt of the run shares (a task's
 * template), cut at spaces and marked with …, newlines as ⏎, at most `max` characters. What a person reads in a table
 * to tell "prompt 3781" from the others. One distinct prompt: its beginning.
 */
export function promptGists(prompts: readonly string[], max = 80): Map<string, string> {
  const distinct = [...new Set(prompts)];
  let pre = 0;
  let suf = 0;
  if (distinct.length > 1) {
    const a = distinct[0];
    pre = a.length;
    suf = a.length;
    for (const b of distinct.slice(1)) {
      let i = 0;
      while (i < pre && i < b.length && a[i] === b[i]) i++;
      pre = i;
      let j = 0;
      while (j < suf && j < b.length && a[a.length - 1 - j] === b[b.length - 1 - j]) j++;
      suf = j;
    }
  }
  const shorten = (s: string) => (s.length > max ? `${s.slice(0, max - 1).trimEnd()}…` : s);
  const out = new Map<string, string>();
  for (const t of distinct) {
    // back off to the space before the first difference, and to the space after the last one
    let from = Math.min(pre, t.length);
    while (from > 0 && !/\s/.test(t[from - 1])) from--;
    let to = t.length - Math.min(suf, t.length - from);
    while (to < t.length && !/\s/.test(t[to])) to++;
    const core = t.slice(from, to).trim().replace(/\n/g, ' ⏎ ');
    out.set(t, `${from > 0 ? '…' : ''}${shorten(core)}${to < t.length && core.length <= max ? '…' : ''}`);
  }
  return out;
}

/** A run's logged steps in [fromStep, toStep], loaded into a RolloutIndex (probed steps' MC δ joined onto their tokens). */
export function loadRollouts(runDir: string, range: { fromStep?: number; toStep?: number } = {}): RolloutIndex {
  if (!existsSync(join(runDir, 'run.json')) && !existsSync(join(runDir, 'config.yaml')))
    throw new UserError(`${runDir} is not a run folder (no run.json or config.yaml)`);
  const lo = range.fromStep ?? -Infinity;
  const hi = range.toStep ?? Infinity;
  const steps = listLoggedSteps(runDir, 'episodes').filter((s) => s >= lo && s <= hi && existsSync(stepFile(runDir, 'tokens', s)));
  if (!steps.length)
    throw new UserError(
      `${runDir} has no logged steps${range.fromStep !== undefined || range.toStep !== undefined ? ' in that range' : ''} (tokens/ and episodes/ tables)`,
    );
  // one contiguous run of rows per episode, as the index's [start, start + len) ranges need
  const tokens = orderTokenRows(readTokenTables(runDir, { fromStep: steps[0], toStep: steps[steps.length - 1] }), [join(runDir, 'tokens')]);
  const parts = steps.map((s) => readEpisodeTable(stepFile(runDir, 'episodes', s)));
  const eps = concatEpisodes(parts);
  // probed steps: their mc_* columns, NaN elsewhere
  const have = new Set(listLoggedSteps(runDir, 'probes'));
  // a probe of a token table since rewritten (a restart, a resume) is not joined: its δ belong to other tokens
  const probed = steps.filter((s) => have.has(s) && probeFitsTokens(runDir, s, stepFile(runDir, 'tokens', s)));
  if (probed.length) {
    for (const s of probed) {
      const a = lowerBound(tokens.step, s);
      const b = lowerBound(tokens.step, s + 1);
      const sub = sliceTokens(tokens, a, b);
      joinProbeColumns(sub, readProbeTable(stepFile(runDir, 'probes', s)));
      for (const [name, col] of Object.entries(sub.extra)) {
        if (!name.startsWith('mc_')) continue;
        tokens.extra[name] ??= new Float32Array(tokens.step.length).fill(NaN);
        tokens.extra[name].set(col, a);
      }
    }
  }
  return new RolloutIndex(runDir, tokens, eps, readRunConfig(runDir)?.maxNewTokens ?? null);
}

function lowerBound(a: Int32Array, v: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (a[m] < v) lo = m + 1;
    else hi = m;
  }
  return lo;
}

/** Rows [a, b) of the token columns the probe join reads (episode, position) with an empty extra map. */
function sliceTokens(t: TokenColumnsRead, a: number, b: number): TokenColumnsRead {
  return { ...t, episode: t.episode.subarray(a, b), position: t.position.subarray(a, b), extra: {} } as TokenColumnsRead;
}

function concatEpisodes(parts: EpisodeColumns[]): EpisodeColumns {
  const cat = <T extends Int32Array | Float32Array>(get: (p: EpisodeColumns) => T, C: new (n: number) => T): T => {
    const n = parts.reduce((a, p) => a + get(p).length, 0);
    const out = new C(n);
    let at = 0;
    for (const p of parts) {
      out.set(get(p), at);
      at += get(p).length;
    }
    return out;
  };
  return {
    step: cat((p) => p.step, Int32Array),
    episode: cat((p) => p.episode, Int32Array),
    prompt_idx: cat((p) => p.prompt_idx, Int32Array),
    prompt: parts.flatMap((p) => p.prompt),
    completion: parts.flatMap((p) => p.completion),
    reward: cat((p) => p.reward, Float32Array),
    reward_format: cat((p) => p.reward_format, Float32Array),
    reward_answer: cat((p) => p.reward_answer, Float32Array),
    success: parts.flatMap((p) => p.success),
    advantage: cat((p) => p.advantage, Float32Array),
    length: cat((p) => p.length, Int32Array),
    oracle_span: parts.flatMap((p) => p.oracle_span),
    truncated: parts.flatMap((p) => p.truncated ?? new Array<null>(p.step.length).fill(null)),
    status: parts.flatMap((p) => p.status ?? new Array<null>(p.step.length).fill(null)),
  };
}

/**
 * Each episode's rows in the token table (its first row and its count): the writer lays each step's episodes out in
 * order, episode by episode, positions ascending. An episode without rows starts at 0 with none.
 */
function tokenSpans(tokens: TokenColumnsRead, eps: EpisodeColumns): { start: Int32Array; len: Int32Array } {
  const n = eps.episode.length;
  const key = (s: number, e: number) => `${s}:${e}`;
  const at = new Map<string, number>();
  for (let i = 0; i < n; i++) at.set(key(eps.step[i], eps.episode[i]), i);
  const start = new Int32Array(n).fill(-1);
  const len = new Int32Array(n);
  const T = tokens.step.length;
  for (let k = 0; k < T;) {
    const s = tokens.step[k];
    const e = tokens.episode[k];
    let j = k;
    while (j < T && tokens.step[j] === s && tokens.episode[j] === e) j++;
    const row = at.get(key(s, e));
    if (row !== undefined && start[row] < 0) {
      start[row] = k;
      len[row] = j - k;
    }
    k = j;
  }
  for (let i = 0; i < n; i++) if (start[i] < 0) start[i] = 0;
  return { start, len };
}

/** The mean and the max of col[a, b) over its numbers (NaN where it has none). */
function meanMax(col: ArrayLike<number>, a: number, b: number): [number, number] {
  let s = 0;
  let c = 0;
  let mx = -Infinity;
  for (let k = a; k < b; k++) {
    const v = col[k];
    if (Number.isNaN(v)) continue;
    s += v;
    c++;
    if (v > mx) mx = v;
  }
  return c ? [s / c, mx] : [NaN, NaN];
}

/** Groups are a step's consecutive episodes of one prompt; zero_var (1) where their rewards are all equal. */
function zeroVariance(eps: EpisodeColumns): Uint8Array {
  const n = eps.episode.length;
  const out = new Uint8Array(n);
  for (let i = 0; i < n;) {
    let j = i;
    while (j < n && eps.step[j] === eps.step[i] && eps.prompt_idx[j] === eps.prompt_idx[i]) j++;
    let same = true;
    for (let k = i + 1; k < j; k++) if (eps.reward[k] !== eps.reward[i]) same = false;
    for (let k = i; k < j; k++) out[k] = same ? 1 : 0;
    i = j;
  }
  return out;
}
