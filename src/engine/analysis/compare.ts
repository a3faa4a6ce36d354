// One file although long: the groups, the tests and their power share one rule of significance, read from here by every view.
// `credit-lens compare <run-dir>... --baseline <run-dir>...`: eval success of groups of runs (one group per
// configuration, one run per seed) against a baseline group, on the same test instances (design.md#statistics). The verdict of a
// row ("significant" or n.s.) comes from the run-level gate, with the training run as its unit: the two-way variance
// of the difference of group means over seeds and instances, Student's t with Satterthwaite's df (core/significance.ts
// says why), Holm-adjusted over the comparison's rows, with its MDE and the seeds a difference needs. Beside it, labelled
// "conditional on these checkpoints", the instance-clustered bootstrap and exact sign-flip test: they answer whether
// these trained policies differ on these instances, not whether the method trains better policies. Which form the gate
// takes when runs share SFT warm starts is start_design.ts's; the tables as markdown are compare_markdown.ts's.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  ONE_START_NOTE,
  runGroup,
  type Adjustment,
  type CompareReport,
  type CompareRow,
  type ConditionalTest,
  type RunTest,
  type SeedInterval,
  type SeedsNeeded,
} from '../../protocol/compare';
export { seedsNeededText } from '../../protocol/compare';
import type { RunStatus, TaskIdentity } from '../../protocol';
import { headlineParams } from '../credit/catalog';
import { getDotted } from '../config/dotted';
import { UserError } from '../core/errors';
import { listEvalSteps, readEvalTable, evalFile, type EvalSplit } from '../rundir/eval_table';
import { readTokenTables } from '../rundir/arrow_tables';
import { listLoggedSteps, readRunInfo } from '../rundir/rundir';
import { readRunConfig } from '../rundir/run_config';
import {
  clusterBootstrap,
  clustersOf,
  holm,
  meanInterval,
  powerOf,
  runComponents,
  runLevelMde,
  runLevelTest,
  runsNeeded,
  signFlipP,
  type RunSide,
} from '../core/significance';
import { startComponents, startLevelMde, startLevelTest, startsNeeded } from '../core/start_gate';
import { computeTables } from './credit_tables';
import { startDesign, startName, strataOf, type StartSide } from './start_design';

export type { CompareReport, CompareRow, SeedInterval } from '../../protocol/compare';

/** `credit-lens compare --from-start`: one group of runs (a configuration over seeds) against each run's own SFT start. */
export interface GainRow {
  group: string;
  label: string;
  strategy: string | null;
  seeds: (number | null)[];
  /** the shared SFT warm starts its runs began from (0: each run trained its own) */
  starts: number;
  runs: string[];
  instances: number;
  /** the eval of step 0 (the policy GRPO started from: after SFT, or model.init_checkpoint), over seeds */
  start: SeedInterval;
  /** the run's last eval, over seeds */
  final: SeedInterval;
  /** the GRPO step of each run's last eval */
  final_steps: number[];
  /** the gain (last − start, each run against its own start) with the gate's 95 % t interval; null when withheld */
  diff: { mean: number; lo: number; hi: number } | null;
  /** the gate: the run is the unit (one-sample two-way t over the runs' gains); null with one run */
  run_test: RunTest | null;
  /** each run against its own start, instance-clustered: conditional on these checkpoints; b: only the start succeeded */
  conditional: ConditionalTest;
  /** the gate's p Holm-adjusted over the report's rows that have one; significant: p_adjusted < alpha */
  p_adjusted: number | null;
  significant: boolean | null;
  verdict_withheld: string | null;
  mde: number | null;
  seeds_needed: SeedsNeeded | null;
  exploratory: boolean;
  /** wall-clock minutes of each run (run.json started → ended), null when it did not end */
  minutes: (number | null)[];
  filler_abs_c: SeedInterval | null;
  reasoning_abs_c: SeedInterval | null;
  filler_reasoning_ratio: SeedInterval | null;
  /** the one SFT warm start every run of the group began from (the verdict is about it); null: several, or each its own */
  warm_start: string | null;
}

export interface GainReport {
  split: 'test' | 'validation';
  alpha: number;
  adjustment: Adjustment;
  power: number;
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
  status: RunStatus;
  /** what the run drew its instances from: run.json's task identity, else its config's task section */
  task: string | null;
  /** the warm start it began GRPO from (run.json's warm_start, else config.yaml's model.init_checkpoint), resolved; null: its own */
  start: string | null;
  /** how the start is named to a person: "sft.seed 2 (countdown-warm-start-…)" where the config says which SFT seed made it */
  startLabel: string | null;
}

const HEADLINE: Record<string, string> = headlineParams();

/** "outcome_conditional (think_discount 0.5)": the strategy and the parameter its sweeps vary (seed docs 001/002's labels). */
function strategyLabel(strategy: string | null, credit: Record<string, unknown> | undefined): string {
  if (!strategy) return '—';
  const key = HEADLINE[strategy];
  const v = key !== undefined ? getDotted(credit, key) : undefined;
  return v !== undefined && v !== null && typeof v !== 'object' ? `${strategy} (${key} ${v})` : strategy;
}

/** JSON has no NaN: an interval of one seed carries nulls. */
function jsonInterval(values: number[]): SeedInterval {
  const i = meanInterval(values.filter(Number.isFinite));
  const f = (x: number) => (Number.isFinite(x) ? x : null);
  return { mean: f(i.mean), lo: f(i.lo), hi: f(i.hi), n: i.n, half: f(i.half) };
}

/** A kept run's summary of its token tables (results_book.ts keeps this instead of megabytes of tables). */
export const TOKEN_TYPES_FILE = 'token_types.json';

/** Seed doc 002's filler and reasoning mean |c| of one run, from all its token tables; null when it logged none. */
export function runTokenTypeContributions(runDir: string): { filler: number; reasoning: number } | null {
  if (!listLoggedSteps(runDir, 'tokens').length) {
    const kept = join(runDir, TOKEN_TYPES_FILE);
    if (!existsSync(kept)) return null;
    const k = JSON.parse(readFileSync(kept, 'utf8')) as { filler?: unknown; reasoning?: unknown };
    return typeof k.filler === 'number' && typeof k.reasoning === 'number' ? { filler: k.filler, reasoning: k.reasoning } : null;
  }
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
  const cfg = readRunConfig(runDir);
  const strategy = info.strategy ?? (typeof cfg?.credit?.strategy === 'string' ? cfg.credit.strategy : null);
  const minutes = (Date.parse(info.ended ?? '') - Date.parse(info.started)) / 60_000;
  const start = info.warm_start ? resolve(info.warm_start) : cfg?.initCheckpoint ? resolve(runDir, '..', '..', cfg.initCheckpoint) : null;
  return {
    status: info.status,
    task: taskKey(info.task, cfg?.task ?? undefined, split),
    runDir,
    name: info.name,
    group: runGroup(info.name),
    seed: cfg?.seed ?? null,
    step: at,
    success,
    rate: hits / success.size,
    strategy,
    label: strategyLabel(strategy, cfg?.credit ?? undefined),
    minutes: Number.isFinite(minutes) ? minutes : null,
    start,
    startLabel:
      start && (info.warm_start && cfg?.sftSeed !== null && cfg?.sftSeed !== undefined ? `sft.seed ${cfg.sftSeed} (${startName(start)})` : startName(start)),
  };
}

/**
 * The instances a run's `split` comes from: the split's hash in run.json's task identity; for a run of an engine before
 * splits were recorded, its config's task section (the splits are a function of it).
 */
function taskKey(identity: TaskIdentity | undefined, task: Record<string, unknown> | undefined, split: EvalSplit): string | null {
  if (identity) return `${identity.name}: ${split} split ${split === 'test' ? identity.test_hash : (identity.validation_hash ?? '?')}`;
  if (!task) return null;
  const sorted = Object.fromEntries(Object.entries(task).sort(([a], [b]) => (a < b ? -1 : 1)));
  return `task ${JSON.stringify(sorted)}`;
}

function groupBy(runs: RunEval[]): Map<string, RunEval[]> {
  const m = new Map<string, RunEval[]>();
  for (const r of runs) m.set(r.group, [...(m.get(r.group) ?? []), r]);
  return m;
}

/** The instance ids every one of `runs` was evaluated on (in the first run's order); a note names what is left out. */
function commonInstances(runs: RunEval[], notes: string[]): string[] {
  const ids = [...runs[0].success.keys()].filter((id) => runs.every((r) => r.success.has(id)));
  for (const r of runs)
    if (r.success.size > ids.length)
      notes.push(
        `${r.name}: ${r.success.size - ids.length} of its instances are not in every compared run's eval (different task or split_seed?); they are left out`,
      );
  return ids;
}

const outcomes = (r: RunEval, ids: readonly string[]) => ids.map((id) => Number(r.success.get(id)));

/**
 * The instance-clustered test of run pairs (baseline, other), conditional on these checkpoints: the cluster bootstrap
 * and the exact sign-flip test with the instance as the unit (each with all its run pairs).
 */
function conditionalStats(pairsOf: [RunEval, RunEval][], ids: readonly string[], opts: CompareOptions, family: number) {
  const cl = clustersOf(pairsOf.map(([b, o]) => ids.map((id) => ({ id, baseline: b.success.get(id)!, other: o.success.get(id)! }))));
  const bs = clusterBootstrap(cl, { resamples: opts.resamples ?? 10_000, seed: 1 });
  const mde = powerOf(cl, (opts.alpha ?? 0.05) / Math.max(1, family), POWER).mde;
  return {
    mde: Number.isFinite(mde) ? mde : null,
    diff: { mean: bs.diff, lo: bs.lo, hi: bs.hi, resamples: bs.resamples },
    b: cl.b,
    c: cl.c,
    pairs: cl.pairs,
    instances: cl.d.length,
    p: signFlipP(cl),
  };
}

/**
 * The gate of a row from its sides (start_design.ts decides which form), the power figures it plans with, and what its
 * verdict is conditional on: the one warm start all its runs share, or why the design allows none.
 */
function gateStats(sides: StartSide[], baselineRuns: number) {
  const design = startDesign(sides);
  const runSides: RunSide[] = sides.map((s) => ({ sign: s.sign, runs: s.vectors }));
  // the runs' own components: the run-to-run and instance spreads every form reports
  const comp = runComponents(runSides);
  const runs = sides[0].vectors.length;
  const base = {
    runs_baseline: baselineRuns,
    runs,
    run_sd: comp.pooledRunVar === null ? null : Math.sqrt(comp.pooledRunVar),
    instances: comp.instances,
  };
  const warm_start = design.kind === 'one' ? startName(design.start) : null;
  if (design.kind === 'confounded') return { test: null, withheld: design.why, warm_start, plan: () => ({ mde: null, seeds_needed: null }) };
  if (design.kind === 'crossed') {
    const st = startLevelTest(strataOf(sides, design.starts));
    const sc = st?.components ?? startComponents(strataOf(sides, design.starts));
    const test: RunTest | null = st && {
      method: 'over warm starts',
      diff: st.diff,
      lo: st.lo,
      hi: st.hi,
      se: st.se,
      df: st.df,
      p: st.p,
      ...base,
      instance_sd: Math.sqrt(sc.instanceVar),
      starts: sc.starts,
      start_sd: Number.isFinite(sc.startVar) ? Math.sqrt(sc.startVar) : null,
      by_start: design.starts
        .map((start, k) => ({
          start: sides.flatMap((x) => x.starts.map((st, j) => (st === start ? (x.labels?.[j] ?? null) : null))).find((l) => l) ?? startName(start),
          diff: sc.startDiffs[k],
          runs: sides[0].starts.filter((x) => x === start).length,
          // the gain form has one side (each run against its own start): no baseline runs
          runs_baseline: sides.length > 1 ? sides[1].starts.filter((x) => x === start).length : 0,
        }))
        .sort((a, b) => a.start.localeCompare(b.start, 'en', { numeric: true })),
    };
    const plan = (observed: number, alpha: number, family: number, powerFor: number | undefined) => {
      const a = alpha / Math.max(1, family);
      const d = powerFor ?? Math.abs(observed);
      return {
        mde: startLevelMde(sc, sc.starts, a, POWER),
        seeds_needed:
          Number.isFinite(d) && d > 0
            ? {
                diff: d,
                basis: powerFor === undefined ? ('observed' as const) : ('power-for' as const),
                unit: 'starts' as const,
                seeds: startsNeeded(sc, d, a, POWER),
              }
            : null,
      };
    };
    return { test, withheld: null, warm_start, plan };
  }
  const rt = runLevelTest(runSides);
  const test: RunTest | null = rt && {
    method: 'two-way t',
    diff: rt.diff,
    lo: rt.lo,
    hi: rt.hi,
    se: rt.se,
    df: rt.df,
    p: rt.p,
    ...base,
    instance_sd: Math.sqrt(comp.instanceVar),
    starts: null,
    start_sd: null,
    by_start: null,
  };
  const plan = (observed: number, alpha: number, family: number, powerFor: number | undefined) => powerFields(comp, observed, alpha, family, powerFor);
  return { test, withheld: null, warm_start, plan };
}

/** Instances from which two identical outcome vectors are worth a note (fewer agree by chance too often). */
const MIN_INSTANCES_FOR_COPY = 32;

/** Runs a side below which a row gets no verdict: its Δ and interval are a hint, not a finding. */
export const MIN_RUNS_FOR_VERDICT = 3;

/** Why a row has no run-level verdict (`tested`: the test ran, but the sides are too small to call it). */
function withheldText(runs: number, baselineRuns: number | null, tested = false): string {
  const sides = baselineRuns === null ? `${runs} run` : `${runs} run${runs === 1 ? '' : 's'} against ${baselineRuns}`;
  if (runs < 2 || (baselineRuns !== null && baselineRuns < 2))
    return `${sides}: the run-level test needs at least 2 runs on each side to know the run-to-run variance; no verdict, only the seeds needed`;
  if (tested)
    return `${sides}: fewer than ${MIN_RUNS_FOR_VERDICT} runs on a side, so Δ and its interval are shown as a hint and no verdict is given (one or two seeds say little of the run-to-run variance)`;
  return `${sides}: the runs show no variance at all (identical success rates), so there is nothing to test a difference against`;
}

/** The power figures of a row at α over the family (Holm's strictest step): the gate's MDE, and the seeds a difference needs. */
function powerFields(comp: ReturnType<typeof runComponents>, observed: number, alpha: number, family: number, powerFor: number | undefined) {
  const a = alpha / Math.max(1, family);
  const mde = runLevelMde(comp, comp.runs, a, POWER);
  const d = powerFor ?? Math.abs(observed);
  const seeds_needed: SeedsNeeded | null =
    Number.isFinite(d) && d > 0
      ? { diff: d, basis: powerFor === undefined ? 'observed' : 'power-for', unit: 'seeds', seeds: runsNeeded(comp, d, a, POWER) }
      : null;
  return { mde, seeds_needed };
}

const POWER = 0.8;

/** The baseline row's one warm start, named as its rows' are (start_design.ts); null when its runs span several or own theirs. */
function sharedStart(runs: RunEval[]): string | null {
  const d = startDesign([{ starts: runs.map((r) => r.start) }]);
  return d.kind === 'one' ? startName(d.start) : null;
}

const WARM_START_NOTE = 'step 0 is the SFT warm start, before any GRPO step: the configurations have not trained yet, so no verdict on the methods';

/**
 * The latest step every run has an eval table at, when their last evals differ (undefined when they agree: each run's
 * last); a note says so. Refused when no step is common to all.
 */
function commonEvalStep(dirs: string[], notes: string[]): number | undefined {
  const lists = dirs.map((d) => ({ d, steps: listEvalSteps(d) }));
  const lasts = new Set(lists.map((l) => l.steps.at(-1)));
  if (lasts.size <= 1) return undefined;
  const common = lists[0].steps.filter((s) => lists.every((l) => l.steps.includes(s)));
  if (!common.length) throw new UserError('compare: the runs have no eval step in common; they cannot be paired');
  const at = common[common.length - 1];
  notes.push(
    `the runs' last evals are at different steps (${[...lasts].join(', ')}): every run is read at step ${at}, the latest all of them evaluated; its rows are exploratory`,
  );
  return at;
}

/**
 * Every run of a comparison must have been evaluated at the same step, on instances drawn from the same task splits:
 * anything else is refused, never pooled. A run that did not complete is allowed, but its rows are exploratory.
 */
function checkComparable(runs: RunEval[], notes: string[]): Set<string> {
  const steps = new Set(runs.map((r) => r.step));
  if (steps.size > 1)
    throw new UserError(
      `compare: the runs were last evaluated at different steps (${runs.map((r) => `${r.name} ${r.step}`).join(', ')}); pairing them would compare different training lengths`,
      'give --step N to read every run at step N (each must have an eval table there)',
    );
  const tasks = new Map<string, string[]>();
  for (const r of runs) if (r.task !== null) tasks.set(r.task, [...(tasks.get(r.task) ?? []), r.name]);
  if (tasks.size > 1)
    throw new UserError(
      `compare: the runs draw their eval instances from different task splits: ${[...tasks].map(([k, names]) => `${names.join(', ')} (${k})`).join('; ')}`,
      'compare runs of one task with the same task.split_seed and sizes',
    );
  // one run counted twice (the same seed from the same start) would shrink the run-to-run variance to nothing
  for (const [group, members] of groupBy(runs)) {
    const seen = new Map<string, RunEval>();
    for (const r of members) {
      if (r.seed === null) continue;
      const key = `${r.seed}\u0000${r.start ?? ''}`;
      const twin = seen.get(key);
      if (twin)
        throw new UserError(
          `compare: ${group} holds two runs of seed ${r.seed} from ${r.start ? `the warm start ${r.start}` : 'the same initialisation'} (${twin.runDir}, ${r.runDir}): one run counted twice would shrink the run-to-run variance`,
          'keep one of them (a resumed or copied run is the same run)',
        );
      seen.set(key, r);
    }
    // two copies of one run under different seed numbers: identical outcomes on every instance, some solved and some
    // not. Said, not refused: runs from one shared start with tiny updates can truly agree under greedy eval, and a copy
    // that kept its config (the likely case) is already refused above by its (seed, start).
    const byVector = new Map<string, string[]>();
    for (const r of members) {
      if (r.step === 0 || r.rate === 0 || r.rate === 1 || r.success.size < MIN_INSTANCES_FOR_COPY) continue;
      const v = [...r.success].map(([id, ok]) => `${id}:${ok ? 1 : 0}`).join(',');
      byVector.set(v, [...(byVector.get(v) ?? []), r.name]);
    }
    for (const [v, names] of byVector)
      if (names.length > 1)
        notes.push(
          `${group}: ${names.join(', ')} have the same outcome on every one of their ${v.split(',').length} instances; if some are copies of one run, keep one (a copy counted twice shrinks the run-to-run variance)`,
        );
  }
  // a verdict from one warm start is a verdict about that start: a start × method interaction is not measured
  const starts = new Set(runs.map((r) => r.start));
  if (starts.size === 1 && [...starts][0] !== null) notes.push(ONE_START_NOTE(startName([...starts][0]!)));
  const missing = runs.filter((r) => r.task === null);
  if (missing.length) notes.push(`${missing.map((r) => r.name).join(', ')}: no task identity or config.yaml; paired on instance ids alone`);
  const incomplete = new Set<string>();
  for (const r of runs)
    if (r.status !== 'completed') {
      notes.push(`${r.name} is ${r.status}, not completed: its group's rows are exploratory`);
      incomplete.add(r.group);
    }
  return incomplete;
}

/** The fields every row of a group has: its runs, label, instances and seed doc 002's |c| by token type. */
function groupFields(group: string, runs: RunEval[], opts: CompareOptions, notes: string[]) {
  const types = opts.tokenTypes === false ? [] : runs.map((x) => runTokenTypeContributions(x.runDir)).filter((x) => x !== null);
  if (types.length && types.length < runs.length)
    notes.push(`${group}: ${runs.length - types.length} of its runs logged no token tables; |c| is over the others`);
  if (runs.length < 3) notes.push(`${group}: ${runs.length} seed${runs.length === 1 ? '' : 's'}, fewer than 3: exploratory, a hint and not a finding`);
  return {
    group,
    label: [...new Set(runs.map((x) => x.label))].join(' / '),
    strategy: runs[0].strategy,
    seeds: runs.map((x) => x.seed),
    starts: new Set(runs.map((x) => x.start).filter((x) => x !== null)).size,
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
  /** read every run's eval at this step instead of its last */
  step?: number;
  /**
   * When the runs' last evals are at different steps: read every run at the latest step all of them evaluated, with a
   * note and the rows exploratory, instead of refusing (the sweep summary and Compare Runs, over runs that ended early)
   */
  commonStep?: boolean;
  /** a difference in success rate (0.05 = 5 points): each row says about how many seeds detect it with 80 % power */
  powerFor?: number;
  /** the looks at these groups so far, this one included (seeds added in rounds): p × looks before Holm */
  looks?: number;
}

/** What a comparison over several looks did to its p values. */
function looksNote(looks: number): string {
  return `these groups have been looked at ${looks} times (seeds added in rounds, each looked at): every p is multiplied by ${looks} before Holm (Bonferroni over the looks, valid whatever their schedule); a design fixed before the first look needs no such correction`;
}

export function compareSeeds(baselineDirs: string[], otherDirs: string[], opts: CompareOptions = {}): CompareReport {
  const split = opts.split ?? 'test';
  const alpha = opts.alpha ?? 0.05;
  if (!baselineDirs.length) throw new UserError('compare needs --baseline <run-dir> (one per seed)');
  // A glob over all runs (runs/sweep-*) also matches the baseline's: those are the baseline, not a group of their own.
  // So are the other seeds of the baseline's group: `--baseline runs/x-none-seed*` expands to one --baseline and the
  // rest of the glob as positional arguments.
  const baseSet = new Set(baselineDirs.map((d) => resolve(d)));
  const notes: string[] = [];
  const step = opts.step ?? (opts.commonStep ? commonEvalStep([...baselineDirs, ...otherDirs], notes) : undefined);
  const given = baselineDirs.map((d) => loadRunEval(d, split, step));
  const baseGroups = new Set(given.map((r) => r.group));
  const rest = uniqueDirs(otherDirs)
    .filter((d) => !baseSet.has(resolve(d)))
    .map((d) => loadRunEval(d, split, step));
  const base = [...given, ...rest.filter((r) => baseGroups.has(r.group))];
  const others = rest.filter((r) => !baseGroups.has(r.group));
  const incomplete = checkComparable([...base, ...others], notes);
  if (step !== undefined && opts.step === undefined) for (const r of [...base, ...others]) incomplete.add(r.group);
  const baseGroup = base[0].group;
  const baseExploratory = base.length < 3 || incomplete.has(baseGroup);
  const groups = [...groupBy(others)];
  const stats = groups.map(([, runs]) => {
    const ids = commonInstances([...base, ...runs], notes);
    const gate = gateStats(
      [
        { sign: 1, starts: runs.map((r) => r.start), labels: runs.map((r) => r.startLabel), vectors: runs.map((r) => outcomes(r, ids)) },
        { sign: -1, starts: base.map((r) => r.start), labels: base.map((r) => r.startLabel), vectors: base.map((r) => outcomes(r, ids)) },
      ],
      base.length,
    );
    // every baseline run against every run of the group: no seed pairing, and no baseline run counted twice
    const cond = conditionalStats(
      base.flatMap((b) => runs.map((r): [RunEval, RunEval] => [b, r])),
      ids,
      opts,
      groups.length,
    );
    return { ...gate, cond };
  });
  // Read at step 0, every run is its SFT warm start: no configuration has trained yet, so a difference there is the
  // warm starts' (their seeds), never a result about the methods. The numbers stay; the verdict is withheld.
  const warmStart = [...base, ...others].every((r) => r.step === 0);
  if (warmStart) notes.push(WARM_START_NOTE);
  // a verdict needs MIN_RUNS_FOR_VERDICT runs on each side; a smaller row keeps its numbers, out of Holm's family
  const callable = (k: number) => groups[k][1].length >= MIN_RUNS_FOR_VERDICT && base.length >= MIN_RUNS_FOR_VERDICT;
  const tested = warmStart ? [] : stats.flatMap((st, k) => (st.test && callable(k) ? [k] : []));
  const family = tested.length;
  const looks = opts.looks ?? 1;
  const adjusted = new Map(holm(tested.map((k) => Math.min(1, looks * stats[k].test!.p))).map((p, j) => [tested[j], p]));
  const condAdjusted = holm(stats.map((st) => st.cond.p));
  const row = (group: string, runs: RunEval[], k: number | null): CompareRow => {
    const st = k === null ? null : stats[k];
    const exploratory = baseExploratory || runs.length < 3 || incomplete.has(group);
    const p = k === null ? undefined : adjusted.get(k);
    const rt = warmStart ? null : (st?.test ?? null);
    return {
      ...groupFields(group, runs, opts, notes),
      baseline: st === null,
      step: runs[0].step,
      eval_success: jsonInterval(runs.map((x) => x.rate)),
      diff: rt && { mean: rt.diff, lo: rt.lo, hi: rt.hi },
      run_test: rt,
      conditional: st && k !== null ? { ...st.cond, p_adjusted: condAdjusted[k] } : null,
      p_adjusted: p ?? null,
      significant: p === undefined ? null : p < alpha,
      verdict_withheld: st && p === undefined ? (warmStart ? WARM_START_NOTE : (st.withheld ?? withheldText(runs.length, base.length, !!rt))) : null,
      ...(st && !warmStart ? st.plan(rt?.diff ?? st.cond.diff.mean, alpha, groups.length, opts.powerFor) : { mde: null, seeds_needed: null }),
      exploratory,
      warm_start: st ? st.warm_start : sharedStart(runs),
    };
  };
  const rows = [row(baseGroup, base, null), ...groups.map(([g, runs], k) => row(g, runs, k))];
  if (looks > 1) notes.push(looksNote(looks));
  return { split, alpha, adjustment: { method: 'holm', family, looks }, power: POWER, baseline: baseGroup, rows, notes: [...new Set(notes)] };
}

/**
 * `credit-lens compare <run-dir>... --from-start`: what GRPO gained over the policy it started from. Each run's last
 * eval is paired with its own step-0 eval (after SFT, or its model.init_checkpoint) on the same instances; each group
 * (one configuration over seeds) gets the gain per seed with a 95 % t interval over seeds (information), and the cluster
 * bootstrap and sign-flip test over instances, Holm-adjusted over the groups. Significant: p_adjusted < alpha.
 */
export function gainFromStart(dirs: string[], opts: CompareOptions = {}): GainReport {
  const split = opts.split ?? 'test';
  const alpha = opts.alpha ?? 0.05;
  if (!dirs.length) throw new UserError('compare --from-start needs at least one run directory');
  const notes: string[] = [];
  const finals = uniqueDirs(dirs).map((d) => loadRunEval(d, split, opts.step));
  const groups = [...groupBy(finals)];
  // Each run is paired with its own start: the seeds of one group must agree (step, splits); groups may differ (the
  // README's table puts four examples side by side).
  const incomplete = new Set<string>();
  for (const [, runs] of groups) for (const g of checkComparable(runs, notes)) incomplete.add(g);
  const parts = groups.map(([, runs]) => {
    // loadRunEval names a missing step-0 table ("no eval table at step 0").
    const starts = runs.map((r) => loadRunEval(r.runDir, split, 0));
    runs.forEach((r) => {
      if (r.step === 0) notes.push(`${r.name}: its last eval is at step 0 (no GRPO step evaluated yet); its gain is 0 by definition`);
    });
    const ids = commonInstances([...starts, ...runs], notes);
    // one side: each run's own gain on each instance (final − start), the run as the unit
    const gate = gateStats(
      [
        {
          sign: 1,
          starts: runs.map((r) => r.start),
          labels: runs.map((r) => r.startLabel),
          vectors: runs.map((r, k) => ids.map((id) => Number(r.success.get(id)) - Number(starts[k].success.get(id)))),
        },
      ],
      runs.length,
    );
    const cond = conditionalStats(
      runs.map((r, k): [RunEval, RunEval] => [starts[k], r]),
      ids,
      opts,
      groups.length,
    );
    return { starts, ...gate, cond };
  });
  const tested = parts.flatMap((x, k) => (x.test ? [k] : []));
  const family = tested.length;
  const looks = opts.looks ?? 1;
  const adjusted = new Map(holm(tested.map((k) => Math.min(1, looks * parts[k].test!.p))).map((p, j) => [tested[j], p]));
  const condAdjusted = holm(parts.map((x) => x.cond.p));
  const rows: GainRow[] = groups.map(([group, runs], k) => {
    const { starts, test, plan, cond, withheld, warm_start } = parts[k];
    const p = adjusted.get(k);
    return {
      ...groupFields(group, runs, opts, notes),
      start: jsonInterval(starts.map((x) => x.rate)),
      final: jsonInterval(runs.map((x) => x.rate)),
      final_steps: runs.map((x) => x.step),
      diff: test && { mean: test.diff, lo: test.lo, hi: test.hi },
      run_test: test,
      conditional: { ...cond, p_adjusted: condAdjusted[k] },
      p_adjusted: p ?? null,
      significant: p === undefined ? null : p < alpha,
      verdict_withheld: test ? null : (withheld ?? withheldText(runs.length, null)),
      ...plan(test?.diff ?? cond.diff.mean, alpha, groups.length, opts.powerFor),
      exploratory: runs.length < 3 || incomplete.has(group),
      minutes: runs.map((r) => r.minutes),
      warm_start,
    };
  });
  if (looks > 1) notes.push(looksNote(looks));
  return { split, alpha, adjustment: { method: 'holm', family, looks }, power: POWER, rows, notes: [...new Set(notes)] };
}

export { compareMarkdown, gainMarkdown } from './compare_markdown';
