// The comparison table's cells (sweep summary, Compare Runs) from hand-written rows: what a reader sees for a
// significant difference, a difference within noise, one seed, and the baseline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CompareRow } from '../../../src/protocol/compare';
import { diffCell, diffSeedsCell, intervalCell, mdeCell, pCell, pct, sig } from '../../../src/webviews/compare_cells';

const row = (over: Partial<CompareRow>): CompareRow => ({
  group: 'g',
  label: 'none',
  strategy: 'none',
  baseline: false,
  seeds: [1, 2, 3],
  runs: ['/a', '/b', '/c'],
  instances: 256,
  step: 40,
  eval_success: { mean: 0.125, lo: 0.1, hi: 0.15, n: 3, half: 0.025 },
  diff: null,
  diff_seeds: null,
  test: null,
  p_adjusted: null,
  significant: null,
  mde: null,
  seeds_needed: null,
  exploratory: false,
  filler_abs_c: null,
  reasoning_abs_c: null,
  filler_reasoning_ratio: null,
  ...over,
});

test('eval success: mean ± the 95 % half-width in points; one seed shows the mean alone', () => {
  assert.equal(intervalCell(row({}).eval_success, pct), '12.5 ± 2.5');
  assert.equal(intervalCell({ mean: 0.5, lo: null, hi: null, n: 1, half: null }, pct), '50.0');
  assert.equal(intervalCell(null, sig), '—');
  assert.equal(intervalCell({ mean: 0.01234, lo: 0, hi: 0, n: 3, half: 0.000456 }, sig), '0.0123 ± 0.000456');
});

test('the p cell is the Holm-adjusted p, n.s. when not significant; the MDE cell; the baseline says so', () => {
  const t = (p: number) => ({ b: 2, c: 20, pairs: 768, instances: 256, p });
  const win = row({ diff: { mean: 0.0625, lo: 0.03125, hi: 0.09375, resamples: 1000 }, test: t(1.0e-4), p_adjusted: 3.0e-4, significant: true, mde: 0.0412 });
  assert.equal(diffCell(win), '+6.3 [+3.1, +9.4]');
  assert.equal(pCell(win), '0.00030', 'the adjusted p, not the raw one');
  assert.equal(mdeCell(win), '± 4.1 pp');
  const tiny = row({ test: t(1e-7), p_adjusted: 3e-7, significant: true });
  assert.equal(pCell(tiny), '3.0e-7');
  // raw p 0.03 would pass alone; adjusted over the family it does not, and the cell says n.s.
  const adjustedAway = row({ diff: { mean: -0.005, lo: -0.03, hi: 0.02, resamples: 1000 }, test: t(0.03), p_adjusted: 0.09, significant: false });
  assert.equal(diffCell(adjustedAway), '-0.5 [-3.0, +2.0]');
  assert.equal(pCell(adjustedAway), '0.090 n.s.');
  assert.equal(diffCell(row({ baseline: true })), 'baseline');
  assert.equal(pCell(row({ baseline: true })), '');
  assert.equal(mdeCell(row({ baseline: true })), '');
});

test("the difference over seeds: mean [t interval] from the same seed's baseline; the mean alone with one seed; empty for the baseline", () => {
  assert.equal(diffSeedsCell(row({ diff_seeds: { mean: -0.02, lo: -0.15, hi: 0.11, n: 3, half: 0.13 } })), '-2.0 [-15.0, +11.0]');
  assert.equal(diffSeedsCell(row({ diff_seeds: { mean: 0.05, lo: null, hi: null, n: 1, half: null } })), '+5.0');
  assert.equal(diffSeedsCell(row({ baseline: true })), '');
});
