// The comparison table's cells as text (compare_table.ts renders them), pure so the unit tests read them directly.
import type { CompareRow } from '../protocol/compare';

// The number formats and the interval cell are the CLI's too (src/protocol/compare.ts).
export { intervalText as intervalCell, pctText as pct, sig3 as sig } from '../protocol/compare';

/** The difference cell: "+4.2 [+1.0, +7.5]" in points. */
export function diffCell(r: CompareRow): string {
  if (!r.diff) return 'baseline';
  const s = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}`;
  return `${s(r.diff.mean)} [${s(r.diff.lo)}, ${s(r.diff.hi)}]`;
}

export function pCell(r: CompareRow): string {
  if (!r.mcnemar) return '';
  const p = r.mcnemar.p < 1e-4 ? r.mcnemar.p.toExponential(1) : r.mcnemar.p.toPrecision(2);
  return r.significant ? p : `${p} n.s.`;
}

