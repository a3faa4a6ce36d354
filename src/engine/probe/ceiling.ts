// The probe's ceiling: the lift of an oracle credit, one that puts its weight where δ itself is large. The reliability
// bounds a correlation, not the lift, so the ceiling of the headline comes from that oracle, estimated without touching
// the data it is scored on (cross-fitting): its weights come from one half's δ̂ (p = |δ̂ᴬ|/Σ|δ̂ᴬ|) and its δ² from the
// other half alone, δ̂ᴮ² minus that estimate's own variance (each V̂'s s²/m, the two positions' continuations
// independent), which is unbiased for δ²; then the halves swap and the two are averaged. Given its weights the score is
// unbiased, so it estimates the lift of a credit that knows δ as well as M/2 continuations tell it. It rises toward the
// perfect credit's as M grows. At a small M it is the ceiling of what the probe's own estimate of δ could give, not of
// credit in general: a credit whose prior is better than M/2 continuations (1 − π is one, |δ_t| ≤ (1 − π)·R_max) can
// reach or pass it, and the report says so rather than calling that impossible.
import type { ProbedEpisode } from './accuracy';

/** One episode's oracle lift (Σ p·δ² of the cross-fitted oracle, minus uniform credit's Σ (len/n)·δ̂ᴬ·δ̂ᴮ); null without both halves and their variances. */
export function oracleLift(ep: ProbedEpisode): number | null {
  const { valuesA: a, valuesB: b, varsA, varsB, positions } = ep;
  if (!a || !b || !varsA || !varsB || positions.length < 2) return null;
  const units: { len: number; dA: number; dB: number; vA: number; vB: number }[] = [];
  for (let k = 0; k + 1 < positions.length; k++) {
    const xs = [a[k], a[k + 1], b[k], b[k + 1], varsA[k], varsA[k + 1], varsB[k], varsB[k + 1]];
    if (xs.some((x) => x === null || x === undefined || !Number.isFinite(x))) return null;
    units.push({
      len: positions[k + 1] - positions[k],
      dA: a[k + 1]! - a[k]!,
      dB: b[k + 1]! - b[k]!,
      vA: varsA[k]! + varsA[k + 1]!,
      vB: varsB[k]! + varsB[k + 1]!,
    });
  }
  const tokens = units.reduce((s, u) => s + u.len, 0);
  if (tokens === 0) return null;
  const uniform = units.reduce((s, u) => s + (u.len / tokens) * u.dA * u.dB, 0);
  // weights from one half, δ² from the other: where one half saw no change anywhere it has no weights to give
  const side = (w: (u: (typeof units)[number]) => number, d2: (u: (typeof units)[number]) => number): number | null => {
    const sum = units.reduce((s, u) => s + Math.abs(w(u)), 0);
    return sum > 0 ? units.reduce((s, u) => s + (Math.abs(w(u)) / sum) * d2(u), 0) : null;
  };
  const fromA = side(
    (u) => u.dA,
    (u) => u.dB * u.dB - u.vB,
  );
  const fromB = side(
    (u) => u.dB,
    (u) => u.dA * u.dA - u.vA,
  );
  const both = [fromA, fromB].filter((x): x is number => x !== null);
  return both.length ? both.reduce((s, x) => s + x, 0) / both.length - uniform : null;
}
