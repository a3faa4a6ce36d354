// KTAE, key-token advantage estimation (arXiv 2505.16826; the authors' code: xiaolizh1/KTAE,
// verl/workers/actor/compute_key_tokens.py and compute_ktae_outcome_advantage_and_keytokens in core_algos.py).
// Per group, every token id gets a bonus KT ∈ (−1, 1) from how its appearance splits the group's correct and wrong
// rollouts, and Â_{i,t} = A_i + KT[y_{i,t}] (the same bonus on every occurrence of the id in the group), where A_i is the
// group's std-scaled advantage (r − mean_g)/(std_g + 1e-6) as in the authors' compute_ktae_outcome_advantage_and_keytokens,
// whatever grpo.scale_rewards says: the bonus is sized against a unit-scale advantage, and added to Dr. GRPO's unscaled
// r − mean_g it would weigh 1/std_g times more (2–8× on countdown's groups). For a token id,
// with a / b the correct / wrong rollouts it appears in and c / d those it does not:
//   F  = exp(−2p) for the two-sided Fisher exact p of [[a, b], [c, d]] (0 when p = 1)
//   IG = H(Y) − H(Y | X), in bits, Y = correct or wrong, X = appears or not
//   x  = Cohen's h, asin √(a/(a+c)) − asin √(b/(b+d)), plus tf_c/(tf_w + 1e-5) − tf_w/(tf_c + 1e-5) with BM25-style term
//        frequencies tf = f·(k₁+1)/(f + k₁(1 − b + b·L/L̄)) (f the id's share of the side's tokens, L the side's tokens,
//        L̄ the mean of the two sides', k₁ = 2, b = 0.5)
//   KT = (σ((α·F + β·IG)·x/(α + β)) − 0.5)·2
// The authors' advantage estimator builds its ComputeKeyTokens with α = β = γ_tf = 1 whatever the config says; those are
// the defaults here (ktae.alpha, ktae.beta, ktae.tf). A group with no correct or no wrong rollout gets no bonus, and
// neither does the end-of-sequence token (their code zeroes Qwen's <|endoftext|>). Where the code counts a rollout
// correct when its reward is > 0, this takes the task's success (a format-only reward is > 0 here, and not correct).
import { PREPARED_CREDIT, tokenAdvantageBatch, type CreditStrategy, type EpisodeView, type PrepareContext, type Prepared } from './types';

function lgamma(n: number): number {
  // ln Γ(n + 1) = ln n! for the integer counts here, summed exactly enough in float64
  let s = 0;
  for (let k = 2; k < n; k++) s += Math.log(k);
  return s;
}
const logComb = (n: number, k: number) => lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1);

/** Two-sided Fisher exact p of the 2×2 table [[a, b], [c, d]]: Σ P(k) over tables at most as likely as the observed one. */
export function fisherExactP(a: number, b: number, c: number, d: number): number {
  const R1 = a + b;
  const C1 = a + c;
  const n = a + b + c + d;
  const lo = Math.max(0, R1 + C1 - n);
  const hi = Math.min(R1, C1);
  const logP = (k: number) => logComb(C1, k) + logComb(n - C1, R1 - k) - logComb(n, R1);
  const obs = logP(a);
  let p = 0;
  // the same relative tolerance R and SciPy use, so ties in probability count as "as extreme"
  for (let k = lo; k <= hi; k++) if (logP(k) <= obs + 1e-7) p += Math.exp(logP(k));
  return Math.min(1, p);
}

const h2 = (p: number) => (p > 0 ? -p * Math.log2(p) : 0);

/** Information gain (bits) of "appears" about "correct" for the table [[a, b], [c, d]]. */
export function informationGain(a: number, b: number, c: number, d: number): number {
  const n = a + b + c + d;
  if (n === 0) return 0;
  const hy = h2((a + c) / n) + h2((b + d) / n);
  const cond = (x: number, y: number) => (x + y > 0 ? h2(x / (x + y)) + h2(y / (x + y)) : 0);
  return hy - (((a + b) / n) * cond(a, b) + ((c + d) / n) * cond(c, d));
}

export interface KtaeParams {
  alpha: number;
  beta: number;
  tf: boolean;
}

/**
 * KT per token id of one group: `ids[i]` the completion of rollout i (its valid tokens), `correct[i]` whether it is
 * correct. Ids in `exclude` (end of sequence) get 0.
 */
export function keyTokenBonus(ids: number[][], correct: boolean[], p: KtaeParams, exclude: ReadonlySet<number> = new Set()): Map<number, number> {
  const out = new Map<number, number>();
  const nc = correct.filter(Boolean).length;
  const nw = correct.length - nc;
  if (nc === 0 || nw === 0) return out;
  const inC = new Map<number, number>();
  const inW = new Map<number, number>();
  const histC = new Map<number, number>();
  const histW = new Map<number, number>();
  let tokC = 0;
  let tokW = 0;
  ids.forEach((row, i) => {
    const [seen, hist] = correct[i] ? [inC, histC] : [inW, histW];
    for (const id of new Set(row)) seen.set(id, (seen.get(id) ?? 0) + 1);
    for (const id of row) hist.set(id, (hist.get(id) ?? 0) + 1);
    if (correct[i]) tokC += row.length;
    else tokW += row.length;
  });
  const k1 = 2;
  const bm = 0.5;
  const avg = (tokC + tokW) / 2;
  const Kc = k1 * (1 - bm + (bm * tokC) / avg);
  const Kw = k1 * (1 - bm + (bm * tokW) / avg);
  const tf = (count: number, total: number, K: number) => {
    const f = total > 0 ? count / total : 0;
    return (f * (k1 + 1)) / (f + K);
  };
  for (const id of new Set(ids.flat())) {
    if (exclude.has(id)) {
      out.set(id, 0);
      continue;
    }
    const a = inC.get(id) ?? 0;
    const b = inW.get(id) ?? 0;
    const c = nc - a;
    const d = nw - b;
    const pv = fisherExactP(a, b, c, d);
    const F = Math.abs(pv - 1) < 1e-12 ? 0 : Math.exp(-2 * pv);
    const IG = informationGain(a, b, c, d);
    let x = Math.asin(Math.sqrt(a / (a + c))) - Math.asin(Math.sqrt(b / (b + d)));
    if (p.tf) {
      const tc = tf(histC.get(id) ?? 0, tokC, Kc);
      const tw = tf(histW.get(id) ?? 0, tokW, Kw);
      x += tc / (tw + 1e-5) - tw / (tc + 1e-5);
    }
    const key = ((p.alpha * F + p.beta * IG) * x) / (p.alpha + p.beta);
    out.set(id, (1 / (1 + Math.exp(-key)) - 0.5) * 2);
  }
  return out;
}

/**
 * The authors' advantage of one group: its episode advantages (centred on the group under every grpo.scale_rewards)
 * divided by their sample std + 1e-6 (torch.std, their epsilon). Under scale_rewards group it is A itself up to the
 * epsilons; under none it is the std scaling the authors' code applies before adding the bonus.
 */
export function stdScaled(adv: readonly number[]): number[] {
  const n = adv.length;
  const mean = adv.reduce((a, x) => a + x, 0) / n;
  const std = n > 1 ? Math.sqrt(adv.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return adv.map((a) => (a - mean) / (std + 1e-6));
}

async function prepare(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared> {
  const p = ctx.cfg.credit.ktae;
  const eos = new Set(ctx.tokenizer.eosIds ?? [ctx.tokenizer.eosId]);
  const groups = new Map<number, EpisodeView[]>();
  for (const e of episodes) groups.set(e.group, [...(groups.get(e.group) ?? []), e]);
  const adv: number[][] = new Array(episodes.length);
  for (const members of groups.values()) {
    const kt = keyTokenBonus(
      members.map((e) => e.ids),
      members.map((e) => e.success),
      { alpha: p.alpha, beta: p.beta, tf: p.tf },
      eos,
    );
    const scaled = stdScaled(members.map((e) => e.advantage));
    members.forEach((e, k) => (adv[e.index] = e.ids.map((id) => scaled[k] + (kt.get(id) ?? 0))));
  }
  return { batch: tokenAdvantageBatch(adv, episodes) };
}

export const ktae: CreditStrategy = { name: 'ktae', rowLocal: true, prepare, ...PREPARED_CREDIT };
