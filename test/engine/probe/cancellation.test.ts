// The cancellation test's 1 − π controls. Expected numbers come from cancellation_reference.py, an independent numpy
// implementation (a dummy column per episode, lstsq, its own sandwich) run on the committed fixture it wrote, and from
// hand arithmetic beside the asserts. The simulations show what the controls are for: under a purely mechanical link
// (δ and the update both follow 1 − π, and the update adds nothing) the raw split is far from 0 while the controlled
// test holds its size; with a true effect the controlled test finds it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { clusteredOls, demeanWithin, invert } from '../../../src/engine/core/clustered_ols';
import { makeRng } from '../../../src/engine/core/rng';
import type { ProbedEpisode } from '../../../src/engine/probe/accuracy';
import { cancellation } from '../../../src/engine/probe/cancellation';

const close = (a: number | null | undefined, b: number, tol = 1e-9) => assert.ok(a != null && Math.abs(a - b) <= tol, `${a} != ${b}`);

test('clustered OLS by hand: the mean of y with its cluster-robust standard error', () => {
  // y = 1, 3 (cluster 1) and 2, 6 (cluster 2) on a column of ones: β = 3, residuals −2, 0, −1, 3; the clusters' scores
  // −2 and 2, meat 8, bread 1/4: V = 8/16 · G/(G − 1) = 0.5 · 2 = 1, se 1, t 3 on 1 df: p = 1 − 2·atan(3)/π = 0.204833
  const fit = clusteredOls([1, 3, 2, 6], [[1], [1], [1], [1]], [1, 1, 2, 2])!;
  close(fit.coefficients[0].estimate, 3);
  close(fit.coefficients[0].se, 1);
  close(fit.coefficients[0].p, 1 - (2 * Math.atan(3)) / Math.PI, 1e-9);
  assert.equal(fit.clusters, 2);
  // one cluster, or a column that is another's multiple: nothing to estimate
  assert.equal(clusteredOls([1, 2], [[1], [1]], [1, 1]), null);
  assert.equal(
    clusteredOls(
      [1, 2, 3],
      [
        [1, 2],
        [2, 4],
        [3, 6],
      ],
      [1, 2, 3],
    ),
    null,
  );
  assert.deepEqual(
    invert([
      [2, 0],
      [0, 4],
    ]),
    [
      [0.5, 0],
      [0, 0.25],
    ],
  );
  // demeaning within groups: y 1, 3 | 5 → −1, 1 | 0
  assert.deepEqual(demeanWithin([1, 3, 5], [[1], [3], [5]], [7, 7, 8]).y, [-1, 1, 0]);
});

test('the cancellation controls equal the independent numpy reference on its fixture', () => {
  const eps = JSON.parse(readFileSync(join(__dirname, 'cancellation_fixture.json'), 'utf8')) as ProbedEpisode[];
  const c = cancellation(eps)!;
  // python3 cancellation_reference.py (numpy 2.4.6, scipy 1.17.1)
  close(c.within_positive.mean, 0.17323582351190475);
  close(c.within_negative.mean, 0.17927439583333332);
  close(c.control_positive!.mean, 0.17286912083333333);
  close(c.control_negative!.mean, 0.16007465416666666);
  const sp = c.stratified_positive!;
  close(sp.mean, 0.052425459134618387);
  close(sp.lo, -0.0124175048630926);
  close(sp.p, 0.10276749381851666, 1e-7);
  assert.deepEqual([sp.n, sp.prompts], [128, 12]);
  const sn = c.stratified_negative!;
  close(sn.mean, 0.08294572240545671);
  close(sn.lo, -0.023427119265299945);
  close(sn.p, 0.10773497657395571, 1e-7);
  assert.deepEqual([sn.n, sn.prompts], [64, 8]);
});

/** Episodes where δ and the update both follow 1 − π; `effect` is what being boosted adds to δ beyond that. */
function simulate(seed: number, effect: number, prompts = 40): ProbedEpisode[] {
  const rng = makeRng(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
  const out: ProbedEpisode[] = [];
  for (let p = 0; p < prompts; p++) {
    const shift = 0.05 * normal(); // a prompt's own level: tokens of one prompt are not independent
    for (const adv of [1, -1]) {
      const n = 12;
      const u = Array.from({ length: n }, () => 0.02 + 0.88 * rng());
      const realized = u.map((x) => adv * (x - 0.45) + 0.15 * normal());
      const delta = u.map((x, t) => adv * 0.3 * x + shift + 0.1 * normal() + (realized[t] > 0 ? effect : 0));
      const values = [0.5];
      for (const d of delta) values.push(values.at(-1)! + d);
      out.push({
        prompt: p,
        n,
        positions: Array.from({ length: n + 1 }, (_, t) => t),
        values,
        advantage: adv,
        logprobs: u.map((x) => Math.log(1 - x)),
        realized,
        ownAdv: new Array<number>(n).fill(adv),
      });
    }
  }
  return out;
}

test('under a mechanical link alone the raw split is large and the controlled test holds its size; a true effect is found', () => {
  const sims = 300;
  let rawPositive = 0;
  let rejected = 0;
  let found = 0;
  let controlAbove = 0;
  for (let s = 0; s < sims; s++) {
    const c = cancellation(simulate(1000 + s, 0))!;
    if (c.within_positive.lo! > 0) rawPositive++;
    if (c.control_positive!.lo! > 0) controlAbove++;
    if (c.stratified_positive!.p! < 0.05) rejected++;
    if (cancellation(simulate(5000 + s, 0.06))!.stratified_positive!.p! < 0.05) found++;
  }
  // the raw split and the 1 − π control "find" an effect nearly every time, though the update adds nothing
  assert.ok(rawPositive / sims > 0.95, `raw ${rawPositive}`);
  assert.ok(controlAbove / sims > 0.95, `control ${controlAbove}`);
  // the controlled test's size: within α + 3 MC standard errors, 0.05 + 3·√(0.05·0.95/300) = 0.0877
  assert.ok(rejected / sims <= 0.0877, `size ${rejected / sims}`);
  // and its power against +0.06 in δ̂ (a third of the noise's SD per token) at 40 prompts
  assert.ok(found / sims > 0.5, `power ${found / sims}`);
});

test('without log-probs the controls are left out, the raw test stays', () => {
  const eps = simulate(3, 0, 4).map(({ logprobs: _, ...e }) => e);
  const c = cancellation(eps)!;
  assert.ok(c.within_positive.mean !== null);
  assert.equal(c.stratified_positive, undefined);
  assert.equal(c.control_positive, undefined);
});
