// Plain JSONL: `prompt`, `completion`, `reward` (optional `step`, `group`, `advantage`, `success`).
import { fileStep, groupOf, num, step, successOf, text, type Obj } from '../fields';
import type { ImportReader } from './types';

function jsonlRecord(o: Obj, path: string) {
  return {
    step: step(o, fileStep(path)),
    group: groupOf(o),
    prompt: text(o, 'prompt'),
    completion: text(o, 'completion'),
    reward: num(o, 'reward', true),
    advantage: num(o, 'advantage', false),
    success: successOf(o),
  };
}

export const jsonl: ImportReader = {
  id: 'jsonl',
  detect: (_files, first) => !!first && 'prompt' in first && 'completion' in first,
  records: (o, path) => [jsonlRecord(o, path)],
};
