// Reward shaping: what a completion's reward is as a run trains on it. The task scores the text; the run's config may
// add to that (grpo.overlong_buffer, DAPO's soft overlong punishment). Training, the probe's continuations and the
// importer all score through here, so a probe's V_t is an expectation of the reward the run actually optimised.
import type { CreditConfig } from '../config/config';
import type { Example, Task } from '../core/types';
import type { Episode } from './rollout';

/** A whole completion's reward as the run trains on it: the task's, plus grpo.overlong_buffer's penalty by its length. */
export function shapedReward(s: { task: Task; cfg: Pick<CreditConfig, 'grpo'> }): (text: string, ex: Example, length: number) => number {
  const ob = s.cfg.grpo.overlong_buffer;
  return (text, ex, length) => s.task.reward(text, ex).total + (ob ? overlongPenalty(length, s.cfg.grpo.max_new_tokens, ob.len, ob.penalty) : 0);
}

/**
 * DAPO's soft overlong punishment (veRL): 0 up to max − len tokens, then falling linearly to −penalty at max tokens,
 * min(−(L − (max − len))/len · penalty, 0).
 */
export function overlongPenalty(length: number, maxNewTokens: number, len: number, penalty: number): number {
  const exceed = length - (maxNewTokens - len);
  return Math.min((-exceed / len) * penalty, 0);
}

/** Adds grpo.overlong_buffer's penalty to each episode's reward in place (and records it): from here on the shaped
 *  reward is the episode's reward (advantages, the episode table, the metrics). */
export function shapeRewards(cfg: Pick<CreditConfig, 'grpo'>, episodes: Episode[]): void {
  const ob = cfg.grpo.overlong_buffer;
  if (!ob) return;
  for (const e of episodes) {
    e.overlongPenalty = overlongPenalty(e.ids.length, cfg.grpo.max_new_tokens, ob.len, ob.penalty);
    e.reward = { ...e.reward, total: e.reward.total + e.overlongPenalty };
  }
}
