// The trainers' output formats `credit-lens import` reads, declared once: the engine's readers, the CLI's --format,
// run.json's `imported.format` and the extension's Import and Follow pickers all take this list.

export interface ImportFormatDef {
  /** the `--format` value and run.json's `imported.format` */
  readonly id: string;
  /** what the picker calls the folder a trainer writes */
  readonly label: string;
  /** what is in it */
  readonly detail: string;
}

export const IMPORT_FORMAT_DEFS = [
  { id: 'verl', label: 'veRL rollout_data_dir', detail: 'one <step>.jsonl per step ({input, output, score, step})' },
  {
    id: 'prime',
    label: 'prime-rl output folder',
    detail: 'token_exports/step_N/ or rollouts/step_N/train/…/traces.jsonl, with metrics.jsonl beside: no model needed',
  },
  { id: 'trl', label: 'TRL completions folder', detail: 'per-step completions (JSONL, CSV or W&B table JSON)' },
  { id: 'jsonl', label: 'Plain JSONL', detail: '{step, prompt, completion, reward} lines' },
] as const satisfies readonly ImportFormatDef[];

export type ImportFormat = (typeof IMPORT_FORMAT_DEFS)[number]['id'];
export const IMPORT_FORMATS = IMPORT_FORMAT_DEFS.map((f) => f.id) as unknown as readonly [ImportFormat, ...ImportFormat[]];
