// A probe's tables come from one policy of one run: what they say holds for that policy. Pooled over runs (and over
// each run's probed steps), a strategy's accuracy becomes a finding about the method. The run is the unit: each run's
// value is the mean over its probed steps of the step's estimate (itself a mean over episodes, its interval over
// prompts, so prompts stay clustered within their run), and the pooled value is the mean over runs with Student's t
// interval and p on runs − 1 df. Runs weigh equally, whatever their episode counts: the question is about runs.
// Runs that began GRPO from shared SFT warm starts are not independent of each other (a start's runs share a policy's
// lineage), so where every run names its warm start and some start holds several runs, the start is the unit instead:
// each start's value is the mean of its runs', and the t interval is over the starts (start_gate.ts's reasoning).
import type { ClusteredEstimate, Estimate, PooledEstimate, PooledProbeReport, ProbeAccuracy } from '../../protocol/analysis';
import { holm, tTwoSided } from '../core/significance';
import { mean, meanVar } from '../core/stats';
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import { pText } from '../../protocol/compare';
import { formatNumber } from '../../protocol/number_format';
import { basename } from 'node:path';

export interface ProbedRun {
  run_dir: string;
  name: string;
  probes: readonly ProbeAccuracy[];
  /** the shared SFT warm start the run began GRPO from (run.json's warm_start); null: its own */
  start?: string | null;
}

/**
 * Mean over runs, t interval and two-sided p against 0 on units − 1 df; each run's value is the mean of its steps'.
 * With `starts` (one per run, a shared warm start each), each start's runs are averaged first and the start is the unit.
 */
export function pooledOverRuns(perRun: readonly (readonly (number | null)[])[], starts?: readonly string[]): PooledEstimate {
  const runValues = perRun.map(meanDefined);
  let values = runValues.filter((v): v is number => v !== null);
  if (starts) {
    const by = new Map<string, number[]>();
    runValues.forEach((v, i) => v !== null && by.set(starts[i], [...(by.get(starts[i]) ?? []), v]));
    values = [...by.values()].map(mean);
  }
  const n = values.length;
  if (!n) return { mean: null, lo: null, hi: null, runs: 0, p: null, by_run: [] };
  const { mean: m, var: v } = meanVar(values);
  if (n < 2) return { mean: m, lo: null, hi: null, runs: n, p: null, by_run: values };
  const se = Math.sqrt(v / n);
  const half = tQuantile(0.975, n - 1) * se;
  const p = se > 0 ? tTwoSided(m / se, n - 1) : m === 0 ? 1 : 0;
  return { mean: m, lo: m - half, hi: m + half, runs: n, p, by_run: values };
}

const meanOf = (e: Estimate | ClusteredEstimate | null | undefined) => e?.mean ?? null;

/** The mean of the values that are defined; null where none is. */
function meanDefined(xs: readonly (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null && Number.isFinite(x));
  return v.length ? mean(v) : null;
}

/** The rows a pooled report carries per strategy (and per trivial baseline): the linear headline first. */
const MEASURES = ['lift', 'lift_excess', 'spearman_unbiased', 'placebo', 'kendall'] as const;

/**
 * Every strategy's accuracy and the cancellation test, pooled over runs. A strategy is pooled over the runs whose
 * probes scored it; the run's own strategy is named as each run named it ("none (the run's)" rows pool only where every
 * run shares it).
 */
export function poolProbes(runs: readonly ProbedRun[]): PooledProbeReport {
  const withProbes = runs.filter((r) => r.probes.length);
  const names = (pick: (p: ProbeAccuracy) => Record<string, unknown> | undefined) => [
    ...new Set(withProbes.flatMap((r) => r.probes.flatMap((p) => Object.keys(pick(p) ?? {})))),
  ];
  // the start as the unit where every run names a shared start and some start holds more than one run
  const starts = withProbes.map((r) => r.start ?? null);
  const byStart = starts.every((s) => s !== null) && new Set(starts).size < starts.length ? (starts as string[]) : undefined;
  const pool = (pick: (p: ProbeAccuracy) => Estimate | ClusteredEstimate | null | undefined) =>
    pooledOverRuns(
      withProbes.map((r) => r.probes.map((p) => meanOf(pick(p)))),
      byStart,
    );
  const rows = (kind: 'accuracy' | 'baselines') =>
    Object.fromEntries(
      names((p) => p[kind]).map((name) => [
        name,
        Object.fromEntries(
          MEASURES.filter((m) => kind === 'accuracy' || m !== 'lift_excess').map((m) => [
            m,
            pool((p) => (p[kind]?.[name] as Record<string, Estimate | undefined> | undefined)?.[m]),
          ]),
        ),
      ]),
    );
  // the lift over the best baseline is the verdict-like row: its p is Holm-adjusted over the strategies
  const acc = rows('accuracy');
  const withP = Object.values(acc).filter((r) => r.lift_excess?.p != null);
  holm(withP.map((r) => r.lift_excess.p!)).forEach((q, i) => (withP[i].lift_excess.p_adj = q));
  const c = (key: 'within_positive' | 'within_negative' | 'control_positive' | 'control_negative' | 'stratified_positive' | 'stratified_negative') =>
    pool((p) => p.cancellation?.[key]);
  const hasCancellation = withProbes.some((r) => r.probes.some((p) => p.cancellation));
  return {
    unit: byStart ? 'warm start' : 'run',
    units: byStart ? new Set(byStart).size : withProbes.length,
    runs: runs.map((r) => ({
      run_dir: r.run_dir,
      name: r.name,
      start: r.start ?? null,
      steps: r.probes.map((p) => p.step),
      episodes: r.probes.reduce((a, p) => a + p.episodes, 0),
      prompts: r.probes.reduce((a, p) => a + p.prompts, 0),
      reliability: meanDefined(r.probes.map((p) => p.reliability?.full ?? null)),
    })),
    accuracy: acc,
    baselines: rows('baselines'),
    run_strategies: [...new Set(withProbes.flatMap((r) => r.probes.map((p) => p.run_strategy)))],
    ceiling: pool((p) => p.ceiling),
    cancellation: hasCancellation
      ? {
          within_positive: c('within_positive'),
          within_negative: c('within_negative'),
          control_positive: c('control_positive'),
          control_negative: c('control_negative'),
          stratified_positive: c('stratified_positive'),
          stratified_negative: c('stratified_negative'),
        }
      : null,
  };
}

const n4 = (x: number | null) => formatNumber(x, 3);

function cell(e: PooledEstimate | undefined, withP = false): string {
  if (!e || e.mean === null) return '—';
  const ci = e.lo === null ? '' : ` [${n4(e.lo)}, ${n4(e.hi)}]`;
  const p = withP && e.p !== null ? `, p ${pText(e.p)}${e.p_adj != null ? `, p_adj ${pText(e.p_adj)}${e.p_adj < 0.05 ? '' : ' n.s.'}` : ''}` : '';
  return `${n4(e.mean)}${ci}${p}`;
}

/** The pooled report as Markdown: the runs, the accuracy table, the cancellation test with its controls. */
export function pooledProbeMarkdown(r: PooledProbeReport): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const head = ['credit', 'lift', 'lift over the best baseline (p, Holm)', 'rank (attenuated)', 'placebo', 'Kendall τ', r.unit === 'run' ? 'runs' : 'starts'];
  const row = (label: string, m: Record<string, PooledEstimate>) => [
    label,
    cell(m.lift),
    cell(m.lift_excess, true),
    cell(m.spearman_unbiased),
    cell(m.placebo),
    cell(m.kendall),
    String(m.lift?.runs ?? 0),
  ];
  const out = [
    r.unit === 'run'
      ? `#### Credit accuracy over ${r.units} runs (the run as the unit)`
      : `#### Credit accuracy over ${r.runs.filter((x) => x.steps.length).length} runs from ${r.units} warm starts (the start as the unit)`,
    '',
    `_Each run's value is the mean over its probed steps of the step's mean over episodes (A ≠ 0)${r.unit === 'run' ? '; the pooled value is the mean over runs, with a t interval and p on runs − 1 df' : "; each warm start's value is the mean of its runs', and the pooled value the mean over starts, with a t interval and p on starts − 1 df (runs from one start are not independent)"}. The lift over the best baseline is Holm-adjusted over the strategies. Rank measures are attenuated by the probe's noise._`,
    '',
    ...r.runs.map(
      (x) =>
        `- ${x.name}${x.start ? ` (from ${basename(x.start)})` : ''}: step${x.steps.length === 1 ? '' : 's'} ${x.steps.join(', ') || '— (no probe)'}; ${x.episodes} episodes, ${x.prompts} prompts; reliability (all M) ${x.reliability === null ? '—' : formatNumber(x.reliability, 2)}`,
    ),
    '',
    line(head),
    line(head.map(() => '---')),
    ...Object.entries(r.accuracy).map(([name, m]) => line(row(r.run_strategies.includes(name) ? `${name} (the runs')` : name, m))),
    ...Object.entries(r.baselines).map(([name, m]) => line(row(`baseline: A·${name}`, m))),
    ...(r.ceiling.mean !== null
      ? [
          line([
            'ceiling: an oracle credit (weights from one half of the continuations, scored on the other)',
            cell(r.ceiling),
            '',
            '',
            '',
            '',
            String(r.ceiling.runs),
          ]),
        ]
      : []),
  ];
  const c = r.cancellation;
  if (c) {
    out.push(
      '',
      '#### The cancellation test, with its 1 − π controls',
      '',
      '| test | within A > 0 | within A < 0 |',
      '|---|---|---|',
      `| realized credit: δ̂ boosted − suppressed | ${cell(c.within_positive, true)} | ${cell(c.within_negative, true)} |`,
      `| control, a credit that knows only 1 − π | ${cell(c.control_positive, true)} | ${cell(c.control_negative, true)} |`,
      `| realized, controlled for 1 − π (within episodes and quintiles of 1 − π, beside its slope) | ${cell(c.stratified_positive, true)} | ${cell(c.stratified_negative, true)} |`,
    );
  }
  return out.join('\n') + '\n';
}
