// The shared test vectors of the credit strategies (test/vectors/credit_strategies.json): inputs and the weights and
// effective advantages the TypeScript engine gives them, per strategy and setting, with the edge cases (all-equal
// rewards, one-token completions, masked tokens, zero entropy). The Python package (python/credit_lens) checks its
// strategies against the same file, so the two implementations cannot drift: test/unit/credit_vectors.test.ts fails
// when the engine no longer gives what the file holds, python/tests/test_vectors.py when the package does not.
// Rewrite the file with `npx tsx test/vectors/credit_vectors.ts --write`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getStrategy } from '../../src/engine/credit';
import { groupAdvantages, type ScaleRewards } from '../../src/engine/credit/advantages';
import { flattenCredit } from '../../src/engine/credit/catalog';
import { rewardParts, tagTokens } from '../../src/engine/credit/reward_decomposition';
import {
  DEFAULT_CREDIT_PARAMS,
  effectiveAdvantages,
  type CreditBatch,
  type CreditParams,
  type EpisodeView,
  type PrepareContext,
} from '../../src/engine/credit/types';
import { validateConfig } from '../../src/engine/config/issues';
import { sectionsOf } from '../../src/engine/import/episodes';
import { makeCountdownTask } from '../../src/engine/tasks/countdown';
import type { Example, TokenSpan, Tokenizer } from '../../src/engine/core/types';
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
  batch: Case['batch'] & Partial<GroupInputs>;
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

/**
 * What the strategies that set Â per group read beyond the token batch (python's TokenBatch fields of the same names): the
 * group, total reward and success of each episode, the token ids, Σπ² per position, which tokens overlap a tag, the
 * reward's parts, the end-of-sequence ids and the advantage normalisation.
 */
interface GroupInputs {
  groups: number[];
  rewards: number[];
  success: boolean[];
  ids: number[][];
  prob_sq: number[][];
  tags: boolean[][];
  reward_parts: { format: number[]; answer: number[]; reasoning: number[] };
  eos_ids: number[];
  scale_rewards: ScaleRewards;
}

const EOS = '<|endoftext|>';

/**
 * Countdown completions by group, scored by the real task: a group with correct and wrong rollouts of different lengths
 * (a lone longest one, for otb's zero tail), a group where every rollout is wrong (one of them a single token), and a
 * group of two equal rollouts (all-equal rewards, A = 0). EOS ends some of them, as a sampler's does.
 */
const GROUP_CASES: { name: string; groups: [Example, string[]][] }[] = [
  {
    name: 'groups: mixed, all wrong (a one-token completion), all equal',
    groups: [
      [
        { id: 0, prompt: '3 5 2 -> 16\n<think>', numbers: [3, 5, 2], target: 16 },
        [
          '5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>' + EOS,
          '5+3=9\n9*2=18</think>\n<answer>(5+3)*2+2</answer>' + EOS,
          '5*2=10</think>\n<answer>5*2+3</answer>',
          '3+5=8\n8*2=16\nso 16</think>\n<answer>(3+5)*2</answer>' + EOS,
        ],
      ],
      [
        { id: 1, prompt: '2 3 4 -> 20\n<think>', numbers: [2, 3, 4], target: 20 },
        ['2+3=5</think>', '</think>', '2*3=6\n6*4=24</think>\n<answer>2*3*4</answer>' + EOS],
      ],
      [
        { id: 2, prompt: '4 5 -> 20\n<think>', numbers: [4, 5], target: 20 },
        ['4*5=20</think>\n<answer>4*5</answer>' + EOS, '4*5=20</think>\n<answer>4*5</answer>' + EOS],
      ],
    ],
  },
];

/** Each strategy that sets Â per group, with its settings (flat, as python takes them) and the scale_rewards. */
const GROUP_SETTINGS: [string, Record<string, unknown>, ScaleRewards][] = [
  ['gtpo', { form: 'gtpo' }, 'group'],
  ['gtpo', { form: 'gtpo', alpha1: 0.5, alpha2: 0.25, entropy_clip: [0.25, 1] }, 'group'],
  ['ktae', {}, 'group'],
  ['ktae', { alpha: 2, beta: 0.5, tf: false }, 'none'],
  ['otb', { handle_zero_tail: true }, 'group'],
  ['otb', { handle_zero_tail: false }, 'group'],
  ['reward_decomposition', { reasoning: true }, 'group'],
  ['reward_decomposition', { reasoning: false }, 'none'],
];

/** Tags, numbers and words as tokens, EOS as one; character offsets into the completion. */
function wordTokens(text: string, vocab: Map<string, number>): TokenSpan[] {
  const out: TokenSpan[] = [];
  const re = /<\/?(?:think|answer)>|<\|endoftext\|>|\d+|\s+|[^\d\s<]+|</g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (!vocab.has(m[0])) vocab.set(m[0], vocab.size);
    out.push({ id: vocab.get(m[0])!, text: m[0] === EOS ? '' : m[0], start: m.index, end: m[0] === EOS ? m.index : m.index + m[0].length });
  }
  return out;
}

/** Binary fractions from a token's id and position, so float32 holds them exactly. */
const lpOf = (id: number, t: number) => -(((id * 7 + t * 3) % 16) / 8);
const hOf = (id: number, t: number) => ((id * 5 + t) % 12) / 8;
const psqOf = (id: number, t: number) => (8 + ((t * 3 + id) % 8)) / 16;

async function groupVectors(): Promise<Vector[]> {
  const task = makeCountdownTask({ numbers: [3, 3], max_number: 10, max_target: 30, reward: 'grpo_zero', prompt: 'compact', train_size: 4, eval_size: 1 }, 1);
  const out: Vector[] = [];
  for (const c of GROUP_CASES) {
    const vocab = new Map<string, number>([[EOS, 0]]);
    const eps = c.groups.flatMap(([ex, texts], g) => texts.map((raw) => ({ ex, raw, g })));
    const views: EpisodeView[] = eps.map(({ ex, raw, g }, index) => {
      const tokens = wordTokens(raw, vocab);
      const completion = raw.split(EOS).join('');
      const reward = task.reward(completion, ex);
      const ids = tokens.map((t) => t.id);
      return {
        index,
        group: g,
        example: ex,
        prefill: task.prefill,
        completion,
        tokens,
        promptIds: [],
        ids,
        reward,
        success: task.isSuccess(reward),
        advantage: 0,
        logprobs: ids.map(lpOf),
        entropies: ids.map(hOf),
        probSq: ids.map(psqOf),
        sections: sectionsOf(ex.prompt, completion, tokens),
      };
    });
    const T = Math.max(...views.map((e) => e.ids.length));
    const pad = <X>(row: X[], fill: X) => [...row, ...new Array<X>(T - row.length).fill(fill)];
    const tokenizer = { eosId: 0, eosIds: [0] } as unknown as Tokenizer;
    for (const [strategy, params, scale] of GROUP_SETTINGS) {
      const block = strategy === 'gtpo' ? 'gtpo' : strategy;
      const { config, issues } = validateConfig({ task: { name: 'countdown' }, grpo: { scale_rewards: scale }, credit: { strategy, [block]: params } });
      if (!config) throw new Error(`vector config: ${issues.map((i) => i.message).join('; ')}`);
      const advantage = groupAdvantages(
        views.map((e) => e.reward.total),
        views.map((e) => e.group),
        scale,
      );
      const episodes = views.map((e, i) => ({ ...e, advantage: advantage[i] }));
      const ctx: PrepareContext = { step: 1, runDir: '', cfg: config, task, tokenizer, log: () => {} };
      const prepared = await getStrategy(strategy).prepare!(episodes, ctx);
      const batch = {
        logprobs: episodes.map((e) => pad(e.logprobs, 0)),
        entropies: episodes.map((e) => pad(e.entropies, 0)),
        sections: episodes.map((e) => pad<Section>(e.sections, 'other')),
        mask: episodes.map((e) =>
          pad(
            e.ids.map(() => 1),
            0,
          ),
        ),
      };
      const full = { ...DEFAULT_CREDIT_PARAMS, ...flattenCredit(config.credit) } as CreditParams;
      const { weights, effAdv } = effectiveAdvantages(getStrategy(strategy), { ...batch, ...prepared.batch } as CreditBatch, advantage, full);
      const parts = episodes.map(rewardParts);
      out.push({
        strategy,
        params,
        case: c.name,
        batch: {
          ...batch,
          groups: episodes.map((e) => e.group),
          rewards: episodes.map((e) => e.reward.total),
          success: episodes.map((e) => e.success),
          ids: episodes.map((e) => pad(e.ids, 0)),
          prob_sq: episodes.map((e) => pad(e.probSq!, 0)),
          tags: episodes.map((e) => pad(tagTokens(e), false)),
          reward_parts: { format: parts.map((p) => p.format), answer: parts.map((p) => p.answer), reasoning: parts.map((p) => p.reasoning) },
          eos_ids: [0],
          scale_rewards: scale,
        },
        advantages: advantage,
        expected: { weights, effective_advantage: effAdv },
      });
    }
  }
  return out;
}

/** Every vector, computed by the engine's own strategies (the functions training calls: prepare() where they set Â per group). */
export async function creditVectors(): Promise<{ format: string; note: string; vectors: Vector[]; advantages: AdvantageVector[] }> {
  const vectors: Vector[] = [];
  for (const [strategy, params] of SETTINGS)
    for (const c of CASES) {
      const batch: CreditBatch = { ...c.batch, sections: c.batch.sections, mask: c.batch.mask };
      const full = { ...DEFAULT_CREDIT_PARAMS, ...params } as CreditParams;
      const { weights, effAdv } = effectiveAdvantages(getStrategy(strategy), batch, c.advantages, full);
      vectors.push({ strategy, params, case: c.name, batch: c.batch, advantages: c.advantages, expected: { weights, effective_advantage: effAdv } });
    }
  vectors.push(...(await groupVectors()));
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

if (require.main === module && process.argv.includes('--write'))
  void creditVectors().then((v) => {
    writeFileSync(VECTORS_FILE, JSON.stringify(v, null, 1) + '\n');
    console.log(`wrote ${VECTORS_FILE}`);
  });
