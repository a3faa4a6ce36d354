// Seed doc 003, CAL (fine-grained credit assignment from an oracle), design.md#semantics `cal`: for an episode whose answer is
// wrong (answer reward below 1), an oracle names the erroneous substring; its tokens (by character offsets, cut to
// max_error_span tokens from its start) get Â = negative_reward and the episode's other tokens Â = 0. Correct
// episodes, and wrong ones the oracle gives no span for, keep Â = A_i.
//
// The logged `weight` (weights()) is the same picture as a mask: 1 on the span's tokens and 0 on the rest of a span
// episode, 1 on every valid token of the other episodes, 0 on padding. Â itself comes from effectiveAdvantages(),
// since negative_reward is not A_i times anything.
import { defaultCacheDir } from '../oracle/cache';
import { createOracle, type OracleQuery } from '../oracle';
import { spanTokenMask } from '../oracle/locate';
import { oracleQuestion } from '../oracle/prompt';
import { validMask, type CreditBatch, type CreditStrategy, type EpisodeView, type PrepareContext, type Prepared } from './types';
import { meanStd } from '../core/stats';

function hasSpan(row: number[] | null | undefined): row is number[] {
  return !!row && row.some((v) => v > 0);
}

/**
 * Â per design.md#semantics `cal` over a padded batch: negative_reward·span on span episodes (divided by the episode's
 * calDivisor with scale group_std), A_i on the other valid tokens. placement episode: the span's total, r·n_span,
 * spread over the episode's n_i valid tokens, r·n_span/n_i each.
 */
export function calEffectiveAdvantages(batch: CreditBatch, advantages: number[], negativeReward: number, placement: 'span' | 'episode' = 'span'): number[][] {
  const mask = validMask(batch);
  return mask.map((row, i) => {
    const span = batch.spanMask?.[i];
    if (!hasSpan(span)) return row.map((m) => (m ? advantages[i] : 0));
    const r = negativeReward / (batch.calDivisor?.[i] ?? 1);
    if (placement === 'episode') {
      const n = row.reduce((a, m) => a + m, 0);
      const nSpan = row.reduce((a, m, t) => a + (m && span[t] ? 1 : 0), 0);
      return row.map((m) => (m ? (r * nSpan) / n : 0));
    }
    return row.map((m, t) => (m && span[t] ? r : 0));
  });
}

/**
 * What scale group_std divides negative_reward by, per episode: its group's reward std + 1e-4 (sample std, as the
 * advantages use); a group whose rewards are all equal (std 0, where GRPO gives every episode A = 0) takes the batch's
 * std instead, and a batch of equal rewards 1, so that the divisor is never the bare 1e-4.
 */
export function calDivisors(rewards: number[], groups: number[]): number[] {
  const byGroup = new Map<number, number[]>();
  groups.forEach((g, i) => {
    const l = byGroup.get(g);
    if (l) l.push(rewards[i]);
    else byGroup.set(g, [rewards[i]]);
  });
  const batch = meanStd(rewards).std;
  return groups.map((g) => {
    const std = meanStd(byGroup.get(g)!).std;
    return std > 0 ? std + 1e-4 : batch > 0 ? batch + 1e-4 : 1;
  });
}

/** Where the cache goes (null with cache: false): the shared folder, see oracle/cache.ts for why. */
export function oracleCacheDir(cfg: { readonly credit: { readonly cal: { readonly cache: boolean } } }): string | null {
  return cfg.credit.cal.cache ? defaultCacheDir() : null;
}

const announced = new Set<string>();

async function prepare(episodes: EpisodeView[], ctx: PrepareContext): Promise<Prepared> {
  const cal = ctx.cfg.credit.cal;
  const cacheDir = cal.provider === 'rule' ? null : oracleCacheDir(ctx.cfg);
  const oracle = createOracle({ cal, task: ctx.task.name, reward: ctx.cfg.task.reward, cacheDir });
  if (cacheDir && !announced.has(cacheDir)) {
    announced.add(cacheDir);
    ctx.log('info', `cal: ${cal.provider} oracle replies are cached in ${cacheDir}`);
  }

  const wrong = episodes.filter((e) => e.reward.answer < 1);
  const correctOf = new Map<number, string>();
  for (const e of episodes) if (e.reward.answer >= 1 && !correctOf.has(e.group)) correctOf.set(e.group, e.prefill + e.completion);
  const queries: OracleQuery[] = wrong.map((e) => ({
    question: oracleQuestion(ctx.task.name, e.example),
    correct: correctOf.get(e.group) ?? null,
    incorrect: e.prefill + e.completion,
  }));
  const outcomes = await oracle.ask(queries, ctx.signal);

  const spanMask: (number[] | null)[] = episodes.map(() => null);
  const oracleSpans: (string | null)[] = episodes.map(() => null);
  const reasons = new Map<string, number>();
  let spanTokens = 0,
    cacheHits = 0,
    requests = 0;
  wrong.forEach((e, j) => {
    const o = outcomes[j];
    if (o.cached) cacheHits++;
    requests += o.requests;
    let failure = o.failure ?? 'no span';
    if (o.span) {
      // The oracle saw prefill + completion; token offsets count from the completion's first character.
      const shift = e.prefill.length;
      const mask = spanTokenMask(e.tokens, { start: o.span.start - shift, end: o.span.end - shift }, cal.max_error_span);
      const marked = e.tokens.filter((_, t) => mask[t]);
      if (marked.length > 0) {
        spanMask[e.index] = mask;
        oracleSpans[e.index] = e.completion.slice(marked[0].start, marked[marked.length - 1].end);
        spanTokens += marked.length;
        return;
      }
      failure = 'span outside the completion';
    }
    reasons.set(failure, (reasons.get(failure) ?? 0) + 1);
  });
  const failures = [...reasons.values()].reduce((a, b) => a + b, 0);
  if (failures > 0) {
    const list = [...reasons].map(([r, n]) => `${n}× ${r}`).join('; ');
    // Requests that failed and replies that could not be read are operational trouble worth a warning; a wrong
    // episode with nothing to blame, or a span the oracle misquoted, is the oracle's judgement and only counted.
    const trouble = [...reasons.keys()].some((r) => /^(request failed|malformed reply|reply without text)/.test(r));
    ctx.log(
      trouble ? 'warn' : 'info',
      `step ${ctx.step}: cal: ${failures} of ${wrong.length} wrong episodes got no error span and keep their advantage (${list})`,
    );
  }
  // oracle_calls: wrong episodes put to the oracle; cache_hits: those answered without a request (disk cache, or an
  // identical query earlier in the step); requests: HTTP requests sent, retries included (what a paid API bills).
  return {
    batch: {
      spanMask,
      ...(cal.scale === 'group_std'
        ? {
            calDivisor: calDivisors(
              episodes.map((e) => e.reward.total),
              episodes.map((e) => e.group),
            ),
          }
        : {}),
    },
    oracleSpans,
    metrics: {
      'cal/oracle_calls': wrong.length,
      'cal/cache_hits': cacheHits,
      'cal/failures': failures,
      'cal/span_tokens': spanTokens,
      'cal/requests': requests,
    },
  };
}

export const cal: CreditStrategy = {
  name: 'cal',
  weights: (batch, params) => {
    const mask = validMask(batch);
    return mask.map((row, i) => {
      const span = batch.spanMask?.[i];
      if (!hasSpan(span) || params.placement === 'episode') return row.map((m) => (m ? 1 : 0));
      return row.map((m, t) => (m && span[t] ? 1 : 0));
    });
  },
  prepare,
  effectiveAdvantages: (batch, advantages, params) => calEffectiveAdvantages(batch, advantages, params.negative_reward, params.placement),
};
