// Frozen weights in 16 bits (model.torch_dtype): a weight that never trains (the base under LoRA, the KL reference) is
// stored as IEEE binary16 (float16) or bfloat16 and multiplied with float32 activations, accumulating in float32, as
// PyTorch's autocast does with a float16 model and PEFT's float32 adapters.
//
// Two values are packed per 32-bit word along the weight's last axis (columns 2c in the low half, 2c + 1 in the high),
// as WGSL's unpack2x16float reads them: a kernel unpacks with one instruction for float16 and a shift for bfloat16, on
// any adapter. The `shader-f16` feature is not needed for this: it gives f16 arithmetic, and the products accumulate
// in float32 anyway.
//
// The rounding is round-to-nearest-even, PyTorch's `.to(torch.float16)` and `.to(torch.bfloat16)`: a checkpoint shipped
// in bfloat16 (Qwen2.5's are) is stored without loss.
import * as tf from '@tensorflow/tfjs';

export type HalfFormat = 'float16' | 'bfloat16';
export const HALF_FORMATS: readonly HalfFormat[] = ['float16', 'bfloat16'];

/**
 * A frozen [rows, cols] weight in 16 bits: `packed` is [rows, stride / 2] int32, two values a word along the columns,
 * of which this weight is columns [from, from + cols) (the whole of it unless halfWindow made a window).
 */
export interface HalfWeight {
  packed: tf.Tensor2D;
  rows: number;
  cols: number;
  format: HalfFormat;
  /** the first column of the window (even); 0 by default */
  from?: number;
  /** the packed tensor's columns (its row length in values); `cols` by default */
  stride?: number;
}

/**
 * Columns [from, from + width) of a 16-bit weight, without a copy. A kernel reads the window where it lies: tfjs's own
 * ops on an int32 tensor pass its values through float32 on webgpu, which loses a word's low bits, so a packed tensor
 * is never sliced.
 */
export function halfWindow(w: HalfWeight, from: number, width: number): HalfWeight {
  const start = (w.from ?? 0) + from;
  if (start % 2 || width % 2) throw new Error(`halfWindow: columns [${from}, ${from + width}) must start and end on a word`);
  if (from < 0 || from + width > w.cols) throw new Error(`halfWindow: columns [${from}, ${from + width}) outside [0, ${w.cols})`);
  return { ...w, cols: width, from: start, stride: w.stride ?? w.cols };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The binary16 bits nearest to x (ties to even; beyond 65520 → ±inf; NaN stays NaN). */
export function toFloat16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e >= 1) {
    // a normal half: drop 13 bits, rounding to even; a carry runs into the exponent (and to inf past the largest)
    let h = sign | (e << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++;
    return h;
  }
  // a subnormal half, in units of 2⁻²⁴: the 24-bit significand shifted right by 126 − exp (≥ 14)
  const shift = 126 - exp;
  if (shift > 24) return sign;
  const m = mant | 0x800000;
  let q = m >>> shift;
  const rest = m & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (rest > halfway || (rest === halfway && q & 1)) q++;
  return sign | q;
}

/** The value of binary16 bits h. */
export function fromFloat16Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** The bfloat16 bits nearest to x: float32's top half, rounded to even (NaN stays a quiet NaN). */
export function toBfloat16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0];
  if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) return (b >>> 16) | 0x40;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The value of bfloat16 bits h. */
export function fromBfloat16Bits(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}

const TO: Record<HalfFormat, (x: number) => number> = { float16: toFloat16Bits, bfloat16: toBfloat16Bits };
const FROM: Record<HalfFormat, (h: number) => number> = { float16: fromFloat16Bits, bfloat16: fromBfloat16Bits };

/** x rounded to the format, as a float32 (what the packed weight holds). */
export function roundTo(format: HalfFormat, data: Float32Array): Float32Array {
  const to = TO[format],
    from = FROM[format];
  return data.map((x) => from(to(x)));
}

/** data [rows, cols] (cols even) as packed words [rows, cols / 2]: column 2c in the low 16 bits, 2c + 1 in the high. */
export function packHalf(format: HalfFormat, data: Float32Array, rows: number, cols: number): Int32Array {
  if (cols % 2 !== 0) throw new Error(`packHalf: ${cols} columns; two values are packed a word, so the columns must be even`);
  if (data.length !== rows * cols) throw new Error(`packHalf: ${data.length} values for [${rows}, ${cols}]`);
  const to = TO[format];
  const out = new Int32Array(data.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = to(data[2 * i]) | (to(data[2 * i + 1]) << 16);
  return out;
}

/** packHalf's inverse: the float32 values [rows, cols] of packed words. */
export function unpackHalf(format: HalfFormat, packed: Int32Array): Float32Array {
  const from = FROM[format];
  const out = new Float32Array(packed.length * 2);
  for (let i = 0; i < packed.length; i++) {
    out[2 * i] = from(packed[i] & 0xffff);
    out[2 * i + 1] = from((packed[i] >>> 16) & 0xffff);
  }
  return out;
}

/** A HalfWeight on the running backend from float32 values [rows, cols]. */
export function halfWeight(format: HalfFormat, data: Float32Array, rows: number, cols: number): HalfWeight {
  return { packed: tf.tensor2d(packHalf(format, data, rows, cols), [rows, cols / 2], 'int32'), rows, cols, format };
}

/** A HalfWeight's float32 values [rows, cols], read back (export, checkpoints). */
export async function readHalf(w: HalfWeight): Promise<Float32Array> {
  return windowed(w, unpackHalf(w.format, (await w.packed.data()) as Int32Array));
}

/** readHalf on a backend that reads synchronously. */
export function readHalfSync(w: HalfWeight): Float32Array {
  return windowed(w, unpackHalf(w.format, w.packed.dataSync() as Int32Array));
}

/** The window's columns of the packed tensor's values (all of them for a whole weight). */
function windowed(w: HalfWeight, all: Float32Array): Float32Array {
  const stride = w.stride ?? w.cols,
    from = w.from ?? 0;
  if (stride === w.cols) return all;
  const out = new Float32Array(w.rows * w.cols);
  for (let r = 0; r < w.rows; r++) out.set(all.subarray(r * stride + from, r * stride + from + w.cols), r * w.cols);
  return out;
}

/** What a kernel needs to read a HalfWeight's words: its format, shape and window (as tfjs kernel attributes). */
export function halfAttrs(w: HalfWeight): { format: HalfFormat; rows: number; cols: number; from: number; stride: number } {
  return { format: w.format, rows: w.rows, cols: w.cols, from: w.from ?? 0, stride: w.stride ?? w.cols };
}

/** WGSL `unpackW(word) -> vec2<f32>`: a packed word's two values (column 2c, then 2c + 1) in float32. */
export function unpackWgsl(format: HalfFormat): string {
  return format === 'float16'
    ? 'fn unpackW(p : i32) -> vec2<f32> { return unpack2x16float(bitcast<u32>(p)); }'
    : `fn unpackW(p : i32) -> vec2<f32> {
      let u = bitcast<u32>(p);
      return vec2<f32>(bitcast<f32>(u << 16u), bitcast<f32>(u & 0xffff0000u));
    }`;
}

export function isHalfWeight(w: unknown): w is HalfWeight {
  return typeof w === 'object' && w !== null && 'packed' in w && 'format' in w;
}
