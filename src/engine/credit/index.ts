// Registry of credit strategies: adding one is one file in this folder plus one line here.
import { UserError } from '../core/errors';
import { attentionCredit } from './attention_credit';
import { attribution } from './attribution';
import { cal } from './cal';
import { entropyMask } from './entropy_mask';
import { entropyWeighted } from './entropy_weighted';
import { inverseLogprob } from './inverse_logprob';
import { none } from './none';
import { outcomeConditional } from './outcome_conditional';
import { rewardVariance } from './reward_variance';
import { DEFAULT_CREDIT_PARAMS, type CreditBatch, type CreditParams, type CreditStrategy } from './types';

const REGISTRY: Record<string, CreditStrategy> = {
  none,
  outcome_conditional: outcomeConditional,
  inverse_logprob: inverseLogprob,
  attention_credit: attentionCredit,
  entropy_weighted: entropyWeighted,
  entropy_mask: entropyMask,
  attribution,
  cal,
  reward_variance: rewardVariance,
};

export function getStrategy(name: string): CreditStrategy {
  const s = REGISTRY[name];
  if (!s) throw new UserError(`credit.strategy: unknown strategy "${name}"; available: ${Object.keys(REGISTRY).join(', ')}`);
  return s;
}

export function strategyNames(): string[] {
  return Object.keys(REGISTRY);
}

/** Library API (DESIGN §6): the per-token weights training uses for this strategy. */
export function tokenWeights(strategy: string, params: Partial<CreditParams>, batch: CreditBatch): number[][] {
  return getStrategy(strategy).weights(batch, { ...DEFAULT_CREDIT_PARAMS, ...params });
}

export type { CreditBatch, CreditHead, CreditParams, CreditStrategy } from './types';
