// The token shards credit_lens.verl writes inside a veRL run (CREDIT_LENS_SHARD_DIR): `step_N.jsonl`, one response a
// line with its uid, prompt and response token ids, the episode advantage A, and per token the effective advantage Â
// the credit_lens_<strategy> policy loss trained with, the strategy's weight, the old log-prob and (where veRL computed
// it) the entropy; with CREDIT_LENS_TOKENIZER the tokens' texts too. Each token's Â is imported as the trainer's own.
import { RowError, num, numList, show, step, fileStep, isObj, type Obj } from '../fields';
import type { ImportReader } from './types';

export const VERL_SHARD_FORMAT = 'credit-lens-verl-shard/1';

const idList = (o: Obj, key: string): number[] => {
  const v = o[key];
  if (!Array.isArray(v) || !v.every((x) => Number.isInteger(x) && (x as number) >= 0))
    throw new RowError(`${key}: expected a list of token ids, got ${show(v)}`);
  return v as number[];
};

function shardRecord(o: Obj, path: string) {
  if (o.format !== VERL_SHARD_FORMAT) throw new RowError(`format: expected ${VERL_SHARD_FORMAT}, got ${show(o.format)}`);
  const ids = idList(o, 'token_ids');
  if (!ids.length) throw new RowError('token_ids: an empty response');
  const n = ids.length;
  const texts = o.tokens === undefined ? undefined : o.tokens;
  if (texts !== undefined && (!Array.isArray(texts) || texts.length !== n || !texts.every((t) => typeof t === 'string')))
    throw new RowError(`tokens: expected ${n} strings (one per token id), got ${show(texts)}`);
  return {
    step: step(o, fileStep(path)),
    group: typeof o.uid === 'string' ? o.uid : null,
    prompt: typeof o.prompt === 'string' ? o.prompt : '',
    completion: '',
    reward: num(o, 'reward', false),
    advantage: num(o, 'advantage', true),
    success: null,
    tokens: {
      promptIds: idList(o, 'prompt_ids'),
      ids,
      logprob: numList(o, 'old_log_probs', n, true)! as number[],
      entropy: (numList(o, 'entropies', n, false) as number[] | null) ?? null,
      advantage: numList(o, 'effective_advantages', n, true)! as number[],
      extra: {},
      ...(texts ? { texts: texts as string[] } : {}),
      ...(typeof o.prompt === 'string' ? { promptText: o.prompt } : {}),
    },
  };
}

export const verlShard: ImportReader = {
  id: 'verl_shard',
  detect: (_files, first) => isObj(first) && first.format === VERL_SHARD_FORMAT,
  records: (o, path) => [shardRecord(o, path)],
};
