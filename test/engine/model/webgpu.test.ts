// The webgpu backend (tfjs-backend-webgpu on Dawn) against the cpu backend. Here and in CI the adapter is Mesa's
// lavapipe (llvmpipe), a software Vulkan driver from Debian bookworm-backports that .ci/run installs: these tests check
// correctness only, never speed.
//
// Tolerance: 1e-4 relative per parameter's gradient. The GPU kernels compute in float32 like cpu, but reduce in a
// different order (workgroup tree sums of 64–256 partial sums in matMul and softmax, against cpu's sequential loops),
// and tfjs-backend-webgpu's exp / log are the driver's (WGSL allows them 3 ulp + 2^-21 relative error; V8's are
// correctly rounded to ~1 ulp). Over two layers and a softmax that is a few 1e-6 per value; 1e-4 leaves room for the
// ill-conditioned parameters (small gradients that are differences of large terms) without hiding a wrong kernel,
// which shows up as 1e-1 or worse.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { backendInfo, initBackend } from '../../../src/engine/model/backend';
import { opsName } from '../../../src/engine/model/ops';
import { probeAdapter } from '../../../src/engine/model/webgpu';
import { Transformer, type ModelConfig } from '../../../src/engine/model/model';
import { makeRng } from '../../../src/engine/core/rng';
import { generate } from '../../../src/engine/model/sampler';
import { tokenLogprobWebgpu } from '../../../src/engine/model/kernels/webgpu_logprob';
import { Adam } from '../../../src/engine/model/optim';
import { attentionWebgpu } from '../../../src/engine/model/kernels/webgpu_attention';
import { rmsNormInferWebgpu, rmsNormWebgpu } from '../../../src/engine/model/kernels/webgpu_norm';
import { decodeAttentionWebgpu } from '../../../src/engine/model/kernels/webgpu_decode';
import { sampleRowsWebgpu } from '../../../src/engine/model/kernels/webgpu_sample';
import { randNormal } from '../../../src/engine/core/rng';
import { COMPOSED } from '../../../src/engine/model/ops/composed';
import { relErr, smallModelConfig } from '../fixtures';
import { loadHfModel } from '../../../src/engine/model/hf';
import { qwen05bFolder } from './qwen05b';

const TOL = 1e-4;

function config(tie: boolean): ModelConfig {
  return smallModelConfig({ tieEmbeddings: tie, maxSeqLen: 32 });
}

test('Dawn finds the lavapipe adapter here; auto never picks a software adapter; backend webgpu takes it with a warning and records it', async () => {
  const probe = await probeAdapter();
  assert.ok(probe.ok, `no WebGPU adapter: ${probe.ok ? '' : probe.why} (.ci/run installs mesa-vulkan-drivers and libvulkan1 from bookworm-backports)`);
  assert.equal(probe.info.software, true, `expected lavapipe (software) on this machine, got ${JSON.stringify(probe.info)}`);
  assert.match(probe.info.description, /llvmpipe/);
  const auto = await initBackend('auto');
  assert.notEqual(auto.backend, 'webgpu');
  assert.match(auto.reason, /^webgpu adapter llvmpipe.* is a CPU rasteriser, not picked by auto; /);
  const logs: string[] = [];
  const chosen = await initBackend('webgpu', (m) => logs.push(m));
  assert.equal(chosen.backend, 'webgpu');
  assert.equal(tf.getBackend(), 'webgpu');
  assert.equal(opsName(), 'webgpu');
  assert.ok(
    logs.some((l) => /^warning: webgpu on llvmpipe.*software adapter/.test(l)),
    logs.join('\n'),
  );
  const info = backendInfo()!;
  assert.equal(info.backend, 'webgpu');
  assert.equal(info.package, '@tensorflow/tfjs-backend-webgpu');
  assert.equal(info.gpu, false);
  assert.equal(info.adapter?.software, true);
  assert.equal(info.adapter?.vendor, 'mesa');
  assert.ok((info.adapter?.max_storage_buffer_binding_size ?? 0) >= 128 * 2 ** 20);
  assert.match(info.adapter?.dawn ?? '', /dawn\.node$/);
});

test(`gradients of the whole model on webgpu equal the cpu backend (per parameter, ${TOL} relative)`, async () => {
  const B = 3,
    T = 12;
  const rng = makeRng(15);
  const ids = Int32Array.from({ length: B * T }, () => Math.floor(rng() * 40));
  const keyMask = Float32Array.from({ length: B * T }, (_, i) => (Math.floor(i / T) === 1 && i % T < 4 ? 0 : 1));
  const chosen = Int32Array.from({ length: B * T }, () => Math.floor(rng() * 40));
  const weights = Float32Array.from({ length: B * T }, (_, i) => keyMask[i] * (rng() * 2 - 1));
  for (const tie of [true, false]) {
    const grads = async (backend: 'cpu' | 'webgpu') => {
      await initBackend(backend);
      const model = Transformer.init(config(tie), 7);
      const byVar = new Map([...model.params].map(([n, v]) => [v.name, n]));
      const { grads: g, value } = tf.variableGrads(() => {
        const { logits } = model.forward(tf.tensor2d(ids, [B, T], 'int32'), tf.tensor2d(keyMask, [B, T]));
        const picked = model.tokenLogprob(logits.reshape([B * T, 40]) as tf.Tensor2D, tf.tensor1d(chosen, 'int32'));
        return tf.mean(tf.mul(picked, tf.tensor1d(weights))) as tf.Scalar;
      }, [...model.params.values()]);
      const out = new Map<string, Float32Array>();
      for (const [k, t] of Object.entries(g)) out.set(byVar.get(k)!, Float32Array.from(await t.data()));
      tf.dispose([...Object.values(g), value]);
      model.dispose();
      return out;
    };
    const cpu = await grads('cpu');
    const gpu = await grads('webgpu');
    assert.equal(gpu.size, cpu.size);
    for (const [n, c] of cpu) {
      assert.ok(
        c.some((v) => v !== 0),
        `${n}: zero gradient`,
      );
      const e = relErr(gpu.get(n)!, c);
      assert.ok(e <= TOL, `tie=${tie} ${n}: relative error ${e.toExponential(2)} > ${TOL}`);
    }
  }
});

test('sampling on webgpu (its KV cache written in place) gives the cpu backend’s greedy tokens, log-probs and entropies (the cache grown by concatenation)', async () => {
  const run = async (backend: 'cpu' | 'webgpu') => {
    await initBackend(backend);
    const model = Transformer.init(config(true), 3);
    const out = await generate(model, [[1, 2, 3], [4, 5], [6]], { maxNewTokens: 10, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(1) });
    model.dispose();
    return out;
  };
  const cpu = await run('cpu');
  const gpu = await run('webgpu');
  assert.deepEqual(
    gpu.map((r) => r.ids),
    cpu.map((r) => r.ids),
  );
  for (let i = 0; i < cpu.length; i++) {
    assert.ok(relErr(gpu[i].logprobs, cpu[i].logprobs) < TOL, `row ${i} log-probs`);
    assert.ok(relErr(gpu[i].entropies, cpu[i].entropies) < TOL, `row ${i} entropies`);
  }
});

test('on webgpu the draw runs on the device, finished rows stay in the cache until they are a quarter of it, and sampling is unchanged: the cpu backend’s greedy tokens, each row to its budget', async () => {
  // three blocks of on-device steps (16, 16, 8): row 0 ends in the first, row 1 in the second
  const budgets = [2, 20, 40, 40, 40];
  const prompts = [[1, 2, 3], [4, 5], [6], [7, 8], [9]];
  const run = async (backend: 'cpu' | 'webgpu') => {
    await initBackend(backend);
    const model = Transformer.init(smallModelConfig({ tieEmbeddings: false, maxSeqLen: 48 }), 5);
    const kept: number[] = [];
    const keepRows = model.keepCacheRows.bind(model);
    model.keepCacheRows = (cache, rows) => (kept.push(rows.length), keepRows(cache, rows));
    const out = await generate(model, prompts, { maxNewTokens: 40, temperature: 1, topP: 1, greedy: true, eosId: -1, rng: makeRng(1), budgets });
    model.dispose();
    return { out, kept };
  };
  const cpu = await run('cpu');
  const gpu = await run('webgpu');
  // cpu drops each row as it finishes; webgpu looks at the end of each block, keeps the first (1 of 5 idle) and drops
  // both at the second (2 of 5)
  assert.deepEqual(cpu.kept, [4, 3]);
  assert.deepEqual(gpu.kept, [3]);
  assert.deepEqual(
    gpu.out.map((r) => r.ids.length),
    budgets,
  );
  assert.deepEqual(
    gpu.out.map((r) => r.ids),
    cpu.out.map((r) => r.ids),
  );
  for (let i = 0; i < budgets.length; i++) assert.ok(relErr(gpu.out[i].logprobs, cpu.out[i].logprobs) < TOL, `row ${i} log-probs`);
});

test('the draw on webgpu against float64: log-prob, entropy and Σ p² of each row; the inverse CDF in id order over the whole row and over the nucleus (top_p 0.8); greedy takes the first maximum', async () => {
  await initBackend('webgpu');
  const V = 1000,
    R = 3,
    K = 150,
    T = 0.7;
  const rng = makeRng(11);
  const logits = Float32Array.from({ length: R * V }, () => 2 * randNormal(rng));
  logits[2 * V + 7] = logits[2 * V + 500] = 40; // a tie for greedy
  const u = Float32Array.from({ length: K * R }, () => rng());
  // float64 reference of a row: log-probs at T, then the draw walking ids in order over {p ≥ τ}, τ the largest keeping top_p
  const ref = (r: number, topP: number, x: number, t: number) => {
    const z = Array.from(logits.subarray(r * V, (r + 1) * V), (l) => l / t);
    const m = Math.max(...z);
    const lse = m + Math.log(z.reduce((a, v) => a + Math.exp(v - m), 0));
    const p = z.map((v) => Math.exp(v - lse));
    const sorted = [...p].sort((a, b) => b - a);
    let tau = 0;
    if (topP < 1)
      for (let k = 0, c = 0; k < V; k++) {
        c += sorted[k];
        if (c >= topP) {
          tau = sorted[k];
          break;
        }
      }
    const kept = p.reduce((a, v) => a + (v >= tau ? v : 0), 0);
    let acc = 0;
    let id = -1;
    for (let i = 0; i < V && id < 0; i++) if (p[i] >= tau && (acc += p[i]) > x * kept) id = i;
    return { id, lp: z.map((v) => v - lse), entropy: -p.reduce((a, v, i) => a + v * (z[i] - lse), 0), sumSq: p.reduce((a, v) => a + v * v, 0) };
  };
  for (const [topP, greedy] of [
    [1, false],
    [0.8, false],
    [1, true],
  ] as const) {
    const lt = tf.tensor2d(logits, [R, V]);
    const draws = tf.tensor2d(u, [K, R]);
    const record = tf.zeros([K, R, 5]) as tf.Tensor3D;
    for (let k = 0; k < K; k++) sampleRowsWebgpu(lt, draws, record, { step: k, temperature: T, topP, greedy, rawLogprobs: true }).dispose();
    const rec = (await record.data()) as Float32Array;
    let same = 0;
    for (let k = 0; k < K; k++)
      for (let r = 0; r < R; r++) {
        const f = (k * R + r) * 5;
        // greedy reports the plain policy (temperature 1), as the host sampler does
        const want = ref(r, topP, u[k * R + r], greedy ? 1 : T);
        const id = greedy ? logits.subarray(r * V, (r + 1) * V).indexOf(Math.max(...logits.subarray(r * V, (r + 1) * V))) : want.id;
        if (rec[f] === id) same++;
        assert.ok(Math.abs(rec[f + 1] - want.lp[rec[f]]) < 1e-4, `log-prob at T of row ${r}`);
        const raw = logits[r * V + rec[f]] - Math.log(Array.from(logits.subarray(r * V, (r + 1) * V)).reduce((a, l) => a + Math.exp(l - 40), 0)) - 40;
        assert.ok(Math.abs(rec[f + 2] - raw) < 1e-4, `reported (temperature 1) log-prob of row ${r}`);
        assert.ok(Math.abs(rec[f + 3] - want.entropy) < 1e-4 * Math.max(1, want.entropy), `entropy of row ${r}`);
        assert.ok(Math.abs(rec[f + 4] - want.sumSq) < 1e-5, `Σ p² of row ${r}`);
      }
    // a draw within float32 rounding of a boundary may land on the neighbour: at most 1 in 100
    assert.ok(same >= K * R - Math.ceil((K * R) / 100), `top_p ${topP} greedy ${greedy}: ${same} of ${K * R} draws are the reference's`);
    if (greedy) assert.equal(rec[2 * 5], 7, 'the first of two equal maxima');
    tf.dispose([lt, draws, record]);
  }
});

test('the in-place decode attention on webgpu against float64: the cache written at pos, the context over several 64-key tiles, GQA, left padding, head dims of one and two lanes each', async () => {
  await initBackend('webgpu');
  for (const [B, H, Hkv, hd, cap, pos] of [
    [3, 4, 2, 16, 136, 130],
    [2, 2, 1, 128, 72, 5],
  ]) {
    const rng = makeRng(hd + pos);
    const row = (H + 2 * Hkv) * hd;
    const qkv = Float32Array.from({ length: B * row }, () => randNormal(rng));
    const keys = Float32Array.from({ length: B * Hkv * hd * cap }, () => randNormal(rng));
    const values = Float32Array.from({ length: B * Hkv * cap * hd }, () => randNormal(rng));
    // row b's first 3b positions are left padding (hidden); positions past pos hold stale numbers the step must ignore
    const mask = Float32Array.from({ length: B * cap }, (_, k) => (k % cap >= 3 * Math.floor(k / cap) && k % cap < pos ? 1 : 0));
    const cos = Float32Array.from({ length: hd }, (_, i) => Math.cos(pos / 10000 ** ((2 * (i % (hd / 2))) / hd)));
    const sin = Float32Array.from({ length: hd }, (_, i) => (i < hd / 2 ? -1 : 1) * Math.sin(pos / 10000 ** ((2 * (i % (hd / 2))) / hd)));
    const scale = 1 / Math.sqrt(hd);
    const t = {
      qkv: tf.tensor2d(qkv, [B, row]),
      keys: tf.tensor4d(keys, [B, Hkv, hd, cap]),
      values: tf.tensor4d(values, [B, Hkv, cap, hd]),
      mask: tf.tensor2d(mask, [B, cap]),
    };
    const ctx = decodeAttentionWebgpu(t.qkv, t.keys, t.values, t.mask, { pos, nHeads: H, nKvHeads: Hkv, headDim: hd, scale, cos, sin });
    const [gotCtx, gotK, gotV, gotM] = await Promise.all([ctx.data(), t.keys.data(), t.values.data(), t.mask.data()]);
    // float64 reference: RoPE x·cos + roll(x)·sin (roll swaps the halves; the sign is in sin), softmax over visible keys
    const rot = (x: Float64Array | Float32Array, off: number, s: number) =>
      Float64Array.from({ length: hd }, (_, i) => (x[off + i] * cos[i] + x[off + ((i + hd / 2) % hd)] * sin[i]) * s);
    let worst = 0;
    for (let b = 0; b < B; b++) {
      for (let g = 0; g < Hkv; g++) {
        const k = rot(qkv, b * row + (H + g) * hd, 1);
        for (let i = 0; i < hd; i++) {
          keys[((b * Hkv + g) * hd + i) * cap + pos] = k[i];
          values[((b * Hkv + g) * cap + pos) * hd + i] = qkv[b * row + (H + Hkv + g) * hd + i];
        }
      }
      mask[b * cap + pos] = 1;
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / (H / Hkv));
        const q = rot(qkv, b * row + h * hd, scale);
        const s: number[] = [];
        for (let j = 0; j <= pos; j++) {
          if (mask[b * cap + j] === 0) continue;
          let d = 0;
          for (let i = 0; i < hd; i++) d += q[i] * keys[((b * Hkv + g) * hd + i) * cap + j];
          s.push(d, j);
        }
        const m = Math.max(...s.filter((_, i) => i % 2 === 0));
        let z = 0;
        const c = new Float64Array(hd);
        for (let n = 0; n < s.length; n += 2) {
          const p = Math.exp(s[n] - m);
          z += p;
          for (let i = 0; i < hd; i++) c[i] += p * values[((b * Hkv + g) * cap + s[n + 1]) * hd + i];
        }
        for (let i = 0; i < hd; i++) worst = Math.max(worst, Math.abs(gotCtx[(b * H + h) * hd + i] - c[i] / z));
      }
    }
    assert.ok(worst < 1e-5, `B ${B} hd ${hd} pos ${pos}: context off by ${worst}`);
    assert.ok(relErr(gotK, keys) < 1e-6, 'keys written at pos, the rest untouched');
    assert.deepEqual(Array.from(gotV), Array.from(values), 'values written at pos, the rest untouched');
    assert.deepEqual(Array.from(gotM), Array.from(mask), 'pos marked real in keyMask');
    tf.dispose([ctx, t.qkv, t.keys, t.values, t.mask]);
  }
});

test('the WGSL token log-prob kernels against float64: values and gradients, a vocabulary of 1,000 and of 151,936; the same bits twice', async () => {
  await initBackend('webgpu');
  for (const [N, V] of [
    [5, 1000],
    [2, 151_936],
  ]) {
    const rng = makeRng(V);
    const zv = Float32Array.from({ length: N * V }, () => (rng() - 0.5) * 12);
    const tv = Int32Array.from({ length: N }, (_, n) => (n === 0 ? 0 : n === 1 ? V - 1 : Math.floor(rng() * V)));
    const wv = Float32Array.from({ length: N }, () => rng() * 4 - 2);
    const z = tf.tensor2d(zv, [N, V]);
    const t = tf.tensor1d(tv, 'int32');
    const w = tf.tensor1d(wv);
    const run = async () => {
      const lp = tokenLogprobWebgpu(z, t);
      const g = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(tokenLogprobWebgpu(x as tf.Tensor2D, t), w)))(z);
      const out = { lp: Float32Array.from(await lp.data()), g: Float32Array.from(await g.data()) };
      tf.dispose([lp, g]);
      return out;
    };
    const a = await run();
    for (let n = 0; n < N; n++) {
      let m = -Infinity;
      for (let v = 0; v < V; v++) m = Math.max(m, zv[n * V + v]);
      let s = 0;
      for (let v = 0; v < V; v++) s += Math.exp(zv[n * V + v] - m);
      const lse = m + Math.log(s);
      assert.ok(Math.abs(a.lp[n] - (zv[n * V + tv[n]] - lse)) < 2e-5, `V ${V} row ${n}: ${a.lp[n]} vs ${zv[n * V + tv[n]] - lse}`);
      let worst = 0;
      for (let v = 0; v < V; v++) {
        const ref = wv[n] * ((v === tv[n] ? 1 : 0) - Math.exp(zv[n * V + v] - lse));
        worst = Math.max(worst, Math.abs(a.g[n * V + v] - ref));
      }
      assert.ok(worst < 1e-6, `V ${V} row ${n}: gradient off by ${worst}`);
    }
    const b = await run();
    assert.deepEqual(b.lp, a.lp);
    assert.deepEqual(b.g, a.g);
    tf.dispose([z, t, w]);
  }
});

test('the WGSL RMSNorm kernels against float64: y, dx and dw at the example’s width (128) and wider than a workgroup (200 × 300 rows); infer equals forward; the same bits twice', async () => {
  await initBackend('webgpu');
  const eps = 1e-6;
  for (const [N, d] of [
    [96, 128],
    [300, 200],
  ]) {
    const rng = makeRng(N + d);
    const xv = Float32Array.from({ length: N * d }, () => (rng() - 0.5) * 4);
    const wv = Float32Array.from({ length: d }, () => 0.5 + rng());
    const dyv = Float32Array.from({ length: N * d }, () => rng() * 2 - 1);
    const x = tf.tensor2d(xv, [N, d]);
    const w = tf.tensor1d(wv);
    const dy = tf.tensor2d(dyv, [N, d]);
    const run = async () => {
      const y = rmsNormWebgpu(x, w, eps);
      const yi = rmsNormInferWebgpu(x, w, eps);
      const [gx, gw] = tf.grads((a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.mul(rmsNormWebgpu(a as tf.Tensor2D, b as tf.Tensor1D, eps), dy)))([x, w]);
      const out = await Promise.all([y, yi, gx, gw].map(async (t) => Float32Array.from(await t.data())));
      tf.dispose([y, yi, gx, gw]);
      return out;
    };
    const [y, yi, gx, gw] = await run();
    assert.deepEqual(yi, y, 'infer: the same r and y in one kernel');
    // float64 by the closed form: r = (mean x² + ε)^(−½), y = x·r·w, g = dy·w, dx = r·g − x·r³·mean(g·x), dw = Σ dy·x·r
    const dw = new Float64Array(d);
    const worst = { y: 0, dx: 0 };
    for (let n = 0; n < N; n++) {
      let ss = 0;
      let gx64 = 0;
      for (let j = 0; j < d; j++) {
        ss += xv[n * d + j] ** 2;
        gx64 += dyv[n * d + j] * wv[j] * xv[n * d + j];
      }
      const r = 1 / Math.sqrt(ss / d + eps);
      for (let j = 0; j < d; j++) {
        const k = n * d + j;
        worst.y = Math.max(worst.y, Math.abs(y[k] - xv[k] * r * wv[j]));
        worst.dx = Math.max(worst.dx, Math.abs(gx[k] - (r * dyv[k] * wv[j] - xv[k] * r ** 3 * (gx64 / d))));
        dw[j] += dyv[k] * xv[k] * r;
      }
    }
    const dwWorst = Math.max(...Array.from(dw, (v, j) => Math.abs(gw[j] - v) / (1 + Math.abs(v))));
    assert.ok(worst.y < 1e-5 && worst.dx < 1e-5 && dwWorst < 1e-5, `${N} × ${d}: ${JSON.stringify({ ...worst, dw: dwWorst })}`);
    const again = await run();
    assert.deepEqual(again, [y, yi, gx, gw]);
    tf.dispose([x, w, dy]);
  }
});

test('Adam on webgpu (one WGSL dispatch per parameter, in place) gives the op sequence’s update on cpu, over three steps; a buffer another tensor holds is left as it was', async () => {
  const run = async (backend: 'cpu' | 'webgpu') => {
    await initBackend(backend);
    const rng = makeRng(3);
    const vals = (n: number) => Float32Array.from({ length: n }, () => rng() * 2 - 1);
    const params = new Map<string, tf.Variable>([
      ['w', tf.variable(tf.tensor2d(vals(6 * 35), [6, 35]))],
      ['b', tf.variable(tf.tensor1d(vals(35)))],
    ]);
    const opt = new Adam(3e-3);
    for (let s = 0; s < 3; s++) {
      const grads = { w: tf.tensor2d(vals(6 * 35), [6, 35]), b: tf.tensor1d(vals(35)) };
      opt.apply(params, grads);
      tf.dispose(Object.values(grads));
    }
    const out = { w: Float32Array.from(await params.get('w')!.data()), b: Float32Array.from(await params.get('b')!.data()), state: await opt.exportState() };
    opt.dispose();
    for (const p of params.values()) p.dispose();
    return out;
  };
  const cpu = await run('cpu');
  const gpu = await run('webgpu');
  for (const k of ['w', 'b'] as const) assert.ok(relErr(gpu[k], cpu[k]) < 1e-6, `${k}: ${relErr(gpu[k], cpu[k])}`);
  for (const k of Object.keys(cpu.state)) assert.ok(relErr(gpu.state[k].data, cpu.state[k].data) < 1e-6, k);
  // the update is the kernel's: one Adam step of a parameter is one dispatch
  await initBackend('webgpu');
  const { countDispatches } = await import('../../../src/engine/bench/dispatch');
  const p = new Map([['x', tf.variable(tf.ones([1000]))]]);
  const opt = new Adam(1e-3);
  const g = { x: tf.fill([1000], 0.5) };
  opt.apply(p, g); // the moments are made on the first step
  const c = await countDispatches(async () => opt.apply(p, g));
  assert.deepEqual(
    Object.keys(c.by_kernel).filter((k) => c.by_kernel[k].dispatches > 0),
    ['ClAdamWebgpu'],
    JSON.stringify(c.by_kernel),
  );
  assert.equal(c.dispatches, 1);
  // a tensor that shares the parameter's buffer (tfjs's clone) keeps its values; the parameter moves
  const was = (await p.get('x')!.data())[0];
  const before = tf.clone(p.get('x')!);
  opt.apply(p, g);
  assert.equal((await before.data())[0], was, 'the clone kept its values');
  const now = (await p.get('x')!.data())[0];
  assert.ok(now < was, `the parameter moved: ${was} → ${now}`);
  tf.dispose([...p.values(), g.x, before]);
  opt.dispose();
});

test('attention on webgpu (WGSL scores + mask + softmax, and its gradient) equals the composition on cpu: 70 keys, GQA, a padded row', async () => {
  const [B, H, Hkv, T, hd] = [2, 4, 2, 70, 16];
  const rng = makeRng(8);
  const vals = (n: number) => Float32Array.from({ length: n }, () => rng() * 2 - 1);
  const qv = vals(B * H * T * hd),
    kv = vals(B * Hkv * T * hd),
    vv = vals(B * Hkv * T * hd),
    dctx = vals(B * T * H * hd),
    dprobs = vals(B * H * T * T);
  // causal, and row 1 left-padded by 5 keys
  const mv = new Float32Array(B * T * T);
  for (let b = 0; b < B; b++) for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) mv[(b * T + i) * T + j] = j <= i && !(b === 1 && j < 5) ? 0 : -1e9;
  const run = async (backend: 'cpu' | 'webgpu') => {
    await initBackend(backend);
    const attention = backend === 'cpu' ? COMPOSED.attention : attentionWebgpu;
    const q = tf.tensor4d(qv, [B, H, T, hd]),
      k = tf.tensor4d(kv, [B, Hkv, T, hd]),
      v = tf.tensor4d(vv, [B, Hkv, T, hd]),
      mask = tf.tensor4d(mv, [B, 1, T, T]);
    const f = (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => {
      const { context, probs } = attention(a as tf.Tensor4D, b as tf.Tensor4D, c as tf.Tensor4D, mask);
      return tf.add(tf.sum(tf.mul(context, tf.tensor2d(dctx, [B * T, H * hd]))), tf.sum(tf.mul(probs, tf.tensor4d(dprobs, [B, H, T, T]))));
    };
    const out = attention(q, k, v, mask);
    const grads = tf.grads(f)([q, k, v]);
    const read = async (t: tf.Tensor) => Float32Array.from(await t.data());
    const r = { context: await read(out.context), probs: await read(out.probs), dq: await read(grads[0]), dk: await read(grads[1]), dv: await read(grads[2]) };
    tf.dispose([q, k, v, mask, out.context, out.probs, ...grads]);
    return r;
  };
  const cpu = await run('cpu');
  const gpu = await run('webgpu');
  for (const key of ['context', 'probs', 'dq', 'dk', 'dv'] as const) assert.ok(relErr(gpu[key], cpu[key]) < 1e-4, `${key}: ${relErr(gpu[key], cpu[key])}`);
});

test('the Qwen2.5-0.5B-shaped folder on webgpu: its 545 MiB embedding exceeds lavapipe’s 128 MiB binding, is stored in vocabulary blocks, and scores every token as wasm-blas does (1e-3)', async () => {
  const { dir } = qwen05bFolder();
  const rng = makeRng(9);
  const B = 2,
    P = 8,
    C = 24;
  const ids = Int32Array.from({ length: B * (P + C) }, () => 1000 + Math.floor(rng() * 100_000));
  const keyMask = new Float32Array(B * (P + C)).fill(1);
  const targets = Int32Array.from({ length: B * C }, (_, i) => ids[Math.floor(i / C) * (P + C) + P + (i % C)]);
  const score = async (backend: 'wasm-blas' | 'webgpu') => {
    await initBackend(backend);
    const { model } = loadHfModel(dir, { useChatTemplate: false });
    try {
      const idsT = tf.tensor2d(ids, [B, P + C], 'int32');
      const maskT = tf.tensor2d(keyMask, [B, P + C]);
      // positions P−1 … P+C−2 predict the completion's tokens
      const r = await model.scoreTokens(idsT, maskT, { from: P - 1, count: C }, targets, 1);
      tf.dispose([idsT, maskT]);
      return { blocks: model.vocabBlocks, ...r };
    } finally {
      model.dispose();
    }
  };
  const cpu = await score('wasm-blas');
  const gpu = await score('webgpu');
  const limit = backendInfo()!.adapter!.max_storage_buffer_binding_size;
  assert.equal(cpu.blocks, 1);
  assert.equal(gpu.blocks, Math.ceil(151936 / Math.floor(limit / (4 * 896))), `binding limit ${limit}`);
  assert.ok(gpu.blocks > 1, `lavapipe grants ${limit} bytes a binding; the embedding should not fit one`);
  for (let i = 0; i < B * C; i++) {
    assert.ok(Math.abs(gpu.logp[i] - cpu.logp[i]) < 1e-3, `token ${i}: log-prob ${gpu.logp[i]} vs ${cpu.logp[i]}`);
    assert.ok(Math.abs(gpu.entropy[i] - cpu.entropy[i]) < 1e-3, `token ${i}: entropy ${gpu.entropy[i]} vs ${cpu.entropy[i]}`);
  }
});
