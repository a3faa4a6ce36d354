// Frozen weights in 16 bits (model/half.ts): the rounding against NumPy's and PyTorch's, the packing's layout, and
// the round trip. The expected bits were printed by numpy 2.4.6 (`np.float32(x).astype(np.float16).view(np.uint16)`)
// and torch 2.11 (`torch.tensor([x]).to(torch.bfloat16).view(torch.int16)`), and agree with IEEE 754's definitions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeRng, randNormal } from '../../../src/engine/core/rng';
import { fromBfloat16Bits, fromFloat16Bits, packHalf, roundTo, toBfloat16Bits, toFloat16Bits, unpackHalf } from '../../../src/engine/model/half';

test('float16: round to nearest even, as NumPy rounds, through normals, subnormals, overflow and ties', () => {
  const cases: [number, number][] = [
    [1, 0x3c00],
    [-2, 0xc000],
    [65504, 0x7bff], // the largest half
    [65519, 0x7bff], // below the midpoint to 65536
    [65520, 0x7c00], // the midpoint rounds to even, which is inf
    [1 / 3, 0x3555],
    [2 ** -24, 0x0001], // the smallest subnormal
    [2 ** -25, 0x0000], // half of it: a tie, to even (0)
    [3 * 2 ** -26, 0x0001], // three quarters of it
    [1 + 2 ** -11, 0x3c00], // a tie between 1 and 1 + 2⁻¹⁰: to even
    [1 + 3 * 2 ** -11, 0x3c02], // a tie between 1 + 2⁻¹⁰ and 1 + 2⁻⁹: to even
    [2 ** -14, 0x0400], // the smallest normal
    [1023.5 * 2 ** -24, 0x0400], // a subnormal tie whose carry makes it the smallest normal
    [Infinity, 0x7c00],
    [-0, 0x8000],
  ];
  for (const [x, bits] of cases) assert.equal(toFloat16Bits(x), bits, `${x}`);
  assert.equal(toFloat16Bits(NaN) & 0x7e00, 0x7e00);
  assert.ok(Number.isNaN(fromFloat16Bits(toFloat16Bits(NaN))));
  assert.equal(fromFloat16Bits(0x3555), 0.333251953125);
  assert.equal(fromFloat16Bits(0x0001), 2 ** -24);
  assert.equal(fromFloat16Bits(0xfc00), -Infinity);
});

test('bfloat16: float32 rounded to its top 16 bits, ties to even, as PyTorch rounds', () => {
  const cases: [number, number][] = [
    [1, 0x3f80],
    [1 / 3, 0x3eab],
    [1 + 2 ** -8, 0x3f80], // a tie: to even
    [1 + 3 * 2 ** -8, 0x3f82], // a tie: to even
    [3.4028234663852886e38, 0x7f80], // float32's largest rounds past bfloat16's: inf
    [-0, 0x8000],
  ];
  for (const [x, bits] of cases) assert.equal(toBfloat16Bits(x), bits, `${x}`);
  assert.equal(fromBfloat16Bits(0x3eab), 0.333984375);
  assert.ok(Number.isNaN(fromBfloat16Bits(toBfloat16Bits(NaN))));
});

test('packing: two values a word along the columns (2c low, 2c + 1 high), and back; the rounding error within half an ulp', () => {
  // the layout WGSL's unpack2x16float reads: component 0 from bits 0–15
  const p = packHalf('float16', Float32Array.from([1, -2, 0.5, 65504]), 2, 2);
  assert.deepEqual(
    Array.from(p, (w) => w >>> 0),
    [(0xc000 << 16) | 0x3c00, (0x7bff << 16) | 0x3800].map((w) => w >>> 0),
  );
  assert.throws(() => packHalf('float16', new Float32Array(3), 1, 3), /columns must be even/);
  const rng = makeRng(5);
  const x = Float32Array.from({ length: 4096 }, () => randNormal(rng) * 0.05);
  for (const [format, mantissa] of [
    ['float16', 10],
    ['bfloat16', 7],
  ] as const) {
    const back = unpackHalf(format, packHalf(format, x, 64, 64));
    assert.deepEqual(back, roundTo(format, x), format);
    // a rounded value is its own rounding, and within half a unit in the last place of the original
    assert.deepEqual(roundTo(format, back), back, format);
    for (let i = 0; i < x.length; i++) {
      const ulp = 2 ** (Math.floor(Math.log2(Math.abs(x[i]))) - mantissa);
      // below float16's normal range its unit is 2⁻²⁴
      const unit = format === 'float16' ? Math.max(ulp, 2 ** -24) : ulp;
      assert.ok(Math.abs(back[i] - x[i]) <= unit / 2, `${format} ${x[i]} → ${back[i]}`);
    }
  }
});
