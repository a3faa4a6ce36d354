// The native token log-prob kernel (wasm-blas): values and gradients against a float64 reference worked out here, and
// the whole model's log-probs and parameter gradients through completionLogprobs against the cpu backend's ops.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/engine/model/backend';
import { hasTokenLogprobKernel, tokenLogprob, TOKEN_LOGPROB, TOKEN_LOGPROB_GRAD } from '../../../src/engine/model/kernels/wasm_kernels';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { completionLogprobs, policyBatch } from '../../../src/engine/train/rollout';
import { makeRng, randNormal } from '../../../src/engine/core/rng';

function relErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  assert.equal(got.length, want.length);
  let d = 0, w = 0;
  for (let i = 0; i < want.length; i++) { d += (got[i] - want[i]) ** 2; w += want[i] ** 2; }
  return Math.sqrt(d / w);
}

test('token log-prob kernel: values and gradient against float64, rows of any scale, a vocabulary off the vector width', async () => {
  await initBackend('wasm-blas');
  assert.ok(hasTokenLogprobKernel());
  const N = 13, V = 37;
  const rng = makeRng(4);
  // Row scales from 1e-3 to 60 (a confident row whose other tokens sit ~100 nats below), one row all equal.
  const z = Float32Array.from({ length: N * V }, (_, i) => Math.floor(i / V) === 5 ? 0.25 : randNormal(rng) * [1e-3, 1, 8, 60][Math.floor(i / V) % 4]);
  const t = Int32Array.from({ length: N }, (_, n) => (n * 11) % V);
  const dy = Float32Array.from({ length: N }, () => randNormal(rng));
  // float64 reference: logp = z_t − log Σ e^z; d logp / dz_v = δ(v, t) − softmax_v, times dy.
  const wantLp: number[] = [], wantGrad: number[] = [];
  for (let n = 0; n < N; n++) {
    const row = Array.from(z.subarray(n * V, (n + 1) * V));
    const mx = Math.max(...row);
    const lse = mx + Math.log(row.reduce((a, x) => a + Math.exp(x - mx), 0));
    wantLp.push(row[t[n]] - lse);
    for (let v = 0; v < V; v++) wantGrad.push(dy[n] * ((v === t[n] ? 1 : 0) - Math.exp(row[v] - lse)));
  }
  const zT = tf.tensor2d(z, [N, V]), tT = tf.tensor1d(t, 'int32'), dyT = tf.tensor1d(dy);
  const prof = await tf.profile(() => {
    const { value, grads } = tf.valueAndGrads((x: tf.Tensor) => tf.sum(tf.mul(tokenLogprob(x as tf.Tensor2D, tT), dyT)))([zT]);
    const lp = tf.tidy(() => tokenLogprob(zT, tT));
    const got = { lp: Array.from(lp.dataSync()), grad: Array.from(grads[0].dataSync()) };
    tf.dispose([value, lp, ...grads]);
    assert.ok(relErr(got.lp, wantLp) < 1e-6, `log-probs: ${relErr(got.lp, wantLp)}`);
    assert.ok(relErr(got.grad, wantGrad) < 1e-6, `gradient: ${relErr(got.grad, wantGrad)}`);
  });
  const names = prof.kernels.map((k) => k.name);
  assert.ok(names.includes(TOKEN_LOGPROB) && names.includes(TOKEN_LOGPROB_GRAD), 'the native kernels ran');
  const bad = tf.tensor1d(Int32Array.from({ length: N }, (_, n) => (n === 7 ? V : 0)), 'int32');
  assert.throws(() => tokenLogprob(zT, bad), /target 37 at row 7 is outside the vocabulary \[0, 37\)/);
  tf.dispose([zT, tT, dyT, bad]);
});

test('plain wasm keeps the ops (its bits stay those of earlier runs); wasm-blas runs the kernel', async () => {
  await initBackend('wasm');
  assert.equal(hasTokenLogprobKernel(), false);
  await initBackend('wasm-blas');
  assert.equal(hasTokenLogprobKernel(), true);
});

const CFG: ModelConfig = { arch: 'qwen2', vocabSize: 40, dModel: 32, nLayers: 2, nHeads: 4, nKvHeads: 2, dFf: 64, maxSeqLen: 16,
  ropeTheta: 10000, rmsEps: 1e-6, tieEmbeddings: true, qkvBias: true };

test('completionLogprobs on wasm-blas (native log-prob) gives the cpu backend\'s log-probs and parameter gradients (1e-5 relative)', async () => {
  const rng = makeRng(21);
  const prompts = [[1, 5, 9], [2, 7], [3, 3, 3, 4]];
  const comps = [[11, 12, 13, 14, 2], [20, 21], [30, 31, 32, 33, 34, 35]];
  const weights = comps.map((c) => c.map(() => rng() * 2 - 1));
  const run = async (backend: 'cpu' | 'wasm-blas', temperature: number) => {
    await initBackend(backend);
    const model = Transformer.init(CFG, 3);
    const pb = policyBatch(prompts, comps, 0);
    const w = tf.tensor2d(pb.mask.map((row, b) => row.map((m, j) => m * (weights[b][j] ?? 0))));
    let lp: number[] = [];
    const { grads } = tf.variableGrads(() => {
      const { logp } = completionLogprobs(model, pb, temperature);
      lp = Array.from(logp.dataSync());
      return logp.mul(w).sum() as tf.Scalar;
    }, [...model.params.values()]);
    const byVar = new Map([...model.params].map(([n, v]) => [v.name, n]));
    const g = new Map(Object.entries(grads).map(([k, t]) => [byVar.get(k)!, Array.from(t.dataSync())]));
    tf.dispose([...Object.values(grads), w]);
    pb.dispose();
    model.dispose();
    return { lp, g };
  };
  for (const temperature of [1, 0.7]) {
    const cpu = await run('cpu', temperature);
    const blas = await run('wasm-blas', temperature);
    assert.ok(relErr(blas.lp, cpu.lp) < 1e-5, `log-probs at T=${temperature}: ${relErr(blas.lp, cpu.lp)}`);
    for (const [name, c] of cpu.g) {
      assert.ok(c.some((x) => x !== 0), `${name}: a zero gradient would make the comparison vacuous`);
      const e = relErr(blas.g.get(name)!, c);
      assert.ok(e < 1e-5, `${name} at T=${temperature}: ${e}`);
    }
  }
});
