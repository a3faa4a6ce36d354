// Registry of credit strategies: adding one is one file in this folder, one entry in catalog.ts and one line here.
import { UserError } from '../core/errors';
import { strategySpec, type StrategyNeeds } from './catalog';
import { attentionCredit } from './attention_credit';
import { attribution } from './attribution';
import { cal } from './cal';
import { entropyMask } from './entropy_mask';
import { entropyWeighted } from './entropy_weighted';
import { gtpo } from './gtpo';
import { inverseLogprob } from './inverse_logprob';
import { ktae } from './ktae';
import { mcValue } from './mc_value';
import { none } from './none';
import { otb } from './otb';
import { outcomeConditional } from './outcome_conditional';
import { rewardDecomposition } from './reward_decomposition';
import { rewardVariance } from './reward_variance';
import { DEFAULT_CREDIT_PARAMS, type CreditBatch, type CreditParams, type CreditStrategy } from './types';

// One line per strategy; its parameters and needs are its entry in catalog.ts.
const REGISTRY: readonly CreditStrategy[] = [
  none,
  outcomeConditional,
  inverseLogprob,
  attentionCredit,
  entropyWeighted,
  gtpo,
  ktae,
  rewardDecomposition,
  otb,
  mcValue,
  entropyMask,
  attribution,
  cal,
  rewardVariance,
];

const BY_NAME = new Map(REGISTRY.map((s) => [s.name, s]));

export function getStrategy(name: string): CreditStrategy & { needs: StrategyNeeds } {
  const s = BY_NAME.get(name);
  const spec = strategySpec(name);
  if (!s || !spec) throw new UserError(`credit.strategy: unknown strategy "${name}"; available: ${[...BY_NAME.keys()].join(', ')}`);
  return { ...s, needs: spec.needs ?? {} };
}

export function strategyNames(): string[] {
  return [...BY_NAME.keys()];
}

/** Library API (design.md#library-api): the per-token weights training uses for this strategy. */
export function tokenWeights(strategy: string, params: Partial<CreditParams> | Record<string, number>, batch: CreditBatch): number[][] {
  return getStrategy(strategy).weights(batch, { ...DEFAULT_CREDIT_PARAMS, ...params } as CreditParams);
}

export type { CreditBatch, CreditHead, CreditParams, CreditStrategy } from './types';
