// TRL GRPOTrainer's completions table (log_completions): columns `step`, `prompt`, `completion`, one column per reward
// function (or `reward`), `advantage`. Read as JSONL rows, as a W&B table file (`{"columns": [...], "data": [[...]]}`)
// or as CSV (the W&B "export as CSV" of the table).
import { RowError, fileStep, groupOf, num, step, successOf, text, type Obj } from '../fields';
import type { ImportReader } from './types';

const TRL_NON_REWARD = new Set(['step', 'prompt', 'completion', 'advantage', 'image', 'images', 'group', 'group_id', 'success']);

function trlRecord(o: Obj, path: string) {
  let reward = num(o, 'reward', false);
  if (reward === null) {
    // One column per reward function, summed with TRL's default reward_weights of 1.
    const parts = Object.entries(o).filter(([k, v]) => !TRL_NON_REWARD.has(k) && typeof v === 'number' && Number.isFinite(v));
    if (!parts.length) throw new RowError('no reward: expected a reward column or one numeric column per reward function');
    reward = parts.reduce((a, [, v]) => a + (v as number), 0);
  }
  return {
    step: step(o, fileStep(path)),
    group: groupOf(o),
    prompt: text(o, 'prompt'),
    completion: text(o, 'completion'),
    reward,
    advantage: num(o, 'advantage', false),
    success: successOf(o),
  };
}

export const trl: ImportReader = {
  id: 'trl',
  detect: (files, first) => files.some((f) => /\.(csv|json)$/i.test(f)) || (!!first && 'completion' in first && ('advantage' in first || !('reward' in first))),
  records: (o, path) => [trlRecord(o, path)],
};
