// PPO's clipped surrogate, GRPO's loss: −min(ρÂ, clip(ρ, 1 − ε, 1 + ε_high)·Â). The unclipped branch carries the
// gradient unless the clipped one is strictly smaller; then the token's gradient is cut.
import type { PolicyLossSpec } from './types';

export const ppo = {
  name: 'ppo' as const,
  summary: "ppo: −min(ρÂ, clip(ρ)Â), the clipped token's gradient cut",
  sequence: true,
  term: ({ ratio, advantage: A, lo, hi }) => {
    const clippedRatio = Math.min(Math.max(ratio, lo), hi);
    const unclippedTerm = ratio * A;
    const clippedTerm = clippedRatio * A;
    const takeClipped = clippedTerm < unclippedTerm;
    const cut = takeClipped && (ratio < lo || ratio > hi);
    return {
      loss: -(takeClipped ? clippedTerm : unclippedTerm),
      // ∂term/∂ρ = −Â where the gradient flows, and ∂ρ/∂ℓ = ρ at token level
      dLogprob: cut ? 0 : -ratio * A,
      dRatio: cut ? 0 : -A,
      dAdvantage: -(takeClipped ? clippedRatio : ratio),
      isWeight: cut ? 0 : ratio,
      cut,
    };
  },
} satisfies PolicyLossSpec;
