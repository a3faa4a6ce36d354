// CISPO (MiniMax-M1; veRL loss_mode cispo, TRL loss_type cispo): −sg(w)·Â·ℓ with w the clipped ratio. The weight is a
// constant, so every token keeps a gradient −w·Â: clipping only bounds it, it never cuts it.
import { oneOf } from '../core/fields';
import type { CatalogIssue } from '../core/types';
import type { PolicyLossSpec } from './types';

export type CispoClip = 'two_sided' | 'top';

export const cispo = {
  name: 'cispo' as const,
  summary: 'cispo: −sg(w)·Â·log π with w the clipped ratio (MiniMax-M1), so a clipped token keeps a bounded gradient (see cispo_clip)',
  options: {
    cispo_clip: oneOf(
      ['two_sided', 'top'],
      "CISPO's weight w: two_sided: clip(ρ, 1 − clip_eps, 1 + clip_eps_high) (veRL); top: min(ρ, clip_eps_high), " +
        'clip_eps_high then an absolute cap (TRL loss_type cispo, 5.0 recommended).',
    ).default('two_sided'),
  },
  sequence: false,
  detachedRatio: true,
  check: (c): CatalogIssue[] => [
    ...(c.grpo.importance_sampling_level === 'sequence'
      ? [
          {
            path: ['grpo', 'importance_sampling_level'],
            expected: 'token with grpo.policy_loss: cispo (CISPO weighs each token by its own ratio), or grpo.policy_loss: ppo for GSPO',
          },
        ]
      : []),
    ...(c.grpo.cispo_clip === 'top' && c.grpo.clip_eps_high < 1
      ? [
          {
            path: ['grpo', 'cispo_clip'],
            expected:
              `two_sided with grpo.clip_eps_high: ${c.grpo.clip_eps_high}, or grpo.clip_eps_high of at least 1 (with top it is the ` +
              `ratio's absolute ceiling, as in TRL; 5.0 recommended; ${c.grpo.clip_eps_high} would scale every token's gradient down)`,
          },
        ]
      : []),
  ],
  sweep: { label: 'CISPO', description: 'grpo.policy_loss cispo (veRL loss_mode, MiniMax-M1)' },
  term: ({ ratio, logprob: l, advantage: A, lo, hi, clipEpsHigh, options }) => {
    const w = (options.cispo_clip ?? 'two_sided') === 'top' ? Math.min(ratio, clipEpsHigh) : Math.min(Math.max(ratio, lo), hi);
    return { loss: -w * A * l, dLogprob: -w * A, dRatio: 0, dAdvantage: -w * l, isWeight: w, cut: w !== ratio };
  },
} satisfies PolicyLossSpec;
