// Plain GRPO: the episode advantage is broadcast to every valid token (w = 1).
import { validMask, type CreditStrategy } from './types';

export const none: CreditStrategy = {
  name: 'none',
  rowLocal: true,
  weights: (batch) => validMask(batch).map((row) => row.map((m) => (m ? 1 : 0))),
};
