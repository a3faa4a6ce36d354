// veRL's trainer.rollout_data_dir: `<dir>/<step>.jsonl`, one object per completion with `input` (the templated prompt),
// `output`, `score`, `step`, and optionally `gts` and the reward function's extra infos.
import { fileStep, groupOf, num, step, successOf, text, type Obj } from '../fields';
import type { ImportReader } from './types';

function verlRecord(o: Obj, path: string) {
  return {
    step: step(o, fileStep(path)),
    group: groupOf(o),
    prompt: text(o, 'input'),
    completion: text(o, 'output'),
    reward: num(o, 'score', true),
    advantage: null,
    success: successOf(o),
  };
}

export const verl: ImportReader = {
  id: 'verl',
  detect: (_files, first) => !!first && 'input' in first && 'output' in first,
  records: (o, path) => [verlRecord(o, path)],
};
