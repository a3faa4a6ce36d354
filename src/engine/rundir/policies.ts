// The policies a probe needs: `credit-lens probe --step N` samples from the policy that sampled step N, the
// weights after N − 1 updates. A run keeps them as `<run>/policies/step-NNNNNN.safetensors` (the model's weights only,
// float32) for step 1 and every logging.probe_every-th logged step; checkpoint N − 1, where the run still has it, is
// the same policy.
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { readSafetensors, writeSafetensors, type StTensor } from '../model/safetensors';
import { checkpointDir, checkpointModelFile, listCheckpoints, loadCheckpoint } from './checkpoint';
import { listLoggedSteps } from './rundir';
import { renameWithRetry } from '../core/files';

const POLICY_FILE = /^step-(\d+)\.safetensors$/;

export function policyFile(runDir: string, step: number): string {
  return join(runDir, 'policies', `step-${String(step).padStart(6, '0')}.safetensors`);
}

/** Whether a run keeps the policy that samples `step` (logging.probe_every; 0 keeps none). */
export function keepsPolicy(step: number, probeEvery: number): boolean {
  return probeEvery > 0 && (step === 1 || step % probeEvery === 0);
}

/** Write the weights that will sample `step` (tmp + rename, so a present file is complete). */
export function savePolicy(runDir: string, step: number, weights: Record<string, StTensor>): void {
  const path = policyFile(runDir, step);
  mkdirSync(join(runDir, 'policies'), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  writeSafetensors(tmp, weights, { metadata: { credit_lens: 'policy', samples_step: String(step) } });
  renameWithRetry(tmp, path);
}

/** Steps whose sampling policy the run still has: a kept policy, or checkpoint N − 1. */
function policySteps(runDir: string): Set<number> {
  const out = new Set<number>();
  let names: string[] = [];
  try {
    names = readdirSync(join(runDir, 'policies'));
  } catch {
    // none kept
  }
  for (const n of names) {
    const m = POLICY_FILE.exec(n);
    if (m) out.add(Number(m[1]));
  }
  for (const c of listCheckpoints(runDir)) out.add(c.step + 1);
  return out;
}

/** The logged steps a probe can sample from: a token table and the policy that sampled it. */
export function probeableSteps(runDir: string): number[] {
  const have = policySteps(runDir);
  return listLoggedSteps(runDir, 'tokens').filter((s) => have.has(s));
}

/**
 * The weights that sampled `step`, where they came from, and the file that holds them (a kept policy, or a
 * checkpoint's model.safetensors: what a probe hashes); a UserError naming the steps that can be probed otherwise.
 */
export function probePolicy(runDir: string, step: number): { weights: Record<string, StTensor>; source: string; file: string } {
  const file = policyFile(runDir, step);
  if (existsSync(file)) return { weights: readSafetensors(file).tensors, source: file, file };
  const ck = checkpointDir(runDir, step - 1);
  if (step >= 1 && existsSync(ck)) return { weights: loadCheckpoint(ck).model, source: ck, file: checkpointModelFile(ck) };
  const ok = probeableSteps(runDir);
  throw new UserError(
    `step ${step} cannot be probed: the run kept neither ${file} nor checkpoint ${step - 1} (the policy that sampled step ${step}). ` +
      (ok.length ? `Steps that can be probed: ${compactSteps(ok)}.` : 'No step of this run can be probed.'),
    'runs keep the sampling policy of step 1 and of every logging.probe_every-th step; set it before training (e.g. --set logging.probe_every=10)',
  );
}

/** 1, 25, 50, 75, 100 → "1, 25, 50, 75, 100"; long lists shortened in the middle */
function compactSteps(s: number[]): string {
  return s.length <= 12 ? s.join(', ') : `${s.slice(0, 6).join(', ')}, …, ${s.slice(-4).join(', ')} (${s.length} steps)`;
}
