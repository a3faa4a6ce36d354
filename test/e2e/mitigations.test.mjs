// A real comparison in Compare Runs (issue 25): the README's mitigation sweep — seed doc 001's five mitigations and plain
// GRPO, 3 seeds each, 100 GRPO steps from one shared warm start — whose rows all differ. The e2e suite cannot train 18
// runs in its time, so it opens the run directories the README's commands made (stop 32), kept as a fixture in
// test/e2e/fixtures/mitigations-runs: run.json, config.yaml, metrics.jsonl and the eval tables of steps 0 and 100
// (2.2 MB; no checkpoints and no token tables, so the |c| columns are empty). Every figure shown is checked against
// `credit-lens compare --json` run here on the same folders, and the screenshot is the README's.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, WS, finishSuite, log, palette, prepareSuite, runDirs, scenario, shot, sleep, startVsCode } from './harness.mjs';

let vs;

before(async () => {
  prepareSuite();
  cpSync(join(ROOT, 'test/e2e/fixtures/mitigations-runs'), join(WS, 'runs'), { recursive: true });
  copyFileSync(join(ROOT, 'examples/mitigations.credit.yaml'), join(WS, 'mitigations.credit.yaml'));
  vs = await startVsCode('mitigations', { trusted: true });
});

after(finishSuite);

const webview = (page) => page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
const pText = (p) => (p < 1e-4 ? p.toExponential(1) : p.toPrecision(2));

scenario('Compare Runs over the mitigation sweep: six groups, Holm-adjusted p, MDE, nothing ranked', async () => {
  const { page } = vs;
  const runs = runDirs('mitigations');
  assert.equal(runs.length, 18);
  const base = runs.filter((d) => /mitigations-none-seed/.test(d));
  const r = spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), 'compare', ...runs, ...base.flatMap((d) => ['--baseline', d]), '--json'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const expected = JSON.parse(r.stdout);
  assert.equal(expected.rows.length, 6);
  assert.deepEqual(expected.adjustment, { method: 'holm', family: 5 });

  await palette(page, 'Credit Lens: Compare Runs', { pick: 'Credit Lens: Compare Runs' });
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ timeout: 15_000 });
  await input.fill('mitigations-');
  await sleep(300);
  // the multi-select QuickPick's check-all box ticks every run the filter shows (a virtual list shows only some rows)
  await page.locator('.quick-input-widget [aria-label="Toggle all checkboxes"]').first().click();
  await page.locator('.quick-input-widget .quick-input-count', { hasText: '18 Selected' }).waitFor({ timeout: 10_000 });
  await page.locator('.quick-input-widget .monaco-button', { hasText: 'OK' }).click();

  const frame = webview(page);
  const groups = frame.locator('section.significance table.comparison tbody tr');
  await groups.nth(5).waitFor({ timeout: 120_000 });
  const shown = await groups.evaluateAll((trs) =>
    trs.map((tr) => ({ group: tr.dataset.group, cls: tr.className, cells: [...tr.querySelectorAll('td')].map((td) => td.textContent.replace(/\s+/g, ' ').trim()) })),
  );
  log(`mitigations: ${JSON.stringify(shown.map((s) => [s.group, s.cells.slice(2, 6)]))}`);
  const byGroup = new Map(expected.rows.map((row) => [row.group, row]));
  assert.equal(shown[0].group, 'mitigations-none');
  assert.equal(shown[0].cells[3], 'baseline');
  for (const s of shown.slice(1)) {
    const row = byGroup.get(s.group);
    assert.ok(row, s.group);
    // the one rule: the Holm-adjusted p, n.s. when not significant, greyed
    assert.equal(s.cells[4], row.significant ? pText(row.p_adjusted) : `${pText(row.p_adjusted)} n.s.`);
    assert.equal(s.cls, row.significant ? 'significant' : 'ns');
    assert.ok(row.mde !== null, 'these runs disagree on many instances: the MDE is estimable');
    assert.equal(s.cells[5], `± ${(100 * row.mde).toFixed(1)} pp`);
  }
  // the rows differ: not six runs at the same success
  assert.ok(new Set(shown.map((s) => s.cells[2])).size >= 4, JSON.stringify(shown.map((s) => s.cells[2])));
  // the table, not the run list above it, in the picture: the side bar closed for width, the section scrolled to
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await sleep(500);
  await frame.locator('section.significance').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await sleep(500);
  await shot(page, 'mitigations-compare-runs', { readme: 'mitigations-compare' });
});
