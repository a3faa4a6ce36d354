// Seeds, intervals and paired tests in VS Code: a 3-seed sweep of two strategies from one shared SFT warm
// start, started from the Sweep CodeLens. The sweep summary groups the seeds, and so does Compare Runs over the six
// runs picked from the palette: eval success with its 95 % interval, the difference with its interval over instances,
// the Holm-adjusted p of the instance-clustered test (greyed and marked n.s. when not significant), the MDE, and the
// exploratory mark on groups of fewer than 3 seeds. Every figure is checked against `credit-lens compare
// --json` run here on the same run folders. Harness and how to run: harness.mjs.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  ROOT,
  finishSuite,
  log,
  openSweepDialog,
  palette,
  prepareSuite,
  readJson,
  runDirs,
  scenario,
  shot,
  showRunsView,
  sleep,
  startVsCode,
} from './harness.mjs';

let vs;

before(async () => {
  prepareSuite();
  vs = await startVsCode('seeds', { trusted: true, settings: { 'creditLens.maxConcurrentRuns': 2 } });
});

after(finishSuite);

const webview = (page) => page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');

/** `credit-lens compare --json` on the sweep's folders: the numbers the views must show. */
function cliCompare(pick = (runs) => runs) {
  const runs = pick(runDirs('seeds'));
  const base = runs.filter((d) => readJson(join(d, 'run.json')).name.startsWith('seeds-none-'));
  const r = spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), 'compare', ...runs, ...base.flatMap((d) => ['--baseline', d]), '--json'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

const pct = (x) => (100 * x).toFixed(1);

/**
 * Credit Lens: Compare Runs from the palette, the sweep's runs ticked where `want(label)` (a click on a row of a
 * multi-select QuickPick ticks it; OK accepts the ticked ones). Returns every label offered.
 */
async function pickCompareRuns(page, want) {
  await palette(page, 'View: Close All Editors', { pick: 'Close All Editors' });
  // the picker by its title: the input alone is also the palette's, and the command may not have run
  const quick = page.locator('.quick-input-widget');
  await palette(page, 'Credit Lens: Compare Runs', {
    pick: 'Credit Lens: Compare Runs',
    until: () => quick.locator('.quick-input-title', { hasText: 'Credit Lens: runs to compare' }).waitFor({ timeout: 60_000 }),
  });
  const input = quick.locator('.quick-input-box input');
  await input.fill('seeds-');
  await sleep(300);
  const items = page.locator('.quick-input-widget .monaco-list-row');
  const labels = await items.evaluateAll((rows) => rows.map((r) => r.textContent));
  let picked = 0;
  for (let i = 0; i < labels.length; i++) {
    if (!want(labels[i])) continue;
    await items.nth(i).click();
    picked++;
  }
  await page.locator('.quick-input-widget .quick-input-count', { hasText: `${picked} Selected` }).waitFor({ timeout: 10_000 });
  await page.locator('.quick-input-widget .monaco-button', { hasText: 'OK' }).click();
  return labels;
}
const pText = (p) => (p < 1e-4 ? p.toExponential(1) : p.toPrecision(2));
/** The p_adj cell: the adjusted p, n.s. when not significant. */
const verdict = (row) =>
  row.p_adjusted === null ? (row.verdict_withheld ? 'no verdict' : '') : row.significant ? pText(row.p_adjusted) : `${pText(row.p_adjusted)} n.s.`;
/** The MDE cell: empty where no instance is discordant (nothing to estimate a variance from). */
const mde = (row) => (row.mde === null ? '' : `± ${(100 * row.mde).toFixed(1)} pp`);

scenario('a 3-seed sweep of two strategies: the summary groups the seeds with intervals and the paired test', async () => {
  const { page } = vs;
  const dialog = await openSweepDialog(page, 'seeds.credit.yaml', { wholeWindow: true });
  assert.match(await dialog.innerText(), /6 runs/);
  await dialog.locator('.monaco-button', { hasText: 'Start 6 Runs' }).click();
  const frame = webview(page);
  const rows = frame.locator('vscode-table-row.run-row');
  await rows.first().waitFor({ timeout: 60_000 });
  assert.equal(await rows.count(), 6);
  await frame.locator('vscode-table-row.run-row[data-status="completed"]').nth(5).waitFor({ timeout: 400_000 });
  // One warm start for all six runs, trained once (two engines at a time: one trained it, the other waited).
  const ws = runDirs('countdown-warm-start');
  assert.equal(ws.length, 1, 'one shared warm start');
  for (const d of runDirs('seeds')) {
    const cfg = spawnSync('grep', ['-A30', '^model:', join(d, 'config.yaml')], { encoding: 'utf8' }).stdout;
    assert.match(cfg, /init_checkpoint: .*countdown-warm-start-/, `${d} starts from the warm start`);
    assert.equal(readJson(join(d, 'run.json')).warm_start, ws[0], `${d}'s run.json names its warm start`);
  }
  const groups = frame.locator('table.comparison tbody tr');
  await groups.nth(1).waitFor({ timeout: 120_000 });
  assert.equal(await groups.count(), 2);
  const expected = cliCompare();
  const shown = await groups.evaluateAll((trs) =>
    trs.map((tr) => ({
      group: tr.dataset.group,
      cls: tr.className,
      cells: [...tr.querySelectorAll('td')].map((td) => td.textContent.replace(/\s+/g, ' ').trim()),
    })),
  );
  log(`by configuration: ${JSON.stringify(shown)}`);
  const [base, oc] = expected.rows;
  assert.deepEqual(
    shown.map((s) => s.group),
    ['seeds-none', 'seeds-outcome_conditional'],
  );
  assert.equal(shown[0].cells[1], '1, 2, 3');
  assert.equal(shown[0].cells[2], `${pct(base.eval_success.mean)} ± ${pct(base.eval_success.half)}`);
  assert.equal(shown[0].cells[3], 'baseline');
  assert.equal(shown[1].cells[2], `${pct(oc.eval_success.mean)} ± ${pct(oc.eval_success.half)}`);
  // The run-level gate's Δ with its interval, or '—' where it has no verdict (these tiny runs all solve 0 %: no run
  // varies, so there is nothing to test against, rather than a zero-width interval that contradicts p = 1).
  const signed = (x) => `${x >= 0 ? '+' : ''}${pct(x)}`;
  assert.equal(shown[1].cells[3], oc.diff ? `${signed(oc.diff.mean)} [${signed(oc.diff.lo)}, ${signed(oc.diff.hi)}]` : '—');
  // The one rule: the Holm-adjusted p decides; not significant → greyed (class ns) and marked n.s.; withheld → no verdict.
  assert.equal(shown[1].cells[4], verdict(oc));
  assert.equal(shown[1].cls, oc.significant ? 'significant' : oc.verdict_withheld ? 'ns withheld' : 'ns');
  assert.equal(shown[1].cells[5], mde(oc), 'the MDE');
  // the instance-clustered difference, conditional on these checkpoints, with its own p
  const c = oc.conditional;
  assert.equal(shown[1].cells[7], `${signed(c.diff.mean)} [${signed(c.diff.lo)}, ${signed(c.diff.hi)}] · p ${pText(c.p)}`, 'these checkpoints');
  assert.equal(shown[0].cells[7], '', 'nothing conditional for the baseline');
  assert.match(shown[0].cells[8], /^\d\.\d+(e-\d+)? ± \d/, 'filler |c| with its interval');
  assert.ok(!shown.some((s) => s.cls.includes('exploratory')), '3 seeds each: no exploratory mark');
  await shot(page, 'seeds-sweep-summary', { readme: 'seeds-sweep' });
  // In the Runs tree the warm start is no experiment of its own: "shared warm start", under the config of the runs
  // that start from it (the row just after seeds.credit.yaml's runs), and in no run picker
  await showRunsView(page);
  const warm = page.locator('.sidebar .pane-body').getByRole('treeitem', { name: /^countdown-warm-start-[0-9a-f]{12},/ });
  await warm.waitFor({ timeout: 30_000 });
  assert.match(await warm.innerText(), /^shared warm start/);
  const labels = await page.locator('.sidebar .pane-body .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? ''));
  const at = labels.findIndex((l) => /^countdown-warm-start-/.test(l));
  assert.ok(at > 0 && /^seeds-/.test(labels[at - 1]), `under the seeds runs: ${JSON.stringify(labels)}`);
  assert.ok(!labels.some((l) => /^countdown-warm-start\b(?!-[0-9a-f])/.test(l)), 'no config row of its own');
});

scenario('Compare Runs over the six runs groups the seeds, tests against plain GRPO and lets the baseline change', async () => {
  const { page } = vs;
  const labels = await pickCompareRuns(page, () => true);
  assert.equal(labels.length, 6, 'the six sweep runs, and not the warm start');
  const frame = webview(page);
  const groups = frame.locator('section.significance table.comparison tbody tr');
  await groups.nth(1).waitFor({ timeout: 120_000 });
  const expected = cliCompare();
  const cells = await groups.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.replace(/\s+/g, ' ').trim())));
  log(`compare runs: ${JSON.stringify(cells)}`);
  assert.equal(cells[0][3], 'baseline');
  assert.equal(cells[1][2], `${pct(expected.rows[1].eval_success.mean)} ± ${pct(expected.rows[1].eval_success.half)}`);
  assert.equal(cells[1][4], verdict(expected.rows[1]), 'the Holm-adjusted p, n.s. when not significant');
  assert.equal(cells[1][5], mde(expected.rows[1]), 'the MDE');
  await shot(page, 'seeds-compare-runs', { readme: 'seeds-compare' });
  // The other configuration as the baseline: the rows swap roles and the difference changes sign.
  await frame.locator('section.significance select[aria-label="baseline"]').selectOption('seeds-outcome_conditional');
  await frame.locator('section.significance tr[data-group="seeds-outcome_conditional"].baseline').waitFor({ timeout: 60_000 });
  const swapped = await frame.locator('section.significance tr[data-group="seeds-none"] td.conditional').textContent();
  const d = expected.rows[1].conditional.diff.mean;
  assert.equal(swapped.trim().split(' ')[0], `${-d >= 0 ? '+' : ''}${(-100 * d).toFixed(1)}`);
});

scenario('Compare Runs over two seeds of each configuration marks both groups exploratory', async () => {
  const { page } = vs;
  // seeds 1 and 2 of each configuration (the run names end in -seed<N>-<timestamp>)
  const labels = await pickCompareRuns(page, (label) => /-seed[12]\b/.test(label));
  assert.equal(labels.filter((l) => /-seed[12]\b/.test(l)).length, 4, JSON.stringify(labels));
  const frame = webview(page);
  const groups = frame.locator('section.significance table.comparison tbody tr');
  await groups.nth(1).waitFor({ timeout: 120_000 });
  const expected = cliCompare((runs) => runs.filter((d) => /-seed[12]-/.test(d)));
  assert.deepEqual(
    expected.rows.map((r) => r.exploratory),
    [true, true],
  );
  const shown = await groups.evaluateAll((trs) =>
    trs.map((tr) => ({ cls: tr.className, title: tr.title, tag: tr.querySelector('.exploratory-tag')?.textContent ?? null })),
  );
  log(`two seeds: ${JSON.stringify(shown)}`);
  for (const s of shown) {
    assert.match(s.cls, /exploratory/);
    assert.equal(s.tag, 'exploratory');
    assert.match(s.title, /Exploratory: fewer than 3 seeds/);
  }
  const cells = await groups.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.replace(/\s+/g, ' ').trim())));
  assert.equal(cells[1][4], verdict(expected.rows[1]));
  assert.equal(cells[1][5], mde(expected.rows[1]));
  assert.match(await frame.locator('.compare-note').innerText(), /exploratory rows are hints, not findings/);
});
