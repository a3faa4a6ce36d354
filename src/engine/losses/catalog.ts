// The policy-loss variants, declared once (grpo.policy_loss). From this list come the config's enum and each variant's
// own keys under grpo, its checks, Run Sweep's loss menu, and the finite-difference test. A new variant is its file in
// this folder (its per-token term) and one entry below; it imports zod and the config's leaf builders only (no tfjs),
// so the extension reads it too.
import { z } from 'zod';
import { oneOf } from '../core/fields';
import { cispo } from './cispo';
import { gspo } from './gspo';
import { ppo } from './ppo';
import type { PolicyLossSpec } from './types';

export const LOSSES = [ppo, cispo, gspo] as const satisfies readonly PolicyLossSpec[];

export type PolicyLoss = (typeof LOSSES)[number]['name'];
export const LOSS_NAMES = LOSSES.map((l) => l.name) as unknown as readonly [PolicyLoss, ...PolicyLoss[]];

export function lossSpec(name: string): PolicyLossSpec | undefined {
  return (LOSSES as readonly PolicyLossSpec[]).find((l) => l.name === name);
}

type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;
type OptionsOf<E> = E extends { options: infer O } ? O : never;

/** grpo.policy_loss and every variant's own keys, for the grpo section's shape. */
export function lossShape() {
  const policyLoss = oneOf(LOSS_NAMES, `The policy loss (veRL loss_mode). ${(LOSSES as readonly PolicyLossSpec[]).map((l) => l.summary).join('; ')}.`).default(
    'ppo',
  );
  const shape: Record<string, z.ZodType> = { policy_loss: policyLoss };
  for (const l of LOSSES as readonly PolicyLossSpec[]) Object.assign(shape, l.options ?? {});
  return shape as { policy_loss: typeof policyLoss } & UnionToIntersection<OptionsOf<(typeof LOSSES)[number]>>;
}

/** A variant's own options as set in a grpo section, by key. */
export function lossOptions(spec: PolicyLossSpec, grpo: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(spec.options ?? {}).map((k) => [k, grpo[k]]));
}
