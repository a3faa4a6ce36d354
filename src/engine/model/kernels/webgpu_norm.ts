// RMSNorm as WGSL kernels for the webgpu backend. The composition of tfjs ops dispatched 5 kernels forward and about 10
// backward per norm (square, mean, add, rsqrt, two multiplies; the closed-form gradient's multiplies, a power, a mean, a
// subtract and a column sum), and a GRPO step of the example runs 5 norms per layer pass: the dispatch count, not the
// arithmetic, is what a step costs on a GPU (bench/dispatch.ts counts them). Here, with r = (mean(x²) + ε)^(−½):
//   forward   r per row (one workgroup per row, a tree reduction), then y = x·r·w (one thread per element): 2 dispatches
//   infer     r and y in one workgroup per row: 1 dispatch (the decode step keeps nothing for a backward pass)
//   backward  dx = r·g − x·r³·mean(g·x) with g = dy·w (one workgroup per row), and dw = Σ_rows dy·x·r (one workgroup per
//             column): 2 dispatches
// Every sum adds in a fixed order (lane strides, then the workgroup tree), so a run gives the same bits each time on
// one adapter. ops_tables.test.ts checks values and gradients against the composition on cpu.
import * as tf from '@tensorflow/tfjs';
import { flatProgram, registerProgramKernel, runProgram, workgroupReductions, type KernelInputs, type Program } from './webgpu_program';

const R = 'ClRmsNormRWebgpu';
const Y = 'ClRmsNormYWebgpu';
const INFER = 'ClRmsNormInferWebgpu';
const DX = 'ClRmsNormDxWebgpu';
const DW = 'ClRmsNormDwWebgpu';
const ROW_THREADS = 64;
const ELEM_THREADS = 128;
const UNIFORMS = 'd : i32, eps : f32,';

/** r of the row this workgroup owns, from x (the lanes stride the row, then the tree adds their sums). */
const ROW_R = `
        let row = index / ${ROW_THREADS};
        let lane = i32(localId.x);
        let d = uniforms.d;
        let base = row * d;
        var acc = 0.0;
        for (var j = lane; j < d; j = j + ${ROW_THREADS}) { let v = x[base + j]; acc = acc + v * v; }
        let r = inverseSqrt(reduceSum(acc, lane) / f32(d) + uniforms.eps);`;

const rowProgram = (key: string, inputs: string[], outputShape: number[], rows: number, body: string): Program =>
  flatProgram({
    inputs,
    outputShape,
    key,
    uniforms: UNIFORMS,
    threads: ROW_THREADS,
    workgroups: rows,
    code: `
      ${workgroupReductions(ROW_THREADS)}
      fn main(index : i32) {${body}
      }`,
  });

const rProgram = (N: number) => rowProgram('cl_rms_r', ['x'], [N], N, `${ROW_R}\n        if (lane == 0) { setOutputAtIndex(row, r); }`);

const inferProgram = (N: number, d: number) =>
  rowProgram(
    'cl_rms_infer',
    ['x', 'w'],
    [N, d],
    N,
    `${ROW_R}\n        for (var j = lane; j < d; j = j + ${ROW_THREADS}) { setOutputAtIndex(base + j, x[base + j] * r * w[j]); }`,
  );

const yProgram = (N: number, d: number) =>
  flatProgram({
    inputs: ['x', 'w', 'r'],
    outputShape: [N, d],
    key: 'cl_rms_y',
    uniforms: UNIFORMS,
    threads: ELEM_THREADS,
    code: `
      fn main(index : i32) {
        if (index < uniforms.size) {
          let row = index / uniforms.d;
          setOutputAtIndex(index, x[index] * r[row] * w[index - row * uniforms.d]);
        }
      }`,
  });

const dxProgram = (N: number, d: number) =>
  rowProgram(
    'cl_rms_dx',
    ['dy', 'x', 'w', 'r'],
    [N, d],
    N,
    `
        let row = index / ${ROW_THREADS};
        let lane = i32(localId.x);
        let d = uniforms.d;
        let base = row * d;
        let rr = r[row];
        var acc = 0.0;
        for (var j = lane; j < d; j = j + ${ROW_THREADS}) { acc = acc + dy[base + j] * w[j] * x[base + j]; }
        let k = rr * rr * rr * reduceSum(acc, lane) / f32(d);
        for (var j = lane; j < d; j = j + ${ROW_THREADS}) {
          setOutputAtIndex(base + j, rr * dy[base + j] * w[j] - x[base + j] * k);
        }`,
  );

const dwProgram = (N: number, d: number) =>
  flatProgram({
    inputs: ['dy', 'x', 'r'],
    outputShape: [d],
    key: 'cl_rms_dw',
    uniforms: 'd : i32, eps : f32, rows : i32,',
    threads: ROW_THREADS,
    workgroups: d,
    code: `
      ${workgroupReductions(ROW_THREADS)}
      fn main(index : i32) {
        let col = index / ${ROW_THREADS};
        let lane = i32(localId.x);
        let d = uniforms.d;
        var acc = 0.0;
        for (var n = lane; n < uniforms.rows; n = n + ${ROW_THREADS}) { acc = acc + dy[n * d + col] * x[n * d + col] * r[n]; }
        let total = reduceSum(acc, lane);
        if (lane == 0) { setOutputAtIndex(col, total); }
      }`,
  });

const uniforms = (d: number, eps: number) => [
  { type: 'int32' as const, data: [d] },
  { type: 'float32' as const, data: [eps] },
];

let registered = false;

/** Registers the norm's kernels with the webgpu backend (once): the webgpu table's register() (ops/webgpu.ts). */
export function registerWebgpuNorm(): void {
  if (registered) return;
  registered = true;
  const kernel = (kernelName: string, run: (i: KernelInputs, backend: unknown, eps: number) => tf.TensorInfo) =>
    registerProgramKernel<{ eps: number }>(kernelName, (i, backend, a) => run(i, backend, a.eps));
  kernel(R, ({ x }, b, eps) => runProgram(b, rProgram(x.shape[0]), [x], uniforms(x.shape[1], eps)));
  kernel(Y, ({ x, w, r }, b, eps) => runProgram(b, yProgram(x.shape[0], x.shape[1]), [x, w, r], uniforms(x.shape[1], eps)));
  kernel(INFER, ({ x, w }, b, eps) => runProgram(b, inferProgram(x.shape[0], x.shape[1]), [x, w], uniforms(x.shape[1], eps)));
  kernel(DX, ({ dy, x, w, r }, b, eps) => runProgram(b, dxProgram(x.shape[0], x.shape[1]), [dy, x, w, r], uniforms(x.shape[1], eps)));
  kernel(DW, ({ dy, x, r }, b, eps) =>
    runProgram(b, dwProgram(x.shape[0], x.shape[1]), [dy, x, r], [...uniforms(x.shape[1], eps), { type: 'int32', data: [x.shape[0]] }]),
  );
}

const run = (name: string, inputs: Record<string, tf.Tensor>, eps: number) => tf.engine().runKernel(name, inputs, { eps }) as tf.Tensor;

/**
 * x [N, d] · r · w, differentiable in x and w: 2 dispatches forward, 2 backward. Outside a gradient's scope (a rollout's
 * prefill and decode through the full forward) nothing will ask for r again, so it is the one-dispatch infer kernel.
 */
export function rmsNormWebgpu(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  if (!tf.engine().isTapeOn()) return rmsNormInferWebgpu(x, w, eps);
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [xx, ww, save] = args as [tf.Tensor2D, tf.Tensor1D, tf.GradSaveFunc];
    const r = run(R, { x: xx }, eps);
    save([xx, ww, r]);
    return {
      value: run(Y, { x: xx, w: ww, r }, eps) as tf.Tensor2D,
      gradFunc: (dy: tf.Tensor2D, [xs, ws, rs]: tf.Tensor[]) => [run(DX, { dy, x: xs, w: ws, r: rs }, eps), run(DW, { dy, x: xs, r: rs }, eps)],
    };
  });
  return op(x, w);
}

/** rmsNorm's value with nothing kept for a backward pass: 1 dispatch. */
export function rmsNormInferWebgpu(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  return run(INFER, { x, w }, eps) as tf.Tensor2D;
}
