// The sampler's draw on webgpu, so the decode loop reads back every few tokens instead of every token. One workgroup
// per row computes what the host sampler (sampler.ts) computes from a row of logits: log softmax(logits / T), the
// entropy, Σ p², the chosen token (argmax; or the inverse CDF of u·mass over the vocabulary in id order, over the
// nucleus when top_p < 1) and its log-prob. It writes them into row `step` of a record the host reads once per block,
// and the ids into a tensor the next decode step embeds, so a token never leaves the device to be fed back.
//
// The nucleus is the set {p ≥ τ} for the largest τ whose set holds top_p of the mass: τ is found by bisection on the
// bits of a positive float (their order is the numbers' order), 32 passes over the row. It is the host's nucleus (the
// smallest most-likely prefix reaching top_p) except where tokens tie at the boundary, and the draw walks it in id order
// where the host walks it most likely first: the same distribution, another token for the same u. The host's sampler
// stays the reference, and a webgpu run is reproducible on webgpu.
import * as tf from '@tensorflow/tfjs';
import { SAMPLE_RECORD_FIELDS, type SampleRowsAttrs } from '../ops/ops';
import { dispatchOwn, newOutput, packUniforms } from './webgpu_own';
import { registerProgramKernel, workgroupReductions } from './webgpu_program';

const KERNEL = 'ClSampleRowsWebgpu';
const THREADS = 256;

const CODE = `
struct U { R : i32, V : i32, step : i32, greedy : i32, raw : i32, nucleus : i32, p0 : i32, p1 : i32, invT : f32, topP : f32, q0 : f32, q1 : f32 };
@group(0) @binding(0) var<storage, read_write> ids : array<i32>;
@group(0) @binding(1) var<storage, read> logits : array<f32>;
@group(0) @binding(2) var<storage, read> draws : array<f32>;
@group(0) @binding(3) var<storage, read_write> rec : array<f32>;
@group(0) @binding(4) var<uniform> u : U;
var<workgroup> redi : array<i32, ${THREADS}>;
var<workgroup> pre : array<f32, ${THREADS}>;
${workgroupReductions(THREADS)}
const BIG = 2147483647;
fn reduceMinI(x : i32, lane : i32) -> i32 {
  redi[lane] = x;
  workgroupBarrier();
  for (var s = ${THREADS / 2}; s > 0; s = s / 2) {
    if (lane < s) { redi[lane] = min(redi[lane], redi[lane + s]); }
    workgroupBarrier();
  }
  let r = redi[0];
  workgroupBarrier();
  return r;
}
// the largest value and, among equal ones, the smallest index (the host's argmax keeps the first maximum)
fn reduceArgmax(v : f32, i : i32, lane : i32) -> i32 {
  red[lane] = v;
  redi[lane] = i;
  workgroupBarrier();
  for (var s = ${THREADS / 2}; s > 0; s = s / 2) {
    if (lane < s && (red[lane + s] > red[lane] || (red[lane + s] == red[lane] && redi[lane + s] < redi[lane]))) {
      red[lane] = red[lane + s];
      redi[lane] = redi[lane + s];
    }
    workgroupBarrier();
  }
  let r = redi[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) li : u32) {
  let lane = i32(li);
  let r = i32(wg.x);
  let base = r * u.V;
  let chunk = (u.V + ${THREADS - 1}) / ${THREADS};
  let lo = min(u.V, lane * chunk);
  let hi = min(u.V, lo + chunk);
  var m = -3.0e38;
  for (var i = lo; i < hi; i = i + 1) { m = max(m, logits[base + i] * u.invT); }
  let mx = reduceMax(m, lane);
  var se = 0.0;
  for (var i = lo; i < hi; i = i + 1) { se = se + exp(logits[base + i] * u.invT - mx); }
  let lse = mx + log(reduceSum(se, lane));
  var h = 0.0;
  var ss = 0.0;
  var ms = 0.0;
  for (var i = lo; i < hi; i = i + 1) {
    let l = logits[base + i] * u.invT - lse;
    let p = exp(l);
    ms = ms + p;
    ss = ss + p * p;
    h = h - p * l;
  }
  let entropy = reduceSum(h, lane);
  let sumSq = reduceSum(ss, lane);
  let mass = reduceSum(ms, lane);
  var lse1 = lse;
  if (u.raw == 1) {
    var m1 = -3.0e38;
    for (var i = lo; i < hi; i = i + 1) { m1 = max(m1, logits[base + i]); }
    let mx1 = reduceMax(m1, lane);
    var s1 = 0.0;
    for (var i = lo; i < hi; i = i + 1) { s1 = s1 + exp(logits[base + i] - mx1); }
    lse1 = mx1 + log(reduceSum(s1, lane));
  }
  var id = 0;
  if (u.greedy == 1) {
    var bv = -3.0e38;
    var bi = BIG;
    for (var i = lo; i < hi; i = i + 1) {
      let v = logits[base + i];
      if (v > bv) { bv = v; bi = i; }
    }
    id = reduceArgmax(bv, bi, lane);
  } else {
    var tau = 0.0;
    var kept = mass;
    if (u.nucleus == 1) {
      // invariant: the set {p ≥ bits a} holds at least top_p (a = 0: every token); b: the most likely token's p
      var a = 0u;
      var b = bitcast<u32>(exp(mx - lse));
      for (var it = 0; it < 32; it = it + 1) {
        let mid = a + (b - a + 1u) / 2u;
        let t = bitcast<f32>(mid);
        var part = 0.0;
        for (var i = lo; i < hi; i = i + 1) {
          let p = exp(logits[base + i] * u.invT - lse);
          if (p >= t) { part = part + p; }
        }
        let inSet = reduceSum(part, lane);
        if (a < b) {
          if (inSet >= u.topP) { a = mid; } else { b = mid - 1u; }
        }
      }
      tau = bitcast<f32>(a);
      var part = 0.0;
      for (var i = lo; i < hi; i = i + 1) {
        let p = exp(logits[base + i] * u.invT - lse);
        if (p >= tau) { part = part + p; }
      }
      kept = reduceSum(part, lane);
    }
    let goal = draws[u.step * u.R + r] * kept;
    // each lane's share of the kept mass, then where the running sum first passes the target (the host's walk)
    var cs = 0.0;
    var last = -1;
    for (var i = lo; i < hi; i = i + 1) {
      let p = exp(logits[base + i] * u.invT - lse);
      if (p > 0.0 && p >= tau) { cs = cs + p; last = i; }
    }
    pre[lane] = cs;
    workgroupBarrier();
    if (lane == 0) {
      var run = 0.0;
      for (var k = 0; k < ${THREADS}; k = k + 1) { let c = pre[k]; pre[k] = run; run = run + c; }
    }
    workgroupBarrier();
    let start = pre[lane];
    var found = BIG;
    if (cs > 0.0 && start <= goal && goal < start + cs) {
      var acc = start;
      for (var i = lo; i < hi; i = i + 1) {
        let p = exp(logits[base + i] * u.invT - lse);
        if (p > 0.0 && p >= tau) {
          acc = acc + p;
          if (acc > goal) { found = i; break; }
        }
      }
      if (found == BIG) { found = last; }
    }
    let pick = reduceMinI(found, lane);
    // rounding left u·mass past the summed mass: the last token with mass, as the host does
    let lastAll = -reduceMinI(-last, lane);
    id = select(lastAll, pick, pick != BIG);
  }
  if (lane == 0) {
    let o = (u.step * u.R + r) * ${SAMPLE_RECORD_FIELDS};
    let lp = logits[base + id] * u.invT - lse;
    rec[o] = f32(id);
    rec[o + 1] = lp;
    rec[o + 2] = select(lp, logits[base + id] - lse1, u.raw == 1);
    rec[o + 3] = entropy;
    rec[o + 4] = sumSq;
    ids[r] = id;
  }
}`;

let registered = false;

/** Registers the kernel with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuSample(): void {
  if (registered) return;
  registered = true;
  registerProgramKernel<SampleRowsAttrs>(KERNEL, (inputs, backend, a) => {
    const { logits, draws, record } = inputs;
    const [R, V] = logits.shape;
    const [K] = draws.shape;
    if (draws.shape[1] !== R || record.shape[0] !== K || record.shape[1] !== R || record.shape[2] !== SAMPLE_RECORD_FIELDS || !(a.step >= 0 && a.step < K))
      throw new Error(`${KERNEL}: logits [${logits.shape}], draws [${draws.shape}], record [${record.shape}], step ${a.step}`);
    if (V >= 2 ** 24) throw new Error(`${KERNEL}: a vocabulary of ${V} ids is not exact in the record's float32`);
    const ids = newOutput(backend, [R], 'int32');
    const invT = a.greedy ? 1 : 1 / a.temperature;
    dispatchOwn(backend, {
      key: 'cl_sample_rows',
      code: CODE,
      bindings: [ids, logits, draws, record],
      writes: [0, 3],
      uniforms: packUniforms([
        { i32: [R, V, a.step, a.greedy ? 1 : 0, a.rawLogprobs && invT !== 1 ? 1 : 0, !a.greedy && a.topP < 1 ? 1 : 0, 0, 0] },
        { f32: [invT, a.topP, 0, 0] },
      ]),
      workgroups: [R, 1, 1],
    });
    return ids;
  });
}

/**
 * Samples one token per row of logits [R, V] with the uniform draws draws[step] ([K, R]), writes record[step] ([K, R,
 * SAMPLE_RECORD_FIELDS], in place) and returns the ids [R] (int32).
 */
export function sampleRowsWebgpu(logits: tf.Tensor2D, draws: tf.Tensor2D, record: tf.Tensor3D, attrs: SampleRowsAttrs): tf.Tensor1D {
  return tf.engine().runKernel(KERNEL, { logits, draws, record }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor1D;
}
