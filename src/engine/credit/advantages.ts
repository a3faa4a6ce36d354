// The episode advantage A_i of GRPO (design.md#semantics): each reward against its group's, before any strategy spreads it over
// tokens. Credit strategies that set their own per-part or per-token advantages (reward_decomposition) use the same
// normalisation; train/grpo.ts re-exports these for the trainer and the import.
import { meanStd } from '../core/stats';

export type ScaleRewards = 'group' | 'batch' | 'none';

/**
 * Episode advantages. Rewards are laid out group after group (groupSize consecutive episodes share a prompt), and
 * r − mean_g is always centred on the group, as in TRL's GRPOTrainer:
 *   group: divided by the group's std + 1e-4 (GRPO, GRPO-Zero, TRL's default);
 *   batch: divided by the whole batch's std + 1e-4 (TRL's scale_rewards="batch", after "Tricks or Traps?", Liu et al.
 *          2025: a group's own std over-weights groups that are nearly all right or all wrong);
 *   none:  not divided (Dr. GRPO).
 * Stds are sample stds (N − 1), as torch.std.
 */
export function advantages(rewards: number[], groupSize: number, scale: ScaleRewards): number[] {
  if (groupSize < 1 || rewards.length % groupSize !== 0) {
    throw new Error(`advantages: ${rewards.length} rewards do not split into groups of ${groupSize}`);
  }
  return groupAdvantages(
    rewards,
    rewards.map((_, i) => Math.floor(i / groupSize)),
    scale,
  );
}

/**
 * The same for groups of any size and order (`groups[i]` names episode i's group): imported rollouts, whose groups
 * are what the source logged. Within a group the members keep their order, so equal groups give advantages() exactly.
 */
export function groupAdvantages(rewards: number[], groups: number[], scale: ScaleRewards): number[] {
  const members = new Map<number, number[]>();
  groups.forEach((g, i) => {
    const l = members.get(g);
    if (l) l.push(i);
    else members.set(g, [i]);
  });
  const batchStd = scale === 'batch' ? meanStd(rewards).std : 0;
  const out = new Array<number>(rewards.length);
  for (const idx of members.values()) {
    const { mean, std } = meanStd(idx.map((i) => rewards[i]));
    const div = scale === 'group' ? std + 1e-4 : scale === 'batch' ? batchStd + 1e-4 : 1;
    for (const i of idx) out[i] = (rewards[i] - mean) / div;
  }
  return out;
}
