// The decode step's attention on webgpu, on a KV cache written in place: one dispatch per layer where the growing cache
// took ten (the heads' split, two concatenations of the whole cache, the mask's three element-wise kernels, two
// products, the softmax and the context's transpose). A workgroup per (row, kv head) rotates the new token's key, writes
// it and its value at `pos` (the cache layout of the wasm kernel: keys [B, Hkv, hd, cap] transposed, values
// [B, Hkv, cap, hd], keyMask [B, cap]), then attends for each of its query heads with a running max and sum over tiles of
// 64 keys (the online softmax), so the cache's length is not bounded by workgroup memory. The key at `pos` is visible
// without reading keyMask, which another workgroup of the row marks: a workgroup reads only what it wrote or what
// earlier dispatches wrote. Keys the mask hides weigh exactly 0, as exp(s − 1e9 − max) does in the other paths.
import * as tf from '@tensorflow/tfjs';
import { checkDecodeInputs, type DecodeAttentionAttrs } from '../ops/ops';
import { dispatchOwn, newOutput, packUniforms } from './webgpu_own';
import { registerProgramKernel, workgroupReductions } from './webgpu_program';

const KERNEL = 'ClDecodeAttentionWebgpu';
const THREADS = 64;

function code(hd: number): string {
  const acc = Math.ceil(hd / THREADS);
  return `
struct U { B : i32, H : i32, Hkv : i32, cap : i32, pos : i32, p0 : i32, p1 : i32, p2 : i32, tab : array<vec4<f32>, ${hd}> };
@group(0) @binding(0) var<storage, read_write> ctx : array<f32>;
@group(0) @binding(1) var<storage, read> qkv : array<f32>;
@group(0) @binding(2) var<storage, read_write> keys : array<f32>;
@group(0) @binding(3) var<storage, read_write> vals : array<f32>;
@group(0) @binding(4) var<storage, read_write> kmask : array<f32>;
@group(0) @binding(5) var<uniform> u : U;
const HD = ${hd};
const HALF = ${hd / 2};
var<workgroup> qv : array<f32, ${hd}>;
var<workgroup> pr : array<f32, ${THREADS}>;
${workgroupReductions(THREADS)}
// the four RoPE rows: q's cos and sin (scaled by 1/√hd), the key's cos and sin
fn tab(t : i32, i : i32) -> f32 { let k = t * HD + i; return u.tab[k / 4][k % 4]; }
fn partner(i : i32) -> i32 { return select(i - HALF, i + HALF, i < HALF); }

@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) li : u32) {
  let lane = i32(li);
  let b = i32(wg.x) / u.Hkv;
  let g = i32(wg.x) % u.Hkv;
  let base = b * (u.H + 2 * u.Hkv) * HD;
  let kb = (b * u.Hkv + g) * HD * u.cap;
  let vb = (b * u.Hkv + g) * u.cap * HD;
  let kx = base + (u.H + g) * HD;
  let vx = base + (u.H + u.Hkv + g) * HD;
  for (var i = lane; i < HD; i = i + ${THREADS}) {
    keys[kb + i * u.cap + u.pos] = qkv[kx + i] * tab(2, i) + qkv[kx + partner(i)] * tab(3, i);
    vals[vb + u.pos * HD + i] = qkv[vx + i];
  }
  if (lane == 0 && g == 0) { kmask[b * u.cap + u.pos] = 1.0; }
  storageBarrier();
  let rep = u.H / u.Hkv;
  for (var r = 0; r < rep; r = r + 1) {
    let h = g * rep + r;
    let qx = base + h * HD;
    for (var i = lane; i < HD; i = i + ${THREADS}) { qv[i] = qkv[qx + i] * tab(0, i) + qkv[qx + partner(i)] * tab(1, i); }
    workgroupBarrier();
    var m = -3.0e38;
    var l = 0.0;
    var acc : array<f32, ${acc}>;
    for (var t0 = 0; t0 <= u.pos; t0 = t0 + ${THREADS}) {
      let j = t0 + lane;
      var s = -3.0e38;
      if (j <= u.pos && (j == u.pos || kmask[b * u.cap + j] > 0.0)) {
        var d = 0.0;
        for (var i = 0; i < HD; i = i + 1) { d = d + qv[i] * keys[kb + i * u.cap + j]; }
        s = d;
      }
      let mNew = max(m, reduceMax(s, lane));
      var p = 0.0;
      if (s > -1.0e38) { p = exp(s - mNew); }
      pr[lane] = p;
      let alpha = exp(m - mNew);
      l = l * alpha + reduceSum(p, lane);
      let n = min(${THREADS}, u.pos + 1 - t0);
      for (var a = 0; a < ${acc}; a = a + 1) {
        let i = lane + a * ${THREADS};
        if (i < HD) {
          var sum = 0.0;
          for (var jj = 0; jj < n; jj = jj + 1) { sum = sum + pr[jj] * vals[vb + (t0 + jj) * HD + i]; }
          acc[a] = acc[a] * alpha + sum;
        }
      }
      m = mNew;
      workgroupBarrier();
    }
    for (var a = 0; a < ${acc}; a = a + 1) {
      let i = lane + a * ${THREADS};
      if (i < HD) { ctx[(b * u.H + h) * HD + i] = acc[a] / l; }
    }
    workgroupBarrier();
  }
}`;
}

let registered = false;

/** Registers the kernel with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuDecode(): void {
  if (registered) return;
  registered = true;
  registerProgramKernel<DecodeAttentionAttrs>(KERNEL, (inputs, backend, a) => {
    const { qkv, keys, values, keyMask } = inputs;
    const { nHeads: H, nKvHeads: Hkv, headDim: hd, pos } = a;
    const B = qkv.shape[0];
    const cap = checkDecodeInputs(KERNEL, { qkv, keys, values, keyMask }, a);
    if (hd % 4 !== 0 || H % Hkv !== 0 || !(pos >= 0 && pos < cap)) throw new Error(`${KERNEL}: headDim ${hd}, heads ${H}/${Hkv}, pos ${pos} of ${cap}`);
    const tables = new Float32Array(4 * hd);
    for (let i = 0; i < hd; i++) {
      tables[i] = a.cos[i] * a.scale;
      tables[hd + i] = a.sin[i] * a.scale;
    }
    tables.set(a.cos, 2 * hd);
    tables.set(a.sin, 3 * hd);
    const ctx = newOutput(backend, [B, H * hd]);
    dispatchOwn(backend, {
      key: `cl_decode_attention_${hd}`,
      code: code(hd),
      bindings: [ctx, qkv, keys, values, keyMask],
      writes: [0, 2, 3, 4],
      uniforms: packUniforms([{ i32: [B, H, Hkv, cap, pos, 0, 0, 0] }, { f32: tables }]),
      workgroups: [B * Hkv, 1, 1],
    });
    return ctx;
  });
}

/** The op (ops.ts decodeAttention) on webgpu: the context [B, H·hd]; keys, values and keyMask are written in place. */
export function decodeAttentionWebgpu(
  qkv: tf.Tensor2D,
  keys: tf.Tensor4D,
  values: tf.Tensor4D,
  keyMask: tf.Tensor2D,
  attrs: DecodeAttentionAttrs,
): tf.Tensor2D {
  return tf.engine().runKernel(KERNEL, { qkv, keys, values, keyMask }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor2D;
}
