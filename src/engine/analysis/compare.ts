// `credit-lens compare <run-dir>... --baseline <run-dir>...`: eval success of groups of runs (one group per
// configuration, one run per seed) against a baseline group, on the same test instances (DESIGN §10). Each group
// gets its mean over seeds with a 95 % t interval; each non-baseline group gets the paired difference (bootstrap
// interval over instances, pooled over seeds) and McNemar's exact test on per-(seed, instance) success. A difference
// whose test is not significant at `alpha` is marked n.s. and nothing is ranked by it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { UserError } from '../core/errors';
import { listEvalSteps, readEvalTable, evalFile, type EvalSplit } from '../rundir/eval_table';
import { readRunInfo } from '../rundir/rundir';
import { mcnemarExact, meanInterval, pairedBootstrap, type Interval } from './significance';

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
}

export interface CompareRow {
  group: string;
  baseline: boolean;
  seeds: (number | null)[];
  runs: string[];
  instances: number;
  eval_success: Interval;
  /** vs the baseline; null for the baseline itself */
  diff: { mean: number; lo: number; hi: number; resamples: number } | null;
  mcnemar: { b: number; c: number; pairs: number; p: number } | null;
  significant: boolean | null;
}

export interface CompareReport {
  split: EvalSplit;
  alpha: number;
  baseline: string;
  rows: CompareRow[];
  notes: string[];
}

const SEED_PART = /[-_]seed[-_]?\d+/;

function configSeed(runDir: string): number | null {
  try {
    const cfg = parse(readFileSync(join(runDir, 'config.yaml'), 'utf8')) as { seed?: unknown };
    return typeof cfg?.seed === 'number' ? cfg.seed : null;
  } catch {
    return null;
  }
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
  t.instance_id.forEach((id, i) => { if (t.split[i] === split) success.set(id, t.success[i]); });
  if (!success.size) throw new UserError(`${runDir}: the eval table of step ${at} has no ${split} instances`);
  let hits = 0;
  for (const v of success.values()) if (v) hits++;
  return { runDir, name: info.name, group: info.name.replace(SEED_PART, ''), seed: configSeed(runDir), step: at, success, rate: hits / success.size };
}

function groupBy(runs: RunEval[]): Map<string, RunEval[]> {
  const m = new Map<string, RunEval[]>();
  for (const r of runs) m.set(r.group, [...(m.get(r.group) ?? []), r]);
  return m;
}

/** Pair each run of `g` with the baseline run of the same seed (else by position) and pool their common instances. */
function pairs(base: RunEval[], g: RunEval[], notes: string[]): { x: boolean[]; y: boolean[] } {
  const x: boolean[] = [];
  const y: boolean[] = [];
  g.forEach((r, k) => {
    const b = base.find((bb) => bb.seed !== null && bb.seed === r.seed) ?? base[k % base.length];
    if (b.seed !== r.seed) notes.push(`${r.name} (seed ${r.seed}) is paired with ${b.name} (seed ${b.seed}): no baseline run has its seed`);
    let common = 0;
    for (const [id, s] of r.success) {
      const bs = b.success.get(id);
      if (bs === undefined) continue;
      x.push(bs);
      y.push(s);
      common++;
    }
    if (common < r.success.size) notes.push(`${r.name}: ${r.success.size - common} of its instances are not in ${b.name}'s eval (different task or split_seed?)`);
  });
  return { x, y };
}

export function compareSeeds(baselineDirs: string[], otherDirs: string[], opts: { split?: EvalSplit; alpha?: number; resamples?: number } = {}): CompareReport {
  const split = opts.split ?? 'test';
  const alpha = opts.alpha ?? 0.05;
  if (!baselineDirs.length) throw new UserError('compare needs --baseline <run-dir> (one per seed)');
  const base = baselineDirs.map((d) => loadRunEval(d, split));
  const others = otherDirs.map((d) => loadRunEval(d, split));
  const notes: string[] = [];
  const baseGroup = base[0].group;
  const rows: CompareRow[] = [];
  const row = (group: string, runs: RunEval[], isBase: boolean): CompareRow => {
    const r: CompareRow = {
      group, baseline: isBase, seeds: runs.map((x) => x.seed), runs: runs.map((x) => x.runDir),
      instances: Math.max(...runs.map((x) => x.success.size)), eval_success: meanInterval(runs.map((x) => x.rate)),
      diff: null, mcnemar: null, significant: null,
    };
    if (runs.length < 3) notes.push(`${group}: ${runs.length} seed${runs.length === 1 ? '' : 's'}; an interval over seeds needs at least 3 to mean much`);
    if (!isBase) {
      const p = pairs(base, runs, notes);
      const m = mcnemarExact(p.x.map((v, i) => [v, p.y[i]] as const));
      const bs = pairedBootstrap(p.x.map(Number), p.y.map(Number), { resamples: opts.resamples ?? 10_000, seed: 1 });
      r.diff = { mean: bs.diff, lo: bs.lo, hi: bs.hi, resamples: bs.resamples };
      r.mcnemar = { b: m.b, c: m.c, pairs: p.x.length, p: m.p };
      r.significant = m.p < alpha;
    }
    return r;
  };
  rows.push(row(baseGroup, base, true));
  for (const [g, runs] of groupBy(others)) rows.push(row(g, runs, false));
  return { split, alpha, baseline: baseGroup, rows, notes: [...new Set(notes)] };
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}` : '—');

/** The table for a terminal or a README: significant differences in bold, the rest marked n.s. */
export function compareMarkdown(r: CompareReport): string {
  const lines = [
    `Eval success on the ${r.split} split: mean over seeds with a 95 % t interval; Δ vs ${r.baseline}: paired bootstrap 95 % interval over instances pooled over seeds; p: McNemar's exact test (α = ${r.alpha}).`,
    '',
    '| run group | seeds | instances | eval success % | Δ vs baseline (pp) | McNemar b / c | p |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    const ci = Number.isFinite(x.eval_success.half) ? ` ± ${pct(x.eval_success.half)}` : '';
    const diff = x.diff ? `${x.diff.mean >= 0 ? '+' : ''}${pct(x.diff.mean)} [${pct(x.diff.lo)}, ${pct(x.diff.hi)}]` : '(baseline)';
    const p = x.mcnemar ? (x.significant ? `**${x.mcnemar.p.toPrecision(2)}**` : `${x.mcnemar.p.toPrecision(2)} n.s.`) : '';
    lines.push(`| ${x.group} | ${x.seeds.map((s) => s ?? '?').join(', ')} | ${x.instances} | ${pct(x.eval_success.mean)}${ci} | ${x.significant ? `**${diff}**` : diff} | ${x.mcnemar ? `${x.mcnemar.b} / ${x.mcnemar.c}` : ''} | ${p} |`);
  }
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  return lines.join('\n');
}
