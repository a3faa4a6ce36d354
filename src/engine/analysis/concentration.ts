// Whether a credit signal has collapsed onto a few tokens: per episode, the Gini coefficient of |Â_t| over its tokens
// and the effective token ratio (Σ|Â|)² / (n·Σ Â²), the share of the completion that carries the credit as an
// effective sample size. Plain GRPO gives every token the same Â: Gini 0, ratio 1. A strategy whose weights drift
// toward one token (an attribution head under LoRA can) shows Gini → 1 and ratio → 1/n long before the reward says
// anything: these are ARCA's two checks that a learned credit has not degenerated. Episodes whose Â is 0 on every token
// (a group with equal rewards) carry no credit to spread and are left out.

/** Gini coefficient of non-negative values (0: all equal; (n − 1)/n: one holds everything); null when they sum to 0. */
export function gini(values: readonly number[]): number | null {
  const x = values.map(Math.abs).sort((a, b) => a - b);
  const n = x.length;
  const total = x.reduce((a, b) => a + b, 0);
  if (!n || !(total > 0)) return null;
  // G = Σ_i (2i − n − 1)·x_(i) / (n·Σx), i = 1..n over the sorted values; the coefficients sum to 0, so x_(i) − x_(1)
  // gives the same G, and exactly 0 when every value is equal (plain GRPO), where x_(i) alone leaves rounding
  let s = 0;
  for (let i = 0; i < n; i++) s += (2 * (i + 1) - n - 1) * (x[i] - x[0]);
  return s / (n * total);
}

/** (Σ|w|)² / (n·Σw²): 1 when every token carries the same |w|, 1/n when one carries it all; null when all are 0. */
export function effectiveTokenRatio(values: readonly number[]): number | null {
  const n = values.length;
  let s1 = 0;
  let s2 = 0;
  for (const v of values) {
    s1 += Math.abs(v);
    s2 += v * v;
  }
  return n && s2 > 0 ? (s1 * s1) / (n * s2) : null;
}

/**
 * The step's mean Gini and effective token ratio of |Â| over the episodes that carry credit, as metrics.jsonl keys;
 * `lengths[i]` tokens of episode i count (the rest is padding). Empty when no episode carries credit.
 */
export function creditConcentration(effAdv: readonly (readonly number[])[], lengths: readonly number[]): Record<string, number> {
  let g = 0;
  let r = 0;
  let n = 0;
  effAdv.forEach((row, i) => {
    const tokens = row.slice(0, lengths[i]);
    const gi = gini(tokens);
    const ri = effectiveTokenRatio(tokens);
    if (gi === null || ri === null) return;
    g += gi;
    r += ri;
    n++;
  });
  return n ? { 'credit/gini': g / n, 'credit/effective_token_ratio': r / n } : {};
}
