// Kernels that make the wasm backend of @tensorflow/tfjs-backend-wasm 4.22 fit for training.
//
// Measured on Node 20 (bench/kernels.ts prints the figures), the stock backend has these problems in a
// training step:
// - it has no UnsortedSegmentSum kernel, so the gradient of tf.gather (embedding lookups) throws;
// - its BatchMatMul reaches XNNPACK's fully-connected operator (~40 GFLOP/s) only when neither side is
//   transposed and the batch is 1; everything else runs a scalar triple loop at 1.5–3.5 GFLOP/s. Gradients
//   of matMul are transposed products and attention is batched, so a step spent ~90% of its time there.
//   That loop also reads past `b` when only `a` is batched and computes only the first batch when only `b`
//   is, so broadcast batches come out wrong;
// - Transpose of rank 5+ allocates per element (~50 ns/element) and its rank-2 loop thrashes the cache on
//   large power-of-two shapes; Sum over a leading axis goes through that transpose; Slice and SplitV copy
//   the whole input out of the heap before taking a piece; Gather of rows or columns runs at ~25 ns/element.
// The replacements keep the stock kernels' values (exactly for data movement; products and sums only up to
// float rounding, from a different summation order) and route the work onto fast paths.
//
// The fast paths are mostly our own WebAssembly SIMD loops (a small module built below, run on the backend's
// memory): a 4×8-tile product that needs no packing and no per-product setup (~45 GFLOP/s, where XNNPACK's
// 41 GFLOP/s shrink to ~28 for a fresh right operand, i.e. every gradient product), 4×4-block transposes,
// float64-accumulated column sums. Large products are shared with a helper thread (the second core).
// Kernels that stock tfjs does not have serve model.ts: decode attention on an in-place KV cache, RoPE, and
// SwiGLU with its gradient.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

type Info = tf.TensorInfo;
type FloatLike = Float32Array | Int32Array | Uint8Array;

// The parts of BackendWasm (dist/backend_wasm.js) these kernels use. Not all of them are public in its
// typings (dataIdNextNumber is private there), hence this structural view.
interface TensorRecord { id: number; memoryOffset: number; shape: number[]; dtype: tf.DataType; refCount: number }
interface WasmModule {
  HEAPU8: Uint8Array;
  cwrap(name: string, ret: null, args: string[]): (...args: unknown[]) => void;
  tfjs: { registerTensor(id: number, size: number, memoryOffset: number): void; disposeData(id: number): void };
}
interface WasmBackend {
  wasm: WasmModule;
  dataIdMap: { get(dataId: object): TensorRecord };
  dataIdNextNumber: number;
  makeOutput(shape: number[], dtype: tf.DataType): Info;
  typedArrayFromHeap(t: Info): FloatLike;
  disposeData(dataId: object): boolean;
  incRef(dataId: object): void;
}

type KernelArgs = { inputs: tf.NamedTensorInfoMap; backend: object; attrs?: tf.NamedAttrMap };
type MatMulFn = (aId: number, aShape: Uint8Array, aRank: number, bId: number, bShape: Uint8Array, bRank: number,
  transposeA: boolean, transposeB: boolean, outId: number) => void;

const BYTES_F32 = 4;
const sizeOf = (shape: readonly number[]) => shape.reduce((p, d) => p * d, 1);
const shapeBytes = (shape: number[]) => new Uint8Array(new Int32Array(shape).buffer);

// Data-movement kernels work on one Int32Array over the whole wasm heap: float32 and int32 elements are both
// 4 bytes and a bit copy is exact for either, and a single array type keeps every copy loop monomorphic
// (mixing Float32Array/Int32Array/Uint8Array views at one site made them ~3× slower). The view is taken
// after the kernel's allocations, since growing the wasm memory replaces the buffer.
let heapBuffer: ArrayBufferLike | null = null;
let heapView: Int32Array = new Int32Array(0);
function heap32(be: WasmBackend): Int32Array {
  const buf = be.wasm.HEAPU8.buffer;
  if (buf !== heapBuffer) { heapBuffer = buf; heapView = new Int32Array(buf); }
  return heapView;
}
/** Element offset of a 4-byte tensor in heap32. */
const at32 = (be: WasmBackend, t: Info) => be.dataIdMap.get(t.dataId).memoryOffset >>> 2;
const is4Bytes = (t: Info) => t.dtype === 'float32' || t.dtype === 'int32';

// ---- WebAssembly SIMD loops -------------------------------------------------------------------------------
//
// A few inner loops that neither the stock kernels nor JavaScript run well (JS manages ~0.3–1 GMAC/s and
// 1.5–2.5 ns per transposed element) are compiled from the bytes below into a small module that imports the
// backend's own memory, so they work on tensors in place. The encoder covers only what those loops use.

// A minimal WebAssembly encoder: i32 arithmetic, blocks and loops, f32x4 loads, stores, arithmetic and shuffles.
const leb = (n: number): number[] => {
  const out: number[] = [];
  do { let b = n & 0x7f; n >>>= 7; if (n) b |= 0x80; out.push(b); } while (n);
  return out;
};
const sleb = (n: number): number[] => {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && !(b & 0x40)) || (n === -1 && (b & 0x40))) { out.push(b); return out; }
    out.push(b | 0x80);
  }
};
const vec = (items: number[][]): number[] => [...leb(items.length), ...items.flat()];
const str = (s: string): number[] => [...leb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
const I32 = 0x7f, V128 = 0x7b;
const simd = (code: number, ...imm: number[]) => [0xfd, ...leb(code), ...imm];
const W = {
  get: (i: number) => [0x20, ...leb(i)], set: (i: number) => [0x21, ...leb(i)], tee: (i: number) => [0x22, ...leb(i)],
  i32: (n: number) => [0x41, ...sleb(n)], add: [0x6a], sub: [0x6b], mul: [0x6c], and: [0x71], shl: [0x74], geU: [0x4f],
  gtS: [0x4a], ltU: [0x49], eqz: [0x45], select: [0x1b], if: [0x04, 0x40], else: [0x05],
  f32: (x: number) => [0x43, ...new Uint8Array(new Float32Array([x]).buffer)],
  f32load: [0x2a, 2, 0], block: [0x02, 0x40], loop: [0x03, 0x40], end: [0x0b],
  br: (depth: number) => [0x0c, ...leb(depth)], brIf: (depth: number) => [0x0d, ...leb(depth)],
  // v128.load / store with 4-byte alignment (cache rows start at any multiple of 4 floats' worth of bytes)
  vload: simd(0, 2, 0), vstore: simd(11, 2, 0), vload16: simd(0, 2, 16), vstore16: simd(11, 2, 16), splat: simd(19), vzero: simd(12, ...new Array(16).fill(0)),
  fadd: simd(228), fsub: simd(229), fmul: simd(230), fdiv: simd(231), fneg: simd(225),
  // pmin / pmax: plain minps / maxps (min / max propagate NaN through several instructions)
  fpmin: simd(234), fpmax: simd(235),
  i32x4Sub: simd(177), i32x4Shl: simd(171),
  promoteLow: simd(95), dadd: simd(240),
  vstoreAt: (offset: number) => simd(11, 2, ...leb(offset)),
  /** i8x16.shuffle picking f32 lanes of (a, b): lanes 0–3 from a, 4–7 from b */
  shuffle: (lanes: number[]) => simd(13, ...lanes.flatMap((l) => [4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3])),
};
/** A function body: locals declared as [count, type] runs, then the code. */
function wasmFunc(locals: [number, number][], code: number[][]): number[] {
  const body = [...vec(locals.map(([n, t]) => [...leb(n), t])), ...code.flat(), ...W.end];
  return [...leb(body.length), ...body];
}

// scores(q, k, m, out, hd, kStride, n): out[t] = Σ_j q[j]·k[j·kStride/4 + t] + (m[t] − 1)·1e9 for t < n (a
// multiple of 4), 4 keys per iteration. Pointers are byte addresses; k is a [hd, capacity] block of the
// transposed key cache and m the row's 1/0 key mask, so hidden keys get the same −1e9 as the generic path.
// Locals: 0 q, 1 k, 2 m, 3 out, 4 hd, 5 kStride, 6 n | 7 t (bytes), 8 j, 9 kp, 10 qp, 11 end | 12 acc
const scoresFn = wasmFunc([[5, I32], [1, V128]], [
  W.i32(0), W.set(7), W.get(6), W.i32(2), W.shl, W.set(11),
  W.block, W.loop,
  W.get(7), W.get(11), W.geU, W.brIf(1),
  W.vzero, W.set(12), W.get(1), W.get(7), W.add, W.set(9), W.get(0), W.set(10), W.get(4), W.set(8),
  W.block, W.loop,
  W.get(12), W.get(10), W.f32load, W.splat, W.get(9), W.vload, W.fmul, W.fadd, W.set(12),
  W.get(10), W.i32(4), W.add, W.set(10), W.get(9), W.get(5), W.add, W.set(9),
  W.get(8), W.i32(1), W.sub, W.tee(8), W.brIf(0),
  W.end, W.end,
  W.get(3), W.get(7), W.add,
  W.get(12), W.get(2), W.get(7), W.add, W.vload, W.f32(1), W.splat, W.fsub, W.f32(1e9), W.splat, W.fmul, W.fadd,
  W.vstore,
  W.get(7), W.i32(16), W.add, W.set(7), W.br(0),
  W.end, W.end,
]);
// context(p, v, out, n, hd): out[j] = Σ_{t<n} p[t]·v[t·hd + j] for j < hd (a multiple of 4), 4 dims at a time.
// Locals: 0 p, 1 v, 2 out, 3 n, 4 hd | 5 j (bytes), 6 t, 7 pp, 8 vp, 9 row bytes | 10 acc
const contextFn = wasmFunc([[5, I32], [1, V128]], [
  W.i32(0), W.set(5), W.get(4), W.i32(2), W.shl, W.set(9),
  W.block, W.loop,
  W.get(5), W.get(9), W.geU, W.brIf(1),
  W.vzero, W.set(10), W.get(0), W.set(7), W.get(1), W.get(5), W.add, W.set(8), W.get(3), W.set(6),
  W.block, W.loop,
  W.get(10), W.get(7), W.f32load, W.splat, W.get(8), W.vload, W.fmul, W.fadd, W.set(10),
  W.get(7), W.i32(4), W.add, W.set(7), W.get(8), W.get(9), W.add, W.set(8),
  W.get(6), W.i32(1), W.sub, W.tee(6), W.brIf(0),
  W.end, W.end,
  W.get(2), W.get(5), W.add, W.get(10), W.vstore,
  W.get(5), W.i32(16), W.add, W.set(5), W.br(0),
  W.end, W.end,
]);
// transpose(src, dst, R, C): dst[c·R + r] = src[r·C + c] for r < R & ~3, c < C & ~3 (the caller copies the
// ragged edges), in 4×4 blocks: four row loads, eight shuffles, four column stores. Columns outside, rows
// inside: each block's stores continue the previous block's four output rows, so writes stream; the other order
// scatters them R floats apart and, for power-of-two R, onto the same few cache sets.
// Locals: 0 src, 1 dst, 2 R, 3 C | 4 r, 5 c, 6 R4, 7 C4, 8 row bytes, 9 column bytes, 10 s, 11 d | 12–19 v128
const transposeFn = wasmFunc([[8, I32], [8, V128]], [
  W.get(2), W.i32(-4), W.and, W.set(6), W.get(3), W.i32(-4), W.and, W.set(7),
  W.get(3), W.i32(2), W.shl, W.set(8), W.get(2), W.i32(2), W.shl, W.set(9),
  W.i32(0), W.set(5),
  W.block, W.loop,
  W.get(5), W.get(7), W.geU, W.brIf(1),
  W.i32(0), W.set(4),
  W.block, W.loop,
  W.get(4), W.get(6), W.geU, W.brIf(1),
  // s = src + r·rowBytes + 4c; rows r..r+3 → locals 12–15
  W.get(0), W.get(4), W.get(8), W.mul, W.add, W.get(5), W.i32(2), W.shl, W.add, W.tee(10), W.vload, W.set(12),
  W.get(10), W.get(8), W.add, W.tee(10), W.vload, W.set(13),
  W.get(10), W.get(8), W.add, W.tee(10), W.vload, W.set(14),
  W.get(10), W.get(8), W.add, W.vload, W.set(15),
  W.get(12), W.get(13), W.shuffle([0, 4, 1, 5]), W.set(16), W.get(12), W.get(13), W.shuffle([2, 6, 3, 7]), W.set(17),
  W.get(14), W.get(15), W.shuffle([0, 4, 1, 5]), W.set(18), W.get(14), W.get(15), W.shuffle([2, 6, 3, 7]), W.set(19),
  // d = dst + c·columnBytes + 4r; columns c..c+3
  W.get(1), W.get(5), W.get(9), W.mul, W.add, W.get(4), W.i32(2), W.shl, W.add, W.tee(11),
  W.get(16), W.get(18), W.shuffle([0, 1, 4, 5]), W.vstore,
  W.get(11), W.get(9), W.add, W.tee(11), W.get(16), W.get(18), W.shuffle([2, 3, 6, 7]), W.vstore,
  W.get(11), W.get(9), W.add, W.tee(11), W.get(17), W.get(19), W.shuffle([0, 1, 4, 5]), W.vstore,
  W.get(11), W.get(9), W.add, W.get(17), W.get(19), W.shuffle([2, 3, 6, 7]), W.vstore,
  W.get(4), W.i32(4), W.add, W.set(4), W.br(0),
  W.end, W.end,
  W.get(5), W.i32(4), W.add, W.set(5), W.br(0),
  W.end, W.end,
]);

// gemm(A, B, C, M, K, N, lda, ldb, ldc, acc): C[M, N] (+)= A[M, K]·B[K, N], row-major with byte row strides, for
// M ≥ 4, N ≥ 8, K ≥ 1, in 4×8 tiles (eight f32x4 accumulators; B read in place, no packing). acc ≠ 0 adds to C
// (a later block of K). The last tile of a row or column range is shifted back to end at M or N, recomputing a
// few entries instead of handling ragged tails — so with acc ≠ 0, M and N must be multiples of 4 and 8.
// Locals: 0 A, 1 B, 2 C, 3 M, 4 K, 5 N, 6 lda, 7 ldb, 8 ldc, 9 acc | 10 i0, 11 j0, 12 i, 13 j, 14 k, 15 pa, 16 pb,
// 17 pc, 18 2·lda, 19 3·lda, 20 M − 4, 21 N − 8 | 22–29 accumulators, 30–31 B row, 32 A splat
const accMulAdd = (acc: number, b: number) => [...W.get(acc), ...W.get(32), ...W.get(b), ...W.fmul, ...W.fadd, ...W.set(acc)];
const gemmFn = wasmFunc([[12, I32], [11, V128]], [
  W.get(6), W.i32(1), W.shl, W.set(18), W.get(18), W.get(6), W.add, W.set(19),
  W.get(3), W.i32(4), W.sub, W.set(20), W.get(5), W.i32(8), W.sub, W.set(21),
  W.i32(0), W.set(10),
  W.block, W.loop,
  W.get(10), W.get(3), W.geU, W.brIf(1),
  W.get(20), W.get(10), W.get(10), W.get(20), W.gtS, W.select, W.set(12),
  W.i32(0), W.set(11),
  W.block, W.loop,
  W.get(11), W.get(5), W.geU, W.brIf(1),
  W.get(21), W.get(11), W.get(11), W.get(21), W.gtS, W.select, W.set(13),
  W.get(2), W.get(12), W.get(8), W.mul, W.add, W.get(13), W.i32(2), W.shl, W.add, W.set(17),
  // accumulators: zero, or this tile of C
  W.get(9), W.eqz, W.if,
  ...[22, 23, 24, 25, 26, 27, 28, 29].map((l) => [...W.vzero, ...W.set(l)]),
  W.else,
  ...[0, 1, 2, 3].map((r) => [...W.get(17), ...W.get(8), ...W.i32(r), ...W.mul, ...W.add, ...W.tee(16), ...W.vload,
    ...W.set(22 + 2 * r), ...W.get(16), ...W.vload16, ...W.set(23 + 2 * r)]),
  W.end,
  W.get(0), W.get(12), W.get(6), W.mul, W.add, W.set(15),
  W.get(1), W.get(13), W.i32(2), W.shl, W.add, W.set(16),
  W.get(4), W.set(14),
  W.loop,
  W.get(16), W.vload, W.set(30), W.get(16), W.vload16, W.set(31),
  ...[0, 6, 18, 19].map((off, r) => [
    ...(off === 0 ? W.get(15) : [...W.get(15), ...W.get(off), ...W.add]), ...W.f32load, ...W.splat, ...W.set(32),
    ...accMulAdd(22 + 2 * r, 30), ...accMulAdd(23 + 2 * r, 31)]),
  W.get(15), W.i32(4), W.add, W.set(15), W.get(16), W.get(7), W.add, W.set(16),
  W.get(14), W.i32(1), W.sub, W.tee(14), W.brIf(0),
  W.end,
  ...[0, 1, 2, 3].map((r) => [
    ...(r === 0 ? [] : [...W.get(17), ...W.get(8), ...W.add, ...W.set(17)]),
    ...W.get(17), ...W.get(22 + 2 * r), ...W.vstore, ...W.get(17), ...W.get(23 + 2 * r), ...W.vstore16]),
  W.get(11), W.i32(8), W.add, W.set(11), W.br(0),
  W.end, W.end,
  W.get(10), W.i32(4), W.add, W.set(10), W.br(0),
  W.end, W.end,
]);

// colsum(x, out, R, C, C8): out[c] = Σ_{r<R} x[r·C + c] for c < C8 (a multiple of 8; the caller sums the other
// columns), accumulated in float64 like the JS reduction it replaces: each f32x4 of a row is widened to two f64x2.
// out is a float64 buffer. Locals: 0 x, 1 out, 2 R, 3 C, 4 C8 | 5 column bytes, 6 r, 7 p, 8 row bytes, 9 end,
// 10 po | 11–12 row values, 13–16 accumulators
const colsumFn = wasmFunc([[6, I32], [6, V128]], [
  W.get(3), W.i32(2), W.shl, W.set(8), W.get(4), W.i32(2), W.shl, W.set(9), W.i32(0), W.set(5), W.get(1), W.set(10),
  W.block, W.loop,
  W.get(5), W.get(9), W.geU, W.brIf(1),
  ...[13, 14, 15, 16].map((l) => [...W.vzero, ...W.set(l)]),
  W.get(0), W.get(5), W.add, W.set(7), W.get(2), W.set(6),
  W.loop,
  W.get(7), W.vload, W.set(11), W.get(7), W.vload16, W.set(12),
  W.get(13), W.get(11), W.promoteLow, W.dadd, W.set(13),
  W.get(14), W.get(11), W.get(11), W.shuffle([2, 3, 0, 1]), W.promoteLow, W.dadd, W.set(14),
  W.get(15), W.get(12), W.promoteLow, W.dadd, W.set(15),
  W.get(16), W.get(12), W.get(12), W.shuffle([2, 3, 0, 1]), W.promoteLow, W.dadd, W.set(16),
  W.get(7), W.get(8), W.add, W.set(7),
  W.get(6), W.i32(1), W.sub, W.tee(6), W.brIf(0),
  W.end,
  W.get(10), W.get(13), W.vstore, W.get(10), W.get(14), W.vstore16,
  W.get(10), W.get(15), W.vstoreAt(32), W.get(10), W.get(16), W.vstoreAt(48),
  W.get(10), W.i32(64), W.add, W.set(10), W.get(5), W.i32(32), W.add, W.set(5), W.br(0),
  W.end, W.end,
]);

// rope(x, c, s, y, rows, half): y = x·c + swap(x)·s row by row, swap exchanging the two halves of each row of
// 2·half floats (half a multiple of 4); c and s advance with x (rows of the cos / sign-folded sin tables).
// Locals: 0 x, 1 c, 2 s, 3 y, 4 rows, 5 half | 6 i (bytes), 7 half bytes, 8 row bytes | 9 lo, 10 hi
const ropeFn = wasmFunc([[3, I32], [2, V128]], [
  W.get(5), W.i32(2), W.shl, W.set(7), W.get(7), W.i32(1), W.shl, W.set(8),
  W.block, W.loop,
  W.get(4), W.eqz, W.brIf(1),
  W.i32(0), W.set(6),
  W.loop,
  W.get(0), W.get(6), W.add, W.vload, W.set(9),
  W.get(0), W.get(6), W.add, W.get(7), W.add, W.vload, W.set(10),
  // y_lo = lo·c_lo + hi·s_lo
  W.get(3), W.get(6), W.add,
  W.get(9), W.get(1), W.get(6), W.add, W.vload, W.fmul, W.get(10), W.get(2), W.get(6), W.add, W.vload, W.fmul, W.fadd,
  W.vstore,
  // y_hi = hi·c_hi + lo·s_hi
  W.get(3), W.get(6), W.add, W.get(7), W.add,
  W.get(10), W.get(1), W.get(6), W.add, W.get(7), W.add, W.vload, W.fmul,
  W.get(9), W.get(2), W.get(6), W.add, W.get(7), W.add, W.vload, W.fmul, W.fadd,
  W.vstore,
  W.get(6), W.i32(16), W.add, W.tee(6), W.get(7), W.ltU, W.brIf(0),
  W.end,
  ...[0, 1, 2, 3].map((l) => [...W.get(l), ...W.get(8), ...W.add, ...W.set(l)]),
  W.get(4), W.i32(1), W.sub, W.set(4), W.br(0),
  W.end, W.end,
]);

/**
 * σ(x) = 1 / (1 + e^−x) for f32x4. e^t by Cephes' expf: t = −x clamped to [−87, 88] (σ is then 1, or below
 * 1e−38, anyway), n = round(t·log₂e), r = t − n·ln 2 (ln 2 in two parts), e^r ≈ 1 + r + r²·P(r) with P of degree
 * 5 (about 1 ulp), times 2ⁿ made in the exponent bits. The rounding adds 1.5·2²³, which leaves n in the low
 * mantissa bits (wasm SIMD's float→int conversion is slow). The constants live in v128 locals set once per call
 * (sigmoidConsts), since a v128.const in the loop costs several instructions each time.
 */
const SIGMOID_CONSTS = [-87, 88, Math.LOG2E, 12582912, 0.693359375, 2.12194440e-4,
  1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1, 1];
/** Code setting locals k … k + 13 to the constants of sigmoidCode. */
function sigmoidConsts(k: number): number[] {
  const bytes = (a: Float32Array | Int32Array) => Array.from(new Uint8Array(a.buffer));
  return [
    ...SIGMOID_CONSTS.flatMap((v, i) => [...simd(12, ...bytes(new Float32Array([v, v, v, v])))].concat(W.set(k + i))),
    ...simd(12, ...bytes(new Int32Array(4).fill(0x4b400000 - 127))), ...W.set(k + SIGMOID_CONSTS.length),
  ];
}
/** Code leaving σ of f32x4 local x on the stack; t, n, m are scratch v128 locals, k the first constant local. */
function sigmoidCode(x: number, t: number, n: number, m: number, k: number): number[] {
  const c = (i: number) => W.get(k + i);
  const code = [
    ...W.get(x), ...W.fneg, ...c(0), ...W.fpmax, ...c(1), ...W.fpmin, ...W.set(t),
    // n (as 1.5·2²³ + n) = t·log₂e + 1.5·2²³, rounded to nearest by the add
    ...W.get(t), ...c(2), ...W.fmul, ...c(3), ...W.fadd, ...W.set(n),
    // t ← r = t − n·0.693359375 + n·2.12194440e−4, with n = (1.5·2²³ + n) − 1.5·2²³ exactly
    ...W.get(t), ...W.get(n), ...c(3), ...W.fsub, ...W.tee(m), ...c(4), ...W.fmul, ...W.fsub,
    ...W.get(m), ...c(5), ...W.fmul, ...W.fadd, ...W.set(t),
    // P(r) by Horner
    ...c(6),
  ];
  for (let i = 7; i <= 11; i++) code.push(...W.get(t), ...W.fmul, ...c(i), ...W.fadd);
  code.push(
    // e^r = P·r² + r + 1
    ...W.get(t), ...W.get(t), ...W.fmul, ...W.fmul, ...W.get(t), ...W.fadd, ...c(12), ...W.fadd,
    // · 2ⁿ: bits (n + 127) << 23, n the integer in the low bits of 1.5·2²³ + n
    ...W.get(n), ...c(13), ...W.i32x4Sub, ...W.i32(23), ...W.i32x4Shl, ...W.fmul,
    // σ = 1 / (1 + e^−x)
    ...W.set(t), ...c(12), ...c(12), ...W.get(t), ...W.fadd, ...W.fdiv,
  );
  return code;
}

// swiglu(gu, out, sig, rows, F): out = g·σ(g)·u per row, g | u the halves of a gu row of 2F floats (F a multiple
// of 4), and sig = σ(g) for the backward pass. The product order, (g·σ)·u, is that of the ops it replaces.
// swigluGrad(gu, sig, d, out, rows, F): out = [d·u·σ·(1 + g·(1 − σ)) | d·g·σ], the gradient of the above for
// upstream d (d/dg of g·σ(g) = σ + g·σ·(1 − σ)).
// Locals: 0 gu, 1 out, 2 sig, 3 rows, 4 F | 5 j, 6 half-row bytes | 7 g, 8 σ, 9–11 scratch, 12–25 constants
const swigluFn = wasmFunc([[2, I32], [19, V128]], [
  sigmoidConsts(12),
  W.get(4), W.i32(2), W.shl, W.set(6),
  W.block, W.loop,
  W.get(3), W.eqz, W.brIf(1),
  W.i32(0), W.set(5),
  W.loop,
  W.get(0), W.get(5), W.add, W.vload, W.set(7),
  sigmoidCode(7, 9, 10, 11, 12), W.set(8),
  W.get(2), W.get(5), W.add, W.get(8), W.vstore,
  W.get(1), W.get(5), W.add,
  W.get(7), W.get(8), W.fmul, W.get(0), W.get(5), W.add, W.get(6), W.add, W.vload, W.fmul,
  W.vstore,
  W.get(5), W.i32(16), W.add, W.tee(5), W.get(6), W.ltU, W.brIf(0),
  W.end,
  W.get(0), W.get(6), W.i32(1), W.shl, W.add, W.set(0), W.get(1), W.get(6), W.add, W.set(1),
  W.get(2), W.get(6), W.add, W.set(2),
  W.get(3), W.i32(1), W.sub, W.set(3), W.br(0),
  W.end, W.end,
]);
// Locals: 0 gu, 1 sig, 2 d, 3 out, 4 rows, 5 F | 6 j, 7 half-row bytes | 8 g, 9 u, 10 σ, 11 d·σ
const swigluGradFn = wasmFunc([[2, I32], [4, V128]], [
  W.get(5), W.i32(2), W.shl, W.set(7),
  W.block, W.loop,
  W.get(4), W.eqz, W.brIf(1),
  W.i32(0), W.set(6),
  W.loop,
  W.get(0), W.get(6), W.add, W.vload, W.set(8),
  W.get(0), W.get(6), W.add, W.get(7), W.add, W.vload, W.set(9),
  W.get(1), W.get(6), W.add, W.vload, W.set(10),
  W.get(2), W.get(6), W.add, W.vload, W.get(10), W.fmul, W.set(11),
  // du = d·σ·g
  W.get(3), W.get(6), W.add, W.get(7), W.add, W.get(11), W.get(8), W.fmul, W.vstore,
  // dg = d·σ·u·(1 + g·(1 − σ))
  W.get(3), W.get(6), W.add,
  W.get(11), W.get(9), W.fmul, W.f32(1), W.splat, W.get(8), W.f32(1), W.splat, W.get(10), W.fsub, W.fmul, W.fadd, W.fmul,
  W.vstore,
  W.get(6), W.i32(16), W.add, W.tee(6), W.get(7), W.ltU, W.brIf(0),
  W.end,
  W.get(0), W.get(7), W.i32(1), W.shl, W.add, W.set(0), W.get(1), W.get(7), W.add, W.set(1),
  W.get(2), W.get(7), W.add, W.set(2), W.get(3), W.get(7), W.i32(1), W.shl, W.add, W.set(3),
  W.get(4), W.i32(1), W.sub, W.set(4), W.br(0),
  W.end, W.end,
]);

/** The module, importing a plain memory (the backend's) or, for the helper thread, a shared one. */
function simdModule(shared: boolean): Uint8Array<ArrayBuffer> {
  // limits: flags 0 = min only; 3 = shared, min and max (a shared memory must declare a maximum)
  const limits = shared ? [0x03, 0x00, ...leb(HELPER_MAX_PAGES)] : [0x00, 0x00];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...[
      [1, vec([7, 5, 4, 10, 6].map((n) => [0x60, ...vec(new Array(n).fill([I32])), 0]))], // (i32 × n) → ()
      [2, vec([[...str('env'), ...str('memory'), 0x02, ...limits]])], // imports its memory, any size
      [3, vec([[0], [1], [2], [3], [1], [4], [1], [4]])],
      [7, vec([[...str('scores'), 0x00, 0], [...str('context'), 0x00, 1], [...str('transpose'), 0x00, 2],
        [...str('gemm'), 0x00, 3], [...str('colsum'), 0x00, 4], [...str('rope'), 0x00, 5], [...str('swiglu'), 0x00, 6],
        [...str('swigluGrad'), 0x00, 7]])],
      [10, vec([scoresFn, contextFn, transposeFn, gemmFn, colsumFn, ropeFn, swigluFn, swigluGradFn])],
    ].flatMap(([id, body]) => [id as number, ...leb((body as number[]).length), ...(body as number[])]),
  ]);
}
/**
 * Pages (64 KiB) the helper thread's shared memory may grow to: 256 MiB (it never shrinks). A product whose
 * worker half needs more (say logits over a 150k vocabulary) stays on this thread.
 */
const HELPER_MAX_PAGES = 4096;
const SIMD_MODULE = simdModule(false);

interface SimdLoops {
  scores(q: number, k: number, m: number, out: number, hd: number, kStride: number, n: number): void;
  context(p: number, v: number, out: number, n: number, hd: number): void;
  transpose(src: number, dst: number, R: number, C: number): void;
  gemm(a: number, b: number, c: number, M: number, K: number, N: number, lda: number, ldb: number, ldc: number, acc: number): void;
  colsum(x: number, out: number, R: number, C: number, C8: number): void;
  rope(x: number, c: number, s: number, y: number, rows: number, half: number): void;
  swiglu(gu: number, out: number, sig: number, rows: number, F: number): void;
  swigluGrad(gu: number, sig: number, d: number, out: number, rows: number, F: number): void;
}
let simdSupported: boolean | null = null;
/** Whether this runtime has WebAssembly SIMD (tfjs then runs its SIMD binary too). */
function hasSimd(): boolean {
  simdSupported ??= WebAssembly.validate(SIMD_MODULE);
  return simdSupported;
}
const simdInstances = new WeakMap<WasmModule, SimdLoops>();
function simdLoops(be: WasmBackend): SimdLoops {
  let l = simdInstances.get(be.wasm);
  if (!l) {
    const memory = (be.wasm as unknown as { asm: { memory: WebAssembly.Memory } }).asm.memory;
    l = new WebAssembly.Instance(new WebAssembly.Module(SIMD_MODULE), { env: { memory } }).exports as unknown as SimdLoops;
    simdInstances.set(be.wasm, l);
  }
  return l;
}

// Block sizes of simdGemm: a [KB, NB] block of B (256 KB) stays in L2 while every row tile of A passes over it.
let gemmBlockK = 256, gemmBlockN = 256;
/** Bench hook: the K and N block sizes of the SIMD product. */
export function setGemmBlocks(k: number, n: number): void { gemmBlockK = k; gemmBlockN = n; }

/** Floats of scratch blockedGemm needs: a copy of one B block at a padded stride, or none. */
function gemmScratch(K: number, ldb: number): number {
  return ldb % 256 === 0 && K > 8 ? Math.min(gemmBlockK, K) * (gemmBlockN + 8 + 16) : 0;
}

/**
 * C[M, N] = A[M, K]·B[K, N] (row-major; float element offsets into `heap`, row strides in elements) with the
 * SIMD loop `gemm`, blocked over N and — when tiles cannot overlap (M % 4 = N % 8 = 0) — over K. Needs M ≥ 4,
 * N ≥ 8. The loop reads one row of a B block per step of K; when B's row stride is a multiple of 256 floats those
 * rows all fall on the same few L1 sets and evict each other, so such blocks are first copied to a padded stride
 * in `scratch` (gemmScratch floats). Self-contained — no closures, no inner functions — because the helper thread
 * runs it from its source text.
 */
function blockedGemm(gemm: SimdLoops['gemm'], heap: Int32Array, a: number, b: number, c: number, M: number, K: number,
  N: number, lda: number, ldb: number, ldc: number, scratch: number, blockK: number, blockN: number): void {
  const KB = M % 4 === 0 && N % 8 === 0 ? blockK : K;
  const repack = ldb % 256 === 0 && K > 8;
  for (let k0 = 0; k0 < K; k0 += KB) {
    const kl = Math.min(KB, K - k0);
    for (let n0 = 0; n0 < N; n0 += blockN) {
      // a last block narrower than one tile joins the previous one
      const nl = N - n0 - blockN < 8 ? N - n0 : blockN;
      let bp = b + k0 * ldb + n0, bs = ldb;
      if (repack) {
        bs = nl + 16;
        for (let k = 0, from = bp, to = scratch; k < kl; k++, from += ldb, to += bs) heap.copyWithin(to, from, from + nl);
        bp = scratch;
      }
      gemm(4 * (a + k0), 4 * bp, 4 * (c + n0), M, kl, nl, 4 * lda, 4 * bs, 4 * ldc, k0 > 0 ? 1 : 0);
      if (nl !== blockN) break;
    }
  }
}

/** blockedGemm on the backend's heap (offsets in floats), with its scratch from the backend's allocator. */
function simdGemm(be: WasmBackend, a: number, b: number, c: number, M: number, K: number, N: number,
  lda = K, ldb = N, ldc = N): void {
  const need = gemmScratch(K, ldb);
  const scratch = need > 0 ? be.makeOutput([need], 'float32') : null;
  try {
    blockedGemm(simdLoops(be).gemm, heap32(be), a, b, c, M, K, N, lda, ldb, ldc, scratch ? at32(be, scratch) : 0,
      gemmBlockK, gemmBlockN);
  } finally {
    if (scratch) be.disposeData(scratch.dataId);
  }
}

// ---- A helper thread for large products ------------------------------------------------------------------
//
// The backend's memory cannot be shared (tfjs ships its threaded binary for browsers only), so a large product
// is cut into chunks of C's rows (or columns) and shared with a worker thread that runs the same SIMD loop on
// copies of its operands in a shared memory. The worker may take chunks from the back half only — the half whose
// operands were copied — claiming downwards while this thread claims upwards from the front, in place; whatever
// the worker has not claimed when this thread gets there, this thread computes itself. So a worker that the OS
// does not schedule (the machine is busy) costs only the copies, and a running one halves the time. The copies
// cost O(M·K + K·N + M·N) against O(M·K·N)/2 saved (see PARALLEL_MIN_MACS). PyTorch's reference uses both cores
// as well.

interface Helper {
  worker: import('node:worker_threads').Worker;
  memory: WebAssembly.Memory;
  /** the job, see HELPER_SOURCE; [0] is the state: 0 idle, 1 job posted, 2 exit */
  ctrl: Int32Array;
  failed: boolean;
}
let helper: Helper | null | undefined;
/**
 * The share of recent products' chunks the worker computed (moving average). On a busy machine the worker may
 * hardly run, and then the copies are pure cost: below HELPER_MIN_SHARE the next HELPER_BACKOFF products stay on
 * this thread before the worker is tried again.
 */
let helperShare = 0.5, helperSkip = 0;
const HELPER_MIN_SHARE = 0.15, HELPER_BACKOFF = 64;
const helperStats = { products: 0, chunks: 0, workerChunks: 0, byRows: 0, uneven: 0 };
/**
 * Products shared with the helper thread so far (of them split by rows), their chunks, how many of those the
 * worker computed, and in how many products the worker did part of its half (this thread took the rest).
 */
export function helperThreadStats(): typeof helperStats { return { ...helperStats }; }
/**
 * Products of at least this many multiply-adds are shared. Measured on the reference model (2 idle cores): every
 * dense product of a training step (≥ 2²⁴ at batch·seq 2048) gets 1.6–1.9× faster; the decode step's (≤ 2²³ at 64
 * rows) got slower overall, the copies and the wake-up eating the halved compute.
 */
export const PARALLEL_MIN_MACS = 1 << 24;
let parallelMinMacs = PARALLEL_MIN_MACS;
/** Bench / test hook: products of at least this many multiply-adds are shared with the helper thread. */
export function setParallelMinMacs(n: number): void { parallelMinMacs = n; }
let sequenced = 0;
/**
 * Test hook: with n > 0 the worker takes at most n chunks and this thread starts only once it is done, so which
 * chunks come back from the worker is deterministic; 0 restores the race.
 */
export function setHelperSequenced(n: number): void { sequenced = n; }

// ctrl layout (Int32): 0 state, 1 claims (next chunk from the front | end of the unclaimed range << 16),
// 2 by rows (1) or columns (0), 3 chunk count, 4 chunk unit (rows or columns), 5 first chunk the worker may take,
// 6–8 a, b, c (float offsets of the copies), 9–11 M, K, N of the copy (its own rows or columns), 12 scratch,
// 13–14 blocks K, N, 15 error flag, 16 most chunks the worker may take (0: no limit; a test hook).
const CTRL_WORDS = 17;

/** [start, end) of chunk i of `count` chunks of `unit` over `size`; the last one takes the remainder. */
function chunkBounds(i: number, count: number, unit: number, size: number): number[] {
  return [i * unit, i === count - 1 ? size : (i + 1) * unit];
}

/**
 * Claims the next unclaimed chunk from the front (this thread: floor 0) or from the back (the worker: not below
 * `floor`, the first chunk it has copies for); −1 when there is none for the caller.
 */
function claimChunk(ctrl: Int32Array, fromBack: boolean, floor: number): number {
  for (;;) {
    const cur = Atomics.load(ctrl, 1);
    const lo = cur & 0xffff, hi = cur >>> 16;
    if (lo >= hi || (fromBack && hi - 1 < floor)) return -1;
    const next = fromBack ? lo | ((hi - 1) << 16) : (lo + 1) | (hi << 16);
    if (Atomics.compareExchange(ctrl, 1, cur, next) === cur) return fromBack ? hi - 1 : lo;
  }
}

/** The worker's side of one job: claim chunks from the back (not below ctrl[5]) and compute them on the copies. */
function helperJob(gemm: SimdLoops['gemm'], heap: Int32Array, ctrl: Int32Array, blocked: typeof blockedGemm,
  claim: typeof claimChunk, bounds: typeof chunkBounds): void {
  const byRows = ctrl[2] === 1, count = ctrl[3], unit = ctrl[4], first = ctrl[5];
  const a = ctrl[6], b = ctrl[7], c = ctrl[8], M = ctrl[9], K = ctrl[10], N = ctrl[11], scratch = ctrl[12];
  const origin = first * unit, limit = ctrl[16];
  for (let n = 1, i = claim(ctrl, true, first); i >= 0; n++, i = limit > 0 && n > limit ? -1 : claim(ctrl, true, first)) {
    // M (rows) or N (columns) is what the copies hold, from `origin` on
    const [s0, s1] = bounds(i, count, unit, byRows ? M + origin : N + origin);
    const o0 = s0 - origin, len = s1 - s0;
    if (byRows) blocked(gemm, heap, a + o0 * K, b, c + o0 * N, len, K, N, K, N, N, scratch, ctrl[13], ctrl[14]);
    else blocked(gemm, heap, a, b + o0, c + o0, M, K, len, K, N, N, scratch, ctrl[13], ctrl[14]);
  }
}

const HELPER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const { memory, ctrl, bytes } = workerData;
const c = new Int32Array(ctrl);
const blockedGemm = ${blockedGemm.toString()};
const claimChunk = ${claimChunk.toString()};
const chunkBounds = ${chunkBounds.toString()};
const helperJob = ${helperJob.toString()};
const gemm = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { memory } }).exports.gemm;
parentPort.postMessage('ready');
for (;;) {
  Atomics.wait(c, 0, 0);
  if (c[0] === 2) break;
  try {
    helperJob(gemm, new Int32Array(memory.buffer), c, blockedGemm, claimChunk, chunkBounds);
  } catch (e) {
    c[15] = 1;
  }
  Atomics.store(c, 0, 0);
  Atomics.notify(c, 0);
}
`;

/** The helper thread, started on first use; null where threads or shared memory are unavailable. */
function getHelper(): Helper | null {
  if (helper !== undefined) return helper?.failed ? null : helper;
  helper = null;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Worker } = require('node:worker_threads') as typeof import('node:worker_threads');
    const memory = new WebAssembly.Memory({ initial: 16, maximum: HELPER_MAX_PAGES, shared: true });
    const ctrl = new Int32Array(new SharedArrayBuffer(CTRL_WORDS * 4));
    const worker = new Worker(HELPER_SOURCE, { eval: true, workerData: { memory, ctrl: ctrl.buffer, bytes: simdModule(true) } });
    // the worker must not keep the process alive, nor take it down: on any error products stay on this thread
    worker.unref();
    const h: Helper = { worker, memory, ctrl, failed: false };
    worker.on('error', () => { h.failed = true; });
    worker.on('exit', () => { h.failed = true; });
    helper = h;
  } catch {
    helper = null;
  }
  return helper;
}

/** Grows the helper's memory to hold `floats` floats; false if it cannot. */
function helperSpace(h: Helper, floats: number): boolean {
  const have = h.memory.buffer.byteLength, need = floats * 4;
  if (need <= have) return true;
  const pages = Math.ceil((need - have) / 65536);
  if (have / 65536 + pages > HELPER_MAX_PAGES) return false;
  h.memory.grow(pages);
  return true;
}

/**
 * C = A·B (contiguous [M, K], [K, N], [M, N] at float offsets of the backend heap), shared with the helper thread
 * in chunks of rows of C, or of columns when that copies less. Returns false (nothing done) when the helper is
 * unavailable or the product too small or too large to share.
 */
function parallelGemm(be: WasmBackend, a: number, b: number, c: number, M: number, K: number, N: number): boolean {
  if (M * K * N < parallelMinMacs) return false;
  if (helperSkip > 0) {
    helperSkip--;
    return false;
  }
  const h = getHelper();
  if (!h || h.failed || Atomics.load(h.ctrl, 0) !== 0) return false;
  // 16 chunks, tiles whole (4 rows, 8 columns): the worker may take the back half
  const rowCopy = (M / 2) * K + K * N + (M / 2) * N, colCopy = M * K + (K * N) / 2 + (M * N) / 2;
  const byRows = rowCopy <= colCopy;
  const size = byRows ? M : N, tile = byRows ? 4 : 8;
  const unit = Math.max(tile, Math.floor(size / 16 / tile) * tile);
  const count = Math.min(Math.floor(size / unit), 0xffff);
  if (count < 2) return false;
  const first = count >> 1, origin = first * unit;
  const [hm, hn] = byRows ? [M - origin, N] : [M, N - origin];
  const aSize = hm * K, bSize = K * hn, cSize = hm * hn, scratchSize = gemmScratch(K, hn);
  if (!helperSpace(h, aSize + bSize + cSize + scratchSize)) return false;
  const src = heapF32(be), dst = new Float32Array(h.memory.buffer);
  const ha = 0, hb = aSize, hc = aSize + bSize, hs = aSize + bSize + cSize;
  if (byRows) {
    dst.set(src.subarray(a + origin * K, a + M * K), ha);
    dst.set(src.subarray(b, b + K * N), hb);
  } else {
    dst.set(src.subarray(a, a + M * K), ha);
    for (let k = 0; k < K; k++) dst.set(src.subarray(b + k * N + origin, b + (k + 1) * N), hb + k * hn);
  }
  const ctrl = h.ctrl;
  ctrl.set([count << 16, byRows ? 1 : 0, count, unit, first, ha, hb, hc, hm, K, hn, hs, gemmBlockK, gemmBlockN, 0,
    sequenced], 1);
  Atomics.store(ctrl, 0, 1);
  Atomics.notify(ctrl, 0);
  if (sequenced > 0) while (Atomics.load(ctrl, 0) === 1) Atomics.wait(ctrl, 0, 1);
  try {
    for (let i = claimChunk(ctrl, false, 0); i >= 0; i = claimChunk(ctrl, false, 0)) {
      const [s0, s1] = chunkBounds(i, count, unit, size);
      if (byRows) simdGemm(be, a + s0 * K, b, c + s0 * N, s1 - s0, K, N);
      else simdGemm(be, a, b + s0, c + s0, M, K, s1 - s0, K, N, N);
    }
  } finally {
    while (Atomics.load(ctrl, 0) === 1) Atomics.wait(ctrl, 0, 1);
  }
  if (ctrl[15] !== 0) throw new Error('the product helper thread failed');
  // the worker's chunks are those above the final end of the claimed range
  const done = Math.max(Atomics.load(ctrl, 1) >>> 16, first);
  helperStats.products++;
  helperStats.chunks += count;
  helperStats.workerChunks += count - done;
  if (byRows) helperStats.byRows++;
  if (done > first && done < count) helperStats.uneven++;
  helperShare = 0.8 * helperShare + 0.2 * ((count - done) / count);
  if (helperShare < HELPER_MIN_SHARE) {
    helperSkip = HELPER_BACKOFF;
    helperShare = 0.5;
  }
  if (done < count) {
    const from = done * unit - origin;
    const out = heapF32(be), res = new Float32Array(h.memory.buffer);
    if (byRows) out.set(res.subarray(hc + from * N, hc + cSize), c + (origin + from) * N);
    else for (let m = 0; m < M; m++) out.set(res.subarray(hc + m * hn + from, hc + (m + 1) * hn), c + m * N + origin + from);
  }
  return true;
}

/** C = A·B for contiguous operands: shared with the helper thread when large, else on this thread. */
function product(be: WasmBackend, a: number, b: number, c: number, M: number, K: number, N: number): void {
  if (!parallelGemm(be, a, b, c, M, K, N)) simdGemm(be, a, b, c, M, K, N);
}

// The C++ entry point of BatchMatMul, wrapped once per wasm module. Taken lazily inside the kernel (not in
// a setupFunc) so that registering after the backend was initialised works too.
const matMulFns = new WeakMap<WasmModule, MatMulFn>();
function wasmMatMul(be: WasmBackend): MatMulFn {
  let fn = matMulFns.get(be.wasm);
  if (!fn) {
    fn = be.wasm.cwrap('BatchMatMul', null,
      ['number', 'array', 'number', 'number', 'array', 'number', 'number', 'number', 'number']) as MatMulFn;
    matMulFns.set(be.wasm, fn);
  }
  return fn;
}

// The C++ side finds tensors by integer id (register_tensor(id, size, pointer)). Registering an id for a
// range inside an existing buffer gives a zero-copy view; dispose_data on it frees nothing (the JS side
// owns the memory) but does run the disposal callbacks, which drop XNNPACK operators cached on that id.
function registerView(be: WasmBackend, ptr: number, size: number): number {
  const id = be.dataIdNextNumber++;
  be.wasm.tfjs.registerTensor(id, size, ptr);
  return id;
}

// XNNPACK's fully-connected operator packs `b` once and the backend caches it on b's tensor id, which pays
// off when the same weights multiply many inputs (sampling). The cache key ignores b's shape, so a tensor
// reused as `b` under another [K, N] would silently reuse stale packing; we remember the K each tensor was
// first used with and use a fresh view id otherwise.
const packedK = new WeakMap<object, number>();

/** out[M,N] = a[M,K] · b[K,N] for row-major float32 blocks given as heap pointers, on the XNNPACK path. */
function fastProduct(be: WasmBackend, aPtr: number, bPtr: number, outPtr: number, M: number, K: number,
  N: number, bWhole?: { dataId: object; id: number }): void {
  const aId = registerView(be, aPtr, M * K);
  const outId = registerView(be, outPtr, M * N);
  let bId: number;
  let bView = true;
  if (bWhole && (packedK.get(bWhole.dataId) ?? K) === K) {
    packedK.set(bWhole.dataId, K);
    bId = bWhole.id;
    bView = false;
  } else {
    bId = registerView(be, bPtr, K * N);
  }
  try {
    wasmMatMul(be)(aId, shapeBytes([1, M, K]), 3, bId, shapeBytes([1, K, N]), 3, false, false, outId);
  } finally {
    be.wasm.tfjs.disposeData(aId);
    be.wasm.tfjs.disposeData(outId);
    if (bView) be.wasm.tfjs.disposeData(bId);
  }
}

/** For each flat index of the broadcast batch shape, the flat batch index into an operand's batch shape. */
function batchIndex(outBatch: number[], batch: number[]): Int32Array {
  const n = sizeOf(outBatch);
  const idx = new Int32Array(n);
  const offset = outBatch.length - batch.length;
  const strides: number[] = new Array(batch.length);
  for (let s = 1, d = batch.length - 1; d >= 0; d--) { strides[d] = batch[d] === 1 ? 0 : s; s *= batch[d]; }
  for (let i = 0; i < n; i++) {
    let rem = i, j = 0;
    for (let d = outBatch.length - 1; d >= 0; d--) {
      const c = rem % outBatch[d];
      rem = (rem - c) / outBatch[d];
      if (d >= offset) j += c * strides[d - offset];
    }
    idx[i] = j;
  }
  return idx;
}

function runKernel(name: string, args: KernelArgs): Info {
  const k = tf.getKernel(name, 'wasm');
  if (!k) throw new Error(`wasm kernel ${name} is not registered`);
  return k.kernelFunc(args as Parameters<tf.KernelFunc>[0]) as Info;
}

/** [batch, rows, cols] → [batch, cols, rows] as a new tensor, through whichever Transpose is registered. */
function transposeLast2(be: WasmBackend, x: Info, batch: number, rows: number, cols: number): Info {
  return runKernel('Transpose', {
    inputs: { x: { dataId: x.dataId, shape: [batch, rows, cols], dtype: x.dtype } },
    backend: be, attrs: { perm: [0, 2, 1] },
  });
}

// Below this many multiply-adds per batch element, the stock kernel's scalar loop beats the per-product
// overhead of the XNNPACK route (three view registrations and an operator creation, ~2.5 µs); the two cross
// between 2048 and 4096 (bench/kernels.ts, thresholds).
let smallProductMacs = 4096;
/** Bench hook: change the threshold under which batched products stay on the stock kernel. */
export function setSmallProductMacs(n: number): void { smallProductMacs = n; }

let strategy: 'auto' | 'direct' | 'swapped' = 'auto';
/** Bench hook: force the direct or the swapped form of transposed products. */
export function setMatMulStrategy(s: 'auto' | 'direct' | 'swapped'): void { strategy = s; }

let simdProducts = true;
/** Bench hook: route products through the SIMD loop (default) or through XNNPACK / the stock loop. */
export function setSimdProducts(on: boolean): void { simdProducts = on; }

/**
 * BatchMatMul on the SIMD loop: transposed operands are materialised (SIMD transposes cost ~0.3 ns/element) in
 * whichever of C = op(A)·op(B) and Cᵀ = op(B)ᵀ·op(A)ᵀ moves fewer floats. Unlike XNNPACK it packs nothing (a
 * fresh right operand — every gradient product — costs XNNPACK a copy into its layout, ~30% of a weight-gradient
 * product) and has no per-product setup, so a batch of 128 attention-sized products costs 128 loop calls.
 * Returns null when the loop's tile (4 rows × 8 columns) does not fit either form.
 */
function simdBatchMatMul(be: WasmBackend, a: Info, b: Info, tA: boolean, tB: boolean, M: number, K: number, N: number,
  aBatch: number[], bBatch: number[], outBatch: number[]): Info | null {
  const batch = sizeOf(outBatch), batchA = sizeOf(aBatch), batchB = sizeOf(bBatch);
  // a right operand shared by every batch element: one product over all of A's rows
  const sharedB = batchB === 1;
  const rowsA = sharedB ? batch * M : M;
  const canDirect = rowsA >= 4 && N >= 8;
  const canSwap = !sharedB && N >= 4 && M >= 8;
  const direct = (tA ? M * K * batchA : 0) + (tB ? N * K * batchB : 0);
  const swapped = (tB ? 0 : N * K * batchB) + (tA ? 0 : M * K * batchA) + M * N * batch;
  const swap = strategy === 'auto' ? canSwap && (!canDirect || swapped < direct) : strategy === 'swapped' && canSwap;
  if (!swap && !canDirect) return null;
  const outShape = [...outBatch, M, N];
  // direct: left [., M, K] · right [., K, N]; swapped: left [., N, K] · right [., K, M], then one transpose
  const [P, Q] = swap ? [N, M] : [M, N];
  const left = swap ? (tB ? b : transposeLast2(be, b, batchB, K, N)) : tA ? transposeLast2(be, a, batchA, K, M) : a;
  const right = swap ? (tA ? a : transposeLast2(be, a, batchA, M, K)) : tB ? transposeLast2(be, b, batchB, N, K) : b;
  const [leftBatch, rightBatch] = swap ? [bBatch, aBatch] : [aBatch, bBatch];
  const out = be.makeOutput(swap ? [...outBatch, N, M] : outShape, 'float32');
  try {
    const lp = at32(be, left), rp = at32(be, right), op = at32(be, out);
    if (sharedB && !swap) {
      product(be, lp, rp, op, batch * M, K, N);
    } else {
      const il = batchIndex(outBatch, leftBatch), ir = batchIndex(outBatch, rightBatch);
      for (let i = 0; i < batch; i++) product(be, lp + il[i] * P * K, rp + ir[i] * K * Q, op + i * P * Q, P, K, Q);
    }
    if (!swap) return out;
    return { ...transposeLast2(be, out, batch, N, M), shape: outShape };
  } finally {
    if (left !== a && left !== b) be.disposeData(left.dataId);
    if (right !== a && right !== b) be.disposeData(right.dataId);
    if (swap) be.disposeData(out.dataId);
  }
}

function batchMatMul(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { a, b } = args.inputs as { a: Info; b: Info };
    const transposeA = Boolean(args.attrs?.transposeA);
    const transposeB = Boolean(args.attrs?.transposeB);
    if (a.dtype !== 'float32' || b.dtype !== 'float32') {
      throw new Error('BatchMatMul for non non-float32 tensors not yet supported.');
    }
    const aRank = a.shape.length, bRank = b.shape.length;
    const M = transposeA ? a.shape[aRank - 1] : a.shape[aRank - 2];
    const K = transposeA ? a.shape[aRank - 2] : a.shape[aRank - 1];
    const kB = transposeB ? b.shape[bRank - 1] : b.shape[bRank - 2];
    const N = transposeB ? b.shape[bRank - 2] : b.shape[bRank - 1];
    if (K !== kB) {
      throw new Error(`Error in matMul: inner shapes (${K}) and (${kB}) of Tensors with shapes ${a.shape} and ` +
        `${b.shape} and transposeA=${transposeA} and transposeB=${transposeB} must match.`);
    }
    const aBatch = a.shape.slice(0, -2), bBatch = b.shape.slice(0, -2);
    const outBatch = tf.backend_util.assertAndGetBroadcastShape(aBatch, bBatch);
    const batch = sizeOf(outBatch), batchA = sizeOf(aBatch), batchB = sizeOf(bBatch);
    const outShape = [...outBatch, M, N];

    if (M * N > 0 && batch > 0 && K > 0 && hasSimd() && simdProducts) {
      const out = simdBatchMatMul(be, a, b, transposeA, transposeB, M, K, N, aBatch, bBatch, outBatch);
      if (out) return out;
    }

    // Tiny products with equal batch shapes: the stock loop is correct there and cheaper than our setup.
    const sameBatch = aBatch.length === bBatch.length && aBatch.every((d, i) => d === bBatch[i]);
    if (sameBatch && batch > 1 && M * K * N < smallProductMacs) {
      const out = original(args as Parameters<tf.KernelFunc>[0]) as Info;
      return { ...out, shape: outShape };
    }

    if (M * N === 0 || batch === 0) return be.makeOutput(outShape, 'float32');
    if (K === 0) {
      const out = be.makeOutput(outShape, 'float32');
      be.typedArrayFromHeap(out).fill(0);
      return out;
    }

    // XNNPACK wants both operands row-major and untransposed, so transposes are materialised. Either
    // C = op(A)·op(B) directly, or Cᵀ = op(B)ᵀ·op(A)ᵀ followed by one transpose of C. The cost model counts
    // the floats transposed plus a quarter of those packed as XNNPACK weights (the right operand); with that
    // weight it picks the faster form for every training shape that bench/kernels.ts times both ways. The
    // swapped form wins for Aᵀ·B with M > N (the down-projection gradient hᵀ·dy) and for x·Eᵀ with few rows
    // and a large E (9× for [8,128]·[4096,128]ᵀ).
    const PACK = 0.25;
    const direct = (transposeA ? M * K : 0) + (transposeB ? N * K : 0) + PACK * K * N;
    const swapped = (transposeB ? 0 : N * K) + (transposeA ? 0 : M * K) + M * N + PACK * K * M;
    // A shared `b` turns the direct form into one big product, which beats any per-batch loop.
    const swap = strategy === 'auto' ? swapped < direct && !(batchB === 1 && batchA > 1)
      : strategy === 'swapped' && !(batchB === 1 && batchA > 1);
    if (!swap) {
      const left = transposeA ? transposeLast2(be, a, batchA, K, M) : a;
      const right = transposeB ? transposeLast2(be, b, batchB, N, K) : b;
      const out = be.makeOutput(outShape, 'float32');
      try {
        productInto(be, left, aBatch, right, bBatch, outBatch, out, M, K, N, !transposeB);
      } finally {
        if (left !== a) be.disposeData(left.dataId);
        if (right !== b) be.disposeData(right.dataId);
      }
      return out;
    }
    const left = transposeB ? b : transposeLast2(be, b, batchB, K, N);
    const right = transposeA ? a : transposeLast2(be, a, batchA, M, K);
    const outT = be.makeOutput([...outBatch, N, M], 'float32');
    try {
      productInto(be, left, bBatch, right, aBatch, outBatch, outT, N, K, M, transposeA);
      return { ...transposeLast2(be, outT, batch, N, M), shape: outShape };
    } finally {
      if (left !== b) be.disposeData(left.dataId);
      if (right !== a) be.disposeData(right.dataId);
      be.disposeData(outT.dataId);
    }
  };
}

/**
 * out[i] = left[ia(i)] · right[ib(i)] for every element i of the broadcast batch, where left holds
 * [P, K] blocks and right [K, Q] blocks, row-major. `rightIsInput` says `right` is a caller's tensor (not a
 * temporary), whose packed form XNNPACK may cache.
 */
function productInto(be: WasmBackend, left: Info, leftBatch: number[], right: Info, rightBatch: number[],
  outBatch: number[], out: Info, P: number, K: number, Q: number, rightIsInput: boolean): void {
  const lRec = be.dataIdMap.get(left.dataId), rRec = be.dataIdMap.get(right.dataId);
  const outPtr = be.dataIdMap.get(out.dataId).memoryOffset;
  const batch = sizeOf(outBatch);
  if (sizeOf(rightBatch) === 1) {
    // One right operand for every batch element (dense layers, shared weights): a single [batch·P, K]·[K, Q]
    // product, since the batches of `left` are contiguous rows.
    fastProduct(be, lRec.memoryOffset, rRec.memoryOffset, outPtr, batch * P, K, Q,
      rightIsInput ? { dataId: right.dataId, id: rRec.id } : undefined);
    return;
  }
  const il = batchIndex(outBatch, leftBatch), ir = batchIndex(outBatch, rightBatch);
  for (let i = 0; i < batch; i++) {
    fastProduct(be, lRec.memoryOffset + il[i] * P * K * BYTES_F32, rRec.memoryOffset + ir[i] * K * Q * BYTES_F32,
      outPtr + i * P * Q * BYTES_F32, P, K, Q);
  }
}

// TF's definition: out[s, ...] = Σ_{i : ids[i] = s} x[i, ...] over the leading dims covered by segmentIds;
// ids outside [0, numSegments) are dropped. One pass over x, so the embedding gradient costs O(N·d) plus
// zeroing the [vocab, d] output, instead of one masked reduction per segment.
function unsortedSegmentSum(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { x, segmentIds } = args.inputs as { x: Info; segmentIds: Info };
  const numSegments = Number(args.attrs?.numSegments);
  const r = segmentIds.shape.length;
  if (segmentIds.dtype !== 'int32') throw new Error('UnsortedSegmentSum: segmentIds must be int32');
  if (r > x.shape.length || segmentIds.shape.some((d, i) => d !== x.shape[i])) {
    throw new Error(`UnsortedSegmentSum: segmentIds shape ${segmentIds.shape} is not a prefix of x shape ${x.shape}`);
  }
  const inner = sizeOf(x.shape.slice(r));
  const n = sizeOf(segmentIds.shape);
  const out = be.makeOutput([numSegments, ...x.shape.slice(r)], x.dtype);
  // Views are taken after makeOutput: an allocation can grow the wasm memory and detach older views.
  const xs = be.typedArrayFromHeap(x), ids = be.typedArrayFromHeap(segmentIds), o = be.typedArrayFromHeap(out);
  o.fill(0);
  for (let i = 0; i < n; i++) {
    const s = ids[i];
    if (s < 0 || s >= numSegments) continue;
    const ob = s * inner, xb = i * inner;
    for (let j = 0; j < inner; j++) o[ob + j] += xs[xb + j];
  }
  return out;
}

// Drop size-1 dims and merge dims that stay adjacent and in order under perm; the stock kernel has fast
// loops only up to rank 4, and e.g. a grouped-query [B,T,kv,rep,hd]→[B,kv,rep,T,hd] is rank 4 once merged.
export function canonicalTranspose(shape: number[], perm: number[]): { shape: number[]; perm: number[] } {
  // Renumber the axes that remain once size-1 dims are gone, so that adjacency is judged without them.
  const renum: number[] = [];
  const kept: number[] = [];
  shape.forEach((d, ax) => { if (d !== 1) { renum[ax] = kept.length; kept.push(d); } });
  const p = perm.filter((ax) => shape[ax] !== 1).map((ax) => renum[ax]);
  // Runs of consecutive axes in output order become one axis.
  const groups: number[][] = [];
  for (const ax of p) {
    const last = groups[groups.length - 1];
    if (last && last[last.length - 1] + 1 === ax) last.push(ax); else groups.push([ax]);
  }
  const byFirst = [...groups].sort((g, h) => g[0] - h[0]);
  const newShape = byFirst.map((g) => g.reduce((s, ax) => s * kept[ax], 1));
  const newPerm = groups.map((g) => byFirst.indexOf(g));
  return { shape: newShape, perm: newPerm };
}

function jsTransposeNd(h: Int32Array, src: number, dst: number, shape: number[], perm: number[]): void {
  const rank = shape.length;
  const inStrides = new Array<number>(rank);
  for (let s = 1, d = rank - 1; d >= 0; d--) { inStrides[d] = s; s *= shape[d]; }
  const outShape = perm.map((ax) => shape[ax]);
  const step = perm.map((ax) => inStrides[ax]);
  const inner = outShape[rank - 1], innerStep = step[rank - 1];
  const idx = new Array<number>(rank).fill(0);
  const total = sizeOf(shape);
  let srcBase = src;
  for (let o = dst; o < dst + total; o += inner) {
    for (let j = 0, s = srcBase; j < inner; j++, s += innerStep) h[o + j] = h[s];
    // Odometer over the outer output dims.
    for (let d = rank - 2; d >= 0; d--) {
      idx[d]++;
      srcBase += step[d];
      if (idx[d] < outShape[d]) break;
      srcBase -= step[d] * outShape[d];
      idx[d] = 0;
    }
  }
}

// Transposing the last two dims of [batch, R, C]. The stock rank-2 loop writes with a stride of R floats; for
// large power-of-two R those writes alias in cache and it runs at ~8 ns/element ([2048, 512]). The SIMD loop
// runs 4×4 blocks at ~0.3 ns/element; without SIMD, 8×8 tiles in JS run at 1.5–3 ns/element. For small matrices
// the stock loop wins over the JS tiles (bench/kernels.ts, thresholds).
const TILE = 8;
function jsTransposeLast2(h: Int32Array, src: number, dst: number, batch: number, R: number, C: number): void {
  for (let b = 0; b < batch; b++, src += R * C, dst += R * C) {
    for (let r0 = 0; r0 < R; r0 += TILE) {
      const r1 = Math.min(r0 + TILE, R);
      for (let c0 = 0; c0 < C; c0 += TILE) {
        const c1 = Math.min(c0 + TILE, C);
        for (let r = r0; r < r1; r++) {
          let i = src + r * C + c0, o = dst + c0 * R + r;
          for (let c = c0; c < c1; c++, i++, o += R) h[o] = h[i];
        }
      }
    }
  }
}
function simdTransposeLast2(be: WasmBackend, src: number, dst: number, batch: number, R: number, C: number): void {
  const loops = simdLoops(be);
  const h = heap32(be);
  const R4 = R & ~3, C4 = C & ~3;
  for (let b = 0; b < batch; b++, src += R * C, dst += R * C) {
    loops.transpose(4 * src, 4 * dst, R, C);
    // the ragged edges the 4×4 blocks leave: last R % 4 rows (all columns), last C % 4 columns (other rows)
    for (let r = R4; r < R; r++) for (let c = 0, i = src + r * C, o = dst + r; c < C; c++, i++, o += R) h[o] = h[i];
    for (let r = 0; r < R4; r++) for (let c = C4, i = src + r * C + C4, o = dst + C4 * R + r; c < C; c++, i++, o += R) h[o] = h[i];
  }
}
let tiledTransposeMin = 16384;
/** Bench hook: matrices of at least this many elements are transposed by the tiled JS loop (without SIMD). */
export function setTiledTransposeMin(n: number): void { tiledTransposeMin = n; }
let simdTransposeMin = 256;
/** Bench hook: matrices of at least this many elements are transposed by the SIMD loop. */
export function setSimdTransposeMin(n: number): void { simdTransposeMin = n; }

function transpose(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { x } = args.inputs as { x: Info };
    const perm = args.attrs?.perm as number[];
    if (x.dtype === 'string') return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    const outShape = perm.map((ax) => x.shape[ax]);
    const c = canonicalTranspose(x.shape, perm);
    if (c.shape.length <= 1) {
      // Only size-1 dims move: the data is unchanged, so share it the way the Reshape kernel does. The gather
      // gradient transposes the whole [vocab, d] embedding gradient by the identity; this skips that copy.
      be.incRef(x.dataId);
      return { dataId: x.dataId, shape: outShape, dtype: x.dtype };
    }
    const last2 = c.shape.length === 2 || (c.shape.length === 3 && c.perm[0] === 0);
    if (last2 && is4Bytes(x)) {
      const [R, C] = c.shape.slice(-2);
      const batch = c.shape.length === 3 ? c.shape[0] : 1;
      const simd = hasSimd() && R * C >= simdTransposeMin;
      if (simd || R * C >= tiledTransposeMin) {
        const out = be.makeOutput(outShape, x.dtype);
        if (simd) simdTransposeLast2(be, at32(be, x), at32(be, out), batch, R, C);
        else jsTransposeLast2(heap32(be), at32(be, x), at32(be, out), batch, R, C);
        return out;
      }
    }
    if (c.shape.length <= 4) {
      const out = original({ inputs: { x: { dataId: x.dataId, shape: c.shape, dtype: x.dtype } },
        backend: be, attrs: { perm: c.perm } } as Parameters<tf.KernelFunc>[0]) as Info;
      return { ...out, shape: outShape };
    }
    if (!is4Bytes(x)) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    const out = be.makeOutput(outShape, x.dtype);
    jsTransposeNd(heap32(be), at32(be, x), at32(be, out), c.shape, c.perm);
    return out;
  };
}

// Copies below this length go element by element: a native copyWithin call costs more than a loop over a
// short row, and the rows of RoPE halves and head splits are 16 floats ([B, T, H, hd/2] pieces).
const SHORT_RUN = 64;
function copyRun(h: Int32Array, from: number, to: number, len: number): void {
  if (len >= SHORT_RUN) h.copyWithin(to, from, from + len);
  else for (let j = 0; j < len; j++) h[to + j] = h[from + j];
}

/** x[begin : begin + size] into a new tensor, straight from the heap. */
function sliceInfo(be: WasmBackend, x: Info, begin: number[], size: number[]): Info {
  const out = be.makeOutput(size, x.dtype);
  const n = sizeOf(size);
  if (n === 0) return out;
  const h = heap32(be), src = at32(be, x), dst = at32(be, out);
  const rank = x.shape.length;
  const strides = new Array<number>(rank);
  for (let s = 1, d = rank - 1; d >= 0; d--) { strides[d] = s; s *= x.shape[d]; }
  // Trailing dims taken whole are contiguous in x: copy them as one run.
  let k = rank - 1;
  while (k > 0 && size[k] === x.shape[k]) k--;
  const run = sizeOf(size.slice(k));
  let base = src;
  for (let d = 0; d < rank; d++) base += begin[d] * strides[d];
  const idx = new Array<number>(k).fill(0);
  for (let o = dst; o < dst + n; o += run) {
    copyRun(h, base, o, run);
    for (let d = k - 1; d >= 0; d--) {
      idx[d]++;
      base += strides[d];
      if (idx[d] < size[d]) break;
      base -= strides[d] * size[d];
      idx[d] = 0;
    }
  }
  return out;
}

// The stock Slice starts with readSync, a copy of the whole input, before copying out the piece.
function slice(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const { x } = args.inputs as { x: Info };
    if (!is4Bytes(x)) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    const [begin, size] = tf.slice_util.parseSliceParams(x as tf.Tensor, args.attrs?.begin as number[],
      args.attrs?.size as number[]);
    return sliceInfo(args.backend as WasmBackend, x, begin, size);
  };
}

// The stock SplitV calls the stock slice (one full readSync per piece), not the registered kernel.
function splitV(original: tf.KernelFunc) {
  return (args: KernelArgs): Info[] => {
    const { x } = args.inputs as { x: Info };
    if (!is4Bytes(x)) return original(args as Parameters<tf.KernelFunc>[0]) as Info[];
    const axis = tf.util.parseAxisParam(args.attrs?.axis as number, x.shape)[0];
    const sizes = tf.backend_util.prepareSplitSize(x as tf.Tensor, args.attrs?.numOrSizeSplits as number[], axis);
    const begin = new Array<number>(x.shape.length).fill(0);
    return sizes.map((s) => {
      const size = x.shape.slice();
      size[axis] = s;
      const piece = sliceInfo(args.backend as WasmBackend, x, begin, size);
      begin[axis] += s;
      return piece;
    });
  };
}

// The stock Concat copies each input row with subarray()+set(); for RoPE's [B,T,H,hd/2] halves that is
// one call per 16 floats.
function concat(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const inputs = args.inputs as unknown as Info[];
    if (!is4Bytes(inputs[0])) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    const axis = tf.util.parseAxisParam(args.attrs?.axis as number, inputs[0].shape)[0];
    tf.backend_util.assertParamsConsistent(inputs.map((t) => t.shape), axis);
    const outShape = tf.backend_util.computeOutShape(inputs.map((t) => t.shape), axis);
    const parts = inputs.filter((t) => sizeOf(t.shape) > 0);
    const out = be.makeOutput(outShape, inputs[0].dtype);
    if (sizeOf(outShape) === 0) return out;
    const rows = sizeOf(outShape.slice(0, axis));
    const widths = parts.map((t) => sizeOf(t.shape.slice(axis)));
    const total = widths.reduce((a, w) => a + w, 0);
    const h = heap32(be);
    for (let i = 0, col = at32(be, out); i < parts.length; col += widths[i], i++) {
      const w = widths[i];
      for (let r = 0, from = at32(be, parts[i]), to = col; r < rows; r++, from += w, to += total) copyRun(h, from, to, w);
    }
    return out;
  };
}

// The stock Gather (C++) runs at ~25 ns per element when it copies slices ([V, d] rows or [d, V] columns);
// a JS copy of the same rows is an order of magnitude faster. Out-of-range indices throw as in stock.
function gatherV2(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { x, indices } = args.inputs as { x: Info; indices: Info };
    const batchDims = Number(args.attrs?.batchDims ?? 0);
    if (!is4Bytes(x) || batchDims !== 0 || indices.dtype !== 'int32') {
      return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    }
    const axis = tf.util.parseAxisParam(args.attrs?.axis as number, x.shape)[0];
    const dim = x.shape[axis];
    const outer = sizeOf(x.shape.slice(0, axis)), inner = sizeOf(x.shape.slice(axis + 1));
    const outShape = [...x.shape.slice(0, axis), ...indices.shape, ...x.shape.slice(axis + 1)];
    const n = sizeOf(indices.shape);
    const ids = heap32(be), i0 = at32(be, indices);
    for (let i = i0; i < i0 + n; i++) {
      if (!(ids[i] >= 0 && ids[i] <= dim - 1)) throw new Error(`GatherV2: the index value ${ids[i]} is not in [0, ${dim - 1}]`);
    }
    const out = be.makeOutput(outShape, x.dtype);
    if (sizeOf(outShape) === 0) return out;
    const h = heap32(be), src = at32(be, x), k0 = at32(be, indices);
    for (let o = 0, to = at32(be, out); o < outer; o++) {
      const base = src + o * dim * inner;
      if (inner === 1) for (let k = k0; k < k0 + n; k++) h[to++] = h[base + h[k]];
      else for (let k = k0; k < k0 + n; k++, to += inner) copyRun(h, base + h[k] * inner, to, inner);
    }
    return out;
  };
}

// Reductions over axes that are not innermost make the stock Sum transpose first (stock 2-D transpose, ~7 ns
// per element for [2048, 128]); the broadcast gradients of every bias and norm weight are such sums. Here
// they are one pass over x, accumulated in float64 (as the cpu backend does).
function sum(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { x } = args.inputs as { x: Info };
    const axes = tf.util.parseAxisParam(args.attrs?.axis as number | number[], x.shape);
    if (x.dtype !== 'float32' || tf.backend_util.getAxesPermutation(axes, x.shape.length) == null) {
      return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    }
    let [outShape] = tf.backend_util.computeOutAndReduceShapes(x.shape, axes);
    if (args.attrs?.keepDims) outShape = tf.backend_util.expandShapeToKeepDim(outShape, axes);
    const out = be.makeOutput(outShape, 'float32');
    const dst = be.typedArrayFromHeap(out);
    if (sizeOf(x.shape) === 0) { dst.fill(0); return out; }
    // Merge neighbouring dims of the same kind (reduced / kept), dropping size-1 dims.
    const dims: number[] = [], reduced: boolean[] = [];
    x.shape.forEach((d, ax) => {
      if (d === 1) return;
      const r = axes.includes(ax);
      if (dims.length && reduced[reduced.length - 1] === r) dims[dims.length - 1] *= d;
      else { dims.push(d); reduced.push(r); }
    });
    const rank = dims.length;
    if (rank === 0) { dst.set(be.typedArrayFromHeap(x)); return out; } // every dim was 1
    // [(kept,) reduced, kept]: the bias and norm-weight gradients. Column sums on the SIMD loop.
    const colsumShape = rank >= 2 && rank <= 3 && !reduced[rank - 1] && reduced[rank - 2] && dims[rank - 1] >= 8;
    if (colsumShape && hasSimd()) {
      const [K, R, C] = rank === 3 ? dims : [1, ...dims];
      const C8 = C & ~7;
      const scratch = be.makeOutput([2 * C8], 'float32');
      const loops = simdLoops(be);
      for (let k = 0; k < K; k++) {
        loops.colsum(4 * (at32(be, x) + k * R * C), 4 * at32(be, scratch), R, C, C8);
        const heap = be.typedArrayFromHeap(x), o = be.typedArrayFromHeap(out);
        const acc = new Float64Array(be.wasm.HEAPU8.buffer, 4 * at32(be, scratch), C8);
        for (let c = 0; c < C8; c++) o[k * C + c] = acc[c];
        for (let c = C8; c < C; c++) {
          let t = 0;
          for (let r = 0, i = k * R * C + c; r < R; r++, i += C) t += heap[i];
          o[k * C + c] = t;
        }
      }
      be.disposeData(scratch.dataId);
      return out;
    }
    const outStep = new Array<number>(rank);
    for (let s = 1, d = rank - 1; d >= 0; d--) { outStep[d] = reduced[d] ? 0 : s; if (!reduced[d]) s *= dims[d]; }
    const acc = new Float64Array(dst.length);
    const src = be.typedArrayFromHeap(x);
    const inner = dims[rank - 1], innerReduced = reduced[rank - 1];
    const idx = new Array<number>(rank).fill(0);
    let obase = 0;
    for (let i = 0; i < src.length; i += inner) {
      if (innerReduced) {
        let t = 0;
        for (let j = 0; j < inner; j++) t += src[i + j];
        acc[obase] += t;
      } else {
        for (let j = 0; j < inner; j++) acc[obase + j] += src[i + j];
      }
      for (let d = rank - 2; d >= 0; d--) {
        idx[d]++;
        obase += outStep[d];
        if (idx[d] < dims[d]) break;
        obase -= outStep[d] * dims[d];
        idx[d] = 0;
      }
    }
    dst.set(acc);
    return out;
  };
}

// tfjs tensors are immutable, so an Identity (or a Cast to the same dtype) can share the input's data the
// way the Reshape kernel does, and as the cpu backend's Identity does. Gradients pass through many of them.
function identity(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const { x } = args.inputs as { x: Info };
    if (x.dtype === 'string') return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    (args.backend as WasmBackend).incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  };
}

function cast(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const { x } = args.inputs as { x: Info };
    if (x.dtype === 'string' || args.attrs?.dtype !== x.dtype) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    (args.backend as WasmBackend).incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  };
}

// ---- RoPE ------------------------------------------------------------------------------------------------
//
// x·cos + rotate_half(x)·sin as stock ops is a split, a concat, two multiplies and an add over [B, n, T, hd], and
// as much again in the backward pass (a concat for the split, slices for the concat); one SIMD pass does it.

export const ROPE = 'CreditLensRope';

/** Whether ropeRotate runs here: wasm with our kernels and SIMD, and half a head (hd / 2) a multiple of 4. */
export function hasRopeKernel(headDim: number): boolean {
  return tf.getBackend() === 'wasm' && !!tf.getKernel(ROPE, 'wasm') && hasSimd() && headDim % 8 === 0;
}

/**
 * y = x·cos + swap(x)·sin, swap exchanging the halves of the last axis (HF's rotate_half with its sign folded
 * into sin). x [..., hd]; cos and sin hold a whole number of x's trailing [rows, hd] blocks' worth of rows and
 * repeat over x's leading dims (e.g. x [B, n, T, hd], tables [1, n, T, hd]). No gradient of its own: model.ts
 * wraps it (the gradient is the same rotation with −sin).
 */
export function ropeRotate<T extends tf.Tensor>(x: T, cos: tf.Tensor, sin: tf.Tensor): T {
  return tf.engine().runKernel(ROPE, { x, cos, sin }) as T;
}

function ropeKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { x, cos, sin } = args.inputs as { x: Info; cos: Info; sin: Info };
  const hd = x.shape[x.shape.length - 1];
  const rows = sizeOf(x.shape) / hd, tableRows = sizeOf(cos.shape) / hd;
  if (x.dtype !== 'float32' || hd % 8 !== 0 || sizeOf(sin.shape) !== sizeOf(cos.shape) || cos.shape[cos.shape.length - 1] !== hd
    || rows % tableRows !== 0) {
    throw new Error(`${ROPE}: x [${x.shape}] and tables [${cos.shape}] / [${sin.shape}] do not fit (head dim a multiple of 8, tables repeating over x)`);
  }
  const out = be.makeOutput(x.shape, 'float32');
  const loops = simdLoops(be);
  const xp = at32(be, x), cp = at32(be, cos), sp = at32(be, sin), op = at32(be, out);
  for (let r = 0; r < rows; r += tableRows) loops.rope(4 * (xp + r * hd), 4 * cp, 4 * sp, 4 * (op + r * hd), tableRows, hd / 2);
  return out;
}

// ---- SwiGLU ----------------------------------------------------------------------------------------------
//
// SiLU(gate)·up from the fused gate | up projection: as ops, a split, a sigmoid and two multiplies forward, and
// backward eight elementwise ops plus a concat for the split. Here one SIMD pass each way, with the sigmoid of
// the gate half computed inline (sigmoidCode) and kept for the backward pass.

export const SWIGLU = 'CreditLensSwiGLU';
export const SWIGLU_GRAD = 'CreditLensSwiGLUGrad';

/** Whether swiglu / swigluGrad run here: wasm with our kernels and SIMD, dFf a multiple of 4. */
export function hasSwiGLUKernel(dFf: number): boolean {
  return tf.getBackend() === 'wasm' && !!tf.getKernel(SWIGLU, 'wasm') && hasSimd() && dFf % 4 === 0;
}

/** gu [N, 2F] (gate | up) → SiLU(gate)·up [N, F], and σ(gate) [N, F] for swigluGrad. */
export function swiglu(gu: tf.Tensor2D): { act: tf.Tensor2D; sig: tf.Tensor2D } {
  const [act, sig] = tf.engine().runKernel(SWIGLU, { gu }) as unknown as tf.Tensor2D[];
  return { act, sig };
}

/** The gradient of swiglu with respect to gu, [N, 2F], for the upstream gradient dy [N, F]. */
export function swigluGrad(gu: tf.Tensor2D, sig: tf.Tensor2D, dy: tf.Tensor2D): tf.Tensor2D {
  return tf.engine().runKernel(SWIGLU_GRAD, { gu, sig, dy }) as tf.Tensor2D;
}

function swigluShapes(gu: Info, sig?: Info, dy?: Info): [number, number] {
  const [N, F2] = gu.shape;
  const half = (t?: Info) => !t || (t.dtype === 'float32' && t.shape.length === 2 && t.shape[0] === N && t.shape[1] === F2 / 2);
  if (!(gu.shape.length === 2 && F2 % 8 === 0 && gu.dtype === 'float32' && half(sig) && half(dy))) {
    throw new Error(`${SWIGLU}: gu [${gu.shape}]${sig ? `, sigmoid [${sig.shape}]` : ''}${dy ? `, dy [${dy.shape}]` : ''} do not fit`);
  }
  return [N, F2 / 2];
}

function swigluKernel(args: KernelArgs): Info[] {
  const be = args.backend as WasmBackend;
  const { gu } = args.inputs as { gu: Info };
  const [N, F] = swigluShapes(gu);
  const out = be.makeOutput([N, F], 'float32');
  const sig = be.makeOutput([N, F], 'float32');
  simdLoops(be).swiglu(4 * at32(be, gu), 4 * at32(be, out), 4 * at32(be, sig), N, F);
  return [out, sig];
}

function swigluGradKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { gu, sig, dy } = args.inputs as { gu: Info; sig: Info; dy: Info };
  const [N, F] = swigluShapes(gu, sig, dy);
  const out = be.makeOutput([N, 2 * F], 'float32');
  simdLoops(be).swigluGrad(4 * at32(be, gu), 4 * at32(be, sig), 4 * at32(be, dy), 4 * at32(be, out), N, F);
  return out;
}

// ---- Decode attention ----------------------------------------------------------------------------------
//
// One decode step attends one query per (row, head) to ≤ a few hundred cached keys. As batched matMuls these
// are products of a [1, hd] row by a [hd, T] block: 2·B·H tiny products per layer, which neither the stock loop
// (~0.5 GMAC/s on them) nor a per-product XNNPACK call (~2.5 µs each) handles well, and the cache grows by a
// concat that copies all of it every step. The kernel below keeps a preallocated cache that it writes in place,
// and computes scores and context with the SIMD loops above (8–9 GMAC/s); softmax is the stock kernel.

export const DECODE_ATTENTION = 'CreditLensDecodeAttention';

export interface DecodeAttentionAttrs {
  /** the new token's position: where its key and value are written */
  pos: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  /** applied to the rotated q (1/√headDim) */
  scale: number;
  /** RoPE row of `pos`: cos, and sin with rotate_half's sign folded in (−sin for the first half) */
  cos: Float32Array;
  sin: Float32Array;
}

/** Whether the active backend can run decodeAttention (wasm with our kernels, in a runtime with SIMD). */
export function hasDecodeAttention(): boolean {
  return tf.getBackend() === 'wasm' && !!tf.getKernel(DECODE_ATTENTION, 'wasm') && hasSimd();
}

/**
 * One decode step of attention for every row, with the KV cache written IN PLACE: `keys` [B, Hkv, hd, cap]
 * (transposed), `values` [B, Hkv, cap, hd] and `keyMask` [B, cap] (1 = real token) receive the new token at
 * `pos` (its rotated key, its value, mask 1). qkv [B, (H + 2·Hkv)·hd] is the fused projection of the new token
 * (q | k | v heads). Returns softmax(q·Kᵀ + mask)·V as [B, H·hd], heads side by side like HF's merged context.
 * Mutating inputs is outside tfjs's model of immutable tensors: the caller must own those three tensors
 * exclusively (model.ts's in-place KvCache does).
 */
export function decodeAttention(qkv: tf.Tensor2D, keys: tf.Tensor4D, values: tf.Tensor4D, keyMask: tf.Tensor2D,
  attrs: DecodeAttentionAttrs): tf.Tensor2D {
  return tf.engine().runKernel(DECODE_ATTENTION, { qkv, keys, values, keyMask },
    attrs as unknown as tf.NamedAttrMap) as tf.Tensor2D;
}

let heapF32Buffer: ArrayBufferLike | null = null;
let heapF32View: Float32Array = new Float32Array(0);
function heapF32(be: WasmBackend): Float32Array {
  const buf = be.wasm.HEAPU8.buffer;
  if (buf !== heapF32Buffer) { heapF32Buffer = buf; heapF32View = new Float32Array(buf); }
  return heapF32View;
}

function decodeAttentionKernel(args: KernelArgs): Info {
  const be = args.backend as WasmBackend;
  const { qkv, keys, values, keyMask } = args.inputs as { qkv: Info; keys: Info; values: Info; keyMask: Info };
  const { pos, nHeads: H, nKvHeads: Hkv, headDim: hd, scale, cos, sin } = args.attrs as unknown as DecodeAttentionAttrs;
  const B = qkv.shape[0], cap = keyMask.shape[1], rep = H / Hkv, half = hd / 2;
  const want = (t: Info, shape: number[], what: string) => {
    if (t.dtype !== 'float32' || t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new Error(`${DECODE_ATTENTION}: ${what} has shape [${t.shape}] (${t.dtype}), expected float32 [${shape}]`);
    }
  };
  want(qkv, [B, (H + 2 * Hkv) * hd], 'qkv');
  want(keys, [B, Hkv, hd, cap], 'keys');
  want(values, [B, Hkv, cap, hd], 'values');
  want(keyMask, [B, cap], 'keyMask');
  if (hd % 4 !== 0 || cap % 4 !== 0 || !(pos >= 0 && pos < cap) || !Number.isInteger(rep)) {
    throw new Error(`${DECODE_ATTENTION}: needs headDim and capacity multiples of 4 and pos < capacity (hd ${hd}, capacity ${cap}, pos ${pos})`);
  }
  // Keys past pos are masked (mask 0 → −1e9, exp → exactly 0), so scoring up to the next multiple of 4 is exact.
  const n = Math.min(cap, Math.ceil((pos + 1) / 4) * 4);
  const q = be.makeOutput([B, H, hd], 'float32');
  const scores = be.makeOutput([B * H, n], 'float32');
  const out = be.makeOutput([B, H * hd], 'float32');
  let probs: Info | null = null;
  try {
    const f = heapF32(be);
    const src = at32(be, qkv), kp = at32(be, keys), vp = at32(be, values), mp = at32(be, keyMask), qp = at32(be, q);
    const row = (H + 2 * Hkv) * hd;
    // RoPE: x·cos + roll(x)·sin, roll(x) = [x2, x1] (the sign of rotate_half is folded into sin)
    const qc = Float32Array.from(cos, (c) => c * scale), qs = Float32Array.from(sin, (v) => v * scale);
    for (let b = 0; b < B; b++) {
      const base = src + b * row;
      f[mp + b * cap + pos] = 1;
      for (let h = 0; h < H; h++) {
        const x = base + h * hd, o = qp + (b * H + h) * hd;
        for (let i = 0; i < half; i++) f[o + i] = f[x + i] * qc[i] + f[x + half + i] * qs[i];
        for (let i = half; i < hd; i++) f[o + i] = f[x + i] * qc[i] + f[x - half + i] * qs[i];
      }
      for (let g = 0; g < Hkv; g++) {
        const x = base + (H + g) * hd, o = kp + (b * Hkv + g) * hd * cap + pos;
        for (let i = 0; i < half; i++) f[o + i * cap] = f[x + i] * cos[i] + f[x + half + i] * sin[i];
        for (let i = half; i < hd; i++) f[o + i * cap] = f[x + i] * cos[i] + f[x - half + i] * sin[i];
        const v = base + (H + Hkv + g) * hd, ov = vp + ((b * Hkv + g) * cap + pos) * hd;
        for (let i = 0; i < hd; i++) f[ov + i] = f[v + i];
      }
    }
    const loops = simdLoops(be);
    const sp = at32(be, scores);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = b * Hkv + Math.floor(h / rep);
        loops.scores(4 * (qp + (b * H + h) * hd), 4 * (kp + g * hd * cap), 4 * (mp + b * cap), 4 * (sp + (b * H + h) * n), hd, 4 * cap, n);
      }
    }
    probs = runKernel('Softmax', { inputs: { logits: scores }, backend: be, attrs: { dim: 1 } });
    const pp = at32(be, probs), op = at32(be, out);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = b * Hkv + Math.floor(h / rep);
        loops.context(4 * (pp + (b * H + h) * n), 4 * (vp + g * cap * hd), 4 * (op + (b * H + h) * hd), n, hd);
      }
    }
  } finally {
    be.disposeData(q.dataId);
    be.disposeData(scores.dataId);
    if (probs) be.disposeData(probs.dataId);
  }
  return out;
}

interface Replacement { kernelName: string; make: (original: tf.KernelFunc) => tf.KernelFunc }
const REPLACEMENTS: Replacement[] = [
  { kernelName: 'BatchMatMul', make: (o) => batchMatMul(o) as unknown as tf.KernelFunc },
  { kernelName: 'Transpose', make: (o) => transpose(o) as unknown as tf.KernelFunc },
  { kernelName: 'Slice', make: (o) => slice(o) as unknown as tf.KernelFunc },
  { kernelName: 'SplitV', make: (o) => splitV(o) as unknown as tf.KernelFunc },
  { kernelName: 'Concat', make: (o) => concat(o) as unknown as tf.KernelFunc },
  { kernelName: 'GatherV2', make: (o) => gatherV2(o) as unknown as tf.KernelFunc },
  { kernelName: 'Sum', make: (o) => sum(o) as unknown as tf.KernelFunc },
  { kernelName: 'Identity', make: (o) => identity(o) as unknown as tf.KernelFunc },
  { kernelName: 'Cast', make: (o) => cast(o) as unknown as tf.KernelFunc },
];

/** Kernel names this module replaces or adds on the wasm backend (recorded in run.json). */
export const PATCHED_WASM_KERNELS: readonly string[] = [...REPLACEMENTS.map((r) => r.kernelName), 'UnsortedSegmentSum', DECODE_ATTENTION, ROPE, SWIGLU, SWIGLU_GRAD];

let registered = false;
const originals = new Map<string, tf.KernelConfig>();

/**
 * Registers the kernels above for the 'wasm' backend. Idempotent. Call after importing
 * '@tensorflow/tfjs-backend-wasm' (which registers the stock kernels) and before tf.setBackend('wasm').
 */
export function registerWasmKernels(): void {
  if (registered) return;
  for (const r of REPLACEMENTS) {
    const stock = tf.getKernel(r.kernelName, 'wasm');
    if (!stock) throw new Error(`wasm backend has no ${r.kernelName} kernel to replace`);
    originals.set(r.kernelName, stock);
    tf.unregisterKernel(r.kernelName, 'wasm');
    // Keep the stock setupFunc: our fallbacks call the stock kernelFunc, which needs its cwrap.
    tf.registerKernel({ ...stock, kernelFunc: r.make(stock.kernelFunc) });
  }
  if (!tf.getKernel('UnsortedSegmentSum', 'wasm')) {
    tf.registerKernel({ kernelName: 'UnsortedSegmentSum', backendName: 'wasm',
      kernelFunc: unsortedSegmentSum as unknown as tf.KernelFunc });
  }
  const added: [string, (args: KernelArgs) => Info | Info[]][] = [[DECODE_ATTENTION, decodeAttentionKernel], [ROPE, ropeKernel],
    [SWIGLU, swigluKernel], [SWIGLU_GRAD, swigluGradKernel]];
  for (const [kernelName, f] of added) {
    if (!tf.getKernel(kernelName, 'wasm')) tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: f as unknown as tf.KernelFunc });
  }
  registered = true;
}

/**
 * Puts the stock kernels back (bench/kernels.ts compares both). UnsortedSegmentSum and the fused kernels (decode
 * attention, RoPE, SwiGLU) stay: stock has none of them.
 */
export function unregisterWasmKernels(): void {
  if (!registered) return;
  for (const [name, stock] of originals) {
    tf.unregisterKernel(name, 'wasm');
    tf.registerKernel(stock);
  }
  originals.clear();
  registered = false;
}
