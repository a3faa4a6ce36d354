// `credit-lens analyze --json` (src/protocol/analysis.ts) → the tables of the credit-analysis view, each a
// header and rows of plain values, so one renderer draws them and one function writes any of them as CSV.
// Column names follow seed doc 002's tables. Pure (no DOM).
import {
  describeCancellation,
  type AnalyzeReport,
  type Estimate,
  type ProbeAccuracy,
  type SectionWeightStats,
  type TokenTypeStats,
  type TopToken,
} from '../protocol/analysis';
import type { Section } from '../protocol/index';
import { formatFixed } from '../protocol/number_format';

export type Cell = string | number | null;

export interface Table {
  id: string;
  title: string;
  hint: string;
  header: string[];
  rows: Cell[][];
  /** Columns holding shares in [0, 1], shown as percentages (the CSV keeps the fraction). */
  percentColumns?: number[];
}

const SECTIONS: Section[] = ['think', 'answer', 'other'];

/** Which c the tables are over: seed doc 002's A × ℓ, or the weighted Â × ℓ (the analysis's --contribution). */
export function cText(a: AnalyzeReport): string {
  return a.meta.contribution === 'weighted'
    ? "c = c_Â = Â × ℓ (the strategy's weighted advantage, as the heatmap's contribution)"
    : "c = c_A = A × ℓ (the episode's advantage; the heatmap's contribution is c_Â = Â × ℓ)";
}

export function contributionTable(a: AnalyzeReport): Table {
  const c = a.contribution;
  return {
    id: 'contribution',
    title: 'Contribution statistics',
    hint: `${cText(a)} over every analysed token (a rewarded episode has c ≤ 0: its log-probs are negative)`,
    header: ['tokens', 'mean c', 'std c', 'mean |c|', 'min c', 'max c'],
    rows: [[c.count, c.mean, c.std, c.mean_abs, c.min, c.max]],
  };
}

export function tStatTable(a: AnalyzeReport): Table {
  const t = a.position_t_stats;
  return {
    id: 't_stats',
    title: 'T-statistics by position',
    hint: t.note,
    header: ['positions with t', '|t| > 3', '|t| < 1.5', 'mean |t|', 'excluded: n < 2', 'excluded: std 0'],
    rows: [[t.positions, t.frac_abs_t_gt_3, t.frac_abs_t_lt_1_5, t.mean_abs_t, t.excluded_n_lt_2, t.excluded_zero_std]],
    percentColumns: [1, 2],
  };
}

/** "0.1–0.2" for the bin [0.1, 0.2). */
export const binLabel = (lo: number, hi: number): string => `${+lo.toFixed(2)}–${+hi.toFixed(2)}`;

export function positionBinTable(a: AnalyzeReport): Table {
  return {
    id: 'position_bins',
    title: 'Relative position',
    hint: "tokens binned by position ÷ episode length (the credit-assignment analysis' full position table)",
    header: ['bin', 'position / length', 'tokens', 'mean c', 'std c', 'mean |c|', 'mean log-prob'],
    rows: a.relative_position.map((b) => [
      b.bin,
      binLabel(b.lo, b.hi),
      b.count,
      b.mean_contribution,
      b.std_contribution,
      b.mean_abs_contribution,
      b.mean_logprob,
    ]),
  };
}

export function tokenTypeTable(a: AnalyzeReport): Table {
  const row = (name: string, s: TokenTypeStats): Cell[] => [
    name,
    s.count,
    s.share,
    s.mean_abs_contribution,
    s.mean_grad_norm,
    s.mean_contribution,
    s.mean_logprob,
  ];
  return {
    id: 'token_types',
    title: 'Filler vs reasoning tokens',
    hint: `${cText(a)}; reasoning: trimmed text matches /${a.meta.reasoning_regex}/; every other token (punctuation alone too) is filler`,
    header: ['type', 'tokens', 'share', 'mean |c|', 'mean grad norm', 'mean c', 'mean log-prob'],
    rows: [
      row('filler', a.token_types.filler),
      row('reasoning', a.token_types.reasoning),
      [
        'filler ÷ reasoning',
        null,
        null,
        a.meta.filler_reasoning_ratio,
        ratioOf(a.token_types.filler.mean_grad_norm, a.token_types.reasoning.mean_grad_norm),
        null,
        null,
      ],
    ],
    percentColumns: [2],
  };
}

export function typeByPositionTable(a: AnalyzeReport): Table {
  return {
    id: 'type_by_position',
    title: 'Token type × position',
    hint: "the credit-assignment analysis' position control: 5 bins of position ÷ length; share is within the bin",
    header: [
      'position / length',
      'filler tokens',
      'filler share',
      'filler mean |c|',
      'reasoning tokens',
      'reasoning share',
      'reasoning mean |c|',
      'filler ÷ reasoning |c|',
      'filler mean grad norm',
      'reasoning mean grad norm',
    ],
    rows: a.token_types_by_position.map((b) => {
      const f = b.filler.mean_abs_contribution;
      const r = b.reasoning.mean_abs_contribution;
      return [
        binLabel(b.lo, b.hi),
        b.filler.count,
        b.filler.share,
        f,
        b.reasoning.count,
        b.reasoning.share,
        r,
        ratioOf(f, r),
        b.filler.mean_grad_norm,
        b.reasoning.mean_grad_norm,
      ];
    }),
    percentColumns: [2, 5],
  };
}

export function rewardSignTable(a: AnalyzeReport): Table {
  const { positive: p, zero: z, negative: n } = a.reward_sign;
  return {
    id: 'reward_sign',
    title: 'Reward sign',
    hint: 'episodes split on their advantage A_i: > 0 (rewarded above the group), = 0 (a group of equal rewards: no gradient), < 0',
    header: ['episodes', 'count', 'tokens', 'mean c', 'mean |c|'],
    rows: [
      ['A > 0', p.episodes, p.tokens, p.mean_contribution, p.mean_abs_contribution],
      ['A = 0', z.episodes, z.tokens, z.mean_contribution, z.mean_abs_contribution],
      ['A < 0', n.episodes, n.tokens, n.mean_contribution, n.mean_abs_contribution],
    ],
  };
}

/** How a token shows in a cell: whitespace made visible, so " " and "\n" can be told apart. */
export function showToken(t: string): string {
  return t.replace(/\n/g, '⏎').replace(/\t/g, '⇥').replace(/^ | $/g, '·') || '∅';
}

export function topTokenTable(a: AnalyzeReport, type: 'filler' | 'reasoning', by: 'by_total_abs_contribution' | 'by_count', limit = 10): Table {
  const list: TopToken[] = a.top_tokens[type][by].slice(0, limit);
  return {
    id: `top_${type}_${by === 'by_count' ? 'count' : 'abs'}`,
    title: `Top ${type} tokens ${by === 'by_count' ? 'by count' : 'by total |c|'}`,
    hint: 'token text as logged (· marks a leading or trailing space, ⏎ a newline)',
    header: ['token', 'id', 'count', 'total |c|', 'mean c', 'mean |c|', 'mean log-prob'],
    rows: list.map((t) => [showToken(t.token), t.token_id, t.count, t.total_abs_contribution, t.mean_contribution, t.mean_abs_contribution, t.mean_logprob]),
  };
}

export function weightTable(a: AnalyzeReport): Table {
  const row = (s: Section, w: SectionWeightStats): Cell[] => [
    s,
    w.count,
    w.mean,
    w.std,
    w.min,
    w.p10,
    w.p50,
    w.p90,
    w.max,
    w.mean_abs_effective_advantage,
    w.mean_abs_contribution,
  ];
  return {
    id: 'weights',
    title: `Weights per section (${a.weights.strategy ?? '?'})`,
    hint: "the strategy's weight w by section; percentiles interpolate linearly as numpy does",
    header: ['section', 'tokens', 'mean w', 'std w', 'min', 'p10', 'p50', 'p90', 'max', 'mean |Â|', 'mean |c|'],
    rows: SECTIONS.map((s) => row(s, a.weights.sections[s])),
  };
}

/** The paired test on eval success in one cell: the interval, the exact test's p, the MDE, n.s. and the exploratory mark. */
export function evalTestCell(cmp: NonNullable<AnalyzeReport['appendix_b']>): string {
  const t = cmp.eval_test;
  if (!t) return `not available: ${cmp.eval_test_note ?? 'no per-instance eval tables'}`;
  const pts = (v: number) => `${v >= 0 ? '+' : ''}${(100 * v).toFixed(1)}`;
  const p = t.p < 1e-4 ? t.p.toExponential(1) : t.p.toFixed(3);
  const mde = t.mde === null ? '' : ` · MDE ± ${(100 * t.mde).toFixed(1)} pp`;
  return `step ${t.step}, ${t.instances} ${t.split} instances: Δ ${pts(t.diff)} pts [${pts(t.lo)}, ${pts(t.hi)}], p ${p}${t.significant ? '' : ' · n.s.'}${mde} · conditional on these two checkpoints, no verdict on the methods (one seed each)`;
}

/** Seed doc 002's Appendix B: the run next to the baseline, and run − baseline. */
export function appendixBTable(a: AnalyzeReport): Table | null {
  const cmp = a.appendix_b;
  if (!cmp) return null;
  const row = (who: string, r: typeof cmp.run): Cell[] => [
    who,
    r.label,
    r.eval_success,
    r.filler_mean_abs_contribution,
    r.reasoning_mean_abs_contribution,
    r.filler_reasoning_ratio,
  ];
  const d = cmp.delta;
  return {
    id: 'appendix_b',
    title: 'Appendix B: against the baseline',
    hint: 'eval success is the last greedy evaluation within the analysed steps',
    header: ['', 'run', 'eval success', 'filler mean |c|', 'reasoning mean |c|', 'filler ÷ reasoning'],
    rows: [
      row('baseline', cmp.baseline),
      row('this run', cmp.run),
      ['Δ (run − baseline)', '', d.eval_success, d.filler_mean_abs_contribution, d.reasoning_mean_abs_contribution, d.filler_reasoning_ratio],
      ['paired test', evalTestCell(cmp), null, null, null, null],
    ],
    percentColumns: [2],
  };
}

export function allTables(a: AnalyzeReport): Table[] {
  return [
    contributionTable(a),
    tStatTable(a),
    positionBinTable(a),
    tokenTypeTable(a),
    typeByPositionTable(a),
    rewardSignTable(a),
    weightTable(a),
    topTokenTable(a, 'filler', 'by_total_abs_contribution'),
    topTokenTable(a, 'reasoning', 'by_total_abs_contribution'),
    topTokenTable(a, 'filler', 'by_count'),
    topTokenTable(a, 'reasoning', 'by_count'),
    ...(a.appendix_b ? [appendixBTable(a)!] : []),
    ...(a.probes ?? []).map(probeTable),
  ];
}

const ratioOf = (f: number | null, r: number | null): number | null => (f !== null && r !== null && r > 0 ? f / r : null);

/** One probed step's credit accuracy (`analyze --probe`): each measure's mean and its 95 % interval over prompts. */
export function probeTable(p: ProbeAccuracy): Table {
  const none: Estimate = { mean: null, lo: null, hi: null, n: 0 };
  const e = (x: Estimate | undefined): Cell[] => [(x ?? none).mean, (x ?? none).lo, (x ?? none).hi];
  const rel = p.reliability;
  const f2 = (x: number | null) => formatFixed(x, 2);
  const row = (label: string, s: ProbeAccuracy['accuracy'][string], excess: boolean): Cell[] => [
    label,
    ...e(s.lift),
    ...(excess ? e(s.lift_excess) : [null, null, null]),
    (s.spearman_unbiased ?? none).mean,
    (s.placebo ?? none).mean,
    (s.decisive_share ?? none).mean,
    (s.kendall ?? none).mean,
    s.sign_test ? (s.sign_test.p_clustered ?? s.sign_test.p) : null,
    s.decisive_share.n,
  ];
  return {
    id: `probe_${p.step}`,
    title: `Credit accuracy, step ${p.step} (Monte Carlo probe)`,
    hint:
      `${p.episodes} episodes with A ≠ 0 of ${p.prompts} prompts, ${p.rollouts} rollouts per position (${p.positions}); intervals over prompts. ` +
      (rel
        ? `Reliability of δ̂: split-half r ${f2(rel.half)}, for all M ${f2(rel.full)}: no rank score can exceed about √${f2(rel.full)}. `
        : 'Reliability unknown: this probe kept no independent halves (probe again with --replace). ') +
      'lift: Σ p·δ̂ᴬ·δ̂ᴮ with p = |Â|/Σ|Â|, minus uniform credit’s: the δ² where the credit puts its weight beyond uniform’s, unbiased at any M; ' +
      'over best: the lift minus the best trivial baseline’s (1 − π, entropy, position), episode by episode; rank (attenuated): Spearman of |Â| with δ̂ᴬ·δ̂ᴮ, ' +
      `which noise pulls toward 0; placebo: the rank against |δ̂ᴬ − δ̂ᴮ|, pure noise; decisive share: Σ|Â| on the top 10 % |δ̂| tokens (uniform credit: ${p.uniform_share.mean === null ? '—' : `${(100 * p.uniform_share.mean).toFixed(1)} %`}); ` +
      "Kendall τ of the signed Â and δ̂, and the sign test's p over all tokens with the prompt as the unit (QVal's measures)." +
      (p.cancellation
        ? ` ${describeCancellation(
            p.cancellation,
            (e) => f2(e.mean),
            (x) => x.toPrecision(2),
          )}`
        : '') +
      (p.warnings?.length ? ` ${p.warnings.join(' ')}` : ''),
    header: ['strategy', 'lift', 'lo', 'hi', 'over best', 'lo', 'hi', 'rank (attenuated)', 'placebo', 'decisive share', 'kendall τ', 'sign test p', 'episodes'],
    rows: [
      ...Object.entries(p.accuracy).map(([name, s]) => row(name === p.run_strategy ? `${name} (the run's)` : name, s, true)),
      ...Object.entries(p.baselines ?? {}).map(([name, s]) => row(`baseline: ${name}`, s, false)),
      // the lift's ceiling: an oracle credit, its weights from one half's |δ̂|, scored on the other half
      ...(p.ceiling
        ? [['ceiling: oracle credit (cross-fitted halves)', ...e(p.ceiling), null, null, null, null, null, null, null, null, p.ceiling.n] as Cell[]]
        : []),
    ],
    percentColumns: [9],
  };
}
