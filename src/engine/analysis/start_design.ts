// Which SFT warm starts a row's runs began GRPO from decides what its verdict can be about (core/start_gate.ts):
// - each run its own start (no sft.share): the start is part of the run, and the two-way t over runs is the gate;
// - one shared start: the two-way t, and the verdict is labelled as conditional on that start;
// - K ≥ 2 shared starts, each with runs on every side: the gate over warm starts;
// - starts that are not crossed with the sides (a start with runs of one side only, or shared and own starts mixed):
//   the method and the start are confounded, so no verdict.
import { basename } from 'node:path';
import type { RunSide } from '../core/significance';
import type { StartStratum } from '../core/start_gate';

export type StartDesign = { kind: 'own' } | { kind: 'one'; start: string } | { kind: 'crossed'; starts: string[] } | { kind: 'confounded'; why: string };

/** A side of a row: its runs' warm starts (resolved folders; null: the run's own SFT), and their outcome vectors. */
export interface StartSide {
  sign: 1 | -1;
  starts: (string | null)[];
  /** how each run's start is named in the report (its sft.seed where known); the folder's name otherwise */
  labels?: (string | null)[];
  vectors: number[][];
}

/** How a warm start is named to a person: its folder's name (countdown-warm-start-<key>). */
export const startName = (dir: string) => basename(dir);

export function startDesign(sides: readonly Pick<StartSide, 'starts'>[]): StartDesign {
  const all = sides.flatMap((s) => s.starts);
  const shared = [...new Set(all.filter((s): s is string => s !== null))];
  if (!shared.length) return { kind: 'own' };
  if (shared.length < all.length && all.includes(null))
    return {
      kind: 'confounded',
      why: 'some runs began GRPO from a shared warm start and some from their own SFT, so the start and the method are not crossed; no verdict',
    };
  if (shared.length === 1) return { kind: 'one', start: shared[0] };
  const missing = shared.filter((st) => sides.some((s) => !s.starts.includes(st)));
  if (missing.length)
    return {
      kind: 'confounded',
      why: `the warm start${missing.length === 1 ? '' : 's'} ${missing.map(startName).join(', ')} ${missing.length === 1 ? 'has' : 'have'} runs on one side only, so the start and the method are confounded; no verdict (train every configuration from every start: sweep.warm_starts)`,
    };
  return { kind: 'crossed', starts: shared.sort() };
}

/** The runs of each start, by side (in the sides' order). */
export function strataOf(sides: readonly StartSide[], starts: readonly string[]): StartStratum[] {
  return starts.map((start) => ({
    start,
    sides: sides.map((s): RunSide => ({ sign: s.sign, runs: s.vectors.filter((_, k) => s.starts[k] === start) })),
  }));
}
