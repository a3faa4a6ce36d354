// prime-rl's rollouts, which carry per-token values already: its token exports (trainer.enable_token_export: one
// sequence a line with token_ids, loss_mask, advantages, log-probs and entropies) and its traces (one episode a line,
// each message a node).
import type { ImportReader } from './types';
import { PRIME_STREAM, branchPaths, foldAnnotations, traceUpdates, tracesDir } from './prime_stream';
import { PendingRowError, RowError, isObj, num, numList, show, step, fileStep, type ImportedRecord, type Obj } from '../fields';

/** prime-rl's traces.jsonl under rollouts/step_N/{train,eval}/{all,effective}/ (its older layout). */
export const PRIME_TRACES = /(^|[/\\])rollouts[/\\]step_\d+[/\\](train|eval)[/\\](all|effective)[/\\]traces\.jsonl$/;

/** prime-rl's per-token columns beyond log-prob, entropy and advantage, kept as extra token columns. */
export const PRIME_EXTRA_COLUMNS = ['inference_logprobs', 'importance_ratio', 'log_importance_ratio', 'mismatch_kl', 'prob_delta'] as const;

/** A prime-rl token export line: one sequence, prompt and completion tokens, completion tokens where loss_mask. */
export function primeRecord(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'> {
  const ids = o.token_ids;
  if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x) && x >= 0)) throw new RowError(`token_ids: expected a list of token ids, got ${show(ids)}`);
  const n = ids.length;
  const mask = o.loss_mask;
  if (!Array.isArray(mask) || mask.length !== n) throw new RowError(`loss_mask: expected ${n} booleans (one per token), got ${show(mask)}`);
  const on = mask.map((m) => m === true || m === 1);
  const first = on.indexOf(true);
  if (first < 0) throw new RowError('loss_mask: no completion token (every entry false)');
  const pick = <T>(xs: T[]) => xs.filter((_, i) => on[i]);
  const lp = numList(o, 'trainer_logprobs', n, false) ?? numList(o, 'inference_logprobs', n, true)!;
  const adv = numList(o, 'advantages', n, true)!;
  const ent = numList(o, 'entropy', n, false);
  const rewards = numList(o, 'rewards', n, false, true);
  const extra: Record<string, (number | null)[]> = {};
  for (const k of PRIME_EXTRA_COLUMNS) {
    const col = numList(o, k, n, false, true);
    if (col && col.some((x) => x !== null)) extra[k === 'inference_logprobs' ? 'inference_logprob' : k] = pick(col);
  }
  const reward = rewards ? (pick(rewards).find((x) => x !== null) ?? null) : num(o, 'reward', false);
  return {
    step: step({ step: o.export_step ?? o.step }, fileStep(path)),
    group: null,
    prompt: '',
    completion: '',
    reward,
    advantage: null,
    success: null,
    tokens: {
      promptIds: ids.slice(0, first) as number[],
      ids: pick(ids as number[]),
      logprob: pick(lp as number[]),
      entropy: ent ? pick(ent as number[]) : null,
      advantage: pick(adv as number[]),
      extra,
    },
  };
}

/** A message's text: a string, or the text parts of a content list (OpenAI's chat shape). */
function messageText(m: unknown): string {
  const c = isObj(m) ? m.content : undefined;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (isObj(p) && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

/**
 * A path's token ids, which of them were sampled (mask), and the sampled ones' log-probs (the trainer's where the run
 * annotated them, else the sampler's), advantages and entropies (null unless every sampled node has them).
 */
function pathTokens(pathNodes: Obj[]): { ids: number[]; mask: boolean[]; logprob: number[]; advantage: number[]; entropy: number[] | null } {
  const out = { ids: [] as number[], mask: [] as boolean[], logprob: [] as number[], advantage: [] as number[], entropy: [] as number[] | null };
  for (const n of pathNodes) {
    const tid = Array.isArray(n.token_ids) ? (n.token_ids as unknown[]) : [];
    const m = Array.isArray(n.mask) ? (n.mask as unknown[]) : [];
    if (tid.length && m.length !== tid.length) throw new RowError(`nodes: mask has ${m.length} entries for ${tid.length} token ids`);
    const sampled = m.filter((x) => x === true).length;
    const lp = Array.isArray(n.trainer_logprobs) ? (n.trainer_logprobs as unknown[]) : Array.isArray(n.logprobs) ? (n.logprobs as unknown[]) : [];
    const adv = Array.isArray(n.advantages) ? (n.advantages as unknown[]) : null;
    const ent = Array.isArray(n.entropies) ? (n.entropies as unknown[]) : null;
    if (sampled && lp.length !== sampled) throw new RowError(`nodes: ${lp.length} logprobs for ${sampled} sampled tokens`);
    tid.forEach((x, i) => {
      if (!Number.isInteger(x) || (x as number) < 0) throw new RowError(`nodes: token id ${show(x)} is not a token id`);
      out.ids.push(x as number);
      out.mask.push(m[i] === true);
    });
    for (let k = 0; k < sampled; k++) {
      out.logprob.push(Number(lp[k]));
      out.advantage.push(adv && typeof adv[k] === 'number' ? (adv[k] as number) : NaN);
    }
    if (sampled && (!ent || ent.length !== sampled)) out.entropy = null;
    else if (out.entropy) for (let k = 0; k < sampled; k++) out.entropy.push(Number(ent![k]));
  }
  return out;
}

/**
 * The samples of one verifiers Episode record (prime-rl's traces.jsonl): one per branch (root-to-leaf path of a trace's
 * message nodes), as verifiers makes one training sample per branch. With token ids, the branch's tokens are the nodes'
 * spans concatenated, the completion the sampled (mask true) tokens, with the nodes' log-probs and advantages over them
 * (NaN advantages where the trainer assigned none: recomputed from the rewards); without, the text of the messages
 * before the first sampled one and of the sampled ones, to be scored. Reward: Σ score × weight of the trace's rewards.
 */
export function primeEpisodeRecords(
  row: Obj,
  path: string,
  updates = PRIME_STREAM.test(path) ? traceUpdates(tracesDir(path)) : null,
): Omit<ImportedRecord, 'file' | 'line'>[] {
  // the trace stream (prime_stream.ts): its annotations folded in, each trace at the step that trained it, evals left out
  const stream = updates !== null;
  const o = updates ? foldAnnotations(row, updates) : row;
  const traces = o.traces;
  if (!Array.isArray(traces)) throw new RowError(`traces: expected a list of traces, got ${show(traces)}`);
  if (!traces.length) {
    const err = Array.isArray(o.errors) && isObj(o.errors.at(-1)) ? (o.errors.at(-1) as Obj).message : undefined;
    throw new RowError(`the episode has no trace${err ? ` (${String(err).slice(0, 120)})` : ''}`);
  }
  const run = isObj(o.run) ? o.run : {};
  const work = isObj(run.work) ? run.work : {};
  const stepNo = step({ step: work.step }, fileStep(path));
  const group = isObj(o.group) && o.group.id !== undefined ? String(o.group.id) : null;
  const out: Omit<ImportedRecord, 'file' | 'line'>[] = [];
  let evals = 0;
  for (const t of traces) {
    if (!isObj(t) || !Array.isArray(t.nodes)) throw new RowError(`traces[]: expected {nodes: [...]}, got ${show(t)}`);
    let traceStep = stepNo;
    if (stream) {
      const info = isObj(t.info) ? t.info : {};
      if ((info.kind ?? work.type) === 'eval') {
        evals++;
        continue;
      }
      const ship = isObj(info.ship) ? info.ship.step : undefined;
      if (!Number.isInteger(ship))
        throw new PendingRowError(`trace ${show(t.id)}: not trained yet, or its annotations are missing (no info.ship.step in annotations/orch)`);
      traceStep = ship as number;
    }
    const nodes = t.nodes as Obj[];
    const rewards = isObj(t.rewards) ? Object.values(t.rewards) : [];
    const scored = rewards.filter(isObj);
    const reward = scored.length ? scored.reduce((a, r) => a + Number(r.score ?? 0) * Number(r.weight ?? 1), 0) : null;
    for (const branch of branchPaths(nodes)) {
      const pathNodes = branch.map((k) => nodes[k]);
      const { ids, mask, logprob, advantage, entropy } = pathTokens(pathNodes);
      const sampledNodes = pathNodes.filter((n) => n.sampled === true);
      if (!sampledNodes.length) continue;
      const first = mask.indexOf(true);
      if (first >= 0) {
        out.push({
          step: traceStep,
          group,
          prompt: '',
          completion: '',
          reward,
          advantage: null,
          success: null,
          tokens: { promptIds: ids.slice(0, first), ids: ids.filter((_, i) => mask[i]), logprob, entropy, advantage, extra: {} },
        });
      } else {
        // a relayed turn without token ids: text, scored by --model or --score-server
        const firstSampled = pathNodes.indexOf(sampledNodes[0]);
        out.push({
          step: traceStep,
          group,
          prompt: pathNodes
            .slice(0, firstSampled)
            .map((n) => messageText(n.message))
            .join('\n'),
          completion: sampledNodes.map((n) => messageText(n.message)).join('\n'),
          reward,
          advantage: null,
          success: null,
        });
      }
    }
  }
  if (!out.length && evals) return [];
  if (!out.length) throw new RowError('the episode has no sampled message');
  return out;
}

export const prime: ImportReader = {
  id: 'prime',
  detect: (files, first) =>
    files.some((f) => /(^|[/\\])token_exports[/\\]/.test(f)) ||
    (!!first && 'token_ids' in first && 'loss_mask' in first) ||
    files.some((f) => PRIME_TRACES.test(f) || PRIME_STREAM.test(f)) ||
    (!!first && Array.isArray(first.traces) && 'task' in first),
  records: (o, path) => (Array.isArray(o.traces) ? primeEpisodeRecords(o, path) : [primeRecord(o, path)]),
  // a stream's annotations (a listing and a stat of every annotation file) once per file, not once per episode
  forFile: (path) => {
    const updates = PRIME_STREAM.test(path) ? traceUpdates(tracesDir(path)) : null;
    return (o) => (Array.isArray(o.traces) ? primeEpisodeRecords(o, path, updates) : [primeRecord(o, path)]);
  },
};
