// One imported step made into an ordinary step of a run: its episodes (grouped, with advantages from the source or
// from the rewards), their tokens scored here, on a server or taken from the file, and the step's token and episode
// tables, metrics row and tracker rows written.
import type { MetricsRow } from '../../protocol';
import type { CreditConfig } from '../config/config';
import { UserError, isUserError } from '../core/errors';
import { meanStd } from '../core/stats';
import { groupAdvantages } from '../credit/advantages';
import type { Section, Tokenizer, TokenSpan } from '../core/types';
import { appendMetrics } from '../rundir/rundir';
import type { RunTrackers } from '../tracking/trackers';
import { computeSections, tokenType } from '../tasks/sections';
import type { Episode } from '../session/rollout';
import { gradNorms, logTables, type TokenLog } from '../session/token_log';
import type { ImportedRecord, ImportProblem } from './formats';
import type { PromptTemplater } from '../session/chat_template';
import { scoreBatch, weighExported, type Scorer } from '../session/score';
import type { ServerSampler } from '../serving/client';
import { impossibleLogprob, topKStats } from '../server_apis/types';

export interface Pending {
  rec: ImportedRecord;
  /** its group in the step (the logged prompt, or the source's group id): advantages are taken over these */
  group: number;
  promptIdx: number;
  promptIds: number[];
  ids: number[];
  text: string;
  tokens: TokenSpan[];
  sections: Section[];
  advantage: number;
  reward: number;
  success: boolean;
  logprob?: number[];
  entropy?: number[];
  /** Σ_j π_j² at each position, where a model scored the tokens */
  probSq?: number[];
  /** the same over a server's top K (a lower bound) */
  probSqTopK?: number[];
  weight?: number[];
  effAdv?: number[];
  extra?: Record<string, (number | null)[]>;
}

const placeholder = (ids: number[]) => ids.map((id) => `⟨${id}⟩`);

/** One step of an import: its records with each one's group (members of a group consecutive, in their order). */
export interface StepPlan {
  step: number;
  records: ImportedRecord[];
  group: number[];
}

/**
 * The records by step, ascending, each step's records grouped (by the source's group id, else the prompt) in first-seen
 * order. Linear in the records: one pass to bucket them by step, one map of group keys per step. (Filtering all
 * records once per step, and indexOf over the groups, were quadratic: 20,000 prompts took 14 s.)
 */
export function planSteps(records: readonly ImportedRecord[]): StepPlan[] {
  const byStep = new Map<number, ImportedRecord[]>();
  for (const r of records) {
    const list = byStep.get(r.step);
    if (list) list.push(r);
    else byStep.set(r.step, [r]);
  }
  return [...byStep.keys()]
    .sort((a, b) => a - b)
    .map((step) => {
      const recs = byStep.get(step)!;
      const groupOf = new Map<string, number>();
      const ids = recs.map((r) => {
        const key = r.group ?? (r.tokens ? `ids:${r.tokens.promptIds.join(',')}` : `p:${r.prompt}`);
        let g = groupOf.get(key);
        if (g === undefined) groupOf.set(key, (g = groupOf.size));
        return g;
      });
      // a stable order by group: a group's members keep their order
      const order = recs.map((_, i) => i).sort((a, b) => ids[a] - ids[b]);
      return { step, records: order.map((i) => recs[i]), group: order.map((i) => ids[i]) };
    });
}

/** The largest of many numbers, without a spread (Math.max(...xs) overflows the call stack past ~130,000). */
/** Text and per-token spans of completion ids: decoded by a tokenizer, else the texts the source gave, else ⟨id⟩ placeholders. */
export function decodeTokens(tok: Tokenizer | null, ids: number[], texts?: string[]): { text: string; tokens: TokenSpan[] } {
  if (tok) return tok.decodeWithOffsets(ids);
  let at = 0;
  const tokens = (texts ?? placeholder(ids)).map((t, i): TokenSpan => {
    const s = { id: ids[i], text: t, start: at, end: at + t.length };
    at += t.length;
    return s;
  });
  return { text: tokens.map((t) => t.text).join(''), tokens };
}

export function sectionsOf(prompt: string, text: string, tokens: TokenSpan[]): Section[] {
  // A prompt ending in "<think>" opens the think section (the chat template's prefill, design.md#semantics).
  const prefill = prompt.trimEnd().endsWith('<think>') ? '<think>' : '';
  return computeSections(
    prefill + text,
    tokens.map((t) => ({ ...t, start: t.start + prefill.length, end: t.end + prefill.length })),
  );
}

/** A step whose tokens came with the trainer's own values (prime-rl): the strategy's weight multiplies its per-token advantage. */

export function weighFromFile(eps: Pending[], cfg: CreditConfig): void {
  const w = weighExported(
    eps.map((e) => ({ logprob: e.logprob!, entropy: e.entropy!, sections: e.sections, advantage: e.advantage })),
    cfg,
  );
  // The trainer's per-token advantage stays the effective advantage; the strategy's weight multiplies it.
  eps.forEach((e, i) => {
    const fileAdv = e.rec.tokens!.advantage;
    e.weight = w[i].weight.map((wt, t) => (e.advantage !== 0 ? (wt * fileAdv[t]) / e.advantage : wt));
    e.effAdv = w[i].weight.map((wt, t) => wt * fileAdv[t]);
  });
}

/**
 * A step's completions scored by the model, in batches sorted by length and sized so that completion tokens ×
 * vocabulary stays within the budget; inside a batch (one long completion included) the lm head runs in blocks of at
 * most `budget` logits (model.scoreTokens).
 */
export async function scoreStep(
  eps: Pending[],
  scorer: Scorer,
  cfg: CreditConfig,
  c: { budget: number; cancelled: () => Promise<void>; scored: (n: number) => void },
): Promise<void> {
  const vocab = scorer.model.cfg.vocabSize;
  const order = eps.map((_, i) => i).sort((a, b) => eps[a].ids.length - eps[b].ids.length);
  for (let start = 0; start < order.length;) {
    await c.cancelled();
    const width = eps[order[start]].ids.length;
    let n = 1;
    while (start + n < order.length && (n + 1) * Math.max(width, eps[order[start + n]].ids.length) * vocab <= c.budget) n++;
    const batch = order.slice(start, start + n);
    const out = await scoreBatch(
      scorer,
      batch.map((i) => eps[i]),
      cfg,
      { budget: c.budget, beforeChunk: c.cancelled },
    );
    batch.forEach((i, k) =>
      Object.assign(eps[i], { logprob: out[k].logprob, entropy: out[k].entropy, probSq: out[k].probSq, weight: out[k].weight, effAdv: out[k].effAdv }),
    );
    start += n;
    c.scored(n);
  }
}

/**
 * A step's completions scored on a server: each token's log-prob at temperature 1 and the top K at each position, from
 * which `entropy_topk` and `grad_norm_topk` are estimated (topKStats: lower bounds, so never written under the exact
 * names); the strategy weighs the tokens on those estimates (weighExported), as for an export that carries its own.
 */
export async function scoreStepOnServer(
  eps: Pending[],
  server: ServerSampler,
  cfg: CreditConfig,
  topK: number,
  c: { cancelled: () => Promise<void>; scored: (n: number) => void; stopped: () => boolean; skip: (e: Pending, reason: string) => void },
): Promise<void> {
  const skipped = new Set<Pending>();
  // chunks of 64 completions: progress between them, and a cancel seen within one chunk's requests
  for (let start = 0; start < eps.length; start += 64) {
    await c.cancelled();
    const part = eps.slice(start, start + 64);
    const out = await server.score(
      part.map((e) => ({ prefix: e.promptIds, ids: e.ids })),
      topK,
      { stop: c.stopped },
    );
    if (!out) await c.cancelled();
    part.forEach((e, i) => {
      // as a file's impossible values are: the completion is skipped with the reason, the rest of its step imported
      const bad = impossibleLogprob(out![i].logprobs, e.ids);
      if (bad) {
        skipped.add(e);
        c.skip(e, bad);
        return;
      }
      const stats = out![i].top.map((t) => topKStats(t.logprobs));
      e.logprob = out![i].logprobs;
      e.entropy = e.ids.map(() => NaN);
      e.extra = { ...e.extra, entropy_topk: stats.map((x) => x.entropy) };
      e.probSqTopK = stats.map((x) => x.probSq);
    });
    c.scored(part.length);
  }
  // the caller's list loses the skipped completions: what it writes is what was scored
  for (let i = eps.length - 1; i >= 0; i--) if (skipped.has(eps[i])) eps.splice(i, 1);
  const w = weighExported(
    eps.map((e) => ({ logprob: e.logprob!, entropy: e.extra!.entropy_topk as number[], sections: e.sections, advantage: e.advantage })),
    cfg,
    'through a server (no attention): score with --model instead',
  );
  eps.forEach((e, i) => {
    e.weight = w[i].weight;
    e.effAdv = w[i].effAdv;
    e.extra!.grad_norm_topk = gradNorms([e.effAdv], [e.logprob!], [e.probSqTopK], 1)![0];
  });
}

/**
 * Token ids from another trainer's tokenizer: one outside ours (or the scoring model's) skips the line with its reason,
 * rather than aborting the import inside a decoder.
 */
function checkIds(r: ImportedRecord, tokenizer: Tokenizer | null, encoder: { vocab: number } | null): void {
  if (!r.tokens || !tokenizer) return;
  const n = Math.min(tokenizer.vocabSize, encoder?.vocab ?? Infinity);
  const bad = [...r.tokens.promptIds, ...r.tokens.ids].find((id) => !Number.isInteger(id) || id < 0 || id >= n);
  if (bad !== undefined) throw new UserError(`token id ${bad} is outside the tokenizer's vocabulary [0, ${n}): exported with another tokenizer?`);
}

/** Advantages the source did not log: from the rewards, by the step's groups. */
function fillAdvantages(eps: Pending[], cfg: CreditConfig): void {
  if (!eps.some((e) => Number.isNaN(e.advantage))) return;
  const a = groupAdvantages(
    eps.map((e) => (Number.isFinite(e.reward) ? e.reward : 0)),
    eps.map((e) => e.group),
    cfg.grpo.scale_rewards,
  );
  eps.forEach((e, i) => {
    if (!Number.isNaN(e.advantage)) return;
    e.advantage = a[i];
    // per-token advantages the trainer had not assigned (a prime-rl episode logged before its update): the episode's
    if (e.rec.tokens) e.rec = { ...e.rec, tokens: { ...e.rec.tokens, advantage: e.rec.tokens.advantage.map((x) => (Number.isNaN(x) ? a[i] : x)) } };
  });
}

/**
 * The imported records as episodes, by step: token ids checked against the vocabulary, prompts through the chat template
 * as the scoring model saw them, texts and sections decoded, and advantages the source did not log computed from the
 * rewards by group. A record that cannot be an episode is skipped into `problems` with its reason.
 */
export function episodesByStep(
  records: ImportedRecord[],
  c: {
    /** what encodes logged texts for scoring: the scoring model's tokenizer, its vocabulary and context */
    encoder: { tokenizer: Tokenizer; vocab: number; maxSeq: number } | null;
    tokenizer: Tokenizer | null;
    cfg: CreditConfig;
    threshold: number;
    templater: PromptTemplater;
    problems: ImportProblem[];
    /** prompt (or prompt ids) → its index, kept across calls so that a later step's prompts keep their numbers */
    promptIndex: Map<string, number>;
  },
): Map<number, Pending[]> {
  const { encoder, tokenizer, cfg, threshold, templater, problems, promptIndex } = c;
  const plan = planSteps(records);
  const byStep = new Map<number, Pending[]>();
  const skip = (r: ImportedRecord, reason: string) => problems.push({ file: r.file, line: r.line, reason });
  const maxSeq = encoder?.maxSeq ?? Infinity;
  for (const { step, records: recs, group: groups } of plan) {
    const eps: Pending[] = [];
    for (const [k, r] of recs.entries()) {
      try {
        checkIds(r, tokenizer, encoder);
        // a logged prompt text is scored (and shown) as the chat template makes it; token ids are what the model saw
        const scored = r.tokens ? null : templater.text(r.prompt).text;
        const promptText = r.tokens
          ? tokenizer
            ? tokenizer.decode(r.tokens.promptIds)
            : (r.tokens.promptText ?? `⟨${r.tokens.promptIds.length} prompt tokens⟩`)
          : scored!;
        const pKey = r.tokens ? `ids:${r.tokens.promptIds.join(',')}` : r.prompt;
        if (!promptIndex.has(pKey)) promptIndex.set(pKey, promptIndex.size);
        let promptIds: number[];
        let ids: number[];
        if (r.tokens) {
          promptIds = r.tokens.promptIds;
          ids = r.tokens.ids;
        } else {
          if (!encoder) throw new UserError('no token ids to import as they are: pass --model or --score-server to score its text');
          promptIds = encoder.tokenizer.encodePrompt(scored!);
          ids = encoder!.tokenizer.encode(r.completion);
          if (!ids.length) throw new UserError('empty completion');
          if (ids.length + 1 > maxSeq) throw new UserError(`completion is ${ids.length} tokens, the model's context is ${maxSeq}`);
          // Keep the prompt's end (the tokens the completion follows) when both do not fit.
          if (promptIds.length + ids.length > maxSeq) promptIds = promptIds.slice(promptIds.length + ids.length - maxSeq);
        }
        const { text, tokens } = decodeTokens(tokenizer, ids, r.tokens?.texts);
        const reward = r.reward ?? NaN;
        // a per-token source's episode advantage: the one it logged (the veRL shards), else the mean of its tokens'
        const adv = r.advantage ?? (r.tokens ? r.tokens.advantage.reduce((a, b) => a + b, 0) / Math.max(1, r.tokens.advantage.length) : NaN);
        eps.push({
          rec: { ...r, prompt: promptText },
          group: groups[k],
          promptIdx: promptIndex.get(pKey)!,
          promptIds,
          ids,
          text,
          tokens,
          sections: sectionsOf(promptText, text, tokens),
          advantage: adv,
          reward,
          success: r.success ?? (Number.isFinite(reward) && reward >= threshold),
          ...(r.tokens ? { logprob: r.tokens.logprob, entropy: r.tokens.entropy ?? r.tokens.logprob.map(() => NaN), extra: r.tokens.extra } : {}),
        });
      } catch (e) {
        if (!isUserError(e)) throw e;
        skip(r, e.message);
      }
    }
    fillAdvantages(eps, cfg);
    if (eps.length) byStep.set(step, eps);
  }
  return byStep;
}

/** One step's token and episode tables (the trainer's own writer) and its metrics row. */
export function writeStep(runDir: string, step: number, eps: Pending[], temperature: number, trackers: RunTrackers): void {
  const episodes = eps.map((e): Episode => ({
    example: { id: e.promptIdx, prompt: e.rec.prompt },
    promptIds: e.promptIds,
    ids: e.ids,
    sampleLogprobs: e.logprob!,
    entropies: e.entropy!,
    text: e.text,
    tokens: e.tokens,
    sections: e.sections,
    tokenTypes: e.tokens.map((t) => tokenType(t.text)),
    reward: { total: e.reward, format: NaN, answer: e.success ? 1 : 0 },
    success: e.success,
  }));
  const extraNames = [...new Set(eps.flatMap((e) => Object.keys(e.extra ?? {})))];
  const tok: TokenLog = {
    logprobs: eps.map((e) => e.logprob!),
    weights: eps.map((e) => e.weight!),
    effAdv: eps.map((e) => e.effAdv!),
    adv: eps.map((e) => e.advantage),
    gradNorm: gradNorms(
      eps.map((e) => e.effAdv!),
      eps.map((e) => e.logprob!),
      eps.map((e) => e.probSq),
      temperature,
    ),
    ...(extraNames.length ? { extra: Object.fromEntries(extraNames.map((n) => [n, eps.map((e) => e.extra?.[n] ?? e.ids.map(() => null))])) } : {}),
  };
  trackers.tokens(step, logTables(runDir, step, episodes, tok));
  const rewards = eps.map((e) => e.reward).filter(Number.isFinite);
  const ents = eps.flatMap((e) => e.entropy!).filter(Number.isFinite);
  const row: MetricsRow = {
    step,
    phase: 'grpo',
    success_rate: eps.filter((e) => e.success).length / eps.length,
    response_len: eps.reduce((a, e) => a + e.ids.length, 0) / eps.length,
  };
  if (rewards.length) {
    const { mean, std } = meanStd(rewards);
    row.reward_mean = mean;
    row.reward_std = std;
  }
  if (ents.length) row.entropy_mean = ents.reduce((a, b) => a + b, 0) / ents.length;
  // the share of the step's groups (of any size) whose rewards are not all equal, as a GRPO step logs it
  const byGroup = new Map<number, number[]>();
  for (const e of eps) byGroup.set(e.group, [...(byGroup.get(e.group) ?? []), e.reward]);
  const sized = [...byGroup.values()].filter((r) => r.length > 1);
  if (sized.length) row.effective_groups = sized.filter((r) => r.some((x) => x !== r[0])).length / sized.length;
  for (const n of extraNames) {
    const v = eps.flatMap((e) => e.extra?.[n] ?? []).filter((x): x is number => x !== null && Number.isFinite(x));
    if (v.length) row[`${n}_mean`] = v.reduce((a, b) => a + b, 0) / v.length;
  }
  appendMetrics(runDir, row);
  trackers.metrics(row);
}

// ---- the command line ----
