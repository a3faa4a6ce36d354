// The JSON of `credit-lens analyze <run> --json`: seed doc 002's credit tables, recomputed from a run's own token
// and episode tables by src/engine/analysis/analysis.ts. Types only (design.md#shape): the CLI, the sweep table and the
// credit-analysis webview read this one shape.
//
// Conventions, the same in every table:
// - c is the token table's `contribution` = Â × ℓ (design.md#semantics). A rewarded episode (advantage > 0) has c ≤ 0,
//   as in seed doc 002 ("good episodes get negative contribution").
// - `std` is the sample standard deviation (N − 1), as pandas' default that produced the seed's tables;
//   it is null for fewer than 2 values.
// - A statistic of an empty group is null, never NaN: JSON has no NaN.
// - Names are snake_case, like the run directory's columns and metrics.
import type { Section, TokenType } from './index';

export interface CreditAnalysis {
  /** Changes when a field changes meaning or goes away; added fields do not change it. */
  version: 1;
  meta: AnalysisMeta;
  contribution: ContributionStats;
  position_t_stats: PositionTStats;
  /** 10 bins of position / episode length: bin k holds the tokens with floor(10·position/length) = k. */
  relative_position: RelativePositionBin[];
  reward_sign: RewardSignStats;
  /** Seed doc 002's "Overall Distribution" table. `token_types.filler.mean_abs_contribution` is what the sweep table reads. */
  token_types: Record<TokenType, TokenTypeStats>;
  /** Seed doc 002's "Position-Controlled Analysis": 5 bins of floor(5·position/length). */
  token_types_by_position: TokenTypePositionBin[];
  top_tokens: Record<TokenType, TopTokenLists>;
  weights: WeightTable;
  /** What the reader should know to read the tables right: rows left out and why, a custom regex, … */
  notes: string[];
  /** `analyze --probe`: each probed step's credit accuracy (`credit-lens probe`), ascending by step. */
  probes?: ProbeAccuracy[];
}

/** A mean over episodes with its 95 % interval from a bootstrap that resamples prompts; null where undefined. */
export interface Estimate {
  mean: number | null;
  lo: number | null;
  hi: number | null;
  /** episodes it is defined on */
  n: number;
}

/** How well one strategy's Â matches the Monte Carlo credit δ (src/engine/probe/accuracy.ts says how each is computed). */
export interface StrategyAccuracy {
  /** rank correlation of |Â| and |δ̂| within an episode (|δ̂| is biased upward by the probe's noise: see spearman_unbiased) */
  spearman: Estimate;
  /** share of an episode's Σ|Â| on its top 10 % |δ̂| tokens */
  decisive_share: Estimate;
  /** |δ̂|-weighted share of tokens where sign(Â) = sign(δ̂) */
  sign_agreement: Estimate;
  /**
   * The headline: Σ p·δ̂ᴬ·δ̂ᴮ with p = |Â|/Σ|Â| (credit_delta2, the δ² where the credit puts its weight) minus uniform
   * credit's (AccuracyReport.uniform_delta2), per episode; linear in the halves' products, so unbiased for its noise-free
   * value at any M. lift_excess is the lift minus the best trivial baseline's, episode by episode; its prompt_sd, the
   * standard deviation of its per-prompt means, is what `probe --plan` sizes a probe from.
   */
  credit_delta2?: Estimate;
  lift?: Estimate;
  lift_excess?: Estimate & { over: string | null; prompt_sd?: number | null };
  /**
   * rank correlation of |Â| and δ̂ᴬ·δ̂ᴮ, the two independent halves' product: its target is noise-free, but ranking against
   * a noisy target attenuates it (a perfect credit scores well below 1 at small M); secondary
   */
  spearman_unbiased?: Estimate;
  /** the same rank correlation against |δ̂ᴬ − δ̂ᴮ|: pure estimation error, what a measure scores from noise alone */
  placebo?: Estimate;
  /**
   * spearman_unbiased minus the best trivial baseline's, episode by episode, with its interval; `over` names the baseline,
   * prompt_sd is the standard deviation of its per-prompt means
   */
  excess?: Estimate & { over: string | null; prompt_sd?: number | null };
  /** QVal's measures: Pearson r and Kendall τ-b of the signed Â against the signed δ̂ within an episode */
  pearson?: Estimate;
  kendall?: Estimate;
  /**
   * over every unit where Â and δ̂ are both non-zero: how many agree in sign; p, the exact two-sided binomial p against ½,
   * treats the units as independent, which the tokens of one prompt are not; p_clustered is the test with the prompt as
   * the unit (the share Σagree/Σunits with its cluster-robust standard error over prompts, t with prompts − 1 df), the one
   * the views show. Null under 2 prompts.
   */
  sign_test?: { agree: number; units: number; p: number; prompts?: number; p_clustered?: number | null };
}

/** How much of the probe's δ̂ is signal: its two independent halves of the M continuations against each other. */
export interface ProbeReliability {
  /** Pearson r of δ̂ᴬ and δ̂ᴮ over every unit of the episode set: the split-half reliability of one half */
  half: number | null;
  /** Spearman–Brown's 2r/(1 + r): the reliability of δ̂ from all M, the ceiling of any strategy's correlation with it */
  full: number | null;
  /** mean within-episode Spearman of |δ̂ᴬ| and |δ̂ᴮ|: the ceiling of a rank measure against |δ| */
  abs_rank_half: Estimate;
  /** the units (token stretches) with both halves */
  units: number;
  /** share of the full-M δ̂ that are exactly 0 */
  zero_share: number | null;
}

export interface AccuracyReport {
  /** per strategy name */
  accuracy: Record<string, StrategyAccuracy>;
  /** the decisive share uniform credit would give, for comparison */
  uniform_share: Estimate;
  /** Σ (the unit's tokens / n)·δ̂ᴬ·δ̂ᴮ: the δ² uniform credit's weight lands on, what lift is measured from; absent in older records */
  uniform_delta2?: Estimate;
  /** episodes scored (every row on the same set: the probed episodes whose advantage A ≠ 0) and their prompts */
  episodes: number;
  prompts: number;
  /** trivial credit scored the same way, A·w with w = 1 − π(y_t), the entropy H_t, or the position t; absent in older records */
  baselines?: Record<string, StrategyAccuracy>;
  /** the split-half reliability; null where the probe kept no halves (an older engine's table) */
  reliability?: ProbeReliability | null;
  /** what limits the report: few prompts (t intervals), no halves */
  warnings?: string[];
  /**
   * The lift's ceiling: the lift of an oracle credit whose weights are one half's |δ̂|, scored on the other half's
   * unbiased δ², averaged over the two ways (src/engine/probe/ceiling.ts). Absent in probes that kept no half variances.
   */
  ceiling?: Estimate;
  /** The cancellation hypothesis and its 1 − π controls (src/engine/probe/cancellation.ts); null without a realized column. */
  cancellation?: CancellationReport | null;
}

/** A regression coefficient with its 95 % interval and p, standard errors clustered by prompt (t on prompts − 1 df). */
export interface ClusteredEstimate extends Estimate {
  p: number | null;
  prompts: number;
}

/**
 * The cancellation hypothesis (arXiv 2605.08666), from the realized credit (logging.realized_credit): the mean δ̂ of
 * the tokens the update boosted (realized > 0) minus that of the tokens it suppressed (realized < 0), within the
 * episodes with A > 0 and within those with A < 0, and over all; beside it the same split by the sign of the run's
 * own Â. Positive: the update raises the tokens worth more.
 */
export interface CancellationReport {
  within_positive: Estimate;
  within_negative: Estimate;
  realized: Estimate;
  advantage: Estimate;
  /**
   * The control: the same within-sign split, with "boosted" what a credit knowing only 1 − π would boost
   * (A·(1 − π_t − the episode's mean 1 − π) > 0). As large as the realized split: the realized one shows no more than
   * uncertainty does. Absent where the probe has no log-probs.
   */
  control_positive?: Estimate;
  control_negative?: Estimate;
  /**
   * The controlled test: the coefficient of [realized > 0] on δ̂ with a fixed effect per episode and per quintile of
   * 1 − π and 1 − π's slope, clustered by prompt (boosted against suppressed tokens of one episode and of like uncertainty); null where it
   * cannot be estimated.
   */
  stratified_positive?: ClusteredEstimate | null;
  stratified_negative?: ClusteredEstimate | null;
}

/** One probed step (`<run>/probes/step-N.json`). */
export interface ProbeAccuracy extends AccuracyReport {
  step: number;
  rollouts: number;
  positions: string;
  /** the run's own strategy: its Â are the token table's */
  run_strategy: string;
}

export interface AnalysisMeta {
  /** The run directory as given to the analysis. */
  run_dir: string;
  /**
   * Which contribution c the seed-doc-002 tables are over: episode, c = A·ℓ (seed doc 002's definition, the default),
   * or weighted, c = Â·ℓ (the logged column, with the strategy's weight). The weights table's |c| is always Â·ℓ.
   */
  contribution: 'episode' | 'weighted';
  /** From run.json; null when run.json is missing or unreadable. */
  run_id: string | null;
  name: string | null;
  /** `credit.strategy` (run.json's `strategy`, else config.yaml's). */
  strategy: string | null;
  /**
   * The strategy's own parameter from config.yaml, the one seed doc 001/002 vary (think_discount, epsilon,
   * credit_scale, entropy_temp or mask_percentile); null for strategies without one.
   */
  strategy_param: { name: string; value: number | string | boolean | null } | null;
  steps: StepRange;
  /** Distinct (step, episode) pairs in the analysed token rows. */
  episodes: number;
  /** Token rows analysed (after leaving out non-finite rows, see `notes`). */
  tokens: number;
  eval_success: EvalSuccess;
  /**
   * Training-batch success rate and mean reward over the analysed steps (mean of metrics.jsonl's per-step
   * `success_rate` / `reward_mean`; every step has the same number of episodes). `steps`: rows found.
   */
  training: { steps: number; success_rate: number | null; reward_mean: number | null };
  /** The regex that classed tokens as reasoning (source text), and whether it is design.md#semantics's default. */
  reasoning_regex: string;
  reasoning_regex_is_default: boolean;
  /** Mean |c| of filler tokens, of reasoning tokens, and filler ÷ reasoning (seed doc 002's baseline: 0.333, 0.254, 1.31). */
  filler_mean_abs_contribution: number | null;
  reasoning_mean_abs_contribution: number | null;
  filler_reasoning_ratio: number | null;
}

export interface StepRange {
  /** What was asked (`--from-step` / `--to-step`); null when open. */
  requested_from: number | null;
  requested_to: number | null;
  /** First and last logged step actually read. */
  from: number;
  to: number;
  /** Number of step tables read (fewer than to − from + 1 when logging.every > 1). */
  count: number;
}

export interface EvalSuccess {
  /** Greedy eval success logged before the first GRPO step (the first `eval_success` in metrics.jsonl). */
  before_grpo: number | null;
  /** The last `eval_success` logged at a step ≤ the analysed range's last step, and that step. */
  final: number | null;
  final_step: number | null;
}

/** Seed doc 002's "Contribution Statistics". */
export interface ContributionStats {
  count: number;
  mean: number | null;
  std: number | null;
  mean_abs: number | null;
  min: number | null;
  max: number | null;
}

/**
 * Seed doc 002's "T-Statistics (Corrected)": for each absolute position p, over the episodes that reach p,
 * t = mean(c) / (std(c) / √n) (a one-sample t-test of c = 0, as scipy's ttest_1samp).
 */
export interface PositionTStats {
  /** Positions with a t value (n ≥ 2 and std > 0). The fractions and the mean are over these. */
  positions: number;
  frac_abs_t_gt_3: number | null;
  frac_abs_t_lt_1_5: number | null;
  mean_abs_t: number | null;
  /** Positions left out because fewer than 2 episodes reach them, or because all their c are equal. */
  excluded_n_lt_2: number;
  excluded_zero_std: number;
  /** Says which positions were left out and why. */
  note: string;
  /** One entry per position from 0 to the longest episode's last, for plotting; t is null where excluded. */
  by_position: { position: number; n: number; mean: number | null; t: number | null }[];
}

/** One row of seed doc 002's "Full Position Analysis Table". */
export interface RelativePositionBin {
  bin: number;
  /** The bin's share of the episode: [lo, hi) of position / length. */
  lo: number;
  hi: number;
  count: number;
  mean_contribution: number | null;
  std_contribution: number | null;
  mean_abs_contribution: number | null;
  mean_logprob: number | null;
}

export interface SignGroup {
  episodes: number;
  tokens: number;
  mean_contribution: number | null;
  mean_abs_contribution: number | null;
}

/**
 * Seed doc 002's "Reward-Based Analysis", split on the episode's advantage A_i: > 0, = 0 and < 0. A = 0 (every episode
 * of the group got the same reward) has its own bucket: its tokens carry no GRPO gradient, and counting them with the
 * negative ones would pull that bucket's mean |c| toward 0.
 */
export interface RewardSignStats {
  positive: SignGroup;
  zero: SignGroup;
  negative: SignGroup;
}

export interface TokenTypeStats {
  count: number;
  /** count ÷ all tokens of the table it sits in (the run, or one position bin). */
  share: number | null;
  mean_abs_contribution: number | null;
  mean_contribution: number | null;
  mean_logprob: number | null;
  /**
   * Mean grad_norm: |Â|·√(1 − 2π + Σπ²)/T, the size of the gradient the token's term sends to the logits,
   * which |c| = |Â·ℓ| is not; null where the run logged none.
   */
  mean_grad_norm: number | null;
}

export interface TokenTypePositionBin {
  bin: number;
  lo: number;
  hi: number;
  filler: TokenTypeStats;
  reasoning: TokenTypeStats;
}

export interface TopToken {
  token_id: number;
  /** The token's text as logged (its first occurrence). */
  token: string;
  count: number;
  total_abs_contribution: number;
  mean_contribution: number;
  mean_abs_contribution: number;
  mean_logprob: number;
}

/** Seed doc 002's "Top Tokens by Type". Ties break by the other key (count, resp. total |c|), then by text. */
export interface TopTokenLists {
  by_total_abs_contribution: TopToken[];
  by_count: TopToken[];
}

/** The distribution of the strategy's weight w per section (design.md#semantics sections). */
export interface SectionWeightStats {
  count: number;
  mean: number | null;
  std: number | null;
  min: number | null;
  /** Percentiles with linear interpolation between order statistics (numpy's default). */
  p10: number | null;
  p50: number | null;
  p90: number | null;
  max: number | null;
  /** Mean |Â| (effective advantage) and mean |c| of the section's tokens. */
  mean_abs_effective_advantage: number | null;
  mean_abs_contribution: number | null;
}

export interface WeightTable {
  strategy: string | null;
  sections: Record<Section, SectionWeightStats>;
}

/** One run's line of seed doc 002's Appendix-B summary table. */
export interface AppendixBRow {
  run_id: string | null;
  name: string | null;
  /** e.g. "outcome_conditional (think_discount 0.75)", "none". */
  label: string;
  strategy: string | null;
  eval_success: number | null;
  eval_step: number | null;
  filler_mean_abs_contribution: number | null;
  reasoning_mean_abs_contribution: number | null;
  filler_reasoning_ratio: number | null;
}

/**
 * Eval success of the run against the baseline on the same instances (their per-instance eval tables at the step the
 * table shows): the difference with a 95 % bootstrap interval over instances and the exact sign-flip test over
 * instances, which with one seed per side is McNemar's exact test (compare.ts). It is conditional on these two
 * checkpoints: it says whether these two trained policies differ on these instances. Whether the methods train
 * differently needs runs of several seeds a side (`credit-lens compare`'s run-level gate); one seed each: exploratory.
 */
export interface EvalPairedTest {
  split: 'test' | 'validation';
  instances: number;
  /** run − baseline, as a fraction */
  diff: number;
  lo: number;
  hi: number;
  /** the eval step both runs were read at */
  step: number;
  /** instances only the baseline solves (b) and only the run solves (c) */
  b: number;
  c: number;
  p: number;
  /** the same p: one row, a family of one */
  p_adjusted: number;
  alpha: number;
  /** p_adjusted < alpha: these two checkpoints differ (not a verdict on the methods) */
  significant: boolean;
  /** the smallest difference this pair of runs detects with 80 % power */
  mde: number | null;
  /** one seed per side: always true here */
  exploratory: boolean;
}

/** Seed doc 002's Appendix B: a run next to its baseline, and run − baseline (null where either side is null). */
export interface AppendixBComparison {
  baseline: AppendixBRow;
  run: AppendixBRow;
  /** the paired test on eval success; null when either run has no per-instance eval table (eval_test_note says why) */
  eval_test?: EvalPairedTest | null;
  eval_test_note?: string;
  delta: {
    eval_success: number | null;
    filler_mean_abs_contribution: number | null;
    reasoning_mean_abs_contribution: number | null;
    filler_reasoning_ratio: number | null;
  };
}

/** What `credit-lens analyze --json` prints: the analysis, plus the comparison when `--baseline` is given. */
export interface AnalyzeReport extends CreditAnalysis {
  appendix_b?: AppendixBComparison;
}

/**
 * The cancellation test in one paragraph, the same in the CLI, the markdown and the analysis view: the raw split, the
 * 1 − π control beside it, and the controlled test, which is the one that can support the hypothesis.
 */
export function describeCancellation(c: CancellationReport, est: (e: Estimate) => string, p: (x: number) => string): string {
  const parts = [
    `Cancellation test (realized credit): δ̂ of the tokens the update boosted minus those it suppressed, within A > 0 ${est(c.within_positive)}, within A < 0 ${est(c.within_negative)}, over all ${est(c.realized)}; split by the sign of Â instead ${est(c.advantage)}.`,
  ];
  if (c.control_positive && c.control_negative)
    parts.push(
      `Control, a credit that knows only 1 − π (boosting the tokens more uncertain than their episode's mean where A > 0): within A > 0 ${est(c.control_positive)}, within A < 0 ${est(c.control_negative)}; the raw split shows no more than uncertainty does where it is no larger.`,
    );
  const strat = (x: ClusteredEstimate | null | undefined) => (x ? `${est(x)}, p ${x.p === null ? '—' : p(x.p)}` : 'not estimable');
  if (c.stratified_positive !== undefined || c.stratified_negative !== undefined)
    parts.push(
      `Controlled for 1 − π (boosted against suppressed tokens of one episode, within quintiles of 1 − π and beside its slope, clustered by prompt): within A > 0 ${strat(c.stratified_positive)}; within A < 0 ${strat(c.stratified_negative)}.`,
    );
  return parts.join(' ');
}

/** A mean over runs or warm starts (each run's value the mean over its probed steps) with its t interval and p against 0. */
export interface PooledEstimate {
  mean: number | null;
  lo: number | null;
  hi: number | null;
  /** the units it is over: runs, or warm starts where the report's unit is the start */
  runs: number;
  p: number | null;
  /** Holm-adjusted over the strategies (the lift over the best baseline only) */
  p_adj?: number | null;
  /** each unit's value (a run's, or a start's mean of its runs'), in order (units without one left out) */
  by_run: number[];
}

/** `analyze --probe <run> <run> …`: the probes of several runs pooled, the run as the unit (src/engine/probe/pooled.ts). */
export interface PooledProbeReport {
  /** what the intervals are over: runs, or shared warm starts (each the mean of its runs) */
  unit: 'run' | 'warm start';
  units: number;
  runs: { run_dir: string; name: string; start: string | null; steps: number[]; episodes: number; prompts: number; reliability: number | null }[];
  /** per strategy, per measure (lift, lift_excess, spearman_unbiased, placebo, kendall) */
  accuracy: Record<string, Record<string, PooledEstimate>>;
  baselines: Record<string, Record<string, PooledEstimate>>;
  /** the oracle credit's lift, the ceiling of the lift column (runs whose probes kept the halves' variances) */
  ceiling: PooledEstimate;
  /** the runs' own strategies (their rows are each run's Â) */
  run_strategies: string[];
  cancellation: Record<
    'within_positive' | 'within_negative' | 'control_positive' | 'control_negative' | 'stratified_positive' | 'stratified_negative',
    PooledEstimate
  > | null;
}
