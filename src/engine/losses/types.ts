// What a policy-loss variant is: one per-token term, the loss of one token given its ratio and its effective advantage,
// with the derivatives the trainer needs. Everything that is the same for every variant stays once in
// policyLossAndGrad (train/grpo.ts): the token loop, the aggregation coefficients, the KL term, and GSPO's
// sequence-level ratio (a variant whose loss depends on ℓ only through ρ can take the sequence's ratio instead).
import type { z } from 'zod';
import type { CatalogIssue } from '../core/types';

/**
 * The part of a run config the variants' checks read. Named here rather than imported: the config's type is built
 * from this catalog, so importing it would make the two a circle.
 */
export interface LossCheckConfig {
  readonly grpo: { readonly importance_sampling_level: string; readonly cispo_clip: string; readonly clip_eps_high: number };
}

/** One valid token, as the term sees it. */
export interface TokenTermInput {
  /** ρ: exp(ℓ − ℓ_old) of the token, or the sequence's s under importance_sampling_level sequence */
  ratio: number;
  /** ℓ, the token's log-prob under the policy being trained */
  logprob: number;
  /** Â, the token's effective advantage */
  advantage: number;
  /** 1 − clip_eps and 1 + clip_eps_high */
  lo: number;
  hi: number;
  /** clip_eps_high itself (a variant may read it as an absolute cap) */
  clipEpsHigh: number;
  /** the variant's own options, by their config key under grpo */
  options: Readonly<Record<string, unknown>>;
}

/** One token's term and its derivatives. */
export interface TokenTerm {
  /** the token's loss, before aggregation and without the KL term */
  loss: number;
  /** ∂loss/∂ℓ at token level, ρ's dependence on ℓ included (the gradient pushed into the network) */
  dLogprob: number;
  /** ∂loss/∂ρ: what the sequence level spreads over the sequence's tokens (variants with `sequence`) */
  dRatio: number;
  /** ∂loss/∂Â: a trained credit head's gradient */
  dAdvantage: number;
  /** the importance weight that multiplied the token's gradient (ρ, CISPO's w; 0 where the clip cut it) */
  isWeight: number;
  /** the clip cut the token's gradient or bounded its weight */
  cut: boolean;
}

export interface PolicyLossSpec {
  /** grpo.policy_loss's value */
  readonly name: string;
  /** one clause for grpo.policy_loss's description */
  readonly summary: string;
  /** its own keys under grpo, with defaults, ranges and descriptions */
  readonly options?: Record<string, z.ZodType>;
  /** its loss depends on ℓ only through ρ, so importance_sampling_level sequence (GSPO) can give it the sequence's ratio */
  readonly sequence: boolean;
  /** its ratio enters as a constant (a stop-gradient weight): finite differences of its loss hold ρ fixed */
  readonly detachedRatio?: boolean;
  /**
   * sequence_token (GSPO-token): the ratio on every token is the sequence's s = exp(mean log ρ), its gradient through the
   * token's own log-prob only (s_{i,t} = sg(s)·π/sg(π), so ∂s_{i,t}/∂ℓ_t = s); absent: the token's own ρ
   */
  readonly ratioLevel?: 'sequence_token';
  /** checks across keys, on the whole config, when this loss is chosen */
  readonly check?: (cfg: LossCheckConfig) => CatalogIssue[];
  /** Run Sweep's entry for it, beside the config's own loss */
  readonly sweep?: { label: string; description: string };
  term(x: TokenTermInput): TokenTerm;
}
