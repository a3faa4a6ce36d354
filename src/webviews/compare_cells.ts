// The comparison table's cells as text (compare_table.ts renders them), pure so the unit tests read them directly.
import type { CompareRow, SeedInterval } from '../protocol/compare';

export const pct = (x: number | null) => (x === null ? '—' : (100 * x).toFixed(1));
export const sig = (x: number | null) => (x === null ? '—' : x.toPrecision(3));

/** "12.3 ± 1.4" (mean ± the 95 % half-width), or the mean alone with one seed. */
export function intervalCell(i: SeedInterval | null, fmt: (x: number | null) => string): string {
  if (!i || i.mean === null) return '—';
  return i.half === null ? fmt(i.mean) : `${fmt(i.mean)} ± ${fmt(i.half)}`;
}

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

