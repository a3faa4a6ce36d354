// Did-you-mean for config keys and values: edit distance over the schema's paths, plus the names researchers bring
// from TRL's GRPOConfig, Hugging Face configs, nanoGPT and seed doc 001's CLI.
import type { z } from 'zod';
import { baseSchema, CONFIG_PATHS, CONFIG_PATH_SET } from './base';
import { core, defOf, schemaAt, shapeOf, type Def } from '../core/fields';
import { levenshtein } from '../core/text';

// ---------------------------------------------------------------------------------------------------------
// Did-you-mean.

export function closest(word: string, candidates: readonly string[]): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = levenshtein(w, c.toLowerCase());
    if (d < bestD) {
      best = c;
      bestD = d;
    }
  }
  if (best !== undefined && bestD <= Math.max(1, Math.floor(Math.max(w.length, best.length) * 0.4))) return best;
  // A fragment of a key (`discount` for think_discount) is too far by edit distance but unambiguous.
  if (w.length >= 4) {
    const hits = candidates.filter((c) => c.toLowerCase().includes(w) || (c.length >= 4 && w.includes(c.toLowerCase())));
    if (hits.length === 1) return hits[0];
  }
  return undefined;
}

// Names a researcher brings from TRL's GRPOConfig, Hugging Face model configs, nanoGPT and seed doc 001's CLI.
export const FOREIGN_NAMES: Record<string, { path: string; from: string; note?: string }> = {
  num_generations: { path: 'grpo.group_size', from: "TRL's num_generations" },
  beta: { path: 'grpo.kl_beta', from: "TRL's beta" },
  kl_coef: { path: 'grpo.kl_beta', from: 'the usual kl_coef' },
  epsilon: { path: 'grpo.clip_eps', from: "TRL's epsilon" },
  epsilon_low: { path: 'grpo.clip_eps', from: "TRL's epsilon" },
  epsilon_high: { path: 'grpo.clip_eps_high', from: "TRL's epsilon_high" },
  loss_type: { path: 'grpo.loss_agg', from: "TRL's loss_type" },
  learning_rate: { path: 'grpo.lr', from: "TRL's learning_rate" },
  max_completion_length: { path: 'grpo.max_new_tokens', from: "TRL's max_completion_length" },
  num_iterations: { path: 'grpo.epochs_per_step', from: "TRL's num_iterations" },
  max_grad_norm: { path: 'grpo.grad_clip', from: "TRL's max_grad_norm" },
  max_steps: { path: 'grpo.steps', from: "TRL's max_steps" },
  eval_steps: { path: 'grpo.eval_every', from: "TRL's eval_steps" },
  save_steps: { path: 'grpo.checkpoint_every', from: "TRL's save_steps" },
  logging_steps: { path: 'logging.every', from: "TRL's logging_steps" },
  top_entropy_quantile: {
    path: 'credit.mask_percentile',
    from: "TRL's top_entropy_quantile",
    note: 'with credit.strategy: entropy_mask, mask_percentile = 100·(1 − top_entropy_quantile)',
  },
  mitigation: { path: 'credit.strategy', from: "the GRPO credit-assignment mitigations' --mitigation" },
  hidden_size: { path: 'model.d_model', from: "Hugging Face's hidden_size" },
  n_embd: { path: 'model.d_model', from: "nanoGPT's n_embd" },
  intermediate_size: { path: 'model.d_ff', from: "Hugging Face's intermediate_size" },
  num_hidden_layers: { path: 'model.n_layers', from: "Hugging Face's num_hidden_layers" },
  n_layer: { path: 'model.n_layers', from: "nanoGPT's n_layer" },
  num_attention_heads: { path: 'model.n_heads', from: "Hugging Face's num_attention_heads" },
  n_head: { path: 'model.n_heads', from: "nanoGPT's n_head" },
  num_key_value_heads: { path: 'model.n_kv_heads', from: "Hugging Face's num_key_value_heads" },
  max_position_embeddings: { path: 'model.max_seq_len', from: "Hugging Face's max_position_embeddings" },
  block_size: { path: 'model.max_seq_len', from: "nanoGPT's block_size" },
};

// Enum values from the seeds that differ from ours.
export const FOREIGN_VALUES: Record<string, string> = { baseline: 'none', entropy_masking: 'entropy_mask' };

const SECRET_KEY = /(^|_)(api_?key|secret|password|passwd|token|access_token|auth_token|bearer|private_key|credentials?)$/i;

export function looksSecret(key: string): boolean {
  return SECRET_KEY.test(key) && !/_env$/i.test(key);
}

/** A suggestion for an unknown key `key` under `parent` (both from the config root), as a full dotted path. */
export function suggestFor(parent: readonly string[], key: string, root: z.ZodType = baseSchema): { path: string; note?: string } | undefined {
  const parentSchema = schemaAt(root, parent);
  const siblings = parentSchema ? Object.keys(shapeOf(parentSchema) ?? {}) : [];
  const join = (k: string) => [...parent, k].join('.');
  const foreign = FOREIGN_NAMES[key.toLowerCase()];
  if (foreign) {
    const leaf = foreign.path.split('.').pop()!;
    // `sft.learning_rate` means sft.lr, not grpo.lr.
    const target = siblings.includes(leaf) ? join(leaf) : foreign.path;
    return { path: target, note: foreign.note ? `${foreign.from}; ${foreign.note}` : foreign.from };
  }
  const near = closest(key, siblings);
  if (near) return { path: join(near) };
  const elsewhere = CONFIG_PATHS.filter((p) => p.split('.').pop() === key.toLowerCase() && p !== join(key));
  if (elsewhere.length) return { path: elsewhere.join('` or `') };
  // A dotted path written with the wrong section (`--set think_discount=…` at the root).
  const byLeaf = closest(
    key,
    CONFIG_PATHS.map((p) => p.split('.').pop()!),
  );
  if (byLeaf) return { path: CONFIG_PATHS.filter((p) => p.endsWith(`.${byLeaf}`) || p === byLeaf).join('` or `') };
  return undefined;
}

/** Checks that a dotted config key exists; returns a message naming the problem, or undefined when it does. */
export function checkConfigKey(key: string, root: z.ZodType = baseSchema): string | undefined {
  const segs = key.split('.');
  const known = (n: number) => (root === baseSchema ? CONFIG_PATH_SET.has(segs.slice(0, n).join('.')) : schemaAt(root, segs.slice(0, n)) !== undefined);
  if (known(segs.length)) return undefined;
  let i = 0;
  while (i < segs.length && known(i + 1)) i++;
  const parent = segs.slice(0, i);
  const parentSchema = schemaAt(root, parent);
  if (parentSchema && !shapeOf(parentSchema)) {
    return `\`${key}\` is not a config key: \`${parent.join('.')}\` has no sub-keys`;
  }
  const s = suggestFor(parent, segs[i], root);
  if (s) {
    const rest = segs.slice(i + 1);
    const full = rest.length && !s.path.includes('`') ? `${s.path}.${rest.join('.')}` : s.path;
    return `\`${key}\` is not a config key; did you mean \`${full}\`?${s.note ? ` (${s.note})` : ''}`;
  }
  const siblings = parentSchema ? Object.keys(shapeOf(parentSchema) ?? {}) : [];
  return `\`${key}\` is not a config key; keys${parent.length ? ` under \`${parent.join('.')}\`` : ''}: ${siblings.join(', ')}`;
}

/** `; did you mean \`x\`?` for a value outside an enum, or ''. */
export function enumHint(s: z.ZodType, value: string): string {
  const d = defOf(core(s)) as Def & { entries?: Record<string, string> };
  if (d.type !== 'enum' || !d.entries) return '';
  const options = Object.values(d.entries);
  const guess = options.includes(FOREIGN_VALUES[value]) ? FOREIGN_VALUES[value] : closest(value, options);
  return guess ? `; did you mean \`${guess}\`?` : '';
}
