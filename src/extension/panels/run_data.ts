// What the dashboard and the comparison need of a run directory (design.md#run-directory): run.json's name and status,
// every metrics.jsonl row, and the SFT length from the run's resolved config.yaml. No vscode here, so the
// unit tests read real run directories with it.
import { basename } from 'node:path';
import type { MetricsRow } from '../../protocol/index';
import type { MetricsRunData } from '../../protocol/metrics_view';
import { readMetrics, readRunInfo } from '../../engine/rundir/rundir';
import { probedSteps, readProbeRecord, type ProbeRecord } from '../../engine/rundir/probe_record';
import { readRunConfig } from '../../engine/rundir/run_config';

/**
 * `sft.steps` of the run's config.yaml, which the engine writes before the first step, so a live run's SFT
 * points land where they belong from the first one. A run without a readable config falls back to its
 * highest logged SFT step.
 */
export function sftStepsOf(runDir: string, rows: readonly MetricsRow[], config = readRunConfig(runDir)): number {
  const steps = config?.sftSteps;
  if (typeof steps === 'number') return steps;
  return rows.reduce((m, r) => (r.phase === 'sft' ? Math.max(m, r.step) : m), 0);
}

/** `grpo.kl_beta` of the run's config.yaml (null when unreadable): 0 means the KL is never computed. */
export function klBetaOf(runDir: string, config = readRunConfig(runDir)): number | null {
  return config?.klBeta ?? null;
}

/**
 * One row per probed step (`<run>/probes/step-N.json`, written by `credit-lens probe`): the run's own strategy's credit
 * accuracy: its lift (the headline, unbiased) and the best trivial baseline's, and its rank score spearman_unbiased
 * (attenuated by the noise) beside the best baseline's, the noise placebo's and the split-half reliability of δ̂. The
 * dashboard charts them at their steps; a record without an accuracy (a probe stopped before scoring) or not readable is
 * skipped.
 */
export function probeRows(runDir: string): MetricsRow[] {
  const rows: MetricsRow[] = [];
  for (const step of probedSteps(runDir)) {
    let rec: ProbeRecord | null;
    try {
      rec = readProbeRecord(runDir, step);
    } catch {
      continue;
    }
    const own = rec?.accuracy?.[rec.run_strategy];
    // the lift (the headline) or the rank: a step where neither is defined has nothing to chart
    if (!rec || !own || (typeof own.lift?.mean !== 'number' && typeof own.spearman_unbiased?.mean !== 'number')) continue;
    const row: MetricsRow = { step, phase: 'grpo' };
    if (typeof own.spearman_unbiased?.mean === 'number') row['mc/spearman_unbiased'] = own.spearman_unbiased.mean;
    const placebo = rec.accuracy![rec.run_strategy]?.placebo?.mean;
    if (typeof placebo === 'number') row['mc/placebo'] = placebo;
    // the best trivial baseline by each measure: the largest of their means
    const best = (key: 'spearman_unbiased' | 'lift') => {
      const means = Object.values(rec!.baselines ?? {})
        .map((b) => b?.[key]?.mean)
        .filter((v): v is number => typeof v === 'number');
      return means.length ? Math.max(...means) : undefined;
    };
    const bestRank = best('spearman_unbiased');
    if (bestRank !== undefined) row['mc/best_baseline'] = bestRank;
    if (typeof rec.reliability?.full === 'number') row['mc/reliability'] = rec.reliability.full;
    const lift = rec.accuracy![rec.run_strategy]?.lift?.mean;
    if (typeof lift === 'number') row['mc/lift'] = lift;
    const bestLift = best('lift');
    if (bestLift !== undefined) row['mc/lift_best_baseline'] = bestLift;
    rows.push(row);
  }
  return rows;
}

export function loadRunData(runDir: string, status?: string): MetricsRunData {
  const info = readRunInfo(runDir);
  const rows = [...readMetrics(runDir), ...probeRows(runDir)];
  // config.yaml read once for both of its fields
  const config = readRunConfig(runDir);
  return {
    runDir,
    id: basename(runDir),
    name: info?.name ?? basename(runDir),
    strategy: info?.strategy ?? null,
    status: status ?? info?.status ?? 'unknown',
    sftSteps: sftStepsOf(runDir, rows, config),
    klBeta: klBetaOf(runDir, config),
    rows,
  };
}

/** A file name from a chart title or run id: letters, digits, `.`, `_`, `-`. */
export function safeFileName(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'chart';
}

/** A `data:image/png;base64,…` URL's bytes; throws on anything else, so only PNGs get written. */
export function pngBytes(dataUrl: string): Buffer {
  const m = /^data:image\/png;base64,([A-Za-z0-9+/=]+)$/.exec(dataUrl);
  if (!m) throw new Error('the webview sent no PNG data URL');
  const buf = Buffer.from(m[1], 'base64');
  // Every PNG starts with the same 8-byte signature (PNG spec §5.2).
  if (buf.length < 8 || buf.readUInt32BE(0) !== 0x89504e47 || buf.readUInt32BE(4) !== 0x0d0a1a0a) throw new Error('the data URL does not hold a PNG');
  return buf;
}
