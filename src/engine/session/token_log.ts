// The per-step token and episode tables of a GRPO step (design.md#run-directory): what the heatmaps and the analysis read.
import { allocTokenColumns, writeEpisodeTable, writeTokenTable, type TokenColumns } from '../rundir/arrow_tables';
import { type Episode } from './rollout';
import { stepFile } from '../rundir/rundir';
import { answerStatus } from '../tasks/sections';

/** A step's per-token columns, per episode over its completion tokens (GRPO steps and imported steps). */
export interface TokenLog {
  logprobs: number[][];
  weights: number[][];
  effAdv: number[][];
  adv: number[];
  attribution?: number[][];
  importance?: number[][];
  /** what the loss did to each token (GRPO steps; absent for imported runs): the weight on its gradient, the share of epochs cut */
  isWeight?: number[][];
  clipped?: number[][];
  /** |Â|·‖∂ log π/∂z‖ per token (gradNorms), where the sampler or the scorer saw the full distribution */
  gradNorm?: number[][];
  /** log π_new − log π_old per token after the step's update (logging.realized_credit) */
  realized?: number[][];
  /** log π − log π_ref per token, the sampling policy against the reference (logging.ref_logratio) */
  refLogratio?: number[][];
  oracleSpans?: (string | null)[];
  /** per-token columns beyond the contract, by name, per episode (imported runs: prime-rl's importance_ratio, …) */
  extra?: Record<string, (number | null)[][]>;
}

/**
 * The size of the gradient each token's term Â·log π(a) sends to the logits z: log π = log softmax(z/T)_a has gradient
 * (e_a − π)/T, whose norm is √(1 − 2π_a + Σ_j π_j²)/T, so the term's is |Â|·√(1 − 2π_a + Σ_j π_j²)/T (the
 * issue writes T = 1). π_a from the token's log-prob, Σ π² (probSq) from the same full distribution. Rows without
 * probSq get none.
 */
export function gradNorms(effAdv: number[][], logprobs: number[][], probSq: (number[] | undefined)[], temperature: number): number[][] | undefined {
  if (probSq.some((p) => !p)) return undefined;
  return effAdv.map((row, i) =>
    probSq[i]!.map((sq, t) => {
      const p = Math.exp(logprobs[i][t]);
      return (Math.abs(row[t]) * Math.sqrt(Math.max(0, 1 - 2 * p + sq))) / temperature;
    }),
  );
}

/** Whether step `step`'s token and episode tables are written (logging.tokens, every logging.every steps). */
export function logsTables(logging: { tokens: boolean; every: number }, step: number): boolean {
  return logging.tokens && step % logging.every === 0;
}

/** Writes step `step`'s token and episode tables; returns the token columns written (for the trackers' histograms). */
export function logTables(runDir: string, step: number, episodes: Episode[], tok: TokenLog): TokenColumns {
  let n = 0;
  for (const e of episodes) n += e.ids.length;
  const cols = allocTokenColumns(n);
  cols.step.fill(step);
  // Extra per-token columns (an imported trainer's own values), flattened in the same row order.
  const extra = tok.extra ? Object.fromEntries(Object.keys(tok.extra).map((name) => [name, new Array<number | null>(n).fill(null)])) : undefined;
  let k = 0;
  episodes.forEach((e, i) => {
    let at = 0;
    for (let t = 0; t < e.ids.length; t++, k++) {
      cols.char_start[k] = at;
      at += e.tokens[t].text.length;
      cols.episode[k] = i;
      cols.prompt_idx[k] = e.example.id;
      cols.position[k] = t;
      cols.token_id[k] = e.ids[t];
      cols.token[k] = e.tokens[t].text;
      const lp = tok.logprobs[i][t];
      cols.logprob[k] = lp;
      cols.entropy[k] = e.entropies[t];
      cols.advantage[k] = tok.adv[i];
      cols.weight[k] = tok.weights[i][t];
      cols.effective_advantage[k] = tok.effAdv[i][t];
      // contribution = Â × ℓ (seed doc 002), computed in float32 like the stored columns so the identity holds exactly.
      cols.contribution[k] = Math.fround(Math.fround(tok.effAdv[i][t]) * Math.fround(lp));
      if (tok.attribution) cols.attribution[k] = tok.attribution[i][t];
      if (tok.importance) cols.importance[k] = tok.importance[i][t];
      if (tok.isWeight) cols.is_weight[k] = tok.isWeight[i][t];
      if (tok.clipped) cols.clipped[k] = tok.clipped[i][t];
      if (tok.gradNorm) cols.grad_norm[k] = tok.gradNorm[i][t];
      if (tok.realized) cols.realized[k] = tok.realized[i][t];
      if (tok.refLogratio) cols.ref_logratio[k] = tok.refLogratio[i][t];
      cols.section[k] = e.sections[t];
      cols.token_type[k] = e.tokenTypes[t];
      cols.reward[k] = e.reward.total;
      if (extra) for (const name in extra) extra[name][k] = tok.extra![name][i][t] ?? null;
    }
  });
  // a strategy without attribution or importance writes those columns as nulls, an imported step the loss's
  const written = {
    ...cols,
    attribution: tok.attribution ? cols.attribution : null,
    importance: tok.importance ? cols.importance : null,
    is_weight: tok.isWeight ? cols.is_weight : null,
    clipped: tok.clipped ? cols.clipped : null,
    grad_norm: tok.gradNorm ? cols.grad_norm : null,
    realized: tok.realized ? cols.realized : null,
    ref_logratio: tok.refLogratio ? cols.ref_logratio : null,
  };
  const table: TokenColumns = extra ? { ...written, extra } : written;
  writeTokenTable(stepFile(runDir, 'tokens', step), table);
  writeEpisodeTable(stepFile(runDir, 'episodes', step), {
    step: new Int32Array(episodes.length).fill(step),
    episode: Int32Array.from(episodes.map((_, i) => i)),
    prompt_idx: Int32Array.from(episodes.map((e) => e.example.id)),
    prompt: episodes.map((e) => e.example.prompt),
    completion: episodes.map((e) => e.text),
    reward: Float32Array.from(episodes.map((e) => e.reward.total)),
    reward_format: Float32Array.from(episodes.map((e) => e.reward.format)),
    reward_answer: Float32Array.from(episodes.map((e) => e.reward.answer)),
    success: episodes.map((e) => e.success),
    advantage: Float32Array.from(tok.adv),
    length: Int32Array.from(episodes.map((e) => e.ids.length)),
    oracle_span: episodes.map((_, i) => tok.oracleSpans?.[i] ?? null),
    truncated: episodes.map((e) => e.truncated ?? null),
    status: episodes.map((e) => (e.truncated === undefined ? null : answerStatus(e.text, e.success, e.truncated))),
  });
  return table;
}
