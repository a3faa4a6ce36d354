// A probed step's record, `<run>/probes/step-NNNNNN.json`: the probe's settings, its finished episodes and
// the credit accuracy. Plain files only, so the analysis and the extension read it without loading a model.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AccuracyReport, ProbeAccuracy } from '../../protocol/analysis';
import { UserError } from '../core/errors';
import { sha256File } from '../core/files';
import type { SamplerProvenance } from '../model/sampling';

/** What a probe's settings are: a resumed probe must have the same ones. */
export interface ProbeSettings {
  rollouts: number;
  positions: string;
  temperature: number;
  top_p: number;
  seed: number;
}

export interface ProbeRecord extends ProbeSettings {
  format: 'credit-lens-probe';
  step: number;
  policy: string;
  /**
   * sha256 of the policy file and of the step's token table when probed (absent in records of older engines): a table
   * rewritten since (a restart, a resume of another trajectory) is not the one probed, and its δ is neither joined onto
   * it nor kept by the next probe.
   */
  policy_sha256?: string | null;
  tokens_sha256?: string | null;
  /**
   * Where the continuations were sampled: in this process, or on an SGLang / vLLM server (its URL, the model and weight
   * version it reported, and how far its seeding reproduces a draw). Absent in records of older engines: local.
   */
  sampler?: SamplerProvenance;
  /** finished episodes, ascending */
  episodes: number[];
  /** episodes asked for and not finished (a stopped probe) */
  pending: number[];
  continuations: number;
  seconds: number;
  /** the run's own strategy, whose Â are the token table's effective advantages */
  run_strategy: string;
  /** over the finished episodes; null before any */
  /** per strategy, its credit accuracy over the finished episodes (`accuracy: {strategy: {…}}`); null before any */
  accuracy: AccuracyReport['accuracy'] | null;
  /** the decisive share uniform credit would give on the same episodes */
  uniform_share: AccuracyReport['uniform_share'] | null;
  /** the δ² uniform credit's weight lands on (the lift's zero); absent in older records */
  uniform_delta2?: AccuracyReport['uniform_delta2'];
  /** the episodes and their prompts the accuracy is over: the finished episodes whose advantage A ≠ 0, one set for every row */
  accuracy_episodes: number;
  accuracy_prompts: number;
  /** the trivial baselines scored on the same set; the split-half reliability; what limits the report (absent in older records) */
  baselines?: AccuracyReport['baselines'];
  reliability?: AccuracyReport['reliability'];
  warnings?: string[];
  cancellation?: AccuracyReport['cancellation'];
  /** the lift's ceiling, an oracle credit's lift (absent in older records, and in probes without the halves' variances) */
  ceiling?: AccuracyReport['ceiling'];
}

/** What `credit-lens probe --json` prints: the record, where the run and its table are, and whether every episode asked for is done. */
export interface ProbeReport extends ProbeRecord {
  run_dir: string;
  table: string;
  complete: boolean;
}

/** `<run>/probes/step-NNNNNN.arrow`, in the layout of the run's other per-step files. */
export function probeTableFile(runDir: string, step: number): string {
  return join(runDir, 'probes', `step-${String(step).padStart(6, '0')}.arrow`);
}

export function probeRecordFile(runDir: string, step: number): string {
  return probeTableFile(runDir, step).replace(/\.arrow$/, '.json');
}

/** The record of a probed step, or null when the step has none. */
export function readProbeRecord(runDir: string, step: number): ProbeRecord | null {
  const path = probeRecordFile(runDir, step);
  if (!existsSync(path)) return null;
  try {
    const r = JSON.parse(readFileSync(path, 'utf8')) as ProbeRecord;
    if (r.format !== 'credit-lens-probe' || !Array.isArray(r.episodes)) throw new Error('not a probe record');
    return r;
  } catch (e) {
    throw new UserError(`${path} is not a readable probe record (${(e as Error).message}); probe the step again with --replace`);
  }
}

/** A record's fields for its accuracy report (its episode set's counts under the record's names). */
export function accuracyFields(
  acc: AccuracyReport,
): Pick<
  ProbeRecord,
  | 'accuracy'
  | 'uniform_share'
  | 'uniform_delta2'
  | 'accuracy_episodes'
  | 'accuracy_prompts'
  | 'baselines'
  | 'reliability'
  | 'warnings'
  | 'cancellation'
  | 'ceiling'
> {
  return {
    accuracy: acc.accuracy,
    uniform_share: acc.uniform_share,
    uniform_delta2: acc.uniform_delta2,
    accuracy_episodes: acc.episodes,
    accuracy_prompts: acc.prompts,
    baselines: acc.baselines ?? {},
    reliability: acc.reliability ?? null,
    warnings: acc.warnings ?? [],
    cancellation: acc.cancellation ?? null,
    ...(acc.ceiling ? { ceiling: acc.ceiling } : {}),
  };
}

/** The accuracy report a record holds (an older engine's record has no baselines, reliability or warnings); null before any. */
export function recordAccuracy(r: ProbeRecord): AccuracyReport | null {
  if (!r.accuracy || !r.uniform_share) return null;
  return {
    accuracy: r.accuracy,
    uniform_share: r.uniform_share,
    uniform_delta2: r.uniform_delta2,
    episodes: r.accuracy_episodes,
    prompts: r.accuracy_prompts,
    baselines: r.baselines ?? {},
    reliability: r.reliability ?? null,
    warnings: r.warnings ?? [],
    cancellation: r.cancellation ?? null,
    ...(r.ceiling ? { ceiling: r.ceiling } : {}),
  };
}

/** The steps that have a probe record, ascending (none where the run has no probes/ folder). */
export function probedSteps(runDir: string): number[] {
  let names: string[] = [];
  try {
    names = readdirSync(join(runDir, 'probes'));
  } catch {
    return [];
  }
  return names
    .map((n) => /^step-(\d+)\.json$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/** Every probed step's accuracy, ascending by step (for `analyze --probe`); steps without a finished episode are left out. */
export function probeAccuracies(runDir: string): ProbeAccuracy[] {
  const out: ProbeAccuracy[] = [];
  for (const step of probedSteps(runDir)) {
    const r = readProbeRecord(runDir, step);
    // a probe of a table the step no longer has (the run restarted or resumed since) is not this run's
    if (r && !recordFitsTokens(r, join(runDir, 'tokens', `step-${String(r.step).padStart(6, '0')}.arrow`))) continue;
    const acc = r && recordAccuracy(r);
    if (r && acc) out.push({ step: r.step, rollouts: r.rollouts, positions: r.positions, run_strategy: r.run_strategy, ...acc });
  }
  return out.sort((a, b) => a.step - b.step);
}

/**
 * Whether the step's probe was made on the token table now at `tokenFile`: true where its record says so, or where the
 * record predates the hash (an older engine's probe is joined as before); false where the table changed since.
 */
export function probeFitsTokens(runDir: string, step: number, tokenFile: string): boolean {
  let rec: ProbeRecord | null;
  try {
    rec = readProbeRecord(runDir, step);
  } catch {
    return false;
  }
  return recordFitsTokens(rec, tokenFile);
}

/** The same for a record already read. */
function recordFitsTokens(rec: ProbeRecord | null, tokenFile: string): boolean {
  if (!rec?.tokens_sha256) return true;
  // a kept run (results keep) holds the record and not the token tables, which are megabytes: the record is the data
  if (!existsSync(tokenFile)) return true;
  return sha256File(tokenFile) === rec.tokens_sha256;
}
