// Sweep expansion: a config's `sweep.grid` (or a grid passed in) becomes a list of single-run configs.
// Two grid forms (see GRID_DESCRIPTION in config/schema.ts): one mapping = one cartesian product; a list of mappings =
// the concatenation of each one's product. The list form exists because seed doc 001's comparison is not a product:
// a baseline, outcome_conditional at three think_discounts, inverse_logprob at three epsilons, and so on.
import { type CreditConfig, type StrategyName, type SweepGrid, getDotted, gridValues, setDotted, validateConfig } from '../config/config';
import { strategyKeys, sweepValues } from '../credit/catalog';
import type { SweepRunDescription } from '../../protocol/sweep_record';
import { UserError } from '../core/errors';

/** The credit.* keys each strategy reads (design.md#semantics), from the strategy catalog. A key listed for no strategy is read by all of them. */
export const STRATEGY_PARAMS: Record<StrategyName, string[]> = strategyKeys();

export interface SweepRun {
  name: string;
  overrides: Record<string, unknown>;
  config: CreditConfig;
}

// `credit.attribution` (a whole sub-mapping) is attribution's; `credit` as a whole belongs to no one strategy.
function touches(key: string, param: string): boolean {
  return key === param || key.startsWith(`${param}.`) || (key !== 'credit' && param.startsWith(`${key}.`));
}

const ALL_PARAMS = Object.values(STRATEGY_PARAMS).flat();

function unusedByStrategy(key: string, strategy: StrategyName): boolean {
  return ALL_PARAMS.some((p) => touches(key, p)) && !STRATEGY_PARAMS[strategy].some((p) => touches(key, p));
}

// Short names for run-name suffixes; other keys use their initials (think_discount → td).
const ABBREV: Record<string, string> = {
  epsilon: 'eps',
  kl_beta: 'kl',
  clip_eps: 'clip',
  clip_eps_high: 'cliph',
  temperature: 'temp',
  top_p: 'topp',
  numbers: 'n',
  seed: 'seed',
  steps: 'steps',
  lr: 'lr',
};

function abbrev(key: string): string {
  const leaf = key.split('.').pop()!;
  if (ABBREV[leaf]) return ABBREV[leaf];
  if (leaf.includes('_'))
    return leaf
      .split('_')
      .filter(Boolean)
      .map((w) => w[0])
      .join('');
  return leaf.length <= 6 ? leaf : leaf.slice(0, 4);
}

/** Abbreviations for every key of the grid, made longer where two keys would share one (sft.lr, grpo.lr). */
function abbreviations(keys: string[]): Map<string, string> {
  const out = new Map(keys.map((k) => [k, abbrev(k)]));
  const clash = (k: string) => keys.some((o) => o !== k && out.get(o) === out.get(k));
  for (const k of keys.filter(clash)) out.set(k, `${k.split('.').slice(0, -1).join('_')}_${abbrev(k)}`.replace(/^_/, ''));
  for (const k of keys.filter(clash)) out.set(k, k.replace(/\./g, '_'));
  return out;
}

function valueLabel(v: unknown): string {
  if (Array.isArray(v)) return v.map(valueLabel).join('-');
  if (v !== null && typeof v === 'object') {
    return Object.entries(v)
      .map(([k, x]) => `${abbrev(k)}${valueLabel(x)}`)
      .join('-');
  }
  if (typeof v === 'string') return v.split(/[\\/]/).filter(Boolean).pop() ?? v;
  return String(v);
}

function label(key: string, v: unknown, abbr: string): string {
  // Enum-like strings (strategy, provider, reward) name themselves.
  if (typeof v === 'string') return valueLabel(v);
  if (typeof v === 'boolean') return v ? abbr : `no_${abbr}`;
  return `${abbr}${valueLabel(v)}`;
}

/** The values a sweep offers for each strategy's knob (the catalog's sweepValues: seed doc 001's comparison). */
export const KNOB_VALUES: Record<string, number[]> = sweepValues();

function describeValue(v: unknown): string | number | boolean | null {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : JSON.stringify(v);
}

/**
 * What a sweep summary row shows for a run: its strategy, and its overrides plus the strategy's own knob even where
 * the grid does not vary it (outcome_conditional at the config's 0.5). The extension's sweeps and the command line's
 * sweep record both describe runs with this.
 */
export function describeSweepRun(r: SweepRun): SweepRunDescription {
  const strategy = r.config.credit.strategy;
  const knobs = STRATEGY_PARAMS[strategy].filter((k) => KNOB_VALUES[k]).map((k) => [k, getDotted(r.config, k)] as const);
  const params = Object.fromEntries(
    [...knobs, ...Object.entries(r.overrides)].filter(([k]) => k !== 'name' && k !== 'credit.strategy').map(([k, v]) => [k, describeValue(v)]),
  );
  return { strategy, params };
}

function sanitize(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]+/g, '_');
}

function product(lists: unknown[][]): unknown[][] {
  return lists.reduce<unknown[][]>((acc, list) => acc.flatMap((row) => list.map((v) => [...row, v])), [[]]);
}

/**
 * Expands a grid (default: config.sweep.grid) into runs named `<name>-<suffix>`, e.g.
 * countdown-baseline-outcome_conditional-td0.25. A credit.* parameter that the run's strategy does not use is
 * dropped from its overrides and name, and runs that become identical are kept once. Each run's config is
 * re-validated, has name = the run name and no sweep; all problems throw one UserError.
 */
export function expandSweep(config: CreditConfig, grid: SweepGrid | undefined = config.sweep?.grid): SweepRun[] {
  const points = withWarmStarts(config, expandGrid(config, grid));
  const seeds = config.sweep?.seeds;
  if (seeds === undefined) return points;
  // Every grid point once per seed: the runs of one point differ only in `seed`, and their names end in
  // -seed<N>, which `credit-lens compare` strips to group them.
  const list = typeof seeds === 'number' ? Array.from({ length: seeds }, (_, k) => config.seed + k) : [...new Set(seeds)];
  return points.flatMap((r) =>
    list.map((seed) => {
      const name = sanitize(`${r.name}-seed${seed}`);
      return { name, overrides: { ...r.overrides, seed }, config: { ...structuredClone(r.config), seed, name } };
    }),
  );
}

/**
 * `sweep.warm_starts`: every grid point once per SFT warm start (sft.seed), each start shared by its runs. The start is
 * a design factor, so that a verdict is not about one start (a start × method interaction moved the mitigation runs'
 * verdicts by 4 standard errors); names get -start<sft seed>, which compare strips with the seed part to group them.
 */
function withWarmStarts(config: CreditConfig, points: SweepRun[]): SweepRun[] {
  const k = config.sweep?.warm_starts;
  if (k === undefined) return points;
  const starts = typeof k === 'number' ? Array.from({ length: k }, (_, i) => config.sft.seed + i) : [...new Set(k)];
  return points.flatMap((r) =>
    starts.map((sftSeed) => {
      const name = sanitize(`${r.name}-start${sftSeed}`);
      const c = structuredClone(r.config);
      c.sft = { ...c.sft, seed: sftSeed, share: true };
      c.name = name;
      return { name, overrides: { ...r.overrides, 'sft.seed': sftSeed }, config: c };
    }),
  );
}

function expandGrid(config: CreditConfig, grid: SweepGrid | undefined): SweepRun[] {
  const base = structuredClone(config) as CreditConfig;
  delete base.sweep;
  if (grid === undefined) return [{ name: config.name, overrides: {}, config: base }];

  const checked = validateConfig({ ...base, sweep: { grid } });
  if (checked.issues.length) {
    throw new UserError(`Invalid sweep grid:\n${checked.issues.map((i) => `  ${i.message}`).join('\n')}`);
  }
  const entries = Array.isArray(grid) ? grid : [grid];
  const abbr = abbreviations([...new Set(entries.flatMap((e) => Object.keys(e)))]);
  // A key set to one value in every run names nothing that varies, so it stays out of the run names.
  const constant = new Set(
    [...abbr.keys()].filter(
      (k) => entries.every((e) => k in e) && new Set(entries.flatMap((e) => gridValues(k, e[k]).map((v) => JSON.stringify(v)))).size === 1,
    ),
  );

  const runs: SweepRun[] = [];
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const entry of entries) {
    const keys = Object.keys(entry);
    for (const combo of product(keys.map((k) => gridValues(k, entry[k])))) {
      const all = new Map(keys.map((k, i) => [k, combo[i]]));
      const probe = structuredClone(base) as unknown as Record<string, unknown>;
      for (const [k, v] of all) setDotted(probe, k, structuredClone(v));
      const strategy = (probe.credit as { strategy: StrategyName }).strategy;
      const overrides: Record<string, unknown> = {};
      for (const [k, v] of all) if (!unusedByStrategy(k, strategy)) overrides[k] = v;

      const identity = JSON.stringify(Object.entries(overrides).sort(([a], [b]) => (a < b ? -1 : 1)));
      if (seen.has(identity)) continue;
      seen.add(identity);

      const raw = structuredClone(base) as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(overrides)) setDotted(raw, k, structuredClone(v));
      const stem = typeof overrides.name === 'string' ? overrides.name : config.name;
      const parts = Object.entries(overrides)
        .filter(([k]) => k !== 'name' && !constant.has(k))
        .map(([k, v]) => label(k, v, abbr.get(k)!));
      let name = sanitize([stem, ...parts].join('-'));
      if (runs.some((r) => r.name === name)) {
        let n = 2;
        while (runs.some((r) => r.name === `${name}-${n}`)) n++;
        name = `${name}-${n}`;
      }
      raw.name = name;
      const res = validateConfig(raw);
      if (!res.config) {
        problems.push(...res.issues.map((i) => `  ${name}: ${i.message}`));
        continue;
      }
      runs.push({ name, overrides, config: res.config });
    }
  }
  if (problems.length) throw new UserError(`Invalid sweep runs (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems.join('\n')}`);
  return runs;
}
