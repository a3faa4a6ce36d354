// The one shared protocol module (design.md#shape): types only. Imported by engine, extension and webviews,
// so a renamed field breaks the build, not the user.

import type { ImportFormat } from './import_formats';
export type RunStatus = 'running' | 'completed' | 'failed' | 'stopped';
export type Phase = 'sft' | 'grpo' | 'eval';
/** Where a completion token sits (design.md#semantics "Sections"). */
export type Section = 'think' | 'answer' | 'other';
/** Seed doc 002's token classes (design.md#semantics "Token types"). */
export type TokenType = 'filler' | 'reasoning';

/**
 * What a run or checkpoint draws its data from: the task, its split seed and a hash of each split's
 * instances. Two runs are compared on the same instances only when their identities agree.
 */
export interface TaskIdentity {
  name: string;
  split_seed: number;
  /** sizes of train / test / validation */
  sizes: [number, number, number];
  /** sha256 (first 16 hex digits) of each split's prompts and answers, in order */
  train_hash: string;
  test_hash: string;
  /** absent in checkpoints of engines that did not record the task's splits */
  validation_hash?: string;
}

/** `<run>/run.json` (design.md#run-directory). */
export interface RunInfo {
  id: string;
  name: string;
  status: RunStatus;
  started: string;
  ended: string | null;
  backend: string;
  backend_reason?: string;
  /** backend webgpu: the adapter it ran on (vendor, architecture, description, whether software, buffer limits) */
  adapter?: { vendor: string; architecture: string; description: string; software: boolean; [k: string]: unknown };
  engine_version: string;
  config_path?: string;
  strategy?: string;
  total_steps?: number;
  last_step?: number;
  pid?: number;
  error?: string;
  resumed_from?: string | null;
  /** the shared SFT warm start (sft.share) this run started GRPO from: its run folder */
  warm_start?: string;
  /** rollout.server: the SGLang server that sampled the rollouts and evals, and every weight sync (step, folder, seconds) */
  rollout_server?: { url: string; api: string; model: string | null; syncs: { step: number; path: string; seconds: number }[] };
  /** the task and splits the run draws (set once its session is open); compare pairs runs only when these agree */
  task?: TaskIdentity;
  /** set when the run was made by `credit-lens import` from another trainer's rollouts, not trained here */
  imported?: ImportedInfo;
  /** logging.mlflow: the MLflow run this run logs to (a resume goes on logging there) */
  mlflow?: { tracking_uri: string; experiment_id: string; run_id: string };
}

/** Where an imported run's rollouts came from and how they were scored (run.json `imported`). */
export interface ImportedInfo {
  /** the file or folder that was imported (absolute) */
  source: string;
  format: ImportFormat;
  /** the model that scored the tokens (HF dir, run dir or checkpoint); null when the source carried per-token values */
  model: string | null;
  /** completions imported, and lines skipped as malformed */
  records: number;
  skipped: number;
  /**
   * Where the tokens were scored when an inference server scored them (`import --score-server`): its API, URL, model and
   * weight version, and the K of its top-K log-probs. The token table's entropy is then NaN, and the columns
   * `entropy_topk` and `grad_norm_topk` hold the top-K estimates (K tokens plus one bucket for the rest: lower bounds).
   */
  scored_by?: { api: string; url: string | null; model: string | null; weight_version: string | null; top_k: number };
  /** the tokenizer the tokens were read with (`--tokenizer`, or the `--model`'s), so a probe can decode continuations */
  tokenizer?: string | null;
  /** how logged prompt texts were encoded (`--chat-template`), so a probe encodes the task's prompts the same way */
  chat_template?: 'auto' | 'apply' | 'as-logged';
  /** `import --follow`: true while the import follows a run that is still training (its steps are added as they come) */
  following?: boolean;
}

/** One line of `<run>/metrics.jsonl` (design.md#run-directory). */
export interface MetricsRow {
  step: number;
  phase: Phase;
  reward_mean?: number;
  reward_std?: number;
  success_rate?: number;
  /** share of the step's groups whose rewards are not all equal (the groups that carry a signal) */
  effective_groups?: number;
  /** share of the step's completions that hit max_new_tokens without ending */
  truncated_frac?: number;
  /** mean of grpo.overlong_buffer's reward penalty over the step's completions (≤ 0) */
  overlong_penalty_mean?: number;
  /** grpo.dynamic_sampling: groups sampled to fill the step, and the share of the kept ones that came from extra draws */
  groups_drawn?: number;
  resampled_frac?: number;
  /** logging.realized_credit: the seconds of the forward pass that re-scores the step under the updated policy */
  realized_seconds?: number;
  eval_success?: number;
  /** greedy success on the validation split (task.val_size > 0), at the same steps as eval_success */
  val_success?: number;
  loss?: number;
  grad_norm?: number;
  kl?: number;
  entropy_mean?: number;
  clip_frac?: number;
  response_len?: number;
  step_time_s?: number;
  tokens_per_s?: number;
  skipped?: number;
  [extra: string]: number | string | undefined;
}

// ---- JSON-RPC over stdio (engine ↔ extension), design.md#protocol ----
export const RpcMethods = {
  started: 'run/started',
  progress: 'run/progress',
  metrics: 'run/metrics',
  log: 'run/log',
  finished: 'run/finished',
  stop: 'run/stop',
} as const;

export interface RunStartedParams {
  runDir: string;
  id: string;
  name: string;
  backend: string;
  totalSteps: number;
}
export interface RunProgressParams {
  phase: Phase;
  step: number;
  total: number;
  message?: string;
}
export interface RunMetricsParams {
  runDir: string;
  row: MetricsRow;
}
export interface RunLogParams {
  level: 'info' | 'warn' | 'error';
  message: string;
}
export interface RunFinishedParams {
  status: RunStatus;
  runDir: string;
  error?: string;
}
export interface RunStopResult {
  ok: boolean;
  checkpoint: string | null;
}

/**
 * A shared SFT warm start's run folder: `<output_dir>/<task>-warm-start-<12 hex of what determines its weights>`
 * (engine/train/warm_start.ts). The Runs tree shows it under the runs that start from it, never in a run picker.
 */
export const WARM_START_DIR = /-warm-start-[0-9a-f]{12}$/;
