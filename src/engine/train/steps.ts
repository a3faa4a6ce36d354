// The steps of a run besides GRPO's (grpo_step.ts): an SFT step on demonstrations and the greedy eval, and what the
// updates share (the trainable parameters, the gradients under their names).
import * as tf from '@tensorflow/tfjs';
import type { MetricsRow } from '../../protocol';
import type { EvalRows, EvalSplit } from '../rundir/eval_table';
import type { CreditHead } from '../credit/types';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { childSeed, makeRng, randInt, type Rng } from '../core/rng';
import { completionLogprobs, policyBatch, rollout } from '../session/rollout';
import type { Session } from '../session/session';
import type { Example } from '../core/types';

/**
 * Greedy eval (deterministic) on the test split, or on the validation split: the success rate, the mean reward, and
 * one row per instance (design.md#statistics), so that two runs can be compared on the same instances. `stop` ends it early
 * (SamplingStopped): at the seeds' model size an eval is minutes of decoding.
 */
export async function evaluate(
  s: Session,
  examples: Example[] = s.task.eval,
  split: EvalSplit = 'test',
  stop?: () => boolean,
): Promise<{ success: number; reward: number; rows: EvalRows }> {
  const rows: EvalRows = { instance_id: [], split: [], success: [], reward: new Float32Array(examples.length), completion: [] };
  if (examples.length === 0) return { success: 0, reward: 0, rows };
  const eps = await rollout(s.model, s.tokenizer, s.task, examples, {
    maxNewTokens: s.cfg.grpo.max_new_tokens,
    temperature: 1,
    topP: 1,
    greedy: true,
    rng: () => 0,
    chunk: 128,
    stop,
    sampler: s.rolloutSampler,
  });
  eps.forEach((e, i) => {
    rows.instance_id.push(`${s.cfg.task.name}:${e.example.id}`);
    rows.split.push(split);
    rows.success.push(e.success);
    rows.reward[i] = e.reward.total;
    rows.completion.push(e.text);
  });
  return {
    success: eps.filter((e) => e.success).length / eps.length,
    reward: eps.reduce((a, e) => a + e.reward.total, 0) / eps.length,
    rows,
  };
}

export function pick(rng: Rng, xs: Example[], n: number): Example[] {
  return Array.from({ length: n }, () => xs[randInt(rng, 0, xs.length - 1)]);
}

/** Token-mean cross-entropy on demonstration completions: the SFT warm start. */
export async function sftStep(s: Session, opt: Adam, step: number): Promise<MetricsRow> {
  const t0 = performance.now();
  const rng = makeRng(childSeed(s.cfg.seed, `sft-${step}`));
  const exs = pick(rng, s.task.train, s.cfg.sft.batch_size);
  const prompts = exs.map((ex) => s.tokenizer.encodePrompt(ex.prompt));
  const comps = exs.map((ex) => [...s.tokenizer.encode(s.task.demonstration(ex, rng)), s.tokenizer.eosId]);
  const pb = policyBatch(prompts, comps, s.tokenizer.padId);
  const maskT = tf.tensor2d(pb.mask.flat(), [pb.mask.length, pb.completionLen]);
  const nTok = pb.mask.flat().reduce((a, b) => a + b, 0);
  const { value, grads } = tf.variableGrads(() => {
    const { logp } = completionLogprobs(s.model, pb, 1);
    return logp.mul(maskT).sum().neg().div(nTok) as tf.Scalar;
  }, [...s.model.trainable.values()]);
  const loss = (await value.data())[0];
  value.dispose();
  maskT.dispose();
  pb.dispose();
  const named = renameGrads(s.model.trainable, grads);
  const { norm, grads: clipped } = await clipByGlobalNorm(named, s.cfg.grpo.grad_clip);
  let skipped = 0;
  if (Number.isFinite(loss) && Number.isFinite(norm)) opt.apply(s.model.trainable, clipped);
  else skipped = 1;
  tf.dispose(Object.values(clipped));
  const dt = (performance.now() - t0) / 1000;
  return { step, phase: 'sft', loss, grad_norm: norm, step_time_s: dt, tokens_per_s: nTok / dt, ...(skipped ? { skipped } : {}) };
}

/** The policy's parameters plus a credit head's, under the names the optimizer and checkpoints use. */
export function trainables(s: Session, head: CreditHead | null): Map<string, tf.Variable> {
  return head ? new Map([...s.model.trainable, ...head.params]) : s.model.trainable;
}

export function renameGrads(params: Map<string, tf.Variable>, grads: tf.NamedTensorMap): Record<string, tf.Tensor> {
  // variableGrads keys by the variable's tf name; map back to the HF parameter names the optimizer uses.
  const byVar = new Map<string, string>();
  for (const [name, v] of params) byVar.set(v.name, name);
  const out: Record<string, tf.Tensor> = {};
  for (const [k, g] of Object.entries(grads)) out[byVar.get(k) ?? k] = g;
  return out;
}
