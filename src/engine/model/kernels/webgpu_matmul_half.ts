// a·W (+ add) with W a frozen weight in 16 bits (half.ts: two values a word along its columns), as one WGSL kernel for
// the webgpu backend; the gradient by a, dy·Wᵀ, is the same kernel reading W's tiles transposed. W has no gradient:
// only frozen weights are stored this way.
//
// A workgroup of 128 invocations computes a 32 × 64 tile of the output, 4 × 4 values each, over the reduction in
// steps of 32: each step stages a's 32 × 32 tile and W's 32 × 64 tile (unpacked to float32) in workgroup memory. The
// products accumulate in float32, in a fixed order: the same bits on every run on one adapter. The add is the
// epilogue's (the residual stream [M, N], or a bias [N]), as tfjs's fused product adds it, so a projection stays one
// dispatch. Up to 8 rows (a decode step) another kernel runs: one word of W's columns per invocation, for every row.
import * as tf from '@tensorflow/tfjs';
import { halfAttrs, unpackWgsl, type HalfFormat, type HalfWeight } from '../half';
import { registerProgramKernel, runProgram, type Program } from './webgpu_program';

const KERNEL = 'ClMatMulHalfWebgpu';
const TM = 32,
  TN = 64,
  TK = 32,
  THREADS = 128;

/** No add, the residual's [M, N], a bias's [N]. */
type AddMode = 0 | 1 | 2;

interface Attrs {
  format: HalfFormat;
  /** W's tiles read transposed: a·Wᵀ, for the gradient by a */
  transposed: boolean;
  /** W's stored [rows, cols], and the window's first column and the packed rows' length in values (half.ts) */
  rows: number;
  cols: number;
  from: number;
  stride: number;
}

/** WGSL that stages W's 32 × 64 tile of B (unpacked to float32) in workgroup memory: W itself, or W read transposed. */
function stageW(transposed: boolean): string {
  return transposed
    ? // B[kk][c] = W[col0 + c][k0 + kk]: 64 rows of W × 16 words of the reduction
      `for (var i = 0; i < ${(TN * TK) / 2 / THREADS}; i = i + 1) {
          let e = l + i * ${THREADS};
          let c = e / ${TK / 2};
          let pk = e % ${TK / 2};
          let gc = col0 + c;
          let gp = k0 / 2 + pk;
          var v = vec2<f32>(0.0, 0.0);
          if (gc < N && gp < K / 2) { v = unpackW(w[gc * uniforms.wStride + uniforms.wStart + gp]); }
          Bs[(2 * pk) * ${TN} + c] = v.x;
          Bs[(2 * pk + 1) * ${TN} + c] = v.y;
        }`
    : // B[kk][c] = W[k0 + kk][col0 + c]: 32 rows of W × 32 words of the columns
      `for (var i = 0; i < ${(TN * TK) / 2 / THREADS}; i = i + 1) {
          let e = l + i * ${THREADS};
          let kk = e / ${TN / 2};
          let pc = e % ${TN / 2};
          let gk = k0 + kk;
          let gp = col0 / 2 + pc;
          var v = vec2<f32>(0.0, 0.0);
          if (gk < K && gp < N / 2) { v = unpackW(w[gk * uniforms.wStride + uniforms.wStart + gp]); }
          Bs[kk * ${TN} + 2 * pc] = v.x;
          Bs[kk * ${TN} + 2 * pc + 1] = v.y;
        }`;
}

/**
 * The kernel for out [M, N] = a [M, K] · B, B [K, N] being W [K, N] (packed along N) or Wᵀ with W [N, K] (packed
 * along K, the reduction).
 */
function program(M: number, N: number, a: Attrs, addMode: AddMode): Program {
  const add = addMode === 1 ? ' + add[gr * N + gc]' : addMode === 2 ? ' + add[gc]' : '';
  return {
    variableNames: addMode ? ['a', 'w', 'add'] : ['a', 'w'],
    outputShape: [M, N],
    shaderKey: `cl_matmul_half_${a.format}_${a.transposed ? 't' : 'n'}_${addMode}`,
    dispatchLayout: { x: [0, 1] },
    dispatch: [Math.ceil(N / TN), Math.ceil(M / TM), 1],
    workgroupSize: [THREADS, 1, 1],
    // W's words per row and the window's first word (halfWindow)
    uniforms: 'm : i32, k : i32, n : i32, wStride : i32, wStart : i32,',
    size: true,
    getUserCode: () => `
      ${unpackWgsl(a.format)}
      var<workgroup> As : array<f32, ${TM * TK}>;
      var<workgroup> Bs : array<f32, ${TK * TN}>;
      fn main(index : i32) {
        let M = uniforms.m;
        let K = uniforms.k;
        let N = uniforms.n;
        let l = i32(localIndex);
        let row0 = i32(workgroupId.y) * ${TM};
        let col0 = i32(workgroupId.x) * ${TN};
        let tr = l / ${TN / 4};
        let tc = l % ${TN / 4};
        var acc : array<vec4<f32>, 4>;
        for (var k0 = 0; k0 < K; k0 = k0 + ${TK}) {
          for (var i = 0; i < ${(TM * TK) / THREADS}; i = i + 1) {
            let e = l + i * ${THREADS};
            let r = e / ${TK};
            let kk = e % ${TK};
            let gr = row0 + r;
            let gk = k0 + kk;
            var v = 0.0;
            if (gr < M && gk < K) { v = a[gr * K + gk]; }
            As[e] = v;
          }
          ${stageW(a.transposed)}
          workgroupBarrier();
          for (var kk = 0; kk < ${TK}; kk = kk + 1) {
            let b = vec4<f32>(Bs[kk * ${TN} + tc * 4], Bs[kk * ${TN} + tc * 4 + 1], Bs[kk * ${TN} + tc * 4 + 2], Bs[kk * ${TN} + tc * 4 + 3]);
            for (var i = 0; i < 4; i = i + 1) {
              acc[i] = acc[i] + As[(tr * 4 + i) * ${TK} + kk] * b;
            }
          }
          workgroupBarrier();
        }
        for (var i = 0; i < 4; i = i + 1) {
          let gr = row0 + tr * 4 + i;
          if (gr < M) {
            for (var j = 0; j < 4; j = j + 1) {
              let gc = col0 + tc * 4 + j;
              if (gc < N) { setOutputAtIndex(gr * N + gc, acc[i][j]${add}); }
            }
          }
        }
      }`,
  };
}

/** Rows up to which a product runs as the decode step's kernel below: one row per sequence of a decode batch. */
const FEW_ROWS = 8;
const FEW_THREADS = 64;
const FEW_TK = 64;

/**
 * out [M, N] = a [M, K] · W [K, N] for M ≤ 8 (a decode step's rows): each invocation owns one word of W's columns (two
 * outputs) for every row, so W is read once and no lane computes a padded row, where the tiled kernel's 32-row tiles
 * would leave 7 in 8 idle. a's rows are staged 64 values of the reduction at a time.
 */
function fewRowsProgram(M: number, N: number, a: Attrs, addMode: AddMode): Program {
  const add = (c: string) => (addMode === 1 ? ` + add[m * N + ${c}]` : addMode === 2 ? ` + add[${c}]` : '');
  return {
    variableNames: addMode ? ['a', 'w', 'add'] : ['a', 'w'],
    outputShape: [M, N],
    shaderKey: `cl_matmul_half_few_${a.format}_${addMode}`,
    dispatchLayout: { x: [0, 1] },
    dispatch: [Math.ceil(N / 2 / FEW_THREADS), 1, 1],
    workgroupSize: [FEW_THREADS, 1, 1],
    uniforms: 'm : i32, k : i32, n : i32, wStride : i32, wStart : i32,',
    size: true,
    getUserCode: () => `
      ${unpackWgsl(a.format)}
      var<workgroup> xs : array<f32, ${FEW_ROWS * FEW_TK}>;
      fn main(index : i32) {
        let M = uniforms.m;
        let K = uniforms.k;
        let N = uniforms.n;
        let l = i32(localIndex);
        let word = i32(workgroupId.x) * ${FEW_THREADS} + l;
        var acc : array<vec2<f32>, ${FEW_ROWS}>;
        for (var k0 = 0; k0 < K; k0 = k0 + ${FEW_TK}) {
          for (var i = l; i < ${FEW_ROWS * FEW_TK}; i = i + ${FEW_THREADS}) {
            let m = i / ${FEW_TK};
            let kk = i % ${FEW_TK};
            var v = 0.0;
            if (m < M && k0 + kk < K) { v = a[m * K + k0 + kk]; }
            xs[i] = v;
          }
          workgroupBarrier();
          if (word < N / 2) {
            let kn = min(${FEW_TK}, K - k0);
            for (var kk = 0; kk < kn; kk = kk + 1) {
              let w2 = unpackW(w[(k0 + kk) * uniforms.wStride + uniforms.wStart + word]);
              for (var m = 0; m < M; m = m + 1) { acc[m] = acc[m] + xs[m * ${FEW_TK} + kk] * w2; }
            }
          }
          workgroupBarrier();
        }
        if (word < N / 2) {
          for (var m = 0; m < M; m = m + 1) {
            setOutputAtIndex(m * N + 2 * word, acc[m].x${add('2 * word')});
            setOutputAtIndex(m * N + 2 * word + 1, acc[m].y${add('2 * word + 1')});
          }
        }
      }`,
  };
}

let registered = false;

/** Registers the kernel with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuMatMulHalf(): void {
  if (registered) return;
  registered = true;
  registerProgramKernel<Attrs>(KERNEL, ({ a, w, add }, backend, attrs) => {
    const [M, K] = a.shape;
    const N = attrs.transposed ? attrs.rows : attrs.cols;
    const reduction = attrs.transposed ? attrs.cols : attrs.rows;
    if (K !== reduction) throw new Error(`${KERNEL}: a is [${a.shape}], W is [${attrs.rows}, ${attrs.cols}]${attrs.transposed ? ' (transposed)' : ''}`);
    const mode: AddMode = !add ? 0 : add.shape.length === 1 ? 2 : 1;
    if (add && (mode === 2 ? add.shape[0] !== N : add.shape[0] !== M || add.shape[1] !== N))
      throw new Error(`${KERNEL}: add is [${add.shape}], the product [${M}, ${N}]`);
    const uniforms = [M, K, N, attrs.stride / 2, attrs.from / 2].map((v) => ({ type: 'int32' as const, data: [v] }));
    const p = !attrs.transposed && M <= FEW_ROWS ? fewRowsProgram(M, N, attrs, mode) : program(M, N, attrs, mode);
    return runProgram(backend, p, add ? [a, w, add] : [a, w], uniforms);
  });
}

const run = (a: tf.Tensor2D, w: HalfWeight, transposed: boolean, add: tf.Tensor | null): tf.Tensor2D =>
  tf.engine().runKernel(KERNEL, add ? { a, w: w.packed, add } : { a, w: w.packed }, {
    ...halfAttrs(w),
    transposed,
  } as unknown as tf.NamedAttrMap) as tf.Tensor2D;

/** a [M, K] · W [K, N] (+ add: [M, N] or [N]), differentiable in a and add: 1 dispatch each way. */
export function matMulHalfWebgpu(a: tf.Tensor2D, w: HalfWeight, add: tf.Tensor | null): tf.Tensor2D {
  if (!tf.engine().isTapeOn()) return run(a, w, false, add);
  const bias = add?.rank === 1;
  const f = (x: tf.Tensor2D, save: tf.GradSaveFunc, z?: tf.Tensor) => {
    save([]);
    return {
      value: run(x, w, false, z ?? null),
      gradFunc: (dy: tf.Tensor2D) => {
        const dx = run(dy, w, true, null);
        return z ? [dx, bias ? tf.sum(dy, 0) : dy] : dx;
      },
    };
  };
  if (!add) {
    const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => f(args[0] as tf.Tensor2D, args[1] as tf.GradSaveFunc));
    return op(a) as tf.Tensor2D;
  }
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => f(args[0] as tf.Tensor2D, args[2] as tf.GradSaveFunc, args[1] as tf.Tensor));
  return op(a, add) as tf.Tensor2D;
}
