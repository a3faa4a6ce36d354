// The native kernels of wasm-blas (token log-prob, RMSNorm, attention, attention heads with RoPE,
// SwiGLU): values and gradients against float64
// references worked out here, and the whole model's log-probs and parameter gradients through completionLogprobs against
// the cpu backend's ops (backend.test.ts compares the whole model's gradients too).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { opsName } from '../../../src/engine/model/ops';
import { initBackend } from '../../../src/engine/model/backend';
import { blasThreads, nativeCall } from '../../../src/engine/model/kernels/blas';
import {
  attention,
  ATTENTION,
  ATTENTION_GRAD,
  QKV_HEADS,
  QKV_HEADS_GRAD,
  qkvHeads,
  RMS_NORM_GRAD,
  RMS_NORM_TRAIN,
  rmsNormNative,
  swiglu,
  swigluGrad,
  SWIGLU_NATIVE,
  SWIGLU_NATIVE_GRAD,
  tokenLogprob,
  TOKEN_LOGPROB,
  TOKEN_LOGPROB_GRAD,
} from '../../../src/engine/model/kernels/wasm_kernels';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { completionLogprobs, policyBatch } from '../../../src/engine/session/rollout';
import { makeRng, randNormal } from '../../../src/engine/core/rng';
import { relErr } from '../fixtures';

/** Runs f under tf.profile and checks that each of the named kernels ran in it. */
async function ranKernels(kernels: string[], f: () => void): Promise<void> {
  const names = (await tf.profile(f)).kernels.map((k) => k.name);
  assert.ok(
    kernels.every((k) => names.includes(k)),
    'the native kernels ran',
  );
}

test('token log-prob kernel: values and gradient against float64, rows of any scale, a vocabulary off the vector width', async () => {
  await initBackend('wasm-blas');
  assert.equal(opsName(), 'wasm-blas');
  // the second size is past SPLIT_MIN_FLOATS in native/common.h: its rows are split over two threads
  for (const [N, V] of [
    [13, 37],
    [7100, 37],
  ]) {
    const rng = makeRng(4);
    // Row scales from 1e-3 to 60 (a confident row whose other tokens sit ~100 nats below), one row all equal.
    const z = Float32Array.from({ length: N * V }, (_, i) => (Math.floor(i / V) === 5 ? 0.25 : randNormal(rng) * [1e-3, 1, 8, 60][Math.floor(i / V) % 4]));
    const t = Int32Array.from({ length: N }, (_, n) => (n * 11) % V);
    const dy = Float32Array.from({ length: N }, () => randNormal(rng));
    // float64 reference: logp = z_t − log Σ e^z; d logp / dz_v = δ(v, t) − softmax_v, times dy.
    const wantLp: number[] = [],
      wantGrad: number[] = [];
    for (let n = 0; n < N; n++) {
      const row = Array.from(z.subarray(n * V, (n + 1) * V));
      const mx = Math.max(...row);
      const lse = mx + Math.log(row.reduce((a, x) => a + Math.exp(x - mx), 0));
      wantLp.push(row[t[n]] - lse);
      for (let v = 0; v < V; v++) wantGrad.push(dy[n] * ((v === t[n] ? 1 : 0) - Math.exp(row[v] - lse)));
    }
    const zT = tf.tensor2d(z, [N, V]),
      tT = tf.tensor1d(t, 'int32'),
      dyT = tf.tensor1d(dy);
    await ranKernels([TOKEN_LOGPROB, TOKEN_LOGPROB_GRAD], () => {
      const { value, grads } = tf.valueAndGrads((x: tf.Tensor) => tf.sum(tf.mul(tokenLogprob(x as tf.Tensor2D, tT), dyT)))([zT]);
      const lp = tf.tidy(() => tokenLogprob(zT, tT));
      const got = { lp: Array.from(lp.dataSync()), grad: Array.from(grads[0].dataSync()) };
      tf.dispose([value, lp, ...grads]);
      assert.ok(relErr(got.lp, wantLp) < 1e-6, `log-probs: ${relErr(got.lp, wantLp)}`);
      assert.ok(relErr(got.grad, wantGrad) < 1e-6, `gradient: ${relErr(got.grad, wantGrad)}`);
    });
    const bad = tf.tensor1d(
      Int32Array.from({ length: N }, (_, n) => (n === 7 ? V : 0)),
      'int32',
    );
    assert.throws(() => tokenLogprob(zT, bad), /target 37 at row 7 is outside the vocabulary \[0, 37\)/);
    // The backward kernel checks too: run on its own it wrote outside its row.
    const lseT = tf.zeros([N]);
    assert.throws(
      () => tf.engine().runKernel(TOKEN_LOGPROB_GRAD, { logits: zT, targets: bad, lse: lseT, dy: dyT }),
      /target 37 at row 7 is outside the vocabulary \[0, 37\)/,
    );
    lseT.dispose();
    tf.dispose([zT, tT, dyT, bad]);
  }
});

test('the addon itself refuses a log-prob target outside the vocabulary, forward and backward (a RangeError, no write)', async () => {
  await initBackend('wasm-blas');
  // a heap of our own: logits [2, 5] at 0, targets at 10, lse at 12, dy at 14, out [2, 5] at 16
  const heap = new Float32Array(32);
  const be = { wasm: { HEAPU8: new Uint8Array(heap.buffer) } } as unknown as Parameters<typeof nativeCall>[0];
  new Int32Array(heap.buffer, 10 * 4, 2).set([1, 5]);
  heap.fill(7, 16, 26);
  assert.throws(
    () => nativeCall(be, 'logprobGrad', { logits: 0, targets: 10, lse: 12, dy: 14, out: 16, N: 2, V: 5 }),
    /target 5 at row 1 is outside the vocabulary \[0, 5\)/,
  );
  assert.deepEqual(Array.from(heap.subarray(16, 26)), Array(10).fill(7), 'nothing written');
  new Int32Array(heap.buffer, 10 * 4, 2).set([-1, 0]);
  assert.throws(() => nativeCall(be, 'logprob', { logits: 0, targets: 10, N: 2, V: 5, logp: 12, lse: 14 }), /target -1 at row 0 is outside/);
});

test('plain wasm keeps the ops (its bits stay those of earlier runs); wasm-blas runs the kernel', async () => {
  await initBackend('wasm');
  assert.equal(opsName(), 'wasm');
  await initBackend('wasm-blas');
  assert.equal(opsName(), 'wasm-blas');
});

const CFG: ModelConfig = {
  arch: 'qwen2',
  vocabSize: 40,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dFf: 64,
  maxSeqLen: 16,
  ropeTheta: 10000,
  rmsEps: 1e-6,
  tieEmbeddings: true,
  qkvBias: true,
};

test("completionLogprobs on wasm-blas (native log-prob) gives the cpu backend's log-probs and parameter gradients (1e-5 relative)", async () => {
  const rng = makeRng(21);
  const prompts = [
    [1, 5, 9],
    [2, 7],
    [3, 3, 3, 4],
  ];
  const comps = [
    [11, 12, 13, 14, 2],
    [20, 21],
    [30, 31, 32, 33, 34, 35],
  ];
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
      assert.ok(
        c.some((x) => x !== 0),
        `${name}: a zero gradient would make the comparison vacuous`,
      );
      const e = relErr(blas.g.get(name)!, c);
      assert.ok(e < 1e-5, `${name} at T=${temperature}: ${e}`);
    }
  }
});

test('native RMSNorm: values and gradients (x and w) against float64, rows of any scale', async () => {
  await initBackend('wasm-blas');
  const eps = 1e-6;
  // the second size is past SPLIT_MIN_FLOATS in native/common.h: its rows are split over two threads
  for (const [N, d] of [
    [9, 20],
    [4700, 28],
  ]) {
    const rng = makeRng(8);
    const x = Float32Array.from({ length: N * d }, (_, i) => randNormal(rng) * [1e-3, 1, 30][Math.floor(i / d) % 3]);
    const w = Float32Array.from({ length: d }, () => 1 + 0.3 * randNormal(rng));
    const dy = Float32Array.from({ length: N * d }, () => randNormal(rng));
    // float64: r = (Σx²/d + eps)^(−1/2), y = x·r·w; with g = dy·w, dx = r·g − x·r³·(Σ g·x)/d; dw = Σ_rows dy·x·r
    const y: number[] = [],
      dx: number[] = [],
      dw = new Array(d).fill(0);
    for (let n = 0; n < N; n++) {
      const row = Array.from(x.subarray(n * d, (n + 1) * d)),
        g = row.map((_, j) => dy[n * d + j] * w[j]);
      const r = 1 / Math.sqrt(row.reduce((a, v) => a + v * v, 0) / d + eps);
      const gx = g.reduce((a, gj, j) => a + gj * row[j], 0);
      row.forEach((v, j) => {
        y.push(v * r * w[j]);
        dx.push(r * g[j] - (v * r ** 3 * gx) / d);
        dw[j] += dy[n * d + j] * v * r;
      });
    }
    const xT = tf.tensor2d(x, [N, d]),
      wT = tf.tensor1d(w),
      dyT = tf.tensor2d(dy, [N, d]);
    await ranKernels([RMS_NORM_TRAIN, RMS_NORM_GRAD], () => {
      const { value, grads } = tf.valueAndGrads((a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.mul(rmsNormNative(a as tf.Tensor2D, b as tf.Tensor1D, eps), dyT)))([
        xT,
        wT,
      ]);
      const yT = rmsNormNative(xT, wT, eps);
      assert.ok(relErr(yT.dataSync(), y) < 1e-6, `y: ${relErr(yT.dataSync(), y)}`);
      assert.ok(relErr(grads[0].dataSync(), dx) < 1e-5, `dx: ${relErr(grads[0].dataSync(), dx)}`);
      assert.ok(relErr(grads[1].dataSync(), dw) < 1e-6, `dw: ${relErr(grads[1].dataSync(), dw)}`);
      tf.dispose([value, yT, ...grads]);
    });
    tf.dispose([xT, wT, dyT]);
  }
});

test('native attention: context, probabilities and the gradient in q, k, v against float64; GQA, a prefix, a fully masked row', async () => {
  await initBackend('wasm-blas');
  // 2 query heads per kv head, T = 5 new queries over Tk = 7 keys (a prefix of 2), head dim 6 (off the vector width)
  const B = 2,
    H = 4,
    Hkv = 2,
    rep = H / Hkv,
    T = 5,
    Tk = 7,
    hd = 6;
  const rng = makeRng(12);
  const q = Float32Array.from({ length: B * H * T * hd }, () => 1.5 * randNormal(rng));
  const k = Float32Array.from({ length: B * Hkv * Tk * hd }, () => 1.5 * randNormal(rng));
  const v = Float32Array.from({ length: k.length }, () => randNormal(rng));
  // mask [B, 1, T, Tk]: causal with an offset of 2, batch 1 hides key 0, and batch 1's query 0 sees nothing
  const m = Float32Array.from({ length: B * T * Tk }, (_, i) => {
    const b = Math.floor(i / (T * Tk)),
      t = Math.floor(i / Tk) % T,
      j = i % Tk;
    return j <= t + 2 && !(b === 1 && (j === 0 || t === 0)) ? 0 : -1e9;
  });
  const dy = Float32Array.from({ length: B * T * H * hd }, () => randNormal(rng));
  // float64 from the definition: s = q·kᵀ over head h's kv head g = ⌊h / rep⌋, p = softmax(s + mask), context row (b, t),
  // columns h·hd… = p·v. For L = Σ context·dy, with dO the dy of head h: dv = Σ_h pᵀ·dO, dP = dO·vᵀ, dS = p·(dP − Σ dP·p),
  // dq = dS·k, dk = Σ_h dSᵀ·q.
  const Q = (b: number, h: number, t: number, i: number) => q[((b * H + h) * T + t) * hd + i];
  const K = (b: number, g: number, j: number, i: number) => k[((b * Hkv + g) * Tk + j) * hd + i];
  const Vv = (b: number, g: number, j: number, i: number) => v[((b * Hkv + g) * Tk + j) * hd + i];
  const dO = (b: number, h: number, t: number, i: number) => dy[(b * T + t) * H * hd + h * hd + i];
  const p = new Array(B * H * T * Tk).fill(0),
    ctx = new Array(dy.length).fill(0);
  const dq = new Array(q.length).fill(0),
    dk = new Array(k.length).fill(0),
    dv = new Array(v.length).fill(0);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / rep);
      for (let t = 0; t < T; t++) {
        // s + mask rounded to float32 as the kernel adds them: a fully masked row is then −1e9 everywhere (uniform)
        const z = Array.from({ length: Tk }, (_, j) => {
          const s = Array.from({ length: hd }, (__, i) => Q(b, h, t, i) * K(b, g, j, i)).reduce((a, x) => a + x, 0);
          return m[(b * T + t) * Tk + j] === 0 ? s : Math.fround(s + m[(b * T + t) * Tk + j]);
        });
        const mx = Math.max(...z),
          e = z.map((x) => Math.exp(x - mx)),
          sum = e.reduce((a, x) => a + x, 0),
          pr = e.map((x) => x / sum);
        const dP = pr.map((_, j) => Array.from({ length: hd }, (__, i) => dO(b, h, t, i) * Vv(b, g, j, i)).reduce((a, x) => a + x, 0));
        const c = pr.reduce((a, x, j) => a + x * dP[j], 0);
        pr.forEach((pj, j) => {
          p[((b * H + h) * T + t) * Tk + j] = pj;
          const dS = pj * (dP[j] - c);
          for (let i = 0; i < hd; i++) {
            ctx[(b * T + t) * H * hd + h * hd + i] += pj * Vv(b, g, j, i);
            dv[((b * Hkv + g) * Tk + j) * hd + i] += pj * dO(b, h, t, i);
            dq[((b * H + h) * T + t) * hd + i] += dS * K(b, g, j, i);
            dk[((b * Hkv + g) * Tk + j) * hd + i] += dS * Q(b, h, t, i);
          }
        });
      }
    }
  }
  const qT = tf.tensor4d(q, [B, H, T, hd]),
    kT = tf.tensor4d(k, [B, Hkv, Tk, hd]),
    vT = tf.tensor4d(v, [B, Hkv, Tk, hd]);
  const mT = tf.tensor4d(m, [B, 1, T, Tk]),
    dyT = tf.tensor2d(dy, [B * T, H * hd]);
  const run = () => {
    const loss = (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) =>
      tf.sum(tf.mul(attention(a as tf.Tensor4D, b as tf.Tensor4D, c as tf.Tensor4D, mT).context, dyT)) as tf.Scalar;
    const { value, grads } = tf.valueAndGrads(loss)([qT, kT, vT]);
    const out = attention(qT, kT, vT, mT);
    const got = [out.context, out.probs, ...grads].map((t) => Array.from(t.dataSync()));
    tf.dispose([value, ...grads, out.context, out.probs]);
    return got;
  };
  let got: number[][] = [];
  await ranKernels([ATTENTION, ATTENTION_GRAD], () => {
    got = run();
  });
  assert.deepEqual([got[0].length, got[1].length], [B * T * H * hd, B * H * T * Tk]);
  [ctx, p, dq, dk, dv].forEach((want, i) => {
    assert.ok(relErr(got[i], want) < 1e-5, `${['context', 'probs', 'dq', 'dk', 'dv'][i]}: ${relErr(got[i], want)}`);
  });
  // The (batch, kv head) pairs are split over two threads; on one thread the bits are the same.
  const threads = blasThreads();
  try {
    blasThreads(1);
    assert.deepEqual(run(), got);
  } finally {
    blasThreads(threads);
  }
  assert.throws(() => attention(qT, kT, vT, tf.zeros([B, 1, T, Tk + 1]) as tf.Tensor4D), /CreditLensAttention: .* do not fit .*then \[2,1,5,7\]/);
  tf.dispose([qT, kT, vT, mT, dyT]);
});

test('native attention heads: q, k rotated and v split out of the fused projection, and the gradient, against float64', async () => {
  await initBackend('wasm-blas');
  // hd 6: half 3, off the vector width; 2 query heads per kv head
  const H = 4,
    Hkv = 2,
    hd = 6,
    half = hd / 2,
    W = (H + 2 * Hkv) * hd;
  // the second size is past SPLIT_MIN_FLOATS in native/common.h: its batch rows are split over two threads
  for (const [B, T] of [
    [2, 3],
    [7, 400],
  ]) {
    const rng = makeRng(31);
    const x = Float32Array.from({ length: B * T * W }, () => randNormal(rng));
    // Tables as Model.ropeTables builds them: angle a = (pos0 + t)·f_i; cos on both halves; sin sign-folded, −sin on the first
    // half and +sin on the second; q's rows (h < H) times 1/√hd. pos0 = 5 and frequencies 1, 0.3, 0.01.
    const freqs = [1, 0.3, 0.01],
      pos0 = 5;
    const cos = new Float32Array((H + Hkv) * T * hd),
      sin = new Float32Array(cos.length);
    for (let h = 0; h < H + Hkv; h++) {
      for (let t = 0; t < T; t++) {
        for (let i = 0; i < half; i++) {
          const a = (pos0 + t) * freqs[i],
            sc = h < H ? 1 / Math.sqrt(hd) : 1,
            o = (h * T + t) * hd;
          cos[o + i] = cos[o + half + i] = Math.cos(a) * sc;
          sin[o + i] = -Math.sin(a) * sc;
          sin[o + half + i] = Math.sin(a) * sc;
        }
      }
    }
    const up = [H, Hkv, Hkv].map((n) => Float32Array.from({ length: B * n * T * hd }, () => randNormal(rng)));
    // float64, from the definition: out[i] = x[i]·c[i] + x[p(i)]·s[i] with p swapping the halves (HF's
    // x·cos + rotate_half(x)·sin); the gradient sums every output that reads x[j]: dx[j] = dy[j]·c[j] + dy[p(j)]·s[p(j)].
    const p = (i: number) => (i + half) % hd;
    const want = [H, Hkv, Hkv].map((n) => new Array(B * n * T * hd).fill(0));
    const dx = new Array(B * T * W).fill(0);
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) {
        for (let h = 0; h < H + 2 * Hkv; h++) {
          const which = h < H ? 0 : h < H + Hkv ? 1 : 2,
            hh = h - [0, H, H + Hkv][which],
            n = [H, Hkv, Hkv][which];
          const src = ((b * T + t) * (H + 2 * Hkv) + h) * hd,
            dst = ((b * n + hh) * T + t) * hd,
            tab = (h * T + t) * hd;
          for (let i = 0; i < hd; i++) {
            if (which === 2) {
              want[2][dst + i] = x[src + i];
              dx[src + i] = up[2][dst + i];
              continue;
            }
            want[which][dst + i] = x[src + i] * cos[tab + i] + x[src + p(i)] * sin[tab + i];
            dx[src + i] = up[which][dst + i] * cos[tab + i] + up[which][dst + p(i)] * sin[tab + p(i)];
          }
        }
      }
    }
    const xT = tf.tensor2d(x, [B * T, W]),
      cT = tf.tensor4d(cos, [1, H + Hkv, T, hd]),
      sT = tf.tensor4d(sin, [1, H + Hkv, T, hd]);
    const upT = up.map((u, i) => tf.tensor4d(u, [B, [H, Hkv, Hkv][i], T, hd]));
    const dims = { B, T, nHeads: H, nKvHeads: Hkv, headDim: hd };
    await ranKernels([QKV_HEADS, QKV_HEADS_GRAD], () => {
      const loss = (a: tf.Tensor) => tf.addN(qkvHeads(a as tf.Tensor2D, cT, sT, dims).map((o, i) => tf.sum(tf.mul(o, upT[i])))) as tf.Scalar;
      const { value, grads } = tf.valueAndGrads(loss)([xT]);
      const outs = qkvHeads(xT, cT, sT, dims);
      assert.deepEqual(
        outs.map((o) => o.shape),
        [
          [B, H, T, hd],
          [B, Hkv, T, hd],
          [B, Hkv, T, hd],
        ],
      );
      outs.forEach((o, i) => assert.ok(relErr(o.dataSync(), want[i]) < 1e-6, `${'qkv'[i]}: ${relErr(o.dataSync(), want[i])}`));
      assert.ok(relErr(grads[0].dataSync(), dx) < 1e-6, `dx: ${relErr(grads[0].dataSync(), dx)}`);
      // Only q used: k's and v's columns take no gradient (the tape passes zeros for the unused outputs).
      const onlyQ = tf.grad((a: tf.Tensor) => tf.sum(tf.mul(qkvHeads(a as tf.Tensor2D, cT, sT, dims)[0], upT[0])))(xT);
      const gq = onlyQ.dataSync();
      for (let r = 0; r < B * T; r++) {
        for (let c = 0; c < W; c++) {
          const e = c < H * hd ? dx[r * W + c] : 0;
          assert.ok(Math.abs(gq[r * W + c] - e) <= 1e-6 * (1 + Math.abs(e)), `q-only gradient at row ${r}, column ${c}: ${gq[r * W + c]} vs ${e}`);
        }
      }
      tf.dispose([value, ...grads, ...outs, onlyQ]);
    });
    assert.throws(
      () => qkvHeads(xT, cT, sT, { ...dims, T: T + 1 }),
      new RegExp(`CreditLensQkvHeads: .* do not fit B ${B}, T ${T + 1}, 4 heads, 2 kv heads of 6`),
    );
    tf.dispose([xT, cT, sT, ...upT]);
  }
});

test('native SwiGLU: values and gradient against float64, gates from −100 to 100, a width off the vector size', async () => {
  await initBackend('wasm-blas');
  // the second size is past SPLIT_MIN_FLOATS in native/common.h: its rows are split over two threads
  for (const [N, F] of [
    [6, 13],
    [5100, 13],
  ]) {
    const rng = makeRng(31);
    // every ninth gate ±100-ish: σ saturates to 1 or to ~e^−100 (the exp is clamped at −87, where σ·g·u is ~1e−36)
    const gu = Float32Array.from({ length: N * 2 * F }, (_, i) => randNormal(rng) * (i % 9 === 0 ? 100 : 3));
    const dy = Float32Array.from({ length: N * F }, () => randNormal(rng));
    // float64: σ = 1/(1 + e^−g), y = g·σ·u; dg = dy·u·σ·(1 + g·(1 − σ)), du = dy·g·σ
    const y: number[] = [],
      dgu: number[] = [];
    for (let n = 0; n < N; n++) {
      const dg: number[] = [],
        du: number[] = [];
      for (let j = 0; j < F; j++) {
        const g = gu[n * 2 * F + j],
          u = gu[n * 2 * F + F + j],
          s = 1 / (1 + Math.exp(-g)),
          d = dy[n * F + j];
        y.push(g * s * u);
        dg.push(d * u * s * (1 + g * (1 - s)));
        du.push(d * g * s);
      }
      dgu.push(...dg, ...du);
    }
    const guT = tf.tensor2d(gu, [N, 2 * F]),
      dyT = tf.tensor2d(dy, [N, F]);
    await ranKernels([SWIGLU_NATIVE, SWIGLU_NATIVE_GRAD], () => {
      const { act, sig } = swiglu(guT, SWIGLU_NATIVE);
      const grad = swigluGrad(guT, sig, dyT, SWIGLU_NATIVE_GRAD);
      assert.ok(relErr(act.dataSync(), y) < 1e-6, `y: ${relErr(act.dataSync(), y)}`);
      assert.ok(relErr(grad.dataSync(), dgu) < 1e-6, `grad: ${relErr(grad.dataSync(), dgu)}`);
      tf.dispose([act, sig, grad]);
    });
    assert.throws(
      () => swigluGrad(guT, dyT, tf.zeros([N, F + 1]) as tf.Tensor2D, SWIGLU_NATIVE_GRAD),
      new RegExp(`CreditLensSwiGLUNative: gu \\[${N},${2 * F}\\] .* do not fit`),
    );
    tf.dispose([guT, dyT]);
  }
});
