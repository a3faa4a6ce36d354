// Seed doc 002's credit analysis, recomputed from a run's own logs (`credit-lens analyze`): contribution
// statistics, t-statistics per position, relative-position bins, reward sign, filler vs reasoning tokens, top
// tokens, and the strategy's weights per section. It works on the token table's typed-array columns in a few
// linear passes with no per-row objects, so a million rows take well under a second.
import { probeAccuracies } from '../rundir/probe_record';
import { headlineParams } from '../credit/catalog';
import type { RunInfo } from '../../protocol';
import type { AppendixBComparison, AppendixBRow, CreditAnalysis } from '../../protocol/analysis';
import { readTokenTables } from '../rundir/arrow_tables';
import { isUserError, UserError } from '../core/errors';
import { compareSeeds } from './compare';
import { listLoggedSteps, readMetrics, readRunInfo } from '../rundir/rundir';
import { REASONING_TOKEN_RE } from '../tasks/sections';
import { computeTables, diff, ratio, type ContributionKind } from './credit_tables';
import { checkRunDir, checkStep, compileRegex, evalSuccess, readConfigCredit, trainingSummary } from './inputs';

export interface AnalyzeOptions {
  /** Inclusive step range of the token tables to analyse; open ends when omitted. */
  fromStep?: number;
  toStep?: number;
  /** Source of a regex that replaces design.md#semantics's reasoning-token regex; matched against the trimmed token text. */
  reasoningRegex?: string;
  /** Length of each top-token list (default 20). */
  topK?: number;
  /** c = A·ℓ (episode, seed doc 002's definition; the default) or Â·ℓ (weighted, the logged column) */
  contribution?: ContributionKind;
  /** add each probed step's credit accuracy (`credit-lens probe`'s records) */
  probe?: boolean;
}

/** The parameter each strategy's sweeps vary (seed docs 001/002: "Outcome-conditional (0.75)", "Inverse logprob (0.1)"), from the catalog. */
const STRATEGY_PARAM: Record<string, string> = headlineParams();

// ---- public API ----

/** Seed doc 002's credit tables for one run, from its token tables (and episode tables, metrics, run.json, config.yaml). */
export function analyzeRun(runDir: string, opts: AnalyzeOptions = {}): CreditAnalysis {
  checkRunDir(runDir);
  checkStep('--from-step', opts.fromStep);
  checkStep('--to-step', opts.toStep);
  const topK = opts.topK ?? 20;
  if (!(Number.isInteger(topK) && topK >= 1)) throw new UserError(`--top-k must be a positive integer, got ${opts.topK}`);
  if (opts.fromStep !== undefined && opts.toStep !== undefined && opts.fromStep > opts.toStep) {
    throw new UserError(`empty step range: --from-step ${opts.fromStep} is after --to-step ${opts.toStep}`);
  }
  const re = compileRegex(opts.reasoningRegex);

  const logged = listLoggedSteps(runDir, 'tokens');
  if (logged.length === 0) {
    throw new UserError(`${runDir} has no token tables (tokens/step-*.arrow): the run logged none yet, or ran with logging.tokens: false`);
  }
  const lo = opts.fromStep ?? -Infinity;
  const hi = opts.toStep ?? Infinity;
  const steps = logged.filter((s) => s >= lo && s <= hi);
  if (steps.length === 0) {
    throw new UserError(
      `no token tables in steps ${opts.fromStep ?? '…'}–${opts.toStep ?? '…'}: ${runDir} logged steps ${logged[0]}–${logged[logged.length - 1]}`,
    );
  }

  const cols = readTokenTables(runDir, { fromStep: opts.fromStep, toStep: opts.toStep });
  const kind = opts.contribution ?? 'episode';
  const t = computeTables(cols, re, topK, kind);
  if (t.tokens === 0) t.notes.push('the token tables of this range hold no analysable rows; every statistic is empty.');
  if (re !== null) t.notes.push(`token types classified with the custom regex /${re.source}/ instead of the GRPO credit-assignment analysis's.`);

  const metrics = readMetrics(runDir);
  const info: RunInfo | null = readRunInfo(runDir);
  const credit = readConfigCredit(runDir);
  const strategy = info?.strategy ?? (typeof credit?.strategy === 'string' ? credit.strategy : null);
  const paramName = strategy ? STRATEGY_PARAM[strategy] : undefined;
  const paramValue = paramName !== undefined ? credit?.[paramName] : undefined;
  const filler = t.token_types.filler.mean_abs_contribution;
  const reasoning = t.token_types.reasoning.mean_abs_contribution;

  return {
    version: 1,
    meta: {
      run_dir: runDir,
      contribution: kind,
      run_id: info?.id ?? null,
      name: info?.name ?? null,
      strategy,
      strategy_param:
        paramName !== undefined && (typeof paramValue === 'number' || typeof paramValue === 'string' || typeof paramValue === 'boolean')
          ? { name: paramName, value: paramValue }
          : null,
      steps: { requested_from: opts.fromStep ?? null, requested_to: opts.toStep ?? null, from: steps[0], to: steps[steps.length - 1], count: steps.length },
      episodes: t.episodes,
      tokens: t.tokens,
      eval_success: evalSuccess(metrics, opts.toStep),
      training: trainingSummary(metrics, steps),
      reasoning_regex: (re ?? REASONING_TOKEN_RE).source,
      reasoning_regex_is_default: re === null,
      filler_mean_abs_contribution: filler,
      reasoning_mean_abs_contribution: reasoning,
      filler_reasoning_ratio: ratio(filler, reasoning),
    },
    contribution: t.contribution,
    position_t_stats: t.position_t_stats,
    relative_position: t.relative_position,
    reward_sign: t.reward_sign,
    token_types: t.token_types,
    token_types_by_position: t.token_types_by_position,
    top_tokens: t.top_tokens,
    weights: { strategy, sections: t.sections },
    notes: t.notes,
    ...(opts.probe ? { probes: probeAccuracies(runDir) } : {}),
  };
}

function appendixBRow(a: CreditAnalysis): AppendixBRow {
  const m = a.meta;
  const p = m.strategy_param;
  return {
    run_id: m.run_id,
    name: m.name,
    label: m.strategy === null ? (m.name ?? m.run_dir) : p ? `${m.strategy} (${p.name} ${p.value})` : m.strategy,
    strategy: m.strategy,
    eval_success: m.eval_success.final,
    eval_step: m.eval_success.final_step,
    filler_mean_abs_contribution: m.filler_mean_abs_contribution,
    reasoning_mean_abs_contribution: m.reasoning_mean_abs_contribution,
    filler_reasoning_ratio: m.filler_reasoning_ratio,
  };
}

/** Seed doc 002's Appendix-B summary: eval success, filler |c|, reasoning |c| and their ratio, and run − baseline. */
export function compareRuns(run: CreditAnalysis, baseline: CreditAnalysis): AppendixBComparison {
  const r = appendixBRow(run);
  const b = appendixBRow(baseline);
  // The paired test on the same instances, from both runs' last per-instance eval tables (compare.ts). With one run a
  // side it is conditional on these two checkpoints: whether these two policies differ, not whether the methods do.
  let evalTest: AppendixBComparison['eval_test'] = null;
  let note: string | undefined;
  try {
    // At the step the table shows (the last eval at or before --to-step), not the runs' last eval.
    const step = r.eval_step ?? undefined;
    const report = compareSeeds([baseline.meta.run_dir], [run.meta.run_dir], { resamples: 5000, tokenTypes: false, step });
    const row = report.rows[1];
    const c = row.conditional!;
    evalTest = {
      split: 'test',
      step: row.step,
      instances: c.instances,
      diff: c.diff.mean,
      lo: c.diff.lo,
      hi: c.diff.hi,
      b: c.b,
      c: c.c,
      p: c.p,
      p_adjusted: c.p_adjusted,
      alpha: report.alpha,
      significant: c.p_adjusted < report.alpha,
      mde: c.mde,
      exploratory: row.exploratory,
    };
  } catch (e) {
    if (!isUserError(e)) throw e;
    note = (e as Error).message;
  }
  return {
    baseline: b,
    run: r,
    eval_test: evalTest,
    ...(note ? { eval_test_note: note } : {}),
    delta: {
      eval_success: diff(r.eval_success, b.eval_success),
      filler_mean_abs_contribution: diff(r.filler_mean_abs_contribution, b.filler_mean_abs_contribution),
      reasoning_mean_abs_contribution: diff(r.reasoning_mean_abs_contribution, b.reasoning_mean_abs_contribution),
      filler_reasoning_ratio: diff(r.filler_reasoning_ratio, b.filler_reasoning_ratio),
    },
  };
}

// ---- CLI ----
