// The probe's sign test: do Â and δ̂ agree in sign more often than a coin? Over units (tokens) as QVal counts it, and
// with the prompt as the unit, which the views show: a prompt's tokens share its continuations and its policy state.
import { tTwoSided } from '../core/significance';

/** Exact two-sided binomial p of k successes in n against ½: the sum of the outcomes at most as likely as k. */
export function binomialTwoSided(k: number, n: number): number {
  if (n === 0) return 1;
  const logC = new Float64Array(n + 1);
  let lf = 0;
  const logFact = [0];
  for (let i = 1; i <= n; i++) logFact.push((lf += Math.log(i)));
  for (let i = 0; i <= n; i++) logC[i] = logFact[n] - logFact[i] - logFact[n - i] - n * Math.LN2;
  let p = 0;
  for (let i = 0; i <= n; i++) if (logC[i] <= logC[k] + 1e-9) p += Math.exp(logC[i]);
  return Math.min(1, p);
}

/**
 * The sign test with the prompt as the unit: the agreeing share p̂ = Σa/Σn over the prompts' units, its cluster-robust
 * variance Σ_j (a_j − p̂·n_j)² / (Σn)² · J/(J − 1), and t = (p̂ − ½)/se on J − 1 df. Tokens of one prompt share its
 * continuations and its policy state, so counting them as independent coin flips overstates the evidence.
 */
export function clusteredSignTest(scores: readonly { sign_agree: number; sign_units: number }[], prompts: readonly number[]) {
  const by = new Map<number, { a: number; n: number }>();
  scores.forEach((s, i) => {
    const c = by.get(prompts[i]) ?? { a: 0, n: 0 };
    c.a += s.sign_agree;
    c.n += s.sign_units;
    by.set(prompts[i], c);
  });
  const cells = [...by.values()].filter((c) => c.n > 0);
  const J = cells.length;
  const A = cells.reduce((x, c) => x + c.a, 0);
  const N = cells.reduce((x, c) => x + c.n, 0);
  if (J < 2 || !N) return { prompts: J, p_clustered: null };
  const share = A / N;
  const v = (cells.reduce((x, c) => x + (c.a - share * c.n) ** 2, 0) / (N * N)) * (J / (J - 1));
  if (!(v > 0)) return { prompts: J, p_clustered: share === 0.5 ? 1 : 0 };
  const t = (share - 0.5) / Math.sqrt(v);
  return { prompts: J, p_clustered: tTwoSided(t, J - 1) };
}
