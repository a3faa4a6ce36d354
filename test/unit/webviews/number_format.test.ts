// The one number format of every view (src/protocol/number_format.ts); expected strings written out by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatCount, formatFixed, formatNumber, formatPercent } from '../../../src/protocol/number_format';

test('counts with separators, never in scientific notation', () => {
  assert.equal(formatNumber(330000), '330,000');
  assert.equal(formatNumber(15234.7), '15,235');
  assert.equal(formatCount(1234567), '1,234,567');
  assert.equal(formatCount(null), '—');
});

test('four significant digits in between; the very small in scientific notation; zero unsigned', () => {
  assert.equal(formatNumber(0.123456), '0.1235');
  assert.equal(formatNumber(-2.5), '-2.5');
  assert.equal(formatNumber(1234.5), '1,235');
  assert.equal(formatNumber(0.00012345), '1.23e-4');
  assert.equal(formatNumber(-0), '0');
  assert.equal(formatNumber(NaN), '—');
  assert.equal(formatNumber(Infinity), '—');
  assert.equal(formatNumber(0.123456, 3), '0.123');
});

test('fixed decimals never print -0.000; percentages use them', () => {
  assert.equal(formatFixed(-0.00004, 3), '0.000');
  assert.equal(formatFixed(-0, 2), '0.00');
  assert.equal(formatFixed(-0.4, 0), '0');
  assert.equal(formatFixed(-0.0006, 3), '-0.001');
  assert.equal(formatFixed(0.25, 3), '0.250');
  assert.equal(formatPercent(0.125), '12.5%');
  assert.equal(formatPercent(-0.0001), '0.0%');
  assert.equal(formatPercent(undefined), '—');
});
