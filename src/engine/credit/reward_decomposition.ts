// Seed doc 002's strategy 4, reward decomposition: each part of the task's reward is credited to the tokens it judges,
// with its own group-normalised advantage (grpo.scale_rewards, as the total's):
//   format    r − answer (what the format score added to the total: 0.1·format under grpo_zero), on the tag tokens
//             (<think>, </think>, <answer>, </answer>) and the tokens outside both sections;
//   answer    the answer reward, on the <answer> section's other tokens;
//   reasoning the share of the <think> section's arithmetic steps that hold (0 without a step; steps as the CAL rule
//             oracle checks them, exactly), on the <think> section's other tokens: countdown, arithmetic and the word
//             problems write such steps. With reward_decomposition.reasoning off (a task whose think text has no
//             checkable steps) the think tokens take the answer's advantage.
// The logged weight is Â/A_i (1 where A_i = 0).
import { thinkSteps } from '../oracle/rule';
import { groupAdvantages } from './advantages';
import { PREPARED_CREDIT, tokenAdvantageBatch, type CreditStrategy, type EpisodeView, type PrepareContext, type Prepared } from './types';

const TAGS = ['<think>', '</think>', '<answer>', '</answer>'];

/** Which tokens of a completion overlap a tag, by the tokens' offsets in `prefill + completion` (shifted by the prefill). */
export function tagTokens(e: Pick<EpisodeView, 'prefill' | 'completion' | 'tokens'>): boolean[] {
  const text = e.prefill + e.completion;
  const spans: [number, number][] = [];
  for (const tag of TAGS) for (let at = text.indexOf(tag); at >= 0; at = text.indexOf(tag, at + 1)) spans.push([at, at + tag.length]);
  const shift = e.prefill.length;
  return e.tokens.map((t) => spans.some(([a, b]) => t.start + shift < b && t.end + shift > a));
}

/** The parts' rewards of one episode. */
export function rewardParts(e: Pick<EpisodeView, 'prefill' | 'completion' | 'reward'>): { format: number; answer: number; reasoning: number } {
  const { steps, holding } = thinkSteps(e.prefill + e.completion);
  return { format: e.reward.total - e.reward.answer, answer: e.reward.answer, reasoning: steps ? holding / steps : 0 };
}

async function prepare(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared> {
  const scale = ctx.cfg.grpo.scale_rewards;
  const groups = episodes.map((e) => e.group);
  const parts = episodes.map(rewardParts);
  const A = {
    format: groupAdvantages(
      parts.map((p) => p.format),
      groups,
      scale,
    ),
    answer: groupAdvantages(
      parts.map((p) => p.answer),
      groups,
      scale,
    ),
    reasoning: groupAdvantages(
      parts.map((p) => p.reasoning),
      groups,
      scale,
    ),
  };
  const withReasoning = ctx.cfg.credit.reward_decomposition.reasoning;
  const adv = episodes.map((e, i) => {
    const tags = tagTokens(e);
    return e.sections.map((sec, t) =>
      tags[t] || sec === 'other' ? A.format[i] : sec === 'answer' ? A.answer[i] : withReasoning ? A.reasoning[i] : A.answer[i],
    );
  });
  const metrics = {
    'reward_decomposition/reasoning_mean': parts.reduce((a, p) => a + p.reasoning, 0) / parts.length,
  };
  return { batch: tokenAdvantageBatch(adv, episodes), metrics };
}

export const rewardDecomposition: CreditStrategy = { name: 'reward_decomposition', rowLocal: true, prepare, ...PREPARED_CREDIT };
