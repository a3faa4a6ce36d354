// The shared test vectors of the credit strategies (test/vectors/credit_strategies.json): inputs and the weights and
// effective advantages the TypeScript engine gives them, per strategy and setting, with the edge cases (all-equal
// rewards, one-token completions, masked tokens, zero entropy). The Python package (python/credit_lens) checks its
// strategies against the same file, so the two implementations cannot drift: test/unit/credit_vectors.test.ts fails
// when the engine no longer gives what the file holds, python/tests/test_vectors.py when the package does not.
// Rewrite the file with `npx tsx test/vectors/credit_vectors.ts --write`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getStrategy } from '../../src/engine/credit';
import { groupAdvantages } from '../../src/engine/credit/advantages';
import { DEFAULT_CREDIT_PARAMS, effectiveAdvantages, type CreditBatch, type CreditParams } from '../../src/engine/credit/types';
import type { Section } from '../../src/protocol';

export const VECTORS_FILE = join(__dirname, 'credit_strategies.json');

interface Case {
  name: string;
  batch: { logprobs: number[][]; entropies: number[][]; sections: Section[][]; mask: number[][] };
  advantages: number[];
}

// Values are binary fractions where they can be, so float32 holds the inputs exactly.
const CASES: Case[] = [
  {
    name: 'three episodes, padded',
    batch: {
      logprobs: [
        [-0.5, -1.25, -0.0625, -2, -0.25],
        [-3, -0.125, -0.5, 0, 0],
        [-0.75, -1.5, -0.25, -0.5, 0],
      ],
      entropies: [
        [1.5, 0.25, 0.125, 2, 0.5],
        [0.5, 1, 0.75, 0, 0],
        [0, 2.5, 1.25, 0.375, 0],
      ],
      sections: [
        ['think', 'think', 'other', 'answer', 'answer'],
        ['think', 'answer', 'answer', 'other', 'other'],
        ['other', 'think', 'think', 'answer', 'other'],
      ],
      mask: [
        [1, 1, 1, 1, 1],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
      ],
    },
    advantages: [1.25, -0.5, -0.75],
  },
  {
    name: 'all-equal rewards: every advantage 0',
    batch: {
      logprobs: [
        [-0.5, -1],
        [-0.25, -2],
      ],
      entropies: [
        [1, 0.5],
        [0.25, 2],
      ],
      sections: [
        ['think', 'answer'],
        ['answer', 'answer'],
      ],
      mask: [
        [1, 1],
        [1, 1],
      ],
    },
    advantages: [0, 0],
  },
  {
    name: 'one-token completions',
    batch: {
      logprobs: [[-0.5], [-4]],
      entropies: [[0.75], [0]],
      sections: [['answer'], ['other']],
      mask: [[1], [1]],
    },
    advantages: [0.5, -0.5],
  },
  {
    name: 'an episode with every token masked, and zero entropy',
    batch: {
      logprobs: [
        [-1, -0.5, -0.25],
        [-0.5, -0.5, -0.5],
      ],
      entropies: [
        [0, 0, 0],
        [0.5, 1, 1.5],
      ],
      sections: [
        ['think', 'answer', 'answer'],
        ['think', 'think', 'answer'],
      ],
      mask: [
        [1, 1, 1],
        [0, 0, 0],
      ],
    },
    advantages: [0.25, 1],
  },
];

/** Each strategy the Python package carries, with the settings the vectors cover (flat, as tokenWeights takes them). */
const SETTINGS: [string, Partial<CreditParams>][] = [
  ['none', {}],
  ['outcome_conditional', { think_discount: 0.5 }],
  ['outcome_conditional', { think_discount: 0 }],
  ['inverse_logprob', { epsilon: 0.1, inverse_logprob_form: 'clean' }],
  ['inverse_logprob', { epsilon: 0.5, inverse_logprob_form: 'seed' }],
  ['entropy_weighted', { entropy_temp: 1 }],
  ['entropy_weighted', { entropy_temp: 0.5 }],
  ['entropy_mask', { mask_percentile: 80, entropy_mask_norm: 'valid' }],
  ['entropy_mask', { mask_percentile: 50, entropy_mask_norm: 'kept' }],
  ['gtpo', { form: 'seed' }],
] as [string, Partial<CreditParams>][];

export interface Vector {
  strategy: string;
  params: Record<string, unknown>;
  case: string;
  batch: Case['batch'];
  advantages: number[];
  expected: { weights: number[][]; effective_advantage: number[][] };
}

/** Rewards by group, for the episode advantage A (design.md#semantics, "Advantages"): a lone member, equal rewards. */
const ADVANTAGE_CASES: { rewards: number[]; groups: number[] }[] = [
  { rewards: [1.1, 0.1, 0.1, 0.6, 0, 0, 1, 1], groups: [0, 0, 0, 0, 1, 1, 1, 1] },
  { rewards: [0.5, 0.5, 0.5, 1, 0, 0.25], groups: [3, 3, 3, 7, 7, 9] },
];

export interface AdvantageVector {
  rewards: number[];
  groups: number[];
  scale: 'group' | 'batch' | 'none';
  expected: number[];
}

/** Every vector, computed by the engine's own strategies (the functions training calls). */
export function creditVectors(): { format: string; note: string; vectors: Vector[]; advantages: AdvantageVector[] } {
  const vectors: Vector[] = [];
  for (const [strategy, params] of SETTINGS)
    for (const c of CASES) {
      const batch: CreditBatch = { ...c.batch, sections: c.batch.sections, mask: c.batch.mask };
      const full = { ...DEFAULT_CREDIT_PARAMS, ...params } as CreditParams;
      const { weights, effAdv } = effectiveAdvantages(getStrategy(strategy), batch, c.advantages, full);
      vectors.push({ strategy, params, case: c.name, batch: c.batch, advantages: c.advantages, expected: { weights, effective_advantage: effAdv } });
    }
  const advantages = ADVANTAGE_CASES.flatMap((c) =>
    (['group', 'batch', 'none'] as const).map((scale) => ({ ...c, scale, expected: groupAdvantages(c.rewards, c.groups, scale) })),
  );
  return {
    format: 'credit-lens-credit-vectors/1',
    note: 'written by test/vectors/credit_vectors.ts from the TypeScript engine; read by test/unit/credit_vectors.test.ts and python/tests/test_vectors.py',
    vectors,
    advantages,
  };
}

if (require.main === module && process.argv.includes('--write')) {
  writeFileSync(VECTORS_FILE, JSON.stringify(creditVectors(), null, 1) + '\n');
  console.log(`wrote ${VECTORS_FILE}`);
}
