// How much of a probed step's δ̂ is signal: the split-half reliability and the engine's own warning from the probe's
// record, for the key, the hover and the toast. A probed number never shows without its noise.
import { statSync } from 'node:fs';
import { probeRecordFile, readProbeRecord } from '../../engine/rundir/probe_record';

export interface ProbeReliability {
  /** Spearman–Brown's reliability for all M, or null where the probe kept no halves */
  full: number | null;
  /** the two halves' split-half correlation, what `probe --plan` extrapolates from */
  half: number | null;
  /** the rollouts per position */
  rollouts: number;
  /** the engine's words where the reliability is low ("most of δ̂ is noise at this M"), or null */
  warning: string | null;
}

const cache = new Map<string, { mtimeMs: number; value: ProbeReliability | null }>();

/** The step's probe reliability, read from its record (cached until the record changes); null where there is none. */
export function probeReliability(runDir: string, step: number): ProbeReliability | null {
  const file = probeRecordFile(runDir, step);
  const mtimeMs = statSync(file, { throwIfNoEntry: false })?.mtimeMs;
  if (mtimeMs === undefined) return null;
  const hit = cache.get(file);
  if (hit && hit.mtimeMs === mtimeMs) return hit.value;
  let value: ProbeReliability | null = null;
  try {
    const r = readProbeRecord(runDir, step);
    if (r) {
      const said = (r.warnings ?? []).find((w) => /split-half reliability/.test(w));
      // "the probe's split-half reliability is 0.11: most of δ̂ is noise at this M, and no strategy can …": its clause
      const warning = said ? (said.split(': ')[1]?.split(', and ')[0] ?? said) : null;
      value = { full: r.reliability?.full ?? null, half: r.reliability?.half ?? null, rollouts: r.rollouts, warning };
    }
  } catch {
    value = null; // a record being rewritten: the next paint reads it
  }
  cache.set(file, { mtimeMs, value });
  return value;
}
