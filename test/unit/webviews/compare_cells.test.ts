// The comparison table's cells (sweep summary, Compare Runs) from hand-written rows: what a reader sees for a
// significant difference, a difference within noise, one seed, and the baseline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { verdictText, type CompareRow } from '../../../src/protocol/compare';
import { conditionalCell, diffCell, intervalCell, mdeCell, pCell, pct, seedsNeededCell, sig } from '../../../src/webviews/compare_cells';

const row = (over: Partial<CompareRow>): CompareRow => ({
  group: 'g',
  label: 'none',
  strategy: 'none',
  baseline: false,
  seeds: [1, 2, 3],
  starts: 0,
  runs: ['/a', '/b', '/c'],
  instances: 256,
  step: 40,
  eval_success: { mean: 0.125, lo: 0.1, hi: 0.15, n: 3, half: 0.025 },
  diff: null,
  run_test: null,
  conditional: null,
  p_adjusted: null,
  significant: null,
  verdict_withheld: null,
  mde: null,
  seeds_needed: null,
  exploratory: false,
  filler_abs_c: null,
  reasoning_abs_c: null,
  filler_reasoning_ratio: null,
  warm_start: null,
  ...over,
});

test('eval success: mean ± the 95 % half-width in points; one seed shows the mean alone', () => {
  assert.equal(intervalCell(row({}).eval_success, pct), '12.5 ± 2.5');
  assert.equal(intervalCell({ mean: 0.5, lo: null, hi: null, n: 1, half: null }, pct), '50.0');
  assert.equal(intervalCell(null, sig), '—');
  assert.equal(intervalCell({ mean: 0.01234, lo: 0, hi: 0, n: 3, half: 0.000456 }, sig), '0.0123 ± 0.000456');
});

test('the p cell is the gate’s Holm-adjusted p, n.s. when not significant, "no verdict" when withheld; the MDE cell; the baseline says so', () => {
  const win = row({ diff: { mean: 0.0625, lo: 0.03125, hi: 0.09375 }, p_adjusted: 3.0e-4, significant: true, mde: 0.0412 });
  assert.equal(diffCell(win), '+6.3 [+3.1, +9.4]');
  assert.equal(pCell(win), '0.00030', 'the adjusted p, not the raw one');
  assert.equal(mdeCell(win), '± 4.1 pp');
  assert.equal(pCell(row({ p_adjusted: 3e-7, significant: true })), '3.0e-7');
  // raw p 0.03 would pass alone; adjusted over the family it does not, and the cell says n.s.
  const adjustedAway = row({ diff: { mean: -0.005, lo: -0.03, hi: 0.02 }, p_adjusted: 0.09, significant: false });
  assert.equal(diffCell(adjustedAway), '-0.5 [-3.0, +2.0]');
  assert.equal(pCell(adjustedAway), '0.090 n.s.');
  const withheld = row({ verdict_withheld: '1 run against 1: …', seeds_needed: { diff: 0.05, basis: 'power-for', unit: 'seeds', seeds: 7 } });
  assert.deepEqual([diffCell(withheld), pCell(withheld), seedsNeededCell(withheld)], ['—', 'no verdict', '5.0 pp: 7 a side']);
  assert.equal(seedsNeededCell(row({ seeds_needed: { diff: 0.013, basis: 'observed', unit: 'seeds', seeds: null } })), '1.3 pp (observed): not within 1000');
  // over warm starts the plan is in starts, each with today's seeds
  assert.equal(seedsNeededCell(row({ seeds_needed: { diff: 0.05, basis: 'power-for', unit: 'starts', seeds: 6 } })), '5.0 pp: 6 warm starts');
  // a verdict from one shared warm start says which: in the CLI's cell; Compare Runs says it once above its table
  const fromOne = row({ p_adjusted: 0.01, significant: true, warm_start: 'countdown-warm-start-abc' });
  assert.equal(verdictText(fromOne), '0.010 (from warm start countdown-warm-start-abc)');
  assert.equal(pCell(fromOne), '0.010');
  assert.equal(diffCell(row({ baseline: true })), 'baseline');
  assert.equal(pCell(row({ baseline: true })), '');
  assert.equal(mdeCell(row({ baseline: true })), '');
});

test('the conditional cell: the instance-clustered difference on these checkpoints with its own p; empty for the baseline', () => {
  const conditional = {
    diff: { mean: 0.013, lo: -0.007, hi: 0.034, resamples: 1000 },
    b: 37,
    c: 47,
    pairs: 768,
    instances: 256,
    p: 0.26,
    p_adjusted: 1,
    mde: 0.041,
  };
  assert.equal(conditionalCell(row({ conditional })), '+1.3 [-0.7, +3.4] · p 0.26');
  assert.equal(conditionalCell(row({ baseline: true })), '');
});
