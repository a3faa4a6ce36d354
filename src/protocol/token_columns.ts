// The token table's columns (design.md#run-directory), each declared once: its name, Arrow type, nullability, meaning, and how the
// heatmap paints it and the hover shows it. The Arrow schema and the readers (engine/rundir/arrow_tables.ts), the
// column types, the heatmap's metrics (extension/heatmap/scales.ts) and the hover (extension/heatmap/hover.ts) all
// derive from this list, so a new column is one entry here plus the line in session/token_log.ts that fills it.
// Pure data like the rest of src/protocol: the engine, the extension and the webviews import it alike.
import type { Section, TokenType } from './index';

/** How a numeric column is painted: a diverging scale around 0 when signed, else sequential (invert: low is notable). */
export interface HeatmapScale {
  /** the name in the metric picker and the status bar */
  label: string;
  signed: boolean;
  /** the strongest colour at the low end of a sequential scale (a low log-prob is a surprising token) */
  invert?: boolean;
  /**
   * A signed metric that says which way the update moved the token: the sign of the values it pushed up (log π for a
   * trained token, the expected reward for MC credit). Every such metric paints "up" blue and "down" red, whatever its
   * own sign: the contribution c = Â·ℓ is negative on a reinforced token (ℓ < 0), so its up is its negative side.
   */
  up?: 'positive' | 'negative';
  /** what "up" means for this metric, in the colour key (default: pushed up / pushed down) */
  upMeans?: [up: string, down: string];
}

export interface TokenColumnDef {
  name: string;
  type: 'int32' | 'float32' | 'utf8';
  /** a nullable column may be null row by row, or wholly (a strategy that does not produce it) */
  nullable: boolean;
  /** what the value is: the hover, the metric picker and design.md#run-directory say this */
  meaning: string;
  /** paintable on the heatmap, and how */
  heatmap?: HeatmapScale;
  /** a row of the token hover, under this label (a nullable column's row is left out where it is null) */
  hover?: string;
  /** utf8 columns with a handful of distinct values: the reader shares one string per value */
  few_values?: boolean;
}

/** design.md#run-directory's token table, in contract column order. */
export const TOKEN_COLUMNS = [
  { name: 'step', type: 'int32', nullable: false, meaning: 'the GRPO step the episode was sampled at' },
  { name: 'episode', type: 'int32', nullable: false, meaning: "the episode's index within its step" },
  { name: 'prompt_idx', type: 'int32', nullable: false, meaning: "the prompt's index in the task's split" },
  { name: 'position', type: 'int32', nullable: false, meaning: "the token's position in its completion (0 = first generated token)" },
  { name: 'token_id', type: 'int32', nullable: false, meaning: "the token's id in the model's vocabulary" },
  { name: 'token', type: 'utf8', nullable: false, meaning: "the token's text" },
  {
    name: 'char_start',
    type: 'int32',
    nullable: true,
    meaning:
      "where the token's text starts in its completion, in UTF-16 code units (the tokens' texts concatenate to the completion in position order); null in runs written before it",
  },
  {
    name: 'logprob',
    type: 'float32',
    nullable: false,
    meaning: 'ℓ = log π(token), strongest colour for the least likely tokens',
    heatmap: { label: 'log-prob', signed: false, invert: true },
    hover: 'log-prob ℓ',
  },
  {
    name: 'entropy',
    type: 'float32',
    nullable: false,
    meaning: 'entropy of the sampling distribution at this position (nats)',
    heatmap: { label: 'entropy', signed: false },
    hover: 'entropy',
  },
  { name: 'advantage', type: 'float32', nullable: false, meaning: "A, the episode's advantage (broadcast to each of its tokens)", hover: 'advantage A' },
  {
    name: 'weight',
    type: 'float32',
    nullable: false,
    meaning: "w, the credit strategy's per-token weight",
    heatmap: { label: 'weight', signed: false },
    hover: 'weight w',
  },
  {
    name: 'effective_advantage',
    type: 'float32',
    nullable: false,
    meaning: 'Â = A·w, the advantage this token was trained with',
    heatmap: { label: 'effective advantage Â', signed: true, up: 'positive' },
    hover: 'effective advantage Â',
  },
  {
    name: 'contribution',
    type: 'float32',
    nullable: false,
    meaning:
      "c_Â = Â·ℓ, the token's share of the policy-gradient objective with its effective advantage (the credit analysis' c_A = A·ℓ uses the episode's A); negative where the update pushed the token up, since ℓ < 0",
    heatmap: { label: 'contribution c_Â', signed: true, up: 'negative' },
    hover: 'contribution c_Â',
  },
  {
    name: 'attribution',
    type: 'float32',
    nullable: true,
    meaning: "α, the learned attribution head's share of the credit",
    heatmap: { label: 'attribution', signed: false },
    hover: 'attribution α',
  },
  {
    name: 'importance',
    type: 'float32',
    nullable: true,
    meaning: "ρ, the reward-variance importance net's predicted reward correlation",
    heatmap: { label: 'importance', signed: true },
    hover: 'importance ρ',
  },
  {
    name: 'is_weight',
    type: 'float32',
    nullable: true,
    meaning:
      "the importance weight that multiplied the token's gradient, mean over the step's PPO epochs: ρ (ppo), the " +
      "sequence's s (GSPO), the clipped w (CISPO); 1 on-policy; 0 in an epoch whose clip cut the gradient",
    heatmap: { label: 'IS weight', signed: false },
    hover: 'IS weight',
  },
  {
    name: 'clipped',
    type: 'float32',
    nullable: true,
    meaning: "the share of the step's PPO epochs in which the clip cut the token's gradient (ppo) or bounded its weight (cispo)",
    heatmap: { label: 'clipped', signed: false },
    hover: 'clipped (share of epochs)',
  },
  {
    name: 'grad_norm',
    type: 'float32',
    nullable: true,
    meaning:
      "the size of the gradient the token's term Â·log π sends to the logits: |Â|·√(1 − 2π + Σπ²)/T, from the full " +
      'distribution that gave its entropy (null where none was seen, e.g. an import without a model)',
    heatmap: { label: 'gradient norm', signed: false },
    hover: 'gradient norm',
  },
  {
    name: 'realized',
    type: 'float32',
    nullable: true,
    meaning:
      "realized credit: log π_new(y_t) − log π_old(y_t), what the step's update actually did to the token's log-prob (the " +
      'parameters are shared, so every token moves, not only as its Â told it); null unless logging.realized_credit',
    heatmap: { label: 'realized credit', signed: true, up: 'positive', upMeans: ['log π rose', 'log π fell'] },
    hover: 'realized Δ log π',
  },
  {
    name: 'ref_logratio',
    type: 'float32',
    nullable: true,
    meaning:
      "log π(y_t) − log π_ref(y_t): how far training so far has moved the sampled token's log-prob from the reference policy " +
      "(the run's starting policy, the one grpo.kl_beta uses): the cumulative counterpart of realized credit; null unless logging.ref_logratio",
    heatmap: { label: 'shift from the reference', signed: true, up: 'positive', upMeans: ['above the reference', 'below the reference'] },
    hover: 'log π − log π_ref',
  },
  { name: 'section', type: 'utf8', nullable: false, meaning: 'where the token sits: in the <think> block, the <answer> block, or other', few_values: true },
  { name: 'token_type', type: 'utf8', nullable: false, meaning: "the credit-assignment analysis' token class: filler or reasoning", few_values: true },
  { name: 'reward', type: 'float32', nullable: false, meaning: "the episode's total reward" },
] as const satisfies readonly TokenColumnDef[];

/**
 * Per-token columns beyond the contract whose meaning we know: prime-rl's token exports (trainer.enable_token_export),
 * kept by `credit-lens import` as nullable float32 columns. Any other extra column is painted on a sequential scale
 * under its own name.
 */
export const KNOWN_EXTRA_COLUMNS: readonly (Omit<TokenColumnDef, 'type' | 'nullable' | 'heatmap'> & { heatmap: HeatmapScale })[] = [
  {
    name: 'importance_ratio',
    meaning: 'π_trainer / π_inference of the token (prime-rl export): off-policy drift between the inference engine and the trainer',
    heatmap: { label: 'importance ratio', signed: false },
  },
  {
    name: 'log_importance_ratio',
    meaning: 'log π_trainer − log π_inference of the token (prime-rl export)',
    heatmap: { label: 'log importance ratio', signed: true },
  },
  {
    name: 'mismatch_kl',
    meaning: 'per-token KL between the inference and trainer distributions (prime-rl export)',
    heatmap: { label: 'mismatch KL', signed: false },
  },
  {
    name: 'inference_logprob',
    meaning: 'log-prob of the token under the inference engine that sampled it (prime-rl export)',
    heatmap: { label: 'inference log-prob', signed: false, invert: true },
  },
  { name: 'prob_delta', meaning: 'π_trainer − π_inference of the token (prime-rl export)', heatmap: { label: 'prob delta', signed: true } },
  // `credit-lens probe`, joined from <run>/probes/step-N.arrow where the step was probed
  {
    name: 'mc_value',
    meaning: 'V_t, the Monte Carlo value of the prefix before this token: the mean reward of M continuations from it (credit-lens probe)',
    heatmap: { label: 'MC value', signed: false },
  },
  { name: 'mc_value_se', meaning: "the standard error of the token's MC value", heatmap: { label: 'MC value se', signed: false } },
  {
    name: 'mc_delta',
    meaning: 'δ_t = V_{t+1} − V_t, the Monte Carlo credit of this token: how much choosing it changed the expected reward (credit-lens probe)',
    heatmap: { label: 'MC credit δ', signed: true, up: 'positive', upMeans: ['raised the expected reward', 'lowered it'] },
  },
  {
    name: 'mc_delta_se',
    meaning: "the standard error of the token's MC credit δ, √(se_t² + se_{t+1}²): a δ within 2 of them of 0 is noise at this M",
    heatmap: { label: 'MC credit se', signed: false },
  },
  { name: 'mc_rollouts', meaning: 'M, the continuations behind the MC value', heatmap: { label: 'MC rollouts M', signed: false } },
];

/** The name an extra token column may have (snake_case, and never a contract column's name). */
export const EXTRA_COLUMN_RE = /^[a-z][a-z0-9_]{0,63}$/;

type Def = (typeof TOKEN_COLUMNS)[number];
export type TokenColumnName = Def['name'];
/** The columns the heatmap can paint. */
export type PaintableColumn = Extract<Def, { heatmap: HeatmapScale }>['name'];
/** The nullable columns (whole-column null when the strategy does not produce them). */
export type NullableColumn = Extract<Def, { nullable: true }>['name'];

/** The value type of a string column whose values are known. */
interface StringValues {
  section: Section;
  token_type: TokenType;
}
type StringOf<N> = N extends keyof StringValues ? StringValues[N] : string;
type ReadColumn<D extends Def> = D['type'] extends 'int32'
  ? D['nullable'] extends true
    ? Int32Array | null
    : Int32Array
  : D['type'] extends 'float32'
    ? D['nullable'] extends true
      ? Float32Array | null
      : Float32Array
    : StringOf<D['name']>[];
type WriteColumn<D extends Def> = D['type'] extends 'float32'
  ? D['nullable'] extends true
    ? Float32Array | (number | null)[] | null
    : Float32Array
  : ReadColumn<D>;

/**
 * Each of `rows`' character start in the concatenation of their texts: the token table's char_start where the writer
 * stored it, else rebuilt from the texts (runs written before the column). The one place a reader gets offsets.
 */
export function charStarts(t: { token: readonly string[]; char_start: Int32Array | null }, rows: ArrayLike<number>): Int32Array {
  const out = new Int32Array(rows.length);
  if (t.char_start) {
    for (let i = 0; i < rows.length; i++) out[i] = t.char_start[rows[i]];
    return out;
  }
  let at = 0;
  for (let i = 0; i < rows.length; i++) {
    out[i] = at;
    at += t.token[rows[i]].length;
  }
  return out;
}

/**
 * A token table's contract columns as the writer takes them: every array has one entry per completion token. A
 * nullable column may be left out or null when the strategy does not produce it (the whole column is written as
 * nulls), or a `(number | null)[]` marking single rows null. A non-nullable column must be filled by every writer
 * (session/token_log.ts, and analysis/synthetic.ts's bench tables): the compiler names each one that does not.
 */
export type TokenContractColumns = { [D in Def as D['nullable'] extends true ? never : D['name']]: WriteColumn<D> } & {
  [D in Def as D['nullable'] extends true ? D['name'] : never]?: WriteColumn<D>;
};
/** Every contract column as a writer fills it: allocated, nullable ones too (a writer sets to null what it does not produce). */
export type TokenColumnArrays = {
  [D in Def as D['name']]: D['type'] extends 'int32' ? Int32Array : D['type'] extends 'float32' ? Float32Array : StringOf<D['name']>[];
};
/** The contract columns as the readers return them: a nullable float column is a Float32Array (NaN where a row is null) or null. */
export type TokenContractColumnsRead = { [D in Def as D['name']]: ReadColumn<D> };

export function tokenColumn(name: string): TokenColumnDef | undefined {
  return (TOKEN_COLUMNS as readonly TokenColumnDef[]).find((c) => c.name === name);
}
