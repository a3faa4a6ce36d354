// `credit-lens compare <run-dir>... --baseline <run-dir>...`: eval success of groups of runs (one group per
// configuration, one run per seed) against a baseline group, on the same test instances (DESIGN §10). Each group
// gets its mean over seeds with a 95 % t interval; each non-baseline group gets the paired difference (bootstrap
// interval over instances, pooled over seeds) and McNemar's exact test on per-(seed, instance) success. A difference
// whose test is not significant at `alpha` is marked n.s. and nothing is ranked by it.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { diffText, intervalText, pctText, pText, runGroup, sig3, type CompareReport, type CompareRow, type SeedInterval } from '../../protocol/compare';
import { headlineParams } from '../credit/catalog';
import { UserError } from '../core/errors';
import { listEvalSteps, readEvalTable, evalFile, type EvalSplit } from '../rundir/eval_table';
import { readTokenTables } from '../rundir/arrow_tables';
import { listLoggedSteps, readRunInfo } from '../rundir/rundir';
import { mcnemarExact, meanInterval, pairedBootstrap } from './significance';
import { computeTables } from './credit_tables';

export type { CompareReport, CompareRow, SeedInterval } from '../../protocol/compare';

/** `credit-lens compare --from-start`: one group of runs (a configuration over seeds) against each run's own SFT start. */
export interface GainRow {
  group: string;
  label: string;
  strategy: string | null;
  seeds: (number | null)[];
  runs: string[];
  instances: number;
  /** the eval of step 0 (the policy GRPO started from: after SFT, or model.init_checkpoint), over seeds */
  start: SeedInterval;
  /** the run's last eval, over seeds */
  final: SeedInterval;
  /** the GRPO step of each run's last eval */
  final_steps: number[];
  /** final − start per seed, mean ± the 95 % t half-width over seeds: the gain "over 3 seeds" */
  gain: SeedInterval;
  /** the same gain as a paired bootstrap over (seed, instance) pairs */
  pooled: { mean: number; lo: number; hi: number; resamples: number };
  /** McNemar's exact test on per-(seed, instance) success; b: only the start succeeded, c: only the final policy */
  mcnemar: { b: number; c: number; pairs: number; p: number };
  /** McNemar p < alpha and the seeds' interval excludes 0 */
  significant: boolean;
  /** wall-clock minutes of each run (run.json started → ended), null when it did not end */
  minutes: (number | null)[];
  filler_abs_c: SeedInterval | null;
  reasoning_abs_c: SeedInterval | null;
  filler_reasoning_ratio: SeedInterval | null;
}

export interface GainReport {
  split: 'test' | 'validation';
  alpha: number;
  rows: GainRow[];
  notes: string[];
}

export interface RunEval {
  runDir: string;
  name: string;
  /** the group: the run name without its seed part (`-seed2`) */
  group: string;
  seed: number | null;
  step: number;
  /** instance id → success, on the chosen split */
  success: Map<string, boolean>;
  rate: number;
  strategy: string | null;
  label: string;
  /** wall-clock minutes from run.json (started → ended), null while it has not ended */
  minutes: number | null;
}

function readConfig(runDir: string): { seed?: unknown; credit?: Record<string, unknown> } | null {
  try {
    return parse(readFileSync(join(runDir, 'config.yaml'), 'utf8')) as { seed?: unknown; credit?: Record<string, unknown> };
  } catch {
    return null;
  }
}

const HEADLINE: Record<string, string> = headlineParams();

/** "outcome_conditional (think_discount 0.5)": the strategy and the parameter its sweeps vary (seed docs 001/002's labels). */
function strategyLabel(strategy: string | null, credit: Record<string, unknown> | undefined): string {
  if (!strategy) return '—';
  const key = HEADLINE[strategy];
  const v = key !== undefined ? credit?.[key] : undefined;
  return v !== undefined && v !== null && typeof v !== 'object' ? `${strategy} (${key} ${v})` : strategy;
}

/** JSON has no NaN: an interval of one seed carries nulls. */
function jsonInterval(values: number[]): SeedInterval {
  const i = meanInterval(values.filter(Number.isFinite));
  const f = (x: number) => (Number.isFinite(x) ? x : null);
  return { mean: f(i.mean), lo: f(i.lo), hi: f(i.hi), n: i.n, half: f(i.half) };
}

/** Seed doc 002's filler and reasoning mean |c| of one run, from all its token tables; null when it logged none. */
export function runTokenTypeContributions(runDir: string): { filler: number; reasoning: number } | null {
  if (!listLoggedSteps(runDir, 'tokens').length) return null;
  const t = computeTables(readTokenTables(runDir), null, 1).token_types;
  const f = t.filler.mean_abs_contribution;
  const r = t.reasoning.mean_abs_contribution;
  return f === null || r === null ? null : { filler: f, reasoning: r };
}

/** A run's last eval table on `split` (or at `step`). */
export function loadRunEval(runDir: string, split: EvalSplit, step?: number): RunEval {
  const info = readRunInfo(runDir);
  if (!info) throw new UserError(`${runDir}: not a run directory (no readable run.json)`);
  const steps = listEvalSteps(runDir);
  if (!steps.length) throw new UserError(`${runDir}: no per-instance eval tables (eval/step-*.arrow); it was trained by an engine that did not write them`);
  const at = step ?? steps[steps.length - 1];
  if (!steps.includes(at)) throw new UserError(`${runDir}: no eval table at step ${at} (steps: ${steps.join(', ')})`);
  const t = readEvalTable(evalFile(runDir, at));
  const success = new Map<string, boolean>();
  t.instance_id.forEach((id, i) => {
    if (t.split[i] === split) success.set(id, t.success[i]);
  });
  if (!success.size) throw new UserError(`${runDir}: the eval table of step ${at} has no ${split} instances`);
  let hits = 0;
  for (const v of success.values()) if (v) hits++;
  const cfg = readConfig(runDir);
  const strategy = info.strategy ?? (typeof cfg?.credit?.strategy === 'string' ? cfg.credit.strategy : null);
  const minutes = (Date.parse(info.ended ?? '') - Date.parse(info.started)) / 60_000;
  return {
    runDir,
    name: info.name,
    group: runGroup(info.name),
    seed: typeof cfg?.seed === 'number' ? cfg.seed : null,
    step: at,
    success,
    rate: hits / success.size,
    strategy,
    label: strategyLabel(strategy, cfg?.credit),
    minutes: Number.isFinite(minutes) ? minutes : null,
  };
}

function groupBy(runs: RunEval[]): Map<string, RunEval[]> {
  const m = new Map<string, RunEval[]>();
  for (const r of runs) m.set(r.group, [...(m.get(r.group) ?? []), r]);
  return m;
}

/** The baseline run paired with run `k` of a group: the one of the same seed (the one at `k` first), else by position. */
function partner(base: RunEval[], r: RunEval, k: number): RunEval {
  if (base[k] && base[k].seed === r.seed) return base[k];
  return base.find((bb) => bb.seed !== null && bb.seed === r.seed) ?? base[k % base.length];
}

/** Pair each run of `g` with its baseline run (`partner`) and pool their common instances. */
function pairs(base: RunEval[], g: RunEval[], notes: string[]): { x: boolean[]; y: boolean[] } {
  const x: boolean[] = [];
  const y: boolean[] = [];
  g.forEach((r, k) => {
    const b = partner(base, r, k);
    if (b.seed !== r.seed) notes.push(`${r.name} (seed ${r.seed}) is paired with ${b.name} (seed ${b.seed}): no baseline run has its seed`);
    let common = 0;
    for (const [id, s] of r.success) {
      const bs = b.success.get(id);
      if (bs === undefined) continue;
      x.push(bs);
      y.push(s);
      common++;
    }
    if (common < r.success.size)
      notes.push(`${r.name}: ${r.success.size - common} of its instances are not in ${b.name}'s eval (different task or split_seed?)`);
  });
  return { x, y };
}

/**
 * A group against its baseline runs (or its runs against their own starts), paired run by run: the paired bootstrap
 * and McNemar's test over the pooled (seed, instance) pairs, and the per-run difference with a t interval over seeds.
 */
function pairedStats(base: RunEval[], runs: RunEval[], opts: CompareOptions, notes: string[]) {
  const p = pairs(base, runs, notes);
  const m = mcnemarExact(p.x.map((v, i) => [v, p.y[i]] as const));
  const bs = pairedBootstrap(p.x.map(Number), p.y.map(Number), { resamples: opts.resamples ?? 10_000, seed: 1 });
  return {
    pooled: { mean: bs.diff, lo: bs.lo, hi: bs.hi, resamples: bs.resamples },
    overSeeds: jsonInterval(runs.map((x, k) => x.rate - partner(base, x, k).rate)),
    mcnemar: { b: m.b, c: m.c, pairs: p.x.length, p: m.p },
  };
}

/** The fields every row of a group has: its runs, label, instances and seed doc 002's |c| by token type. */
function groupFields(group: string, runs: RunEval[], opts: CompareOptions, notes: string[]) {
  const types = opts.tokenTypes === false ? [] : runs.map((x) => runTokenTypeContributions(x.runDir)).filter((x) => x !== null);
  if (types.length && types.length < runs.length)
    notes.push(`${group}: ${runs.length - types.length} of its runs logged no token tables; |c| is over the others`);
  if (runs.length < 3) notes.push(`${group}: ${runs.length} seed${runs.length === 1 ? '' : 's'}; an interval over seeds needs at least 3 to mean much`);
  return {
    group,
    label: [...new Set(runs.map((x) => x.label))].join(' / '),
    strategy: runs[0].strategy,
    seeds: runs.map((x) => x.seed),
    runs: runs.map((x) => x.runDir),
    instances: Math.max(...runs.map((x) => x.success.size)),
    filler_abs_c: types.length ? jsonInterval(types.map((x) => x.filler)) : null,
    reasoning_abs_c: types.length ? jsonInterval(types.map((x) => x.reasoning)) : null,
    filler_reasoning_ratio: types.length ? jsonInterval(types.map((x) => x.filler / x.reasoning)) : null,
  };
}

/** The directories as given, each once (two spellings of one folder count once). */
function uniqueDirs(dirs: string[]): string[] {
  const seen = new Set<string>();
  return dirs.filter((d) => {
    const k = resolve(d);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

export interface CompareOptions {
  split?: EvalSplit;
  alpha?: number;
  resamples?: number;
  /** read each run's token tables for seed doc 002's filler / reasoning |c| (default true) */
  tokenTypes?: boolean;
}

export function compareSeeds(baselineDirs: string[], otherDirs: string[], opts: CompareOptions = {}): CompareReport {
  const split = opts.split ?? 'test';
  const alpha = opts.alpha ?? 0.05;
  if (!baselineDirs.length) throw new UserError('compare needs --baseline <run-dir> (one per seed)');
  // A glob over all runs (runs/sweep-*) also matches the baseline's: those are the baseline, not a group of their own.
  // So are the other seeds of the baseline's group: `--baseline runs/x-none-seed*` expands to one --baseline and the
  // rest of the glob as positional arguments.
  const baseSet = new Set(baselineDirs.map((d) => resolve(d)));
  const given = baselineDirs.map((d) => loadRunEval(d, split));
  const baseGroups = new Set(given.map((r) => r.group));
  const rest = uniqueDirs(otherDirs)
    .filter((d) => !baseSet.has(resolve(d)))
    .map((d) => loadRunEval(d, split));
  const base = [...given, ...rest.filter((r) => baseGroups.has(r.group))];
  const others = rest.filter((r) => !baseGroups.has(r.group));
  const notes: string[] = [];
  const baseGroup = base[0].group;
  const rows: CompareRow[] = [];
  const row = (group: string, runs: RunEval[], isBase: boolean): CompareRow => {
    const r: CompareRow = {
      ...groupFields(group, runs, opts, notes),
      baseline: isBase,
      eval_success: jsonInterval(runs.map((x) => x.rate)),
      diff: null,
      diff_seeds: null,
      mcnemar: null,
      significant: null,
    };
    if (!isBase) {
      const st = pairedStats(base, runs, opts, notes);
      r.diff = st.pooled;
      r.diff_seeds = st.overSeeds;
      r.mcnemar = st.mcnemar;
      r.significant = st.mcnemar.p < alpha;
    }
    return r;
  };
  rows.push(row(baseGroup, base, true));
  for (const [g, runs] of groupBy(others)) rows.push(row(g, runs, false));
  return { split, alpha, baseline: baseGroup, rows, notes: [...new Set(notes)] };
}

/** The table for a terminal or a README: significant differences in bold, the rest marked n.s. */
export function compareMarkdown(r: CompareReport): string {
  const lines = [
    `Eval success on the ${r.split} split: mean over seeds ± the 95 % t half-width; Δ vs ${r.baseline}: paired bootstrap 95 % interval over instances pooled over seeds; p: McNemar's exact test (α = ${r.alpha}); Δ over seeds: the difference from the same seed's baseline run, mean [95 % t interval over seeds], which also counts how much the seeds disagree; |c|: seed doc 002's mean |contribution| of filler and reasoning tokens over all logged steps, mean ± 95 % t half-width over seeds. Rows are in the order given, not ranked.`,
    '',
    '| run group | strategy | seeds | instances | eval success % | Δ vs baseline (pp) | McNemar b / c | p | Δ over seeds (pp) | filler \\|c\\| | reasoning \\|c\\| | filler ÷ reasoning |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    const diff = x.diff ? diffText(x.diff.mean, x.diff.lo, x.diff.hi) : '(baseline)';
    const p = x.mcnemar ? (x.significant ? `**${pText(x.mcnemar.p)}**` : `${pText(x.mcnemar.p)} n.s.`) : '';
    lines.push(
      `| ${x.group} | ${x.label} | ${x.seeds.map((s) => s ?? '?').join(', ')} | ${x.instances} | ${intervalText(x.eval_success, pctText)} | ${x.significant ? `**${diff}**` : diff} | ${x.mcnemar ? `${x.mcnemar.b} / ${x.mcnemar.c}` : ''} | ${p} | ${x.diff_seeds ? diffText(x.diff_seeds.mean, x.diff_seeds.lo, x.diff_seeds.hi) : ''} | ${intervalText(x.filler_abs_c, sig3)} | ${intervalText(x.reasoning_abs_c, sig3)} | ${intervalText(x.filler_reasoning_ratio, sig3)} |`,
    );
  }
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  return lines.join('\n');
}

/**
 * `credit-lens compare <run-dir>... --from-start`: what GRPO gained over the policy it started from. Each run's last
 * eval is paired with its own step-0 eval (after SFT, or its model.init_checkpoint) on the same instances; each group
 * (one configuration over seeds) gets the gain per seed with a 95 % t interval over seeds, the paired bootstrap and
 * McNemar's test over (seed, instance) pairs. A gain is significant when both the test and the seeds' interval say so.
 */
export function gainFromStart(dirs: string[], opts: CompareOptions = {}): GainReport {
  const split = opts.split ?? 'test';
  const alpha = opts.alpha ?? 0.05;
  if (!dirs.length) throw new UserError('compare --from-start needs at least one run directory');
  const notes: string[] = [];
  const finals = uniqueDirs(dirs).map((d) => loadRunEval(d, split));
  const rows: GainRow[] = [];
  for (const [group, runs] of groupBy(finals)) {
    // loadRunEval names a missing step-0 table ("no eval table at step 0").
    const starts = runs.map((r) => loadRunEval(r.runDir, split, 0));
    runs.forEach((r) => {
      if (r.step === 0) notes.push(`${r.name}: its last eval is at step 0 (no GRPO step evaluated yet); its gain is 0 by definition`);
    });
    const { pooled, overSeeds: gain, mcnemar } = pairedStats(starts, runs, opts, notes);
    rows.push({
      ...groupFields(group, runs, opts, notes),
      start: jsonInterval(starts.map((x) => x.rate)),
      final: jsonInterval(runs.map((x) => x.rate)),
      final_steps: runs.map((x) => x.step),
      gain,
      pooled,
      mcnemar,
      significant: mcnemar.p < alpha && gain.lo !== null && gain.hi !== null && (gain.lo > 0 || gain.hi < 0),
      minutes: runs.map((r) => r.minutes),
    });
  }
  return { split, alpha, rows, notes: [...new Set(notes)] };
}

/** The gain table for a terminal or a README. */
export function gainMarkdown(r: GainReport): string {
  const lines = [
    `Eval success on the ${r.split} split at step 0 (the policy GRPO started from) and at each run's last eval, mean over seeds ± the 95 % t half-width; gain: last − start per seed, mean [95 % t interval over seeds]; pooled: paired bootstrap 95 % interval over (seed, instance) pairs; p: McNemar's exact test (α = ${r.alpha}). A gain is in bold when the test and the seeds' interval both exclude 0. |c|: seed doc 002's mean |contribution| over all logged steps.`,
    '',
    '| run group | strategy | seeds | instances | start % | after GRPO % | gain (pp), over seeds | pooled (pp) | McNemar b / c | p | filler ÷ reasoning \\|c\\| | minutes per run |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    const g = diffText(x.gain.mean, x.gain.lo, x.gain.hi);
    const mins = x.minutes.map((m) => (m === null ? '—' : m.toFixed(1))).join(', ');
    lines.push(
      `| ${x.group} | ${x.label} | ${x.seeds.map((s) => s ?? '?').join(', ')} | ${x.instances} | ${intervalText(x.start, pctText)} | ${intervalText(x.final, pctText)} | ${x.significant ? `**${g}**` : `${g} n.s.`} | ${diffText(x.pooled.mean, x.pooled.lo, x.pooled.hi)} | ${x.mcnemar.b} / ${x.mcnemar.c} | ${pText(x.mcnemar.p)} | ${intervalText(x.filler_reasoning_ratio, sig3)} | ${mins} |`,
    );
  }
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  return lines.join('\n');
}
