// The trainers' output formats `credit-lens import` reads, declared once: the engine's readers, the CLI's --format,
// run.json's `imported.format` and the extension's Import and Follow pickers all take this list.

export interface ImportFormatDef {
  /** the `--format` value and run.json's `imported.format` */
  readonly id: string;
  /** what the picker calls the folder a trainer writes */
  readonly label: string;
  /** what is in it */
  readonly detail: string;
  /** its records carry per-token values (token ids, log-probs, advantages): no model scores them */
  readonly perToken: boolean;
}

export const IMPORT_FORMAT_DEFS = [
  {
    id: 'verl_shard',
    label: 'veRL token shards (credit_lens.verl)',
    detail: 'CREDIT_LENS_SHARD_DIR: step_N.jsonl with each token’s A, Â, weight and old log-prob: no model needed',
    perToken: true,
  },
  { id: 'verl', label: 'veRL rollout_data_dir', detail: 'one <step>.jsonl per step ({input, output, score, step})', perToken: false },
  {
    id: 'prime',
    label: 'prime-rl output folder',
    detail: 'token_exports/step_N/ or rollouts/step_N/train/…/traces.jsonl, with metrics.jsonl beside: no model needed',
    perToken: true,
  },
  {
    id: 'trl',
    label: 'TRL completions folder',
    detail: "per-step completions (TRL's completions_NNNNN.parquet, JSONL, CSV or W&B table JSON)",
    perToken: false,
  },
  { id: 'jsonl', label: 'Plain JSONL', detail: '{step, prompt, completion, reward} lines', perToken: false },
] as const satisfies readonly ImportFormatDef[];

export type ImportFormat = (typeof IMPORT_FORMAT_DEFS)[number]['id'];
export const IMPORT_FORMATS = IMPORT_FORMAT_DEFS.map((f) => f.id) as unknown as readonly [ImportFormat, ...ImportFormat[]];

/** Whether a format's records carry their own per-token values (no model or server scores them). */
export function carriesTokens(format: string): boolean {
  return IMPORT_FORMAT_DEFS.find((f) => f.id === format)?.perToken ?? false;
}
