// Rollouts: sample completions for prompts, decode them with character offsets, score them, and lay out the
// batch the policy forward pass needs (prompt left-padded, completion right-padded).
import * as tf from '@tensorflow/tfjs';
import { makeRng } from '../core/rng';
import type { Transformer } from '../model/model';
import { generate, SamplingStopped } from '../model/sampler';
import type { Sampler } from '../model/sampling';
import { computeSections, tokenType } from '../tasks/sections';
import type { Example, RewardResult, Section, Task, Tokenizer, TokenSpan, TokenType } from '../core/types';

export interface Episode {
  example: Example;
  promptIds: number[];
  ids: number[];
  /** sampler's log-probs (temperature-scaled policy at sampling time) */
  sampleLogprobs: number[];
  entropies: number[];
  /** Σ_j π_j² of the sampling distribution at each position (absent where no full distribution was seen) */
  probSq?: number[];
  text: string;
  tokens: TokenSpan[];
  sections: Section[];
  tokenTypes: TokenType[];
  reward: RewardResult;
  success: boolean;
  /** the sampler stopped at max_new_tokens, before EOS or the stop text (absent for imported episodes) */
  truncated?: boolean;
  /** grpo.overlong_buffer's penalty, already added to reward.total (absent when the buffer is off) */
  overlongPenalty?: number;
}

export interface RolloutOptions {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  greedy?: boolean;
  rng: () => number;
  /** rows per generate() call, to bound memory */
  chunk?: number;
  /** generate()'s stop: true ends the rollout with SamplingStopped */
  stop?: () => boolean;
  /**
   * Sample on this sampler (an inference server) instead of the model: each row's seed is drawn from `rng`. The
   * log-probs, entropies and Σπ² of the sampled tokens are then computed here, by the model that is about to be updated,
   * so the update's ratio compares the trainer with itself (the server's own log-probs differ in rounding).
   */
  sampler?: Sampler | null;
}

/** Generate one completion per entry of `examples` (repeat an example G times for a group). */
export async function rollout(model: Transformer, tokenizer: Tokenizer, task: Task, examples: Example[], o: RolloutOptions): Promise<Episode[]> {
  if (o.sampler) return rolloutOn(o.sampler, model, tokenizer, task, examples, o);
  const out: Episode[] = [];
  const chunk = o.chunk ?? 128;
  for (let s = 0; s < examples.length; s += chunk) {
    const exs = examples.slice(s, s + chunk);
    const prompts = exs.map((ex) => tokenizer.encodePrompt(ex.prompt));
    const seqs = await generate(model, prompts, {
      maxNewTokens: o.maxNewTokens,
      temperature: o.greedy ? 1 : o.temperature,
      topP: o.topP,
      greedy: o.greedy,
      eosId: tokenizer.eosIds ?? tokenizer.eosId,
      stopAfter: ['</answer>'],
      decode: (ids) => tokenizer.decode(ids),
      rng: o.rng,
      // one stream per row, seeded from the run's: a row's t-th token takes its t-th draw whether the host draws token by
      // token or a GPU draws a block ahead (sampler.ts), and whichever rows share its call
      rngs: exs.map(() => makeRng(Math.floor(o.rng() * 2 ** 31))),
      stop: o.stop,
    });
    seqs.forEach((seq, k) =>
      out.push({
        ...scoreEpisode(tokenizer, task, exs[k], prompts[k], seq.ids, seq.logprobs, seq.entropies),
        truncated: seq.stopped === 'length',
        probSq: seq.probSq,
      }),
    );
  }
  return out;
}

/**
 * The rollout on a sampler: consecutive rows of one example (a group) go as one request with a seed per row, so the
 * server shares their prefill; then the sampled tokens are scored here at the sampling temperature.
 */
async function rolloutOn(sampler: Sampler, model: Transformer, tokenizer: Tokenizer, task: Task, examples: Example[], o: RolloutOptions): Promise<Episode[]> {
  const groups: { example: Example; rows: number[]; prompt: number[] }[] = [];
  examples.forEach((ex, i) => {
    const last = groups[groups.length - 1];
    if (last && last.example === ex) last.rows.push(i);
    else groups.push({ example: ex, rows: [i], prompt: tokenizer.encodePrompt(ex.prompt) });
  });
  const seeds = examples.map(() => Math.floor(o.rng() * 2 ** 31));
  const out = await sampler.sample(
    groups.map((g) => ({ prefix: g.prompt, tail: [], seeds: g.rows.map((r) => seeds[r]), maxNewTokens: o.maxNewTokens })),
    { temperature: o.greedy ? 0 : o.temperature, topP: o.greedy ? 1 : o.topP, eosIds: tokenizer.eosIds ?? [tokenizer.eosId], stop: ['</answer>'] },
    { stop: o.stop },
  );
  if (!out) throw new SamplingStopped();
  const rows = groups.flatMap((g, q) => out[q].map((c) => ({ example: g.example, prompt: g.prompt, c })));
  const temperature = o.greedy ? 1 : o.temperature;
  const episodes: Episode[] = [];
  for (let s = 0; s < rows.length; s += o.chunk ?? 128) {
    const part = rows.slice(s, s + (o.chunk ?? 128));
    const pb = policyBatch(
      part.map((r) => r.prompt),
      part.map((r) => r.c.ids),
      tokenizer.padId,
    );
    try {
      const C = pb.completionLen;
      const sc = await model.scoreTokens(pb.ids, pb.keyMask, { from: pb.promptLen - 1, count: C }, (await pb.targets.data()) as Int32Array, temperature);
      part.forEach((r, k) => {
        const n = r.c.ids.length;
        const at = (x: Float32Array) => Array.from(x.subarray(k * C, k * C + n));
        episodes.push({
          ...scoreEpisode(tokenizer, task, r.example, r.prompt, r.c.ids, at(sc.logp), at(sc.entropy)),
          truncated: r.c.finish === 'length',
          probSq: at(sc.probSq),
        });
      });
    } finally {
      pb.dispose();
    }
  }
  return episodes;
}

export function scoreEpisode(
  tokenizer: Tokenizer,
  task: Task,
  example: Example,
  promptIds: number[],
  ids: number[],
  logprobs: number[],
  entropies: number[],
): Episode {
  const { text, tokens } = tokenizer.decodeWithOffsets(ids);
  const reward = task.reward(text, example);
  // Sections are defined on the completion including the prefilled "<think>" of the prompt (design.md#semantics).
  const shift = task.prefill.length;
  const shifted = tokens.map((t) => ({ ...t, start: t.start + shift, end: t.end + shift }));
  return {
    example,
    promptIds,
    ids,
    sampleLogprobs: logprobs,
    entropies,
    text,
    tokens,
    sections: computeSections(task.prefill + text, shifted),
    tokenTypes: tokens.map((t) => tokenType(t.text)),
    reward,
    success: task.isSuccess(reward),
  };
}

export interface PolicyBatch {
  ids: tf.Tensor2D;
  keyMask: tf.Tensor2D;
  /** completion targets [B, C] and their validity */
  targets: tf.Tensor2D;
  mask: number[][];
  promptLen: number;
  completionLen: number;
  dispose(): void;
}

/** Rows [start, end) of a batch, with the batch's own prompt and completion widths (so per-token rows line up). */
export function slicePolicyBatch(pb: PolicyBatch, start: number, end: number): PolicyBatch {
  const n = end - start;
  const t = {
    ids: pb.ids.slice([start, 0], [n, -1]),
    keyMask: pb.keyMask.slice([start, 0], [n, -1]),
    targets: pb.targets.slice([start, 0], [n, -1]),
    mask: pb.mask.slice(start, end),
    promptLen: pb.promptLen,
    completionLen: pb.completionLen,
    dispose() {
      t.ids.dispose();
      t.keyMask.dispose();
      t.targets.dispose();
    },
  };
  return t;
}

/** Prompt left-padded to the longest prompt, completion right-padded to the longest completion. */
export function policyBatch(promptIds: number[][], completionIds: number[][], padId: number): PolicyBatch {
  const B = promptIds.length;
  const P = Math.max(...promptIds.map((p) => p.length));
  const C = Math.max(1, ...completionIds.map((c) => c.length));
  const ids = new Int32Array(B * (P + C)).fill(padId);
  const km = new Float32Array(B * (P + C));
  const tg = new Int32Array(B * C).fill(padId);
  const mask: number[][] = [];
  for (let b = 0; b < B; b++) {
    const p = promptIds[b];
    const c = completionIds[b];
    const row = b * (P + C);
    for (let i = 0; i < p.length; i++) {
      ids[row + P - p.length + i] = p[i];
      km[row + P - p.length + i] = 1;
    }
    for (let j = 0; j < c.length; j++) {
      ids[row + P + j] = c[j];
      km[row + P + j] = 1;
      tg[b * C + j] = c[j];
    }
    mask.push(Array.from({ length: C }, (_, j) => (j < c.length ? 1 : 0)));
  }
  const t = {
    ids: tf.tensor2d(ids, [B, P + C], 'int32'),
    keyMask: tf.tensor2d(km, [B, P + C]),
    targets: tf.tensor2d(tg, [B, C], 'int32'),
    mask,
    promptLen: P,
    completionLen: C,
    dispose() {
      t.ids.dispose();
      t.keyMask.dispose();
      t.targets.dispose();
    },
  };
  return t;
}

/**
 * Log-probs of the completion tokens under the model, log_softmax(logits / temperature) as the sampler uses
 * (TRL's convention), from one forward pass that can also return the last layer's attention and the final
 * hidden states for credit strategies. The logits at position p predict the token at p + 1.
 */
export function completionLogprobs(
  model: Transformer,
  pb: PolicyBatch,
  temperature: number,
  needs: { attention?: boolean; hidden?: boolean; entropy?: boolean } = {},
): { logp: tf.Tensor2D; attention?: tf.Tensor4D; hidden?: tf.Tensor3D; entropy?: tf.Tensor2D } {
  const P = pb.promptLen;
  const C = pb.completionLen;
  // Only the positions that predict completion tokens need logits (a 150k vocabulary makes the rest costly).
  const out = model.forward(pb.ids, pb.keyMask, { returnAttention: needs.attention, returnHidden: needs.hidden, logitsFrom: P - 1 });
  const [B, , V] = out.logits.shape;
  const logits = out.logits.slice([0, 0, 0], [B, C, V]);
  const scaled = temperature === 1 ? logits : logits.div(temperature);
  let logp: tf.Tensor2D;
  let lsm: tf.Tensor | undefined;
  if (!needs.entropy) {
    // the backend's op (ops/): log-softmax and the pick, one native pass each way on wasm-blas
    logp = model.tokenLogprob(scaled.reshape([B * C, V]) as tf.Tensor2D, pb.targets.reshape([B * C]) as tf.Tensor1D).reshape([B, C]);
  } else {
    // the entropy needs the whole log-softmax: the composition, picking each target with one flat gather
    lsm = tf.logSoftmax(scaled);
    const flatIdx = tf.tidy(() =>
      tf
        .range(0, B * C, 1, 'int32')
        .mul(tf.scalar(V, 'int32'))
        .add(pb.targets.reshape([B * C])),
    );
    logp = tf.gather(lsm.reshape([B * C * V]), flatIdx).reshape([B, C]) as tf.Tensor2D;
  }
  let hidden: tf.Tensor3D | undefined;
  if (out.hidden) hidden = out.hidden.slice([0, P - 1, 0], [B, C, out.hidden.shape[2]]);
  // H = −Σ_v p_v log p_v over the full vocabulary of the same (temperature-scaled) distribution, in nats.
  const entropy = needs.entropy && lsm ? (lsm.exp().mul(lsm).sum(-1).neg() as tf.Tensor2D) : undefined;
  return { logp, attention: out.attention, hidden, entropy };
}
