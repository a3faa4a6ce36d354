// What our WGSL kernels need of tfjs-backend-webgpu's program interface (its WebGPUProgram, not exported): a program
// object with the inputs' names, the output's shape, the dispatch, the workgroup size and the uniforms it declares,
// and the backend's runWebGPUProgram, which compiles it once per shader key and runs it. `flatProgram` is the common
// case: one invocation per output element (index = the global invocation), or one workgroup per row.
import * as tf from '@tensorflow/tfjs';

/** The inputs a kernel function gets, by the names its op passed. */
export type KernelInputs = Record<string, tf.TensorInfo>;

/**
 * Registers a kernel of the webgpu backend whose function runs one of our programs: `run` gets its inputs by name, the
 * backend to run on, and its attributes.
 */
export function registerProgramKernel<A = Record<string, never>>(
  kernelName: string,
  run: (inputs: KernelInputs, backend: unknown, attrs: A) => tf.TensorInfo,
): void {
  tf.registerKernel({
    kernelName,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => run(inputs as KernelInputs, backend, attrs as unknown as A),
  });
}

export interface Program {
  variableNames: string[];
  outputShape: number[];
  shaderKey: string;
  dispatchLayout: { x: number[] };
  dispatch: [number, number, number];
  workgroupSize: [number, number, number];
  uniforms: string;
  size: boolean;
  getUserCode(): string;
}

export type Uniform = { type: 'int32' | 'float32'; data: number[] };

/** Runs a program on the webgpu backend that a kernel function was handed. */
export function runProgram(backend: unknown, p: Program, inputs: tf.TensorInfo[], uniforms: Uniform[]): tf.TensorInfo {
  return (backend as { runWebGPUProgram(p: Program, i: tf.TensorInfo[], dtype: 'float32', u: Uniform[]): tf.TensorInfo }).runWebGPUProgram(
    p,
    inputs,
    'float32',
    uniforms,
  );
}

/**
 * A program over `outputShape`: `workgroups` workgroups of `threads` invocations (one per output element when omitted),
 * `fn main(index : i32)` getting the global invocation index.
 */
export function flatProgram(o: {
  inputs: string[];
  outputShape: number[];
  key: string;
  uniforms: string;
  threads: number;
  workgroups?: number;
  code: string;
}): Program {
  const n = o.outputShape.reduce((a, d) => a * d, 1);
  return {
    variableNames: o.inputs,
    outputShape: o.outputShape,
    shaderKey: o.key,
    dispatchLayout: { x: o.outputShape.map((_, i) => i) },
    dispatch: [o.workgroups ?? Math.ceil(n / o.threads), 1, 1],
    workgroupSize: [o.threads, 1, 1],
    uniforms: o.uniforms,
    size: true,
    getUserCode: () => o.code,
  };
}

/** Max and sum over a workgroup of `threads` (a power of two) invocations, one value each: WGSL to prepend. */
export function workgroupReductions(threads: number): string {
  return `
  var<workgroup> red : array<f32, ${threads}>;
  fn reduceMax(x : f32, lane : i32) -> f32 {
    red[lane] = x;
    workgroupBarrier();
    for (var s = ${threads / 2}; s > 0; s = s / 2) {
      if (lane < s) { red[lane] = max(red[lane], red[lane + s]); }
      workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
  }
  fn reduceSum(x : f32, lane : i32) -> f32 {
    red[lane] = x;
    workgroupBarrier();
    for (var s = ${threads / 2}; s > 0; s = s / 2) {
      if (lane < s) { red[lane] = red[lane] + red[lane + s]; }
      workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
  }`;
}
