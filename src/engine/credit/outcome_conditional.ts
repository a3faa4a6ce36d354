// Seed doc 001 mitigation 1: full advantage on the <answer> section, think_discount elsewhere.
import { validMask, type CreditStrategy } from './types';

export const outcomeConditional: CreditStrategy = {
  name: 'outcome_conditional',
  weights: (batch, p) => validMask(batch).map((row, i) => row.map((m, t) => (m ? (batch.sections[i][t] === 'answer' ? 1 : p.think_discount) : 0))),
};
