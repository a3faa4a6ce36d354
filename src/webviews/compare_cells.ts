// The comparison table's cells as text (compare_table.ts renders them), pure so the unit tests read them directly.
import { diffText, pText, verdictText, type CompareRow } from '../protocol/compare';

// The number formats and the interval cell are the CLI's too (src/protocol/compare.ts).
export { intervalText as intervalCell, pctText as pct, sig3 as sig } from '../protocol/compare';

/** The difference cell, the run-level gate's Δ and 95 % interval: "+4.2 [+1.0, +7.5]" in points; '—' when withheld. */
export function diffCell(r: CompareRow): string {
  if (r.baseline) return 'baseline';
  return r.diff ? diffText(r.diff.mean, r.diff.lo, r.diff.hi) : '—';
}

/** The instance-clustered difference, conditional on these checkpoints: "+1.3 [-0.7, +3.4] · p 0.26". */
export function conditionalCell(r: CompareRow): string {
  const c = r.conditional;
  return c ? `${diffText(c.diff.mean, c.diff.lo, c.diff.hi)} · p ${pText(c.p)}` : '';
}

/** The gate's adjusted p with n.s. when it is not significant (the one rule: p_adjusted < alpha); "no verdict" when withheld. */
export function pCell(r: CompareRow): string {
  // the one warm start a verdict is about is said once above the table (compare_table.ts), not in every cell
  return r.baseline ? '' : verdictText({ ...r, warm_start: null });
}

/** "5.0 pp: 7 a side": the seeds per side (or warm starts, for the gate over starts) it needs for --power-for, or for the observed Δ. */
export function seedsNeededCell(r: CompareRow): string {
  const s = r.seeds_needed;
  if (!s) return '';
  const count = s.seeds === null ? 'not within 1000' : s.unit === 'starts' ? `${s.seeds} warm starts` : `${s.seeds} a side`;
  return `${(100 * s.diff).toFixed(1)} pp${s.basis === 'observed' ? ' (observed)' : ''}: ${count}`;
}

/** "± 4.1 pp": the minimum detectable effect at 80 % power. */
export function mdeCell(r: CompareRow): string {
  return r.mde === null ? '' : `± ${(100 * r.mde).toFixed(1)} pp`;
}
