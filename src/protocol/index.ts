// The one shared protocol module (DESIGN §1): types only. Imported by engine, extension and webviews,
// so a renamed field breaks the build, not the user.

export type RunStatus = 'running' | 'completed' | 'failed' | 'stopped';
export type Phase = 'sft' | 'grpo' | 'eval';
export type SectionName = 'think' | 'answer' | 'other';

/** `<run>/run.json` (DESIGN §5). */
export interface RunInfo {
  id: string;
  name: string;
  status: RunStatus;
  started: string;
  ended: string | null;
  backend: string;
  backend_reason?: string;
  engine_version: string;
  config_path?: string;
  strategy?: string;
  total_steps?: number;
  last_step?: number;
  pid?: number;
  error?: string;
  resumed_from?: string | null;
}

/** One line of `<run>/metrics.jsonl` (DESIGN §5). */
export interface MetricsRow {
  step: number;
  phase: Phase;
  reward_mean?: number;
  reward_std?: number;
  success_rate?: number;
  eval_success?: number;
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

/** One row of `<run>/tokens/step-NNNNNN.arrow` (DESIGN §5). */
export interface TokenRow {
  step: number;
  episode: number;
  prompt_idx: number;
  position: number;
  token_id: number;
  token: string;
  logprob: number;
  entropy: number;
  advantage: number;
  weight: number;
  effective_advantage: number;
  contribution: number;
  attribution: number | null;
  importance: number | null;
  section: SectionName;
  token_type: 'filler' | 'reasoning';
  reward: number;
}

/** One row of `<run>/episodes/step-NNNNNN.arrow` (DESIGN §5). */
export interface EpisodeRow {
  step: number;
  episode: number;
  prompt_idx: number;
  prompt: string;
  completion: string;
  reward: number;
  reward_format: number;
  reward_answer: number;
  success: boolean;
  advantage: number;
  length: number;
  oracle_span: string | null;
}

// ---- JSON-RPC over stdio (engine ↔ extension), DESIGN §7 ----
export const RpcMethods = {
  started: 'run/started',
  progress: 'run/progress',
  metrics: 'run/metrics',
  log: 'run/log',
  finished: 'run/finished',
  stop: 'run/stop',
} as const;

export interface RunStartedParams { runDir: string; id: string; name: string; backend: string; totalSteps: number }
export interface RunProgressParams { phase: Phase; step: number; total: number; message?: string }
export interface RunMetricsParams { runDir: string; row: MetricsRow }
export interface RunLogParams { level: 'info' | 'warn' | 'error'; message: string }
export interface RunFinishedParams { status: RunStatus; runDir: string; error?: string }
export interface RunStopResult { ok: boolean; checkpoint: string | null }
