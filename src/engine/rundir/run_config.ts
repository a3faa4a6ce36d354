// A run's resolved config.yaml as the readers of a finished or running run see it: the analysis, the comparison, Browse
// Rollouts and the dashboard. Read leniently and by field, because a run folder may come from an older engine, another
// machine or an import, and a view shows what it can rather than refusing the run. Training, resume and eval load the
// file strictly through config/ (loadConfig), which is above this folder.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { CONFIG_YAML } from './rundir';

/** The fields the readers use; each null where the file lacks it or holds something else. */
export interface RunConfigView {
  seed: number | null;
  /** the credit section, as written (strategy and parameters) */
  credit: Record<string, unknown> | null;
  /** the task section, as written (what the instances are drawn from) */
  task: Record<string, unknown> | null;
  /** sft.steps: where GRPO's step 1 sits after the warm start */
  sftSteps: number | null;
  /** sft.seed: which SFT warm start a run of `sweep.warm_starts` began from (its folder is named by a hash) */
  sftSeed: number | null;
  /** grpo.kl_beta: 0 means the KL is never computed */
  klBeta: number | null;
  /** grpo.max_new_tokens: what "truncated" is measured against */
  maxNewTokens: number | null;
  /** model.init_checkpoint: the weights the run started from instead of its own initialisation */
  initCheckpoint: string | null;
}

const section = (v: unknown): Record<string, unknown> | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null);
const finite = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const count = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null);

/** The run's config.yaml, or null when it is missing or not YAML. */
export function readRunConfig(runDir: string): RunConfigView | null {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(join(runDir, CONFIG_YAML), 'utf8'));
  } catch {
    return null;
  }
  const root = section(doc);
  if (!root) return null;
  const grpo = section(root.grpo);
  return {
    seed: finite(root.seed),
    credit: section(root.credit),
    task: section(root.task),
    sftSteps: count(section(root.sft)?.steps),
    sftSeed: count(section(root.sft)?.seed),
    klBeta: finite(grpo?.kl_beta),
    maxNewTokens: finite(grpo?.max_new_tokens),
    initCheckpoint: typeof section(root.model)?.init_checkpoint === 'string' ? (section(root.model)!.init_checkpoint as string) : null,
  };
}
