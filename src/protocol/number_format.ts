// One way to print a number in every view (the editor's hovers and status bar, the Runs tree, the dashboards, Browse
// Rollouts, the sweep table): counts with thousands separators (330,000, never 3.30e+5), a fixed number of significant
// digits otherwise, scientific notation only for the very small, and never "-0.000" for a value that rounds to zero.
// Pure, so the extension host and the webviews import it alike, and the unit tests read it directly.

const DASH = '—';

const finite = (v: number | null | undefined): v is number => v !== null && v !== undefined && Number.isFinite(v);

/**
 * A measured value in `sig` significant digits: 0.1235, -2.5, 1,235, 15,234 (no decimals from 10,000 on), 1.23e-4 below
 * 0.001; 0 for zero of either sign; — for a missing or non-finite value.
 */
export function formatNumber(v: number | null | undefined, sig = 4): string {
  if (!finite(v)) return DASH;
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a < 1e-3) return v.toExponential(Math.max(0, sig - 2)).replace('e+', 'e');
  if (a >= 1e4) return Math.round(v).toLocaleString('en-US');
  return Number(v.toPrecision(sig)).toLocaleString('en-US', { maximumSignificantDigits: sig });
}

/** A count: 330,000. */
export function formatCount(n: number | null | undefined): string {
  return finite(n) ? Math.round(n).toLocaleString('en-US') : DASH;
}

/** `digits` decimals, as toFixed, except that a value rounding to zero prints without a sign (0.000, not -0.000). */
export function formatFixed(v: number | null | undefined, digits: number): string {
  if (!finite(v)) return DASH;
  const s = v.toFixed(digits);
  return /^-0(\.0*)?$/.test(s) ? s.slice(1) : s;
}

/** A share in [0, 1] as a percentage with `digits` decimals: 12.5%. */
export function formatPercent(v: number | null | undefined, digits = 1): string {
  return finite(v) ? `${formatFixed(100 * v, digits)}%` : DASH;
}

/** The smallest of 1, 2, 2.5, 5 × 10^k that is at least x (x > 0): a histogram's bin width, an axis's tick step. */
export function niceStep(x: number): number {
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x * (1 - 1e-12)) return m * p;
  return 10 * p;
}

/** A chart's value: a percentage where the chart is one, else a number to 4 significant digits. */
export const formatValue = (v: number | null | undefined, percent = false): string => (percent ? formatPercent(v) : formatNumber(v));
