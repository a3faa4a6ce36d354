// The probe's scores: each strategy's credit, computed on the probed step's episodes under the policy that sampled them
// (or, where only a server holds that policy, the run's own Â and the update's realized credit), against the episodes'
// Monte Carlo values (accuracy.ts).
import { applyOverrides, validateConfig, type CreditConfig } from '../config/config';
import type { Example, Section } from '../core/types';
import { probeVariants } from '../credit/catalog';
import type { EpisodeView } from '../credit/types';
import type { ProbeRow } from '../model/prefix_values';
import type { EpisodeColumns, TokenColumnsRead } from '../rundir/arrow_tables';
import { IMPORT_STRATEGIES, LOCAL_PREPARE_STRATEGIES, localCredit, scoreStrategies } from '../session/score';
import type { openSession } from '../session/session';
import { creditAccuracy, type AccuracyReport, type ProbedEpisode } from './accuracy';

/**
 * Each strategy that needs no training, scored on the whole step under the sampling policy (a strategy that normalises
 * over the batch, as entropy_mask's percentile does, sees the batch it would have trained on), and the run's own Â from
 * the token table, against the probed episodes' Monte Carlo values.
 */
export async function accuracyOf(
  s: Awaited<ReturnType<typeof openSession>>['session'],
  cfg: Parameters<typeof scoreStrategies>[2],
  tok: TokenColumnsRead,
  eps: EpisodeColumns,
  byEpisode: number[][],
  rows: ProbeRow[],
  probed: number[],
): Promise<AccuracyReport> {
  const items = byEpisode.map((r, e) => {
    const ex = { id: eps.prompt_idx[e], prompt: eps.prompt[e] };
    return {
      promptIds: s.tokenizer.encodePrompt(ex.prompt),
      ids: r.map((k) => tok.token_id[k]),
      sections: r.map((k) => tok.section[k] as Section),
      advantage: eps.advantage[e],
    };
  });
  const names = IMPORT_STRATEGIES.filter((n) => n !== cfg.credit.strategy);
  const scored = await scoreStrategies({ model: s.model, tokenizer: s.tokenizer, describe: 'probe', dispose: () => {} }, items, cfg, names);
  probed.sort((a, b) => a - b);
  const episodes = probedEpisodes(tok, eps, byEpisode, rows, probed);
  const effAdv: Record<string, number[][]> = {};
  effAdv[cfg.credit.strategy] = probed.map((e) => byEpisode[e].map((k) => tok.effective_advantage[k]));
  for (const n of names) effAdv[n] = probed.map((e) => scored[e].credit[n].effAdv);
  // the methods that set Â from the whole group (ktae, otb, reward_decomposition, gtpo's paper form): their prepare() on
  // the step's episodes, with the rewards recomputed by the task and the distributions scored under the policy
  const examples = new Map<number, Example>(s.task.train.map((ex) => [ex.id, ex]));
  const groupOf = groupIndex(eps.prompt_idx);
  const views: EpisodeView[] = byEpisode.map((r, e) => {
    const example = examples.get(eps.prompt_idx[e]) ?? { id: eps.prompt_idx[e], prompt: eps.prompt[e] };
    let at = 0;
    const tokens = r.map((k) => {
      const text = tok.token[k];
      const span = { id: tok.token_id[k], text, start: at, end: at + text.length };
      at += text.length;
      return span;
    });
    const completion = tokens.map((t) => t.text).join('');
    return {
      index: e,
      group: groupOf[e],
      example,
      prefill: s.task.prefill,
      completion,
      tokens,
      promptIds: items[e].promptIds,
      ids: items[e].ids,
      // the task's parts, with the total the run trained on (shaped by grpo.overlong_buffer)
      reward: { ...s.task.reward(completion, example), total: eps.reward[e] },
      success: eps.success[e],
      advantage: eps.advantage[e],
      logprobs: scored[e].logprob,
      entropies: scored[e].entropy,
      probSq: scored[e].probSq,
      sections: items[e].sections,
    };
  });
  const ctx = { step: 0, runDir: '', cfg, task: s.task, tokenizer: s.tokenizer, log: () => {} };
  const local = [...LOCAL_PREPARE_STRATEGIES.map((n) => ({ strategy: n, label: n as string, sets: [] as string[] })), ...probeVariants()];
  for (const { strategy, label, sets } of local) {
    if (label === cfg.credit.strategy && !sets.length) continue;
    const c = sets.length ? loadConfigWith(cfg, sets) : cfg;
    const rowsAdv = await localCredit(strategy, views, { ...ctx, cfg: c });
    effAdv[label] = probed.map((e) => rowsAdv[e]);
  }
  addRealized(effAdv, tok, byEpisode, probed);
  return creditAccuracy(episodes, effAdv);
}

/** The probed episodes as the accuracy reads them: values by position, and the token table's columns. */
function probedEpisodes(tok: TokenColumnsRead, eps: EpisodeColumns, byEpisode: number[][], rows: ProbeRow[], probed: number[]): ProbedEpisode[] {
  const byEp = new Map<number, ProbeRow[]>();
  for (const r of rows) byEp.set(r.episode, [...(byEp.get(r.episode) ?? []), r]);
  return probed.map((e) => {
    const pr = byEp.get(e)!.sort((a, b) => a.position - b.position);
    return {
      prompt: eps.prompt_idx[e],
      n: byEpisode[e].length,
      positions: pr.map((r) => r.position),
      values: pr.map((r) => r.value),
      valuesA: pr.map((r) => r.valueA),
      valuesB: pr.map((r) => r.valueB),
      varsA: pr.map((r) => r.varA ?? null),
      varsB: pr.map((r) => r.varB ?? null),
      advantage: eps.advantage[e],
      logprobs: byEpisode[e].map((k) => tok.logprob[k]),
      entropies: byEpisode[e].map((k) => tok.entropy[k]),
      realized: tok.realized ? byEpisode[e].map((k) => tok.realized![k]) : undefined,
      ownAdv: byEpisode[e].map((k) => tok.effective_advantage[k]),
    };
  });
}

/**
 * What the update did, and what training so far did (the shift from the reference policy), scored as credit: the
 * signed measures (Pearson, Kendall, the sign test) read them directly.
 */
function addRealized(effAdv: Record<string, number[][]>, tok: TokenColumnsRead, byEpisode: number[][], probed: number[]): void {
  const columns: [string, Float32Array | null | undefined][] = [
    ['realized (the update)', tok.realized],
    ['shift from the reference (training so far)', tok.ref_logratio],
  ];
  for (const [label, col] of columns)
    if (col && probed.every((e) => byEpisode[e].every((k) => !Number.isNaN(col[k])))) effAdv[label] = probed.map((e) => byEpisode[e].map((k) => col[k]));
}

/**
 * The accuracy of what the token table holds, when the step's policy is only on a server: the run's own Â and the
 * update's realized credit. The other strategies are scored under the policy, which this process does not have.
 */
export function ownAccuracy(
  cfg: CreditConfig,
  tok: TokenColumnsRead,
  eps: EpisodeColumns,
  byEpisode: number[][],
  rows: ProbeRow[],
  probed: number[],
): AccuracyReport {
  probed.sort((a, b) => a - b);
  const effAdv: Record<string, number[][]> = { [cfg.credit.strategy]: probed.map((e) => byEpisode[e].map((k) => tok.effective_advantage[k])) };
  addRealized(effAdv, tok, byEpisode, probed);
  const acc = creditAccuracy(probedEpisodes(tok, eps, byEpisode, rows, probed), effAdv);
  acc.warnings = [
    ...(acc.warnings ?? []),
    "only the run's own strategy (and the update's realized credit) is scored: the others are scored under the step's policy, which the run did not keep here (the server has it)",
  ];
  return acc;
}

/** Each episode's group: consecutive episodes of one prompt (the step's layout). */
function groupIndex(promptIdx: ArrayLike<number>): number[] {
  const out: number[] = [];
  let g = -1;
  for (let i = 0; i < promptIdx.length; i++) {
    if (i === 0 || promptIdx[i] !== promptIdx[i - 1]) g++;
    out.push(g);
  }
  return out;
}

/** The run's config with a few keys set (a catalog entry's probe variant). */
function loadConfigWith(cfg: CreditConfig, sets: string[]): CreditConfig {
  const { config, issues } = validateConfig(applyOverrides(cfg as unknown as Record<string, unknown>, sets));
  if (!config) throw new Error(`cannot set ${sets.join(', ')}: ${issues.map((i) => i.message).join('; ')}`);
  return config;
}
