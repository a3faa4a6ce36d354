// GSPO's per-token form (GSPO-token, Zheng et al. 2025 §4.3; veRL loss_mode gspo): every token of a completion is
// weighed by the sequence's ratio s_i = exp(mean_t log ρ_t), but through s_{i,t} = sg(s_i)·π(y_t)/sg(π(y_t)), so its
// gradient flows through the token's own log-prob: ∂s_{i,t}/∂ℓ_t = s_i. The clip is the sequence's, as GSPO's; unlike
// GSPO at importance_sampling_level sequence, each token keeps its own Â, so a credit strategy's per-token credit stays.
import type { CatalogIssue } from '../core/types';
import { ppo } from './ppo';
import type { PolicyLossSpec } from './types';

export const gspo = {
  name: 'gspo' as const,
  summary:
    "gspo: GSPO-token, −min(s·Â, clip(s)·Â) with the sequence's ratio s = exp(mean log ρ) on every token and the gradient through the token's own log-prob (veRL loss_mode gspo), so per-token credit stays",
  sequence: false,
  ratioLevel: 'sequence_token',
  check: (c): CatalogIssue[] =>
    c.grpo.importance_sampling_level === 'sequence'
      ? [
          {
            path: ['grpo', 'importance_sampling_level'],
            expected: 'token with grpo.policy_loss: gspo (GSPO-token takes the sequence ratio itself), or grpo.policy_loss: ppo for GSPO at sequence level',
          },
        ]
      : [],
  sweep: { label: 'GSPO-token', description: 'grpo.policy_loss gspo (veRL loss_mode gspo: the sequence ratio, per-token credit)' },
  // the term of a token is PPO's clipped surrogate at the sequence's ratio; policyLossAndGrad turns ∂/∂s into ∂/∂ℓ_t
  term: ppo.term,
} satisfies PolicyLossSpec;
