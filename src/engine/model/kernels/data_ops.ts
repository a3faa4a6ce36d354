// Faster data movement kernels (UnsortedSegmentSum, Transpose, Slice, SplitV, Concat, GatherV2, Sum, Identity, Cast),
// each equal to the stock kernel's result.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import { Info, KernelArgs, WasmBackend, at32, heap32, is4Bytes, sizeOf } from './heap';
import { hasSimd, simdLoops } from './simd';

export function unsortedSegmentSum(args: KernelArgs): Info {
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
  const xs = be.typedArrayFromHeap(x),
    ids = be.typedArrayFromHeap(segmentIds),
    o = be.typedArrayFromHeap(out);
  o.fill(0);
  for (let i = 0; i < n; i++) {
    const s = ids[i];
    if (s < 0 || s >= numSegments) continue;
    const ob = s * inner,
      xb = i * inner;
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
  shape.forEach((d, ax) => {
    if (d !== 1) {
      renum[ax] = kept.length;
      kept.push(d);
    }
  });
  const p = perm.filter((ax) => shape[ax] !== 1).map((ax) => renum[ax]);
  // Runs of consecutive axes in output order become one axis.
  const groups: number[][] = [];
  for (const ax of p) {
    const last = groups[groups.length - 1];
    if (last && last[last.length - 1] + 1 === ax) last.push(ax);
    else groups.push([ax]);
  }
  const byFirst = [...groups].sort((g, h) => g[0] - h[0]);
  const newShape = byFirst.map((g) => g.reduce((s, ax) => s * kept[ax], 1));
  const newPerm = groups.map((g) => byFirst.indexOf(g));
  return { shape: newShape, perm: newPerm };
}

export function jsTransposeNd(h: Int32Array, src: number, dst: number, shape: number[], perm: number[]): void {
  const rank = shape.length;
  const inStrides = new Array<number>(rank);
  for (let s = 1, d = rank - 1; d >= 0; d--) {
    inStrides[d] = s;
    s *= shape[d];
  }
  const outShape = perm.map((ax) => shape[ax]);
  const step = perm.map((ax) => inStrides[ax]);
  const inner = outShape[rank - 1],
    innerStep = step[rank - 1];
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
// the stock loop wins over the JS tiles (src/engine/bench/kernels.ts, thresholds).
export const TILE = 8;
export function jsTransposeLast2(h: Int32Array, src: number, dst: number, batch: number, R: number, C: number): void {
  for (let b = 0; b < batch; b++, src += R * C, dst += R * C) {
    for (let r0 = 0; r0 < R; r0 += TILE) {
      const r1 = Math.min(r0 + TILE, R);
      for (let c0 = 0; c0 < C; c0 += TILE) {
        const c1 = Math.min(c0 + TILE, C);
        for (let r = r0; r < r1; r++) {
          let i = src + r * C + c0,
            o = dst + c0 * R + r;
          for (let c = c0; c < c1; c++, i++, o += R) h[o] = h[i];
        }
      }
    }
  }
}
export function simdTransposeLast2(be: WasmBackend, src: number, dst: number, batch: number, R: number, C: number): void {
  const loops = simdLoops(be);
  const h = heap32(be);
  const R4 = R & ~3,
    C4 = C & ~3;
  for (let b = 0; b < batch; b++, src += R * C, dst += R * C) {
    loops.transpose(4 * src, 4 * dst, R, C);
    // the ragged edges the 4×4 blocks leave: last R % 4 rows (all columns), last C % 4 columns (other rows)
    for (let r = R4; r < R; r++) for (let c = 0, i = src + r * C, o = dst + r; c < C; c++, i++, o += R) h[o] = h[i];
    for (let r = 0; r < R4; r++) for (let c = C4, i = src + r * C + C4, o = dst + C4 * R + r; c < C; c++, i++, o += R) h[o] = h[i];
  }
}
let tiledTransposeMin = 16384;
/** Bench hook: matrices of at least this many elements are transposed by the tiled JS loop (without SIMD). */
export function setTiledTransposeMin(n: number): void {
  tiledTransposeMin = n;
}
let simdTransposeMin = 256;
/** Bench hook: matrices of at least this many elements are transposed by the SIMD loop. */
export function setSimdTransposeMin(n: number): void {
  simdTransposeMin = n;
}

export function transpose(original: tf.KernelFunc) {
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
      const out = original({
        inputs: { x: { dataId: x.dataId, shape: c.shape, dtype: x.dtype } },
        backend: be,
        attrs: { perm: c.perm },
      } as Parameters<tf.KernelFunc>[0]) as Info;
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
export const SHORT_RUN = 64;
export function copyRun(h: Int32Array, from: number, to: number, len: number): void {
  if (len >= SHORT_RUN) h.copyWithin(to, from, from + len);
  else for (let j = 0; j < len; j++) h[to + j] = h[from + j];
}

/** x[begin : begin + size] into a new tensor, straight from the heap. */
export function sliceInfo(be: WasmBackend, x: Info, begin: number[], size: number[]): Info {
  const out = be.makeOutput(size, x.dtype);
  const n = sizeOf(size);
  if (n === 0) return out;
  const h = heap32(be),
    src = at32(be, x),
    dst = at32(be, out);
  const rank = x.shape.length;
  const strides = new Array<number>(rank);
  for (let s = 1, d = rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= x.shape[d];
  }
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
export function slice(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const { x } = args.inputs as { x: Info };
    if (!is4Bytes(x)) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    const [begin, size] = tf.slice_util.parseSliceParams(x as tf.Tensor, args.attrs?.begin as number[], args.attrs?.size as number[]);
    return sliceInfo(args.backend as WasmBackend, x, begin, size);
  };
}

// The stock SplitV calls the stock slice (one full readSync per piece), not the registered kernel.
export function splitV(original: tf.KernelFunc) {
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
export function concat(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const inputs = args.inputs as unknown as Info[];
    if (!is4Bytes(inputs[0])) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    const axis = tf.util.parseAxisParam(args.attrs?.axis as number, inputs[0].shape)[0];
    tf.backend_util.assertParamsConsistent(
      inputs.map((t) => t.shape),
      axis,
    );
    const outShape = tf.backend_util.computeOutShape(
      inputs.map((t) => t.shape),
      axis,
    );
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
export function gatherV2(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const be = args.backend as WasmBackend;
    const { x, indices } = args.inputs as { x: Info; indices: Info };
    const batchDims = Number(args.attrs?.batchDims ?? 0);
    if (!is4Bytes(x) || batchDims !== 0 || indices.dtype !== 'int32') {
      return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    }
    const axis = tf.util.parseAxisParam(args.attrs?.axis as number, x.shape)[0];
    const dim = x.shape[axis];
    const outer = sizeOf(x.shape.slice(0, axis)),
      inner = sizeOf(x.shape.slice(axis + 1));
    const outShape = [...x.shape.slice(0, axis), ...indices.shape, ...x.shape.slice(axis + 1)];
    const n = sizeOf(indices.shape);
    const ids = heap32(be),
      i0 = at32(be, indices);
    for (let i = i0; i < i0 + n; i++) {
      if (!(ids[i] >= 0 && ids[i] <= dim - 1)) throw new Error(`GatherV2: the index value ${ids[i]} is not in [0, ${dim - 1}]`);
    }
    const out = be.makeOutput(outShape, x.dtype);
    if (sizeOf(outShape) === 0) return out;
    const h = heap32(be),
      src = at32(be, x),
      k0 = at32(be, indices);
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
export function sum(original: tf.KernelFunc) {
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
    if (sizeOf(x.shape) === 0) {
      dst.fill(0);
      return out;
    }
    // Merge neighbouring dims of the same kind (reduced / kept), dropping size-1 dims.
    const dims: number[] = [],
      reduced: boolean[] = [];
    x.shape.forEach((d, ax) => {
      if (d === 1) return;
      const r = axes.includes(ax);
      if (dims.length && reduced[reduced.length - 1] === r) dims[dims.length - 1] *= d;
      else {
        dims.push(d);
        reduced.push(r);
      }
    });
    const rank = dims.length;
    if (rank === 0) {
      dst.set(be.typedArrayFromHeap(x));
      return out;
    } // every dim was 1
    // [(kept,) reduced, kept]: the bias and norm-weight gradients. Column sums on the SIMD loop.
    const colsumShape = rank >= 2 && rank <= 3 && !reduced[rank - 1] && reduced[rank - 2] && dims[rank - 1] >= 8;
    if (colsumShape && hasSimd()) {
      const [K, R, C] = rank === 3 ? dims : [1, ...dims];
      const C8 = C & ~7;
      const scratch = be.makeOutput([2 * C8], 'float32');
      const loops = simdLoops(be);
      for (let k = 0; k < K; k++) {
        loops.colsum(4 * (at32(be, x) + k * R * C), 4 * at32(be, scratch), R, C, C8);
        const heap = be.typedArrayFromHeap(x),
          o = be.typedArrayFromHeap(out);
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
    for (let s = 1, d = rank - 1; d >= 0; d--) {
      outStep[d] = reduced[d] ? 0 : s;
      if (!reduced[d]) s *= dims[d];
    }
    const acc = new Float64Array(dst.length);
    const src = be.typedArrayFromHeap(x);
    const inner = dims[rank - 1],
      innerReduced = reduced[rank - 1];
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
export function identity(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const { x } = args.inputs as { x: Info };
    if (x.dtype === 'string') return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    (args.backend as WasmBackend).incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  };
}

export function cast(original: tf.KernelFunc) {
  return (args: KernelArgs): Info => {
    const { x } = args.inputs as { x: Info };
    if (x.dtype === 'string' || args.attrs?.dtype !== x.dtype) return original(args as Parameters<tf.KernelFunc>[0]) as Info;
    (args.backend as WasmBackend).incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  };
}
