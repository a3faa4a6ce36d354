// Teacher-forced scoring in vocabulary blocks: from the hidden states of N positions, each target's log-prob, the
// entropy H = −Σ_v p_v log p_v and Σ_v p_v² of softmax(logits / temperature), and where asked the K most likely ids
// with the target's rank. The lm head is applied a block of rows × a block of the vocabulary at a time, so no block
// holds more than `budget` floats; the log-sum-exp and Σ p·(z − max) are merged across the vocabulary blocks in
// float64 (the online softmax). A 2,000-token completion over a 152k vocabulary (300 M logits, 1.2 GB) then costs one
// block of memory. Import scoring, the servers' scoring routes and the probe read this; nothing here has a gradient.
import * as tf from '@tensorflow/tfjs';
import { gatherVocab, headSlice, type HeadSlice, type VocabBlocks } from './vocab_blocks';

export interface ScoreOptions {
  /** the most floats one block of logits may hold (default 2^24) */
  budget?: number;
  /** the K most likely ids of each position, as a server's top_logprobs gives them */
  topK?: number;
  /** each target's rank among the vocabulary (1 = the most likely) */
  rank?: boolean;
}

export interface TokenScores {
  logp: Float32Array;
  entropy: Float32Array;
  probSq: Float32Array;
  /** with topK: the K most likely ids of each position and their log-probs (row-major); with rank too, the target's rank */
  top?: { ids: Int32Array; logp: Float32Array; rank: Int32Array };
}

/** The running top-K lists of every position (descending, ties to the lower id), and the targets' ranks. */
interface TopLists {
  K: number;
  ids: Int32Array;
  /** the lists' logits, made log-probs once every block is merged */
  z: Float32Array;
  /** each target's own logit, and its id */
  targetZ: Float32Array;
  targets: Int32Array;
  /** 1 + the tokens whose logit is above the target's; empty when no rank is asked for */
  rank: Int32Array;
}

/** Rows [r0, r0 + R) of the hidden states against one block of the lm head, whose first id is `base`. */
interface BlockRows {
  h: tf.Tensor2D;
  Wb: HeadSlice;
  r0: number;
  R: number;
  base: number;
  temperature: number;
}

/** Scores of the N positions whose hidden states are `h` [N, d], against `targets` [N]. */
export async function scoreHidden(
  h: tf.Tensor2D,
  head: VocabBlocks,
  vocabSize: number,
  targets: Int32Array,
  temperature: number,
  opts: ScoreOptions = {},
): Promise<TokenScores> {
  const [N, d] = h.shape;
  if (targets.length !== N) throw new Error(`scoreTokens: ${targets.length} targets for ${N} positions`);
  const budget = Math.max(1, opts.budget ?? 1 << 24);
  // a 16-bit head is sliced on its words, two columns each: an even width where it can be
  const wide = Math.max(1, Math.min(vocabSize, budget));
  const vBlock = head.half && wide > 1 ? wide - (wide % 2) : wide;
  const rBlock = Math.max(1, Math.min(N, Math.floor(budget / vBlock)));
  // running max m, s0 = Σ e^{z−m}, s1 = Σ e^{z−m}(z − m) per row, merged over the vocabulary blocks
  const m = new Float64Array(N).fill(-Infinity);
  const s0 = new Float64Array(N);
  const s1 = new Float64Array(N);
  // s2 = Σ e^{2(z−m)}: Σ p² = s2 / s0²
  const s2 = new Float64Array(N);
  const K = Math.min(vocabSize, Math.max(0, opts.topK ?? 0));
  const top: TopLists = {
    K,
    ids: new Int32Array(N * K),
    z: new Float32Array(N * K).fill(-Infinity),
    targetZ: await targetLogits(h, head, targets, temperature, rBlock),
    targets,
    rank: new Int32Array(opts.rank ? N : 0).fill(1),
  };
  const wantTop = K > 0 || top.rank.length > 0;
  // vocabulary blocks outside, rows inside: each block of the lm head is sliced once, not once per row block
  for (const [b, v0, vc, base] of vocabSlices(head, vBlock)) {
    const Wb = headSlice(head, b, v0, vc);
    try {
      for (let r0 = 0; r0 < N; r0 += rBlock) {
        const R = Math.min(rBlock, N - r0);
        const [mc, s0c, s1c, s2c] = tf.tidy(() => {
          const z = Wb.times(tf.slice(h, [r0, 0], [R, d])).div(temperature) as tf.Tensor2D;
          const mx = z.max(1, true);
          const zc = z.sub(mx);
          const e = tf.exp(zc);
          // Σ e^{z−m}(z − m), relative to the block's max: bounded terms, no cancellation for a confident row
          return [mx.reshape([R]), e.sum(1), e.mul(zc).sum(1), e.square().sum(1)];
        });
        const [a, b, c, q] = await Promise.all([mc.data(), s0c.data(), s1c.data(), s2c.data()]);
        tf.dispose([mc, s0c, s1c, s2c]);
        if (wantTop) await mergeTop({ h, Wb, r0, R, base, temperature }, top);
        for (let i = 0, n = r0; i < R; i++, n++) {
          // rebase both sums on the new max M: e^{z−M}(z−M) = e^{m−M}·(e^{z−m}(z−m) + e^{z−m}(m−M))
          const M = Math.max(m[n], a[i]);
          const k0 = m[n] === -Infinity ? 0 : Math.exp(m[n] - M);
          const k1 = Math.exp(a[i] - M);
          s1[n] = (m[n] === -Infinity ? 0 : k0 * (s1[n] + s0[n] * (m[n] - M))) + k1 * (c[i] + b[i] * (a[i] - M));
          s0[n] = s0[n] * k0 + b[i] * k1;
          s2[n] = s2[n] * k0 * k0 + q[i] * k1 * k1;
          m[n] = M;
        }
      }
    } finally {
      Wb.dispose();
    }
  }
  const logp = new Float32Array(N);
  const entropy = new Float32Array(N);
  const probSq = new Float32Array(N);
  for (let n = 0; n < N; n++) {
    // lse = M + ln s0; H = lse − E[z] = ln s0 − s1/s0 (s1 = Σ e^{z−M}(z − M))
    const lse = m[n] + Math.log(s0[n]);
    logp[n] = top.targetZ[n] - lse;
    entropy[n] = Math.log(s0[n]) - s1[n] / s0[n];
    probSq[n] = s2[n] / (s0[n] * s0[n]);
    for (let j = n * K; j < (n + 1) * K; j++) top.z[j] -= lse;
  }
  return { logp, entropy, probSq, ...(wantTop ? { top: { ids: top.ids, logp: top.z, rank: top.rank } } : {}) };
}

/** The target's logit of each row: its column of the lm head, one dot product per row. */
async function targetLogits(h: tf.Tensor2D, head: VocabBlocks, targets: Int32Array, temperature: number, rBlock: number): Promise<Float32Array> {
  const [N, d] = h.shape;
  const out = new Float32Array(N);
  for (let r0 = 0; r0 < N; r0 += rBlock) {
    const R = Math.min(rBlock, N - r0);
    const z = tf.tidy(() => {
      const cols = gatherVocab(head, tf.tensor1d(targets.subarray(r0, r0 + R), 'int32')); // [d, R]
      return tf.sum(tf.mul(tf.slice(h, [r0, 0], [R, d]), tf.transpose(cols)), 1).div(temperature);
    });
    out.set((await z.data()) as Float32Array, r0);
    z.dispose();
  }
  return out;
}

/** Every slice of the lm head at most `vBlock` columns wide: its block, its first column there, its width, its first id. */
function vocabSlices(head: VocabBlocks, vBlock: number): [number, number, number, number][] {
  return head.widths.flatMap((width, b) => {
    const out: [number, number, number, number][] = [];
    for (let o = 0; o < width; o += vBlock) out.push([b, o, Math.min(vBlock, width - o), head.starts[b] + o]);
    return out;
  });
}

/** One block's rows: each row's K largest logits merged into the running lists, and the targets' ranks counted. */
async function mergeTop({ h, Wb, r0, R, base, temperature }: BlockRows, top: TopLists): Promise<void> {
  const d = h.shape[1];
  const { K, ids, z, targetZ, targets, rank } = top;
  const width = Wb.cols;
  const k = Math.min(K, width);
  const { values, indices, above, ownAbove } = tf.tidy(() => {
    const zb = Wb.times(tf.slice(h, [r0, 0], [R, d])).div(temperature) as tf.Tensor2D;
    // K = 0 with a rank asked for: no list, only the count (a [R, 0] tensor read back from the wasm backend reads out of
    // its heap, so the empty lists are one placeholder column, never read)
    const best = k > 0 ? tf.topk(zb, k, true) : { values: tf.zeros([R, 1]), indices: tf.zeros([R, 1], 'int32') };
    if (!rank.length) return { ...best, above: tf.zeros([R], 'int32'), ownAbove: tf.zeros([R], 'int32') };
    const target = tf.tensor2d(targetZ.subarray(r0, r0 + R), [R, 1]);
    // the target's own column, where it is in this block, counts when its logit from this product rounds above the
    // gathered one: taken back out below
    const cols = Array.from(targets.subarray(r0, r0 + R), (id) => Math.min(Math.max(id - base, 0), width - 1));
    // a masked pick, not gather with batchDims 1, which the wasm backend reads out of its heap with more than one row
    // (and not oneHot, which refuses a block one column wide)
    const pick = tf.equal(tf.range(0, width, 1, 'int32').reshape([1, width]), tf.tensor2d(Int32Array.from(cols), [R, 1], 'int32'));
    const own = tf.sum(tf.mul(zb, tf.cast(pick, 'float32')), 1);
    return {
      ...best,
      above: tf.sum(tf.cast(tf.greater(zb, target), 'int32'), 1),
      ownAbove: tf.cast(tf.greater(own, target.reshape([R])), 'int32'),
    };
  });
  const [vals, idx, gt, og] = await Promise.all([
    values.data() as Promise<Float32Array>,
    indices.data() as Promise<Int32Array>,
    above.data() as Promise<Int32Array>,
    ownAbove.data() as Promise<Int32Array>,
  ]);
  tf.dispose([values, indices, above, ownAbove]);
  if (rank.length)
    for (let i = 0; i < R; i++) {
      const id = targets[r0 + i];
      rank[r0 + i] += gt[i] - (id >= base && id < base + width ? og[i] : 0);
    }
  for (let i = 0; i < R; i++) {
    const n = r0 + i;
    const merged: [number, number][] = [];
    for (let j = 0; j < K; j++) if (z[n * K + j] > -Infinity) merged.push([z[n * K + j], ids[n * K + j]]);
    for (let j = 0; j < k; j++) merged.push([vals[i * k + j], idx[i * k + j] + base]);
    merged.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
    for (let j = 0; j < K; j++) {
      z[n * K + j] = j < merged.length ? merged[j][0] : -Infinity;
      ids[n * K + j] = j < merged.length ? merged[j][1] : 0;
    }
  }
}
