// A server must hold the policy that sampled the step it is asked to probe: checked by scoring the step's own tokens
// there and with the policy kept here.
import { UserError } from '../core/errors';
import type { Sampler } from '../model/sampling';

/** The most mean |Δ log-prob| between the served model and the step's policy: bf16 serving of the same weights differs by about 0.01. */
export const SERVED_WEIGHTS_TOLERANCE = 0.05;

/**
 * A server must hold the policy that sampled the step, or its continuations are another policy's values labelled as
 * this step's. Where the run kept that policy, a few of the step's own tokens are scored both ways (temperature 1) and
 * the probe is refused when they differ by more than rounding; the measure goes into the record.
 */
export async function checkServedWeights(
  served: Sampler,
  local: Sampler,
  episodes: { promptIds: number[]; ids: number[] }[],
  policy: string,
  step: number,
  log: (m: string) => void,
): Promise<void> {
  const items = episodes.map((ep) => ({ prefix: ep.promptIds, ids: ep.ids.slice(0, 32) }));
  const there = await served.score(items, 0);
  const here = await local.score(items, 0);
  if (!there || !here) return;
  const diffs = items.flatMap((it, i) => it.ids.map((_, t) => Math.abs(there[i].logprobs[t] - here[i].logprobs[t])));
  const finite = diffs.filter(Number.isFinite);
  const mean = finite.reduce((a, d) => a + d, 0) / Math.max(1, finite.length);
  const max = finite.reduce((a, d) => Math.max(a, d), 0);
  served.provenance.weights_check = { tokens: finite.length, mean_abs_diff: mean, max_abs_diff: max };
  const p = served.provenance;
  if (finite.length < diffs.length || mean > SERVED_WEIGHTS_TOLERANCE)
    throw new UserError(
      `the server at ${p.url} does not hold the policy that sampled step ${step}: ${finite.length} of its tokens scored there and with ` +
        `${policy} here differ by ${mean.toFixed(3)} nats on average (largest ${max.toFixed(3)}; the same weights differ by ` +
        `rounding, under ${SERVED_WEIGHTS_TOLERANCE})` +
        (finite.length < diffs.length ? `, and ${diffs.length - finite.length} could not be compared` : ''),
      `serve that policy (credit-lens serve ${'<run>'} --step ${step}, or the trainer's checkpoint of that step) and probe again`,
    );
  log(`the server's weights match step ${step}'s policy: ${finite.length} tokens scored both ways differ by ${mean.toExponential(1)} nats on average`);
}
