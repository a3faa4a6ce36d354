// A real comparison in Compare Runs, the sweep summary and the credit-analysis view: the README's mitigation
// sweep — seed doc 001's five mitigations and plain GRPO, 3 seeds each, 100 GRPO steps from one shared warm start —
// whose rows all differ. The e2e suite cannot train 18 runs in its time, so it opens the run directories and the
// sweep record that the README's command made from a terminal, kept as a fixture in test/e2e/fixtures/mitigations-runs
// (made by test/e2e/fixtures/prune.mjs): the sweep's sweep.json, and of each run run.json, config.yaml, metrics.jsonl,
// the eval tables of steps 0 and 100, and the token and episode tables of step 100 only (no checkpoints; see the
// fixture's size in the README). Every figure shown is checked against `credit-lens compare --json` or
// `credit-lens analyze --json` run here on the same folders, and the screenshots are the README's.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, WS, finishSuite, log, palette, paletteAndPick, prepareSuite, runDirs, scenario, shot, sleep, startVsCode } from './harness.mjs';

let vs;

before(async () => {
  prepareSuite();
  cpSync(join(ROOT, 'test/e2e/fixtures/mitigations-runs'), join(WS, 'runs'), { recursive: true });
  copyFileSync(join(ROOT, 'examples/mitigations.credit.yaml'), join(WS, 'mitigations.credit.yaml'));
  vs = await startVsCode('mitigations', { trusted: true });
});

after(finishSuite);

const cli = (...args) => {
  const r = spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
};
const pct = (x) => (100 * x).toFixed(1);

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
  assert.deepEqual(expected.adjustment, { method: 'holm', family: 5, looks: 1 });

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
    trs.map((tr) => ({
      group: tr.dataset.group,
      cls: tr.className,
      cells: [...tr.querySelectorAll('td')].map((td) => td.textContent.replace(/\s+/g, ' ').trim()),
    })),
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
  // one shared warm start: every verdict is about it, and the view says so once, naming it
  assert.ok(expected.rows[1].warm_start, 'the fixture runs share one warm start');
  assert.equal(
    await frame.locator('section.significance .from-start').innerText(),
    `Every verdict here is from warm start ${expected.rows[1].warm_start}: about that SFT start, not the method in general (sweep.warm_starts trains several).`,
  );
  // said once: the note under it does not repeat it
  assert.doesNotMatch(await frame.locator('section.significance .compare-note').innerText(), /every run starts GRPO from one warm start/);
  // the table, not the run list above it, in the picture: the side bar closed for width, the section scrolled to
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await sleep(500);
  await frame.locator('section.significance').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await sleep(500);
  await shot(page, 'mitigations-compare-runs', { readme: 'mitigations-compare' });
});

scenario('the sweep summary of the terminal sweep: Open Sweep Summary finds its record; 18 runs, six groups against plain GRPO', async () => {
  const { page } = vs;
  const runs = runDirs('mitigations');
  const base = runs.filter((d) => /mitigations-none-seed/.test(d));
  const expected = cli('compare', ...runs, ...base.flatMap((d) => ['--baseline', d]), '--json');
  const sweepFolder = readdirSync(join(WS, 'runs')).find((d) => d.startsWith('sweep-'));
  assert.ok(sweepFolder, 'the fixture holds the sweep folder');

  // Never opened in this workspace: it is offered from its folder, as a sweep run from a terminal. The picker opens
  // over the Compare Runs page of the scenario before, which can take the focus back while it settles and so close
  // the picker: open it again then.
  const item = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'from a terminal' }).first();
  for (let attempt = 1; ; attempt++) {
    await palette(page, 'Credit Lens: Open Sweep Summary', { pick: 'Credit Lens: Open Sweep Summary' });
    const shown = await item.waitFor({ timeout: 10_000 }).then(
      () => true,
      () => false,
    );
    if (shown) break;
    assert.ok(attempt < 3, 'the sweep picker shows the terminal sweep');
    log(`the sweep picker closed before its row showed (attempt ${attempt}); again`);
  }
  assert.match(await item.innerText(), /mitigations[\s\S]*18 runs/);
  await item.click();

  const frame = webview(page);
  const rows = frame.locator('vscode-table-row.run-row');
  await rows.nth(17).waitFor({ timeout: 60_000 });
  assert.equal(await rows.count(), 18);
  assert.equal(await frame.locator('vscode-table-row.run-row[data-status="completed"]').count(), 18, 'every run completed');
  const groups = frame.locator('table.comparison tbody tr');
  await groups.nth(5).waitFor({ timeout: 180_000 });
  const shown = await groups.evaluateAll((trs) =>
    trs.map((tr) => ({
      group: tr.dataset.group,
      cls: tr.className,
      cells: [...tr.querySelectorAll('td')].map((td) => td.textContent.replace(/\s+/g, ' ').trim()),
    })),
  );
  log(`sweep summary: ${JSON.stringify(shown.map((s) => [s.group, s.cells.slice(2, 6)]))}`);
  // plain GRPO is the baseline (the sweep has strategy none), and the groups keep the sweep's own order (its record's),
  // never ranked
  const record = JSON.parse(readFileSync(join(WS, 'runs', sweepFolder, 'sweep.json'), 'utf8'));
  assert.deepEqual(
    shown.map((s) => s.group),
    [...new Set(record.tasks.map((t) => t.name.replace(/-seed\d+$/, '')))],
  );
  const byGroup = new Map(expected.rows.map((row) => [row.group, row]));
  for (const [i, s] of shown.entries()) {
    const row = byGroup.get(s.group);
    assert.equal(s.cells[2], `${pct(row.eval_success.mean)} ± ${pct(row.eval_success.half)}`, `${s.group}: eval success`);
    if (i === 0) continue;
    assert.equal(s.cells[4], row.significant ? pText(row.p_adjusted) : `${pText(row.p_adjusted)} n.s.`, `${s.group}: adjusted p`);
    assert.equal(s.cells[5], `± ${(100 * row.mde).toFixed(1)} pp`, `${s.group}: MDE`);
  }
  // the |c| ratio of each run, from `credit-lens analyze` over the step the fixture keeps (100)
  await frame.locator('vscode-table-row.run-row vscode-table-cell:nth-child(9)', { hasText: /^\d/ }).nth(17).waitFor({ timeout: 180_000 });
  const one = runs.find((d) => /mitigations-entropy_mask-mp80-seed1-/.test(d));
  const analyzed = cli('analyze', one, '--json');
  const cell = await frame.locator(`vscode-table-row.run-row[data-run="mitigations-entropy_mask-mp80-seed1"] vscode-table-cell`).nth(8).innerText();
  const ratio = analyzed.meta.filler_reasoning_ratio;
  assert.equal(cell.trim(), ratio.toFixed(2), 'the ratio analyze computes');
  await frame.locator('section.by-config').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await sleep(500);
  await shot(page, 'mitigations-sweep-summary', { readme: 'sweep-summary' });
});

scenario('the credit analysis of an entropy_mask run at step 100 against plain GRPO of the same seed', async () => {
  const { page } = vs;
  const runs = runDirs('mitigations');
  // seed 2: its entropy_mask run and its plain-GRPO run differ at step 100 (16.0 % against 11.3 %)
  const run = runs.find((d) => /mitigations-entropy_mask-mp80-seed2-/.test(d));
  const base = runs.find((d) => /mitigations-none-seed2-/.test(d));
  await paletteAndPick(page, 'Credit Lens: Open Credit Analysis', /mitigations-entropy_mask-mp80-seed2-/, { filter: 'entropy_mask-mp80-seed2' });
  const frame = webview(page);
  const bins = frame.locator('table.position_bins tbody tr');
  await bins.first().waitFor({ timeout: 120_000 });
  const expected = cli('analyze', run, '--baseline', base, '--json');
  assert.equal(Number(await bins.first().locator('td').nth(2).innerText()), expected.relative_position[0].count);

  await frame.locator('vscode-button.baseline').click();
  // the button's own picker, by its title: the input alone would also match a palette left open
  const quick = page.locator('.quick-input-widget');
  await quick.locator('.quick-input-title', { hasText: /baseline for mitigations-entropy_mask-mp80-seed2-/ }).waitFor({ timeout: 60_000 });
  const input = quick.locator('.quick-input-box input');
  await input.fill('mitigations-none-seed2');
  await page
    .locator('.quick-input-widget .monaco-list-row', { hasText: /mitigations-none-seed2-/ })
    .first()
    .click();
  const appendix = frame.locator('section[data-table="appendix_b"] tbody tr');
  await appendix.nth(3).waitFor({ timeout: 120_000 });
  const paired = (await appendix.nth(3).innerText()).replace(/\s+/g, ' ');
  log(`appendix B paired test: ${paired}`);
  const t = expected.appendix_b?.eval_test;
  assert.ok(t, 'analyze tests the eval difference');
  assert.equal(t.step, 100);
  assert.match(paired, new RegExp(`paired test step 100, ${t.instances} test instances: Δ [+-]${Math.abs(100 * t.diff).toFixed(1)} pts`));
  assert.match(paired, /conditional on these two checkpoints, no verdict on the methods \(one seed each\)/);
  assert.ok(t.diff !== 0, 'a pair that differs');
  // the tables get the width (the side bar closed, whatever the scenarios before left), no hover over them
  if (await page.locator('.part.sidebar').isVisible())
    await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await palette(page, 'Notifications: Clear All Notifications', { pick: 'Clear All Notifications' });
  await page.mouse.move(700, 860);
  await sleep(800);
  await shot(page, 'mitigations-analysis', { readme: 'analysis' });
});

scenario("the dashboard of a real run: plain GRPO's 100 steps from GRPO step 1, the eval before GRPO in words, smoothed", async () => {
  const { page } = vs;
  await palette(page, 'View: Close All Editors', { pick: 'Close All Editors' });
  await palette(page, 'Credit Lens: Open Dashboard');
  // 18 runs: filter the picker to the one wanted (the list shows only the rows in view)
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ timeout: 15_000 });
  await input.fill('mitigations-none-seed1');
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: /^mitigations-none-seed1-/ }).first();
  await row.waitFor({ timeout: 15_000 });
  await row.click();
  const frame = webview(page);
  const reward = frame.locator('section.chart[data-chart="reward"]');
  await reward.waitFor({ timeout: 30_000 });
  if (await page.locator('.part.sidebar').isVisible())
    await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  const [run] = runDirs('mitigations-none-seed1');
  const rows = readFileSync(join(run, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  for (let i = 0; i < 50 && Number(await reward.getAttribute('data-points')) < 100; i++) await sleep(200);
  assert.equal(Number(await reward.getAttribute('data-points')), rows.filter((r) => r.phase === 'grpo').length);
  assert.equal(await reward.getAttribute('data-first-x'), '1');
  const pre = rows.find((r) => r.phase === 'eval' && r.step === 0);
  assert.equal(await frame.locator('section.chart[data-chart="success"] .before-grpo').innerText(), `before GRPO: eval ${pct(pre.eval_success)}%`);
  // A little smoothing, as a person reading 100 noisy steps would set it.
  await frame.locator('input.smoothing').evaluate((el) => {
    el.value = '0.6';
    el.dispatchEvent(new Event('input', { bubbles: true }));
  });
  await frame.locator('output.smoothing-value', { hasText: '0.60' }).waitFor({ timeout: 5_000 });
  await page.mouse.move(700, 860);
  await sleep(800);
  await shot(page, 'mitigations-dashboard', { readme: 'dashboard' });
});
