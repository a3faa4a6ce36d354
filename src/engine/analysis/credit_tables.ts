// One file although long: every table is a pass over the same columns with the same token classes, computed together.
// Seed doc 002's tables over a run's token columns (which filler/reasoning |contribution| statistics, by position,
// reward sign, token type and section), in a few linear passes over typed arrays with no per-row objects.
import type { Section, TokenType } from '../../protocol';
import type { CreditAnalysis, PositionTStats, SectionWeightStats, TokenTypeStats, TopToken, TopTokenLists } from '../../protocol/analysis';
import { type TokenColumnsRead } from '../rundir/arrow_tables';
import { UserError } from '../core/errors';
import { REASONING_TOKEN_RE, tokenType } from '../tasks/sections';

const REL_BINS = 10;
const TYPE_BINS = 5;
const SECTIONS: Section[] = ['think', 'answer', 'other'];
const TYPES: TokenType[] = ['filler', 'reasoning'];

// ---- small numeric helpers ----

/** A mean from its sum and count; null for no rows (the report's JSON writes null, never a 0 that looks measured). */
export const meanOfSum = (sum: number, n: number): number | null => (n > 0 ? sum / n : null);
/** Sample std (N − 1) from the sum of squared deviations. */
export const sampleStd = (ssd: number, n: number): number | null => (n > 1 ? Math.sqrt(ssd / (n - 1)) : null);
export const ratio = (a: number | null, b: number | null): number | null => (a !== null && b !== null && b > 0 ? a / b : null);
export const diff = (a: number | null, b: number | null): number | null => (a !== null && b !== null ? a - b : null);

/**
 * Rearrange a[lo..hi] so that a[k] holds the value a sorted copy has there, nothing before it larger and
 * nothing after it smaller (Hoare's selection). O(n) on average where a full sort of a million weights
 * would take a fifth of the time budget; equal values split evenly, so a constant weight column is linear too.
 */
export function selectKth(a: Float32Array, k: number, lo: number, hi: number): void {
  while (hi > lo) {
    const x = a[lo],
      y = a[(lo + hi) >>> 1],
      z = a[hi];
    const pivot = x < y ? (y < z ? y : x < z ? z : x) : x < z ? x : y < z ? z : y;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        const t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return; // a[j+1..i-1] all equal the pivot
  }
}

/**
 * Percentiles of `a` (reordered in place) with linear interpolation between order statistics, as numpy's
 * default: h = (n − 1)·p/100, value = x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]). `ps` ascending.
 */
export function percentiles(a: Float32Array, ps: number[]): number[] {
  const n = a.length;
  const out: number[] = [];
  let from = 0;
  for (const p of ps) {
    const h = ((n - 1) * p) / 100;
    const k = Math.floor(h);
    // Ranks below k stay left of k after the selection, so the next (larger) percentile searches from k on.
    selectKth(a, k, from, n - 1);
    from = k;
    const lo = a[k];
    let hi = lo;
    if (h > k) {
      hi = Infinity;
      for (let i = k + 1; i < n; i++) if (a[i] < hi) hi = a[i];
    }
    out.push(lo + (h - k) * (hi - lo));
  }
  return out;
}

// ---- the tables ----

/** Copy the rows where keep[i] = 1 of the columns the analysis reads. */
export function keepRows(c: TokenColumnsRead, keep: Uint8Array, kept: number): TokenColumnsRead {
  const pick = <T extends Int32Array | Float32Array>(a: T): T => {
    const out = new (a.constructor as new (n: number) => T)(kept);
    for (let i = 0, j = 0; i < a.length; i++) if (keep[i]) out[j++] = a[i];
    return out;
  };
  const pickArr = <T>(a: T[]): T[] => a.filter((_, i) => keep[i] === 1);
  return {
    ...c,
    step: pick(c.step),
    episode: pick(c.episode),
    position: pick(c.position),
    token_id: pick(c.token_id),
    token: pickArr(c.token),
    logprob: pick(c.logprob),
    advantage: pick(c.advantage),
    weight: pick(c.weight),
    effective_advantage: pick(c.effective_advantage),
    contribution: pick(c.contribution),
    entropy: pick(c.entropy),
    grad_norm: c.grad_norm ? pick(c.grad_norm) : null,
    section: pickArr(c.section),
    token_type: pickArr(c.token_type),
    extra: Object.fromEntries(Object.entries(c.extra ?? {}).map(([k, v]) => [k, pick(v)])),
  };
}

/** Dense episode ids over (step, episode) and each episode's length, counted over all of its logged rows. */
export function episodeIds(step: Int32Array, episode: Int32Array): { id: Int32Array; length: Int32Array; count: number } {
  const n = step.length;
  const id = new Int32Array(n);
  const seen = new Map<string, number>();
  const lengths: number[] = [];
  let cur = -1;
  for (let i = 0; i < n; i++) {
    // Rows of one episode are contiguous in our tables, so the map is consulted once per episode.
    if (i === 0 || step[i] !== step[i - 1] || episode[i] !== episode[i - 1]) {
      const key = `${step[i]}:${episode[i]}`;
      let v = seen.get(key);
      if (v === undefined) {
        v = seen.size;
        seen.set(key, v);
        lengths.push(0);
      }
      cur = v;
    }
    id[i] = cur;
    lengths[cur]++;
  }
  return { id, length: Int32Array.from(lengths), count: seen.size };
}

/**
 * 1 where a row is a reasoning token, classified from the token text with `re` (seed doc 002's REASONING_TOKEN_RE by
 * default), not read from the logged token_type column: runs logged by an engine with another definition (before
 * older engines counted a lone "." as reasoning) are then read by today's.
 */
export function reasoningFlags(c: TokenColumnsRead, re: RegExp | null): Uint8Array {
  const n = c.token_id.length;
  const out = new Uint8Array(n);
  const rx = re ?? REASONING_TOKEN_RE;
  // One regex test per distinct token: a token id keeps its text, and the text check catches the rare
  // tokenizer whose decoded piece depends on context.
  const byId = new Map<number, { text: string; r: number }>();
  for (let i = 0; i < n; i++) {
    const text = c.token[i];
    const e = byId.get(c.token_id[i]);
    if (e !== undefined && e.text === text) {
      out[i] = e.r;
    } else {
      const r = tokenType(text, rx) === 'reasoning' ? 1 : 0;
      if (e === undefined) byId.set(c.token_id[i], { text, r });
      out[i] = r;
    }
  }
  return out;
}

/**
 * Which contribution the tables are over. episode: c = A·ℓ, the episode's advantage times the token's log-prob, seed doc
 * 002's definition (its GRPO broadcasts one advantage to every token; the default). weighted: c = Â·ℓ, the logged
 * contribution column, with the strategy's per-token weight in Â = A·w: what the strategy actually trained with.
 */
export type ContributionKind = 'episode' | 'weighted';

/** The contribution column of `kind`: A·ℓ computed in float32 like the logged column, or the logged Â·ℓ. */
export function contributionOf(c: TokenColumnsRead, kind: ContributionKind): Float32Array {
  if (kind === 'weighted') return c.contribution;
  const out = new Float32Array(c.advantage.length);
  for (let i = 0; i < out.length; i++) out[i] = Math.fround(c.advantage[i]) * Math.fround(c.logprob[i]);
  return out;
}

/** The tables of one pass, as CreditAnalysis has them, plus what the pass counted. */
export type Tables = Pick<
  CreditAnalysis,
  'contribution' | 'position_t_stats' | 'relative_position' | 'reward_sign' | 'token_types' | 'token_types_by_position' | 'top_tokens'
> & {
  sections: Record<Section, SectionWeightStats>;
  episodes: number;
  tokens: number;
  notes: string[];
};

export function typeStats(n: number, total: number, sumAbs: number, sumC: number, sumLp: number, sumG = 0, nG = 0): TokenTypeStats {
  return {
    count: n,
    share: meanOfSum(n, total),
    mean_abs_contribution: meanOfSum(sumAbs, n),
    mean_contribution: meanOfSum(sumC, n),
    mean_logprob: meanOfSum(sumLp, n),
    mean_grad_norm: meanOfSum(sumG, nG),
  };
}

export function computeTables(all: TokenColumnsRead, re: RegExp | null, topK: number, kind: ContributionKind = 'episode'): Tables {
  const notes: string[] = [];
  const ep = episodeIds(all.step, all.episode);

  const { c, epId, kept } = finiteRows(all, ep.id, notes);
  const n = kept;
  const epLen = ep.length;
  const { logprob: LP, position: POS, advantage: ADV, weight: W, effective_advantage: EA } = c;
  const C = contributionOf(c, kind);
  const reasoning = reasoningFlags(c, re);

  let minPos = 0,
    maxPos = -1,
    minId = 0,
    maxId = -1;
  for (let i = 0; i < n; i++) {
    if (POS[i] > maxPos) maxPos = POS[i];
    if (POS[i] < minPos) minPos = POS[i];
    const id = c.token_id[i];
    if (id > maxId) maxId = id;
    if (id < minId) minId = id;
  }
  if (minPos < 0) throw new UserError(`the token table's position column holds ${minPos}; positions count completion tokens from 0`);
  if (maxPos >= 1 << 24) throw new UserError(`the token table's position column holds ${maxPos}, far beyond any completion length`);

  // ---- pass 1: sums ----
  let sumC = 0,
    sumAbs = 0,
    minC = Infinity,
    maxC = -Infinity;
  const rbN = new Float64Array(REL_BINS),
    rbC = new Float64Array(REL_BINS),
    rbAbs = new Float64Array(REL_BINS),
    rbLp = new Float64Array(REL_BINS);
  // Episodes by the sign of A_i: 0 positive, 1 zero (a group of equal rewards: GRPO gives it no gradient), 2 negative.
  const sgN = new Float64Array(3),
    sgC = new Float64Array(3),
    sgAbs = new Float64Array(3);
  const sgEp = new Float64Array(3);
  const epSeen = new Uint8Array(ep.count);
  let episodes = 0;
  const tyN = new Float64Array(2),
    tyC = new Float64Array(2),
    tyAbs = new Float64Array(2),
    tyLp = new Float64Array(2),
    tyG = new Float64Array(2),
    tyGN = new Float64Array(2);
  const tbN = new Float64Array(TYPE_BINS * 2),
    tbC = new Float64Array(TYPE_BINS * 2),
    tbAbs = new Float64Array(TYPE_BINS * 2),
    tbLp = new Float64Array(TYPE_BINS * 2),
    tbG = new Float64Array(TYPE_BINS * 2),
    tbGN = new Float64Array(TYPE_BINS * 2);
  // grad_norm: the gradient's size beside |c|; a run without the column (older, or an import without a
  // model) has none, and NaN rows are left out of its means only
  const G = c.grad_norm;
  const P = maxPos + 1;
  const pN = new Float64Array(P),
    pC = new Float64Array(P),
    pMin = new Float64Array(P).fill(Infinity),
    pMax = new Float64Array(P).fill(-Infinity);
  const sN = new Float64Array(3),
    sW = new Float64Array(3),
    sMin = new Float64Array(3).fill(Infinity),
    sMax = new Float64Array(3).fill(-Infinity);
  const sAbsA = new Float64Array(3),
    sAbsC = new Float64Array(3);
  const bin10 = new Uint8Array(n);
  const sec = new Uint8Array(n);
  // Top tokens are grouped by (token id, type): a custom regex can class one id differently only if its text
  // differs. Ids of a real vocabulary index a dense table; a Map per row would cost a tenth of the budget.
  const dense = minId >= 0 && maxId < 1 << 22 ? new Int32Array(2 * (maxId + 1)).fill(-1) : null;
  const sparse = new Map<number, number>();
  const tokKey = new Int32Array(n);
  const firstRow: number[] = [];

  for (let i = 0; i < n; i++) {
    const x = C[i];
    const ax = Math.abs(x);
    const lp = LP[i];
    const pos = POS[i];
    sumC += x;
    sumAbs += ax;
    if (x < minC) minC = x;
    if (x > maxC) maxC = x;

    // floor(10·position/length) in exact integer arithmetic; a position past the logged length (a table
    // with rows missing) falls in the last bin.
    const len = epLen[epId[i]];
    let b = Math.floor((pos * REL_BINS) / len);
    if (b >= REL_BINS) b = REL_BINS - 1;
    bin10[i] = b;
    rbN[b]++;
    rbC[b] += x;
    rbAbs[b] += ax;
    rbLp[b] += lp;

    const g = ADV[i] > 0 ? 0 : ADV[i] === 0 ? 1 : 2;
    sgN[g]++;
    sgC[g] += x;
    sgAbs[g] += ax;
    const e = epId[i];
    if (epSeen[e] === 0) {
      epSeen[e] = 1;
      episodes++;
      sgEp[g]++;
    }

    const r = reasoning[i];
    tyN[r]++;
    tyC[r] += x;
    tyAbs[r] += ax;
    tyLp[r] += lp;
    // floor(5·p/len) = floor(floor(10·p/len)/2)
    const tb = (b >> 1) * 2 + r;
    tbN[tb]++;
    tbC[tb] += x;
    tbAbs[tb] += ax;
    tbLp[tb] += lp;
    if (G && !Number.isNaN(G[i])) {
      tyG[r] += G[i];
      tyGN[r]++;
      tbG[tb] += G[i];
      tbGN[tb]++;
    }

    pN[pos]++;
    pC[pos] += x;
    if (x < pMin[pos]) pMin[pos] = x;
    if (x > pMax[pos]) pMax[pos] = x;

    const s = c.section[i];
    const si = s === 'think' ? 0 : s === 'answer' ? 1 : 2;
    sec[i] = si;
    const w = W[i];
    sN[si]++;
    sW[si] += w;
    if (w < sMin[si]) sMin[si] = w;
    if (w > sMax[si]) sMax[si] = w;
    sAbsA[si] += Math.abs(EA[i]);
    // the weights table is about what the strategy trained with: its |c| is the logged Â·ℓ whatever `kind` is
    sAbsC[si] += Math.abs(c.contribution[i]);

    const key = c.token_id[i] * 2 + r;
    let k = dense !== null ? dense[key] : (sparse.get(key) ?? -1);
    if (k < 0) {
      k = firstRow.length;
      if (dense !== null) dense[key] = k;
      else sparse.set(key, k);
      firstRow.push(i);
    }
    tokKey[i] = k;
  }

  // ---- pass 2: squared deviations, section weights gathered for the percentiles ----
  const meanC = n > 0 ? sumC / n : 0;
  let ssd = 0;
  const rbMean = Float64Array.from(rbC, (v, b) => (rbN[b] > 0 ? v / rbN[b] : 0));
  const rbSsd = new Float64Array(REL_BINS);
  const pMean = Float64Array.from(pC, (v, p) => (pN[p] > 0 ? v / pN[p] : 0));
  const pSsd = new Float64Array(P);
  const sMean = Float64Array.from(sW, (v, s) => (sN[s] > 0 ? v / sN[s] : 0));
  const sSsd = new Float64Array(3);
  const sWeights = [0, 1, 2].map((s) => new Float32Array(sN[s]));
  const sFill = new Int32Array(3);
  const K = firstRow.length;
  const kN = new Float64Array(K),
    kC = new Float64Array(K),
    kAbs = new Float64Array(K),
    kLp = new Float64Array(K);
  for (let i = 0; i < n; i++) {
    const x = C[i];
    const d = x - meanC;
    ssd += d * d;
    const b = bin10[i];
    const db = x - rbMean[b];
    rbSsd[b] += db * db;
    const pos = POS[i];
    const dp = x - pMean[pos];
    pSsd[pos] += dp * dp;
    const si = sec[i];
    const w = W[i];
    const ds = w - sMean[si];
    sSsd[si] += ds * ds;
    sWeights[si][sFill[si]++] = w;
    const k = tokKey[i];
    kN[k]++;
    kC[k] += x;
    kAbs[k] += Math.abs(x);
    kLp[k] += LP[i];
  }

  const positionT = positionTStats(pN, pMean, pSsd, pMin, pMax);

  const topTokens = topTokenLists(c, reasoning, firstRow, { kN, kC, kAbs, kLp }, topK);

  const sections = sectionStats({ sN, sW, sSsd, sMin, sMax, sAbsA, sAbsC }, sWeights);

  return {
    contribution: {
      count: n,
      mean: meanOfSum(sumC, n),
      std: sampleStd(ssd, n),
      mean_abs: meanOfSum(sumAbs, n),
      min: n > 0 ? minC : null,
      max: n > 0 ? maxC : null,
    },
    position_t_stats: positionT,
    relative_position: Array.from({ length: REL_BINS }, (_, b) => ({
      bin: b,
      lo: b / REL_BINS,
      hi: (b + 1) / REL_BINS,
      count: rbN[b],
      mean_contribution: meanOfSum(rbC[b], rbN[b]),
      std_contribution: sampleStd(rbSsd[b], rbN[b]),
      mean_abs_contribution: meanOfSum(rbAbs[b], rbN[b]),
      mean_logprob: meanOfSum(rbLp[b], rbN[b]),
    })),
    reward_sign: {
      positive: { episodes: sgEp[0], tokens: sgN[0], mean_contribution: meanOfSum(sgC[0], sgN[0]), mean_abs_contribution: meanOfSum(sgAbs[0], sgN[0]) },
      zero: { episodes: sgEp[1], tokens: sgN[1], mean_contribution: meanOfSum(sgC[1], sgN[1]), mean_abs_contribution: meanOfSum(sgAbs[1], sgN[1]) },
      negative: { episodes: sgEp[2], tokens: sgN[2], mean_contribution: meanOfSum(sgC[2], sgN[2]), mean_abs_contribution: meanOfSum(sgAbs[2], sgN[2]) },
    },
    token_types: {
      filler: typeStats(tyN[0], n, tyAbs[0], tyC[0], tyLp[0], tyG[0], tyGN[0]),
      reasoning: typeStats(tyN[1], n, tyAbs[1], tyC[1], tyLp[1], tyG[1], tyGN[1]),
    },
    token_types_by_position: Array.from({ length: TYPE_BINS }, (_, b) => {
      const f = b * 2,
        r = b * 2 + 1;
      const inBin = tbN[f] + tbN[r];
      return {
        bin: b,
        lo: b / TYPE_BINS,
        hi: (b + 1) / TYPE_BINS,
        filler: typeStats(tbN[f], inBin, tbAbs[f], tbC[f], tbLp[f], tbG[f], tbGN[f]),
        reasoning: typeStats(tbN[r], inBin, tbAbs[r], tbC[r], tbLp[r], tbG[r], tbGN[r]),
      };
    }),
    top_tokens: topTokens,
    sections,
    episodes,
    tokens: n,
    notes,
  };
}

/** Per position, t = mean(c)/(std(c)/√n) over the episodes reaching it, and the table's summary of them. */
function positionTStats(pN: Float64Array, pMean: Float64Array, pSsd: Float64Array, pMin: Float64Array, pMax: Float64Array): PositionTStats {
  const P = pN.length;
  let used = 0,
    nLt2 = 0,
    zeroStd = 0,
    gt3 = 0,
    lt15 = 0,
    sumAbsT = 0;
  const byPosition: PositionTStats['by_position'] = [];
  for (let p = 0; p < P; p++) {
    const np = pN[p];
    let t: number | null = null;
    if (np < 2) nLt2++;
    // All c equal (min = max) is a zero std exactly; the two-pass ssd of equal values can be a rounding speck.
    else if (pMin[p] === pMax[p]) zeroStd++;
    else {
      t = pMean[p] / (Math.sqrt(pSsd[p] / (np - 1)) / Math.sqrt(np));
      const at = Math.abs(t);
      used++;
      sumAbsT += at;
      if (at > 3) gt3++;
      if (at < 1.5) lt15++;
    }
    byPosition.push({ position: p, n: np, mean: np > 0 ? pMean[p] : null, t });
  }
  const excluded: string[] = [];
  if (nLt2) excluded.push(`${nLt2} reached by fewer than 2 episodes`);
  if (zeroStd) excluded.push(`${zeroStd} where every episode has the same contribution (std 0, e.g. all advantages 0)`);
  const note =
    `t = mean(c)/(std(c)/√n) over the episodes reaching each position (sample std); ${used} of ${P} positions have one` +
    (excluded.length ? `; left out: ${excluded.join(', ')}.` : '.');

  return {
    positions: used,
    frac_abs_t_gt_3: meanOfSum(gt3, used),
    frac_abs_t_lt_1_5: meanOfSum(lt15, used),
    mean_abs_t: meanOfSum(sumAbsT, used),
    excluded_n_lt_2: nLt2,
    excluded_zero_std: zeroStd,
    note,
    by_position: byPosition,
  };
}

/** Per token type, the top tokens (by id and type) by total |c| and by count: `k*` are pass 2's sums per key. */
function topTokenLists(
  c: TokenColumnsRead,
  reasoning: Uint8Array,
  firstRow: number[],
  sums: { kN: Float64Array; kC: Float64Array; kAbs: Float64Array; kLp: Float64Array },
  topK: number,
): Record<TokenType, TopTokenLists> {
  const { kN, kC, kAbs, kLp } = sums;
  const K = firstRow.length;
  const topTokens = {} as Record<TokenType, TopTokenLists>;
  const text = (k: number) => c.token[firstRow[k]];
  const tok = (k: number): TopToken => ({
    token_id: c.token_id[firstRow[k]],
    token: text(k),
    count: kN[k],
    total_abs_contribution: kAbs[k],
    mean_contribution: kC[k] / kN[k],
    mean_abs_contribution: kAbs[k] / kN[k],
    mean_logprob: kLp[k] / kN[k],
  });
  const tieBreak = (a: number, b: number) => (text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : c.token_id[firstRow[a]] - c.token_id[firstRow[b]]);
  TYPES.forEach((type, r) => {
    const keys: number[] = [];
    for (let k = 0; k < K; k++) if (reasoning[firstRow[k]] === r) keys.push(k);
    const byAbs = [...keys].sort((a, b) => kAbs[b] - kAbs[a] || kN[b] - kN[a] || tieBreak(a, b)).slice(0, topK);
    const byCount = [...keys].sort((a, b) => kN[b] - kN[a] || kAbs[b] - kAbs[a] || tieBreak(a, b)).slice(0, topK);
    topTokens[type] = { by_total_abs_contribution: byAbs.map(tok), by_count: byCount.map(tok) };
  });

  return topTokens;
}

/** Per section (think, answer, other), the strategy's weights: mean, std, percentiles, and the |Â| and |c| they gave. */
function sectionStats(
  t: { sN: Float64Array; sW: Float64Array; sSsd: Float64Array; sMin: Float64Array; sMax: Float64Array; sAbsA: Float64Array; sAbsC: Float64Array },
  sWeights: Float32Array[],
): Record<Section, SectionWeightStats> {
  const { sN, sW, sSsd, sMin, sMax, sAbsA, sAbsC } = t;
  const sections = {} as Record<Section, SectionWeightStats>;
  SECTIONS.forEach((name, s) => {
    const m = sN[s];
    const [p10, p50, p90] = m > 0 ? percentiles(sWeights[s], [10, 50, 90]) : [null, null, null];
    sections[name] = {
      count: m,
      mean: meanOfSum(sW[s], m),
      std: sampleStd(sSsd[s], m),
      min: m > 0 ? sMin[s] : null,
      p10,
      p50,
      p90,
      max: m > 0 ? sMax[s] : null,
      mean_abs_effective_advantage: meanOfSum(sAbsA[s], m),
      mean_abs_contribution: meanOfSum(sAbsC[s], m),
    };
  });

  return sections;
}

/**
 * The rows whose contribution, log-prob, weight and advantages are finite, with their episode ids: rows with a
 * non-finite value (a step the NaN guard caught) would turn every mean into NaN, so they are left out, and a note says so.
 */
function finiteRows(all: TokenColumnsRead, epIds: Int32Array, notes: string[]): { c: TokenColumnsRead; epId: Int32Array; kept: number } {
  const total = all.contribution.length;
  const keep = new Uint8Array(total);
  let kept = 0;
  for (let i = 0; i < total; i++) {
    const ok =
      Number.isFinite(all.contribution[i]) &&
      Number.isFinite(all.logprob[i]) &&
      Number.isFinite(all.weight[i]) &&
      Number.isFinite(all.effective_advantage[i]) &&
      Number.isFinite(all.advantage[i]);
    keep[i] = ok ? 1 : 0;
    if (ok) kept++;
  }
  let c = all;
  let epId = epIds;
  if (kept < total) {
    notes.push(`${total - kept} of ${total} token rows have a non-finite contribution, log-prob, advantage or weight and are left out of every table.`);
    c = keepRows(all, keep, kept);
    epId = new Int32Array(kept);
    for (let i = 0, j = 0; i < total; i++) if (keep[i]) epId[j++] = epIds[i];
  }
  return { c, epId, kept };
}
