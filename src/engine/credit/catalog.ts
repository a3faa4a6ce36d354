// One file although long: the catalog is one array literal whose types yield the config's credit section.
// The credit strategies, declared once, as data: name, what it does, its parameters (the config keys under
// `credit`, with defaults, ranges and descriptions), the values a sweep offers, the parameter a comparison labels it
// by, and which model outputs its training step needs. From this list come the config schema's `credit` section and
// its JSON Schema, the sweep QuickPicks, the sweep's per-strategy keys and the analysis labels. It imports zod and
// the config's leaf builders only (no tfjs), so the extension reads it too.
//
// A new strategy is: its file in this folder (the weights), one entry below, one line in index.ts (the registry). The
// entry holds everything else the engine knows of it: its checks on the whole config, its secrets, its warnings, and
// whether logged episodes can be scored with it offline (import, probe).
import { z } from 'zod';
import { allow, bool, int, num, oneOf, pathOrNull, section, shapeOf, strOrNull } from '../core/fields';
import type { CatalogIssue } from '../core/types';
import { KEY_LIKE_ENV, keySafeUrl } from '../oracle/key_policy';

export type { CatalogIssue };

/** Model outputs the training forward pass returns for a strategy (the same pass as the log-probs). */
export interface StrategyNeeds {
  attention?: boolean;
  hidden?: boolean;
  importance?: boolean;
}

/**
 * The part of a run config the entries' checks, secrets and warnings read. Named here rather than imported: the config's
 * type is built from this catalog, so importing it would make the two a circle.
 */
export interface StrategyCheckConfig {
  readonly credit: {
    readonly entropy_mask_norm: string;
    readonly attribution: { readonly objective: string };
    readonly cal: { readonly scale: string; readonly provider: string; readonly api_key_env: string | null };
    readonly reward_variance: { readonly importance_checkpoint: string | null };
  };
  readonly grpo: { readonly loss_agg: string; readonly scale_rewards: string; readonly epochs_per_step: number };
}

/** An environment variable holding a secret, the config key that names it, and what reads it. */
export interface SecretVar {
  env: string;
  path: string;
  user: string;
}

export interface StrategySpec {
  readonly name: string;
  /** one clause for the strategy list in the config's description */
  readonly summary: string;
  /** parameters directly under `credit` (`credit.<key>`) */
  readonly params?: Record<string, z.ZodType>;
  /** or its own block `credit.<key>: {…}` (parameters that belong together, like an oracle's) */
  readonly block?: { readonly key: string; readonly schema: z.ZodType };
  /**
   * Checks across sections on the whole config, run when this strategy is chosen: a required file, a setting that means
   * something only with another section's. Each finding names its key from the root.
   */
  readonly check?: (cfg: StrategyCheckConfig) => CatalogIssue[];
  /** Environment variables whose values the strategy sends somewhere (an API key): required before a run starts, and
   *  masked in every log line. */
  readonly secrets?: (cfg: StrategyCheckConfig) => SecretVar[];
  /** Settings that are valid but are probably not what was meant: logged as warnings when a run starts. */
  readonly warnings?: (cfg: StrategyCheckConfig) => string[];
  /**
   * What it needs to score logged episodes without training. outputs: its weights need only the batch and the forward
   * pass (`credit-lens import` and the probe score it). prepare: its prepare() reads only the episodes and the config
   * (the probe runs it, then its weights). Absent: it needs a trained head, a network or an oracle.
   */
  readonly offline?: 'outputs' | 'prepare';
  /**
   * Other settings of the strategy that the probe scores as rows of their own, beside the run's: a row label and the
   * keys it sets. A variant's prepare() must be local (gtpo's paper form, while its default form needs only the outputs).
   */
  readonly probeVariants?: readonly { readonly label: string; readonly sets: Readonly<Record<string, string>> }[];
  /** values the Run Sweep QuickPicks offer, by dotted key */
  readonly sweepValues?: Record<string, number[]>;
  /** the parameter comparisons label a run with (seed docs 001/002: "Outcome-conditional (0.75)"), a dotted key under credit */
  readonly headline?: string;
  readonly needs?: StrategyNeeds;
}

const secretLikeEnvValue = /^(sk-|AIza|ghp_|xox)/;

const calSchema = section(
  {
    provider: oneOf(
      ['rule', 'openai', 'gemini'],
      'Error-span oracle. rule: offline, for countdown and arithmetic (first ' +
        'wrong arithmetic step in <think>, else the answer expression). openai: an OpenAI-compatible /v1/chat/completions ' +
        'at base_url. gemini: generateContent.',
    ).default('rule'),
    model: strOrNull('Model name for the openai/gemini oracle.').default(null),
    base_url: allow(
      z
        .string()
        .regex(/^https?:\/\/\S+$/)
        .nullable()
        .describe('Endpoint root for provider openai, e.g. ' + 'https://api.openai.com. https, or http to this machine only: the API key goes there.'),
      'an http(s) URL or null',
    ).default(null),
    api_key_env: allow(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
        .refine((s) => !secretLikeEnvValue.test(s), { message: '', params: { expected: 'a variable name, not a key' } })
        .nullable()
        .describe(
          'NAME of the environment variable holding the API key (e.g. OPENAI_API_KEY). The key itself ' +
            'is never written in the config or the run directory.',
        ),
      'the NAME of an environment variable (like OPENAI_API_KEY), not the key itself; or null',
    ).default(null),
    negative_reward: num({}, "Effective advantage given to the tokens of the oracle's error span.").default(-1.0),
    scale: oneOf(
      ['raw', 'group_std'],
      'raw: span tokens get negative_reward as it is (CAL-GRPO). group_std: divided by the ' +
        "episode's group reward std + 1e-4, the scale GRPO divides advantages by (the batch std when the group's is 0, " +
        "and 1 when that is 0 too), so span credit is on the scale of the other episodes' advantages; it needs " +
        'grpo.scale_rewards: group, the scaling it follows.',
    ).default('raw'),
    placement: oneOf(
      ['span', 'episode'],
      "span: the credit lands on the oracle's error span (CAL). episode: the ablation — " +
        'the same total, negative_reward × span tokens, spread evenly over every token of the episode, so that a comparison ' +
        'isolates where the credit lands from how much of it there is.',
    ).default('span'),
    max_error_span: int(1, 'The error span is cut to this many tokens from its start.').default(64),
    timeout_s: num({ gt: 0 }, 'Per-request timeout, seconds.').default(30),
    max_retries: int(0, 'Retries per oracle request.').default(3),
    concurrency: int(1, 'Oracle requests in flight.').default(4),
    cache: bool(
      'Cache oracle replies on disk (~/.cache/credit-lens/oracle, by sha256 of provider, base URL, model and prompt) so reruns cost nothing.',
    ).default(true),
  },
  'cal strategy: an oracle names the error span of a wrong answer.',
).superRefine((c, ctx) => {
  // Where a key may go: a config from someone else's repository must not be able to send it to their server.
  if (c.base_url !== null) {
    const why = keySafeUrl(c.base_url);
    if (why) ctx.addIssue({ code: 'custom', path: ['base_url'], message: `got ${JSON.stringify(c.base_url)}; ${why}` });
  }
  if (c.api_key_env !== null && !KEY_LIKE_ENV.test(c.api_key_env)) {
    ctx.addIssue({
      code: 'custom',
      path: ['api_key_env'],
      message:
        `got ${JSON.stringify(c.api_key_env)}, expected the name of a ` +
        "key variable (ending in _API_KEY, _KEY or _TOKEN): the engine sends that variable's value to base_url, so it must not " +
        'be able to name PATH, HOME or any other variable',
    });
  }
  if (c.provider === 'rule') return;
  const need: ('model' | 'api_key_env' | 'base_url')[] = c.provider === 'openai' ? ['model', 'base_url', 'api_key_env'] : ['model', 'api_key_env'];
  for (const k of need) {
    if (c[k] === null) {
      ctx.addIssue({
        code: 'custom',
        path: [k],
        params: { at: ['credit', 'cal', 'provider'] },
        message: `got null; it is required when credit.cal.provider is ${c.provider}`,
      });
    }
  }
});

/**
 * The catalog. Seeds referred to: 000 (a learned attribution head), 001 (mitigations of GRPO's uniform credit:
 * answer-only, inverse log-prob, attention, entropy), 002 (filler tokens get about 1.3× the |contribution| of
 * reasoning tokens under GRPO), 003 (CAL: an oracle marks the wrong span), 004 (paired rollouts measure how much of
 * the reward's variance each prefix fixes).
 */
export const CATALOG = [
  { name: 'none', summary: 'none: every token gets A (plain GRPO)', offline: 'outputs' },
  {
    name: 'outcome_conditional',
    offline: 'outputs',
    summary: 'outcome_conditional: think_discount outside <answer> (the GRPO credit-assignment mitigations)',
    params: { think_discount: num({ gte: 0 }, 'outcome_conditional: weight of tokens outside the answer (answer tokens get 1).').default(0.5) },
    sweepValues: { 'credit.think_discount': [0.25, 0.5, 0.75] },
    headline: 'think_discount',
  },
  {
    name: 'inverse_logprob',
    offline: 'outputs',
    summary: 'inverse_logprob: 1/(|ℓ|+epsilon) (the GRPO credit-assignment mitigations)',
    params: {
      epsilon: num({ gt: 0 }, 'inverse_logprob: w = 1/(|logprob| + epsilon); larger smooths more.').default(0.1),
      inverse_logprob_form: oneOf(
        ['clean', 'seed'],
        'inverse_logprob: clean: w = 1/(|ℓ|+ε) with ℓ detached (design.md#semantics). seed: ' +
          "the GRPO credit-assignment mitigations' code, which does not detach ℓ inside its weight, so the gradient of w(ℓ)·ℓ weights each token by " +
          'ε/(|ℓ|+ε)²; the logged weight is then that factor.',
      ).default('clean'),
    },
    sweepValues: { 'credit.epsilon': [0.01, 0.1, 0.5] },
    headline: 'epsilon',
  },
  {
    name: 'attention_credit',
    offline: 'outputs',
    summary: 'attention_credit: attention paid by the answer, scaled by credit_scale (the GRPO credit-assignment mitigations)',
    params: { credit_scale: num({ gte: 0 }, 'attention_credit: w = max(0, 1 + credit_scale·(a/mean(a) − 1)).').default(2.0) },
    sweepValues: { 'credit.credit_scale': [2.0] },
    headline: 'credit_scale',
    needs: { attention: true },
  },
  {
    name: 'entropy_weighted',
    offline: 'outputs',
    summary: 'entropy_weighted: n·softmax(H/entropy_temp) (the GRPO credit-assignment mitigations)',
    params: { entropy_temp: num({ gt: 0 }, 'entropy_weighted: softmax temperature; lower focuses on high-entropy tokens.').default(1.0) },
    sweepValues: { 'credit.entropy_temp': [1.0] },
    headline: 'entropy_temp',
  },
  {
    name: 'gtpo',
    offline: 'outputs',
    summary: "gtpo: H_t / mean_episode(H), the GRPO credit-assignment analysis's strategy 1 (GTPO-style), or GTPO's paper form (gtpo.form)",
    block: {
      key: 'gtpo',
      schema: section(
        {
          form: oneOf(
            ['seed', 'gtpo'],
            "seed: the GRPO credit-assignment analysis's w_t = H_t / mean_episode(H). gtpo: the paper's (arXiv 2508.04349) entropy-shaped token " +
              'rewards, successes rewarded by their entropy share and failures penalised by their inverse-entropy share, each set ' +
              'standardised apart (credit/gtpo.ts).',
          ).default('seed'),
          alpha1: num({ gte: 0 }, "gtpo form: α₁, the outcome's weight in the shaped reward.").default(1.0),
          alpha2: num({ gte: 0 }, "gtpo form: α₂, the entropy term's weight (the ports' 0.1).").default(0.1),
          entropy_clip: allow(
            z
              .tuple([z.number().min(0), z.number().min(0)])
              .nullable()
              .describe('gtpo form: clip each entropy to [lo, hi] first (the ports use [0.2, 0.28]); null: no clip.'),
            'a pair [lo, hi] of numbers ≥ 0, or null',
          ).default(null),
        },
        'gtpo strategy: which form, and the paper form’s α₁, α₂ and entropy clip.',
      ).prefault({}),
    },
    probeVariants: [{ label: 'gtpo (paper form)', sets: { 'credit.gtpo.form': 'gtpo' } }],
    // the default form is the seeds' entropy weighting, not GTPO's paper form: every comparison row says which
    headline: 'gtpo.form',
  },
  {
    name: 'ktae',
    offline: 'prepare',
    summary: "ktae: A_i + KT[token id], the key-token bonus of KTAE (arXiv 2505.16826) from each id's split of the group's correct and wrong rollouts",
    block: {
      key: 'ktae',
      schema: section(
        {
          alpha: num({ gte: 0 }, "Weight of F = exp(−2p), p the token's Fisher exact p (the authors' code: 1).").default(1.0),
          beta: num({ gte: 0 }, 'Weight of the information gain (the authors’ code: 1).').default(1.0),
          tf: bool("Add the BM25-style term-frequency ratio to Cohen's h, as the authors' code does (gamma_tf 1).").default(true),
        },
        "ktae strategy: the key-token score's weights, as the authors' advantage estimator sets them.",
      ).prefault({}),
    },
  },
  {
    name: 'reward_decomposition',
    offline: 'prepare',
    summary: "reward_decomposition: each reward part's own group advantage on the tokens it judges (the GRPO credit-assignment analysis's strategy 4)",
    block: {
      key: 'reward_decomposition',
      schema: section(
        {
          reasoning: bool(
            "Credit the <think> tokens with a reasoning reward, the share of the think section's arithmetic steps that hold " +
              "(countdown, arithmetic, word problems); off: they take the answer's advantage.",
          ).default(true),
        },
        'reward_decomposition strategy: format → tags and text outside the sections, answer → <answer>, reasoning → <think>.',
      ).prefault({}),
    },
  },
  {
    name: 'otb',
    offline: 'prepare',
    summary: "otb: veRL's Optimal Token Baseline, r_i − B_t with a per-position baseline weighted by the realized energy Σ(1 − 2π + Σπ²)",
    block: {
      key: 'otb',
      schema: section(
        {
          handle_zero_tail: bool(
            "veRL's handle_zero_tail: a group's lone longest completion gets baseline 0 past the second-longest (else its own reward, and Â 0).",
          ).default(true),
        },
        "otb strategy (veRL's optimal_token_baseline).",
      ).prefault({}),
    },
  },
  {
    name: 'mc_value',
    summary: 'mc_value: Monte Carlo segment advantages V̂(s_{k+1}) − V̂(s_k) from rollouts at segment boundaries (VinePPO, Segment PO)',
    block: {
      key: 'mc_value',
      schema: section(
        {
          segments: oneOf(
            ['fixed', 'cutpoints'],
            'fixed: a boundary every segment_len tokens; cutpoints: before every cutpoints_per_segment-th token with π < cutpoint_tau (SPO).',
          ).default('fixed'),
          segment_len: int(1, 'fixed: tokens per segment.').default(8),
          cutpoint_tau: num({ gt: 0, lte: 1 }, 'cutpoints: a token whose probability is below this is a cutpoint.').default(0.5),
          cutpoints_per_segment: int(1, 'cutpoints: cutpoints per segment (SPO chain’s k).').default(1),
          rollouts: int(1, 'Continuations per boundary (VinePPO’s K; 9 in the paper).').default(4),
          prob_mask: bool("SPO's probability mask: only a segment's cutpoint tokens get its advantage.").default(false),
        },
        'mc_value strategy: where segments start, and how many rollouts estimate each boundary’s value.',
      ).prefault({}),
    },
  },
  {
    name: 'entropy_mask',
    offline: 'outputs',
    summary: 'entropy_mask: only tokens at or above the mask_percentile of entropy (the GRPO credit-assignment mitigations, after "Beyond the 80/20 Rule")',
    params: {
      mask_percentile: num(
        { gte: 0, lte: 100 },
        "entropy_mask: tokens below this percentile of the batch's entropy get " + 'weight 0 (80 keeps the top 20%, TRL top_entropy_quantile 0.2).',
      ).default(80),
      entropy_mask_norm: oneOf(
        ['valid', 'kept'],
        'entropy_mask: valid: the loss averages over every valid token, masked ones ' +
          "counting as 0 (design.md#semantics). kept: the GRPO credit-assignment mitigations' code, which averages over the kept tokens only; the kept weights " +
          'become (valid tokens ÷ kept tokens) of the batch, which gives the same loss under grpo.loss_agg token_mean only ' +
          '(the config refuses kept with the other aggregations).',
      ).default('valid'),
    },
    sweepValues: { 'credit.mask_percentile': [70, 80, 90] },
    headline: 'mask_percentile',
    check: (c): CatalogIssue[] =>
      c.credit.entropy_mask_norm === 'kept' && c.grpo.loss_agg !== 'token_mean'
        ? [
            {
              path: ['credit', 'entropy_mask_norm'],
              expected:
                `valid with grpo.loss_agg: ${c.grpo.loss_agg} (kept reproduces the GRPO credit-assignment mitigations' average over the kept tokens only ` +
                'under token_mean), or grpo.loss_agg: token_mean',
            },
          ]
        : [],
  },
  {
    name: 'attribution',
    summary: 'attribution: a learned head on the final hidden state (learned advantage attribution)',
    block: {
      key: 'attribution',
      schema: section(
        {
          init_std: num({ gte: 0 }, "Std of the attribution head's initial weights.").default(0.01),
          detach_hidden: bool("Stop the policy loss from training the model through the head's input.").default(true),
          objective: oneOf(
            ['contribution', 'contribution_entropy', 'ppo'],
            "What trains the head (the policy's loss is the same " +
              "for all three). contribution: minimise −Σ c·Â·ℓ (ℓ detached); linear in α, so its optimum puts all of an episode's " +
              'weight on one token (the most likely one when A > 0, the least likely when A < 0). contribution_entropy: the same ' +
              'minus entropy_coef·H(α) per episode; its optimum is α_t = softmax_t(A·ℓ_t / entropy_coef): a Gibbs distribution ' +
              "that entropy_coef tempers (∞: plain GRPO, 0: contribution). ppo: learned advantage attribution's form, the head inside the clipped " +
              'surrogate −min(ρÂ, clip(ρ)Â); at ρ = 1 (grpo.epochs_per_step 1) its gradient is exactly zero, so the head moves only ' +
              "off-policy (epochs_per_step > 1), toward tokens whose ratio already moved with the advantage. learned advantage attribution's own " +
              'results need ppo with epochs_per_step > 1.',
          ).default('contribution'),
          entropy_coef: num({ gt: 0 }, 'contribution_entropy: weight of the entropy of α (larger: closer to uniform).').default(0.1),
        },
        'attribution strategy: a linear head on the final hidden state, trained on credit.attribution.objective.',
      ).prefault({}),
    },
    needs: { hidden: true },
    warnings: (c): string[] =>
      c.credit.attribution.objective === 'ppo' && c.grpo.epochs_per_step === 1
        ? [
            "credit.attribution.objective ppo with grpo.epochs_per_step 1: at ρ = 1 the head's gradient is exactly zero, so it " +
              "stays at its initial (near-uniform) weights and the run is plain GRPO; set grpo.epochs_per_step > 1 for learned advantage attribution's form",
          ]
        : [],
  },
  {
    name: 'cal',
    summary: 'cal: an oracle names the error span of a wrong answer (CAL-GRPO)',
    block: { key: 'cal', schema: calSchema.prefault({}) },
    check: (c): CatalogIssue[] =>
      c.credit.cal.scale === 'group_std' && c.grpo.scale_rewards !== 'group'
        ? [
            {
              path: ['credit', 'cal', 'scale'],
              expected:
                `raw with grpo.scale_rewards: ${c.grpo.scale_rewards} (group_std divides span credit by the group's reward std, which ` +
                `this run's advantages are not divided by), or grpo.scale_rewards: group`,
            },
          ]
        : [],
    secrets: (c): SecretVar[] =>
      c.credit.cal.provider !== 'rule' && c.credit.cal.api_key_env
        ? [{ env: c.credit.cal.api_key_env, path: 'credit.cal.api_key_env', user: `the ${c.credit.cal.provider} oracle` }]
        : [],
  },
  {
    name: 'reward_variance',
    summary: 'reward_variance: an importance net trained on paired rollouts (Reward Variance GRPO)',
    block: {
      key: 'reward_variance',
      schema: section(
        {
          importance_checkpoint: pathOrNull('Checkpoint from `credit-lens importance train`.').default(null),
          mode: oneOf(['variance_drop', 'raw'], 'raw: g = ρ_t. variance_drop: g_t = max(0, ρ_t − ρ_{t−1}).').default('variance_drop'),
          temp: num({ gt: 0 }, 'Softmax temperature over g.').default(1.0),
        },
        'reward_variance strategy: weights from an importance net trained on paired rollouts.',
      ).prefault({}),
    },
    check: (c): CatalogIssue[] =>
      c.credit.reward_variance.importance_checkpoint === null
        ? [
            {
              path: ['credit', 'reward_variance', 'importance_checkpoint'],
              at: ['credit', 'strategy'],
              message:
                'got null; it is required when credit.strategy is reward_variance ' +
                '(train one with `credit-lens importance train <config> --rollouts <parquet>`)',
            },
          ]
        : [],
    needs: { importance: true },
  },
] as const satisfies readonly StrategySpec[];

export type StrategyName = (typeof CATALOG)[number]['name'];
export const STRATEGY_NAMES = CATALOG.map((s) => s.name) as unknown as readonly [StrategyName, ...StrategyName[]];

export function strategySpec(name: string): StrategySpec | undefined {
  return (CATALOG as readonly StrategySpec[]).find((s) => s.name === name);
}

// ---- what the catalog yields ----

type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;
type Entry = (typeof CATALOG)[number];
// Distributive over the catalog's entries (a conditional type distributes over a naked type parameter only).
type ParamsOf<E> = E extends { params: infer P } ? P : never;
type BlockOf<E> = E extends { block: { key: infer K extends string; schema: infer S } } ? { [k in K]: S } : never;
type ParamsShape = UnionToIntersection<ParamsOf<Entry>>;
type BlockKeyOf<E> = E extends { block: { key: infer K extends string } } ? K : never;
/** The keys of the strategies' own blocks under `credit` (attribution, cal, reward_variance). */
export type BlockKey = BlockKeyOf<Entry>;
type BlocksShape = UnionToIntersection<BlockOf<Entry>>;

/** The `credit` section as a run's config holds it (every default filled in), typed from this catalog. */
export type CreditSection = z.output<z.ZodObject<ReturnType<typeof creditShape>>>;

/** The `credit` section's shape: the strategy, every strategy's parameters and blocks. */
export function creditShape() {
  const strategy = oneOf(
    STRATEGY_NAMES,
    `Credit strategy: how the episode advantage is spread over its tokens (design.md#semantics). ${CATALOG.map((s) => s.summary).join('. ')}.`,
  ).default('none');
  const shape: Record<string, z.ZodType> = { strategy };
  for (const s of CATALOG as readonly StrategySpec[]) {
    Object.assign(shape, s.params ?? {});
    if (s.block) shape[s.block.key] = s.block.schema;
  }
  return shape as { strategy: typeof strategy } & ParamsShape & BlocksShape;
}

/**
 * The `credit` section flattened to what a strategy's weights read: its top-level parameters, plus each block's
 * keys under their own names (`cal.negative_reward` → `negative_reward`). Block keys are unique across blocks.
 */
export function flattenCredit<C extends Record<string, unknown>>(credit: C): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const blocks = new Set((CATALOG as readonly StrategySpec[]).map((s) => s.block?.key).filter(Boolean));
  for (const [k, v] of Object.entries(credit)) {
    if (k === 'strategy') continue;
    if (blocks.has(k) && v && typeof v === 'object') Object.assign(out, v);
    else out[k] = v;
  }
  return out;
}

/** The config keys (dotted) each strategy reads; the sweep drops the others from a strategy's runs. */
export function strategyKeys(): Record<StrategyName, string[]> {
  const out = {} as Record<StrategyName, string[]>;
  for (const s of CATALOG as readonly StrategySpec[]) {
    const keys = Object.keys(s.params ?? {}).map((k) => `credit.${k}`);
    if (s.block) for (const k of Object.keys(shapeOf(s.block.schema) ?? {})) keys.push(`credit.${s.block.key}.${k}`);
    out[s.name as StrategyName] = keys;
  }
  return out;
}

/** The sweep QuickPick values, by dotted key, over every strategy. */
export function sweepValues(): Record<string, number[]> {
  return Object.assign({}, ...(CATALOG as readonly StrategySpec[]).map((s) => s.sweepValues ?? {}));
}

/** strategy → the parameter comparisons label it by. */
export function headlineParams(): Record<string, string> {
  return Object.fromEntries((CATALOG as readonly StrategySpec[]).filter((s) => s.headline).map((s) => [s.name, s.headline!]));
}

/** The strategies whose weights need only the batch and the forward pass: what an import scores, and the probe's rows. */
/** Every entry's probe variants: the strategy whose prepare() scores it, the row's label and the `--set` lines it applies. */
export function probeVariants(): { strategy: StrategyName; label: string; sets: string[] }[] {
  return (CATALOG as readonly StrategySpec[]).flatMap((s) =>
    (s.probeVariants ?? []).map((v) => ({ strategy: s.name as StrategyName, label: v.label, sets: Object.entries(v.sets).map(([k, x]) => `${k}=${x}`) })),
  );
}

export function offlineStrategies(kind: 'outputs' | 'prepare'): StrategyName[] {
  return (CATALOG as readonly StrategySpec[]).filter((s) => s.offline === kind).map((s) => s.name as StrategyName);
}
