import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bucketAlpha,
  bucketColors,
  bucketOf,
  formatScale,
  formatValue,
  isMetricId,
  metricDef,
  METRICS,
  nextMetric,
  quantise,
  quantileRange,
  scaleFor,
  scaleKey,
  unionRange,
} from '../../../../src/extension/heatmap/scales';

test('the range is the 2% and 98% quantiles by nearest rank, skipping NaN (null rows); null without a value', () => {
  const v = Float32Array.from([3, NaN, -2, 5]);
  // 3 finite values sorted [−2, 3, 5]: ranks round(0.02·2) = 0 and round(0.98·2) = 2, the min and the max.
  assert.deepEqual(quantileRange(v), { min: -2, max: 5 });
  assert.deepEqual(quantileRange(v, [1, 2]), { min: -2, max: -2 });
  assert.equal(quantileRange(Float32Array.from([NaN, NaN])), null);
  assert.equal(quantileRange(v, []), null);
  // 1…100: ranks round(0.02·99) = round(1.98) = 2 and round(0.98·99) = round(97.02) = 97, i.e. the values 3 and 98: two
  // outliers a side are clipped.
  const hundred = Float32Array.from({ length: 100 }, (_, i) => i + 1);
  assert.deepEqual(quantileRange(hundred), { min: 3, max: 98 });
  // 1…11 with q = 0.9: ranks round(1) = 1 and round(9) = 9 → 2 and 10.
  assert.deepEqual(quantileRange(hundred.subarray(0, 11), undefined, 0.9), { min: 2, max: 10 });
  // An outlier among 5,000 values does not set the range: 4,999 values in [0, 1) and one of 1000.
  const skewed = Float32Array.from({ length: 5000 }, (_, i) => (i === 17 ? 1000 : (i % 100) / 100));
  assert.ok(quantileRange(skewed)!.max < 1);
});

test('signed metrics get a diverging scale symmetric around 0, the others a sequential one over [min, max]', () => {
  // max(|−0.2|, |0.6|) = 0.6 → [−0.6, 0.6], 6 buckets a side.
  // The contribution c = Â·ℓ is negative where the update pushed a token up (ℓ < 0): its "up" side is the negative one.
  assert.deepEqual(scaleFor(metricDef('contribution'), { min: -0.2, max: 0.6 }), {
    kind: 'diverging',
    lo: -0.6,
    hi: 0.6,
    invert: false,
    buckets: 12,
    up: 'negative',
  });
  assert.deepEqual(scaleFor(metricDef('importance'), { min: -0.9, max: 0.3 }), {
    kind: 'diverging',
    lo: -0.9,
    hi: 0.9,
    invert: false,
    buckets: 12,
    up: 'positive',
  });
  assert.deepEqual(scaleFor(metricDef('entropy'), { min: 0.5, max: 2.5 }), {
    kind: 'sequential',
    lo: 0.5,
    hi: 2.5,
    invert: false,
    buckets: 10,
    up: 'positive',
  });
  assert.equal(scaleFor(metricDef('logprob'), { min: -4, max: 0 })!.invert, true);
  assert.equal(scaleFor(metricDef('weight'), null), null);
  const signed = METRICS.filter((m) => m.signed).map((m) => m.id);
  assert.deepEqual(signed, ['effective_advantage', 'contribution', 'importance', 'realized', 'ref_logratio']);
});

test('diverging buckets: |v|/hi in 6 equal steps a side, 0 and NaN uncoloured, values past the ends clamped', () => {
  const s = scaleFor(metricDef('effective_advantage'), { min: -0.6, max: 0.6 })!;
  // 0.6/0.6·6 = 6 → step min(5, 6) = 5 → bucket 6 + 5 = 11; −0.6 → step 5 on the negative side → bucket 5 − 5 = 0.
  assert.equal(bucketOf(s, 0.6), 11);
  assert.equal(bucketOf(s, -0.6), 0);
  // 0.05/0.6·6 = 0.5 → step 0: bucket 6 (faintest positive) and 5 (faintest negative).
  assert.equal(bucketOf(s, 0.05), 6);
  assert.equal(bucketOf(s, -0.05), 5);
  // 0.25/0.6·6 = 2.5 → step 2 → 8; −0.25 → 5 − 2 = 3.
  assert.equal(bucketOf(s, 0.25), 8);
  assert.equal(bucketOf(s, -0.25), 3);
  assert.equal(bucketOf(s, 1.2), 11);
  assert.equal(bucketOf(s, -7), 0);
  assert.equal(bucketOf(s, 0), -1);
  assert.equal(bucketOf(s, NaN), -1);
  // A scope whose values are all 0 (e.g. an episode with zero advantage) paints nothing.
  const zero = scaleFor(metricDef('contribution'), { min: 0, max: 0 })!;
  assert.equal(bucketOf(zero, 0), -1);
  // The contribution mirrored: c = −0.6 (Â > 0 on a token with ℓ < 0: pushed up) takes the strongest "up" (blue)
  // bucket, as Â = +0.6 does; c = +0.25 (pushed down) the same bucket as Â = −0.25.
  const c = scaleFor(metricDef('contribution'), { min: -0.6, max: 0.6 })!;
  assert.equal(bucketOf(c, -0.6), 11);
  assert.equal(bucketOf(c, 0.6), 0);
  assert.equal(bucketOf(c, 0.25), 3);
  // MC credit δ and the realized credit: up is their positive side
  assert.equal(scaleFor(metricDef('extra.mc_delta'), { min: -1, max: 1 })!.up, 'positive');
  assert.equal(scaleFor(metricDef('realized'), { min: -1, max: 1 })!.up, 'positive');
});

test('sequential buckets: (v − lo)/(hi − lo) in 10 equal steps, reversed for log-prob, the middle when all values are equal', () => {
  const s = scaleFor(metricDef('entropy'), { min: 0.5, max: 2.5 })!;
  assert.equal(bucketOf(s, 0.5), 0);
  // (0.8 − 0.5)/2 = 0.15 → 1.5 → 1; (2.0 − 0.5)/2 = 0.75 → 7.5 → 7; the top value 1.0 → 10 → clamped to 9.
  assert.equal(bucketOf(s, 0.8), 1);
  assert.equal(bucketOf(s, 2.0), 7);
  assert.equal(bucketOf(s, 2.5), 9);
  assert.equal(bucketOf(s, 99), 9);
  assert.equal(bucketOf(s, -1), 0);
  const lp = scaleFor(metricDef('logprob'), { min: -4, max: 0 })!;
  // Inverted: t = 1 − (v + 4)/4. ℓ = 0 → t = 0 → 0; ℓ = −4 → t = 1 → 9; ℓ = −1 → t = 0.25 → 2.5 → 2.
  assert.equal(bucketOf(lp, 0), 0);
  assert.equal(bucketOf(lp, -4), 9);
  assert.equal(bucketOf(lp, -1), 2);
  // strategy none: every weight is 1 → one colour, the middle bucket (10 >> 1 = 5).
  const w = scaleFor(metricDef('weight'), { min: 1, max: 1 })!;
  assert.equal(bucketOf(w, 1), 5);
});

test('quantise buckets the given rows in order', () => {
  const s = scaleFor(metricDef('effective_advantage'), { min: -0.6, max: 0.6 })!;
  const values = Float32Array.from([0.6, -0.25, 0, NaN, 0.25]);
  // rows 4, 1, 0, 3, 2 → 8, 3, 11, −1 (NaN), −1 (zero), per the bucket test above.
  assert.deepEqual(Array.from(quantise(s, values, [4, 1, 0, 3, 2])), [8, 3, 11, -1, -1]);
});

test('union of ranges: the shared scale of two compared episodes', () => {
  assert.deepEqual(unionRange([{ min: -1, max: 2 }, null, { min: -3, max: 1 }]), { min: -3, max: 2 });
  assert.equal(unionRange([null, null]), null);
  // Shared diverging scale: max(|−3|, |2|) = 3.
  assert.deepEqual(
    scaleFor(
      metricDef('contribution'),
      unionRange([
        { min: -1, max: 2 },
        { min: -3, max: 1 },
      ]),
    ),
    { kind: 'diverging', lo: -3, hi: 3, invert: false, buckets: 12, up: 'negative' },
  );
});

test('cycling metrics skips the ones the run does not log, and wraps around', () => {
  const noAttribution = ['contribution', 'effective_advantage', 'entropy', 'logprob', 'weight'] as const;
  assert.equal(nextMetric('entropy', noAttribution), 'logprob');
  assert.equal(nextMetric('weight', noAttribution), 'effective_advantage');
  assert.equal(nextMetric('effective_advantage', noAttribution, -1), 'weight');
  assert.equal(nextMetric('attribution', noAttribution), 'effective_advantage', 'an unavailable current metric goes to the first');
  assert.equal(nextMetric('entropy', [...noAttribution, 'attribution']), 'attribution');
});

test('bucket colours: one distinct colour per bucket, stronger away from the centre, other shades for light and dark', () => {
  const dark = bucketColors('diverging', 'dark');
  const light = bucketColors('diverging', 'light');
  assert.equal(dark.length, 12);
  assert.equal(new Set(dark).size, 12);
  assert.equal(new Set([...dark, ...light]).size, 24);
  // Dark themes: opacity steps of (0.72 − 0.2)/5 = 0.104 from the centre outwards: bucket 6 is 0.2, 7 0.304, 11 0.72.
  assert.equal(dark[6], 'rgba(110, 140, 255, 0.2)');
  assert.equal(dark[7], 'rgba(110, 140, 255, 0.304)');
  assert.equal(dark[11], 'rgba(110, 140, 255, 0.72)');
  assert.equal(dark[5], 'rgba(255, 92, 84, 0.2)');
  assert.equal(dark[0], 'rgba(255, 92, 84, 0.72)');
  // Light themes: (0.56 − 0.12)/5 = 0.088.
  assert.equal(light[7], 'rgba(29, 64, 200, 0.208)');
  const seq = bucketColors('sequential', 'light');
  assert.equal(new Set(seq).size, 10);
  assert.equal(seq[0], 'rgba(130, 80, 223, 0.12)');
  assert.equal(seq[9], 'rgba(130, 80, 223, 0.56)');
  // High contrast keeps a lower ceiling so white (or black) text stays readable over the tint.
  assert.equal(bucketAlpha(5, 6, 'highContrast'), 0.4);
  assert.equal(bucketAlpha(0, 6, 'highContrastLight'), 0.15);
  assert.equal(new Set(bucketColors('diverging', 'highContrast')).size, 12);
});

test('values and ranges are printed short', () => {
  assert.equal(formatValue(0.123456), '0.123');
  assert.equal(formatValue(-2.5), '-2.5');
  assert.equal(formatValue(-0.000012), '-1.2e-5');
  assert.equal(formatValue(1234.5), '1,235');
  assert.equal(formatValue(330000), '330,000');
  assert.equal(formatValue(0), '0');
  assert.equal(formatValue(NaN), '—');
  assert.equal(formatScale({ kind: 'diverging', lo: -0.6, hi: 0.6, invert: false, buckets: 12, up: 'positive' }), '[-0.6, 0.6]');
  assert.equal(formatScale(null), 'no values');
});

test("extra columns (an imported trainer's own values) are metrics: known ones keep their meaning, others their name", () => {
  assert.ok(isMetricId('extra.importance_ratio') && isMetricId('extra.my_metric'));
  assert.ok(!isMetricId('extra.') && !isMetricId('extra.Bad-Name') && !isMetricId('tokens'));
  assert.deepEqual([metricDef('extra.importance_ratio').label, metricDef('extra.importance_ratio').signed], ['importance ratio', false]);
  assert.equal(metricDef('extra.log_importance_ratio').signed, true, 'a log ratio is centred on 0');
  assert.equal(metricDef('extra.inference_logprob').invert, true, 'like ℓ, the least likely tokens are the notable ones');
  assert.deepEqual([metricDef('extra.my_metric').label, metricDef('extra.my_metric').signed], ['my metric', false]);
  // Cycling: the builtin metrics in their order, then the extras in the table's order.
  const avail = ['contribution', 'logprob', 'extra.importance_ratio', 'extra.mismatch_kl'] as const;
  assert.equal(nextMetric('logprob', avail), 'extra.importance_ratio');
  assert.equal(nextMetric('extra.mismatch_kl', avail), 'contribution');
});

test('the colour key says in words which colour is which, and where the range is clipped', () => {
  const key = (m: Parameters<typeof metricDef>[0], r: { min: number; max: number }) => scaleKey(metricDef(m), scaleFor(metricDef(m), r));
  assert.equal(
    key('effective_advantage', { min: -0.5, max: 0.25 }),
    'blue = pushed up · red = pushed down · effective advantage Â [-0.5, 0.5], clipped at p2–p98',
  );
  assert.equal(key('contribution', { min: -2, max: 1 }), 'blue = pushed up · red = pushed down · contribution c_Â [-2, 2], clipped at p2–p98');
  assert.equal(key('extra.mc_delta', { min: -1, max: 1 }), 'blue = raised the expected reward · red = lowered it · MC credit δ [-1, 1], clipped at p2–p98');
  assert.equal(key('importance', { min: -1, max: 1 }), 'blue = positive · red = negative · importance [-1, 1], clipped at p2–p98');
  assert.equal(key('entropy', { min: 0.5, max: 2 }), 'darker = higher · entropy [0.5, 2], clipped at p2–p98');
  assert.equal(key('logprob', { min: -4, max: 0 }), 'darker = lower · log-prob [-4, 0], clipped at p2–p98');
  assert.equal(scaleKey(metricDef('weight'), null), 'weight: no values');
});
