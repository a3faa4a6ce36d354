// The update the bench times (`trainStepRunner`, and the 0.5B LoRA step in bench/size.ts): one GRPO-like step exactly as
// grpo_step.ts runs it for one micro-batch (forward, log-probs, loss and its gradient from grpo.ts, backward, clip,
// Adam) on the parameters given: every weight, or LoRA's adapters.
import * as tf from '@tensorflow/tfjs';
import { readsSync } from '../model/backend';
import type { Transformer } from '../model/model';
import { clipByGlobalNorm, type Adam } from '../model/optim';
import { policyLossAndGrad } from '../train/grpo';
import { completionLogprobs, type PolicyBatch } from '../session/rollout';
import { renameGrads } from '../train/steps';

/** One update of `params` on the batch `pb` with per-row advantages `adv`. */
export async function benchUpdate(model: Transformer, params: Map<string, tf.Variable>, pb: PolicyBatch, adv: number[], opt: Adam): Promise<void> {
  // a backend without synchronous reads (webgpu) reads the log-probs ahead of the taped pass, as grpo_step does
  let ahead: number[][] | null = null;
  if (!readsSync()) {
    const first = tf.tidy(() => completionLogprobs(model, pb, 1).logp);
    ahead = (await first.array()) as number[][];
    first.dispose();
  }
  const { grads, value } = tf.variableGrads(() => {
    const { logp } = completionLogprobs(model, pb, 1);
    const lp = ahead ?? logp.arraySync();
    const r = policyLossAndGrad(
      { logprobs: lp, oldLogprobs: lp, advantages: pb.mask.map((row, b) => row.map((m) => m * adv[b])), mask: pb.mask },
      { clipEps: 0.2, clipEpsHigh: 0.2, klBeta: 0, lossAgg: 'token_mean', maxNewTokens: pb.completionLen },
    );
    return logp.mul(tf.tensor2d(r.grad)).sum() as tf.Scalar;
  }, [...params.values()]);
  value.dispose();
  const { grads: clipped } = await clipByGlobalNorm(renameGrads(params, grads), 1.0);
  opt.apply(params, clipped);
  tf.dispose(Object.values(clipped));
}
