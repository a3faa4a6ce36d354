// Access to the tfjs wasm backend's heap and tensor records, shared by every kernel family here.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

export type Info = tf.TensorInfo;
export type FloatLike = Float32Array | Int32Array | Uint8Array;

// The parts of BackendWasm (dist/backend_wasm.js) these kernels use. Not all of them are public in its
// typings (dataIdNextNumber is private there), hence this structural view.
export interface TensorRecord {
  id: number;
  memoryOffset: number;
  shape: number[];
  dtype: tf.DataType;
  refCount: number;
}
export interface WasmModule {
  HEAPU8: Uint8Array;
  cwrap(name: string, ret: null, args: string[]): (...args: unknown[]) => void;
  tfjs: { registerTensor(id: number, size: number, memoryOffset: number): void; disposeData(id: number): void };
}
export interface WasmBackend {
  wasm: WasmModule;
  dataIdMap: { get(dataId: object): TensorRecord };
  dataIdNextNumber: number;
  makeOutput(shape: number[], dtype: tf.DataType): Info;
  typedArrayFromHeap(t: Info): FloatLike;
  disposeData(dataId: object): boolean;
  incRef(dataId: object): void;
}

export type KernelArgs = { inputs: tf.NamedTensorInfoMap; backend: object; attrs?: tf.NamedAttrMap };
export type MatMulFn = (
  aId: number,
  aShape: Uint8Array,
  aRank: number,
  bId: number,
  bShape: Uint8Array,
  bRank: number,
  transposeA: boolean,
  transposeB: boolean,
  outId: number,
) => void;

export const BYTES_F32 = 4;
export const sizeOf = (shape: readonly number[]) => shape.reduce((p, d) => p * d, 1);
export const shapeBytes = (shape: number[]) => new Uint8Array(new Int32Array(shape).buffer);
/** A float32's bits as an int32: how a float reaches the SIMD loops and the native kernels, whose arguments are all i32. */
export const f32Bits = (x: number) => new Int32Array(new Float32Array([x]).buffer)[0];

// Data-movement kernels work on one Int32Array over the whole wasm heap: float32 and int32 elements are both
// 4 bytes and a bit copy is exact for either, and a single array type keeps every copy loop monomorphic
// (mixing Float32Array/Int32Array/Uint8Array views at one site made them ~3× slower). The view is taken
// after the kernel's allocations, since growing the wasm memory replaces the buffer.
let heapBuffer: ArrayBufferLike | null = null;
let heapView: Int32Array = new Int32Array(0);
export function heap32(be: WasmBackend): Int32Array {
  const buf = be.wasm.HEAPU8.buffer;
  if (buf !== heapBuffer) {
    heapBuffer = buf;
    heapView = new Int32Array(buf);
  }
  return heapView;
}
/** Element offset of a 4-byte tensor in heap32. */
export const at32 = (be: WasmBackend, t: Info) => be.dataIdMap.get(t.dataId).memoryOffset >>> 2;
export const is4Bytes = (t: Info) => t.dtype === 'float32' || t.dtype === 'int32';

let heapF32Buffer: ArrayBufferLike | null = null;
let heapF32View: Float32Array = new Float32Array(0);
export function heapF32(be: WasmBackend): Float32Array {
  const buf = be.wasm.HEAPU8.buffer;
  if (buf !== heapF32Buffer) {
    heapF32Buffer = buf;
    heapF32View = new Float32Array(buf);
  }
  return heapF32View;
}

export function runKernel(name: string, args: KernelArgs): Info {
  const k = tf.getKernel(name, 'wasm');
  if (!k) throw new Error(`wasm kernel ${name} is not registered`);
  return k.kernelFunc(args as Parameters<tf.KernelFunc>[0]) as Info;
}
