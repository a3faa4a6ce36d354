// One file although long: the loops share the instruction helpers (W) and are assembled into one module.
// WebAssembly SIMD loops the engine assembles itself (no toolchain: the bytes are written below), and the blocked
// product on them: scores/context of attention, transposes, GEMM, column sums, RoPE, SwiGLU and its gradient.
import '@tensorflow/tfjs-backend-wasm';

import { WasmBackend, WasmModule, at32, heap32 } from './heap';

// ---- WebAssembly SIMD loops -------------------------------------------------------------------------------
//
// A few inner loops that neither the stock kernels nor JavaScript run well (JS manages ~0.3–1 GMAC/s and
// 1.5–2.5 ns per transposed element) are compiled from the bytes below into a small module that imports the
// backend's own memory, so they work on tensors in place. The encoder covers only what those loops use.

// A minimal WebAssembly encoder: i32 arithmetic, blocks and loops, f32x4 loads, stores, arithmetic and shuffles.
export const leb = (n: number): number[] => {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
export const sleb = (n: number): number[] => {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
};
export const vec = (items: number[][]): number[] => [...leb(items.length), ...items.flat()];
export const str = (s: string): number[] => [...leb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
export const I32 = 0x7f,
  V128 = 0x7b;
export const simd = (code: number, ...imm: number[]) => [0xfd, ...leb(code), ...imm];
export const W = {
  get: (i: number) => [0x20, ...leb(i)],
  set: (i: number) => [0x21, ...leb(i)],
  tee: (i: number) => [0x22, ...leb(i)],
  i32: (n: number) => [0x41, ...sleb(n)],
  add: [0x6a],
  sub: [0x6b],
  mul: [0x6c],
  and: [0x71],
  shl: [0x74],
  geU: [0x4f],
  gtS: [0x4a],
  ltU: [0x49],
  eqz: [0x45],
  select: [0x1b],
  if: [0x04, 0x40],
  else: [0x05],
  f32: (x: number) => [0x43, ...new Uint8Array(new Float32Array([x]).buffer)],
  f32load: [0x2a, 2, 0],
  block: [0x02, 0x40],
  loop: [0x03, 0x40],
  end: [0x0b],
  br: (depth: number) => [0x0c, ...leb(depth)],
  brIf: (depth: number) => [0x0d, ...leb(depth)],
  // v128.load / store with 4-byte alignment (cache rows start at any multiple of 4 floats' worth of bytes)
  vload: simd(0, 2, 0),
  vstore: simd(11, 2, 0),
  vload16: simd(0, 2, 16),
  vstore16: simd(11, 2, 16),
  splat: simd(19),
  vzero: simd(12, ...new Array(16).fill(0)),
  fadd: simd(228),
  fsub: simd(229),
  fmul: simd(230),
  fdiv: simd(231),
  fneg: simd(225),
  fsqrt: simd(227),
  f32FromBits: [0xbe], // f32.reinterpret_i32
  // pmin / pmax: plain minps / maxps (min / max propagate NaN through several instructions)
  fpmin: simd(234),
  fpmax: simd(235),
  i32x4Sub: simd(177),
  i32x4Shl: simd(171),
  promoteLow: simd(95),
  dadd: simd(240),
  vstoreAt: (offset: number) => simd(11, 2, ...leb(offset)),
  /** i8x16.shuffle picking f32 lanes of (a, b): lanes 0–3 from a, 4–7 from b */
  shuffle: (lanes: number[]) => simd(13, ...lanes.flatMap((l) => [4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3])),
};
/** A function body: locals declared as [count, type] runs, then the code. */
export function wasmFunc(locals: [number, number][], code: number[][]): number[] {
  const body = [...vec(locals.map(([n, t]) => [...leb(n), t])), ...code.flat(), ...W.end];
  return [...leb(body.length), ...body];
}

// scores(q, k, m, out, hd, kStride, n): out[t] = Σ_j q[j]·k[j·kStride/4 + t] + (m[t] − 1)·1e9 for t < n (a
// multiple of 4), 4 keys per iteration. Pointers are byte addresses; k is a [hd, capacity] block of the
// transposed key cache and m the row's 1/0 key mask, so hidden keys get the same −1e9 as the generic path.
// Locals: 0 q, 1 k, 2 m, 3 out, 4 hd, 5 kStride, 6 n | 7 t (bytes), 8 j, 9 kp, 10 qp, 11 end | 12 acc
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const scoresFn = wasmFunc(
  [
    [5, I32],
    [1, V128],
  ],
  [
    W.i32(0), W.set(7),
    W.get(6), W.i32(2), W.shl, W.set(11),
    W.block,
    W.loop,
    W.get(7), W.get(11), W.geU, W.brIf(1),
    W.vzero, W.set(12),
    W.get(1), W.get(7), W.add, W.set(9),
    W.get(0), W.set(10),
    W.get(4), W.set(8),
    W.block,
    W.loop,
    W.get(12), W.get(10), W.f32load, W.splat, W.get(9), W.vload, W.fmul, W.fadd, W.set(12),
    W.get(10), W.i32(4), W.add, W.set(10),
    W.get(9), W.get(5), W.add, W.set(9),
    W.get(8), W.i32(1), W.sub, W.tee(8),
    W.brIf(0),
    W.end,
    W.end,
    W.get(3), W.get(7), W.add, W.get(12), W.get(2), W.get(7), W.add, W.vload, W.f32(1), W.splat, W.fsub, W.f32(1e9),
    W.splat, W.fmul, W.fadd, W.vstore,
    W.get(7), W.i32(16), W.add, W.set(7),
    W.br(0),
    W.end,
    W.end,
  ],
);
// context(p, v, out, n, hd): out[j] = Σ_{t<n} p[t]·v[t·hd + j] for j < hd (a multiple of 4), 4 dims at a time.
// Locals: 0 p, 1 v, 2 out, 3 n, 4 hd | 5 j (bytes), 6 t, 7 pp, 8 vp, 9 row bytes | 10 acc
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const contextFn = wasmFunc(
  [
    [5, I32],
    [1, V128],
  ],
  [
    W.i32(0), W.set(5),
    W.get(4), W.i32(2), W.shl, W.set(9),
    W.block,
    W.loop,
    W.get(5), W.get(9), W.geU, W.brIf(1),
    W.vzero, W.set(10),
    W.get(0), W.set(7),
    W.get(1), W.get(5), W.add, W.set(8),
    W.get(3), W.set(6),
    W.block,
    W.loop,
    W.get(10), W.get(7), W.f32load, W.splat, W.get(8), W.vload, W.fmul, W.fadd, W.set(10),
    W.get(7), W.i32(4), W.add, W.set(7),
    W.get(8), W.get(9), W.add, W.set(8),
    W.get(6), W.i32(1), W.sub, W.tee(6),
    W.brIf(0),
    W.end,
    W.end,
    W.get(2), W.get(5), W.add, W.get(10), W.vstore,
    W.get(5), W.i32(16), W.add, W.set(5),
    W.br(0),
    W.end,
    W.end,
  ],
);
// transpose(src, dst, R, C): dst[c·R + r] = src[r·C + c] for r < R & ~3, c < C & ~3 (the caller copies the
// ragged edges), in 4×4 blocks: four row loads, eight shuffles, four column stores. Columns outside, rows
// inside: each block's stores continue the previous block's four output rows, so writes stream; the other order
// scatters them R floats apart and, for power-of-two R, onto the same few cache sets.
// Locals: 0 src, 1 dst, 2 R, 3 C | 4 r, 5 c, 6 R4, 7 C4, 8 row bytes, 9 column bytes, 10 s, 11 d | 12–19 v128
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const transposeFn = wasmFunc(
  [
    [8, I32],
    [8, V128],
  ],
  [
    W.get(2), W.i32(-4), W.and, W.set(6),
    W.get(3), W.i32(-4), W.and, W.set(7),
    W.get(3), W.i32(2), W.shl, W.set(8),
    W.get(2), W.i32(2), W.shl, W.set(9),
    W.i32(0), W.set(5),
    W.block,
    W.loop,
    W.get(5), W.get(7), W.geU, W.brIf(1),
    W.i32(0), W.set(4),
    W.block,
    W.loop,
    W.get(4), W.get(6), W.geU, W.brIf(1),
    // s = src + r·rowBytes + 4c; rows r..r+3 → locals 12–15
    W.get(0), W.get(4), W.get(8), W.mul, W.add, W.get(5), W.i32(2), W.shl, W.add, W.tee(10),
    W.vload, W.set(12),
    W.get(10), W.get(8), W.add, W.tee(10),
    W.vload, W.set(13),
    W.get(10), W.get(8), W.add, W.tee(10),
    W.vload, W.set(14),
    W.get(10), W.get(8), W.add, W.vload, W.set(15),
    W.get(12), W.get(13), W.shuffle([0, 4, 1, 5]), W.set(16),
    W.get(12), W.get(13), W.shuffle([2, 6, 3, 7]), W.set(17),
    W.get(14), W.get(15), W.shuffle([0, 4, 1, 5]), W.set(18),
    W.get(14), W.get(15), W.shuffle([2, 6, 3, 7]), W.set(19),
    // d = dst + c·columnBytes + 4r; columns c..c+3
    W.get(1), W.get(5), W.get(9), W.mul, W.add, W.get(4), W.i32(2), W.shl, W.add, W.tee(11),
    W.get(16), W.get(18), W.shuffle([0, 1, 4, 5]), W.vstore,
    W.get(11), W.get(9), W.add, W.tee(11),
    W.get(16), W.get(18), W.shuffle([2, 3, 6, 7]), W.vstore,
    W.get(11), W.get(9), W.add, W.tee(11),
    W.get(17), W.get(19), W.shuffle([0, 1, 4, 5]), W.vstore,
    W.get(11), W.get(9), W.add, W.get(17), W.get(19), W.shuffle([2, 3, 6, 7]), W.vstore,
    W.get(4), W.i32(4), W.add, W.set(4),
    W.br(0),
    W.end,
    W.end,
    W.get(5), W.i32(4), W.add, W.set(5),
    W.br(0),
    W.end,
    W.end,
  ],
);

// gemm(A, B, C, M, K, N, lda, ldb, ldc, acc): C[M, N] (+)= A[M, K]·B[K, N], row-major with byte row strides, for
// M ≥ 4, N ≥ 8, K ≥ 1, in 4×8 tiles (eight f32x4 accumulators; B read in place, no packing). acc ≠ 0 adds to C
// (a later block of K). The last tile of a row or column range is shifted back to end at M or N, recomputing a
// few entries instead of handling ragged tails — so with acc ≠ 0, M and N must be multiples of 4 and 8.
// Locals: 0 A, 1 B, 2 C, 3 M, 4 K, 5 N, 6 lda, 7 ldb, 8 ldc, 9 acc | 10 i0, 11 j0, 12 i, 13 j, 14 k, 15 pa, 16 pb,
// 17 pc, 18 2·lda, 19 3·lda, 20 M − 4, 21 N − 8 | 22–29 accumulators, 30–31 B row, 32 A splat
export const accMulAdd = (acc: number, b: number) => [...W.get(acc), ...W.get(32), ...W.get(b), ...W.fmul, ...W.fadd, ...W.set(acc)];
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const gemmFn = wasmFunc(
  [
    [12, I32],
    [11, V128],
  ],
  [
    W.get(6), W.i32(1), W.shl, W.set(18),
    W.get(18), W.get(6), W.add, W.set(19),
    W.get(3), W.i32(4), W.sub, W.set(20),
    W.get(5), W.i32(8), W.sub, W.set(21),
    W.i32(0), W.set(10),
    W.block,
    W.loop,
    W.get(10), W.get(3), W.geU, W.brIf(1),
    W.get(20), W.get(10), W.get(10), W.get(20), W.gtS, W.select, W.set(12),
    W.i32(0), W.set(11),
    W.block,
    W.loop,
    W.get(11), W.get(5), W.geU, W.brIf(1),
    W.get(21), W.get(11), W.get(11), W.get(21), W.gtS, W.select, W.set(13),
    W.get(2), W.get(12), W.get(8), W.mul, W.add, W.get(13), W.i32(2), W.shl, W.add, W.set(17),
    // accumulators: zero, or this tile of C
    W.get(9), W.eqz, W.if,
    ...[22, 23, 24, 25, 26, 27, 28, 29].map((l) => [...W.vzero, ...W.set(l)]), W.else,
    ...[0, 1, 2, 3].map((r) => [ ...W.get(17), ...W.get(8), ...W.i32(r), ...W.mul, ...W.add, ...W.tee(16), ...W.vload,
    ...W.set(22 + 2 * r), ...W.get(16), ...W.vload16, ...W.set(23 + 2 * r), ]), W.end,
    W.get(0), W.get(12), W.get(6), W.mul, W.add, W.set(15),
    W.get(1), W.get(13), W.i32(2), W.shl, W.add, W.set(16),
    W.get(4), W.set(14),
    W.loop,
    W.get(16), W.vload, W.set(30),
    W.get(16), W.vload16, W.set(31),
    ...[0, 6, 18, 19].map((off, r) => [ ...(off === 0 ? W.get(15) : [...W.get(15), ...W.get(off), ...W.add]), ...W.f32load,
    ...W.splat, ...W.set(32), ...accMulAdd(22 + 2 * r, 30), ...accMulAdd(23 + 2 * r, 31), ]), W.get(15), W.i32(4),
    W.add, W.set(15),
    W.get(16), W.get(7), W.add, W.set(16),
    W.get(14), W.i32(1), W.sub, W.tee(14),
    W.brIf(0),
    W.end,
    ...[0, 1, 2, 3].map((r) => [ ...(r === 0 ? [] : [...W.get(17), ...W.get(8), ...W.add, ...W.set(17)]), ...W.get(17),
    ...W.get(22 + 2 * r), ...W.vstore, ...W.get(17), ...W.get(23 + 2 * r), ...W.vstore16, ]), W.get(11), W.i32(8),
    W.add, W.set(11),
    W.br(0),
    W.end,
    W.end,
    W.get(10), W.i32(4), W.add, W.set(10),
    W.br(0),
    W.end,
    W.end,
  ],
);

// colsum(x, out, R, C, C8): out[c] = Σ_{r<R} x[r·C + c] for c < C8 (a multiple of 8; the caller sums the other
// columns), accumulated in float64 like the JS reduction it replaces: each f32x4 of a row is widened to two f64x2.
// out is a float64 buffer. Locals: 0 x, 1 out, 2 R, 3 C, 4 C8 | 5 column bytes, 6 r, 7 p, 8 row bytes, 9 end,
// 10 po | 11–12 row values, 13–16 accumulators
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const colsumFn = wasmFunc(
  [
    [6, I32],
    [6, V128],
  ],
  [
    W.get(3), W.i32(2), W.shl, W.set(8),
    W.get(4), W.i32(2), W.shl, W.set(9),
    W.i32(0), W.set(5),
    W.get(1), W.set(10),
    W.block,
    W.loop,
    W.get(5), W.get(9), W.geU, W.brIf(1),
    ...[13, 14, 15, 16].map((l) => [...W.vzero, ...W.set(l)]), W.get(0), W.get(5), W.add, W.set(7),
    W.get(2), W.set(6),
    W.loop,
    W.get(7), W.vload, W.set(11),
    W.get(7), W.vload16, W.set(12),
    W.get(13), W.get(11), W.promoteLow, W.dadd, W.set(13),
    W.get(14), W.get(11), W.get(11), W.shuffle([2, 3, 0, 1]), W.promoteLow, W.dadd, W.set(14),
    W.get(15), W.get(12), W.promoteLow, W.dadd, W.set(15),
    W.get(16), W.get(12), W.get(12), W.shuffle([2, 3, 0, 1]), W.promoteLow, W.dadd, W.set(16),
    W.get(7), W.get(8), W.add, W.set(7),
    W.get(6), W.i32(1), W.sub, W.tee(6),
    W.brIf(0),
    W.end,
    W.get(10), W.get(13), W.vstore,
    W.get(10), W.get(14), W.vstore16, W.get(10), W.get(15), W.vstoreAt(32), W.get(10), W.get(16), W.vstoreAt(48), W.get(10),
    W.i32(64), W.add, W.set(10),
    W.get(5), W.i32(32), W.add, W.set(5),
    W.br(0),
    W.end,
    W.end,
  ],
);

// rope(x, c, s, y, rows, half): y = x·c + swap(x)·s row by row, swap exchanging the two halves of each row of
// 2·half floats (half a multiple of 4); c and s advance with x (rows of the cos / sign-folded sin tables).
// Locals: 0 x, 1 c, 2 s, 3 y, 4 rows, 5 half | 6 i (bytes), 7 half bytes, 8 row bytes | 9 lo, 10 hi
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const ropeFn = wasmFunc(
  [
    [3, I32],
    [2, V128],
  ],
  [
    W.get(5), W.i32(2), W.shl, W.set(7),
    W.get(7), W.i32(1), W.shl, W.set(8),
    W.block,
    W.loop,
    W.get(4), W.eqz, W.brIf(1),
    W.i32(0), W.set(6),
    W.loop,
    W.get(0), W.get(6), W.add, W.vload, W.set(9),
    W.get(0), W.get(6), W.add, W.get(7), W.add, W.vload, W.set(10),
    // y_lo = lo·c_lo + hi·s_lo
    W.get(3), W.get(6), W.add, W.get(9), W.get(1), W.get(6), W.add, W.vload, W.fmul, W.get(10), W.get(2), W.get(6),
    W.add, W.vload, W.fmul, W.fadd, W.vstore,
    // y_hi = hi·c_hi + lo·s_hi
    W.get(3), W.get(6), W.add, W.get(7), W.add, W.get(10), W.get(1), W.get(6), W.add, W.get(7), W.add, W.vload, W.fmul,
    W.get(9), W.get(2), W.get(6), W.add, W.get(7), W.add, W.vload, W.fmul, W.fadd, W.vstore,
    W.get(6), W.i32(16), W.add, W.tee(6),
    W.get(7), W.ltU, W.brIf(0),
    W.end,
    ...[0, 1, 2, 3].map((l) => [...W.get(l), ...W.get(8), ...W.add, ...W.set(l)]), W.get(4), W.i32(1), W.sub, W.set(4),
    W.br(0),
    W.end,
    W.end,
  ],
);

/**
 * σ(x) = 1 / (1 + e^−x) for f32x4. e^t by Cephes' expf: t = −x clamped to [−87, 88] (σ is then 1, or below
 * 1e−38, anyway), n = round(t·log₂e), r = t − n·ln 2 (ln 2 in two parts), e^r ≈ 1 + r + r²·P(r) with P of degree
 * 5 (about 1 ulp), times 2ⁿ made in the exponent bits. The rounding adds 1.5·2²³, which leaves n in the low
 * mantissa bits (wasm SIMD's float→int conversion is slow). The constants live in v128 locals set once per call
 * (sigmoidConsts), since a v128.const in the loop costs several instructions each time.
 */
export const SIGMOID_CONSTS = [
  -87,
  88,
  Math.LOG2E,
  12582912,
  0.693359375,
  2.1219444e-4,
  1.98756915e-4,
  1.3981999507e-3,
  8.3334519073e-3,
  4.1665795894e-2,
  1.6666665459e-1,
  5.0000001201e-1,
  1,
];
/** Code setting locals k … k + 13 to the constants of sigmoidCode. */
export function sigmoidConsts(k: number): number[] {
  const bytes = (a: Float32Array | Int32Array) => Array.from(new Uint8Array(a.buffer));
  return [
    ...SIGMOID_CONSTS.flatMap((v, i) => [...simd(12, ...bytes(new Float32Array([v, v, v, v])))].concat(W.set(k + i))),
    ...simd(12, ...bytes(new Int32Array(4).fill(0x4b400000 - 127))),
    ...W.set(k + SIGMOID_CONSTS.length),
  ];
}
/** Code leaving σ of f32x4 local x on the stack; t, n, m are scratch v128 locals, k the first constant local. */
export function sigmoidCode(x: number, t: number, n: number, m: number, k: number): number[] {
  const c = (i: number) => W.get(k + i);
  const code = [
    ...W.get(x),
    ...W.fneg,
    ...c(0),
    ...W.fpmax,
    ...c(1),
    ...W.fpmin,
    ...W.set(t),
    // n (as 1.5·2²³ + n) = t·log₂e + 1.5·2²³, rounded to nearest by the add
    ...W.get(t),
    ...c(2),
    ...W.fmul,
    ...c(3),
    ...W.fadd,
    ...W.set(n),
    // t ← r = t − n·0.693359375 + n·2.12194440e−4, with n = (1.5·2²³ + n) − 1.5·2²³ exactly
    ...W.get(t),
    ...W.get(n),
    ...c(3),
    ...W.fsub,
    ...W.tee(m),
    ...c(4),
    ...W.fmul,
    ...W.fsub,
    ...W.get(m),
    ...c(5),
    ...W.fmul,
    ...W.fadd,
    ...W.set(t),
    // P(r) by Horner
    ...c(6),
  ];
  for (let i = 7; i <= 11; i++) code.push(...W.get(t), ...W.fmul, ...c(i), ...W.fadd);
  code.push(
    // e^r = P·r² + r + 1
    ...W.get(t),
    ...W.get(t),
    ...W.fmul,
    ...W.fmul,
    ...W.get(t),
    ...W.fadd,
    ...c(12),
    ...W.fadd,
    // · 2ⁿ: bits (n + 127) << 23, n the integer in the low bits of 1.5·2²³ + n
    ...W.get(n),
    ...c(13),
    ...W.i32x4Sub,
    ...W.i32(23),
    ...W.i32x4Shl,
    ...W.fmul,
    // σ = 1 / (1 + e^−x)
    ...W.set(t),
    ...c(12),
    ...c(12),
    ...W.get(t),
    ...W.fadd,
    ...W.fdiv,
  );
  return code;
}

// swiglu(gu, out, sig, rows, F): out = g·σ(g)·u per row, g | u the halves of a gu row of 2F floats (F a multiple
// of 4), and sig = σ(g) for the backward pass. The product order, (g·σ)·u, is that of the ops it replaces.
// swigluGrad(gu, sig, d, out, rows, F): out = [d·u·σ·(1 + g·(1 − σ)) | d·g·σ], the gradient of the above for
// upstream d (d/dg of g·σ(g) = σ + g·σ·(1 − σ)).
// Locals: 0 gu, 1 out, 2 sig, 3 rows, 4 F | 5 j, 6 half-row bytes | 7 g, 8 σ, 9–11 scratch, 12–25 constants
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const swigluFn = wasmFunc(
  [
    [2, I32],
    [19, V128],
  ],
  [
    sigmoidConsts(12), W.get(4), W.i32(2), W.shl, W.set(6),
    W.block,
    W.loop,
    W.get(3), W.eqz, W.brIf(1),
    W.i32(0), W.set(5),
    W.loop,
    W.get(0), W.get(5), W.add, W.vload, W.set(7),
    sigmoidCode(7, 9, 10, 11, 12), W.set(8),
    W.get(2), W.get(5), W.add, W.get(8), W.vstore,
    W.get(1), W.get(5), W.add, W.get(7), W.get(8), W.fmul, W.get(0), W.get(5), W.add, W.get(6), W.add, W.vload, W.fmul,
    W.vstore,
    W.get(5), W.i32(16), W.add, W.tee(5),
    W.get(6), W.ltU, W.brIf(0),
    W.end,
    W.get(0), W.get(6), W.i32(1), W.shl, W.add, W.set(0),
    W.get(1), W.get(6), W.add, W.set(1),
    W.get(2), W.get(6), W.add, W.set(2),
    W.get(3), W.i32(1), W.sub, W.set(3),
    W.br(0),
    W.end,
    W.end,
  ],
);
// Locals: 0 gu, 1 sig, 2 d, 3 out, 4 rows, 5 F | 6 j, 7 half-row bytes | 8 g, 9 u, 10 σ, 11 d·σ
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const swigluGradFn = wasmFunc(
  [
    [2, I32],
    [4, V128],
  ],
  [
    W.get(5), W.i32(2), W.shl, W.set(7),
    W.block,
    W.loop,
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
    W.get(3), W.get(6), W.add, W.get(11), W.get(9), W.fmul, W.f32(1), W.splat, W.get(8), W.f32(1), W.splat, W.get(10),
    W.fsub, W.fmul, W.fadd, W.fmul, W.vstore,
    W.get(6), W.i32(16), W.add, W.tee(6),
    W.get(7), W.ltU, W.brIf(0),
    W.end,
    W.get(0), W.get(7), W.i32(1), W.shl, W.add, W.set(0),
    W.get(1), W.get(7), W.add, W.set(1),
    W.get(2), W.get(7), W.add, W.set(2),
    W.get(3), W.get(7), W.i32(1), W.shl, W.add, W.set(3),
    W.get(4), W.i32(1), W.sub, W.set(4),
    W.br(0),
    W.end,
    W.end,
  ],
);

// adam(p, g, m, v, n, b1, c1, b2, c2, d1, d2, eps, lr): one Adam update of n floats (a multiple of 4) in place, the
// scalars passed as their float32 bits. Every line is one kernel of the op sequence it replaces (src/engine/model/
// optim.ts), each result rounded to float32 as that kernel stores it, so the bits are the same:
//   m ← m·b1 + g·c1;  v ← v·b2 + (g·g)·c2;  p ← p − ((m / d1) / (√(v / d2) + eps))·lr
// Locals: 0 p, 1 g, 2 m, 3 v, 4 n, 5–12 scalars' bits | 13 i (bytes), 14 end | 15–22 scalars, 23 g, 24 m, 25 v
// One line per statement: prettier's one opcode per line made these tables 770 lines.
// prettier-ignore
export const adamFn = wasmFunc(
  [
    [2, I32],
    [11, V128],
  ],
  [
    ...[0, 1, 2, 3, 4, 5, 6, 7].map((k) => [...W.get(5 + k), ...W.f32FromBits, ...W.splat, ...W.set(15 + k)]), W.i32(0),
    W.set(13),
    W.get(4), W.i32(2), W.shl, W.set(14),
    W.block,
    W.loop,
    W.get(13), W.get(14), W.geU, W.brIf(1),
    W.get(1), W.get(13), W.add, W.vload, W.set(23),
    W.get(2), W.get(13), W.add, W.vload, W.get(15), W.fmul, W.get(23), W.get(16), W.fmul, W.fadd, W.set(24),
    W.get(3), W.get(13), W.add, W.vload, W.get(17), W.fmul, W.get(23), W.get(23), W.fmul, W.get(18), W.fmul, W.fadd,
    W.set(25),
    W.get(2), W.get(13), W.add, W.get(24), W.vstore,
    W.get(3), W.get(13), W.add, W.get(25), W.vstore,
    W.get(0), W.get(13), W.add, W.get(0), W.get(13), W.add, W.vload, W.get(24), W.get(19), W.fdiv, W.get(25), W.get(20),
    W.fdiv, W.fsqrt, W.get(21), W.fadd, W.fdiv, W.get(22), W.fmul, W.fsub, W.vstore,
    W.get(13), W.i32(16), W.add, W.set(13),
    W.br(0),
    W.end,
    W.end,
  ],
);

/** The module, importing a plain memory (the backend's) or, for the helper thread, a shared one. */
export function simdModule(shared: boolean): Uint8Array<ArrayBuffer> {
  // limits: flags 0 = min only; 3 = shared, min and max (a shared memory must declare a maximum)
  const limits = shared ? [0x03, 0x00, ...leb(HELPER_MAX_PAGES)] : [0x00, 0x00];
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...[
      [1, vec([7, 5, 4, 10, 6, 13].map((n) => [0x60, ...vec(new Array(n).fill([I32])), 0]))], // (i32 × n) → ()
      [2, vec([[...str('env'), ...str('memory'), 0x02, ...limits]])], // imports its memory, any size
      [3, vec([[0], [1], [2], [3], [1], [4], [1], [4], [5]])],
      [
        7,
        vec([
          [...str('scores'), 0x00, 0],
          [...str('context'), 0x00, 1],
          [...str('transpose'), 0x00, 2],
          [...str('gemm'), 0x00, 3],
          [...str('colsum'), 0x00, 4],
          [...str('rope'), 0x00, 5],
          [...str('swiglu'), 0x00, 6],
          [...str('swigluGrad'), 0x00, 7],
          [...str('adam'), 0x00, 8],
        ]),
      ],
      [10, vec([scoresFn, contextFn, transposeFn, gemmFn, colsumFn, ropeFn, swigluFn, swigluGradFn, adamFn])],
    ].flatMap(([id, body]) => [id as number, ...leb((body as number[]).length), ...(body as number[])]),
  ]);
}
/**
 * Pages (64 KiB) the helper thread's shared memory may grow to: 256 MiB (it never shrinks). A product whose
 * worker half needs more (say logits over a 150k vocabulary) stays on this thread.
 */
export const HELPER_MAX_PAGES = 4096;
export const SIMD_MODULE = simdModule(false);

export interface SimdLoops {
  scores(q: number, k: number, m: number, out: number, hd: number, kStride: number, n: number): void;
  context(p: number, v: number, out: number, n: number, hd: number): void;
  transpose(src: number, dst: number, R: number, C: number): void;
  gemm(a: number, b: number, c: number, M: number, K: number, N: number, lda: number, ldb: number, ldc: number, acc: number): void;
  colsum(x: number, out: number, R: number, C: number, C8: number): void;
  rope(x: number, c: number, s: number, y: number, rows: number, half: number): void;
  swiglu(gu: number, out: number, sig: number, rows: number, F: number): void;
  swigluGrad(gu: number, sig: number, d: number, out: number, rows: number, F: number): void;
  adam(
    p: number,
    g: number,
    m: number,
    v: number,
    n: number,
    b1: number,
    c1: number,
    b2: number,
    c2: number,
    d1: number,
    d2: number,
    eps: number,
    lr: number,
  ): void;
}
let simdSupported: boolean | null = null;
/** Whether this runtime has WebAssembly SIMD (tfjs then runs its SIMD binary too). */
export function hasSimd(): boolean {
  simdSupported ??= WebAssembly.validate(SIMD_MODULE);
  return simdSupported;
}
export const simdInstances = new WeakMap<WasmModule, SimdLoops>();
export function simdLoops(be: WasmBackend): SimdLoops {
  let l = simdInstances.get(be.wasm);
  if (!l) {
    const memory = (be.wasm as unknown as { asm: { memory: WebAssembly.Memory } }).asm.memory;
    l = new WebAssembly.Instance(new WebAssembly.Module(SIMD_MODULE), { env: { memory } }).exports as unknown as SimdLoops;
    simdInstances.set(be.wasm, l);
  }
  return l;
}

// Block sizes of simdGemm: a [KB, NB] block of B (256 KB) stays in L2 while every row tile of A passes over it.
let gemmBlockK = 256,
  gemmBlockN = 256;
/** The K and N block sizes of the SIMD product (the helper thread uses the same). */
export function gemmBlocks(): { k: number; n: number } {
  return { k: gemmBlockK, n: gemmBlockN };
}
/** Bench hook: the K and N block sizes of the SIMD product. */
export function setGemmBlocks(k: number, n: number): void {
  gemmBlockK = k;
  gemmBlockN = n;
}

/** Floats of scratch blockedGemm needs: a copy of one B block at a padded stride, or none. */
export function gemmScratch(K: number, ldb: number): number {
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
export function blockedGemm(
  gemm: SimdLoops['gemm'],
  heap: Int32Array,
  a: number,
  b: number,
  c: number,
  M: number,
  K: number,
  N: number,
  lda: number,
  ldb: number,
  ldc: number,
  scratch: number,
  blockK: number,
  blockN: number,
): void {
  const KB = M % 4 === 0 && N % 8 === 0 ? blockK : K;
  const repack = ldb % 256 === 0 && K > 8;
  for (let k0 = 0; k0 < K; k0 += KB) {
    const kl = Math.min(KB, K - k0);
    for (let n0 = 0; n0 < N; n0 += blockN) {
      // a last block narrower than one tile joins the previous one
      const nl = N - n0 - blockN < 8 ? N - n0 : blockN;
      let bp = b + k0 * ldb + n0,
        bs = ldb;
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
export function simdGemm(be: WasmBackend, a: number, b: number, c: number, M: number, K: number, N: number, lda = K, ldb = N, ldc = N): void {
  const need = gemmScratch(K, ldb);
  const scratch = need > 0 ? be.makeOutput([need], 'float32') : null;
  try {
    blockedGemm(simdLoops(be).gemm, heap32(be), a, b, c, M, K, N, lda, ldb, ldc, scratch ? at32(be, scratch) : 0, gemmBlockK, gemmBlockN);
  } finally {
    if (scratch) be.disposeData(scratch.dataId);
  }
}
