// Seed doc 001 mitigation 3: tokens the answer attends to get more credit. a_t (the attention the answer tokens
// pay to t, summed over answer tokens, averaged over last-layer heads) comes from the same forward pass as the
// log-probs. w = max(0, 1 + credit_scale·(a/ā − 1)) outside the answer, 1 on it; no answer → w = 1.
import * as tf from '@tensorflow/tfjs';
import { validMask, type CreditStrategy } from './types';

export const attentionCredit: CreditStrategy = {
  name: 'attention_credit',
  rowLocal: true,
  // Last layer's attention averaged over heads, restricted to completion queries and keys.
  fromOutputs: async (out, ctx) => {
    if (!out.attention) return {};
    const P = ctx.promptLen;
    const C = ctx.completionLen;
    const rows = tf.tidy(() => out.attention!.mean(1).slice([0, P, P], [-1, C, C]));
    const att = (await rows.array()) as number[][][];
    rows.dispose();
    return { answerAttention: answerAttention(att, ctx.sections, ctx.mask) };
  },
  weights: (batch, p) =>
    validMask(batch).map((row, i) => {
      const a = batch.answerAttention?.[i];
      const isAnswer = batch.sections[i].map((s) => s === 'answer');
      const outside = row.map((m, t) => m && !isAnswer[t]);
      const hasAnswer = row.some((m, t) => m && isAnswer[t]);
      let sum = 0;
      let n = 0;
      outside.forEach((o, t) => {
        if (o && a) {
          sum += a[t];
          n++;
        }
      });
      const mean = n ? sum / n : 0;
      return row.map((m, t) => {
        if (!m) return 0;
        if (!hasAnswer || isAnswer[t] || !a || mean <= 0) return 1;
        return Math.max(0, 1 + p.credit_scale * (a[t] / mean - 1));
      });
    }),
};

/**
 * a_t from last-layer attention probabilities averaged over heads, att[b][q][k] over completion positions
 * (query = the position where answer token q sits, key = where token t sits).
 */
export function answerAttention(att: number[][][], sections: string[][], mask: number[][]): number[][] {
  return att.map((rows, b) => {
    const C = mask[b].length;
    const a = new Array<number>(C).fill(0);
    for (let q = 0; q < C; q++) {
      if (!mask[b][q] || sections[b][q] !== 'answer') continue;
      for (let t = 0; t < C; t++) a[t] += rows[q][t];
    }
    return a;
  });
}
