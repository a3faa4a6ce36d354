// What `engine: trl` carries of a run's config into TRL's GRPOConfig, and the refusal of everything else by name. The
// task, its splits and its rewards stay in this engine (the `credit-lens reward` worker); the credit strategy goes to
// credit_lens.trl.CreditGRPOTrainer, which refuses a strategy the Python package does not carry, with its reason.
import { UserError } from '../core/errors';
import { CONFIG_PATHS } from '../config/base';
import { getDotted } from '../config/dotted';
import { validateConfig } from '../config/issues';
import type { CreditConfig } from '../config/schema';

/** Keys carried as they are, or mapped below; prefixes end with a dot. */
const CARRIED = [
  'name',
  'seed',
  'engine',
  'output_dir',
  'model.source',
  'model.path',
  'task.',
  'sft.',
  'credit.',
  'grpo.steps',
  'grpo.prompts_per_step',
  'grpo.group_size',
  'grpo.max_new_tokens',
  'grpo.temperature',
  'grpo.top_p',
  'grpo.lr',
  'grpo.epochs_per_step',
  'grpo.gradient_accumulation_steps',
  'grpo.clip_eps',
  'grpo.clip_eps_high',
  'grpo.kl_beta',
  'grpo.scale_rewards',
  'grpo.loss_agg',
  'grpo.mask_truncated_completions',
  'grpo.importance_sampling_level',
  'grpo.grad_clip',
  'grpo.checkpoint_every',
  'logging.tokens',
  'logging.every',
] as const;

const carried = (path: string) => CARRIED.some((k) => (k.endsWith('.') ? path.startsWith(k) : path === k || path.startsWith(`${k}.`)));

/** TRL's loss_type of each loss aggregation (TRL's own names for the same sums). */
export const TRL_LOSS_TYPE: Record<CreditConfig['grpo']['loss_agg'], string> = {
  token_mean: 'dapo',
  seq_mean_token_mean: 'grpo',
  seq_mean_token_sum_norm: 'dr_grpo',
};

/**
 * The config keys this run sets away from their defaults that `engine: trl` does not carry, and the checks of the ones it
 * carries with conditions; the first is thrown as an error naming the key, its value and what trl takes.
 */
export function trlIssues(cfg: CreditConfig): string[] {
  const { config: defaults } = validateConfig({ task: { name: cfg.task.name } });
  const out: string[] = [];
  for (const path of CONFIG_PATHS) {
    if (carried(path)) continue;
    const v = getDotted(cfg, path);
    const d = getDotted(defaults, path);
    // a section is judged by its leaves
    if (v && typeof v === 'object' && !Array.isArray(v)) continue;
    if (JSON.stringify(v) !== JSON.stringify(d))
      out.push(`${path}: ${JSON.stringify(v)}; engine trl does not carry it (remove it to train with TRL, or use engine: tfjs)`);
  }
  if (cfg.model.source !== 'hf') out.push(`model.source: ${cfg.model.source}; engine trl trains a Hugging Face model folder (model.source: hf, model.path)`);
  if (cfg.sft.steps > 0)
    out.push(`sft.steps: ${cfg.sft.steps}; engine trl trains model.path as it is (warm-start it first, e.g. with TRL's SFTTrainer, and set sft.steps: 0)`);
  const batch = cfg.grpo.prompts_per_step * cfg.grpo.group_size;
  if (batch % cfg.grpo.gradient_accumulation_steps !== 0)
    out.push(
      `grpo.gradient_accumulation_steps: ${cfg.grpo.gradient_accumulation_steps}; under engine trl it must divide prompts_per_step × group_size (${batch})`,
    );
  return out;
}

export function checkTrlConfig(cfg: CreditConfig): void {
  const issues = trlIssues(cfg);
  if (issues.length)
    throw new UserError(`engine: trl: ${issues[0]}${issues.length > 1 ? ` (and ${issues.length - 1} more: ${issues.slice(1).join('; ')})` : ''}`);
}

/** TRL's GRPOConfig arguments of a run (credit_lens.run adds the output folder, the device and the precision). */
export function grpoConfigOf(cfg: CreditConfig): Record<string, unknown> {
  const g = cfg.grpo;
  const batch = g.prompts_per_step * g.group_size;
  return {
    max_steps: g.steps,
    num_generations: g.group_size,
    // one generation batch a step, in gradient_accumulation_steps micro-batches, as this engine steps
    per_device_train_batch_size: batch / g.gradient_accumulation_steps,
    gradient_accumulation_steps: g.gradient_accumulation_steps,
    max_completion_length: g.max_new_tokens,
    temperature: g.temperature,
    top_p: g.top_p,
    learning_rate: g.lr,
    num_iterations: g.epochs_per_step,
    epsilon: g.clip_eps,
    epsilon_high: g.clip_eps_high ?? g.clip_eps,
    beta: g.kl_beta,
    scale_rewards: g.scale_rewards,
    loss_type: TRL_LOSS_TYPE[g.loss_agg],
    mask_truncated_completions: g.mask_truncated_completions,
    importance_sampling_level: g.importance_sampling_level,
    max_grad_norm: g.grad_clip,
    save_steps: g.checkpoint_every,
    seed: cfg.seed,
  };
}
