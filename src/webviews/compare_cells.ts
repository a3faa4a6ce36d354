// The comparison table's cells as text (compare_table.ts renders them), pure so the unit tests read them directly.
import { diffText, verdictText, type CompareRow } from '../protocol/compare';

// The number formats and the interval cell are the CLI's too (src/protocol/compare.ts).
export { intervalText as intervalCell, pctText as pct, sig3 as sig } from '../protocol/compare';

/** The difference cell: "+4.2 [+1.0, +7.5]" in points. */
export function diffCell(r: CompareRow): string {
  if (!r.diff) return 'baseline';
  return diffText(r.diff.mean, r.diff.lo, r.diff.hi);
}

/** The per-seed difference from the same seed's baseline run, over seeds: "-2.0 [-15.0, +11.0]". */
export function diffSeedsCell(r: CompareRow): string {
  return r.diff_seeds ? diffText(r.diff_seeds.mean, r.diff_seeds.lo, r.diff_seeds.hi) : '';
}

/** The adjusted p with n.s. when it is not significant (the one rule: p_adjusted < alpha), and the test's own p. */
export function pCell(r: CompareRow): string {
  if (!r.test) return '';
  return verdictText(r);
}

/** "± 4.1 pp": the minimum detectable effect at 80 % power. */
export function mdeCell(r: CompareRow): string {
  return r.mde === null ? '' : `± ${(100 * r.mde).toFixed(1)} pp`;
}
